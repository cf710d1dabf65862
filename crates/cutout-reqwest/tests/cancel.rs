//! A request future dropped before it finishes records nothing: its permit is dropped, a
//! half-open probe slot is given back, and a per-host key is no longer busy.

mod common;

use std::time::Duration;

use common::{Server, client_with_timeout};
use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, RejectReason, Settings, State};
use cutout_reqwest::{BreakerMiddleware, HostKey, KeyedBreakers, host_key, rejected};
use reqwest::{StatusCode, Url};

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(1))
        .jitter(Jitter::None)
        .half_open_probes(1)
        .probe_successes(1)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_timeout_around_send_cancels_the_request_and_records_nothing() {
    let server = Server::start().await;
    let breaker = Breaker::new("api", settings());
    // No client timeout: the only timeout is the caller's, around `send()`.
    let client = client_with_timeout(BreakerMiddleware::new(breaker.clone()), None);
    for n in 1..=3 {
        let send = client.get(server.url("/hang")).send();
        let cancelled = tokio::time::timeout(Duration::from_millis(100), send).await;
        assert!(cancelled.is_err(), "the caller gave up first");
        server.wait_for_hits("/hang", n).await;
    }
    let snapshot = breaker.snapshot();
    assert_eq!(
        snapshot.state,
        State::Closed,
        "one failure would have opened it"
    );
    assert_eq!(snapshot.calls, 0);
    assert_eq!(snapshot.failures, 0);
}

#[tokio::test]
async fn a_dropped_half_open_probe_gives_its_slot_back_and_records_nothing() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let breaker = Breaker::builder("api")
        .settings(settings())
        .clock(clock.clone())
        .build();
    let client = client_with_timeout(BreakerMiddleware::new(breaker.clone()), None);

    client.get(server.url("/fail")).send().await.unwrap();
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);

    // The probe hangs on the server, holding the only probe slot.
    let probe = tokio::spawn({
        let client = client.clone();
        let url = server.url("/hang");
        async move { client.get(url).send().await }
    });
    server.wait_for_hits("/hang", 1).await;
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    assert_eq!(
        rejected(&error).unwrap().reason(),
        RejectReason::HalfOpenFull
    );
    assert_eq!(server.hits("/ok"), 0);

    // Cancelled: nothing recorded (a failure would re-open it), the slot is free again.
    probe.abort();
    assert!(probe.await.unwrap_err().is_cancelled());
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.probes_in_flight, 0);
    assert_eq!(snapshot.state, State::HalfOpen);
    assert_eq!(snapshot.failures, 0);

    let response = client.get(server.url("/ok")).send().await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the next request is the probe"
    );
    // Its verdict comes at the body's end.
    response.text().await.unwrap();
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_dropped_per_host_request_frees_its_key_and_records_nothing() {
    let server = Server::start().await;
    let hosts = KeyedBreakers::builder(settings()).build();
    let client = client_with_timeout(BreakerMiddleware::per_host(hosts.clone()), None);
    let key: HostKey = host_key(&Url::parse(&server.url("/")).unwrap());

    let request = tokio::spawn({
        let client = client.clone();
        let url = server.url("/hang");
        async move { client.get(url).send().await }
    });
    server.wait_for_hits("/hang", 1).await;
    assert_eq!(hosts.snapshot(&key).unwrap().in_flight, 1);

    request.abort();
    assert!(request.await.unwrap_err().is_cancelled());
    let snapshot = hosts.snapshot(&key).unwrap();
    assert_eq!(snapshot.in_flight, 0);
    assert_eq!(snapshot.breaker.state, State::Closed);
    assert_eq!(snapshot.breaker.calls, 0);

    // For contrast: the client's own timeout finishes the request with an error, which counts.
    let client = common::client(BreakerMiddleware::per_host(hosts.clone()));
    let error = client.get(server.url("/hang")).send().await.unwrap_err();
    assert!(error.is_timeout());
    assert_eq!(hosts.get(&key).unwrap().state(), State::Open);
}
