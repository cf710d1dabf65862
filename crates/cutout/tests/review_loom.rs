//! loom models of the review (see `review.rs`): counting off the lock while time moves, the
//! path a breaker on the system clock takes (its clock advances between any two reads, so
//! bucket boundaries and the fast flag's deadline pass in the middle of a race), which the
//! crate's own models (`loom.rs`) run only on a manual clock held still.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=/work/target-review-loom \
//!     cargo test -p cutout --release --test review_loom
//! ```
//!
//! The first four held: they are regression tests. The last, issue #28's review of
//! `end_break_on_signal` racing a trip while time moves, found a stale signal ending a break.

#![cfg(loom)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::Clock;
use cutout::{Breaker, Jitter, Settings, SettingsBuilder, State, Transition, TripWindow};
use loom::thread;

/// A clock that, once started, moves 350 ms forward at every read: every few reads a trip
/// window bucket (1 s) ends, and with it the fast flag's deadline. Its time is a std atomic
/// (not modelled): loom runs one thread at a time, so every execution reads its own sequence.
#[derive(Debug, Clone, Default)]
struct Moving {
    nanos: Arc<AtomicU64>,
    moving: Arc<AtomicBool>,
}

impl Clock for Moving {
    fn now(&self) -> u64 {
        if self.moving.load(Ordering::Relaxed) {
            self.nanos.fetch_add(350_000_000, Ordering::Relaxed) + 350_000_000
        } else {
            self.nanos.load(Ordering::Relaxed)
        }
    }
}

fn model(branches: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = branches;
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

type Seen = Arc<Mutex<Vec<Transition>>>;

fn build(settings: SettingsBuilder) -> (Breaker, Moving, Seen) {
    let clock = Moving::default();
    clock.nanos.store(1_000_000_000, Ordering::Relaxed);
    let breaker = Breaker::builder("loom-review")
        .settings(settings.jitter(Jitter::None).build().unwrap())
        .clock(clock.clone())
        .seed(7)
        .build();
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    (breaker, clock, seen)
}

/// Two successes of one thread and a failure of another, while the clock moves: every
/// outcome is in the window exactly once (the run lasts a few seconds, well inside the
/// 30 s window), whichever bucket the fold puts it in.
fn racing_outcomes_count_once_while_time_moves(settings: fn() -> SettingsBuilder, warm: u64) {
    model(20_000, move || {
        let (breaker, clock, _seen) = build(settings());
        for _ in 0..warm {
            breaker.call(|| Ok::<(), ()>(())).expect("closed");
        }
        clock.moving.store(true, Ordering::Relaxed);
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    if i == 0 {
                        breaker.call(|| Ok::<(), ()>(())).expect("closed");
                        breaker.call(|| Ok::<(), ()>(())).expect("closed");
                    } else {
                        breaker.call(|| Err::<(), ()>(())).expect_err("a failure");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        clock.moving.store(false, Ordering::Relaxed);
        let snapshot = breaker.snapshot();
        assert_eq!(
            (snapshot.calls, snapshot.failures),
            (warm + 3, 1),
            "{snapshot:?}"
        );
        assert_eq!(breaker.state(), State::Closed);
    });
}

/// An untimed breaker (successes check the deadline with the clock).
#[test]
fn untimed_successes_racing_a_failure_count_once_while_time_moves() {
    racing_outcomes_count_once_while_time_moves(
        || {
            Settings::builder()
                .adaptive(false)
                .consecutive_failures(None)
        },
        3,
    );
}

/// The default breaker past its (loom) sampling threshold: untimed successes read no clock.
#[test]
fn sampled_successes_racing_a_failure_count_once_while_time_moves() {
    racing_outcomes_count_once_while_time_moves(Settings::builder, 70);
}

/// A success racing a reset while time moves never counts after the reset.
#[test]
fn a_success_racing_a_reset_while_time_moves_never_counts_after_it() {
    model(10_000, || {
        let (breaker, clock, seen) = build(
            Settings::builder()
                .adaptive(false)
                .window(TripWindow::Time(Duration::from_secs(30))),
        );
        breaker.call(|| Ok::<(), ()>(())).expect("closed");
        let early = breaker.try_acquire_owned().expect("closed");
        clock.moving.store(true, Ordering::Relaxed);
        let a = thread::spawn(move || early.success());
        let resetting = breaker.clone();
        let b = thread::spawn(move || resetting.reset());
        a.join().unwrap();
        b.join().unwrap();
        clock.moving.store(false, Ordering::Relaxed);
        assert_eq!(breaker.snapshot().calls, 0);
        assert!(seen.lock().unwrap().is_empty());
    });
}

// Issue #28's review: `end_break_on_signal` racing the trip that opens the breaker, while time
// moves between the two (the crate's own model of this race, `loom.rs`, holds the clock still,
// so the race below cannot happen there).

loom::thread_local! {
    /// Set on the thread that sends the recovery signal, so the clock can tell its reading.
    static SIGNALLING: std::cell::Cell<bool> = std::cell::Cell::new(false);
}

/// A hand-moved clock that keeps the first time the signalling thread read (`u64::MAX`: none
/// yet): that reading, less the age passed, is when the breaker takes the evidence to be from.
#[derive(Debug, Clone)]
struct Witness {
    nanos: Arc<AtomicU64>,
    signal_read: Arc<AtomicU64>,
}

impl Witness {
    fn read(&self) -> u64 {
        let time = self.nanos.load(Ordering::Relaxed);
        if SIGNALLING.with(|s| s.get()) {
            let _ = self.signal_read.compare_exchange(
                u64::MAX,
                time,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        time
    }
}

impl Clock for Witness {
    fn now(&self) -> u64 {
        self.read()
    }
    fn recent(&self) -> u64 {
        self.read()
    }
}

/// A health check passes (age 0) on a closed breaker while another thread moves time a second
/// on and trips it. Whatever the interleaving, a break the signal ends began no later than the
/// time the signal's call read: evidence older than the break is stale (its contract). Failed
/// before the fix: the signal read 10 s, the trip opened at 11 s between that read and the
/// signal's lock, and the signal ended the new break.
#[test]
fn a_break_end_racing_a_trip_while_time_moves_never_ends_a_younger_break() {
    model(10_000, || {
        let clock = Witness {
            nanos: Arc::new(AtomicU64::new(10_000_000_000)),
            signal_read: Arc::new(AtomicU64::new(u64::MAX)),
        };
        let breaker = Breaker::builder("loom-review-break-end")
            .settings(
                Settings::builder()
                    .jitter(Jitter::None)
                    .break_duration(Duration::from_secs(60))
                    .consecutive_failures(Some(1))
                    .max_wait_in_half_open(None)
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .seed(7)
            .build();
        let signal = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                SIGNALLING.with(|s| s.set(true));
                breaker.end_break_on_signal(cutout::BreakEndReason::HealthCheck, Duration::ZERO)
            })
        };
        // The trip on a thread of its own, so that loom may run the signal's clock read
        // before the time moves (a std atomic, which loom does not schedule around).
        let trip = {
            let (breaker, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                clock.nanos.fetch_add(1_000_000_000, Ordering::Relaxed);
                breaker.call(|| Err::<(), ()>(())).expect_err("a failure");
            })
        };
        trip.join().unwrap();
        let ended = signal.join().unwrap();
        let opened_at = breaker.snapshot().opened_at.expect("opened");
        if ended {
            let read = clock.signal_read.load(Ordering::Relaxed);
            assert!(
                Duration::from_nanos(read) >= opened_at,
                "evidence from {read} ns ended a break that began at {opened_at:?}"
            );
            assert_eq!(breaker.state(), State::HalfOpen);
        } else {
            assert_eq!(breaker.state(), State::Open);
        }
    });
}
