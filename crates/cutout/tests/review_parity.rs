//! Review of the parity round (open_for / open_until, break growth, half-open timeout, initial
//! state, half-open retry-after, Verdict::OpenFor, serde): races, listeners, extreme inputs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use cutout::classify::Verdict;
use cutout::clock::ManualClock;
use cutout::{
    BreakSchedule, Breaker, HalfOpenTimeout, InitialState, Jitter, ManualAction, OpenReason,
    RejectReason, Settings, SettingsBuilder, State, Transition,
};

const SEC: Duration = Duration::from_secs(1);

fn base() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(10 * SEC)
        .max_break_duration(80 * SEC)
        .jitter(Jitter::None)
        .probe_successes(1)
        .adaptive(false)
}

fn breaker(settings: Settings, clock: &ManualClock) -> Breaker {
    Breaker::builder("review")
        .settings(settings)
        .clock(clock.clone())
        .build()
}

fn recorded(b: &Breaker) -> Arc<Mutex<Vec<Transition>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    b.subscribe(move |e| sink.lock().unwrap().push(e.transition));
    events
}

/// Runs `f` on a thread and fails if it does not finish within five seconds (a deadlock).
fn bounded(name: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(()) => handle.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            handle.join().unwrap();
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{name}: deadlocked"),
    }
}

fn refusal(b: &Breaker) -> (RejectReason, Option<Duration>) {
    let Err(refused) = b.try_acquire() else {
        panic!("expected a refusal");
    };
    (refused.reason(), refused.retry_after())
}

#[test]
fn concurrent_429s_of_one_generation_raise_one_event() {
    for _ in 0..20 {
        let clock = ManualClock::new();
        let b = breaker(base().build().unwrap(), &clock);
        let events = recorded(&b);
        let permits: Vec<_> = (0..8).map(|_| b.try_acquire_owned().unwrap()).collect();
        let barrier = Arc::new(Barrier::new(permits.len()));
        let threads: Vec<_> = permits
            .into_iter()
            .enumerate()
            .map(|(i, permit)| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    permit.record_verdict(Verdict::OpenFor(SEC * (i as u32 + 1)));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(matches!(
            events[0],
            Transition::Opened {
                reason: OpenReason::RetryAfter,
                from: State::Closed,
                ..
            }
        ));
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.snapshot().consecutive_opens, 0, "no growth");
    }
}

#[test]
fn a_stale_verdict_after_reset_isolate_or_open_for_does_nothing() {
    let clock = ManualClock::new();
    for control in 0..3 {
        let b = breaker(base().build().unwrap(), &clock);
        let events = recorded(&b);
        let stale = b.try_acquire().unwrap();
        match control {
            0 => b.reset(),
            1 => b.isolate(),
            _ => assert!(b.open_for(SEC)),
        }
        let before = (b.state(), b.peek(), b.break_remaining());
        stale.record_verdict(Verdict::OpenFor(30 * SEC));
        assert_eq!((b.state(), b.peek(), b.break_remaining()), before);
        assert!(events.lock().unwrap().is_empty(), "control {control}");
    }
    // A stale probe: the breaker re-opened by open_for while the probe ran.
    let b = breaker(base().build().unwrap(), &clock);
    assert!(b.open_for(SEC));
    clock.advance(SEC);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert!(b.open_for(5 * SEC));
    let events = recorded(&b);
    probe.record_verdict(Verdict::OpenFor(60 * SEC));
    assert_eq!(b.break_remaining(), Some(5 * SEC));
    assert!(events.lock().unwrap().is_empty());
}

#[test]
fn listeners_may_call_and_subscribe_on_a_retry_after_opening() {
    let clock = ManualClock::new();
    let b = breaker(base().build().unwrap(), &clock);
    let seen = Arc::new(AtomicUsize::new(0));
    {
        let inner = b.clone();
        let seen = seen.clone();
        b.subscribe(move |event| {
            if matches!(
                event.transition,
                Transition::Opened {
                    reason: OpenReason::RetryAfter,
                    ..
                }
            ) {
                let _ = inner.snapshot();
                let _ = inner.state();
                let _ = inner.opened_at();
                let _ = inner.try_acquire();
                let _ = inner.open_for(SEC);
                inner.subscribe(|_| {});
                seen.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let worker = b.clone();
    bounded("listener on RetryAfter", move || {
        let permit = worker.try_acquire().unwrap();
        permit.record_verdict(Verdict::OpenFor(7 * SEC));
    });
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    // The probe told to back off: the listener runs again, with no lock held.
    clock.advance(60 * SEC);
    let worker = b.clone();
    bounded("listener on a probe's RetryAfter", move || {
        let probe = worker.try_acquire().unwrap();
        assert!(probe.is_probe());
        probe.open_for(3 * SEC);
    });
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[test]
fn extreme_durations_never_panic_and_refusals_keep_a_retry_after() {
    let clock = ManualClock::new();
    let settings = base()
        .max_break_duration(Duration::MAX)
        .break_duration(Duration::MAX)
        .build()
        .unwrap();
    let b = breaker(settings, &clock);
    clock.advance(SEC);
    assert!(b.open_for(Duration::MAX));
    let (reason, after) = refusal(&b);
    assert_eq!(reason, RejectReason::Open);
    assert!(after.is_some_and(|a| a > 1_000_000 * SEC));
    assert!(b.open_until(Duration::MAX));
    assert!(refusal(&b).1.is_some());
    assert!(b.open_until(Duration::ZERO), "past: open for no time");
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    let (reason, after) = refusal(&b);
    assert_eq!(reason, RejectReason::HalfOpenFull);
    assert!(after.is_some());
    probe.record_verdict(Verdict::OpenFor(Duration::MAX));
    assert_eq!(b.state(), State::Open);
    assert!(refusal(&b).1.is_some());
    let _ = b.snapshot();
    b.reset();
    // Zero verdicts are ignored, from every role.
    b.try_acquire()
        .unwrap()
        .record_verdict(Verdict::OpenFor(Duration::ZERO));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().calls, 0);
}

#[test]
fn a_schedule_returning_duration_max_or_panicking_never_panics_the_breaker() {
    for jitter in [Jitter::None, Jitter::Full, Jitter::Equal] {
        let clock = ManualClock::new();
        clock.advance(SEC);
        let settings = base()
            .max_break_duration(Duration::MAX)
            .jitter(jitter)
            .break_schedule(Some(BreakSchedule::new(|n| {
                if n % 2 == 0 {
                    panic!("no break for {n}")
                }
                Duration::MAX
            })))
            .build()
            .unwrap();
        let b = breaker(settings, &clock);
        for _ in 0..3 {
            let _ = b.call(|| Err::<(), ()>(()));
        }
        assert_eq!(b.state(), State::Open);
        let _ = refusal(&b);
        let _ = b.snapshot();
        // The second opening's schedule panics: the multiplier's break is served.
        assert!(b.open_for(Duration::ZERO));
        let probe = b.try_acquire().unwrap();
        probe.failure();
        assert_eq!(b.state(), State::Open, "{jitter:?}");
        let _ = b.snapshot();
    }
}

#[test]
fn reset_returns_to_the_configured_initial_state_consistently() {
    let clock = ManualClock::new();
    clock.advance(SEC);
    let b = breaker(
        base()
            .initial_state(InitialState::Isolated)
            .build()
            .unwrap(),
        &clock,
    );
    assert_eq!(b.state(), State::Isolated);
    assert_eq!(b.peek().0, State::Isolated);
    assert_eq!(b.opened_at(), Some(SEC));
    assert!(!b.open_for(SEC), "isolation is stronger");
    assert_eq!(refusal(&b), (RejectReason::Isolated, None));
    b.disable();
    clock.advance(SEC);
    b.reset();
    let s = b.snapshot();
    assert_eq!(
        (s.state, b.state(), b.peek().0),
        (State::Isolated, State::Isolated, State::Isolated)
    );
    assert_eq!(s.opened_at, b.opened_at());
    assert_eq!(b.opened_at(), Some(2 * SEC));
    assert_eq!(s.last_manual_action, Some(ManualAction::Reset));
    assert_eq!(s.last_manual_action_at, Some(2 * SEC));

    let b = breaker(
        base()
            .initial_state(InitialState::Disabled)
            .build()
            .unwrap(),
        &clock,
    );
    assert!(!b.open_for(SEC));
    for _ in 0..5 {
        let _ = b.call(|| Err::<(), ()>(()));
    }
    assert_eq!(b.state(), State::Disabled);
    b.reset();
    let s = b.snapshot();
    assert_eq!((s.state, b.state()), (State::Disabled, State::Disabled));
    assert_eq!((s.opened_at, b.opened_at()), (None, None));
}

#[test]
fn a_retry_after_opening_from_closed_passes_the_open_gate() {
    let clock = ManualClock::new();
    let allow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gate = allow.clone();
    let b = Breaker::builder("gated")
        .settings(base().build().unwrap())
        .clock(clock.clone())
        .open_gate(move |_| gate.load(Ordering::SeqCst))
        .build();
    let events = recorded(&b);
    b.try_acquire()
        .unwrap()
        .record_verdict(Verdict::OpenFor(5 * SEC));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().suppressed_opens, 1);
    assert!(events.lock().unwrap().is_empty());
    allow.store(true, Ordering::SeqCst);
    b.try_acquire()
        .unwrap()
        .record_verdict(Verdict::OpenFor(500 * SEC));
    assert_eq!(
        b.break_remaining(),
        Some(80 * SEC),
        "capped by the max break"
    );
    assert_eq!(
        events.lock().unwrap()[..],
        [Transition::Opened {
            from: State::Closed,
            reason: OpenReason::RetryAfter,
            break_for: 80 * SEC,
        }]
    );
}

#[test]
fn half_open_full_retry_after_is_never_none_and_never_beyond_the_wait_left() {
    let clock = ManualClock::new();
    for wait in [None, Some(3 * SEC)] {
        for timeout in [HalfOpenTimeout::Open, HalfOpenTimeout::Close] {
            let b = breaker(
                base()
                    .max_wait_in_half_open(wait)
                    .half_open_timeout(timeout)
                    .build()
                    .unwrap(),
                &clock,
            );
            // A RetryAfter opening, then a zero-time manual open.
            b.try_acquire()
                .unwrap()
                .record_verdict(Verdict::OpenFor(4 * SEC));
            clock.advance(4 * SEC);
            let probe = b.try_acquire().unwrap();
            assert!(probe.is_probe());
            clock.advance(SEC);
            let (reason, after) = refusal(&b);
            assert_eq!(reason, RejectReason::HalfOpenFull);
            let after = after.expect("a retry-after");
            match wait {
                Some(w) => assert_eq!(after, w - SEC),
                None => assert!(after <= 4 * SEC, "{after:?}"),
            }
            drop(probe);
            assert!(b.open_for(Duration::ZERO));
            let _probe = b.try_acquire().unwrap();
            assert!(refusal(&b).1.is_some());
        }
    }
}

#[test]
fn open_for_racing_calls_and_verdicts_keeps_state_consistent() {
    let clock = ManualClock::new();
    let b = breaker(base().build().unwrap(), &clock);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..4 {
        let b = b.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match b.try_acquire() {
                    Ok(p) if i % 2 == 0 => p.record_verdict(Verdict::OpenFor(SEC)),
                    Ok(p) => p.success(),
                    Err(r) => {
                        if r.reason() != RejectReason::Isolated {
                            assert!(r.retry_after().is_some(), "{r:?}");
                        }
                    }
                }
            }
        }));
    }
    {
        let b = b.clone();
        let stop = stop.clone();
        let clock = clock.clone();
        threads.push(std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                match n % 4 {
                    0 => {
                        b.open_for(SEC);
                    }
                    1 => b.reset(),
                    2 => b.isolate(),
                    _ => {
                        b.open_until(Duration::ZERO);
                    }
                }
                clock.advance(SEC / 2);
                n += 1;
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    b.reset();
    let s = b.snapshot();
    assert_eq!((s.state, b.state()), (State::Closed, State::Closed));
    assert_eq!(s.consecutive_opens, 0);
    assert_eq!(s.opened_at, None);
}

#[cfg(feature = "serde")]
mod serde_paths {
    use super::*;

    #[test]
    fn nan_and_infinite_multipliers_through_serde_are_errors_not_panics() {
        for text in [
            "break-multiplier = nan",
            "break-multiplier = inf",
            "break-multiplier = -inf",
            "break-multiplier = 1e400",
            "break-multiplier = 0",
        ] {
            let read = std::panic::catch_unwind(|| toml::from_str::<Settings>(text));
            assert!(read.expect("no panic").is_err(), "{text}");
        }
        let json = std::panic::catch_unwind(|| {
            serde_json::from_str::<Settings>(
                r#"{"break-multiplier": 1e308, "break-duration": "99999999999999999999h"}"#,
            )
        });
        assert!(json.expect("no panic").is_err());
    }
}
