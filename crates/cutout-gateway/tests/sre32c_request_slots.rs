//! SRE review 32c: the listener's request budget (`crate::budget`) is one FIFO semaphore of
//! `max-connections` slots shared by every client and both protocols, with no fair share, and
//! a slot is held until the response body is sent. budget.rs says "an HTTP/1.1 request always
//! finds one (its connection holds a connection slot)"; the README says of `max-connections`
//! "one client can fill the listener but not keep others out". Neither holds for the request
//! slots: one client with 11 HTTP/2 connections (1% of the shipped 1024 connection slots) ×
//! 100 GET streams of a 1 MiB answer that it never reads (HTTP/2 flow control: it sends no
//! WINDOW_UPDATE) and keep-alive PINGs every second (so `idle-timeout`, "no byte moves either
//! way", never ends its connections) holds all 1024 request slots for as long as it likes, and
//! a plain HTTP/1.1 GET from another client, to a healthy upstream that answers at once, gets
//! no answer. Shipped defaults but `h2c = true`.
//!
//! Fixed (`crate::budget`): a connection's slot stands for its first request in flight, and
//! extra HTTP/2 streams never take the last eighth of the slots, kept for new connections.

mod common;

use std::time::Duration;

use axum::Router;
use axum::routing::any;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_client_s_unread_h2_answers_cannot_take_every_request_slot() {
    let _ = common::log();
    let (stop, _) = watch::channel(false);
    // A healthy upstream: /big answers 1 MiB, anything else "ok", at once.
    let router = Router::new()
        .route("/big", any(|| async { vec![b'x'; 1 << 20] }))
        .fallback(any(|| async { "ok" }));
    let upstream = common::wide_upstream(router, &stop).await;
    let gateway = common::start_gateway(
        &common::shipped("up", &[upstream.port()], "h2c = true")
            .replace("access-log = false", "access-log = true"),
        None,
    )
    .await;
    let (line, took) = common::get_from(
        [127, 0, 0, 2],
        gateway.proxy,
        "/small",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(line, "HTTP/1.1 200 OK", "the victim's GET alone ({took:?})");

    // The hostile client (127.0.0.1): 11 HTTP/2 connections, 100 streams each (the gateway's
    // SETTINGS_MAX_CONCURRENT_STREAMS), each a GET of /big whose answer it never reads.
    let hostile = common::UnreadStreams::open(gateway.proxy, "/big", 11, 100).await;
    // All it can get: every slot but the reserve kept for new connections (before the fix,
    // all 1024).
    let most = 1024 - cutout_gateway::budget::reserve(1024);
    let heads = hostile.heads(most).await;
    assert!(
        heads >= most,
        "the hostile streams got their heads: {heads}"
    );
    // Longer than any attempt timeout (2 s), well within idle-timeout.
    // (SRE32C_HOLD_SECS and SRE32C_WAIT_SECS lengthen the hold and the victim's wait for
    // measuring by hand.)
    let secs = |name: &str, default: u64| {
        Duration::from_secs(
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default),
        )
    };
    tokio::time::sleep(secs("SRE32C_HOLD_SECS", 3)).await;

    // Another client's plain HTTP/1.1 GET, to an upstream that answers it at once.
    let (line, took) = common::get_from(
        [127, 0, 0, 2],
        gateway.proxy,
        "/small",
        secs("SRE32C_WAIT_SECS", 5),
    )
    .await;
    drop(hostile);
    let _ = stop.send(true);
    assert_eq!(
        line,
        "HTTP/1.1 200 OK",
        "an HTTP/1.1 GET from 127.0.0.2 while 127.0.0.1 holds {heads} request slots with 11 \
         HTTP/2 connections whose answers it does not read (1024 shipped max-connections): \
         {line} after {took:?}; one client took every request slot; the log: {:?}",
        common::lines_with(&["path=/big"])
            .iter()
            .filter(|l| !l.contains("outcome=ok"))
            .chain(common::lines_with(&["refused"]).iter())
            .take(6)
            .collect::<Vec<_>>()
    );
}
