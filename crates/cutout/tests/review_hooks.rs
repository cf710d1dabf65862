//! Hostile review (issue 29) of the owner hooks (`open_gate_for`, `on_reset`), the live
//! shadow switch and `Transition::ThresholdExceeded`: each test is a behaviour the spec or the
//! docs promise, on real threads where it is about a race (bounded loops, barriers).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Event, Jitter, Settings, State, Transition, TripWindow, Verdict};

fn exceeded(events: &Mutex<Vec<Event>>) -> usize {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e.transition, Transition::ThresholdExceeded { .. }))
        .count()
}

/// A gated breaker at a 100% failure rate, with the failure-ratio rule configured and the
/// consecutive-failure rule left at its default (5): the ratio's threshold is reached and
/// the breaker stays closed, so `ThresholdExceeded { FailureRatio }` is due (event.rs: "raised
/// when an evaluation ... finds a rate rule's threshold reached ... and the breaker stays
/// closed"). The consecutive rule is judged first and, not being a rate rule, raises nothing,
/// so the crossing is never raised while the failures run on.
#[test]
fn a_gated_breaker_failing_every_call_raises_failure_rate_exceeded_with_the_default_consecutive_rule()
 {
    let breaker = Breaker::builder("gated")
        .settings(
            Settings::builder()
                // consecutive_failures left at its default, Some(5)
                .window(TripWindow::Count(10))
                .minimum_calls(10)
                .failure_ratio(Some(0.5))
                .jitter(Jitter::None)
                .adaptive(false)
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .open_gate(|_| false)
        .build();
    assert_eq!(breaker.settings().consecutive_failures(), Some(5));
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    for _ in 0..20 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
    assert_eq!(breaker.state(), State::Closed, "the gate kept it closed");
    let snapshot = breaker.snapshot();
    assert!(snapshot.suppressed_opens > 0);
    assert_eq!(
        exceeded(&events),
        1,
        "20 of 20 calls failed against a 50% failure ratio while the gate kept it closed; \
         suppressed opens: {}",
        snapshot.suppressed_opens
    );
}

/// Passing guard: a reset hook that panics is contained, the reset stands, the lock is not
/// poisoned and the hook is told of the next reset too.
#[test]
fn a_panicking_reset_hook_leaves_the_reset_standing_and_runs_again_next_time() {
    let told = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&told);
    let breaker = Breaker::builder("hook")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .on_reset(move |_| {
            seen.fetch_add(1, Ordering::Relaxed);
            panic!("hook down");
        })
        .build();
    for round in 1..=3 {
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), State::Open);
        breaker.reset();
        assert_eq!(breaker.state(), State::Closed, "round {round}");
        assert_eq!(breaker.snapshot().consecutive_opens, 0);
        assert_eq!(told.load(Ordering::Relaxed), round);
    }
}

/// Passing guard: a listener that resets the breaker from within its `Opened` event (on the
/// caller's thread, no lock held) does not deadlock; the breaker ends closed, with no growth,
/// the hook told once per reset.
#[test]
fn a_reset_from_within_a_listener_closes_the_breaker_and_tells_the_hook() {
    let told = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&told);
    let breaker = Breaker::builder("listener-reset")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .on_reset(move |_| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .build();
    let handle = breaker.clone();
    breaker.subscribe(move |e| {
        if matches!(e.transition, Transition::Opened { .. }) {
            handle.reset();
        }
    });
    for round in 1..=5 {
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), State::Closed, "round {round}");
        assert_eq!(breaker.snapshot().consecutive_opens, 0);
        assert_eq!(told.load(Ordering::Relaxed), round);
    }
}

/// Passing guard: the gate told the reason sees `RetryAfter` for a verdict recorded while
/// closed, and a trip rule's reason for a trip, on racing threads; a reset on a third thread
/// never lets an opening skip the gate (every opening from closed is one the gate allowed).
#[test]
fn every_opening_from_closed_passes_the_gate_while_resets_race_trips_and_retry_afters() {
    let allowed = Arc::new(AtomicUsize::new(0));
    let gate_count = Arc::clone(&allowed);
    let breaker = Breaker::builder("race")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .jitter(Jitter::None)
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .open_gate_for(move |_, _reason| {
            gate_count.fetch_add(1, Ordering::Relaxed);
            true
        })
        .build();
    let opened_from_closed = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&opened_from_closed);
    breaker.subscribe(move |e| {
        if let Transition::Opened {
            from: State::Closed,
            ..
        } = e.transition
        {
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    let rounds = 2_000;
    let barrier = Arc::new(Barrier::new(3));
    let workers: Vec<_> = (0..3)
        .map(|role| {
            let b = breaker.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                for _ in 0..rounds {
                    barrier.wait();
                    match role {
                        0 => b.reset(),
                        1 => {
                            let _ = b.call(|| Err::<(), _>("down"));
                        }
                        _ => {
                            if let Ok(p) = b.try_acquire() {
                                p.record_verdict(Verdict::OpenFor(Duration::from_secs(5)));
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        opened_from_closed.load(Ordering::Relaxed),
        allowed.load(Ordering::Relaxed),
        "every opening from closed asked the gate, and every allowed gate opened"
    );
}

/// After `shadow()` returned, no call started afterwards is refused (an open breaker, a
/// worker thread calling in a bounded loop, told of the switch through a flag set after the
/// switch returned); after `enforce()` returned, every call started afterwards is refused.
#[test]
fn the_shadow_switch_is_in_force_for_every_call_started_after_it_returned() {
    let breaker = Breaker::builder("shadow")
        .settings(Settings::builder().jitter(Jitter::None).build().unwrap())
        .clock(ManualClock::new())
        .build();
    assert!(breaker.open_for(Duration::from_secs(3600)));
    for round in 0..200 {
        let mode = Arc::new(AtomicU32::new(0)); // 0 unknown, 1 shadow, 2 enforce
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let b = breaker.clone();
            let mode = Arc::clone(&mode);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut wrong = Vec::new();
                let mut calls = 0u32;
                while !stop.load(Ordering::Acquire) && calls < 50_000 {
                    calls += 1;
                    let before = mode.load(Ordering::Acquire);
                    let refused = b.call(|| Ok::<_, ()>(())).is_err();
                    // The mode must hold from before the call to after it: a call that read
                    // "shadow" and ran into the switch back is rightly refused.
                    let after = mode.load(Ordering::Acquire);
                    match (before, after, refused) {
                        (1, 1, true) => wrong.push("refused after shadow() returned"),
                        (2, 2, false) => wrong.push("admitted after enforce() returned"),
                        _ => {}
                    }
                }
                wrong
            })
        };
        thread::yield_now();
        breaker.shadow();
        mode.store(1, Ordering::Release);
        thread::yield_now();
        // Unknown again while enforce() runs: a call that read "shadow" may start after the
        // switch back takes effect, and its refusal is then right.
        mode.store(0, Ordering::Release);
        breaker.enforce();
        mode.store(2, Ordering::Release);
        thread::yield_now();
        stop.store(true, Ordering::Release);
        let wrong = worker.join().unwrap();
        assert!(wrong.is_empty(), "round {round}: {wrong:?}");
        assert_eq!(breaker.state(), State::Open);
    }
}
