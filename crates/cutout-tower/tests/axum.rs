//! The axum example's app: 503 + Retry-After while open, 504 on a timed-out attempt.

#[path = "../examples/axum_gateway.rs"]
mod gateway;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use cutout::{Breaker, Jitter, Settings, State};
use cutout_tower::{BoxError, TokioClock};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

fn breaker() -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_millis(7500))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap();
    Breaker::builder("rates")
        .settings(settings)
        .clock(TokioClock::new())
        .build()
}

/// A dependency answering `status` after `takes`, counting calls.
fn dependency(calls: Arc<AtomicUsize>, status: StatusCode, takes: Duration) -> gateway::Dependency {
    BoxCloneSyncService::new(tower::service_fn(move |_: Request<String>| {
        calls.fetch_add(1, Ordering::Relaxed);
        async move {
            tokio::time::sleep(takes).await;
            let mut response = http::Response::new("dependency says no".to_owned());
            *response.status_mut() = status;
            Ok::<_, BoxError>(response)
        }
    }))
}

async fn get(app: &axum::Router, path: &str) -> (StatusCode, http::HeaderMap, String) {
    let response = app
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_answers_503_with_retry_after() {
    let calls = Arc::new(AtomicUsize::new(0));
    let breaker = breaker();
    let app = gateway::app(
        dependency(
            calls.clone(),
            StatusCode::INTERNAL_SERVER_ERROR,
            Duration::ZERO,
        ),
        breaker.clone(),
        Duration::from_secs(1),
    );

    // The first request's attempt and its two retries fail and open the breaker; the
    // dependency's own answer is passed on.
    let (status, _, _) = get(&app, "/rates").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert_eq!(breaker.state(), State::Open);

    let (status, headers, body) = get(&app, "/rates").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // What is left of the 7.5 s break (less the retries' backoff), rounded up.
    let after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert_eq!(after, 8);
    assert!(body.contains("'rates'"), "{body}");
    assert!(body.contains("open"), "{body}");
    assert_eq!(
        calls.load(Ordering::Relaxed),
        3,
        "the dependency was not called"
    );

    // The locally guarded route shares the breaker: HandleErrorLayer maps its refusal too.
    let (status, headers, _) = get(&app, "/local").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.contains_key("retry-after"));
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_answers_504() {
    let calls = Arc::new(AtomicUsize::new(0));
    let breaker = breaker();
    let app = gateway::app(
        dependency(calls.clone(), StatusCode::OK, Duration::from_secs(30)),
        breaker.clone(),
        Duration::from_secs(1),
    );
    let start = tokio::time::Instant::now();
    let (status, _, body) = get(&app, "/rates").await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    // Three attempts of 1 s each (the third opens the breaker, so no fourth).
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert!(start.elapsed() < Duration::from_secs(4));
    assert_eq!(breaker.state(), State::Open);
    let (status, _, _) = get(&app, "/rates").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_healthy_dependency_passes_through_on_a_real_socket() {
    // Upstream and gateway on loopback, hyper's client in between.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let ok = axum::Router::new().fallback(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        async { "1.08" }
    });
    tokio::spawn(async move { axum::serve(upstream, ok).await });
    let breaker = Breaker::new("rates", Settings::default());
    let base: http::Uri = format!("http://{upstream_addr}").parse().unwrap();
    let app = gateway::app(
        gateway::hyper_dependency(base),
        breaker.clone(),
        Duration::from_secs(5),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let client = gateway::hyper_dependency(format!("http://{addr}").parse().unwrap());
    let response = client
        .oneshot(Request::get("/rates").body(String::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.body(), "1.08");
    assert_eq!(hits.load(Ordering::Relaxed), 1);
    assert_eq!(breaker.state(), State::Closed);
}
