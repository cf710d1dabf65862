//! Clients from a chosen loopback source address (the fair share and rate limits tell clients by address), and an upstream that takes every connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

/// A TCP connection to `addr` from the loopback address `source` (`[127, 0, 0, 2]`, …).
pub async fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind a loopback source address");
    socket.connect(addr).await.unwrap()
}

/// A plain HTTP/1.1 GET of `path` from `source` on a fresh connection: the answer's status
/// line (or what happened instead: `(closed unanswered)`, `(error …)`, `(no answer in …)`),
/// and how long it took, waiting at most `limit`.
pub async fn get_from(
    source: [u8; 4],
    addr: SocketAddr,
    path: &str,
    limit: Duration,
) -> (String, Duration) {
    let started = Instant::now();
    let mut stream = connect_from(source, addr).await;
    let _ = stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await;
    let mut buf = vec![0u8; 1024];
    let line = match tokio::time::timeout(limit, stream.read(&mut buf)).await {
        Ok(Ok(0)) => "(closed unanswered)".to_owned(),
        Ok(Ok(n)) if !buf.starts_with(b"HTTP/1.1 200") => {
            String::from_utf8_lossy(&buf[..n]).replace("\r\n", " | ")
        }
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_owned(),
        Ok(Err(e)) => format!("(error {e})"),
        Err(_) => format!("(no answer in {limit:?})"),
    };
    (line, started.elapsed())
}

/// `router` served on loopback with room for 8,192 connections (the usual test listeners stop
/// at 1,024), until `stop` says `true`.
pub async fn wide_upstream(router: axum::Router, stop: &watch::Sender<bool>) -> SocketAddr {
    let listener = cutout_gateway::server::bind("upstream", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = stop.subscribe();
    tokio::spawn(cutout_gateway::server::serve_with(
        "upstream",
        listener,
        router,
        cutout_gateway::server::ListenerLimits {
            max_connections: 8192,
            half_close: false,
            ..cutout_gateway::server::ListenerLimits::default()
        },
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    addr
}
