//! Ids and sharing of generated breakers (seed 001, "Sharing and instance ids"): one `name`
//! shares one breaker; the same name with other settings is the registry's coded conflict at
//! `new`, naming both methods; a registry's `instances.<id>` overrides the attribute; and a
//! cancelled async call records nothing and gives its probe slot back.
#![cfg(feature = "macros")]

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use cutout::clock::ManualClock;
use cutout::config::Config;
use cutout::{ErrorCode, Jitter, Registry, RejectReason, Rejected, State, TripWindow};

#[derive(Debug)]
enum ShopError {
    Down,
    Refused(Rejected),
}

impl From<Rejected> for ShopError {
    fn from(rejected: Rejected) -> Self {
        ShopError::Refused(rejected)
    }
}

#[cutout::resilient]
trait Orders {
    #[breaker(name = "orders", consecutive_failures = 2, break_duration = "10s")]
    fn place(&self, id: u32) -> Result<u32, ShopError>;

    #[breaker(name = "orders", consecutive_failures = 2, break_duration = "10s")]
    fn cancel(&self, id: u32) -> Result<u32, ShopError>;

    #[breaker(window_size = 10, break_duration = "30s")]
    fn lookup(&self, id: u32, verbose: &str) -> Result<u32, ShopError>;

    fn ping(&self) -> u8;
}

struct Failing;

impl Orders for Failing {
    fn place(&self, _: u32) -> Result<u32, ShopError> {
        Err(ShopError::Down)
    }
    fn cancel(&self, id: u32) -> Result<u32, ShopError> {
        Ok(id)
    }
    fn lookup(&self, id: u32, _: &str) -> Result<u32, ShopError> {
        Ok(id)
    }
    fn ping(&self) -> u8 {
        7
    }
}

#[test]
fn one_name_shares_one_breaker_between_methods() {
    let registry = Registry::new();
    let orders = OrdersResilient::new(Failing, &registry).unwrap();
    let ids: Vec<String> = registry
        .ids()
        .iter()
        .map(|id| id.as_str().to_owned())
        .collect();
    assert_eq!(
        ids,
        ["Orders#lookup(u32, &str)", "orders"],
        "one breaker for both named methods"
    );

    assert!(matches!(orders.place(1), Err(ShopError::Down)));
    assert!(matches!(orders.place(2), Err(ShopError::Down)));
    assert_eq!(registry.state("orders").unwrap(), State::Open);
    // `cancel` succeeds on its own, but shares the breaker `place` opened.
    assert!(
        matches!(orders.cancel(3), Err(ShopError::Refused(r)) if r.breaker().as_str() == "orders")
    );
    // The unnamed method has its own breaker, and the unannotated one is passed through.
    assert_eq!(orders.lookup(4, "x").unwrap(), 4);
    assert_eq!(orders.ping(), 7);
}

#[test]
fn a_second_wrapper_on_the_same_registry_shares_the_breakers() {
    let registry = Registry::new();
    let first = OrdersResilient::new(Failing, &registry).unwrap();
    let second = OrdersResilient::new(Failing, &registry).unwrap();
    let _ = first.place(1);
    let _ = second.place(1);
    assert_eq!(
        registry.state("orders").unwrap(),
        State::Open,
        "two failures over two wrappers"
    );
    assert_eq!(registry.len(), 2);
}

#[cutout::resilient]
#[allow(dead_code)] // `new` fails: the methods are never called.
trait Conflicting {
    #[breaker(name = "shared", window_size = 10)]
    fn first(&self) -> Result<(), ShopError>;

    #[breaker(name = "shared", window_size = 20)]
    fn second(&self, x: &str) -> Result<(), ShopError>;
}

struct Nothing;

impl Conflicting for Nothing {
    fn first(&self) -> Result<(), ShopError> {
        Ok(())
    }
    fn second(&self, _: &str) -> Result<(), ShopError> {
        Ok(())
    }
}

#[test]
fn the_same_name_with_other_settings_is_the_registrys_conflict_naming_both_methods() {
    let registry = Registry::new();
    let error = ConflictingResilient::new(Nothing, &registry)
        .err()
        .expect("a conflict");
    assert_eq!(error.code(), ErrorCode::SettingsConflict);
    assert!(error.is_conflict());
    assert_eq!(
        error.methods(),
        Some((Some("Conflicting#first()"), "Conflicting#second(&str)"))
    );
    let keys: Vec<_> = error.registry_error().unwrap().conflicting_keys().collect();
    assert_eq!(keys, ["window-size"]);
    assert_eq!(
        error.to_string(),
        "CUT-REG-001: breaker \"shared\" already exists with different settings: \
         window-size = 10 (existing), 20 (requested); declared by Conflicting#first() \
         (existing) and by Conflicting#second(&str) (requested)"
    );
}

#[test]
fn a_conflict_with_a_breaker_made_in_code_says_so() {
    let registry = Registry::new();
    registry.breaker("orders", Default::default()).unwrap();
    let error = OrdersResilient::new(Failing, &registry)
        .err()
        .expect("a conflict");
    assert_eq!(error.code(), ErrorCode::SettingsConflict);
    assert_eq!(error.methods(), Some((None, "Orders#place(u32)")));
    assert!(
        error
            .to_string()
            .contains("the existing breaker was made in code"),
        "{error}"
    );
}

#[test]
fn a_registrys_instances_section_overrides_the_attribute_key_by_key() {
    let config = Config::from_toml(
        r#"
        [defaults]
        jitter = "none"
        break-duration = "1s"

        [configs.slow]
        break-duration = "90s"

        [instances.orders]
        consecutive-failures = 5

        [instances."Orders#lookup(u32, &str)"]
        base-config = "slow"
        window-size = 50
        "#,
    )
    .unwrap();
    let registry = Registry::builder().config(config).build();
    OrdersResilient::new(Failing, &registry).unwrap();

    let orders = registry.get("orders").unwrap();
    assert_eq!(
        orders.settings().consecutive_failures(),
        Some(5),
        "the file's"
    );
    assert_eq!(
        orders.settings().break_duration().as_secs(),
        10,
        "the attribute's over [defaults]"
    );
    assert_eq!(
        orders.settings().jitter(),
        Jitter::None,
        "[defaults] under the attribute"
    );

    let lookup = registry.get("Orders#lookup(u32, &str)").unwrap();
    assert_eq!(
        lookup.settings().window(),
        TripWindow::Count(50),
        "the file's"
    );
    assert_eq!(
        lookup.settings().break_duration().as_secs(),
        90,
        "its base-config's"
    );
}

#[test]
fn settings_invalid_once_merged_fail_at_new_with_the_configs_code() {
    let config = Config::from_toml(
        r#"
        [instances."Orders#lookup(u32, &str)"]
        max-break-duration = "20s"
        "#,
    )
    .unwrap();
    let registry = Registry::builder().config(config).build();
    let error = OrdersResilient::new(Failing, &registry)
        .err()
        .expect("invalid settings");
    assert!(error.is_invalid_settings());
    assert_eq!(error.code(), ErrorCode::MaxBreakBelowBreak);
    // Valid on its own (the built-in 15 s break), not under the attribute's 30 s one.
    assert_eq!(
        error.to_string(),
        "CUT-CFG-004: invalid max-break-duration = \"20s\" in [instances.\"Orders#lookup(u32, &str)\"]: \
         break-duration = \"30s\" (from [#[breaker] of Orders#lookup(u32, &str)]); allowed a duration at least break-duration"
    );
}

#[cutout::resilient]
trait Slow {
    #[breaker(
        consecutive_failures = 1,
        break_duration = "10s",
        jitter = "none",
        half_open_probes = 1,
        probe_successes = 1
    )]
    async fn fetch(&self) -> Result<u32, ShopError>;
}

#[derive(Default)]
struct Hanging {
    hang: AtomicBool,
    fail: AtomicBool,
}

impl Slow for Hanging {
    async fn fetch(&self) -> Result<u32, ShopError> {
        if self.hang.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        if self.fail.load(Ordering::Relaxed) {
            return Err(ShopError::Down);
        }
        Ok(1)
    }
}

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test]
async fn a_cancelled_async_call_records_nothing_and_frees_its_probe_slot() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let slow = SlowResilient::new(Hanging::default(), &registry).unwrap();
    let breaker = registry.get("Slow#fetch()").unwrap();

    SlowResilient::delegate(&slow)
        .fail
        .store(true, Ordering::Relaxed);
    assert!(matches!(slow.fetch().await, Err(ShopError::Down)));
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);

    // The one probe starts, hangs, and is dropped: cancelled.
    SlowResilient::delegate(&slow)
        .hang
        .store(true, Ordering::Relaxed);
    {
        let mut probe = pin!(slow.fetch());
        assert!(
            poll_once(probe.as_mut()).is_pending(),
            "the probe is running"
        );
        // While it runs, its slot is taken.
        let mut second = pin!(slow.fetch());
        match poll_once(second.as_mut()) {
            Poll::Ready(Err(ShopError::Refused(r))) => {
                assert_eq!(r.reason(), RejectReason::HalfOpenFull)
            }
            other => panic!("expected a half-open refusal, got {other:?}"),
        }
    }
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "the cancelled probe decided nothing"
    );
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (0, 0),
        "and recorded nothing"
    );

    // Its slot is free again: the next call is the probe, and closes the breaker.
    SlowResilient::delegate(&slow)
        .hang
        .store(false, Ordering::Relaxed);
    SlowResilient::delegate(&slow)
        .fail
        .store(false, Ordering::Relaxed);
    assert_eq!(slow.fetch().await.unwrap(), 1);
    assert_eq!(breaker.state(), State::Closed);
}
