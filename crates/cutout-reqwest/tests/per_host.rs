//! Per-host breakers (cutout-tower's `KeyedBreakers`) against two real servers on two
//! loopback ports: one host failing opens only its own breaker.

mod common;

use std::time::Duration;

use common::{Server, client};
use cutout::clock::ManualClock;
use cutout::{Jitter, RejectReason, Settings, State};
use cutout_reqwest::{BreakerMiddleware, HostKey, KeyedBreakers, host_key, rejected};
use reqwest::{StatusCode, Url};

fn settings(failures: u32) -> Settings {
    Settings::builder()
        .consecutive_failures(Some(failures))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

fn key(server: &Server) -> HostKey {
    host_key(&Url::parse(&server.url("/")).unwrap())
}

#[tokio::test]
async fn one_failing_host_opens_only_its_breaker() {
    let failing = Server::start().await;
    let healthy = Server::start().await;
    let hosts = KeyedBreakers::builder(settings(5)).build();
    let client = client(BreakerMiddleware::per_host(hosts.clone()));

    for _ in 0..5 {
        let response = client.get(failing.url("/fail")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        // The other host is called in between and keeps working.
        let response = client.get(healthy.url("/ok")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(hosts.get(&key(&failing)).unwrap().state(), State::Open);
    assert_eq!(hosts.get(&key(&healthy)).unwrap().state(), State::Closed);

    // The failing host is refused without being called; the healthy one is still called.
    let error = client.get(failing.url("/ok")).send().await.unwrap_err();
    let refusal = rejected(&error).expect("refused");
    assert_eq!(refusal.reason(), RejectReason::Open);
    assert_eq!(refusal.breaker().as_str(), failing.origin());
    assert_eq!(failing.hits("/ok"), 0);
    assert_eq!(failing.total_hits(), 5);
    for _ in 0..10 {
        let response = client.get(healthy.url("/ok")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(healthy.hits("/ok"), 15);

    // The map: two keys, named scheme://host:port, one of them open.
    let ids: Vec<String> = hosts.keys().iter().map(ToString::to_string).collect();
    let mut expected = vec![failing.origin(), healthy.origin()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(hosts.stats().open_keys, 1);
    assert_eq!(hosts.snapshot(&key(&healthy)).unwrap().in_flight, 0);
}

#[tokio::test]
async fn healthy_traffic_to_several_hosts_never_opens_a_breaker() {
    let a = Server::start().await;
    let b = Server::start().await;
    let hosts = KeyedBreakers::builder(Settings::default()).build();
    let client = client(BreakerMiddleware::per_host(hosts.clone()));
    for _ in 0..50 {
        for server in [&a, &b] {
            let response = client.get(server.url("/ok")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
        }
    }
    assert_eq!(a.hits("/ok"), 50);
    assert_eq!(b.hits("/ok"), 50);
    assert_eq!(hosts.stats().open_keys, 0);
    for (_, snapshot) in hosts.snapshots() {
        assert_eq!(snapshot.breaker.state, State::Closed);
        assert_eq!(snapshot.breaker.failures, 0);
        assert_eq!(snapshot.breaker.calls, 50);
    }
}

#[tokio::test]
async fn a_503_retry_after_opens_that_host_for_its_seconds_on_the_map_s_clock() {
    let throttling = Server::start().await;
    let other = Server::start().await;
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::builder(settings(5))
        .clock(clock.clone())
        .build();
    let client = client(BreakerMiddleware::per_host(hosts.clone()).honor_retry_after(true));

    let response = client
        .get(throttling.url("/unavailable"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let error = client.get(throttling.url("/ok")).send().await.unwrap_err();
    let refusal = rejected(&error).expect("open for the Retry-After");
    assert_eq!(refusal.reason(), RejectReason::Open);
    assert_eq!(refusal.retry_after(), Some(Duration::from_secs(7)));
    assert_eq!(throttling.hits("/ok"), 0);

    // Only that host: the other one is called.
    let response = client.get(other.url("/ok")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    clock.advance(Duration::from_secs(7));
    let response = client.get(throttling.url("/ok")).send().await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the break is over: a probe is sent"
    );
    assert_eq!(throttling.hits("/ok"), 1);
}

#[tokio::test]
async fn an_isolated_host_is_refused_and_others_are_not() {
    let isolated = Server::start().await;
    let other = Server::start().await;
    let hosts = KeyedBreakers::builder(settings(5)).build();
    let client = client(BreakerMiddleware::per_host(hosts.clone()));
    assert!(hosts.isolate(&key(&isolated)));

    let error = client.get(isolated.url("/ok")).send().await.unwrap_err();
    assert_eq!(rejected(&error).unwrap().reason(), RejectReason::Isolated);
    assert_eq!(isolated.total_hits(), 0);
    assert!(client.get(other.url("/ok")).send().await.is_ok());
    assert_eq!(other.hits("/ok"), 1);
}

#[tokio::test]
async fn a_passing_health_check_ends_an_open_host_s_break_and_a_failing_one_does_not() {
    let down = Server::start().await;
    let flaky = Server::start().await;
    let hosts = KeyedBreakers::builder(settings(5)).build();
    let client = client(BreakerMiddleware::per_host(hosts.clone()));
    for server in [&down, &flaky] {
        for _ in 0..5 {
            let response = client.get(server.url("/fail")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        }
        assert_eq!(hosts.get(&key(server)).unwrap().state(), State::Open);
    }
    // `/ok` answers 200 and `/fail` 500 on either server: one check passes for both, the
    // other for neither.
    let plain = reqwest::Client::new();
    let round = hosts
        .check_open_keys(
            Duration::from_secs(1),
            cutout_reqwest::health_check(plain.clone(), "/fail"),
        )
        .await;
    assert_eq!((round.checked, round.passed, round.ended), (2, 0, 0));
    assert_eq!(hosts.get(&key(&down)).unwrap().state(), State::Open);
    assert_eq!(
        down.hits("/fail"),
        6,
        "checked directly, not through the breaker"
    );
    let round = hosts
        .check_open_keys(
            Duration::from_secs(1),
            cutout_reqwest::health_check(plain, "ok"),
        )
        .await;
    assert_eq!((round.checked, round.passed, round.ended), (2, 2, 2));
    for server in [&down, &flaky] {
        let breaker = hosts.get(&key(server)).unwrap();
        assert_eq!(breaker.state(), State::HalfOpen);
        assert_eq!(breaker.snapshot().calls, 0, "a check counts in no window");
    }
    // The next call through the middleware is the probe, and it decides.
    let response = client.get(down.url("/ok")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(down.hits("/ok"), 2);
}
