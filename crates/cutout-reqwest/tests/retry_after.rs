//! `honor_retry_after`: a 429 (or 503) with `Retry-After: 7` opens the breaker for 7 s, on
//! cutout's manual clock so that no test sleeps.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Server, client};
use cutout::clock::ManualClock;
use cutout::{Breaker, OpenReason, RejectReason, Settings, State, Transition};
use cutout_reqwest::{BreakerMiddleware, rejected};
use reqwest::StatusCode;

fn breaker(clock: &ManualClock) -> Breaker {
    Breaker::builder("api")
        .settings(Settings::default())
        .clock(clock.clone())
        .build()
}

#[tokio::test]
async fn a_429_with_retry_after_7_opens_the_breaker_for_7_seconds() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    let client = client(BreakerMiddleware::new(breaker.clone()).honor_retry_after(true));

    // The throttled response still reaches the caller.
    let response = client.get(server.url("/busy")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(breaker.state(), State::Open);
    assert!(
        matches!(
            events.lock().unwrap().as_slice(),
            [Transition::Opened {
                reason: OpenReason::RetryAfter,
                ..
            }]
        ),
        "{:?}",
        events.lock().unwrap()
    );

    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    let refusal = rejected(&error).expect("refused");
    assert_eq!(refusal.reason(), RejectReason::Open);
    assert_eq!(
        refusal.retry_after(),
        Some(Duration::from_secs(7)),
        "no jitter"
    );

    clock.advance(Duration::from_secs(6));
    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    assert_eq!(
        rejected(&error).unwrap().retry_after(),
        Some(Duration::from_secs(1))
    );
    assert_eq!(server.hits("/ok"), 0, "refused requests were not sent");

    clock.advance(Duration::from_secs(1));
    let response = client.get(server.url("/ok")).send().await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "after 7 s a probe is sent"
    );
    assert_eq!(server.hits("/ok"), 1);
    assert_eq!(server.hits("/busy"), 1);
}

#[tokio::test]
async fn a_503_with_retry_after_opens_it_too() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let client = client(BreakerMiddleware::new(breaker.clone()).honor_retry_after(true));
    let response = client.get(server.url("/unavailable")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let error = client.get(server.url("/ok")).send().await.unwrap_err();
    assert_eq!(
        rejected(&error).unwrap().retry_after(),
        Some(Duration::from_secs(7))
    );
}

#[tokio::test]
async fn without_honor_retry_after_a_429_opens_nothing() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..10 {
        let response = client.get(server.url("/busy")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(breaker.state(), State::Closed);
    assert!(client.get(server.url("/ok")).send().await.is_ok());
    assert_eq!(server.hits("/ok"), 1);
}
