//! Whole-response outcomes (issue 29): the body's end decides a call whose headers were good,
//! so a body cut midway or reqwest's total timeout during the body counts against the host.

mod common;

use std::time::Duration;

use common::{Server, client};
use cutout::{Breaker, Jitter, Settings, State};
use cutout_reqwest::BreakerMiddleware;
use reqwest::StatusCode;

fn breaker() -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    Breaker::new("api", settings)
}

#[tokio::test]
async fn a_body_cut_midway_counts_against_the_host() {
    let server = Server::start().await;
    let breaker = breaker();
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for n in 0..3 {
        let response = client.get(server.url("/cut")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            breaker.snapshot().calls,
            n,
            "nothing decided on the headers"
        );
        assert!(response.bytes().await.is_err(), "the body breaks");
    }
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.failures, 3);
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test]
async fn the_clients_total_timeout_during_the_body_counts_against_the_host() {
    let server = Server::start().await;
    let breaker = breaker();
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..3 {
        let response = client.get(server.url("/slow-body")).send().await.unwrap();
        let error = response.bytes().await.unwrap_err();
        assert!(error.is_timeout(), "{error}");
    }
    assert_eq!(breaker.snapshot().failures, 3);
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test]
async fn a_whole_body_is_a_success_and_an_unread_one_the_headers_verdict() {
    let server = Server::start().await;
    let breaker = breaker();
    let client = client(BreakerMiddleware::new(breaker.clone()));
    let body = client
        .get(server.url("/ok"))
        .send()
        .await
        .unwrap()
        .text()
        .await;
    assert_eq!(body.unwrap(), "200 OK");
    assert_eq!(breaker.snapshot().calls, 1);
    // Dropped unread: the caller chose not to read it; the headers were good.
    let response = client.get(server.url("/slow-body")).send().await.unwrap();
    drop(response);
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (2, 0));
    // A 500 is decided on its headers, read or not.
    drop(client.get(server.url("/fail")).send().await.unwrap());
    assert_eq!(breaker.snapshot().failures, 1);
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test]
async fn a_function_classifier_decides_before_the_table_and_none_falls_back_to_it() {
    use cutout::Verdict;
    use cutout_reqwest::ResponseHead;

    let server = Server::start().await;
    let breaker = breaker();
    // This API reports a broken backend with a 200 and a short body.
    let client = client(BreakerMiddleware::new(breaker.clone()).classifier(
        |response: &ResponseHead| {
            let short = response
                .headers()
                .get(reqwest::header::CONTENT_LENGTH)
                .is_some_and(|length| length == "6");
            (response.status() == StatusCode::OK && short).then_some(Verdict::Failure)
        },
    ));
    // "200 OK" is six bytes: the function calls it a failure, decided on the headers.
    drop(client.get(server.url("/ok")).send().await.unwrap());
    assert_eq!(breaker.snapshot().failures, 1);
    // None: the table decides (a 404 is ignored, a 500 fails).
    drop(client.get(server.url("/missing")).send().await.unwrap());
    assert_eq!(breaker.snapshot().calls, 1);
    drop(client.get(server.url("/fail")).send().await.unwrap());
    assert_eq!(breaker.snapshot().failures, 2);
}
