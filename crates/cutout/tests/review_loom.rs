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
//! All of them held: they are regression tests.

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
