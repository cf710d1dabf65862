//! The breaker-aware retry policy: refusals, opening, budget, deadlines.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cutout::{Breaker, Jitter, Settings, State};
use cutout_tower::retry::{BreakerRetry, Deadline};
use cutout_tower::{RetryStop, ServiceBuilderExt, TokioClock};
use http::Request;
use tower::retry::budget::TpsBudget;
use tower::{Service, ServiceBuilder, ServiceExt};

fn breaker(settings: Settings) -> Breaker {
    Breaker::builder("dependency")
        .settings(settings)
        .clock(TokioClock::new())
        .build()
}

fn plain(failures: Option<u32>) -> Settings {
    Settings::builder()
        .consecutive_failures(failures)
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap()
}

fn generous() -> Arc<TpsBudget> {
    Arc::new(TpsBudget::new(Duration::from_secs(10), 1000, 1000.0))
}

/// A dependency that fails every call after sleeping `takes`, counting calls.
fn failing(
    calls: Arc<AtomicUsize>,
    takes: Duration,
) -> impl Service<
    Request<String>,
    Response = String,
    Error = std::io::Error,
    Future = impl Future<Output = Result<String, std::io::Error>> + Send,
> + Clone {
    tower::service_fn(move |_: Request<String>| {
        calls.fetch_add(1, Ordering::Relaxed);
        async move {
            tokio::time::sleep(takes).await;
            Err(std::io::Error::other("down"))
        }
    })
}

fn request() -> Request<String> {
    Request::new(String::new())
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_not_retried() {
    let breaker = breaker(plain(Some(5)));
    breaker.isolate();
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = BreakerRetry::new(breaker.clone(), generous()).max_retries(5);
    let stats = policy.stats();
    let mut client = ServiceBuilder::new()
        .retry(policy)
        .breaker(breaker)
        .service(failing(calls.clone(), Duration::ZERO));
    let start = tokio::time::Instant::now();
    let error = client
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap_err();
    assert!(error.is_rejected());
    assert_eq!(error.retry_stop(), Some(RetryStop::Refused));
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    assert_eq!(stats.retries(), 0);
    assert_eq!(stats.stopped(RetryStop::Refused), 1);
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "no backoff before giving up"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_stop_when_an_attempt_opens_the_breaker() {
    let breaker = breaker(plain(Some(3)));
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = BreakerRetry::new(breaker.clone(), generous())
        .max_retries(10)
        .backoff(Duration::from_millis(10), Duration::from_millis(100));
    let stats = policy.stats();
    let mut client = ServiceBuilder::new()
        .retry(policy)
        .breaker(breaker.clone())
        .service(failing(calls.clone(), Duration::ZERO));
    let error = client
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap_err();
    assert!(
        !error.is_rejected(),
        "the last attempt's own error is returned"
    );
    assert_eq!(error.retry_stop(), Some(RetryStop::BreakerOpen));
    assert_eq!(
        calls.load(Ordering::Relaxed),
        3,
        "the third attempt opened it"
    );
    assert_eq!(stats.retries(), 2);
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn the_budget_limits_retries_and_says_so() {
    // No share of requests may be retried; a reserve of one retry per second of a 1 s window.
    let budget = Arc::new(TpsBudget::new(Duration::from_secs(1), 1, 0.0));
    let breaker = breaker(plain(None));
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = BreakerRetry::new(breaker.clone(), budget)
        .max_retries(10)
        .jitter(Jitter::None)
        .backoff(Duration::from_millis(1), Duration::from_millis(1));
    let stats = policy.stats();
    let mut client = ServiceBuilder::new()
        .retry(policy)
        .breaker(breaker.clone())
        .service(failing(calls.clone(), Duration::ZERO));

    let error = client
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap_err();
    assert_eq!(
        calls.load(Ordering::Relaxed),
        2,
        "one retry from the reserve"
    );
    assert!(error.is_budget_exhausted());
    assert!(
        !error.is_rejected(),
        "the budget stopped it, not the breaker"
    );
    assert_eq!(error.retry_stop(), Some(RetryStop::BudgetExhausted));
    assert!(error.to_string().contains("budget_exhausted"));

    let error = client
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 3, "no retry left");
    assert!(error.is_budget_exhausted());
    assert_eq!(stats.retries(), 1);
    assert_eq!(stats.stopped(RetryStop::BudgetExhausted), 2);
    assert_eq!(stats.stopped(RetryStop::BreakerOpen), 0);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_rule_skips_an_attempt_that_cannot_finish() {
    // An adaptive breaker learns that a healthy call takes 100 ms.
    let settings = Settings::builder()
        .consecutive_failures(None)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let breaker = breaker(settings);
    let healthy = tower::service_fn(|_: Request<String>| async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok::<_, std::io::Error>(String::new())
    });
    let mut warm = ServiceBuilder::new()
        .breaker(breaker.clone())
        .service(healthy);
    // At low traffic every call is timed: 160 calls give the baseline far more than its 20.
    for _ in 0..160 {
        warm.ready().await.unwrap().call(request()).await.unwrap();
    }
    // The baseline is a histogram quantile: within its 10% of 100 ms, not exact.
    let normal = breaker.normal_latency().unwrap();
    assert!(
        normal > Duration::from_millis(90) && normal <= Duration::from_millis(110),
        "{normal:?}"
    );

    let calls = Arc::new(AtomicUsize::new(0));
    let policy = BreakerRetry::new(breaker.clone(), generous())
        .max_retries(3)
        .jitter(Jitter::None)
        .backoff(Duration::from_millis(10), Duration::from_millis(10));
    let stats = policy.stats();
    let mut client = ServiceBuilder::new()
        .retry(policy)
        .breaker(breaker.clone())
        .service(failing(calls.clone(), Duration::from_millis(60)));

    // 150 ms to go: the failed attempt takes 60, the backoff 10, leaving 80 < ~100.
    let mut tight = request();
    tight
        .extensions_mut()
        .insert(Deadline::after(Duration::from_millis(150)));
    let start = tokio::time::Instant::now();
    let error = client.ready().await.unwrap().call(tight).await.unwrap_err();
    assert_eq!(error.retry_stop(), Some(RetryStop::Deadline));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(start.elapsed(), Duration::from_millis(60));
    assert_eq!(stats.stopped(RetryStop::Deadline), 1);

    // 300 ms to go: two retries fit, the third does not.
    calls.store(0, Ordering::Relaxed);
    let mut roomy = request();
    roomy
        .extensions_mut()
        .insert(Deadline::after(Duration::from_millis(300)));
    let error = client.ready().await.unwrap().call(roomy).await.unwrap_err();
    // Attempt 1 ends at 60 (retry starts at 70, 230 left ≥ ~100), attempt 2 ends at 130 (retry
    // at 140, 160 left), attempt 3 ends at 200 (retry at 210, 90 left < ~96): stop.
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert_eq!(error.retry_stop(), Some(RetryStop::Deadline));

    // Without a deadline the retries run to the maximum.
    calls.store(0, Ordering::Relaxed);
    let error = client
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 4);
    assert_eq!(error.retry_stop(), Some(RetryStop::Attempts));
}

#[tokio::test(start_paused = true)]
async fn backoff_grows_with_equal_jitter() {
    let breaker = breaker(plain(None));
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = BreakerRetry::new(breaker.clone(), generous())
        .max_retries(3)
        .backoff(Duration::from_millis(100), Duration::from_millis(300));
    let mut client = ServiceBuilder::new()
        .retry(policy)
        .breaker(breaker)
        .service(failing(calls.clone(), Duration::ZERO));
    for _ in 0..20 {
        let start = tokio::time::Instant::now();
        let _ = client.ready().await.unwrap().call(request()).await;
        // Backoffs 100, 200, 300 (capped), each jittered to [half, full].
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited <= Duration::from_millis(600), "{waited:?}");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 80);
}

/// Sends `request` through retry → breaker → a dependency that always fails; how many times
/// the dependency saw it, and the error's stop reason.
async fn sent_times(request: Request<String>) -> (usize, Option<RetryStop>) {
    let breaker = breaker(plain(None));
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = BreakerRetry::new(breaker.clone(), generous())
        .max_retries(2)
        .backoff(Duration::from_millis(10), Duration::from_millis(100));
    let mut client = ServiceBuilder::new()
        .retry(policy)
        .breaker(breaker)
        .service(failing(calls.clone(), Duration::ZERO));
    let error = client
        .ready()
        .await
        .unwrap()
        .call(request)
        .await
        .unwrap_err();
    (calls.load(Ordering::Relaxed), error.retry_stop())
}

#[tokio::test(start_paused = true)]
async fn a_non_idempotent_request_is_sent_once_unless_the_caller_opts_it_in() {
    for method in [http::Method::POST, http::Method::PATCH] {
        let request = Request::builder()
            .method(method.clone())
            .body(String::new())
            .unwrap();
        assert_eq!(
            sent_times(request).await,
            (1, Some(RetryStop::NotIdempotent)),
            "{method}"
        );
    }
    for method in [
        http::Method::GET,
        http::Method::HEAD,
        http::Method::PUT,
        http::Method::DELETE,
        http::Method::OPTIONS,
    ] {
        let request = Request::builder()
            .method(method.clone())
            .body(String::new())
            .unwrap();
        assert_eq!(
            sent_times(request).await,
            (3, Some(RetryStop::Attempts)),
            "{method}"
        );
    }
    // A POST the caller knows to be safe to repeat (an idempotency key) opts in.
    let mut request = Request::builder()
        .method(http::Method::POST)
        .body(String::new())
        .unwrap();
    request
        .extensions_mut()
        .insert(cutout_tower::retry::RetrySafe);
    assert_eq!(sent_times(request).await, (3, Some(RetryStop::Attempts)));
    assert_eq!(RetryStop::NotIdempotent.as_str(), "not_idempotent");
}
