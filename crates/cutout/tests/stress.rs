//! Multi-threaded stress: threads hammer one shared breaker with random outcomes, unrecorded
//! drops, probes and operator controls; afterwards every permit is accounted for, the transition
//! events form a consistent history, and no half-open probe slot has leaked. A busy breaker
//! with default settings counts every success exactly once while snapshots race its threads.
//!
//! Bounded by a call count, not by time. `CUTOUT_STRESS_CALLS` sets the total calls of each test
//! (default 40,000, quick in debug) and `CUTOUT_STRESS_THREADS` the threads of the first test
//! (default 2). The acceptance run (issue 3):
//!
//! ```text
//! CUTOUT_STRESS_CALLS=1000000 cargo test -p cutout --release --test stress
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, Event, HalfOpenRule, Jitter, OwnedPermit, RejectReason, Settings, State, Transition,
    TripWindow,
};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

/// A tiny xorshift: each thread its own reproducible stream, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Per-thread accounting of permits.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    attempts: u64,
    admitted: u64,
    rejected: u64,
    recorded: u64,
    dropped: u64,
    probes: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.attempts += other.attempts;
        self.admitted += other.admitted;
        self.rejected += other.rejected;
        self.recorded += other.recorded;
        self.dropped += other.dropped;
        self.probes += other.probes;
    }
}

/// Counts transitions by kind, from a listener.
#[derive(Default)]
struct Transitions {
    opened_from_closed: AtomicU64,
    opened_from_half_open: AtomicU64,
    half_opened: AtomicU64,
    closed: AtomicU64,
}

impl Transitions {
    fn listen(breaker: &Breaker) -> Arc<Transitions> {
        let counts = Arc::new(Transitions::default());
        let sink = Arc::clone(&counts);
        breaker.subscribe(move |event: &Event| {
            let counter = match event.transition {
                Transition::Opened {
                    from: State::Closed,
                    ..
                } => &sink.opened_from_closed,
                Transition::Opened { .. } => &sink.opened_from_half_open,
                Transition::HalfOpened => &sink.half_opened,
                Transition::Closed { .. } => &sink.closed,
                // A kind a later cutout adds is none of the four this test counts.
                _ => return,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        });
        counts
    }

    fn read(&self) -> [u64; 4] {
        [
            self.opened_from_closed.load(Ordering::Relaxed),
            self.opened_from_half_open.load(Ordering::Relaxed),
            self.half_opened.load(Ordering::Relaxed),
            self.closed.load(Ordering::Relaxed),
        ]
    }
}

/// One call through one of the permit paths, with a random outcome or an unrecorded drop.
fn one_call(breaker: &Breaker, clock: Option<&ManualClock>, rng: &mut Rng, tally: &mut Tally) {
    tally.attempts += 1;
    let path = rng.below(3);
    let permit: Result<Option<OwnedPermit>, _> = match path {
        0 => breaker.try_acquire_owned().map(Some),
        1 => {
            // The borrowed permit, finished right here.
            match breaker.try_acquire() {
                Ok(permit) => {
                    tally.admitted += 1;
                    tally.probes += u64::from(permit.is_probe());
                    match rng.below(8) {
                        0 => {
                            drop(permit);
                            tally.dropped += 1;
                        }
                        1 => {
                            permit.ignored();
                            tally.recorded += 1;
                        }
                        2 => {
                            permit.failure();
                            tally.recorded += 1;
                        }
                        _ => {
                            permit.success();
                            tally.recorded += 1;
                        }
                    }
                    return;
                }
                Err(refused) => Err(refused),
            }
        }
        _ => {
            // The closure path: `call` records through its own permit.
            let fail = rng.below(5) == 0;
            let slow = rng.below(16) == 0;
            let result = breaker.call(|| {
                if slow && let Some(clock) = clock {
                    clock.advance(Duration::from_millis(3));
                }
                if fail { Err(()) } else { Ok(()) }
            });
            match result {
                Err(error) if error.is_rejected() => {
                    tally.rejected += 1;
                }
                _ => {
                    tally.admitted += 1;
                    tally.recorded += 1;
                }
            }
            return;
        }
    };
    match permit {
        Ok(Some(permit)) => {
            tally.admitted += 1;
            tally.probes += u64::from(permit.is_probe());
            if rng.below(10) == 0 {
                drop(permit);
                tally.dropped += 1;
            } else {
                if rng.below(16) == 0
                    && let Some(clock) = clock
                {
                    clock.advance(Duration::from_millis(3));
                }
                if rng.below(5) == 0 {
                    permit.failure();
                } else {
                    permit.success();
                }
                tally.recorded += 1;
            }
        }
        Ok(None) => unreachable!(),
        Err(refused) => {
            assert!(matches!(
                refused.reason(),
                RejectReason::Open | RejectReason::HalfOpenFull | RejectReason::Isolated
            ));
            tally.rejected += 1;
        }
    }
}

/// A closed breaker on a count window has evaluated its trip conditions after the last outcome
/// that changed the window (DESIGN §2: "evaluated in Closed after every counted outcome"), so
/// any consistent snapshot of it is below every threshold. Counts the violations.
///
/// `slow_rule`: whether the slow-call ratio is judged on the window alone. An adaptive breaker
/// also asks that the window's slow calls be beyond chance at its latency baseline's slow share
/// (`machine/trip.rs`), which a snapshot does not show: half of ten calls slow against a
/// baseline with a few percent slow is chance, and the breaker rightly stays closed.
fn closed_but_tripping(
    snapshot: &cutout::Snapshot,
    minimum: u64,
    consecutive: u32,
    slow_rule: bool,
) -> bool {
    snapshot.state == State::Closed
        && (snapshot.consecutive_failures >= consecutive
            || (snapshot.calls >= minimum
                && (snapshot.failures * 2 >= snapshot.calls
                    || (slow_rule && snapshot.slow * 2 >= snapshot.calls))))
}

fn check_accounting(total: Tally, calls: u64) {
    assert_eq!(total.attempts, calls);
    assert_eq!(total.admitted + total.rejected, total.attempts, "{total:?}");
    assert_eq!(
        total.admitted,
        total.recorded + total.dropped,
        "admitted = recorded + dropped: {total:?}"
    );
}

/// Drives a settled breaker into half-open and takes probes until refused: exactly `limit` must
/// be admitted, or a slot leaked during the run.
fn assert_probe_slots_intact(breaker: &Breaker, wait: impl Fn(&Breaker), limit: u32) {
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "a probe is still in flight"
    );
    let mut held = Vec::new();
    for _ in 0..1_000 {
        match breaker.try_acquire_owned() {
            Ok(permit) if permit.is_probe() => held.push(permit),
            Ok(permit) => permit.failure(), // closed: trip it
            Err(refused) if refused.reason() == RejectReason::HalfOpenFull => break,
            Err(refused) => {
                assert_eq!(refused.reason(), RejectReason::Open);
                assert!(held.is_empty(), "re-opened while probes were held");
                wait(breaker);
            }
        }
    }
    assert_eq!(held.len(), limit as usize, "probe slots after the run");
    assert_eq!(breaker.snapshot().probes_in_flight, limit);
    drop(held);
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
}

#[test]
fn threads_account_for_every_permit_and_leak_no_probe_slot() {
    account_for_every_permit(true);
}

/// The same on fixed rules only: every trip condition a snapshot shows, the slow one
/// included, must have opened the breaker.
#[test]
fn threads_on_fixed_rules_account_for_every_permit_and_lose_no_open() {
    account_for_every_permit(false);
}

fn account_for_every_permit(adaptive: bool) {
    let calls = env("CUTOUT_STRESS_CALLS", 40_000);
    let threads = env("CUTOUT_STRESS_THREADS", 2).max(1);
    let limit = 2;
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(4))
        .failure_ratio(Some(0.5))
        .window(TripWindow::Count(20))
        .minimum_calls(10)
        .slow_call_threshold(Some(Duration::from_millis(2)))
        .break_duration(Duration::from_millis(20))
        .max_break_duration(Duration::from_millis(160))
        .jitter(Jitter::Equal)
        .half_open_probes(limit)
        .probe_successes(2)
        .max_wait_in_half_open(Some(Duration::from_millis(100)))
        .adaptive(adaptive)
        .build()
        .unwrap();
    let breaker = Breaker::builder("stress")
        .settings(settings)
        .clock(clock.clone())
        .seed(3)
        .build();
    let transitions = Transitions::listen(&breaker);
    let max_in_flight = Arc::new(AtomicU64::new(0));
    let lost_opens = Arc::new(AtomicU64::new(0));

    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let breaker = breaker.clone();
            let clock = clock.clone();
            let max_in_flight = Arc::clone(&max_in_flight);
            let lost_opens = Arc::clone(&lost_opens);
            let share = calls / threads + u64::from(t < calls % threads);
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let mut tally = Tally::default();
                for i in 0..share {
                    one_call(&breaker, Some(&clock), &mut rng, &mut tally);
                    // Time moves on: breaks elapse, half-open is entered and timed out.
                    if rng.below(2) == 0 {
                        clock.advance(Duration::from_millis(1));
                    }
                    if i % 16 == 0 {
                        let snapshot = breaker.snapshot();
                        let in_flight = u64::from(snapshot.probes_in_flight);
                        max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
                        if closed_but_tripping(&snapshot, 10, 4, !adaptive) {
                            lost_opens.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for handle in handles {
        total.add(handle.join().unwrap());
    }

    check_accounting(total, calls);
    assert!(
        max_in_flight.load(Ordering::Relaxed) <= u64::from(limit),
        "more probes in flight than the limit"
    );

    // The events form one path through closed → open → half-open → (open | closed).
    let [from_closed, from_half_open, half_opened, closed] = transitions.read().map(i128::from);
    let opened = from_closed + from_half_open;
    let state = breaker.state();
    let snapshot = breaker.snapshot();
    println!(
        "{calls} calls on {threads} threads: {total:?}; opened {from_closed} from closed and \
         {from_half_open} from half-open, half-opened {half_opened}, closed {closed}; {state:?}"
    );
    assert_eq!(
        from_closed - closed,
        i128::from(state != State::Closed),
        "every close ends an episode that one open from closed started"
    );
    assert!(
        (0..=1).contains(&(opened - half_opened)),
        "a half-open follows every open but the last"
    );
    assert!(
        (0..=1).contains(&(half_opened - (from_half_open + closed))),
        "every half-open but the last is decided once"
    );
    if calls >= 10_000 {
        assert!(
            from_closed > 0 && half_opened > 0 && total.probes > 0,
            "the run must exercise transitions and probes: {total:?}"
        );
    }
    assert_eq!(snapshot.probes_in_flight, 0);
    assert_eq!(
        lost_opens.load(Ordering::Relaxed)
            + u64::from(closed_but_tripping(&snapshot, 10, 4, !adaptive)),
        0,
        "snapshots of a closed breaker whose window meets a trip condition (a lost open)"
    );

    assert_probe_slots_intact(&breaker, |b| clock.elapse_break(b), limit);
}

#[test]
fn operator_controls_racing_calls_on_the_system_clock_leak_nothing() {
    let calls = env("CUTOUT_STRESS_CALLS", 40_000);
    let threads = 4;
    let limit = 3;
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_micros(200))
        .max_break_duration(Duration::from_millis(2))
        .jitter(Jitter::Full)
        .half_open_probes(limit)
        .half_open_rule(HalfOpenRule::Rates)
        .max_wait_in_half_open(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let breaker = Breaker::builder("stress-controls")
        .settings(settings)
        .seed(5)
        .build();
    let controls = Arc::new(AtomicU64::new(0));

    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let breaker = breaker.clone();
            let controls = Arc::clone(&controls);
            let share = calls / threads + u64::from(t < calls % threads);
            std::thread::spawn(move || {
                let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (t + 1));
                let mut tally = Tally::default();
                for _ in 0..share {
                    // Thread 0 also plays the operator, rarely.
                    if t == 0 && rng.below(2_000) == 0 {
                        match rng.below(3) {
                            0 => breaker.isolate(),
                            1 => breaker.disable(),
                            _ => breaker.reset(),
                        }
                        controls.fetch_add(1, Ordering::Relaxed);
                        if rng.below(2) == 0 {
                            breaker.reset();
                        }
                    }
                    one_call(&breaker, None, &mut rng, &mut tally);
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for handle in handles {
        total.add(handle.join().unwrap());
    }
    check_accounting(total, calls);
    println!(
        "{calls} calls, {} operator controls: {total:?}",
        controls.load(Ordering::Relaxed)
    );

    // Isolated or disabled breakers never half-open: give the last word to reset, then check
    // the probe slots. A reset also forgets probes in flight, so check before it too.
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    breaker.reset();
    assert_probe_slots_intact(
        &breaker,
        |b| std::thread::sleep(b.break_remaining().unwrap_or_default()),
        limit,
    );
}

/// Default settings on the system clock: busy threads' untimed successes are counted in their
/// lines (`cells.rs`), while another thread's snapshots read them in the middle of it. Every
/// success is in the window once.
#[test]
fn busy_default_breakers_count_every_success_once_on_the_system_clock() {
    let calls = env("CUTOUT_STRESS_CALLS", 40_000);
    let threads = 3;
    let breaker = Breaker::new("stress-paced", Settings::default());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let snapshots = {
        let (breaker, done) = (breaker.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut taken = 0u64;
            while !done.load(Ordering::Relaxed) {
                assert_eq!(breaker.snapshot().failures, 0);
                taken += 1;
                std::thread::yield_now();
            }
            taken
        })
    };
    let succeed = |breaker: &Breaker, n: u64| {
        for _ in 0..n {
            breaker.call(|| Ok::<(), ()>(())).expect("closed");
        }
    };
    // Half the calls on threads at once, half on threads one after another (each may take
    // the slot, and the cell, that the last one gave back).
    let half = calls / 2;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let share = half / threads + u64::from(t < half % threads);
            let (breaker, succeed) = (&breaker, &succeed);
            scope.spawn(move || succeed(breaker, share));
        }
    });
    for t in 0..threads {
        let share = (calls - half) / threads + u64::from(t < (calls - half) % threads);
        std::thread::scope(|scope| {
            scope.spawn(|| succeed(&breaker, share));
        });
    }
    done.store(true, Ordering::Relaxed);
    let taken = snapshots.join().unwrap();
    let snapshot = breaker.snapshot();
    println!("{calls} successes, {taken} racing snapshots: {snapshot:?}");
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(snapshot.calls, calls, "every success counted once");
    assert_eq!(breaker.snapshot().calls, calls, "and not again");
}

/// Failures mixed into the off-lock success path on 2 threads, on the system clock with the
/// default settings but for the consecutive rule (a 1% failure rate, below every other rule):
/// every outcome is in the trip window exactly once and in the failure baseline exactly once,
/// while a third thread's snapshots read the cells in the middle of it.
#[test]
fn failures_mixed_into_successes_off_the_lock_are_each_counted_once() {
    let calls = env("CUTOUT_STRESS_CALLS", 40_000);
    let settings = Settings::builder()
        .consecutive_failures(None)
        .build()
        .unwrap();
    let breaker = Breaker::new("stress-mixed", settings);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (breaker, done) = (breaker.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut last = 0;
            while !done.load(Ordering::Relaxed) {
                let calls = breaker.snapshot().calls;
                assert!(calls >= last, "a read went back from {last} to {calls}");
                last = calls;
                std::thread::yield_now();
            }
        })
    };
    let per_thread = calls / 2;
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let breaker = &breaker;
            scope.spawn(move || {
                for i in 0..per_thread {
                    let fail = i % 100 == 99;
                    let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) });
                }
            });
        }
    });
    done.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the calls must all sit in the 30 s window"
    );
    let snapshot = breaker.snapshot();
    println!("{snapshot:?}");
    let failures = 2 * (per_thread / 100);
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (2 * per_thread, failures)
    );
    assert_eq!(
        breaker.normal_failure_rate(),
        Some(failures as f64 / (2 * per_thread) as f64),
        "every outcome in the failure baseline once"
    );
    assert!(
        breaker.normal_latency().is_some(),
        "samples reached the latency baseline"
    );
}
