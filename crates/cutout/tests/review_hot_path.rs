//! Hostile review of the hot path's last round (issue #30): the retry-after's end on the system clock,
//! and successes counted on the threads' own lines.
//!
//! ```text
//! cargo test -p cutout --test review_hot_path
//! ```

use std::sync::Arc;
use std::time::Duration;

use cutout::clock::{Clock, ManualClock, SystemClock};
use cutout::{Breaker, Jitter, RejectReason, Settings, State, TripWindow};

const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// A count window of `size` that nothing here trips: no consecutive rule, a 99% ratio, no
/// latency threshold, so its totals are what the tests read.
fn counting(size: u32) -> Settings {
    Settings::builder()
        .window(TripWindow::Count(size))
        .failure_ratio(Some(0.99))
        .minimum_calls(10)
        .consecutive_failures(None)
        .slow_call_threshold(None)
        .build()
        .unwrap()
}

fn system_breaker() -> Breaker {
    Breaker::builder("review")
        .settings(
            Settings::builder()
                .jitter(Jitter::None)
                .consecutive_failures(Some(1))
                .max_wait_in_half_open(None)
                .build()
                .unwrap(),
        )
        .build()
}

/// `open_for` of 2^63 ns (292 years): the break's end is `now + 2^63`, which does not fit the
/// 63 bits `RetryAfter::until_system` keeps (`end & (AT - 1)`), so the end that travels is
/// `now` itself and the refusal's retry-after reads ZERO while 292 years of break are left.
/// "Retry-after never shorter than the time left" fails by 292 years.
#[test]
fn a_break_of_2_pow_63_ns_says_retry_after_292_years_not_zero() {
    let breaker = system_breaker();
    assert!(breaker.open_for(Duration::from_nanos(1 << 63)));
    assert_eq!(breaker.state(), State::Open);
    let left = breaker.break_remaining().expect("open");
    assert!(left > 290 * YEAR, "break_remaining {left:?}");
    let refused = breaker.try_acquire().expect_err("open for 292 years");
    assert_eq!(refused.reason(), RejectReason::Open);
    let retry = refused.retry_after().expect("an open breaker says when");
    assert!(
        retry > 290 * YEAR,
        "retry-after {retry:?} with {left:?} of the break left: {refused}"
    );
}

/// 300 years (more than 2^63 ns, less than u64::MAX): a first version wrapped the end modulo
/// 2^63 and read about 8 years. A wait of 292 years or more reads as the longest one, 2^63 ns
/// less 2, as `Rejected::retry_after` documents.
#[test]
fn a_break_of_300_years_says_the_longest_retry_after() {
    let breaker = system_breaker();
    assert!(breaker.open_for(300 * YEAR));
    let refused = breaker.try_acquire().expect_err("open");
    let retry = refused.retry_after().expect("says when");
    assert_eq!(
        retry,
        Duration::from_nanos((1 << 63) - 2),
        "retry-after {retry:?} of a 300-year break"
    );
}

/// `open_until` an instant past 2^63 ns on the system clock's scale: the same wrap.
#[test]
fn open_until_past_2_pow_63_says_retry_after_past_2_pow_63() {
    let breaker = system_breaker();
    let instant = Duration::from_nanos((1 << 63) + SystemClock.now() + 60_000_000_000);
    assert!(breaker.open_until(instant));
    let refused = breaker.try_acquire().expect_err("open");
    let retry = refused.retry_after().expect("says when");
    assert!(retry > 290 * YEAR, "retry-after {retry:?}");
}

/// `Rejected::retry_after`'s own doc: "A wait of 292 years or more (2^63 ns, as after
/// `open_for(Duration::MAX)`) reads as 2^63 ns less 2". On a ManualClock it does; on the system
/// clock the kernel path's end reads as 2^63 - 1 - now instead.
#[test]
fn open_for_duration_max_reads_as_documented_on_both_clocks() {
    let doc = Duration::from_nanos((1 << 63) - 2);
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    let manual = Breaker::builder("rev-manual")
        .settings(Settings::builder().jitter(Jitter::None).build().unwrap())
        .clock(clock.clone())
        .build();
    assert!(manual.open_for(Duration::MAX));
    let on_manual = manual.try_acquire().expect_err("open").retry_after();
    assert_eq!(on_manual, Some(doc), "ManualClock");
    let system = system_breaker();
    // Let the system clock's anchor fall behind, as in any process that has run a while.
    std::thread::sleep(Duration::from_millis(20));
    assert!(system.open_for(Duration::MAX));
    let on_system = system.try_acquire().expect_err("open").retry_after();
    assert_eq!(on_system, Some(doc), "SystemClock");
}

/// Successes from more threads than the breaker has lines (three on a 2-core machine), in
/// waves of threads that exit and hand their slots on, with failures from one thread forcing
/// locked operations: a count window larger than everything shows every call once.
#[test]
fn a_count_window_shows_every_success_from_threads_that_come_and_go() {
    let settings = counting(1_000_000);
    let breaker = Breaker::builder("rev-count").settings(settings).build();
    let mut successes = 0u64;
    let mut failures = 0u64;
    for wave in 0..6u64 {
        let threads: Vec<_> = (0..7u64)
            .map(|t| {
                let breaker = breaker.clone();
                std::thread::spawn(move || {
                    let n = 3_000 + 137 * t + wave;
                    let mut f = 0;
                    for i in 0..n {
                        if t == 0 && i % 97 == 0 {
                            let _ = breaker.call(|| Err::<(), _>(()));
                            f += 1;
                        } else {
                            breaker.call(|| Ok::<(), ()>(())).unwrap();
                        }
                    }
                    (n - f, f)
                })
            })
            .collect();
        for thread in threads {
            let (s, f) = thread.join().unwrap();
            successes += s;
            failures += f;
        }
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.state, State::Closed);
        assert_eq!(
            (snapshot.calls, snapshot.failures),
            (successes + failures, failures),
            "after wave {wave}"
        );
    }
}

/// Permits of one generation held across a `reset()` by threads that own lines, finished
/// after it (with threads of the new generation counting meanwhile): none counts in the new
/// generation.
#[test]
fn stale_successes_held_across_a_reset_never_count() {
    let settings = counting(100_000);
    let breaker = Breaker::builder("rev-stale").settings(settings).build();
    let barrier = Arc::new(std::sync::Barrier::new(5));
    let done = Arc::new(std::sync::Barrier::new(5));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let breaker = breaker.clone();
            let barrier = Arc::clone(&barrier);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                // Own a line, count some in the first generation, then hold permits.
                for _ in 0..300 {
                    breaker.call(|| Ok::<(), ()>(())).unwrap();
                }
                let held: Vec<_> = (0..700).map(|_| breaker.try_acquire().unwrap()).collect();
                barrier.wait(); // the reset happens
                barrier.wait();
                for permit in held {
                    permit.success();
                }
                for _ in 0..50 {
                    breaker.call(|| Ok::<(), ()>(())).unwrap();
                }
                done.wait();
            })
        })
        .collect();
    barrier.wait();
    breaker.reset();
    barrier.wait();
    done.wait();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        breaker.snapshot().calls,
        200,
        "4 threads x 50 fresh successes"
    );
}

/// `Rejected::retry_after`'s doc: "On the default SystemClock it is what is left when you
/// ask, to the nanosecond of that clock: asked again later, the same refusal says less, and
/// zero once the break is over." A break within two coarse ticks of its end is refused on the
/// slow path (`until_kernel` is 0), whose retry-after is frozen at the refusal
/// (`RetryAfter::from_nanos`): asked after the break is over it still says what was left then.
#[test]
fn a_short_breaks_refusal_says_zero_once_the_break_is_over() {
    let breaker = system_breaker();
    assert!(breaker.open_for(Duration::from_micros(500)));
    let Err(refused) = breaker.try_acquire() else {
        // The break ran out before the call (a descheduled test thread): nothing to check.
        return;
    };
    let first = refused.retry_after().expect("says when");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(breaker.state(), State::HalfOpen, "the break is over");
    assert_eq!(
        refused.retry_after(),
        Some(Duration::ZERO),
        "asked after the break is over (it said {first:?} at the refusal)"
    );
}

/// The kernel-clock refusal against a known end (`open_until` an instant on the system clock):
/// a call that starts at or after the end is never refused, for breaks from just past the
/// two-tick margin to 30 ms, each hammered until its end.
#[test]
fn no_call_started_after_the_end_is_refused_on_the_kernel_clock() {
    let breaker = system_breaker();
    let mut refused_calls = 0u64;
    for ms in [3u64, 5, 9, 10, 11, 17, 21, 30] {
        let end = SystemClock.now() + ms * 1_000_000;
        assert!(breaker.open_until(Duration::from_nanos(end)));
        loop {
            let before = SystemClock.now();
            match breaker.try_acquire() {
                Err(refused) => {
                    refused_calls += 1;
                    assert!(
                        before < end,
                        "a call started {} ns after the end was refused: {refused}",
                        before - end
                    );
                }
                Ok(permit) => {
                    permit.success();
                    break;
                }
            }
        }
        breaker.reset();
    }
    assert!(refused_calls > 0);
}

/// Timed successes (a slow-call threshold times every call of a small window) on a time window,
/// from more threads than lines, crossing 2^16 in all: every one counted once.
#[test]
fn timed_successes_on_a_time_window_past_2_pow_16_are_each_counted_once() {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .window(TripWindow::Time(Duration::from_secs(600)))
        .failure_ratio(Some(0.99))
        .minimum_calls(10)
        .consecutive_failures(None)
        .slow_call_threshold(Some(Duration::from_secs(100)))
        .build()
        .unwrap();
    let breaker = Breaker::builder("rev-timed")
        .settings(settings)
        .clock(clock.clone())
        .build();
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let breaker = breaker.clone();
            std::thread::spawn(move || {
                let n = 12_000 + t * 11;
                for _ in 0..n {
                    breaker.call(|| Ok::<(), ()>(())).unwrap();
                }
                n
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(total > 1 << 16);
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (total, 0));
    // And once a failure's lock folds them in.
    let _ = breaker.call(|| Err::<(), _>(()));
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (total + 1, 1));
}

/// A small count window (size 50, a period of 32) after failures and many successes from
/// threads that come and go: the failures slid out, the window full of successes.
#[test]
fn a_small_count_window_slides_failures_out_under_many_threads() {
    let settings = Settings::builder()
        .window(TripWindow::Count(50))
        .failure_ratio(Some(0.9))
        .minimum_calls(10)
        .consecutive_failures(None)
        .slow_call_threshold(None)
        .build()
        .unwrap();
    let breaker = Breaker::builder("rev-small").settings(settings).build();
    for _ in 0..5 {
        let _ = breaker.call(|| Err::<(), _>(()));
    }
    for wave in 0..3 {
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let breaker = breaker.clone();
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        breaker.call(|| Ok::<(), ()>(())).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = breaker.snapshot();
        assert_eq!(
            (s.state, s.calls, s.failures),
            (State::Closed, 50, 0),
            "wave {wave}"
        );
    }
    // One failure now: 49 successes and it.
    let _ = breaker.call(|| Err::<(), _>(()));
    let s = breaker.snapshot();
    assert_eq!((s.calls, s.failures), (50, 1));
}

/// Resets racing successes from threads that own lines (and some that share): after each
/// reset the new generation's count never exceeds the calls that could have been admitted in
/// it (those started after the reset, and one in flight a thread).
#[test]
fn resets_racing_successes_never_carry_old_counts_into_the_new_generation() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let settings = counting(1_000_000);
    let breaker = Breaker::builder("rev-resets").settings(settings).build();
    let started = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    const THREADS: u64 = 5;
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let breaker = breaker.clone();
            let started = Arc::clone(&started);
            let finished = Arc::clone(&finished);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    started.fetch_add(1, Ordering::SeqCst);
                    breaker.call(|| Ok::<(), ()>(())).unwrap();
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for round in 0..300 {
        let at_reset = started.load(Ordering::SeqCst);
        breaker.reset();
        let f0 = finished.load(Ordering::SeqCst);
        std::thread::yield_now();
        let f1 = finished.load(Ordering::SeqCst);
        let calls = breaker.snapshot().calls;
        assert!(
            calls + THREADS >= f1 - f0,
            "round {round}: {calls} calls counted of {} finished since the reset",
            f1 - f0
        );
        let since = started.load(Ordering::SeqCst) - at_reset;
        assert!(
            calls <= since + THREADS,
            "round {round}: {calls} calls in a generation that admitted at most {}",
            since + THREADS
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

/// Successes counted from thread-local destructors (a thread exiting: its slot given back
/// before or after, the next thread taking it), interleaved with new threads: every one
/// counted.
#[test]
fn successes_from_exiting_threads_destructors_are_all_counted() {
    struct OnExit(Option<Breaker>);
    impl Drop for OnExit {
        fn drop(&mut self) {
            if let Some(breaker) = self.0.take() {
                for _ in 0..700 {
                    breaker.call(|| Ok::<(), ()>(())).unwrap();
                }
            }
        }
    }
    thread_local! {
        static ON_EXIT: std::cell::RefCell<OnExit> = const { std::cell::RefCell::new(OnExit(None)) };
    }
    let settings = counting(1_000_000);
    let breaker = Breaker::builder("rev-exit").settings(settings).build();
    let mut expected = 0;
    for wave in 0..8 {
        let threads: Vec<_> = (0..5)
            .map(|t| {
                let breaker = breaker.clone();
                std::thread::spawn(move || {
                    // Half register the destructor before using a slot, half after.
                    if (t + wave) % 2 == 0 {
                        ON_EXIT.with(|c| c.borrow_mut().0 = Some(breaker.clone()));
                    }
                    for _ in 0..513 {
                        breaker.call(|| Ok::<(), ()>(())).unwrap();
                    }
                    if (t + wave) % 2 == 1 {
                        ON_EXIT.with(|c| c.borrow_mut().0 = Some(breaker.clone()));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        expected += 5 * (513 + 700);
        assert_eq!(breaker.snapshot().calls, expected, "wave {wave}");
    }
}

/// A count window against a model of its last N outcomes, one thread, runs of successes of
/// every length around the ring's size and the period (folded in runs by `push_run`), single
/// failures between.
#[test]
fn count_windows_match_a_model_of_their_last_n_calls() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for size in [3u32, 4, 7, 31, 32, 33, 50, 64, 100, 511, 512, 513, 1000] {
        let settings = Settings::builder()
            .window(TripWindow::Count(size))
            .failure_ratio(Some(1.0))
            .minimum_calls(size)
            .consecutive_failures(None)
            .slow_call_threshold(None)
            .adaptive(false)
            .build()
            .unwrap();
        let breaker = Breaker::builder("rev-model").settings(settings).build();
        let mut model = std::collections::VecDeque::new();
        for step in 0..300 {
            let run = match next(4) {
                0 => next(4),
                1 => next(u64::from(size) + 2),
                2 => u64::from(size) - 1 + next(3),
                _ => next(1100),
            }
            .max(1);
            for _ in 0..run {
                breaker.call(|| Ok::<(), ()>(())).unwrap();
                model.push_back(false);
            }
            if next(3) != 0 {
                let _ = breaker.call(|| Err::<(), _>(()));
                model.push_back(true);
            }
            while model.len() > size as usize {
                model.pop_front();
            }
            let s = breaker.snapshot();
            assert_eq!(s.state, State::Closed, "size {size} step {step}");
            let failures = model.iter().filter(|&&f| f).count() as u64;
            assert_eq!(
                (s.calls, s.failures),
                (model.len() as u64, failures),
                "size {size} step {step}"
            );
        }
    }
}

/// A thread that sleeps past the break's end (the machine idle meanwhile, as a tickless kernel
/// may be) and then calls: the kernel's coarse clock must have caught up, or the call is
/// refused after the break ended.
#[test]
fn a_call_after_sleeping_past_the_end_is_admitted() {
    let breaker = system_breaker();
    for round in 0..40u64 {
        let ms = 10 + round % 7 * 3;
        let end = SystemClock.now() + ms * 1_000_000;
        assert!(breaker.open_until(Duration::from_nanos(end)));
        // Sleep to just past the end.
        loop {
            let now = SystemClock.now();
            if now > end + 50_000 {
                break;
            }
            std::thread::sleep(Duration::from_nanos(end + 60_000 - now));
        }
        let before = SystemClock.now();
        match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(refused) => panic!(
                "round {round}: refused {} ns after the break's end: {refused}",
                before - end
            ),
        }
        breaker.reset();
    }
}

/// Permits admitted while closed, held by threads that own lines across open → half-open →
/// closed (a probe's success), finished in the new closed generation: none counts there.
#[test]
fn stale_successes_held_across_open_half_open_and_close_never_count() {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .window(TripWindow::Count(100_000))
        .failure_ratio(None)
        .consecutive_failures(Some(3))
        .slow_call_threshold(None)
        .adaptive(false)
        .jitter(Jitter::None)
        .break_duration(Duration::from_secs(1))
        .probe_successes(1)
        .build()
        .unwrap();
    let breaker = Breaker::builder("rev-stale-open")
        .settings(settings)
        .clock(clock.clone())
        .build();
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let breaker = breaker.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    breaker.call(|| Ok::<(), ()>(())).unwrap();
                }
                let held: Vec<_> = (0..600).map(|_| breaker.try_acquire().unwrap()).collect();
                barrier.wait();
                barrier.wait();
                for permit in held {
                    permit.success();
                }
                barrier.wait();
            })
        })
        .collect();
    barrier.wait();
    for _ in 0..3 {
        let _ = breaker.call(|| Err::<(), _>(()));
    }
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(2));
    breaker.try_acquire().expect("a probe").success();
    assert_eq!(breaker.state(), State::Closed);
    barrier.wait();
    barrier.wait();
    for t in threads {
        t.join().unwrap();
    }
    let s = breaker.snapshot();
    assert_eq!((s.state, s.calls, s.failures), (State::Closed, 0, 0));
    breaker.call(|| Ok::<(), ()>(())).unwrap();
    assert_eq!(breaker.snapshot().calls, 1);
}
