//! Benchmarks of cutout against failsafe, recloser and tower-resilience.
//!
//! A [`Subject`] is one configured breaker (or a floor operation such as an atomic load); each
//! thread that hammers it gets its own [`Call`] handle, and handles of one subject share its
//! state. [`cases::all`] lists every case with its rows; the harness binary and the criterion
//! bench both run those rows through [`Runner`], so the two measure the same code: the
//! harness runs each timed loop for a fixed time ([`Runner::run_for`]), criterion for the
//! call counts it picks ([`Runner::run`]).

pub mod alloc;
pub mod cases;
pub mod stats;
pub mod subjects;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What one call through a subject came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The call ran and succeeded.
    Ok,
    /// The call ran and failed.
    Failed,
    /// The breaker refused the call.
    Rejected,
}

/// One thread's handle on a subject, made on the thread that uses it (so it need not be `Send`:
/// tower-resilience's holds a tokio runtime-context guard).
pub trait Call {
    /// Makes one call; `fail` says whether the protected operation fails.
    fn call(&mut self, fail: bool) -> Outcome;
}

/// Something to measure: a breaker configured for a case, or a floor operation.
pub trait Subject: Sync {
    /// A thread's handle; handles of one subject share its state.
    type Handle: Call;
    /// A handle for the calling thread.
    fn handle(&self) -> Self::Handle;
}

/// One thread's timed run.
#[derive(Debug, Clone, Copy)]
pub struct ThreadRun {
    /// Calls made.
    pub iters: u64,
    /// When the loop started (after the barrier), read on that thread.
    pub start: Instant,
    /// When the loop ended, read on that thread.
    pub end: Instant,
    /// Wall time of the loop, `end - start`.
    pub elapsed: Duration,
    /// Calls the breaker refused.
    pub rejected: u64,
    /// Heap allocations counted during the loop (only while [`alloc::set_counting`] is on).
    pub allocs: u64,
}

impl ThreadRun {
    /// Nanoseconds per call on this thread.
    pub fn ns_per_call(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.iters as f64
    }
}

/// How long each thread's timed loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// Exactly this many calls, with no clock read inside the loop (criterion's `iter_custom`).
    Calls(u64),
    /// Until at least `duration` has passed since the thread's loop started. The clock is read
    /// once per batch of calls; batches start at one call and double until one takes
    /// [`BATCH_TIME`], so that the read is a negligible part of the loop, and shrink again if
    /// calls get slower. No batch is larger than `max_batch`.
    For {
        /// The least time the loop runs.
        duration: Duration,
        /// The largest batch of calls between two clock reads.
        max_batch: u64,
    },
}

/// The time a batch of calls between two clock reads aims for in [`Length::For`]: a clock
/// read (20–40 ns on the VM) is then under 0.02% of it, and a loop overshoots its duration by
/// about one batch.
pub const BATCH_TIME: Duration = Duration::from_micros(250);

/// A subject with its failure pattern fixed, behind a vtable the harness can hold in a list.
pub trait Runner: Sync {
    /// Runs one timed loop of `length` on each of `threads` threads, all hammering this one
    /// subject; the threads start together at a barrier and each times its own loop.
    fn measure(&self, threads: usize, length: Length) -> Vec<ThreadRun>;

    /// `iters` calls on each of `threads` threads (see [`Runner::measure`]).
    fn run(&self, threads: usize, iters: u64) -> Vec<ThreadRun> {
        self.measure(threads, Length::Calls(iters))
    }

    /// At least `duration` of calls on each of `threads` threads, reading the clock every batch
    /// of at most `max_batch` calls (see [`Length::For`] and [`Runner::measure`]).
    fn run_for(&self, threads: usize, duration: Duration, max_batch: u64) -> Vec<ThreadRun> {
        self.measure(
            threads,
            Length::For {
                duration,
                max_batch,
            },
        )
    }
}

/// A [`Subject`] whose every `FAIL_EVERY`th call per thread fails (`0`: none fail).
pub struct Bench<S, const FAIL_EVERY: u32>(pub S);

impl<S: Subject, const FAIL_EVERY: u32> Runner for Bench<S, FAIL_EVERY> {
    fn measure(&self, threads: usize, length: Length) -> Vec<ThreadRun> {
        if threads == 1 {
            let mut handle = self.0.handle();
            return vec![drive::<_, FAIL_EVERY>(&mut handle, length)];
        }
        let barrier = Barrier::new(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut handle = self.0.handle();
                        barrier.wait();
                        drive::<_, FAIL_EVERY>(&mut handle, length)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().expect("benchmark thread panicked"))
                .collect()
        })
    }
}

/// How much the loops of `spans` (each a thread's `[start, end]`) ran at the same time: the
/// length of their intersection divided by the length of their union, from 0.0 (no instant
/// when all ran) to 1.0 (all started and ended together). Spans that meet end to end overlap
/// 0.0; one span, or spans all empty and equal, overlap 1.0. (The union's length is taken as
/// first start to last end: for spans with no common instant the result is 0.0 anyway.)
pub fn overlap(spans: &[(Instant, Instant)]) -> f64 {
    let Some(&(first_start, first_end)) = spans.first() else {
        return 1.0;
    };
    let (mut latest_start, mut earliest_end) = (first_start, first_end);
    let (mut earliest_start, mut latest_end) = (first_start, first_end);
    for &(start, end) in &spans[1..] {
        latest_start = latest_start.max(start);
        earliest_end = earliest_end.min(end);
        earliest_start = earliest_start.min(start);
        latest_end = latest_end.max(end);
    }
    let union = latest_end.saturating_duration_since(earliest_start);
    if union.is_zero() {
        return 1.0;
    }
    let intersection = earliest_end.saturating_duration_since(latest_start);
    intersection.as_secs_f64() / union.as_secs_f64()
}

/// The overlap of the loops of `runs` (see [`overlap`]).
pub fn overlap_of(runs: &[ThreadRun]) -> f64 {
    let spans: Vec<_> = runs.iter().map(|run| (run.start, run.end)).collect();
    overlap(&spans)
}

/// The timed loop: `length` of calls, the clock read only between batches (see [`Length`]).
#[inline(never)]
fn drive<H: Call, const FAIL_EVERY: u32>(handle: &mut H, length: Length) -> ThreadRun {
    let mut countdown = FAIL_EVERY;
    let mut rejected = 0u64;
    let allocs_before = alloc::allocations();
    let start = Instant::now();
    let (iters, end) = match length {
        Length::Calls(iters) => {
            calls::<_, FAIL_EVERY>(handle, iters, &mut countdown, &mut rejected);
            (iters, Instant::now())
        }
        Length::For {
            duration,
            max_batch,
        } => {
            let max_batch = max_batch.max(1);
            let mut batch = 1u64;
            let mut iters = 0u64;
            let mut batch_start = start;
            loop {
                calls::<_, FAIL_EVERY>(handle, batch, &mut countdown, &mut rejected);
                iters += batch;
                let now = Instant::now();
                if now.duration_since(start) >= duration {
                    break (iters, now);
                }
                let took = now.duration_since(batch_start);
                batch_start = now;
                batch = if took < BATCH_TIME {
                    (batch * 2).min(max_batch)
                } else if took > 2 * BATCH_TIME {
                    // Calls got slower (the other thread started, or the VM stalled): back to
                    // a batch of about `BATCH_TIME` at the rate just seen.
                    let scaled = batch as u128 * BATCH_TIME.as_nanos() / took.as_nanos();
                    (scaled as u64).clamp(1, max_batch)
                } else {
                    batch
                };
            }
        }
    };
    ThreadRun {
        iters,
        start,
        end,
        elapsed: end.duration_since(start),
        rejected,
        allocs: alloc::allocations() - allocs_before,
    }
}

/// `n` calls, the body of every timed loop. The failure pattern is a countdown (no division in
/// the loop), carried across batches, and is a constant `false` when `FAIL_EVERY` is 0;
/// `black_box` keeps the subject from seeing it.
#[inline(always)]
fn calls<H: Call, const FAIL_EVERY: u32>(
    handle: &mut H,
    n: u64,
    countdown: &mut u32,
    rejected: &mut u64,
) {
    for _ in 0..n {
        let fail = if FAIL_EVERY == 0 {
            false
        } else {
            *countdown -= 1;
            if *countdown == 0 {
                *countdown = FAIL_EVERY;
                true
            } else {
                false
            }
        };
        *rejected += u64::from(handle.call(black_box(fail)) == Outcome::Rejected);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, from_ms: u64, to_ms: u64) -> (Instant, Instant) {
        (
            base + Duration::from_millis(from_ms),
            base + Duration::from_millis(to_ms),
        )
    }

    #[test]
    fn overlap_of_identical_disjoint_and_partial_spans() {
        let base = Instant::now();
        assert_eq!(overlap(&[at(base, 0, 60), at(base, 0, 60)]), 1.0);
        assert_eq!(overlap(&[at(base, 0, 60), at(base, 70, 130)]), 0.0);
        assert_eq!(overlap(&[at(base, 70, 130), at(base, 0, 60)]), 0.0);
        // Touching end to end: no common instant.
        assert_eq!(overlap(&[at(base, 0, 60), at(base, 60, 120)]), 0.0);
        // Half of each overlaps the other: 30 ms in common out of 90 ms.
        assert!((overlap(&[at(base, 0, 60), at(base, 30, 90)]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((overlap(&[at(base, 30, 90), at(base, 0, 60)]) - 1.0 / 3.0).abs() < 1e-12);
        // One inside the other: 30 ms of 60.
        assert!((overlap(&[at(base, 0, 60), at(base, 15, 45)]) - 0.5).abs() < 1e-12);
        // 10 ms late: 50 of 70.
        assert!((overlap(&[at(base, 0, 60), at(base, 10, 70)]) - 5.0 / 7.0).abs() < 1e-12);
        assert_eq!(overlap(&[at(base, 0, 60)]), 1.0);
        assert_eq!(overlap(&[at(base, 5, 5), at(base, 5, 5)]), 1.0);
        assert_eq!(overlap(&[]), 1.0);
    }

    #[test]
    fn timed_loops_count_calls_and_fail_on_the_pattern() {
        struct Fails(u64, u64);
        impl Call for Fails {
            fn call(&mut self, fail: bool) -> Outcome {
                self.0 += 1;
                self.1 += u64::from(fail);
                Outcome::Ok
            }
        }
        let mut handle = Fails(0, 0);
        let run = drive::<_, 10>(&mut handle, Length::Calls(1_000));
        assert_eq!((run.iters, handle.0, handle.1), (1_000, 1_000, 100));
        let mut handle = Fails(0, 0);
        let run = drive::<_, 10>(
            &mut handle,
            Length::For {
                duration: Duration::from_millis(5),
                max_batch: 1 << 20,
            },
        );
        assert_eq!(run.iters, handle.0);
        assert_eq!(handle.1, run.iters / 10);
        assert!(run.elapsed >= Duration::from_millis(5));
        assert_eq!(run.end.duration_since(run.start), run.elapsed);
    }
}
