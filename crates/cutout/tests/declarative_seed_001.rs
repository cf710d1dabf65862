//! Seed 001's manual-clock scenario through a generated wrapper (`#[cutout::resilient]`),
//! sync and async: 5 successes and 5 failures open the breaker, a call is refused without
//! reaching the delegate, and after the break two probes close it. The registry's clock
//! drives the generated breakers.
#![cfg(feature = "macros")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Registry, RejectReason, Rejected, State};

#[derive(Debug)]
enum PayError {
    Down,
    Refused(Rejected),
}

impl From<Rejected> for PayError {
    fn from(rejected: Rejected) -> Self {
        PayError::Refused(rejected)
    }
}

#[cutout::resilient]
trait PaymentGateway {
    #[breaker(
        name = "payments",
        window_size = 10,
        minimum_calls = 10,
        failure_ratio = "50%",
        consecutive_failures = "off",
        break_duration = "30s",
        jitter = "none",
        half_open_probes = 2,
        probe_successes = 2
    )]
    fn charge(&self, order: &str) -> Result<String, PayError>;

    #[breaker(
        name = "payments-async",
        window_size = 10,
        minimum_calls = 10,
        failure_ratio = "50%",
        consecutive_failures = "off",
        break_duration = "30s",
        jitter = "none",
        half_open_probes = 2,
        probe_successes = 2
    )]
    async fn charge_async(&self, order: &str) -> Result<String, PayError>;
}

#[derive(Default)]
struct Backend {
    down: AtomicBool,
    calls: AtomicUsize,
}

impl Backend {
    fn answer(&self, order: &str) -> Result<String, PayError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.down.load(Ordering::Relaxed) {
            Err(PayError::Down)
        } else {
            Ok(format!("receipt for {order}"))
        }
    }
}

impl PaymentGateway for Backend {
    fn charge(&self, order: &str) -> Result<String, PayError> {
        self.answer(order)
    }

    async fn charge_async(&self, order: &str) -> Result<String, PayError> {
        self.answer(order)
    }
}

fn calls(payments: &PaymentGatewayResilient<Backend>) -> usize {
    PaymentGatewayResilient::delegate(payments)
        .calls
        .load(Ordering::Relaxed)
}

fn set_down(payments: &PaymentGatewayResilient<Backend>, down: bool) {
    PaymentGatewayResilient::delegate(payments)
        .down
        .store(down, Ordering::Relaxed);
}

#[test]
fn seed_001_scenario_through_a_generated_sync_wrapper() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let payments = PaymentGatewayResilient::new(Backend::default(), &registry).unwrap();
    let breaker = registry.get("payments").unwrap();

    for i in 0..5 {
        assert_eq!(
            payments.charge(&format!("ok-{i}")).unwrap(),
            format!("receipt for ok-{i}")
        );
    }
    set_down(&payments, true);
    for i in 0..5 {
        assert!(
            matches!(payments.charge("ko"), Err(PayError::Down)),
            "failure {i} ran"
        );
        if i < 4 {
            assert_eq!(
                breaker.state(),
                State::Closed,
                "below 50% of 10 after failure {i}"
            );
        }
    }
    assert_eq!(breaker.state(), State::Open, "10 calls, 50% failed");
    assert_eq!(
        (breaker.snapshot().calls, breaker.snapshot().failures),
        (10, 5)
    );

    match payments.charge("refused") {
        Err(PayError::Refused(rejected)) => {
            assert_eq!(rejected.reason(), RejectReason::Open);
            assert_eq!(rejected.breaker().as_str(), "payments");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        calls(&payments),
        10,
        "the refused call never reached the delegate"
    );

    set_down(&payments, false);
    clock.elapse_break(&breaker);
    assert_eq!(
        clock.elapsed(),
        Duration::from_secs(30),
        "the registry's clock drives it"
    );
    payments.charge("probe-1").unwrap();
    assert_eq!(breaker.state(), State::HalfOpen, "one probe is not enough");
    payments.charge("probe-2").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().calls, 0, "closes with an empty window");
    assert_eq!(calls(&payments), 12);
}

#[tokio::test]
async fn seed_001_scenario_through_a_generated_async_wrapper() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let payments = PaymentGatewayResilient::new(Backend::default(), &registry).unwrap();
    let breaker = registry.get("payments-async").unwrap();

    for i in 0..5 {
        payments.charge_async(&format!("ok-{i}")).await.unwrap();
    }
    set_down(&payments, true);
    for _ in 0..5 {
        assert!(matches!(
            payments.charge_async("ko").await,
            Err(PayError::Down)
        ));
    }
    assert_eq!(breaker.state(), State::Open, "10 calls, 50% failed");

    let refused = payments.charge_async("refused").await;
    assert!(
        matches!(&refused, Err(PayError::Refused(r)) if r.reason() == RejectReason::Open),
        "{refused:?}"
    );
    assert_eq!(
        calls(&payments),
        10,
        "the refused call never reached the delegate"
    );

    set_down(&payments, false);
    clock.elapse_break(&breaker);
    payments.charge_async("probe-1").await.unwrap();
    assert_eq!(breaker.state(), State::HalfOpen, "one probe is not enough");
    payments.charge_async("probe-2").await.unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(calls(&payments), 12);
    // The sync method's breaker is another one, untouched.
    assert_eq!(registry.snapshot("payments").unwrap().calls, 0);
}
