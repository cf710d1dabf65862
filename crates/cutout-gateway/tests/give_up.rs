//! A client that gives up: its forward is cancelled, and once it ran past the cluster's normal
//! latency × the slow multiple (at least `give-up-floor`), it counts against the upstream, so a
//! hung upstream cannot hide behind impatient clients. A client that gives up sooner counts
//! for nothing.

mod common;

use std::time::Duration;

use common::{eventually, get, give_up_after, start};
use cutout::State;
use cutout_gateway::upstream::Mode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impatient_clients_cannot_hide_a_hung_upstream() {
    let h = start("attempt-timeout = \"5s\"").await;
    let url = format!("http://{}/accounts/1", h.proxy);
    // The cluster's normal latency: a millisecond or so.
    for _ in 0..25 {
        assert_eq!(get(&url).await.status, 200);
    }
    h.gateway.registry().reset("account-service").unwrap();
    h.account.set_mode(Mode::Hang);
    let before = h.account.started();
    for n in 1..=5 {
        give_up_after(h.proxy, "/accounts/1", Duration::from_millis(400)).await;
        assert!(
            eventually(Duration::from_secs(3), || h.account.cancelled() == n).await,
            "forward {n} was cancelled when its client left"
        );
    }
    assert_eq!(h.account.started(), before + 5);
    let breaker = h.gateway.registry().get("account-service").unwrap();
    let s = breaker.snapshot();
    assert_eq!(
        (s.calls, s.failures, s.state),
        (5, 5, State::Open),
        "five clients gave up on a hung upstream well past its normal latency"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_gives_up_at_once_counts_for_nothing() {
    let h = start("attempt-timeout = \"5s\"").await;
    let url = format!("http://{}/accounts/1", h.proxy);
    for _ in 0..25 {
        assert_eq!(get(&url).await.status, 200);
    }
    h.gateway.registry().reset("account-service").unwrap();
    h.account.set_mode(Mode::Hang);
    for n in 1..=5 {
        // Below the 100 ms give-up floor.
        give_up_after(h.proxy, "/accounts/1", Duration::from_millis(20)).await;
        assert!(eventually(Duration::from_secs(3), || h.account.cancelled() == n).await);
    }
    let s = h.gateway.registry().snapshot("account-service").unwrap();
    assert_eq!((s.calls, s.failures, s.state), (0, 0, State::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_a_stalled_body_counts_it_too() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // Whole answers for the first 25 connections, then a head and 10 of 100 bytes, then
    // nothing for 20 s.
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    let upstream = common::raw_upstream(100, move |mut conn: tokio::net::TcpStream| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < 25 {
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            } else {
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                    .await;
                tokio::time::sleep(Duration::from_secs(20)).await;
            }
        }
    })
    .await;
    let h = common::start_with("attempt-timeout = \"5s\"", Some(upstream.addr.port())).await;
    let url = format!("http://{}/accounts/1", h.proxy);
    for _ in 0..25 {
        assert_eq!(get(&url).await.status, 200);
    }
    h.gateway.registry().reset("account-service").unwrap();
    for _ in 0..5 {
        let mut stream = tokio::net::TcpStream::connect(h.proxy).await.unwrap();
        stream
            .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "the head came");
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(stream);
    }
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert!(
        eventually(Duration::from_secs(3), || breaker.state() == State::Open).await,
        "{:?}",
        breaker.snapshot()
    );
    let s = breaker.snapshot();
    assert_eq!((s.calls, s.failures), (5, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_s_own_deadline_counts_for_nothing() {
    let h = start("attempt-timeout = \"5s\"\nrequest-timeout = \"400ms\"").await;
    let url = format!("http://{}/accounts/1", h.proxy);
    for _ in 0..25 {
        assert_eq!(get(&url).await.status, 200);
    }
    h.gateway.registry().reset("account-service").unwrap();
    h.account.set_mode(Mode::Hang);
    for _ in 0..5 {
        let reply = get(&url).await;
        assert_eq!(reply.status, 504);
        assert!(reply.body.contains("deadline"), "{}", reply.body);
    }
    let s = h.gateway.registry().snapshot("account-service").unwrap();
    assert_eq!((s.calls, s.failures, s.state), (0, 0, State::Closed));
    assert!(eventually(Duration::from_secs(3), || h.account.cancelled() == 5).await);
}
