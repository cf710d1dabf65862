//! A gateway served by `server::run` (the binary's path) on the system clock or a [`Warp`], the
//! configuration text of one cluster with no `[breakers]` section (the shipped defaults), and a
//! plain GET client that reads statuses.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cutout_gateway::{Gateway, GatewayConfig, server};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{oneshot, watch};

use super::Warp;

/// A gateway served by `server::run`, stopped on drop.
pub struct Running {
    pub gateway: Arc<Gateway>,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Serves `gateway` by `server::run` until the returned sender says `true`; its proxy and admin
/// addresses once both listen.
pub async fn serve_gateway(
    gateway: &Arc<Gateway>,
) -> (SocketAddr, SocketAddr, watch::Sender<bool>) {
    let (stop, mut rx) = watch::channel(false);
    let (tx, bound) = oneshot::channel();
    tokio::spawn(server::run(
        Arc::clone(gateway),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
        move |proxy, admin| {
            let _ = tx.send((proxy, admin));
        },
    ));
    let (proxy, admin) = bound.await.expect("the gateway binds its listeners");
    (proxy, admin, stop)
}

/// Serves `text` with its breakers on `clock`: `Some` for a [`Warp`], `None` for the system
/// clock (what the binary uses).
pub async fn start_gateway(text: &str, clock: Option<Warp>) -> Running {
    let config = GatewayConfig::from_toml(text).unwrap();
    let gateway = match clock {
        Some(clock) => Gateway::with_clock(config, clock),
        None => Gateway::new(config),
    };
    let (proxy, admin, stop) = serve_gateway(&gateway).await;
    Running {
        gateway,
        proxy,
        admin,
        stop,
    }
}

/// A configuration without `[breakers]`: one cluster `cluster` of `ports` on 127.0.0.1, under
/// `/`, with `gateway_extra` in its `[gateway]` section and no access log.
pub fn shipped(cluster: &str, ports: &[u16], gateway_extra: &str) -> String {
    let upstreams: Vec<String> = ports
        .iter()
        .map(|p| format!("\"http://127.0.0.1:{p}\""))
        .collect();
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\naccess-log = false\n\
         {gateway_extra}\n\
         [[routes]]\nprefix = \"/\"\ncluster = \"{cluster}\"\n\
         [clusters.{cluster}]\nupstreams = [{}]\n",
        upstreams.join(", ")
    )
}

/// A keep-alive client for bodiless GETs.
pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A new [`HttpClient`] (its own connection pool).
pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// GETs `url` (at most 10 s); the status, or 0 when no whole answer came.
pub async fn status(client: &HttpClient, url: &str) -> u16 {
    let request = http::Request::get(url).body(Empty::new()).unwrap();
    match tokio::time::timeout(Duration::from_secs(10), client.request(request)).await {
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            match response.into_body().collect().await {
                Ok(_) => status,
                Err(_) => 0,
            }
        }
        _ => 0,
    }
}

/// Every breaker's transitions to open so far, as `id (reason)`.
pub fn opens(gateway: &Gateway) -> Vec<String> {
    gateway
        .transitions()
        .iter()
        .filter(|t| t.to == "open")
        .map(|t| format!("{} ({})", t.breaker, t.reason.unwrap_or("-")))
        .collect()
}

/// Lets each break of the open `breaker` run out at once on `clock` (its dead host's probe then
/// fails and opens it again, for longer), until it has opened six times in a row: its break
/// has stopped growing under either cap. Panics if a probe does not come within 5 s.
pub async fn skip_breaks_until_grown(clock: &Warp, breaker: &cutout::Breaker) {
    for _ in 0..20 {
        let opened = breaker.snapshot().consecutive_opens;
        if opened >= 6 {
            break;
        }
        clock.skip(breaker.break_remaining().unwrap_or_default() + Duration::from_millis(1));
        assert!(
            super::eventually(Duration::from_secs(5), || breaker
                .snapshot()
                .consecutive_opens
                > opened)
            .await,
            "a probe of the dead host failed"
        );
    }
}
