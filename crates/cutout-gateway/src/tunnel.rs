//! WebSocket pass-through: an HTTP/1.1 `Upgrade: websocket` request is forwarded with its upgrade headers, and after the upstream's 101 the bytes are copied both ways.
//!
//! The request goes through the cluster's stack like any other: the breakers judge its
//! answer, and a 101 is a success the moment it arrives (its body is empty), so what happens
//! on the tunnel afterwards is counted by no breaker. An open breaker refuses the upgrade
//! (503), a dead upstream is a 502, as for any request.
//!
//! The tunnel runs in its connection's task, after hyper has handed the connection over: it
//! keeps its `max-connections` slot and its place in the fair-share book, it is closed when no
//! byte moved on the client's side for `idle-timeout`, and on shutdown it is cut when
//! `shutdown-timeout` ends (a tunnel has no graceful end in HTTP). HTTP/2 clients and clusters
//! with `protocol = "h2"` do not upgrade (RFC 8441's extended CONNECT is not supported): their
//! upgrade headers are removed as hop-by-hop headers, as before.

use std::time::Duration;

use http::HeaderMap;
use http::header::{CONNECTION, UPGRADE};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cluster::BoxFuture;
use crate::share::Conn;

/// Where a connection's upgraded tunnel is handed to its task (in the request's extensions:
/// only a connection that can run a tunnel has one).
#[derive(Debug, Clone)]
pub struct Tunnels(mpsc::UnboundedSender<BoxFuture<()>>);

/// The receiving end of a connection's [`Tunnels`].
#[derive(Debug)]
pub struct TunnelRx(mpsc::UnboundedReceiver<BoxFuture<()>>);

/// A connection's [`Tunnels`] and the end its task reads.
pub fn channel() -> (Tunnels, TunnelRx) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Tunnels(tx), TunnelRx(rx))
}

/// Whether `headers` (of an HTTP/1.1 request) ask to upgrade to WebSocket: `Connection`
/// names `upgrade` and `Upgrade` names `websocket`.
pub fn wants_websocket(headers: &HeaderMap) -> bool {
    let names = |name, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    names(CONNECTION, "upgrade") && names(UPGRADE, "websocket")
}

/// The client's side of an upgrade, taken from its request before it is forwarded.
#[derive(Debug)]
pub struct ClientUpgrade {
    on: OnUpgrade,
    tunnels: Tunnels,
}

impl ClientUpgrade {
    /// The client's side of `request`'s upgrade, when it asks for WebSocket over HTTP/1.1
    /// on a connection that can run a tunnel.
    pub fn take<B>(request: &mut http::Request<B>) -> Option<ClientUpgrade> {
        if request.version() != http::Version::HTTP_11 || !wants_websocket(request.headers()) {
            return None;
        }
        let tunnels = request.extensions().get::<Tunnels>()?.clone();
        Some(ClientUpgrade {
            on: hyper::upgrade::on(request),
            tunnels,
        })
    }

    /// Joins the client's side to the upstream's (`upstream`, from its 101) once hyper has
    /// handed both over, in the client connection's task.
    pub fn splice(self, upstream: OnUpgrade) {
        let tunnel = async move {
            let (client, upstream) = tokio::join!(self.on, upstream);
            let (Ok(client), Ok(upstream)) = (client, upstream) else {
                tracing::debug!("an upgrade did not complete on one side; closed");
                return;
            };
            let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
            if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
                tracing::debug!(%error, "a tunnel ended");
            }
        };
        let _ = self.tunnels.0.send(Box::pin(tunnel));
    }
}

impl TunnelRx {
    /// Runs the tunnel handed over on this connection, if any, until it ends, no byte has
    /// moved on the client's side (`conn`) for `idle`, or it is asked to make room at a full
    /// listener ([`crate::share`]) while no byte moved on it for [`crate::share::QUIET`] (a
    /// tunnel moving bytes declines): the listener's fair share holds for tunnels too, so idle
    /// tunnels of one client cannot keep another out.
    pub async fn run(mut self, conn: &Conn, idle: Duration) {
        let Ok(tunnel) = self.0.try_recv() else {
            return;
        };
        let mut tunnel = std::pin::pin!(tunnel);
        let deadline = || {
            conn.last_moved()
                .checked_add(idle)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
        };
        loop {
            tokio::select! {
                () = tunnel.as_mut() => return,
                () = conn.evicted() => {
                    if conn.quiet() {
                        tracing::debug!("an idle tunnel closed to make room");
                        return;
                    }
                    conn.decline();
                }
                () = tokio::time::sleep_until(deadline()) => {
                    if deadline() <= Instant::now() {
                        tracing::debug!("a tunnel moved no byte for idle-timeout; closed");
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn a_websocket_upgrade_is_told_by_both_headers() {
        let mut h = HeaderMap::new();
        assert!(!wants_websocket(&h));
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        assert!(!wants_websocket(&h), "Upgrade alone is not asked for");
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        assert!(wants_websocket(&h));
        h.insert(UPGRADE, HeaderValue::from_static("h2c"));
        assert!(!wants_websocket(&h), "only WebSocket is passed through");
    }
}
