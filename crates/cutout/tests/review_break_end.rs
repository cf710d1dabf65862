//! Review of `Breaker::end_break_on_signal` (issue #28): the defects found, each a test named
//! after the behaviour the contract promises (its doc comment and DESIGN §2 "Giving traffic
//! back"), each shown failing on the code before its fix.
//!
//! The clock here is the test's own: [`Staged`] can lag its `recent` reading behind `now` (as
//! the trait allows and a `CoarseClock` does), and can run a hook at its next reading, which
//! stands for a thread preempted between reading the clock and taking the breaker's lock (the
//! loom model of the same race is `review_loom.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::Clock;
use cutout::{
    BreakEndReason, Breaker, Jitter, Recovery, Settings, SettingsBuilder, State, Transition,
};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
const HEALTH: BreakEndReason = BreakEndReason::HealthCheck;

type Hook = Box<dyn FnOnce() + Send>;

/// A clock the test moves by hand; `recent` lags `now` by `lag`; a hook, once armed, runs at
/// the next reading (of either kind), after the time is read and before it is returned.
#[derive(Clone, Default)]
struct Staged {
    nanos: Arc<AtomicU64>,
    lag: u64,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("nanos", &self.nanos)
            .finish()
    }
}

impl Staged {
    fn at(time: Duration, lag: Duration) -> Staged {
        let clock = Staged {
            lag: lag.as_nanos() as u64,
            ..Staged::default()
        };
        clock.nanos.store(time.as_nanos() as u64, Ordering::Relaxed);
        clock
    }

    fn advance(&self, by: Duration) {
        self.nanos
            .fetch_add(by.as_nanos() as u64, Ordering::Relaxed);
    }

    fn arm(&self, hook: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }

    fn read(&self, lag: u64) -> u64 {
        let time = self.nanos.load(Ordering::Relaxed).saturating_sub(lag);
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        time
    }
}

impl Clock for Staged {
    fn now(&self) -> u64 {
        self.read(0)
    }
    fn recent(&self) -> u64 {
        self.read(self.lag)
    }
}

type Seen = Arc<Mutex<Vec<Transition>>>;

fn build(clock: &Staged, settings: SettingsBuilder) -> (Breaker, Seen) {
    let settings = settings
        .break_duration(60 * SEC)
        .max_break_duration(240 * SEC)
        .jitter(Jitter::None)
        .consecutive_failures(Some(1))
        .probe_successes(1)
        .build()
        .unwrap();
    let breaker = Breaker::builder("review-break-end")
        .settings(settings)
        .clock(clock.clone())
        .seed(7)
        .build();
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    (breaker, seen)
}

fn fail(breaker: &Breaker) {
    let _ = breaker.call(|| Err::<(), _>(()));
}

fn ends(seen: &Seen) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|t| matches!(t, Transition::BreakEnded { .. }))
        .count()
}

/// A health check passes (age 0: now) on a closed breaker; before the call takes the lock, a
/// trip opens the breaker a second later. The evidence is a second older than the break it
/// would end, so it is stale and must do nothing. The call read the time before the lock and
/// `age > now - opened_at` saturates to `age > 0` when `now` is before the opening, so any
/// fresh-looking evidence ended the trip's break at once.
#[test]
fn a_signal_that_read_the_time_before_a_concurrent_trip_is_stale() {
    let clock = Staged::at(10 * SEC, Duration::ZERO);
    let (breaker, seen) = build(&clock, Settings::builder());
    let (tripper, time) = (breaker.clone(), clock.clone());
    clock.arm(move || {
        time.advance(SEC);
        fail(&tripper);
        assert_eq!(tripper.state(), State::Open, "the trip landed first");
    });
    let ended = breaker.end_break_on_signal(HEALTH, Duration::ZERO);
    assert_eq!(
        breaker.snapshot().opened_at,
        Some(11 * SEC),
        "the break began after the evidence (10 s)"
    );
    assert!(
        !ended,
        "evidence from 10 s ended a break that began at 11 s"
    );
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(ends(&seen), 0);
}

/// A breaker stamps a trip with its precise clock (the failing call was timed) and judged the
/// evidence's age against its lagging one (`Clock::recent`, which may lag by a bounded amount:
/// a `CoarseClock`'s resolution). A check that began 40 ms after the opening and passed 10 ms
/// later was then judged older than the break, and a host that came back was kept out.
#[test]
fn evidence_gathered_after_the_opening_is_not_stale_on_a_lagging_recent_clock() {
    let clock = Staged::at(10 * SEC, 100 * MS);
    let (breaker, seen) = build(&clock, Settings::builder());
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.snapshot().opened_at,
        Some(10 * SEC),
        "stamped precisely"
    );
    clock.advance(50 * MS);
    // Began at 10.040 s, 40 ms after the opening; it is 10.050 s now.
    assert!(
        breaker.end_break_on_signal(HEALTH, 10 * MS),
        "evidence from 40 ms after the opening judged stale"
    );
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(ends(&seen), 1);
}

/// DESIGN §2: "`Recovery::over(fraction)`: ramp length = fraction × the break just served".
/// A break ended early by a proven recovery served 2 s of its 60 s; the ramp after it, and
/// the snapshot's `current_break`, took the 60 s scheduled, so traffic came back over a
/// minute after the dependency was proven back (issue #28's goal is within 10 s).
#[test]
fn a_ramp_after_an_early_end_lasts_a_fraction_of_the_break_actually_served() {
    let clock = Staged::at(10 * SEC, Duration::ZERO);
    let (breaker, _) = build(
        &clock,
        Settings::builder().recovery(Some(Recovery::over(1.0))),
    );
    fail(&breaker);
    clock.advance(2 * SEC);
    assert!(breaker.end_break_on_signal(HEALTH, Duration::ZERO));
    let half_open_break = breaker.snapshot().current_break;
    breaker.call(|| Ok::<_, ()>(())).expect("the probe");
    assert_eq!(breaker.state(), State::Recovering);
    // 3 s of healthy calls, one every 100 ms: a ramp of 1.0 × 2 s has run out by then.
    for _ in 0..30 {
        clock.advance(100 * MS);
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    assert_eq!(
        breaker.state(),
        State::Closed,
        "still ramping 3 s after a 2 s break: {:?}",
        breaker.snapshot()
    );
    assert_eq!(half_open_break, Some(2 * SEC), "the break served was 2 s");
}
