//! Call observers (DESIGN §2 "Observers") and the snapshot's refused calls per state episode
//! (§2 "Control"), on the manual clock: what an observer sees of each kind of call, with its
//! duration when timed; that it sees every call of a breaker whose word would otherwise skip
//! counting; that a panicking one is contained; and the refused counts across a full
//! closed → open → half-open → open → half-open → closed cycle, isolated and reset.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::classify::{Outcome, Verdict};
use cutout::clock::ManualClock;
use cutout::observer::{Call, CallKind};
use cutout::{Breaker, Jitter, RejectReason, Settings, SettingsBuilder, State, TripWindow};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// Opens on the second consecutive failure for 10 s, one probe that closes, no jitter, not
/// adaptive: every count below is exact.
fn base() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(10 * SEC)
        .jitter(Jitter::None)
        .half_open_probes(1)
        .probe_successes(1)
        .adaptive(false)
}

/// What an observer saw: (breaker, kind, duration, slow).
type Seen = Arc<Mutex<Vec<(String, CallKind, Option<Duration>, bool)>>>;

fn recording() -> (Seen, impl Fn(&Call<'_>) + Send + Sync + 'static) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    let observer = move |call: &Call<'_>| {
        sink.lock().unwrap().push((
            call.breaker.to_string(),
            call.kind,
            call.duration,
            call.slow,
        ));
    };
    (seen, observer)
}

fn kinds(seen: &Seen) -> Vec<CallKind> {
    seen.lock().unwrap().iter().map(|s| s.1).collect()
}

fn observed(settings: SettingsBuilder) -> (Breaker, ManualClock, Seen) {
    let clock = ManualClock::new();
    let (seen, observer) = recording();
    let breaker = Breaker::builder("ledger")
        .settings(settings.build().unwrap())
        .clock(clock.clone())
        .observer(observer)
        .build();
    (breaker, clock, seen)
}

#[test]
fn an_observer_sees_each_kind_of_call_in_order() {
    let (breaker, clock, seen) = observed(base());
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    let _ = breaker.call_with(&|_: &Result<(), &str>| Outcome::Ignored, || Err("404"));
    let _ = breaker.call(|| Err::<(), _>("down"));
    let _ = breaker.call(|| Err::<(), _>("down")); // opens
    let _ = breaker.call(|| Ok::<_, ()>(())); // refused while open
    clock.advance(10 * SEC);
    let probe = breaker.try_acquire().unwrap(); // the one probe
    let _ = breaker.call(|| Ok::<_, ()>(())); // refused: half-open full
    probe.success(); // closes
    breaker.isolate();
    let _ = breaker.call(|| Ok::<_, ()>(())); // refused: isolated
    breaker.reset();
    breaker
        .try_acquire()
        .unwrap()
        .record_verdict(Verdict::OpenFor(7 * SEC));
    assert_eq!(
        kinds(&seen),
        [
            CallKind::Success,
            CallKind::Ignored,
            CallKind::Failure,
            CallKind::Failure,
            CallKind::Refused(RejectReason::Open),
            CallKind::Refused(RejectReason::HalfOpenFull),
            CallKind::Success,
            CallKind::Refused(RejectReason::Isolated),
            CallKind::OpenFor(7 * SEC),
        ]
    );
    assert!(seen.lock().unwrap().iter().all(|s| s.0 == "ledger"));
}

#[test]
fn timed_calls_carry_their_duration_and_whether_slow() {
    let clock = ManualClock::new();
    let (seen, observer) = recording();
    let breaker = Breaker::builder("search")
        .settings(
            base()
                .slow_call_threshold(Some(100 * MS))
                .slow_call_ratio(1.0)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .observer(observer)
        .build();
    let fast = breaker.try_acquire().unwrap();
    clock.advance(30 * MS);
    fast.success();
    let slow = breaker.try_acquire().unwrap();
    clock.advance(250 * MS);
    slow.success();
    let failed = breaker.try_acquire().unwrap();
    clock.advance(5 * MS);
    failed.failure();
    let seen = seen.lock().unwrap().clone();
    let got: Vec<_> = seen.iter().map(|s| (s.1, s.2, s.3)).collect();
    assert_eq!(
        got,
        [
            (CallKind::Success, Some(30 * MS), false),
            (CallKind::Success, Some(250 * MS), true),
            (CallKind::Failure, Some(5 * MS), false),
        ]
    );
}

#[test]
fn untimed_calls_and_refusals_have_no_duration() {
    let (breaker, _clock, seen) = observed(base());
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    breaker.isolate();
    let _ = breaker.call(|| Ok::<_, ()>(()));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.2.is_none() && !s.3), "{seen:?}");
}

/// A count window full of successes is the still word, whose healthy call records nothing at
/// all; an observer is one more consumer of every success, so none may be skipped. From two
/// threads, so that some successes go through the cells.
#[test]
fn an_observer_sees_every_healthy_call_of_a_count_window_full_of_successes() {
    let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sink = Arc::clone(&counted);
    let breaker = Breaker::builder("cache")
        .settings(
            Settings::builder()
                .window(TripWindow::Count(10))
                .adaptive(false)
                .build()
                .unwrap(),
        )
        .observer(move |call: &Call<'_>| {
            if call.kind == CallKind::Success {
                sink.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .build();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let breaker = breaker.clone();
            std::thread::spawn(move || {
                for _ in 0..50_000 {
                    breaker.call(|| Ok::<_, ()>(())).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(counted.load(std::sync::atomic::Ordering::Relaxed), 100_000);
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (10, 0));
}

#[test]
fn a_panicking_observer_harms_neither_the_caller_nor_the_breaker_nor_the_next_observer() {
    let (seen, observer) = recording();
    let breaker = Breaker::builder("fragile")
        .settings(base().build().unwrap())
        .observer(|_: &Call<'_>| panic!("observer bug"))
        .observer(observer)
        .build();
    assert_eq!(breaker.call(|| Ok::<_, ()>(7)).unwrap(), 7);
    let _ = breaker.call(|| Err::<(), _>(()));
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.state(), State::Open);
    assert!(breaker.call(|| Ok::<_, ()>(())).unwrap_err().is_rejected());
    assert_eq!(kinds(&seen).len(), 4, "the second observer saw every call");
}

#[test]
fn a_disabled_breaker_shows_its_observers_nothing() {
    let (breaker, _clock, seen) = observed(base());
    breaker.disable();
    for _ in 0..5 {
        let _ = breaker.call(|| Err::<(), _>(()));
    }
    assert!(kinds(&seen).is_empty());
}

#[test]
fn one_shared_observer_tells_breakers_apart_by_id() {
    let (seen, observer) = recording();
    let observer: Arc<dyn cutout::observer::CallObserver> = Arc::new(observer);
    let a = Breaker::builder("a")
        .shared_observer(Arc::clone(&observer))
        .build();
    let b = Breaker::builder("b").shared_observer(observer).build();
    a.call(|| Ok::<_, ()>(())).unwrap();
    let _ = b.call(|| Err::<(), _>(()));
    let seen = seen.lock().unwrap().clone();
    let got: Vec<_> = seen.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(got, [("a", CallKind::Success), ("b", CallKind::Failure)]);
}

/// resilience4j's not-permitted calls: kept from closed into open, counted while open and
/// in a full half-open, zero again when half-open starts, kept into the re-opening, zero
/// when the breaker closes.
#[test]
fn refused_counts_follow_each_state_episode_across_a_full_cycle() {
    let (breaker, clock, _) = observed(base());
    let refuse = |n: usize| {
        for _ in 0..n {
            assert!(breaker.call(|| Ok::<_, ()>(())).unwrap_err().is_rejected());
        }
    };
    let refused = || breaker.snapshot().refused_calls;
    assert_eq!(refused(), 0);
    let _ = breaker.call(|| Err::<(), _>(()));
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!((breaker.state(), refused()), (State::Open, 0));
    refuse(3);
    assert_eq!(refused(), 3, "counted while open");
    clock.advance(10 * SEC);
    assert_eq!(
        (breaker.state(), refused()),
        (State::HalfOpen, 0),
        "half-open starts at zero, before any call reaches it"
    );
    let probe = breaker.try_acquire().unwrap();
    refuse(2);
    assert_eq!(refused(), 2, "a full half-open counts");
    probe.failure();
    assert_eq!(
        (breaker.state(), refused()),
        (State::Open, 2),
        "the re-opening keeps the half-open's count"
    );
    refuse(4);
    assert_eq!(refused(), 6);
    clock.advance(20 * SEC); // the doubled break
    let probe = breaker.try_acquire().unwrap();
    assert_eq!(refused(), 0);
    refuse(1);
    probe.success();
    assert_eq!(
        (breaker.state(), refused()),
        (State::Closed, 0),
        "closing starts again"
    );
}

#[test]
fn isolation_and_reset_start_their_own_refused_counts() {
    let (breaker, _clock, _) = observed(base());
    let _ = breaker.call(|| Err::<(), _>(()));
    let _ = breaker.call(|| Err::<(), _>(()));
    for _ in 0..3 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    assert_eq!(breaker.snapshot().refused_calls, 3);
    breaker.isolate();
    assert_eq!(breaker.snapshot().refused_calls, 0);
    for _ in 0..5 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    assert_eq!(breaker.snapshot().refused_calls, 5);
    breaker.reset();
    assert_eq!(breaker.snapshot().refused_calls, 0);
    // An opening by hand keeps the closed episode's count (zero: closed refuses nothing).
    breaker.open_for(SEC);
    let _ = breaker.call(|| Ok::<_, ()>(()));
    assert_eq!(breaker.snapshot().refused_calls, 1);
}

/// Refusals while open are counted off the lock, on each thread's own line or (for threads
/// beyond the lines) on a shared counter: from more threads than this machine has cores,
/// every one is counted.
#[test]
fn every_refusal_from_many_threads_is_counted() {
    let breaker = Breaker::new(
        "flooded",
        Settings::builder()
            .consecutive_failures(Some(1))
            .break_duration(Duration::from_secs(3600))
            .max_break_duration(Duration::from_secs(3600))
            .build()
            .unwrap(),
    );
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.state(), State::Open);
    let threads = 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) + 3;
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (breaker, barrier) = (breaker.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..10_000 {
                    assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(breaker.snapshot().refused_calls, 10_000 * threads as u64);
}

#[test]
fn a_registry_observer_sees_every_breaker_it_builds() {
    let (seen, observer) = recording();
    let registry = cutout::Registry::builder().observer(observer).build();
    let settings = base().build().unwrap();
    let a = registry.breaker("a", settings.clone()).unwrap();
    let b = registry.breaker("b", settings).unwrap();
    a.call(|| Ok::<_, ()>(())).unwrap();
    let _ = b.call(|| Err::<(), _>(()));
    let seen = seen.lock().unwrap().clone();
    let got: Vec<_> = seen.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(got, [("a", CallKind::Success), ("b", CallKind::Failure)]);
}
