//! Seed 002's four scenarios on real loopback sockets: trip, recovery (and a failed probe), isolation, timeout.

mod common;

use std::time::{Duration, Instant};

use common::{eventually, get, start};
use cutout::State;
use cutout_gateway::upstream::Mode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trip_short_circuits_without_touching_the_upstream() {
    let h = start("").await;
    let url = format!("http://{}/accounts/42", h.proxy);
    assert_eq!(get(&url).await.status, 200);
    h.account.set_mode(Mode::Fail);
    // Start from an empty window, so that exactly five failures trip it.
    h.gateway.registry().reset("account-service").unwrap();
    for n in 1..=5 {
        let reply = get(&url).await;
        assert_eq!(reply.status, 500, "call {n} reaches the failing upstream");
    }
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert_eq!(breaker.state(), State::Open);
    let before = h.account.started();
    assert_eq!(before, 6);
    for _ in 0..3 {
        let started = Instant::now();
        let reply = get(&url).await;
        assert_eq!(reply.status, 503);
        assert_eq!(reply.headers["retry-after"], "30");
        assert!(reply.body.contains("account-service"), "{}", reply.body);
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    assert_eq!(
        h.account.started(),
        before,
        "an open breaker never forwards"
    );
}

async fn trip(h: &common::Harness) {
    let url = format!("http://{}/accounts/1", h.proxy);
    h.account.set_mode(Mode::Fail);
    for _ in 0..5 {
        assert_eq!(get(&url).await.status, 500);
    }
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Open
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_after_the_break_closes_on_one_probe() {
    let h = start("").await;
    trip(&h).await;
    let url = format!("http://{}/accounts/1", h.proxy);
    h.account.set_mode(Mode::Ok);
    // Healed, but the break is not over: still refused.
    h.clock.advance(Duration::from_secs(29));
    assert_eq!(get(&url).await.status, 503);
    h.clock.advance(Duration::from_secs(1));
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert_eq!(breaker.state(), State::HalfOpen);
    let before = h.account.started();
    assert_eq!(get(&url).await.status, 200, "the probe is forwarded");
    assert_eq!(h.account.started(), before + 1);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(get(&url).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_probe_reopens_for_another_break() {
    let h = start("").await;
    trip(&h).await;
    let url = format!("http://{}/accounts/1", h.proxy);
    h.clock.advance(Duration::from_secs(30));
    let before = h.account.started();
    assert_eq!(
        get(&url).await.status,
        500,
        "the probe reaches the upstream"
    );
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert_eq!(breaker.state(), State::Open);
    let reply = get(&url).await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.headers["retry-after"], "30");
    assert_eq!(
        h.account.started(),
        before + 1,
        "only the probe was forwarded"
    );
    // Another full break, then a healed upstream closes it.
    h.account.set_mode(Mode::Ok);
    h.clock.advance(Duration::from_secs(30));
    assert_eq!(get(&url).await.status, 200);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakers_are_per_cluster() {
    let h = start("").await;
    trip(&h).await;
    assert_eq!(
        get(&format!("http://{}/accounts/1", h.proxy)).await.status,
        503
    );
    let reply = get(&format!("http://{}/transfers/7?x=1", h.proxy)).await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.contains("transfer-service"), "{}", reply.body);
    // strip-prefix = true for transfers: the upstream saw /7.
    assert!(reply.body.contains("\"path\":\"/7\""), "{}", reply.body);
    assert_eq!(
        h.gateway.registry().state("transfer-service").unwrap(),
        State::Closed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_answers_504_and_cancels_the_forward() {
    let h = start("").await;
    h.transfer.set_mode(Mode::Hang);
    let started = Instant::now();
    let reply = get(&format!("http://{}/transfers/slow", h.proxy)).await;
    let took = started.elapsed();
    assert_eq!(reply.status, 504);
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "504 after the 300 ms attempt timeout, took {took:?}"
    );
    assert_eq!(h.transfer.started(), 1);
    assert!(
        eventually(Duration::from_secs(3), || h.transfer.cancelled() == 1).await,
        "the upstream saw the request cancelled"
    );
    assert_eq!(
        h.transfer.finished(),
        0,
        "the forward did not run to completion"
    );
    // The timeout was a failure the breaker counted.
    let snapshot = h.gateway.registry().snapshot("transfer-service").unwrap();
    assert_eq!((snapshot.calls, snapshot.failures), (1, 1));
}
