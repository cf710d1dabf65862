//! `#[cutout::resilient]` with `#[async_trait]`, in either order: the generated wrapper runs
//! seed 001's scenario, keeps the ids the methods have without `#[async_trait]`, can be used
//! as a `dyn` trait object, gives a cancelled probe's slot back, and takes a retry, a
//! fallback and a timeout. `#[async_trait(?Send)]` compiles too.
#![cfg(all(feature = "macros", feature = "tokio"))]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use cutout::clock::ManualClock;
use cutout::declarative::{Cause, TimedOut};
use cutout::{Registry, RejectReason, Rejected, State};

#[derive(Debug)]
enum PayError {
    Down,
    TimedOut,
    Refused(Rejected),
}

impl From<Rejected> for PayError {
    fn from(rejected: Rejected) -> Self {
        PayError::Refused(rejected)
    }
}

impl From<TimedOut> for PayError {
    fn from(_: TimedOut) -> Self {
        PayError::TimedOut
    }
}

// `resilient` above `async_trait`.
#[cutout::resilient]
#[async_trait]
trait Above: Send + Sync {
    #[breaker(
        window_size = 10,
        minimum_calls = 10,
        failure_ratio = "50%",
        consecutive_failures = "off",
        break_duration = "30s",
        jitter = "none",
        half_open_probes = 2,
        probe_successes = 2
    )]
    async fn charge(&self, order: &str, cents: u64) -> Result<String, PayError>;

    #[breaker(consecutive_failures = 2, retry(attempts = 3, backoff = "1ms"))]
    async fn retried(&self, order: &str) -> Result<String, PayError>;

    #[breaker(consecutive_failures = 1, fallback = cached)]
    async fn with_fallback(&self, order: &str) -> Result<String, PayError>;

    #[breaker(consecutive_failures = 1, timeout = "1s")]
    async fn timed(&self, order: &str) -> Result<String, PayError>;

    // Passed through as it is.
    async fn count(&self) -> usize;
}

// `resilient` below `async_trait`: the same trait.
#[async_trait]
#[cutout::resilient]
trait Below: Send + Sync {
    #[breaker(
        window_size = 10,
        minimum_calls = 10,
        failure_ratio = "50%",
        consecutive_failures = "off",
        break_duration = "30s",
        jitter = "none",
        half_open_probes = 2,
        probe_successes = 2
    )]
    async fn charge(&self, order: &str, cents: u64) -> Result<String, PayError>;

    #[breaker(consecutive_failures = 2, retry(attempts = 3, backoff = "1ms"))]
    async fn retried(&self, order: &str) -> Result<String, PayError>;

    #[breaker(consecutive_failures = 1, fallback = cached)]
    async fn with_fallback(&self, order: &str) -> Result<String, PayError>;

    #[breaker(consecutive_failures = 1, timeout = "1s")]
    async fn timed(&self, order: &str) -> Result<String, PayError>;

    async fn count(&self) -> usize;
}

#[derive(Default)]
struct Backend {
    down: AtomicBool,
    hang: AtomicBool,
    calls: AtomicUsize,
}

impl Backend {
    async fn answer(&self, order: &str) -> Result<String, PayError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.hang.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        if self.down.load(Ordering::Relaxed) {
            Err(PayError::Down)
        } else {
            Ok(format!("receipt for {order}"))
        }
    }
}

#[async_trait]
impl Above for Backend {
    async fn charge(&self, order: &str, _cents: u64) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn retried(&self, order: &str) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn with_fallback(&self, order: &str) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn timed(&self, order: &str) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn count(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Below for Backend {
    async fn charge(&self, order: &str, _cents: u64) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn retried(&self, order: &str) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn with_fallback(&self, order: &str) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn timed(&self, order: &str) -> Result<String, PayError> {
        self.answer(order).await
    }
    async fn count(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

// The fallbacks: methods of the wrappers' own.
impl<D: Above> AboveResilient<D> {
    fn cached(&self, cause: Cause<PayError>) -> Result<String, PayError> {
        match cause {
            Cause::Refused(_) => Ok("cached (refused)".into()),
            Cause::Failed(_) => Ok("cached (failed)".into()),
        }
    }
}

impl<D: Below> BelowResilient<D> {
    fn cached(&self, cause: Cause<PayError>) -> Result<String, PayError> {
        match cause {
            Cause::Refused(_) => Ok("cached (refused)".into()),
            Cause::Failed(_) => Ok("cached (failed)".into()),
        }
    }
}

/// The calls the tests make, on either trait: each test runs once per order.
#[async_trait]
trait Gateway: Send + Sync {
    async fn charge(&self, order: &str) -> Result<String, PayError>;
    async fn retried(&self, order: &str) -> Result<String, PayError>;
    async fn with_fallback(&self, order: &str) -> Result<String, PayError>;
    async fn timed(&self, order: &str) -> Result<String, PayError>;
    async fn count(&self) -> usize;
    fn backend(&self) -> &Backend;
    fn order(&self) -> &'static str;
}

/// Through `dyn Above`: the wrapper is a trait object as the delegate is.
struct ViaAbove(Arc<dyn Above>, Arc<Backend>);
struct ViaBelow(Arc<dyn Below>, Arc<Backend>);

struct Shared(Arc<Backend>);

#[async_trait]
impl Above for Shared {
    async fn charge(&self, order: &str, cents: u64) -> Result<String, PayError> {
        Above::charge(&*self.0, order, cents).await
    }
    async fn retried(&self, order: &str) -> Result<String, PayError> {
        Above::retried(&*self.0, order).await
    }
    async fn with_fallback(&self, order: &str) -> Result<String, PayError> {
        Above::with_fallback(&*self.0, order).await
    }
    async fn timed(&self, order: &str) -> Result<String, PayError> {
        Above::timed(&*self.0, order).await
    }
    async fn count(&self) -> usize {
        Above::count(&*self.0).await
    }
}

#[async_trait]
impl Below for Shared {
    async fn charge(&self, order: &str, cents: u64) -> Result<String, PayError> {
        Below::charge(&*self.0, order, cents).await
    }
    async fn retried(&self, order: &str) -> Result<String, PayError> {
        Below::retried(&*self.0, order).await
    }
    async fn with_fallback(&self, order: &str) -> Result<String, PayError> {
        Below::with_fallback(&*self.0, order).await
    }
    async fn timed(&self, order: &str) -> Result<String, PayError> {
        Below::timed(&*self.0, order).await
    }
    async fn count(&self) -> usize {
        Below::count(&*self.0).await
    }
}

#[async_trait]
impl Gateway for ViaAbove {
    async fn charge(&self, order: &str) -> Result<String, PayError> {
        self.0.charge(order, 100).await
    }
    async fn retried(&self, order: &str) -> Result<String, PayError> {
        self.0.retried(order).await
    }
    async fn with_fallback(&self, order: &str) -> Result<String, PayError> {
        self.0.with_fallback(order).await
    }
    async fn timed(&self, order: &str) -> Result<String, PayError> {
        self.0.timed(order).await
    }
    async fn count(&self) -> usize {
        self.0.count().await
    }
    fn backend(&self) -> &Backend {
        &self.1
    }
    fn order(&self) -> &'static str {
        "Above"
    }
}

#[async_trait]
impl Gateway for ViaBelow {
    async fn charge(&self, order: &str) -> Result<String, PayError> {
        self.0.charge(order, 100).await
    }
    async fn retried(&self, order: &str) -> Result<String, PayError> {
        self.0.retried(order).await
    }
    async fn with_fallback(&self, order: &str) -> Result<String, PayError> {
        self.0.with_fallback(order).await
    }
    async fn timed(&self, order: &str) -> Result<String, PayError> {
        self.0.timed(order).await
    }
    async fn count(&self) -> usize {
        self.0.count().await
    }
    fn backend(&self) -> &Backend {
        &self.1
    }
    fn order(&self) -> &'static str {
        "Below"
    }
}

/// Both orders over one registry's clock: the wrapper of `Above`, then of `Below`.
fn both(registry: &Registry) -> Vec<Box<dyn Gateway>> {
    let above = Arc::new(Backend::default());
    let below = Arc::new(Backend::default());
    let wrapped_above: Arc<dyn Above> =
        Arc::new(AboveResilient::new(Shared(above.clone()), registry).unwrap());
    let wrapped_below: Arc<dyn Below> =
        Arc::new(BelowResilient::new(Shared(below.clone()), registry).unwrap());
    vec![
        Box::new(ViaAbove(wrapped_above, above)),
        Box::new(ViaBelow(wrapped_below, below)),
    ]
}

#[tokio::test]
async fn ids_are_the_methods_own_in_either_order() {
    let registry = Registry::new();
    let _wrappers = both(&registry);
    let mut names: Vec<String> = registry
        .ids()
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "Above#charge(&str, u64)",
            "Above#retried(&str)",
            "Above#timed(&str)",
            "Above#with_fallback(&str)",
            "Below#charge(&str, u64)",
            "Below#retried(&str)",
            "Below#timed(&str)",
            "Below#with_fallback(&str)",
        ]
    );
}

#[tokio::test]
async fn seed_001_scenario_through_an_async_trait_wrapper_in_either_order() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    for gateway in both(&registry) {
        let order = gateway.order();
        let breaker = registry.get(format!("{order}#charge(&str, u64)")).unwrap();
        for i in 0..5 {
            assert_eq!(
                gateway.charge(&format!("ok-{i}")).await.unwrap(),
                format!("receipt for ok-{i}"),
                "{order}"
            );
        }
        gateway.backend().down.store(true, Ordering::Relaxed);
        for i in 0..5 {
            assert!(
                matches!(gateway.charge("ko").await, Err(PayError::Down)),
                "{order}: failure {i} ran"
            );
        }
        assert_eq!(
            breaker.state(),
            State::Open,
            "{order}: 10 calls, 50% failed"
        );
        let refused = gateway.charge("refused").await;
        assert!(
            matches!(&refused, Err(PayError::Refused(r)) if r.reason() == RejectReason::Open),
            "{order}: {refused:?}"
        );
        assert_eq!(gateway.count().await, 10, "{order}: the refusal never ran");

        gateway.backend().down.store(false, Ordering::Relaxed);
        clock.elapse_break(&breaker);
        gateway.charge("probe-1").await.unwrap();
        assert_eq!(breaker.state(), State::HalfOpen, "{order}");
        gateway.charge("probe-2").await.unwrap();
        assert_eq!(breaker.state(), State::Closed, "{order}");
        assert_eq!(gateway.count().await, 12, "{order}");
    }
}

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test]
async fn a_cancelled_probe_records_nothing_and_frees_its_slot_in_either_order() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    for gateway in both(&registry) {
        let order = gateway.order();
        let breaker = registry
            .get(format!("{order}#with_fallback(&str)"))
            .unwrap();
        // One failure opens it (`consecutive_failures = 1`); the fallback answers.
        gateway.backend().down.store(true, Ordering::Relaxed);
        assert_eq!(gateway.with_fallback("a").await.unwrap(), "cached (failed)");
        assert_eq!(breaker.state(), State::Open, "{order}");
        assert_eq!(
            gateway.with_fallback("b").await.unwrap(),
            "cached (refused)",
            "{order}"
        );
        let ran = gateway.count().await;
        assert_eq!(ran, 1, "{order}: the refusal never ran");

        clock.elapse_break(&breaker);
        gateway.backend().down.store(false, Ordering::Relaxed);
        gateway.backend().hang.store(true, Ordering::Relaxed);
        {
            let mut probe = pin!(gateway.with_fallback("probe"));
            assert!(poll_once(probe.as_mut()).is_pending(), "{order}: probing");
        }
        assert_eq!(
            breaker.state(),
            State::HalfOpen,
            "{order}: the cancelled probe decided nothing"
        );
        let snapshot = breaker.snapshot();
        assert_eq!((snapshot.calls, snapshot.failures), (0, 0), "{order}");
        gateway.backend().hang.store(false, Ordering::Relaxed);
        // The default probe count is more than one; every probe slot is free again.
        while breaker.state() == State::HalfOpen {
            assert_eq!(
                gateway.with_fallback("probe").await.unwrap(),
                "receipt for probe",
                "{order}: a probe, not a refusal"
            );
        }
        assert_eq!(breaker.state(), State::Closed, "{order}");
    }
}

#[tokio::test]
async fn a_retry_stops_when_the_breaker_opens_in_either_order() {
    let registry = Registry::new();
    for gateway in both(&registry) {
        let order = gateway.order();
        let breaker = registry.get(format!("{order}#retried(&str)")).unwrap();
        gateway.backend().down.store(true, Ordering::Relaxed);
        // Attempt 1 fails, attempt 2 fails and opens it (`consecutive_failures = 2`):
        // attempt 3 is refused, never made, and the refusal is the answer.
        assert!(
            matches!(gateway.retried("x").await, Err(PayError::Refused(_))),
            "{order}"
        );
        assert_eq!(breaker.state(), State::Open, "{order}");
        assert_eq!(gateway.count().await, 2, "{order}: two attempts, not three");
        // Refused at once: no attempt reaches the delegate.
        assert!(
            matches!(gateway.retried("y").await, Err(PayError::Refused(_))),
            "{order}"
        );
        assert_eq!(gateway.count().await, 2, "{order}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_a_failure_inside_the_breaker_in_either_order() {
    let registry = Registry::new();
    for gateway in both(&registry) {
        let order = gateway.order();
        let breaker = registry.get(format!("{order}#timed(&str)")).unwrap();
        gateway.backend().hang.store(true, Ordering::Relaxed);
        let started = tokio::time::Instant::now();
        assert!(
            matches!(gateway.timed("x").await, Err(PayError::TimedOut)),
            "{order}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(1), "{order}");
        assert_eq!(breaker.state(), State::Open, "{order}: the timeout failed");
        gateway.backend().hang.store(false, Ordering::Relaxed);
    }
}

// `?Send` futures, in either order: the wrapper of a trait whose futures need not be `Send`.
#[cutout::resilient]
#[async_trait(?Send)]
trait LocalAbove {
    #[breaker(consecutive_failures = 1)]
    async fn get(&self, key: &str) -> Result<usize, PayError>;
}

#[async_trait::async_trait(?Send)]
#[cutout::resilient]
trait LocalBelow {
    #[breaker(consecutive_failures = 1)]
    async fn get(&self, key: &str) -> Result<usize, PayError>;
}

/// Not `Sync`: a `?Send` trait's delegate need not be.
struct Local(std::cell::Cell<usize>);

#[async_trait(?Send)]
impl LocalAbove for Local {
    async fn get(&self, key: &str) -> Result<usize, PayError> {
        self.0.set(self.0.get() + 1);
        Ok(key.len())
    }
}

#[async_trait(?Send)]
impl LocalBelow for Local {
    async fn get(&self, _key: &str) -> Result<usize, PayError> {
        self.0.set(self.0.get() + 1);
        Err(PayError::Down)
    }
}

#[tokio::test]
async fn a_question_send_trait_is_wrapped_in_either_order() {
    let registry = Registry::new();
    let above = LocalAboveResilient::new(Local(Default::default()), &registry).unwrap();
    assert_eq!(above.get("abc").await.unwrap(), 3);
    let below = LocalBelowResilient::new(Local(Default::default()), &registry).unwrap();
    assert!(matches!(below.get("abc").await, Err(PayError::Down)));
    assert!(matches!(below.get("abc").await, Err(PayError::Refused(_))));
    assert_eq!(LocalBelowResilient::delegate(&below).0.get(), 1);
    assert_eq!(
        registry
            .get("LocalAbove#get(&str)")
            .unwrap()
            .snapshot()
            .calls,
        1
    );
    assert_eq!(
        registry.get("LocalBelow#get(&str)").unwrap().state(),
        State::Open
    );
}
