//! A TCP proxy on loopback whose target can be switched for *new* connections while the
//! connections it already forwards stay where they are: what a Kubernetes Service, a DNS
//! name or a TCP load balancer does in front of a Redis failover. Each forwarded chunk waits
//! `delay` first, so that anything waiting on a Redis round trip through it takes at least
//! two delays.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// The proxy; every connection it forwards ends when it is dropped.
///
/// # Orderings
/// `Relaxed` throughout: the target and the count are single values that publish no other
/// memory; a connection accepted just as the target changes may go either way, as behind a
/// real Service.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

struct Shared {
    /// The loopback port new connections are forwarded to.
    target: AtomicU16,
    /// Connections accepted so far.
    accepted: AtomicUsize,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:<target>`.
    pub async fn start(target: u16, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared {
            target: AtomicU16::new(target),
            accepted: AtomicUsize::new(0),
        });
        let state = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            // Owned here: aborting the accept task drops the set, which aborts every
            // forwarding task with it.
            let mut connections = JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                // Reap the finished ones, so the set stays as large as what is open.
                while connections.try_join_next().is_some() {}
                let target = state.target.load(Ordering::Relaxed);
                state.accepted.fetch_add(1, Ordering::Relaxed);
                connections.spawn(forward(client, target, delay));
            }
        });
        Proxy {
            addr,
            shared,
            accept,
        }
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// New connections go to `127.0.0.1:<target>` from now on; open ones stay.
    pub fn switch(&self, target: u16) {
        self.shared.target.store(target, Ordering::Relaxed);
    }

    /// How many connections the proxy has accepted.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn forward(client: TcpStream, target: u16, delay: Duration) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
        return; // the client sees its connection closed
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Either direction ending ends both (the other half is dropped with this future).
    tokio::select! {
        () = pump(client_read, server_write, delay) => {}
        () = pump(server_read, client_write, delay) => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        tokio::time::sleep(delay).await;
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
