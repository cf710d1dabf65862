//! Binding listeners with clear errors, and serving the proxy and admin routers until a shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::error::StartError;
use crate::gateway::Gateway;

/// Binds `addr`, naming the listener (`what`) and the address in the error.
pub async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains open requests.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// Binds both listeners of `gateway` (the configured addresses), then serves them until
/// `shutdown` resolves. `ready` is called with the bound addresses (proxy, admin) once both
/// are listening.
pub async fn run(
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr, SocketAddr),
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let proxy = bind("proxy", gateway.config().listen).await?;
    let admin = bind("admin", gateway.config().admin).await?;
    ready(proxy.local_addr()?, admin.local_addr()?);
    let (tx, rx) = watch::channel(false);
    let wait = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let proxy_task = tokio::spawn(serve(
        proxy,
        crate::proxy::app(Arc::clone(&gateway)),
        wait(rx.clone()),
    ));
    let admin_task = tokio::spawn(serve(admin, crate::admin::app(gateway), wait(rx)));
    shutdown.await;
    tracing::info!("shutting down: draining open requests");
    let _ = tx.send(true);
    proxy_task.await??;
    admin_task.await??;
    Ok(())
}
