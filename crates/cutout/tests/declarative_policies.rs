//! Generated wrappers with other policies (seed 001, "With other policies"): a retry outside
//! the breaker stops at once when the breaker opens and never retries a refusal; a fallback
//! answers refusals and failures as configured; `ignore` wins over `record`; a classifier
//! decides; an async timeout inside the breaker counts as a failure. Also generic traits and
//! `impl Future` methods.
#![cfg(all(feature = "macros", feature = "tokio"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cutout::declarative::{Cause, TimedOut};
use cutout::{Outcome, Registry, Rejected, State};

#[derive(Debug, PartialEq)]
enum ApiError {
    Down,
    BadInput,
    NotFound,
    Refused,
    TimedOut,
}

impl From<Rejected> for ApiError {
    fn from(_: Rejected) -> Self {
        ApiError::Refused
    }
}

impl From<TimedOut> for ApiError {
    fn from(_: TimedOut) -> Self {
        ApiError::TimedOut
    }
}

fn bad_input(e: &ApiError) -> bool {
    matches!(e, ApiError::BadInput)
}

fn not_found_or_bad_input(e: &ApiError) -> bool {
    matches!(e, ApiError::NotFound | ApiError::BadInput)
}

fn server_errors(result: &Result<u16, ApiError>) -> Outcome {
    match result {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Ignored,
    }
}

#[cutout::resilient]
trait Api {
    #[breaker(
        consecutive_failures = 2,
        break_duration = "1m",
        retry(attempts = 5, backoff = "1s")
    )]
    fn retried(&self, key: String) -> Result<u32, ApiError>;

    #[breaker(
        consecutive_failures = 2,
        break_duration = "1m",
        retry(attempts = 5, backoff = "2s")
    )]
    async fn retried_async(&self, key: &str) -> Result<u32, ApiError>;

    #[breaker(consecutive_failures = 10, retry(attempts = 3))]
    fn retried_closed(&self) -> Result<u32, ApiError>;

    #[breaker(name = "fallback-both", consecutive_failures = 1, break_duration = "1m", fallback = answer)]
    fn with_fallback(&self) -> Result<u32, ApiError>;

    #[breaker(name = "fallback-refused", consecutive_failures = 1, break_duration = "1m",
              fallback = answer, fallback_on = "refused")]
    fn fallback_on_refusals(&self) -> Result<u32, ApiError>;

    #[breaker(name = "fallback-failed", consecutive_failures = 1, break_duration = "1m",
              fallback = answer, fallback_on = "failed")]
    fn fallback_on_failures(&self) -> Result<u32, ApiError>;

    #[breaker(consecutive_failures = 1, ignore = bad_input, record = not_found_or_bad_input)]
    fn filtered(&self, error: u8) -> Result<u32, ApiError>;

    #[breaker(consecutive_failures = 1, classifier = server_errors)]
    fn classified(&self, status: u16) -> Result<u16, ApiError>;

    #[breaker(consecutive_failures = 2, timeout = "1s")]
    async fn timed(&self, hang: bool) -> Result<u32, ApiError>;

    #[breaker(consecutive_failures = 1, rejected = refusal_code)]
    fn custom_refusal(&self) -> Result<u32, u32>;
}

fn refusal_code(_: Rejected) -> u32 {
    429
}

impl<D: Api> ApiResilient<D> {
    fn answer(&self, cause: Cause<ApiError>) -> Result<u32, ApiError> {
        Ok(if cause.is_refused() { 1 } else { 2 })
    }
}

#[derive(Default)]
struct Down {
    calls: AtomicUsize,
}

impl Down {
    fn call(&self) -> usize {
        self.calls.fetch_add(1, Ordering::Relaxed) + 1
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Api for Down {
    fn retried(&self, _: String) -> Result<u32, ApiError> {
        self.call();
        Err(ApiError::Down)
    }
    async fn retried_async(&self, _: &str) -> Result<u32, ApiError> {
        self.call();
        Err(ApiError::Down)
    }
    fn retried_closed(&self) -> Result<u32, ApiError> {
        // Fails twice, then answers.
        if self.call() < 3 {
            Err(ApiError::Down)
        } else {
            Ok(3)
        }
    }
    fn with_fallback(&self) -> Result<u32, ApiError> {
        Err(ApiError::Down)
    }
    fn fallback_on_refusals(&self) -> Result<u32, ApiError> {
        Err(ApiError::Down)
    }
    fn fallback_on_failures(&self) -> Result<u32, ApiError> {
        Err(ApiError::Down)
    }
    fn filtered(&self, error: u8) -> Result<u32, ApiError> {
        Err(match error {
            0 => ApiError::BadInput,
            1 => ApiError::Down,
            _ => ApiError::NotFound,
        })
    }
    fn classified(&self, status: u16) -> Result<u16, ApiError> {
        Ok(status)
    }
    async fn timed(&self, hang: bool) -> Result<u32, ApiError> {
        if hang {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(1)
    }
    fn custom_refusal(&self) -> Result<u32, u32> {
        Err(500)
    }
}

fn api() -> (ApiResilient<Down>, Registry) {
    let registry = Registry::new();
    (
        ApiResilient::new(Down::default(), &registry).unwrap(),
        registry,
    )
}

#[test]
fn a_sync_retry_stops_at_once_when_the_breaker_opens() {
    let (api, registry) = api();
    let started = Instant::now();
    // Two failures open the breaker; the third attempt is refused and never retried.
    assert_eq!(api.retried("k".to_owned()), Err(ApiError::Refused));
    assert_eq!(
        ApiResilient::delegate(&api).calls(),
        2,
        "attempts that reached the delegate"
    );
    assert_eq!(registry.state("Api#retried(String)").unwrap(), State::Open);
    // One backoff (after the first failure), none once the breaker opened (a second would
    // make it 2 s).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(2),
        "{waited:?}"
    );

    // A refusal on the first attempt is not retried either.
    assert_eq!(api.retried("k".to_owned()), Err(ApiError::Refused));
    assert_eq!(ApiResilient::delegate(&api).calls(), 2);
}

#[test]
fn a_sync_retry_backs_off_on_the_registry_s_manual_clock() {
    let clock = cutout::clock::ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let api = ApiResilient::new(Down::default(), &registry).unwrap();
    let started = Instant::now();
    assert_eq!(api.retried("k".to_owned()), Err(ApiError::Refused));
    assert_eq!(ApiResilient::delegate(&api).calls(), 2);
    // The one backoff (1 s) passed on the manual clock, not in real time.
    assert_eq!(clock.elapsed(), Duration::from_secs(1));
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn an_async_retry_stops_at_once_when_the_breaker_opens() {
    let (api, registry) = api();
    let started = tokio::time::Instant::now();
    assert_eq!(api.retried_async("k").await, Err(ApiError::Refused));
    assert_eq!(
        ApiResilient::delegate(&api).calls(),
        2,
        "attempts that reached the delegate"
    );
    assert_eq!(
        registry.state("Api#retried_async(&str)").unwrap(),
        State::Open
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "one backoff, none once open"
    );
}

#[test]
fn a_retry_on_a_closed_breaker_retries_failures_until_a_success() {
    let (api, _) = api();
    assert_eq!(api.retried_closed(), Ok(3));
    assert_eq!(ApiResilient::delegate(&api).calls(), 3);
}

#[test]
fn a_fallback_answers_refusals_and_failures() {
    let (api, _) = api();
    assert_eq!(api.with_fallback(), Ok(2), "the failure (which opens it)");
    assert_eq!(api.with_fallback(), Ok(1), "the refusal");
}

#[test]
fn a_fallback_on_refusals_leaves_failures_alone() {
    let (api, _) = api();
    assert_eq!(api.fallback_on_refusals(), Err(ApiError::Down));
    assert_eq!(api.fallback_on_refusals(), Ok(1));
}

#[test]
fn a_fallback_on_failures_leaves_refusals_alone() {
    let (api, _) = api();
    assert_eq!(api.fallback_on_failures(), Ok(2));
    assert_eq!(api.fallback_on_failures(), Err(ApiError::Refused));
}

#[test]
fn ignore_wins_over_record_and_unrecorded_errors_count_as_successes() {
    let (api, registry) = api();
    let id = "Api#filtered(u8)";
    assert_eq!(
        api.filtered(0),
        Err(ApiError::BadInput),
        "ignored though recorded"
    );
    assert_eq!(
        api.filtered(1),
        Err(ApiError::Down),
        "not recorded: a success"
    );
    let snapshot = registry.snapshot(id).unwrap();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (1, 0),
        "one counted call, no failure"
    );
    assert_eq!(registry.state(id).unwrap(), State::Closed);
    assert_eq!(
        api.filtered(2),
        Err(ApiError::NotFound),
        "recorded: a failure"
    );
    assert_eq!(registry.state(id).unwrap(), State::Open);
}

#[test]
fn a_classifier_decides_what_counts() {
    let (api, registry) = api();
    assert_eq!(api.classified(200), Ok(200));
    assert_eq!(
        registry.state("Api#classified(u16)").unwrap(),
        State::Closed
    );
    assert_eq!(
        api.classified(503),
        Ok(503),
        "the answer is returned as it is"
    );
    assert_eq!(
        registry.state("Api#classified(u16)").unwrap(),
        State::Open,
        "but counted a failure"
    );
}

#[tokio::test(start_paused = true)]
async fn an_async_timeout_is_a_failure_inside_the_breaker() {
    let (api, registry) = api();
    let id = "Api#timed(bool)";
    assert_eq!(api.timed(false).await, Ok(1));
    let started = tokio::time::Instant::now();
    assert_eq!(api.timed(true).await, Err(ApiError::TimedOut));
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(registry.snapshot(id).unwrap().failures, 1);
    assert_eq!(api.timed(true).await, Err(ApiError::TimedOut));
    assert_eq!(
        registry.state(id).unwrap(),
        State::Open,
        "two timeouts opened it"
    );
    assert_eq!(api.timed(false).await, Err(ApiError::Refused));
}

#[test]
fn rejected_builds_the_error_of_a_refusal() {
    let (api, _) = api();
    assert_eq!(api.custom_refusal(), Err(500));
    assert_eq!(api.custom_refusal(), Err(429));
}

/// A generic trait with an associated type and an `impl Future` method.
#[cutout::resilient]
trait Store<K: Clone + Send + Sync> {
    type Value;

    #[breaker(consecutive_failures = 1)]
    fn get(&self, key: K) -> Result<Self::Value, ApiError>;

    #[breaker(consecutive_failures = 1)]
    fn load(&self, key: K) -> impl Future<Output = Result<u8, ApiError>> + Send;
}

struct Memory;

impl Store<u32> for Memory {
    type Value = String;

    fn get(&self, key: u32) -> Result<String, ApiError> {
        Ok(key.to_string())
    }

    // The trait's shape on purpose: a method returning `impl Future` is wrapped too.
    #[allow(clippy::manual_async_fn)]
    fn load(&self, key: u32) -> impl Future<Output = Result<u8, ApiError>> + Send {
        async move { if key == 0 { Err(ApiError::Down) } else { Ok(1) } }
    }
}

#[tokio::test]
async fn generic_traits_and_impl_future_methods_are_wrapped() {
    let registry = Registry::new();
    let store: StoreResilient<Memory, u32> = StoreResilient::new(Memory, &registry).unwrap();
    assert_eq!(store.get(7).unwrap(), "7");
    assert!(registry.contains("Store#get(K)"));
    // The future is Send (spawnable), and records when it completes.
    let store = std::sync::Arc::new(store);
    let spawned = std::sync::Arc::clone(&store);
    assert_eq!(
        tokio::spawn(async move { spawned.load(1).await })
            .await
            .unwrap(),
        Ok(1)
    );
    assert_eq!(store.load(0).await, Err(ApiError::Down));
    assert_eq!(registry.state("Store#load(K)").unwrap(), State::Open);
    assert_eq!(store.load(1).await, Err(ApiError::Refused));
}
