//! SRE review 32c: a silent HTTP/2 connection is told from its first read only
//! (`server::Watched::poll_read`: `first` is taken on the first non-empty read, and the
//! connection is marked HTTP/2 only if that read holds at least 3 bytes of the preface). A
//! client that sends the preface in two TCP segments ("PR", then the rest and a SETTINGS frame)
//! is served as HTTP/2 by hyper (its version detection reads on) but never marked, so when
//! asked to make room it gets only hyper's graceful shutdown (GOAWAY and a PING), never the
//! 250 ms drop (`H2_EVICT_GRACE`), and, silent, keeps its slot until `idle-timeout` (60 s).
//! 1024 such connections from 127.0.0.1 fill the shipped `max-connections` and keep every other
//! client out, which the sre32b fix (silent h2c connections) was to prevent. Shipped defaults
//! but `h2c = true`.
//!
//! Fixed: the preface is matched across reads, however the client splits it.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

async fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(addr).await.unwrap()
}

/// The HTTP/2 client preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

async fn get_from(source: [u8; 4], addr: SocketAddr) -> String {
    let mut stream = connect_from(source, addr).await;
    let _ = stream
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await;
    let mut buf = vec![0u8; 1024];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("(closed)")
            .to_owned(),
        Ok(Err(e)) => format!("(error {e})"),
        Err(_) => "(no answer in 5 s)".to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_h2c_connections_with_a_split_preface_cannot_keep_another_client_out() {
    let (stop, _) = watch::channel(false);
    let upstream = common::serve_router(
        axum::Router::new().fallback(axum::routing::any(|| async { "ok" })),
        &stop,
    )
    .await;
    let gateway = common::start_gateway(
        &common::shipped("up", &[upstream.port()], "h2c = true"),
        None,
    )
    .await;
    assert_eq!(
        get_from([127, 0, 0, 2], gateway.proxy).await,
        "HTTP/1.1 200 OK"
    );
    // 1024 connections (the shipped max-connections) from 127.0.0.1: "PR" first, the rest of
    // the preface and SETTINGS 300 ms later, then nothing.
    // Control: SRE32C_WHOLE=1 sends it in one segment (then the test passes).
    let cut = if std::env::var_os("SRE32C_WHOLE").is_some() {
        PREFACE.len()
    } else {
        2
    };
    let mut held = Vec::new();
    for _ in 0..1024 {
        let mut stream = connect_from([127, 0, 0, 1], gateway.proxy).await;
        stream.write_all(&PREFACE[..cut]).await.unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for stream in &mut held {
        let _ = stream.write_all(&PREFACE[cut..]).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(get_from([127, 0, 0, 2], gateway.proxy).await);
    }
    drop(held);
    let _ = stop.send(true);
    assert!(
        answers.iter().all(|a| a == "HTTP/1.1 200 OK"),
        "an HTTP/1.1 client from 127.0.0.2 while 127.0.0.1 holds the 1024 slots of the h2c \
         listener with silent HTTP/2 connections whose preface came in two segments: \
         {answers:?}"
    );
}
