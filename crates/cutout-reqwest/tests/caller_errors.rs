//! Errors the caller causes say nothing about the server: an upload body of the caller's that
//! fails midway is ignored, never counted as the host's failure.

mod common;

use common::{Server, client};
use cutout::{Breaker, Jitter, Settings, State};
use cutout_reqwest::BreakerMiddleware;

/// A streamed request body that sends one chunk, then fails as a reader of a file would.
fn failing_upload() -> reqwest::Body {
    let chunks: Vec<Result<&'static str, std::io::Error>> = vec![
        Ok("first part of the upload"),
        Err(std::io::Error::other("the caller's file went away")),
    ];
    reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
}

#[tokio::test]
async fn a_caller_s_upload_that_fails_midway_is_not_the_server_s_failure() {
    let server = Server::start().await;
    let breaker = Breaker::new(
        "uploads",
        Settings::builder()
            .consecutive_failures(Some(3))
            .jitter(Jitter::None)
            .build()
            .unwrap(),
    );
    let client = client(BreakerMiddleware::new(breaker.clone()));
    for _ in 0..5 {
        let error = client
            .post(server.url("/ok"))
            .body(failing_upload())
            .send()
            .await
            .expect_err("the body failed");
        assert!(
            cutout_reqwest::rejected(&error).is_none(),
            "not refused: {error}"
        );
    }
    let snapshot = breaker.snapshot();
    assert_eq!(
        (
            snapshot.state,
            snapshot.failures,
            snapshot.consecutive_failures
        ),
        (State::Closed, 0, 0),
        "{snapshot:?}"
    );
    // The healthy host still answers and its answers count.
    let response = client.get(server.url("/ok")).send().await.unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    // Decided at the body's end (read here; dropped unread would count as well).
    response.text().await.unwrap();
    assert_eq!(breaker.snapshot().calls, 1);
}
