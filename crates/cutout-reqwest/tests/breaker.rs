//! One breaker for a whole client, against a real server on loopback: what opens it, what
//! does not, and that a refused request is never sent.

mod common;

use std::time::{Duration, Instant};

use common::{Server, client, closed_port};
use cutout::{Breaker, Jitter, RejectReason, Settings, State};
use cutout_reqwest::{BreakerMiddleware, rejected};
use reqwest::{Method, StatusCode, Url};

/// A breaker that opens after `failures` consecutive failures, without jitter.
fn breaker(failures: u32) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(failures))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    Breaker::new("api", settings)
}

#[tokio::test]
async fn healthy_traffic_never_opens_the_default_breaker() {
    let server = Server::start().await;
    let breaker = Breaker::new("api", Settings::default());
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..100 {
        let response = client.get(server.url("/ok")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(breaker.state(), State::Closed);
    }
    assert_eq!(server.hits("/ok"), 100);
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(snapshot.calls, 100);
    assert_eq!(snapshot.failures, 0);
}

#[tokio::test]
async fn five_consecutive_500s_open_it_and_the_next_request_is_not_sent() {
    let server = Server::start().await;
    let breaker = breaker(5);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for n in 1..=5 {
        assert_eq!(breaker.state(), State::Closed, "before failure {n}");
        // A 500 is still a response to the caller; the breaker counts it.
        let response = client.get(server.url("/fail")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(server.hits("/fail"), 5);

    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    let refusal = rejected(&error).expect("refused");
    assert_eq!(refusal.reason(), RejectReason::Open);
    assert_eq!(refusal.breaker().as_str(), "api");
    // What is left of the 15 s first break (no jitter), on the system clock.
    let left = refusal.retry_after().unwrap();
    assert!(
        left <= Duration::from_secs(15) && left > Duration::from_secs(10),
        "{left:?}"
    );
    assert!(error.is_middleware());
    assert_eq!(
        server.total_hits(),
        5,
        "the refused request never reached the server"
    );
}

#[tokio::test]
async fn hung_requests_time_out_and_count_as_failures() {
    let server = Server::start().await;
    let breaker = breaker(3);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..3 {
        let started = Instant::now();
        let error = client.get(server.url("/hang")).send().await.unwrap_err();
        assert!(error.is_timeout(), "{error:?}");
        assert!(rejected(&error).is_none());
        assert!(started.elapsed() >= common::CLIENT_TIMEOUT);
    }
    assert_eq!(breaker.snapshot().failures, 3);
    assert_eq!(breaker.state(), State::Open);

    let error = client.get(server.url("/hang")).send().await.unwrap_err();
    assert_eq!(rejected(&error).unwrap().reason(), RejectReason::Open);
    assert!(
        server.hits("/hang") <= 3,
        "the refused request never reached the server"
    );
}

#[tokio::test]
async fn connection_errors_count_as_failures() {
    let port = closed_port();
    let breaker = breaker(2);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    let url = format!("http://127.0.0.1:{port}/ok");
    for _ in 0..2 {
        let error = client.get(&url).send().await.unwrap_err();
        assert!(error.is_connect(), "{error:?}");
    }
    assert_eq!(breaker.state(), State::Open);
    let error = client.get(&url).send().await.unwrap_err();
    assert!(!error.is_connect());
    assert_eq!(rejected(&error).unwrap().reason(), RejectReason::Open);
}

#[tokio::test]
async fn a_404_is_ignored_and_does_not_reset_the_failure_count() {
    let server = Server::start().await;
    let breaker = breaker(1);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..20 {
        let response = client.get(server.url("/missing")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
    assert_eq!(
        breaker.state(),
        State::Closed,
        "a 404 is the caller's fault"
    );
    assert_eq!(breaker.snapshot().failures, 0);
    assert_eq!(server.hits("/missing"), 20);

    // Ignored outcomes touch nothing: 4 failures, a 404, a failure open a 5-failure breaker.
    let breaker = self::breaker(5);
    let client = common::client(BreakerMiddleware::new(breaker.clone()));
    for path in ["/fail", "/fail", "/fail", "/fail", "/missing"] {
        client.get(server.url(path)).send().await.unwrap();
    }
    assert_eq!(breaker.state(), State::Closed);
    client.get(server.url("/fail")).send().await.unwrap();
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test]
async fn throttling_without_honor_retry_after_is_ignored_and_a_bare_503_fails() {
    let server = Server::start().await;
    let breaker = breaker(1);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for path in ["/busy", "/unavailable"] {
        for _ in 0..5 {
            client.get(server.url(path)).send().await.unwrap();
        }
    }
    assert_eq!(breaker.state(), State::Closed, "429 and 503 + Retry-After");
    assert_eq!(breaker.snapshot().failures, 0);

    let response = client.get(server.url("/down")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        breaker.state(),
        State::Open,
        "a 503 without Retry-After fails"
    );
}

#[tokio::test]
async fn requests_reqwest_will_not_send_are_ignored() {
    let breaker = breaker(1);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..3 {
        // Built by hand, so it reaches the middleware; reqwest refuses the scheme when sending.
        let request =
            reqwest::Request::new(Method::GET, Url::parse("ftp://127.0.0.1:21/x").unwrap());
        let error = client.execute(request).await.unwrap_err();
        assert!(error.is_builder(), "{error:?}");
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().failures, 0);
}

#[tokio::test]
async fn a_refusal_waits_the_refusal_pause_and_is_not_sent() {
    let server = Server::start().await;
    let breaker = breaker(5);
    breaker.open_for(Duration::from_secs(30));
    let pause = Duration::from_millis(100);
    let client = client(BreakerMiddleware::new(breaker.clone()).refusal_pause(pause));
    let started = Instant::now();
    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    assert!(started.elapsed() >= pause, "{:?}", started.elapsed());
    assert_eq!(rejected(&error).unwrap().reason(), RejectReason::Open);
    assert_eq!(server.total_hits(), 0);
}

#[tokio::test]
async fn an_isolated_breaker_refuses_and_a_reset_one_sends_again() {
    let server = Server::start().await;
    let breaker = breaker(5);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    breaker.isolate();
    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    let refusal = rejected(&error).unwrap();
    assert_eq!(refusal.reason(), RejectReason::Isolated);
    assert_eq!(refusal.retry_after(), None);
    assert!(
        error
            .to_string()
            .starts_with("request not sent: breaker 'api' is refusing calls (isolated)"),
        "{error}"
    );
    assert_eq!(server.total_hits(), 0);

    breaker.reset();
    let response = client.get(server.url("/ok")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.hits("/ok"), 1);
}
