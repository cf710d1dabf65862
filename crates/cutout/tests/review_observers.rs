//! Adversarial review of call observers, refused counts per state episode, the `metrics`
//! feature built on observers and break-schedule validation.
//!
//! Tests marked `FAILS` in their doc comment showed a defect on the code as reviewed (each fixed
//! in the commit that added this file); the others
//! are guards for claims that held (paths `observers.rs` and `metrics_exposition.rs` do not
//! cover).
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-review cargo test -p cutout --test review_observers
//! CARGO_TARGET_DIR=/work/target-review cargo test -p cutout --features metrics --test review_observers
//! ```

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::classify::Verdict;
use cutout::clock::ManualClock;
use cutout::observer::{Call, CallKind};
use cutout::{
    BreakSchedule, Breaker, ErrorCode, Jitter, Recovery, RejectReason, Settings, SettingsBuilder,
    State,
};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// Opens on the second consecutive failure for 10 s, one probe that closes, no jitter, not
/// adaptive.
fn base() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(10 * SEC)
        .jitter(Jitter::None)
        .half_open_probes(1)
        .probe_successes(1)
        .adaptive(false)
}

/// (kind, duration, slow) of every call an observer saw.
type Seen = Arc<Mutex<Vec<(CallKind, Option<Duration>, bool)>>>;

fn recording() -> (Seen, impl Fn(&Call<'_>) + Send + Sync + 'static) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    (seen, move |call: &Call<'_>| {
        sink.lock()
            .unwrap()
            .push((call.kind, call.duration, call.slow))
    })
}

fn observed(settings: SettingsBuilder) -> (Breaker, ManualClock, Seen) {
    let clock = ManualClock::new();
    let (seen, observer) = recording();
    let breaker = Breaker::builder("review")
        .settings(settings.build().unwrap())
        .clock(clock.clone())
        .observer(observer)
        .build();
    (breaker, clock, seen)
}

fn kinds(seen: &Seen) -> Vec<CallKind> {
    seen.lock().unwrap().iter().map(|s| s.0).collect()
}

fn trip(breaker: &Breaker) {
    let _ = breaker.call(|| Err::<(), _>("down"));
    let _ = breaker.call(|| Err::<(), _>("down"));
    assert_eq!(breaker.state(), State::Open);
}

fn refuse(breaker: &Breaker, n: usize) {
    for _ in 0..n {
        assert!(breaker.call(|| Ok::<_, ()>(())).unwrap_err().is_rejected());
    }
}

/// A panic payload whose own drop panics: what `catch_unwind` hands back must be disposed of
/// without letting that second panic out.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("the payload's drop panicked");
    }
}

// ---------------------------------------------------------------------------------------
// Claim 4: a panicking observer harms nothing.
// ---------------------------------------------------------------------------------------

/// FAILS. `Observers::tell` (observer.rs) discards `catch_unwind`'s `Err(payload)` with
/// `let _ =`, which drops the payload on the caller's thread outside any `catch_unwind`: a
/// payload whose drop panics unwinds out of `tell`, into the caller's `call`, and skips every
/// later observer.
#[test]
fn an_observer_panic_whose_payload_panics_on_drop_reaches_neither_caller_nor_next_observer() {
    let (seen, observer) = recording();
    let breaker = Breaker::builder("bomb")
        .settings(base().build().unwrap())
        .clock(ManualClock::new())
        .observer(|_: &Call<'_>| std::panic::panic_any(PanicsOnDrop))
        .observer(observer)
        .build();
    let ran = catch_unwind(AssertUnwindSafe(|| breaker.call(|| Ok::<_, ()>(7))));
    assert!(
        matches!(ran, Ok(Ok(7))),
        "the caller got the observer's panic instead of its result"
    );
    assert_eq!(
        kinds(&seen),
        [CallKind::Success],
        "the second observer was skipped"
    );
}

/// Guard: a panicking observer on a probe's outcome and on a half-open refusal loses no probe
/// slot and leaves the lock usable (the observer runs after the outcome is recorded).
#[test]
fn a_panicking_observer_on_probes_loses_no_slot_and_poisons_nothing() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder("probe-panics")
        .settings(base().probe_successes(2).build().unwrap())
        .clock(clock.clone())
        .observer(|_: &Call<'_>| panic!("observer bug"))
        .build();
    trip(&breaker);
    clock.advance(10 * SEC);
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert!(breaker.try_acquire().is_err(), "half-open full");
    probe.success();
    let probe = breaker.try_acquire().expect("the slot came back");
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
}

// ---------------------------------------------------------------------------------------
// Claim 1: every call, exactly once, the right kind, duration and slow flag.
// ---------------------------------------------------------------------------------------

/// FAILS. `Call::slow` is documented as "timed, and over the slow threshold in force" (and
/// `cutout_slow_calls_total` as "timed calls over the slow threshold"), and an ignored timed
/// call over the threshold is reported slow; but `finish_open_for` (front/mod.rs) always
/// passes `slow = false`, so a 250 ms call answered with `Verdict::OpenFor` against a 100 ms
/// threshold is reported with its 250 ms and "not slow".
#[test]
fn an_open_for_call_over_the_slow_threshold_is_seen_as_slow_like_an_ignored_one() {
    let (breaker, clock, seen) = observed(
        base()
            .consecutive_failures(None)
            .slow_call_threshold(Some(100 * MS))
            .slow_call_ratio(1.0),
    );
    let ignored = breaker.try_acquire().unwrap();
    clock.advance(250 * MS);
    ignored.ignored();
    let told_to_wait = breaker.try_acquire().unwrap();
    clock.advance(250 * MS);
    told_to_wait.open_for(7 * SEC);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (CallKind::Ignored, Some(250 * MS), true),
            (CallKind::OpenFor(7 * SEC), Some(250 * MS), true),
        ]
    );
}

/// Guard: probes, a full half-open, ramp calls (timed, with their duration) and ramp
/// refusals, each seen once with its reason.
#[test]
fn probes_and_ramp_calls_are_seen_timed_and_ramp_refusals_with_their_reason() {
    let (breaker, clock, seen) = observed(
        base()
            .probe_successes(1)
            .break_duration(16 * SEC)
            .slow_call_threshold(Some(100 * MS))
            .slow_call_ratio(1.0)
            .recovery(Some(Recovery::over(0.25))),
    );
    trip(&breaker);
    clock.advance(16 * SEC);
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    let _ = breaker.try_acquire().unwrap_err();
    clock.advance(30 * MS);
    probe.success();
    assert_eq!(breaker.state(), State::Recovering);
    seen.lock().unwrap().clear();
    let (mut admitted, mut refused) = (0, 0);
    for _ in 0..20 {
        match breaker.try_acquire() {
            Ok(permit) => {
                clock.advance(3 * MS);
                permit.success();
                admitted += 1;
            }
            Err(rejected) => {
                assert_eq!(rejected.reason(), RejectReason::Ramp);
                refused += 1;
            }
        }
    }
    assert!(
        admitted > 0 && refused > 0,
        "{admitted} admitted, {refused} refused"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), admitted + refused);
    assert_eq!(
        seen.iter()
            .filter(|s| *s == &(CallKind::Success, Some(3 * MS), false))
            .count(),
        admitted
    );
    assert_eq!(
        seen.iter()
            .filter(|s| *s == &(CallKind::Refused(RejectReason::Ramp), None, false))
            .count(),
        refused
    );
    assert_eq!(breaker.snapshot().refused_calls, refused as u64);
}

/// Guard: a panicking closure, a dropped permit (borrowed and owned) and a dropped
/// `call_async` future are no calls; a refused `call_async` is a refusal.
#[test]
fn panics_dropped_permits_and_dropped_futures_are_no_calls() {
    let (breaker, clock, seen) = observed(base());
    let _ = catch_unwind(AssertUnwindSafe(|| {
        breaker.call(|| -> Result<(), ()> { panic!("the call panics") })
    }));
    let _ = catch_unwind(AssertUnwindSafe(|| {
        breaker.call_with(
            &cutout::classify::by_verdict(|_: &Result<(), ()>| Verdict::OpenFor(SEC)),
            || -> Result<(), ()> { panic!("the call panics") },
        )
    }));
    drop(breaker.try_acquire().unwrap());
    drop(breaker.try_acquire_owned().unwrap());
    // A future dropped before its end (polled once, pending), then one that runs to its end.
    {
        let mut pending = Box::pin(breaker.call_async(std::future::pending::<Result<(), ()>>()));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(pending.as_mut().poll(&mut cx).is_pending());
    }
    assert!(kinds(&seen).is_empty(), "{:?}", kinds(&seen));
    assert_eq!(
        block_on(breaker.call_async(async { Err::<(), _>(()) })),
        Err(())
    );
    let _ = breaker.call(|| Err::<(), _>(())); // the second failure opens
    let refused = block_on(breaker.call_async(async { Ok::<_, ()>(()) }));
    assert_eq!(refused, Err(()));
    assert_eq!(
        kinds(&seen),
        [
            CallKind::Failure,
            CallKind::Failure,
            CallKind::Refused(RejectReason::Open)
        ]
    );
    assert_eq!(breaker.snapshot().refused_calls, 1);
    assert_eq!(breaker.state(), State::Open);
    let _ = clock;
}

/// Polls a future that never waits on anything to its end.
fn block_on<T, E>(
    future: impl std::future::Future<Output = Result<T, cutout::Error<E>>>,
) -> Result<T, ()> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(result) = Future::poll(future.as_mut(), &mut cx) {
            return result.map_err(|_| ());
        }
    }
}

use std::future::Future;

/// Guard: a call admitted while closed whose success lands after the breaker opened (another
/// generation) is seen once, as a success, and decides nothing.
#[test]
fn a_call_finished_in_a_later_generation_is_seen_once_and_decides_nothing() {
    let (breaker, clock, seen) = observed(base());
    let slow = breaker.try_acquire().unwrap();
    trip(&breaker);
    slow.success();
    clock.advance(10 * SEC);
    let probe = breaker.try_acquire().unwrap();
    let old = breaker.try_acquire();
    assert!(old.is_err());
    probe.failure();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        kinds(&seen),
        [
            CallKind::Failure,
            CallKind::Failure,
            CallKind::Success,
            CallKind::Refused(RejectReason::HalfOpenFull),
            CallKind::Failure,
        ]
    );
}

/// Guard: in shadow mode nothing is refused, so observers see no refusal and the snapshot's
/// refused calls stay 0 while its shadow refusals count.
#[test]
fn a_shadow_breaker_shows_no_refusals_and_counts_them_as_shadow_refusals() {
    let (breaker, _clock, seen) = observed(base().shadow(true));
    trip(&breaker);
    for _ in 0..3 {
        assert_eq!(breaker.call(|| Ok::<_, ()>(1)).ok(), Some(1));
    }
    breaker.isolate();
    assert_eq!(breaker.call(|| Ok::<_, ()>(1)).ok(), Some(1));
    let seen = kinds(&seen);
    assert!(
        !seen.iter().any(|k| matches!(k, CallKind::Refused(_))),
        "{seen:?}"
    );
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.refused_calls, snapshot.shadow_refusals), (0, 4));
}

// ---------------------------------------------------------------------------------------
// Observers that call back into their breaker.
// ---------------------------------------------------------------------------------------

/// Guard: an observer may read its breaker (it runs with no lock held), sees its own call
/// already recorded, may subscribe a listener and may run a call through the breaker.
/// What an observer calling back saw: the call's kind, the state, the calls and the failures.
type CallBack = (CallKind, State, u64, u64);

#[test]
fn an_observer_may_call_back_into_its_breaker() {
    thread_local! {
        static INSIDE: Cell<bool> = const { Cell::new(false) };
    }
    let slot: Arc<Mutex<Option<Breaker>>> = Arc::default();
    let log: Arc<Mutex<Vec<CallBack>>> = Arc::default();
    let (weak, sink) = (Arc::clone(&slot), Arc::clone(&log));
    let subscribed = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&subscribed);
    let clock = ManualClock::new();
    let breaker = Breaker::builder("reentrant")
        .settings(base().build().unwrap())
        .clock(clock.clone())
        .observer(move |call: &Call<'_>| {
            let Some(breaker) = weak.lock().unwrap().clone() else {
                return;
            };
            let snapshot = breaker.snapshot();
            sink.lock().unwrap().push((
                call.kind,
                breaker.state(),
                snapshot.calls,
                snapshot.refused_calls,
            ));
            if matches!(call.kind, CallKind::Refused(_)) && !INSIDE.with(Cell::get) {
                INSIDE.with(|inside| inside.set(true));
                // A nested call from inside the observer: refused as well, and seen.
                assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
                let counter = Arc::clone(&count);
                breaker.subscribe(move |_| {
                    counter.fetch_add(1, Ordering::Relaxed);
                });
                INSIDE.with(|inside| inside.set(false));
            }
        })
        .build();
    *slot.lock().unwrap() = Some(breaker.clone());
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    trip(&breaker);
    refuse(&breaker, 1);
    clock.advance(10 * SEC);
    breaker.try_acquire().unwrap().success();
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            (CallKind::Success, State::Closed, 1, 0),
            (CallKind::Failure, State::Closed, 2, 0),
            // Open, showing the window that tripped it.
            (CallKind::Failure, State::Open, 3, 0),
            // The outer refusal is recorded before the observer runs; the nested one after.
            (CallKind::Refused(RejectReason::Open), State::Open, 3, 1),
            (CallKind::Refused(RejectReason::Open), State::Open, 3, 2),
            (CallKind::Success, State::Closed, 0, 0),
        ]
    );
    assert!(
        subscribed.load(Ordering::Relaxed) >= 2,
        "the listener subscribed from an observer heard the half-open and the close"
    );
    *slot.lock().unwrap() = None;
}

/// Guard: on a manual clock at its end (`u64::MAX`), timed calls, refusals and an open-for
/// verdict are seen without a panic, with a zero duration.
#[test]
fn observers_on_a_manual_clock_at_its_end() {
    let (breaker, clock, seen) = observed(
        base()
            .slow_call_threshold(Some(100 * MS))
            .slow_call_ratio(1.0),
    );
    clock.advance(Duration::MAX);
    let permit = breaker.try_acquire().unwrap();
    clock.advance(SEC);
    permit.success();
    breaker
        .try_acquire()
        .unwrap()
        .record_verdict(Verdict::OpenFor(SEC));
    let _ = breaker.call(|| Ok::<_, ()>(()));
    breaker.isolate();
    refuse(&breaker, 2);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], (CallKind::Success, Some(Duration::ZERO), false));
    assert_eq!(
        seen[1],
        (CallKind::OpenFor(SEC), Some(Duration::ZERO), false)
    );
    assert!(
        seen[seen.len() - 2..]
            .iter()
            .all(|s| s.0 == CallKind::Refused(RejectReason::Isolated))
    );
    assert_eq!(breaker.snapshot().refused_calls, 2);
}

// ---------------------------------------------------------------------------------------
// Claim 3: refused calls per state episode.
// ---------------------------------------------------------------------------------------

/// FAILS. A ramp that has run out reads Closed (`state()`, `snapshot().state`), and every
/// episode but open starts its refused count at zero; but `Machine::snapshot`
/// (machine/mod.rs, `refused_calls`) special-cases only the lazily half-open breaker, so the
/// lazily closed one still reports the ramp's refusals (while it does correct
/// `consecutive_opens` for exactly that case). The next locked operation's `settle` then
/// rebases and the count drops to 0: the same closed episode reads N, then 0.
#[test]
fn a_ramp_that_has_run_out_reads_closed_with_no_refused_calls() {
    let (breaker, clock, _) = observed(
        base()
            .break_duration(16 * SEC)
            .max_break_duration(64 * SEC)
            .recovery(Some(Recovery::over(0.25))),
    );
    trip(&breaker);
    clock.advance(16 * SEC);
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.state(), State::Recovering);
    // At the start the clock bounds the fraction at its initial 10%: about one call in ten
    // is admitted, and each success doubles the earned fraction up to 1.
    let mut refused = 0;
    for _ in 0..60 {
        match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 0);
    assert_eq!(breaker.snapshot().refused_calls, refused);
    clock.advance(60 * SEC); // well past the 4 s ramp
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(
        snapshot.refused_calls, 0,
        "closed begins at zero, as the lazily half-open does"
    );
}

/// FAILS. A lapsed break reads half-open with 0 refused calls (the snapshot's lazily half-open
/// case), and an opening keeps the count of the state it ends; but `open_for` from a lapsed
/// break goes through `Machine::force_open` → `enter_open` without `half_open()`, so no rebase
/// is taken and the previous open episode's refusals come back: 3, then 0, then 3 again.
#[test]
fn open_for_after_a_lapsed_break_keeps_the_half_opens_zero_not_the_old_opens_count() {
    let (breaker, clock, _) = observed(base());
    trip(&breaker);
    refuse(&breaker, 3);
    assert_eq!(breaker.snapshot().refused_calls, 3);
    clock.advance(10 * SEC);
    assert_eq!(
        (breaker.state(), breaker.snapshot().refused_calls),
        (State::HalfOpen, 0)
    );
    assert!(breaker.open_for(5 * SEC));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.snapshot().refused_calls,
        0,
        "the opening ended a half-open episode with no refusals"
    );
}

/// Guard: a manual opening of an open breaker (not lapsed) keeps its count, isolation from
/// open starts at zero, and a probe's retry-after opening keeps the half-open's count.
#[test]
fn refused_counts_across_manual_openings_and_retry_after_openings() {
    let (breaker, clock, _) = observed(base());
    trip(&breaker);
    refuse(&breaker, 2);
    assert!(breaker.open_for(30 * SEC));
    assert_eq!(breaker.snapshot().refused_calls, 2, "same open episode");
    refuse(&breaker, 1);
    assert_eq!(breaker.snapshot().refused_calls, 3);
    clock.advance(30 * SEC);
    let probe = breaker.try_acquire().unwrap();
    refuse(&breaker, 2);
    probe.open_for(SEC);
    assert_eq!(
        (breaker.state(), breaker.snapshot().refused_calls),
        (State::Open, 2)
    );
    breaker.disable();
    assert_eq!(breaker.snapshot().refused_calls, 0);
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.snapshot().refused_calls, 0);
}

/// Held by the tests whose system-clock reads must (not) go through the coarse clock.
static SYSTEM_CLOCK: Mutex<()> = Mutex::new(());

/// A breaker open for an hour, on `clock` (the system clock when `None`).
fn open_for_an_hour(id: &str, clock: Option<ManualClock>) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .break_duration(Duration::from_secs(3600))
        .max_break_duration(Duration::from_secs(3600))
        .build()
        .unwrap();
    let builder = Breaker::builder(id).settings(settings);
    let breaker = match clock {
        Some(clock) => builder.clock(clock).build(),
        None => builder.build(),
    };
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.state(), State::Open);
    breaker
}

/// Refuses `calls` times from a thread-local's destructor, as its thread exits; a panic there
/// (which would abort the process) is caught and counted in `panics`.
struct RefuseOnExit {
    breaker: Breaker,
    calls: u32,
    panics: Arc<AtomicU64>,
}

impl Drop for RefuseOnExit {
    fn drop(&mut self) {
        for _ in 0..self.calls {
            let refused = catch_unwind(AssertUnwindSafe(|| {
                self.breaker.call(|| Ok::<_, ()>(())).is_err()
            }));
            if !matches!(refused, Ok(true)) {
                self.panics.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

thread_local! {
    static ON_EXIT: std::cell::RefCell<Option<RefuseOnExit>> = const {
        std::cell::RefCell::new(None)
    };
}

/// Rounds of two or five threads at once (more than this machine's lines), each refusing 300
/// times and `on_exit` more from a thread-local destructor registered before (`early`) or after its
/// first refusal: (refusals expected, panics caught in destructors).
fn refuse_from_exiting_threads(breaker: &Breaker, rounds: u32, on_exit: u32) -> (u64, u64) {
    let panics = Arc::new(AtomicU64::new(0));
    let mut expected = 0u64;
    for round in 0..rounds {
        let threads = if round % 3 == 0 { 5 } else { 2 };
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let breaker = breaker.clone();
                let panics = Arc::clone(&panics);
                std::thread::spawn(move || {
                    let early = (round + i) % 2 == 0;
                    let register = || {
                        ON_EXIT.with(|slot| {
                            *slot.borrow_mut() = Some(RefuseOnExit {
                                breaker: breaker.clone(),
                                calls: on_exit,
                                panics: Arc::clone(&panics),
                            });
                        });
                    };
                    if early {
                        register();
                    }
                    for _ in 0..300 {
                        assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
                    }
                    if !early {
                        register();
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        expected += u64::from(threads) * u64::from(300 + on_exit);
        assert_eq!(
            breaker.snapshot().refused_calls,
            expected - panics.load(Ordering::Relaxed),
            "round {round}"
        );
    }
    (expected, panics.load(Ordering::Relaxed))
}

/// Guard: threads that refuse and exit one after another (each handing its slot, and so its
/// line, to the next), threads beyond the lines, and refusals made from a thread-local's
/// destructor while the thread exits, before and after its slot is given back: none lost.
#[test]
fn refusals_from_replaced_threads_and_tls_destructors_are_all_counted() {
    let breaker = open_for_an_hour("exits", Some(ManualClock::new()));
    let (expected, panics) = refuse_from_exiting_threads(&breaker, 24, 7);
    assert_eq!(panics, 0);
    assert_eq!(breaker.snapshot().refused_calls, expected);
}

/// FAILS. The same on the default (system) clock: a refusal from a thread-local destructor
/// that runs after quanta's own thread-local is gone panics in the clock read
/// (`SystemClock::now` → `quanta::Instant::now` → `quanta::get_now`, whose `mock` feature,
/// on by default, looks up the thread-local `CLOCK_OVERRIDE` on every read), a panic that
/// aborts the process when not caught (as here, in `RefuseOnExit::drop`). The workspace's
/// `quanta = "0.13"` takes quanta's default features (`flaky_tests`, `mock`): with
/// `default-features = false` the read is a plain TSC read, without a thread-local lookup on
/// every clock read of the hot path either.
#[test]
fn a_refusal_from_a_thread_local_destructor_on_the_system_clock_does_not_panic() {
    // Not while the coarse clock of the test below runs: its reads skip quanta.
    let _alone = SYSTEM_CLOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let breaker = open_for_an_hour("exits-system-clock", None);
    let (expected, panics) = refuse_from_exiting_threads(&breaker, 1, 1);
    assert_eq!(
        panics, 0,
        "refusals that panicked in a thread-local destructor"
    );
    assert_eq!(breaker.snapshot().refused_calls, expected);
}

/// Guard: refusals decided on the inlined quick path (a `CoarseClock` running, the system
/// clock) are counted and seen, from several threads.
#[test]
fn quick_path_refusals_under_a_coarse_clock_are_counted_and_observed() {
    let _alone = SYSTEM_CLOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let _coarse = cutout::clock::CoarseClock::start(MS).expect("no other coarse clock here");
    let told = Arc::new(AtomicU64::new(0));
    let sink = Arc::clone(&told);
    let breaker = Breaker::builder("coarse")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .break_duration(Duration::from_secs(3600))
                .max_break_duration(Duration::from_secs(3600))
                .build()
                .unwrap(),
        )
        .observer(move |call: &Call<'_>| {
            if call.kind == CallKind::Refused(RejectReason::Open) {
                sink.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build();
    let _ = breaker.call(|| Err::<(), _>(()));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let breaker = breaker.clone();
            std::thread::spawn(move || {
                for _ in 0..5_000 {
                    assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(told.load(Ordering::Relaxed), 20_000);
    assert_eq!(breaker.snapshot().refused_calls, 20_000);
}

// ---------------------------------------------------------------------------------------
// Claim 6: break-schedule validation.
// ---------------------------------------------------------------------------------------

/// FAILS. `BreakSchedule::check_grows` (settings.rs) compares neighbours only, and skips an
/// open whose call panics by leaving `None` in the list, so `windows(2)` never compares the
/// breaks on either side of it: 60 s, (panic), 1 s passes, although the breaker then serves
/// 60 s, the multiplier's 20 s, 1 s, 1 s …
#[test]
fn a_schedule_that_shrinks_across_a_panicking_open_is_refused() {
    let schedule = BreakSchedule::new(|opens| match opens {
        1 => 60 * SEC,
        2 => panic!("no break for the second open"),
        _ => SEC,
    });
    let built = base().break_schedule(Some(schedule)).build();
    assert_eq!(
        built.err().map(|e| e.code()),
        Some(ErrorCode::BreakScheduleShrinks)
    );
}

/// FAILS. `check_grows` discards the panic payload inside `.ok()`, outside any
/// `catch_unwind`: a schedule whose panic payload panics on drop makes `build()` panic, where
/// validation must answer `Ok` or a coded error. (`backoff::computed_break` has the same
/// `map_or_else(|_| …)` shape under the breaker's lock.)
#[test]
fn schedule_validation_never_panics_even_on_a_payload_that_panics_on_drop() {
    let schedule = BreakSchedule::new(|opens| {
        if opens == 3 {
            std::panic::panic_any(PanicsOnDrop);
        }
        opens * SEC
    });
    let built = catch_unwind(AssertUnwindSafe(|| {
        base().break_schedule(Some(schedule)).build()
    }));
    assert!(built.is_ok(), "validation panicked");
}

/// Guard: shrinking anywhere in the first 16 opens is refused, a shrink after them is out of
/// reach, and equal neighbours pass.
#[test]
fn schedule_validation_edges() {
    for shrink_at in 2..=16u32 {
        let schedule =
            BreakSchedule::new(move |opens| if opens >= shrink_at { SEC } else { 2 * SEC });
        let error = base().break_schedule(Some(schedule)).build().unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::BreakScheduleShrinks,
            "at {shrink_at}"
        );
    }
    let late = BreakSchedule::new(|opens| if opens > 16 { SEC } else { 2 * SEC });
    assert!(base().break_schedule(Some(late)).build().is_ok());
    let extremes = BreakSchedule::new(|opens| {
        if opens == 1 {
            Duration::ZERO
        } else {
            Duration::MAX
        }
    });
    assert!(base().break_schedule(Some(extremes)).build().is_ok());
}

// ---------------------------------------------------------------------------------------
// Claim 5: the `metrics` feature.
// ---------------------------------------------------------------------------------------

#[cfg(feature = "metrics")]
mod metrics_feature {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    use ::metrics::{
        Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    use super::*;

    /// Called before a state gauge is set: (the gauge's `state` label, the value).
    type Hook = Box<dyn Fn(&str, f64) + Send + Sync>;

    /// A recorder whose state gauges can be inspected and whose every set can be held up.
    #[derive(Default)]
    struct Hooked {
        gauges: Mutex<Vec<Arc<StateGauge>>>,
        hook: Arc<Mutex<Option<Arc<Hook>>>>,
    }

    struct StateGauge {
        state: String,
        value: Mutex<f64>,
        hook: Arc<Mutex<Option<Arc<Hook>>>>,
    }

    impl GaugeFn for StateGauge {
        fn increment(&self, value: f64) {
            *self.value.lock().unwrap() += value;
        }
        fn decrement(&self, value: f64) {
            *self.value.lock().unwrap() -= value;
        }
        fn set(&self, value: f64) {
            let hook = self.hook.lock().unwrap().clone();
            if let Some(hook) = hook {
                hook(&self.state, value);
            }
            *self.value.lock().unwrap() = value;
        }
    }

    impl Recorder for Hooked {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
            Counter::noop()
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            if key.name() != cutout::metrics::STATE {
                return Gauge::noop();
            }
            let state = key
                .labels()
                .find(|label| label.key() == "state")
                .map(|label| label.value().to_owned())
                .unwrap_or_default();
            let gauge = Arc::new(StateGauge {
                state,
                value: Mutex::new(f64::NAN),
                hook: Arc::clone(&self.hook),
            });
            self.gauges.lock().unwrap().push(Arc::clone(&gauge));
            Gauge::from_arc(gauge)
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    impl Hooked {
        /// The states whose gauge reads 1.
        fn at_one(&self) -> Vec<String> {
            self.gauges
                .lock()
                .unwrap()
                .iter()
                .filter(|g| *g.value.lock().unwrap() == 1.0)
                .map(|g| g.state.clone())
                .collect()
        }
    }

    /// FAILS. `Breaker::refresh_metrics` (control.rs) takes its snapshot under the lock but
    /// sets the gauges after letting it go, while every locked operation sets them under the
    /// lock (locked.rs: "so gauge updates land in the order of the transitions"). A scrape's
    /// refresh that read "closed" and a trip that sets "open" then interleave their six
    /// stores: here the trip's `closed = 0` lands before the refresh's `closed = 1` and its
    /// `open = 1` after the refresh's `open = 0`, and two states read 1 (closed and open) on
    /// an open breaker, until the next change of state or refresh.
    #[test]
    fn a_refresh_racing_a_transition_never_leaves_two_states_at_one() {
        let recorder = Hooked::default();
        let breaker = ::metrics::with_local_recorder(&recorder, || {
            Breaker::builder("raced")
                .settings(base().consecutive_failures(Some(1)).build().unwrap())
                .clock(ManualClock::new())
                .build()
        });
        assert_eq!(recorder.at_one(), ["closed"]);

        let refresher = std::thread::current().id();
        let (paused_tx, paused_rx) = mpsc::channel::<()>();
        let (resume_tx, resume_rx) = mpsc::channel::<()>();
        let resume_rx = Mutex::new(resume_rx);
        let paused_tx = Mutex::new(paused_tx);
        let armed = AtomicBool::new(true);
        let tripper: Arc<Mutex<Option<std::thread::JoinHandle<()>>>> = Arc::default();
        let spawned = Arc::clone(&tripper);
        let trip_breaker = breaker.clone();
        let paused_rx = Mutex::new(paused_rx);
        let hook: Hook = Box::new(move |state, value| {
            let me = std::thread::current().id();
            if me == refresher && state == "closed" && value == 1.0 {
                if !armed.swap(false, Ordering::SeqCst) {
                    return;
                }
                // The refresh has read "closed" and let go of the lock: the trip runs now,
                // and is held just before it sets `open = 1` (it has set `closed = 0`).
                let breaker = trip_breaker.clone();
                *spawned.lock().unwrap() = Some(std::thread::spawn(move || {
                    let _ = breaker.call(|| Err::<(), _>("down"));
                }));
                // Bounded: once the refresh sets its gauges under the lock (the fix), the trip
                // waits for the lock instead and never pauses here.
                let _ = paused_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(2));
            } else if me != refresher && state == "open" && value == 1.0 {
                let _ = paused_tx.lock().unwrap().send(());
                let _ = resume_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(2));
            }
        });
        *recorder.hook.lock().unwrap() = Some(Arc::new(hook));
        breaker.refresh_metrics();
        let _ = resume_tx.send(());
        tripper.lock().unwrap().take().unwrap().join().unwrap();
        *recorder.hook.lock().unwrap() = None;

        assert_eq!(breaker.state(), State::Open);
        assert_eq!(recorder.at_one(), ["open"], "exactly the state() reports");
    }

    /// FAILS. The state gauge is to move "at every change of state" (crate `metrics` docs)
    /// and to follow what `state()` reports; but `locked` (locked.rs) compares
    /// `machine.state()` before and after, which for a lapsed break reads Open on both sides.
    /// A scrape's `refresh_metrics` during the lapse sets `half_open = 1` (as `state()`
    /// reports); `open_for` then re-opens the breaker, `machine.state()` stays Open, and
    /// unless the once-a-second refresh happens to be due the gauge keeps `half_open` for
    /// an open breaker (here: a locked operation in the second before took the refresh).
    #[test]
    fn a_manual_reopening_of_a_lapsed_break_moves_the_state_gauge_back_to_open() {
        let recorder = Hooked::default();
        let clock = ManualClock::new();
        let breaker = ::metrics::with_local_recorder(&recorder, || {
            Breaker::builder("lapsed")
                .settings(
                    base()
                        .consecutive_failures(Some(1))
                        .break_duration(200 * MS)
                        .build()
                        .unwrap(),
                )
                .clock(clock.clone())
                .build()
        });
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(recorder.at_one(), ["open"]);
        // A locked operation that changes no state (here a manual opening of the open
        // breaker; any would do) takes the once-a-second refresh.
        assert!(breaker.open_for(200 * MS));
        clock.advance(200 * MS);
        breaker.refresh_metrics();
        assert_eq!(recorder.at_one(), ["half_open"]);
        assert!(breaker.open_for(30 * SEC));
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(recorder.at_one(), ["open"], "the gauge follows state()");
    }

    /// Guard: sequentially, after `refresh_metrics` exactly the state `state()` reports is at
    /// 1 through every state, including a lapsed break and a ramp that has run out.
    #[test]
    fn after_each_refresh_exactly_the_reported_state_reads_one() {
        let recorder = Hooked::default();
        let clock = ManualClock::new();
        let breaker = ::metrics::with_local_recorder(&recorder, || {
            Breaker::builder("states")
                .settings(
                    base()
                        .break_duration(16 * SEC)
                        .max_break_duration(64 * SEC)
                        .recovery(Some(Recovery::over(0.25)))
                        .build()
                        .unwrap(),
                )
                .clock(clock.clone())
                .build()
        });
        let check = |label: &str| {
            breaker.refresh_metrics();
            assert_eq!(
                recorder.at_one(),
                [label],
                "state() = {:?}",
                breaker.state()
            );
            assert_eq!(breaker.state().as_str(), label);
        };
        check("closed");
        trip(&breaker);
        check("open");
        clock.advance(16 * SEC);
        check("half_open");
        breaker.try_acquire().unwrap().success();
        check("recovering");
        // Earn the whole fraction (about one call in ten admitted), then let the clock end it.
        for _ in 0..60 {
            if let Ok(permit) = breaker.try_acquire() {
                permit.success();
            }
        }
        clock.advance(60 * SEC);
        check("closed");
        breaker.isolate();
        check("isolated");
        breaker.disable();
        check("disabled");
        breaker.reset();
        check("closed");
    }
}
