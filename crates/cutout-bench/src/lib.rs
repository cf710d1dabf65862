//! Benchmarks of cutout against failsafe, recloser and tower-resilience.
//!
//! A [`Subject`] is one configured breaker (or a floor operation such as an atomic load); each
//! thread that hammers it gets its own [`Call`] handle, and handles of one subject share its
//! state. [`cases::all`] lists every case with its rows; the harness binary and the criterion
//! bench both run those rows through [`Runner`], so the two measure the same code.

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
    /// Wall time of the loop, taken on that thread.
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

/// A subject with its failure pattern fixed, behind a vtable the harness can hold in a list.
pub trait Runner: Sync {
    /// Runs `iters` calls on each of `threads` threads, all hammering this one subject; the
    /// threads start together at a barrier and each times its own loop.
    fn run(&self, threads: usize, iters: u64) -> Vec<ThreadRun>;
}

/// A [`Subject`] whose every `FAIL_EVERY`th call per thread fails (`0`: none fail).
pub struct Bench<S, const FAIL_EVERY: u32>(pub S);

impl<S: Subject, const FAIL_EVERY: u32> Runner for Bench<S, FAIL_EVERY> {
    fn run(&self, threads: usize, iters: u64) -> Vec<ThreadRun> {
        if threads == 1 {
            let mut handle = self.0.handle();
            return vec![drive::<_, FAIL_EVERY>(&mut handle, iters)];
        }
        let barrier = Barrier::new(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut handle = self.0.handle();
                        barrier.wait();
                        drive::<_, FAIL_EVERY>(&mut handle, iters)
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

/// The timed loop. The failure pattern is a countdown (no division in the loop) and is a
/// constant `false` when `FAIL_EVERY` is 0; `black_box` keeps the subject from seeing it.
#[inline(never)]
fn drive<H: Call, const FAIL_EVERY: u32>(handle: &mut H, iters: u64) -> ThreadRun {
    let mut countdown = FAIL_EVERY;
    let mut rejected = 0u64;
    let allocs_before = alloc::allocations();
    let start = Instant::now();
    for _ in 0..iters {
        let fail = if FAIL_EVERY == 0 {
            false
        } else {
            countdown -= 1;
            if countdown == 0 {
                countdown = FAIL_EVERY;
                true
            } else {
                false
            }
        };
        rejected += u64::from(handle.call(black_box(fail)) == Outcome::Rejected);
    }
    let elapsed = start.elapsed();
    ThreadRun {
        iters,
        elapsed,
        rejected,
        allocs: alloc::allocations() - allocs_before,
    }
}
