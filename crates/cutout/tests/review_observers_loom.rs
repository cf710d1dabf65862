//! loom models of the review of observers and refused counts (see `review_observers.rs`):
//! refusals counted off the lock while another thread makes a transition, and what the
//! observers are told of them.
//!
//! Under loom every refusal is counted on the shared counter (`Cells::refuse`: modelled
//! threads share one OS thread, hence one slot), so these models check the episode
//! bookkeeping (`Machine::refused_base`, the rebase in `locked`) against every interleaving of
//! that counter with the machine's lock, not the per-line store.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=/work/target-review \
//!     cargo test -p cutout --release --test review_observers_loom
//! ```
//!
//! All of them held: they are regression tests.

#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::observer::{Call, CallKind};
use cutout::{Breaker, Jitter, RejectReason, Settings, State};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

const BREAK: Duration = Duration::from_secs(10);

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 1_000;
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// A breaker that opens on one failure for 10 s (one probe, which closes on one success),
/// with an observer counting the refusals it is told of.
fn observed() -> (Breaker, ManualClock, Arc<AtomicUsize>) {
    let clock = ManualClock::new();
    let told = Arc::new(AtomicUsize::new(0));
    let sink = Arc::clone(&told);
    let breaker = Breaker::builder("loom")
        .settings(
            Settings::builder()
                .jitter(Jitter::None)
                .break_duration(BREAK)
                .max_break_duration(BREAK * 8)
                .consecutive_failures(Some(1))
                .half_open_probes(1)
                .probe_successes(1)
                .max_wait_in_half_open(None)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .seed(7)
        .observer(move |call: &Call<'_>| {
            if matches!(call.kind, CallKind::Refused(_)) {
                sink.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build();
    (breaker, clock, told)
}

/// A refusal of a full half-open races the probe's failure, which re-opens the breaker: an
/// opening keeps the count of the episode it ends, so whether the refusal lands in the
/// half-open or in the new open episode (or is decided as an open refusal), it is counted
/// exactly once, and told once.
#[test]
fn a_full_half_open_refusal_racing_the_reopening_is_counted_once() {
    model(|| {
        let (breaker, clock, told) = observed();
        breaker.try_acquire().unwrap().failure();
        clock.advance(BREAK);
        let probe = breaker.try_acquire_owned().unwrap();
        assert!(probe.is_probe());
        let refusing = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                let refused = breaker.try_acquire().map(drop).unwrap_err();
                assert!(matches!(
                    refused.reason(),
                    RejectReason::HalfOpenFull | RejectReason::Open
                ));
            })
        };
        let failing = thread::spawn(move || probe.failure());
        refusing.join().unwrap();
        failing.join().unwrap();
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.snapshot().refused_calls, 1);
        assert_eq!(told.load(Ordering::Relaxed), 1);
    });
}

/// Refusals while open race a manual opening of the open breaker (the same episode, with a
/// new end): none is lost.
#[test]
fn open_refusals_racing_a_manual_reopening_are_all_kept() {
    model(|| {
        let (breaker, _clock, told) = observed();
        breaker.try_acquire().unwrap().failure();
        let refusing = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    assert!(breaker.try_acquire().is_err());
                }
            })
        };
        let opening = {
            let breaker = breaker.clone();
            thread::spawn(move || assert!(breaker.open_for(BREAK * 2)))
        };
        refusing.join().unwrap();
        opening.join().unwrap();
        assert_eq!(breaker.snapshot().refused_calls, 2);
        assert_eq!(told.load(Ordering::Relaxed), 2);
    });
}

/// An isolated refusal races `reset`: the refusal is told exactly when it was refused, and the
/// closed episode counts it at most once (a refusal decided just as the state changes may land
/// in the next episode, as the snapshot's docs say); an admitted call is no refusal at all.
#[test]
fn an_isolated_refusal_racing_reset_is_counted_at_most_once() {
    model(|| {
        let (breaker, _clock, told) = observed();
        breaker.isolate();
        let calling = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                breaker
                    .try_acquire()
                    .map(|permit| permit.success())
                    .is_err()
            })
        };
        let resetting = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.reset())
        };
        let refused = calling.join().unwrap();
        resetting.join().unwrap();
        assert_eq!(breaker.state(), State::Closed);
        assert!(breaker.snapshot().refused_calls <= u64::from(refused));
        assert_eq!(told.load(Ordering::Relaxed), usize::from(refused));
    });
}
