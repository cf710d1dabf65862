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

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

/// The HTTP/2 client preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

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
        common::get_from([127, 0, 0, 2], gateway.proxy, "/", Duration::from_secs(5))
            .await
            .0,
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
        let mut stream = common::connect_from([127, 0, 0, 1], gateway.proxy).await;
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
        answers.push(
            common::get_from([127, 0, 0, 2], gateway.proxy, "/", Duration::from_secs(5))
                .await
                .0,
        );
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
