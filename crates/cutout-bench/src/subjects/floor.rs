//! Floor operations: what a call could cost at the least (a closure, loads, atomic adds, clock
//! reads), measured by the same loop as the breakers.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use cutout::clock::{Clock, SystemClock};

use crate::{Call, Outcome, Subject};

/// An operation whose handles are clones of one closure (clones share what it captured).
pub struct Op<F>(F);

/// One thread's clone of an [`Op`]'s closure.
pub struct OpHandle<F>(F);

impl<F: Fn(bool) -> u64 + Clone + Send + Sync> Subject for Op<F> {
    type Handle = OpHandle<F>;
    fn handle(&self) -> OpHandle<F> {
        OpHandle(self.0.clone())
    }
}

impl<F: Fn(bool) -> u64> Call for OpHandle<F> {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        black_box((self.0)(fail));
        Outcome::Ok
    }
}

/// A closure returning `Result`, called through `black_box` (the loop's own cost).
pub fn closure() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    Op(|fail: bool| {
        let f = black_box(|fail: bool| if fail { Err(()) } else { Ok(()) });
        u64::from(f(fail).is_ok())
    })
}

/// A relaxed load of one atomic that every thread reads (a shared, never-written line).
pub fn relaxed_load() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    let word = Arc::new(CachePadded::new(AtomicU64::new(1)));
    Op(move |_| word.load(Ordering::Relaxed))
}

/// The word a healthy call must read, read before and after the call (`Acquire`, one line that
/// every thread reads and none writes), and the two compared: the least a breaker does that
/// notices what was recorded while its call ran.
pub fn word_around_call() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    let word = Arc::new(CachePadded::new(AtomicU64::new(0b10_0000)));
    Op(move |fail: bool| {
        let before = word.load(Ordering::Acquire);
        let f = black_box(|fail: bool| if fail { Err(()) } else { Ok(()) });
        let result: Result<(), ()> = f(fail);
        u64::from(result.is_ok() && word.load(Ordering::Acquire) == before)
    })
}

/// A relaxed `fetch_add` on one counter that every thread writes.
pub fn shared_fetch_add() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    let counter = Arc::new(CachePadded::new(AtomicU64::new(0)));
    Op(move |_| counter.fetch_add(1, Ordering::Relaxed))
}

/// `std::time::Instant::now`.
pub fn std_now() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    Op(|_| {
        let now = std::time::Instant::now();
        black_box(now);
        0
    })
}

/// `quanta::Instant::now` (the TSC, scaled).
pub fn quanta_now() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    Op(|_| {
        black_box(quanta::Instant::now());
        0
    })
}

/// `quanta::Instant::recent` (one load while an upkeep thread runs).
pub fn quanta_recent() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    Op(|_| {
        black_box(quanta::Instant::recent());
        0
    })
}

/// The kernel's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, through the vDSO): the
/// cheapest time a process can read without a thread of its own keeping one.
#[cfg(target_os = "linux")]
pub fn kernel_coarse() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    use rustix::time::{ClockId, clock_gettime};
    Op(|_| clock_gettime(ClockId::MonotonicCoarse).tv_nsec as u64)
}

/// cutout's `SystemClock::now`.
pub fn system_now() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    Op(|_| SystemClock.now())
}

/// cutout's `SystemClock::recent` (one load while a `CoarseClock` runs, `now`
/// otherwise).
pub fn system_recent() -> Op<impl Fn(bool) -> u64 + Clone + Send + Sync> {
    Op(|_| SystemClock.recent())
}

/// A relaxed `fetch_add` on a counter of the thread's own (an uncontended, cache-padded line).
pub struct OwnCounter;

/// A thread's own counter.
pub struct OwnCounterHandle(Box<CachePadded<AtomicU64>>);

impl Subject for OwnCounter {
    type Handle = OwnCounterHandle;
    fn handle(&self) -> OwnCounterHandle {
        OwnCounterHandle(Box::new(CachePadded::new(AtomicU64::new(0))))
    }
}

impl Call for OwnCounterHandle {
    #[inline(always)]
    fn call(&mut self, _: bool) -> Outcome {
        black_box(self.0.fetch_add(1, Ordering::Relaxed));
        Outcome::Ok
    }
}
