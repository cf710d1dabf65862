//! loom models of the breaker's concurrent protocol (DESIGN §4), through the public API only.
//!
//! Under `--cfg loom` the crate swaps its atomics, mutex, rwlock and `Arc` for loom's
//! (`src/loom.rs`), so every interleaving of the state word, the machine's lock and the
//! listeners' lock is explored up to the preemption bound. `ManualClock` keeps std atomics (not
//! modelled): every model sets the time before it spawns threads and never moves it after.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p cutout --release --test loom
//! ```

#![cfg(loom)]

use std::sync::Mutex;
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    BreakEndReason, Breaker, CloseReason, Jitter, OpenReason, OwnedPermit, Recovery, RejectReason,
    Settings, SettingsBuilder, State, Transition,
};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

const BREAK: Duration = Duration::from_secs(10);

/// Runs `f` under loom, with a preemption bound of 2 unless `LOOM_MAX_PREEMPTIONS` says otherwise.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_with_branches(1_000, f);
}

/// [`model`], with room for `branches` atomic operations in one execution (a model that warms
/// a breaker up with hundreds of calls before its threads start needs more than the default).
fn model_with_branches(branches: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = branches;
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

fn base() -> SettingsBuilder {
    Settings::builder()
        .jitter(Jitter::None)
        .break_duration(BREAK)
        .max_break_duration(BREAK * 8)
        .consecutive_failures(Some(1))
        .max_wait_in_half_open(None)
}

/// The transitions a breaker raised, in the order its listener saw them.
type Seen = std::sync::Arc<Mutex<Vec<Transition>>>;

fn build(settings: SettingsBuilder) -> (Breaker, ManualClock, Seen) {
    let clock = ManualClock::new();
    let breaker = Breaker::builder("loom")
        .settings(settings.build().expect("valid settings"))
        .clock(clock.clone())
        .seed(7)
        .build();
    let seen: Seen = std::sync::Arc::default();
    let sink = std::sync::Arc::clone(&seen);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    (breaker, clock, seen)
}

fn transitions(seen: &Seen) -> Vec<Transition> {
    seen.lock().unwrap().clone()
}

fn opened_count(seen: &Seen) -> usize {
    transitions(seen)
        .iter()
        .filter(|t| matches!(t, Transition::Opened { .. }))
        .count()
}

/// A breaker opened by one failure (before any thread exists) whose break has elapsed: the next
/// call is a probe. The event log is cleared so the threads' transitions are all it holds.
fn half_open(settings: SettingsBuilder) -> (Breaker, ManualClock, Seen) {
    let (breaker, clock, seen) = build(settings);
    breaker.try_acquire().expect("closed").failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(BREAK);
    assert_eq!(breaker.state(), State::HalfOpen);
    seen.lock().unwrap().clear();
    (breaker, clock, seen)
}

/// Takes probe permits until refused; returns them (held) so the caller decides when they drop.
fn take_all_probes(breaker: &Breaker) -> Vec<OwnedPermit> {
    let mut permits = Vec::new();
    while let Ok(permit) = breaker.try_acquire_owned() {
        assert!(permit.is_probe());
        permits.push(permit);
        assert!(permits.len() <= 64, "admission is unbounded");
    }
    permits
}

fn admission_never_exceeds(limit: u32, threads: usize) {
    model(move || {
        let (breaker, _clock, seen) = half_open(base().half_open_probes(limit).probe_successes(5));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || match breaker.try_acquire_owned() {
                    Ok(permit) => {
                        assert!(permit.is_probe());
                        Some(permit)
                    }
                    Err(refused) => {
                        assert_eq!(refused.reason(), RejectReason::HalfOpenFull);
                        assert!(refused.retry_after().is_some());
                        None
                    }
                })
            })
            .collect();
        // Every admitted permit is still held here, so all of them are in flight at once.
        let held: Vec<OwnedPermit> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect();
        let expected = threads.min(limit as usize);
        assert_eq!(held.len(), expected, "probes admitted concurrently");
        assert_eq!(breaker.snapshot().probes_in_flight, expected as u32);
        assert_eq!(transitions(&seen), [Transition::HalfOpened]);
        drop(held);
        assert_eq!(breaker.snapshot().probes_in_flight, 0);
        assert_eq!(take_all_probes(&breaker).len(), limit as usize);
    });
}

#[test]
fn half_open_admits_at_most_one_probe_among_two_threads() {
    admission_never_exceeds(1, 2);
}

#[test]
fn half_open_admits_at_most_one_probe_among_three_threads() {
    admission_never_exceeds(1, 3);
}

#[test]
fn half_open_admits_at_most_two_probes_among_three_threads() {
    admission_never_exceeds(2, 3);
}

#[test]
fn nothing_is_admitted_after_a_failed_probe_reopened_the_breaker() {
    model(|| {
        // Two probe slots, and one success would not close: only the failure decides.
        let (breaker, _clock, seen) = half_open(base().half_open_probes(2).probe_successes(2));
        let reopened = std::sync::Arc::new(AtomicBool::new(false));

        let failing = {
            let breaker = breaker.clone();
            let reopened = reopened.clone();
            thread::spawn(move || {
                if let Ok(permit) = breaker.try_acquire() {
                    permit.failure();
                    reopened.store(true, Ordering::Release);
                }
            })
        };
        let late = {
            let breaker = breaker.clone();
            let reopened = reopened.clone();
            thread::spawn(move || {
                let after_reopen = reopened.load(Ordering::Acquire);
                match breaker.try_acquire() {
                    Ok(permit) => {
                        assert!(!after_reopen, "admitted after the failed probe re-opened");
                        assert!(permit.is_probe());
                        // Recorded after the re-open, this success is from an older
                        // generation and must not count as a probe of the new break.
                        permit.success();
                    }
                    Err(refused) => {
                        if after_reopen {
                            assert_eq!(refused.reason(), RejectReason::Open);
                            assert_eq!(refused.retry_after(), Some(BREAK * 2));
                        }
                    }
                }
            })
        };
        failing.join().unwrap();
        late.join().unwrap();

        // With two slots the failing thread always got one, so the breaker re-opened once.
        assert!(reopened.load(Ordering::Acquire));
        assert_eq!(breaker.state(), State::Open);
        let refused = breaker.try_acquire().map(drop).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::Open);
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.consecutive_opens, 2);
        assert_eq!(snapshot.probes_in_flight, 0);
        // One half-open and one re-open. Listeners run outside the lock on the thread that
        // caused each transition, so across threads they may see them in either order.
        let mut seen = transitions(&seen);
        seen.sort_by_key(|t| matches!(t, Transition::Opened { .. }));
        assert_eq!(
            seen,
            [
                Transition::HalfOpened,
                Transition::Opened {
                    from: State::HalfOpen,
                    reason: OpenReason::ProbeFailed,
                    break_for: BREAK * 2,
                },
            ]
        );
    });
}

fn racing_trips(consecutive: u32) {
    model(move || {
        let (breaker, _clock, seen) = build(base().consecutive_failures(Some(consecutive)));
        // The failures before the race bring the count one short of the trip.
        for _ in 1..consecutive {
            breaker.try_acquire().expect("closed").failure();
        }
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || match breaker.try_acquire() {
                    Ok(permit) => permit.failure(),
                    Err(refused) => assert_eq!(refused.reason(), RejectReason::Open),
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(breaker.state(), State::Open);
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.consecutive_opens, 1, "opened more than once");
        assert_eq!(snapshot.current_break, Some(BREAK), "the break grew");
        assert_eq!(
            opened_count(&seen),
            1,
            "Opened events: {:?}",
            transitions(&seen)
        );
    });
}

#[test]
fn two_tripping_failures_at_once_open_once_with_one_event() {
    racing_trips(1);
}

#[test]
fn two_failures_completing_the_count_at_once_open_once_with_one_event() {
    racing_trips(2);
}

#[test]
fn a_closed_permit_failing_after_the_break_does_not_reopen_half_open() {
    model(|| {
        let (breaker, clock, seen) = build(base().half_open_probes(1).probe_successes(1));
        // Taken while closed, before the trip: its generation is the closed one.
        let old = breaker.try_acquire_owned().expect("closed");
        breaker.try_acquire().expect("closed").failure();
        clock.advance(BREAK);
        seen.lock().unwrap().clear();

        let stale = thread::spawn(move || old.failure());
        let probe = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                let permit = breaker.try_acquire().expect("the only probe");
                permit.success();
            })
        };
        stale.join().unwrap();
        probe.join().unwrap();

        // Whatever the order, the stale failure decided nothing: the probe closed the breaker.
        assert_eq!(breaker.state(), State::Closed);
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.calls, 0);
        assert_eq!(snapshot.consecutive_failures, 0);
        assert_eq!(snapshot.consecutive_opens, 0);
        assert_eq!(
            transitions(&seen),
            [
                Transition::HalfOpened,
                Transition::Closed {
                    from: State::HalfOpen,
                    reason: CloseReason::ProbesSucceeded,
                }
            ]
        );
    });
}

#[test]
fn a_closing_and_a_reopening_probe_decide_once() {
    model(|| {
        // Two probes in flight; one success closes, one failure re-opens: whichever records
        // first decides and the other is from an older generation.
        let (breaker, _clock, seen) = half_open(base().half_open_probes(2).probe_successes(1));
        let success = breaker.try_acquire_owned().expect("first probe");
        let failure = breaker.try_acquire_owned().expect("second probe");
        seen.lock().unwrap().clear();

        let a = thread::spawn(move || success.success());
        let b = thread::spawn(move || failure.failure());
        a.join().unwrap();
        b.join().unwrap();

        let seen = transitions(&seen);
        assert_eq!(seen.len(), 1, "exactly one decision: {seen:?}");
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.probes_in_flight, 0);
        match seen[0] {
            Transition::Closed { from, .. } => {
                assert_eq!(from, State::HalfOpen);
                assert_eq!(breaker.state(), State::Closed);
                // The late failure must not have entered the fresh window.
                assert_eq!((snapshot.calls, snapshot.consecutive_failures), (0, 0));
                assert_eq!(snapshot.opened_at, None);
            }
            Transition::Opened { from, reason, .. } => {
                assert_eq!((from, reason), (State::HalfOpen, OpenReason::ProbeFailed));
                assert_eq!(breaker.state(), State::Open);
                assert_eq!(snapshot.consecutive_opens, 2);
            }
            other => panic!("unexpected transition {other:?}"),
        }
    });
}

#[test]
fn reset_racing_a_tripping_failure_ends_closed_and_empty() {
    model(|| {
        let (breaker, _clock, seen) = build(base());
        let permit = breaker.try_acquire_owned().expect("closed");
        let trip = thread::spawn(move || permit.failure());
        let reset = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.reset())
        };
        trip.join().unwrap();
        reset.join().unwrap();

        // Either the failure tripped before the reset, or it arrived from an older generation.
        assert_eq!(breaker.state(), State::Closed);
        let snapshot = breaker.snapshot();
        assert_eq!((snapshot.calls, snapshot.failures), (0, 0));
        assert_eq!(snapshot.consecutive_failures, 0);
        assert_eq!(snapshot.consecutive_opens, 0);
        assert_eq!(snapshot.opened_at, None);
        assert!(opened_count(&seen) <= 1);
        assert!(breaker.try_acquire().is_ok());
    });
}

#[test]
fn isolate_racing_a_closing_probe_stays_isolated() {
    model(|| {
        let (breaker, _clock, seen) = half_open(base().half_open_probes(1).probe_successes(1));
        let probe = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                if let Ok(permit) = breaker.try_acquire() {
                    permit.success();
                }
            })
        };
        let isolate = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.isolate())
        };
        probe.join().unwrap();
        isolate.join().unwrap();

        assert_eq!(breaker.state(), State::Isolated);
        assert_eq!(breaker.snapshot().probes_in_flight, 0);
        let refused = breaker.try_acquire().map(drop).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::Isolated);
        // isolate() raises nothing; a Closed event only if the probe closed before it.
        assert!(
            transitions(&seen)
                .iter()
                .all(|t| !matches!(t, Transition::Opened { .. }))
        );
    });
}

fn dropped_probes_give_slots_back(limit: u32) {
    model(move || {
        let (breaker, _clock, _seen) = half_open(base().half_open_probes(limit).probe_successes(5));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    if let Ok(permit) = breaker.try_acquire() {
                        assert!(permit.is_probe());
                        if i == 0 {
                            drop(permit);
                        } else {
                            // Ignored gives the slot back the same way.
                            permit.ignored();
                        }
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.state, State::HalfOpen);
        assert_eq!(snapshot.probes_in_flight, 0, "a probe slot leaked");
        assert_eq!(snapshot.calls, 0, "an unrecorded probe was counted");
        assert_eq!(take_all_probes(&breaker).len(), limit as usize);
    });
}

#[test]
fn dropped_probe_permits_give_their_slot_back_limit_one() {
    dropped_probes_give_slots_back(1);
}

#[test]
fn dropped_probe_permits_give_their_slot_back_limit_two() {
    dropped_probes_give_slots_back(2);
}

/// Healthy successes are counted off the lock while no success can trip (`cells.rs`). A
/// success and a failure racing each other to the ratio threshold: in either sequential order
/// the second of them trips the breaker (the call that brings the window to `minimum_calls` can
/// trip it, even a success — DESIGN §2), so after both the breaker must be open, once.
#[test]
fn a_success_and_a_failure_racing_to_the_ratio_threshold_open_the_breaker() {
    model(|| {
        let (breaker, _clock, seen) = build(
            base()
                .consecutive_failures(None)
                .failure_ratio(Some(0.5))
                .window(cutout::TripWindow::Count(4))
                .minimum_calls(2),
        );
        let success = breaker.try_acquire_owned().expect("closed");
        let failure = breaker.try_acquire_owned().expect("closed");
        let a = thread::spawn(move || success.success());
        let b = thread::spawn(move || failure.failure());
        a.join().unwrap();
        b.join().unwrap();

        let snapshot = breaker.snapshot();
        assert_eq!(
            breaker.state(),
            State::Open,
            "lost open: both calls recorded ({} calls, {} failures) and the breaker is still closed",
            snapshot.calls,
            snapshot.failures
        );
        assert_eq!(
            transitions(&seen),
            [Transition::Opened {
                from: State::Closed,
                reason: OpenReason::FailureRatio,
                break_for: BREAK,
            }]
        );
    });
}

/// A call through `Breaker::call` admitted on a still breaker (closed, its window full of
/// successes) skips recording its success only if the word it loads at the end is the one it
/// was admitted on. Here it ends after another thread's failure, whatever the interleaving:
/// the failing thread raises a flag once its failure is recorded and the healthy call's closure
/// waits for it. So the success must count, after the failure, and end its run.
#[test]
fn a_still_call_ending_after_another_threads_failure_counts_after_it() {
    model(|| {
        let (breaker, _clock, _seen) = build(
            base()
                .consecutive_failures(Some(2))
                .failure_ratio(None)
                .window(cutout::TripWindow::Count(2))
                .adaptive(false),
        );
        // The first two count in this thread's cell; the third finds it holding the window's
        // size and takes the lock, which folds them in: the breaker is still.
        for _ in 0..3 {
            breaker.call(|| Ok::<(), ()>(())).expect("closed");
        }
        assert_eq!(breaker.snapshot().calls, 2);
        let failed = std::sync::Arc::new(AtomicBool::new(false));

        let failing = {
            let breaker = breaker.clone();
            let failed = failed.clone();
            thread::spawn(move || {
                // First a yield, so that loom preempts before this thread's first load
                // (tokio-rs/loom#392).
                thread::yield_now();
                breaker.call(|| Err::<(), ()>(())).expect_err("a failure");
                failed.store(true, Ordering::Release);
            })
        };
        let healthy = {
            let breaker = breaker.clone();
            let failed = failed.clone();
            thread::spawn(move || {
                thread::yield_now();
                breaker
                    .call(|| {
                        while !failed.load(Ordering::Acquire) {
                            thread::yield_now();
                        }
                        Ok::<(), ()>(())
                    })
                    .expect("closed: one failure does not trip");
            })
        };
        failing.join().unwrap();
        healthy.join().unwrap();

        let snapshot = breaker.snapshot();
        assert_eq!(
            (
                snapshot.calls,
                snapshot.failures,
                snapshot.consecutive_failures
            ),
            (2, 1, 0),
            "the success after the failure was not counted after it"
        );
        assert_eq!(breaker.state(), State::Closed);
    });
}

/// DESIGN §2 "Recovering": admission during the ramp is a counter, not a coin, and never
/// exceeds the fraction in force. At the ramp's start the fraction is the initial one (here
/// 0.5, and the clock does not move), so of the four calls two threads make at once, exactly
/// two are admitted whatever the interleaving, and the others are refused as `Ramp`.
#[test]
fn ramp_admission_never_exceeds_its_bound() {
    model(|| {
        let settings = base()
            .probe_successes(1)
            .recovery(Some(Recovery::over(1.0).initial_fraction(0.5)));
        let (breaker, _clock, _seen) = half_open(settings);
        breaker.try_acquire().expect("the probe").success();
        assert_eq!(breaker.state(), State::Recovering);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    let mut held = Vec::new();
                    for _ in 0..2 {
                        match breaker.try_acquire_owned() {
                            Ok(permit) => held.push(permit),
                            Err(refusal) => assert_eq!(refusal.reason(), RejectReason::Ramp),
                        }
                    }
                    held
                })
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap().len()).sum();
        assert_eq!(admitted, 2, "four calls at a fraction of 0.5");
    });
}

/// Settings for the models of counting off the lock: a count window of 100 judged on its
/// failure ratio only, not adaptive, so that only the cells and the trip rules are at play.
fn ratio_breaker(minimum: u32) -> (Breaker, ManualClock, Seen) {
    build(
        base()
            .consecutive_failures(None)
            .failure_ratio(Some(0.5))
            .minimum_calls(minimum)
            .window(cutout::TripWindow::Count(100))
            .adaptive(false),
    )
}

/// DESIGN §2 "Counting off the lock": the trip rules are evaluated after every fold. A window
/// of 9 failures and 9 successes (minimum 20) lets successes off the lock: no run of them can
/// trip it. A success (counted in its cell) races a failure (under the lock, which makes the
/// next success able to trip: 10 of 19 fail). In either order the window ends at 10 failures
/// of 20, at the threshold: whichever call comes second trips it. When the success lands in
/// its cell after the failure's fold, no one has judged it yet; the next call to take the lock
/// (a success, which after the failure cannot go off the lock) must fold it and trip before
/// counting itself, or the trip is lost (21 calls, 47.6%).
#[test]
fn a_success_counted_after_a_fold_is_judged_by_the_next_fold() {
    model(|| {
        let (breaker, _clock, seen) = ratio_breaker(20);
        for i in 0..18 {
            let _ = breaker.call(|| if i % 2 == 0 { Err(()) } else { Ok(()) });
        }
        let success = breaker.try_acquire_owned().expect("closed");
        let failure = breaker.try_acquire_owned().expect("closed");
        let a = thread::spawn(move || {
            thread::yield_now();
            success.success();
        });
        let b = thread::spawn(move || {
            thread::yield_now();
            failure.failure();
        });
        a.join().unwrap();
        b.join().unwrap();
        let _ = breaker.call(|| Ok::<(), ()>(()));
        assert_eq!(breaker.state(), State::Open, "a lost trip");
        assert_eq!(opened_count(&seen), 1);
    });
}

/// A success that read a fast word of one generation and lands after a reset has started the
/// next never counts in it (cells are tagged with their generation: there is no epoch to wrap),
/// and every success of the threads is counted once in the window or dropped with its
/// generation.
#[test]
fn a_success_racing_a_reset_never_counts_after_it() {
    model(|| {
        let (breaker, _clock, _seen) = ratio_breaker(20);
        let early = breaker.try_acquire_owned().expect("closed");
        let a = thread::spawn(move || {
            thread::yield_now();
            early.success();
        });
        let resetting = breaker.clone();
        let b = thread::spawn(move || {
            thread::yield_now();
            resetting.reset();
        });
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(breaker.snapshot().calls, 0, "a success of before the reset");
        breaker.call(|| Ok::<(), ()>(())).expect("closed");
        assert_eq!(breaker.snapshot().calls, 1);
    });
}

/// Successes of one thread counted off the lock while another records a failure under it:
/// each outcome is in the window exactly once, whatever the interleaving, and a read in the
/// middle sees no more than had started.
#[test]
fn successes_off_the_lock_racing_a_failure_count_once() {
    racing_successes_count_once(|| ratio_breaker(100), 0);
}

/// The same on the default settings past low traffic, the path busy production breakers take:
/// a time window, adaptive, seven calls in eight untimed (their successes read no clock, see
/// `front/mod.rs`), the eighth timed and its latency sample left in its line. (Under loom the
/// breaker samples above 64 calls a window instead of 8,192, so that 100 calls reach it.)
#[test]
fn successes_of_a_sampled_breaker_racing_a_failure_count_once() {
    racing_successes_count_once(
        || {
            build(
                Settings::builder()
                    .jitter(Jitter::None)
                    .max_wait_in_half_open(None),
            )
        },
        300,
    );
}

fn racing_successes_count_once(make: fn() -> (Breaker, ManualClock, Seen), warm: u64) {
    model_with_branches(10_000, move || {
        let (breaker, _clock, _seen) = make();
        for _ in 0..warm {
            breaker.call(|| Ok::<(), ()>(())).expect("closed");
        }
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    thread::yield_now();
                    if i == 0 {
                        breaker.call(|| Ok::<(), ()>(())).expect("closed");
                        breaker.call(|| Ok::<(), ()>(())).expect("closed");
                    } else {
                        breaker.call(|| Err::<(), ()>(())).expect_err("a failure");
                    }
                })
            })
            .collect();
        let seen = breaker.snapshot().calls;
        assert!(seen <= warm + 3, "{seen} calls seen of {}", warm + 3);
        for t in threads {
            t.join().unwrap();
        }
        let snapshot = breaker.snapshot();
        assert_eq!((snapshot.calls, snapshot.failures), (warm + 3, 1));
        assert_eq!(breaker.state(), State::Closed);
    });
}

/// A recovery signal racing the trip that opens the breaker: the signal either comes first
/// (closed: nothing to end) or ends the break the trip began (the evidence is gathered now,
/// after the opening); never a break ended that no one opened, and the state, the events and
/// what the next call gets agree.
#[test]
fn a_break_end_racing_a_trip_ends_at_most_the_break_it_began() {
    model(|| {
        let (breaker, _clock, seen) = build(base());
        let signal = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                breaker.end_break_on_signal(BreakEndReason::HealthCheck, Duration::ZERO)
            })
        };
        match breaker.try_acquire() {
            Ok(permit) => permit.failure(),
            Err(refused) => panic!("closed, yet refused: {refused:?}"),
        }
        let ended = signal.join().unwrap();
        let events = transitions(&seen);
        if ended {
            // Events are raised outside the lock, each by the thread that caused it, so the
            // listener may see the two in either order; the state says which came first.
            let opened = events
                .iter()
                .filter(|t| matches!(t, Transition::Opened { .. }))
                .count();
            let ends = events
                .iter()
                .filter(|t| matches!(t, Transition::BreakEnded { .. }))
                .count();
            assert_eq!((events.len(), opened, ends), (2, 1, 1), "{events:?}");
            assert_eq!(breaker.state(), State::HalfOpen);
            let probe = breaker.try_acquire().expect("the next call probes");
            assert!(probe.is_probe());
        } else {
            assert!(
                matches!(events.as_slice(), [Transition::Opened { .. }]),
                "{events:?}"
            );
            assert_eq!(breaker.state(), State::Open);
            assert_eq!(
                breaker.try_acquire().unwrap_err().reason(),
                RejectReason::Open
            );
        }
    });
}

/// Two recovery signals and a call at once on an open breaker: the break ends once (one
/// event), and at most one probe is admitted among the signal threads' and the call's.
#[test]
fn two_break_ends_and_a_call_at_once_end_the_break_once_and_admit_one_probe() {
    model(|| {
        let (breaker, _clock, seen) = build(base());
        breaker.try_acquire().expect("closed").failure();
        seen.lock().unwrap().clear();
        let signals: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    breaker.end_break_on_signal(BreakEndReason::PeerRecovered, Duration::ZERO)
                })
            })
            .collect();
        let admitted = breaker.try_acquire_owned().ok();
        let ended = signals
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ended| *ended)
            .count();
        assert_eq!(ended, 1, "the break ends exactly once");
        let events = transitions(&seen);
        assert!(
            matches!(events.as_slice(), [Transition::BreakEnded { .. }]),
            "{events:?}"
        );
        let mut probes = take_all_probes(&breaker);
        probes.extend(admitted);
        assert_eq!(probes.len(), 1, "one probe slot");
        assert!(probes[0].is_probe());
    });
}

/// A live switch into shadow mode racing a call to an open breaker: the call is refused
/// (before the switch) or runs uncounted as a would-be refusal (after it), never both, and
/// every call after the switch runs. The breaker stays open, with its one opening.
#[test]
fn a_shadow_switch_racing_a_call_to_an_open_breaker_refuses_it_or_lets_it_through_uncounted() {
    model(|| {
        let (breaker, _clock, seen) = build(base());
        breaker.try_acquire().expect("closed").failure();
        let switcher = breaker.clone();
        let switch = thread::spawn(move || assert!(switcher.shadow()));
        let raced = breaker.call(|| Ok::<_, ()>(()));
        switch.join().unwrap();
        let s = breaker.snapshot();
        match raced {
            Ok(()) => assert_eq!((s.shadow_refusals, s.refused_calls), (1, 0)),
            Err(error) => {
                assert_eq!(error.rejection().unwrap().reason(), RejectReason::Open);
                assert_eq!((s.shadow_refusals, s.refused_calls), (0, 1));
            }
        }
        breaker
            .call(|| Ok::<_, ()>(()))
            .expect("shadow refuses nothing");
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(opened_count(&seen), 1);
    });
}

/// The switch back (`enforce`) racing a call to an open shadow breaker: let through uncounted
/// before it, refused after it; every call after the switch is refused.
#[test]
fn an_enforce_switch_racing_a_call_to_an_open_shadow_breaker_lets_it_through_or_refuses_it() {
    model(|| {
        let (breaker, _clock, _seen) = build(base().shadow(true));
        breaker.try_acquire().expect("closed").failure();
        let switcher = breaker.clone();
        let switch = thread::spawn(move || assert!(switcher.enforce()));
        let raced = breaker.call(|| Ok::<_, ()>(()));
        switch.join().unwrap();
        let s = breaker.snapshot();
        match raced {
            Ok(()) => assert_eq!((s.shadow_refusals, s.refused_calls), (1, 0)),
            Err(error) => {
                assert_eq!(error.rejection().unwrap().reason(), RejectReason::Open);
                assert_eq!((s.shadow_refusals, s.refused_calls), (0, 1));
            }
        }
        let after = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
        assert_eq!(after.rejection().unwrap().reason(), RejectReason::Open);
    });
}

/// Resets `breaker` on a thread of its own, which then sets a flag; whether this thread saw it
/// set (so the reset happened before what it does next).
fn reset_racing(breaker: &Breaker) -> (thread::JoinHandle<()>, bool) {
    let reset_seen = std::sync::Arc::new(AtomicBool::new(false));
    let reset = {
        let breaker = breaker.clone();
        let reset_seen = std::sync::Arc::clone(&reset_seen);
        thread::spawn(move || {
            breaker.reset();
            reset_seen.store(true, Ordering::Release);
        })
    };
    (reset, reset_seen.load(Ordering::Acquire))
}

/// On the system clock a refusal while open is decided on the kernel's coarse clock against the
/// break's end the lock converted to its scale (`clock/kernel.rs`), published beside `until`
/// before the word. A call that has seen a reset (through a flag the reset's thread set after
/// it) is admitted, whichever converted end it can still read; and a call racing the reset is
/// refused only with the break's retry-after (never zero, never past the break), or admitted.
#[test]
fn a_call_after_a_reset_it_saw_is_never_refused_on_the_kernel_clock() {
    model(|| {
        // The system clock: the quick refusal reads the kernel's clock.
        let breaker = Breaker::builder("loom")
            .settings(base().build().expect("valid settings"))
            .seed(7)
            .build();
        assert!(breaker.call(|| Err::<(), _>(())).is_err());
        assert_eq!(breaker.state(), State::Open);
        let (reset, saw) = reset_racing(&breaker);
        match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(rejected) => {
                assert!(!saw, "refused after the reset it saw: {rejected}");
                // The retry-after is what is left of the break, read on the precise clock.
                let retry = rejected.retry_after().expect("an open breaker says when");
                assert!(retry > Duration::ZERO && retry <= BREAK, "{retry:?}");
            }
        }
        reset.join().unwrap();
        assert!(breaker.try_acquire().is_ok(), "closed after the reset");
    });
}

/// On the system clock an untimed success under a fast word is counted off the lock once the
/// kernel's coarse clock proves it before the counted successes' deadline, which the lock
/// converts and publishes beside `fast_until` (`clock/kernel.rs`). A success admitted before a
/// reset is of the old generation: finished before the reset it is cleared with the window,
/// after it (whether it has seen the reset, through a flag the reset's thread set, or not) it
/// is dropped, so it never counts in the window the reset began.
#[test]
fn a_success_after_a_reset_it_saw_never_counts_in_the_reset_window_on_the_kernel_clock() {
    model(|| {
        // The system clock, untimed calls (no latency timing), a time window: the fast word's
        // deadline is the bucket boundary, tested on the kernel's clock.
        let breaker = Breaker::builder("loom")
            .settings(base().adaptive(false).build().expect("valid settings"))
            .seed(7)
            .build();
        // One locked operation publishes the converted deadline.
        assert!(breaker.call(|| Ok::<(), ()>(())).is_ok());
        let permit = breaker.try_acquire().expect("closed");
        let (reset, saw) = reset_racing(&breaker);
        permit.success();
        reset.join().unwrap();
        // Before the reset it was cleared with the window; after it, it is of the old
        // generation and dropped: either way the reset's window holds nothing.
        assert_eq!(
            breaker.snapshot().calls,
            0,
            "a success admitted before the reset counted after it (seen: {saw})"
        );
    });
}
