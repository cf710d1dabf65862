//! The kernel's coarse monotonic clock, read without a thread of ours: what the hot path
//! compares against the break's end the lock converted into its scale, so that a refusal while
//! open needs no precise clock read.
//!
//! `CLOCK_MONOTONIC_COARSE` is the monotonic clock as of the kernel's last timekeeping tick,
//! read through the vDSO (about 2 ns on the machines this project is measured on, against 9–13
//! ns for [`SystemClock::now`](super::SystemClock)). It runs on the kernel's own scale, behind
//! the precise monotonic clock by less than one tick (its resolution: 4 ms at `HZ=250`, 1 ms at
//! `HZ=1000`) while the kernel ticks.
//!
//! # The conversion
//! Under the lock, a deadline `d` of the [`SystemClock`](super::SystemClock)'s scale is
//! [`convert`]ed: with `k0` a coarse reading and `t0` a precise one taken after it, its *safe*
//! form is `k0 + (d − t0) − margin`, where the margin is two ticks and `1/1024` of `d − t0`. A coarse
//! reading `k` below it proves the precise clock is before `d`: `k` trails the true monotonic
//! time by under a tick, `k0` trails `t0` (it was read first), and over `d − t0` the two
//! monotonic clocks (the kernel's, slewed by NTP by at most 500 ppm, and the TSC that
//! `SystemClock` reads, calibrated against it) drift apart by less than `1/1024` of it. Where it
//! proves nothing (0 is published when the deadline is less than its margin away), the caller
//! reads the precise clock, as before. The refusal's retry-after is not taken from the coarse
//! reading: it carries the break's end on the precise scale, and
//! [`Rejected::retry_after`](crate::Rejected::retry_after) reads the precise clock when asked,
//! so it is exactly what is left (never short of the break, which a coarse reading could be by
//! up to a tick, and never past it).
//!
//! A kernel whose timekeeping tick is held back (a `nohz_full` core, a host that deschedules
//! the vCPU doing timekeeping for longer than a tick) shows a deadline up to that delay late,
//! beyond the second tick of margin: the same limit as [`CoarseClock`](super::CoarseClock)'s,
//! whose thread can be scheduled late. No other platform has the clock: there the published
//! deadline is 0 and every caller reads the precise clock.

use crate::loom::{AtomicU64, Ordering, fence};

/// The coarse reading in nanoseconds (at least 1), or 0 where there is no such clock.
#[inline(always)]
pub(crate) fn now() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let time = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        (time.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(time.tv_nsec as u64)
            .max(1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The clock's resolution (one tick) in nanoseconds, read once.
fn tick() -> u64 {
    static TICK: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICK.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            let res = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
            let nanos = (res.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(res.tv_nsec as u64);
            // A kernel that reports no resolution is taken to tick at the slowest usual rate.
            if nanos == 0 { 10_000_000 } else { nanos }
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    })
}

/// `deadline` (on the system clock's scale, `u64::MAX` for none) on the coarse clock's scale,
/// in its safe form: a coarse reading below it proves the precise clock has not reached the
/// deadline; 0 where nothing can be proved. `earlier` is a reading of the system clock taken
/// before this call: a deadline within two ticks of it is within two ticks of now, and proves
/// nothing, without a read. Otherwise `precise` reads the system clock, after the coarse
/// reading.
pub(crate) fn convert(deadline: u64, earlier: u64, precise: impl FnOnce() -> u64) -> u64 {
    if deadline == u64::MAX {
        return u64::MAX;
    }
    if deadline.saturating_sub(earlier) <= 2 * tick() {
        return 0;
    }
    let coarse = now();
    if coarse == 0 {
        return 0;
    }
    let left = deadline.saturating_sub(precise());
    let margin = 2 * tick() + (left >> 10);
    match left.checked_sub(margin) {
        Some(ahead) if ahead > 0 => coarse.saturating_add(ahead),
        _ => 0,
    }
}

/// The publication of a new conversion, a sequence lock whose sequence is the conversion
/// itself (see `breaker.rs`, "# Orderings"): [`unseal`] before the ends it was made from are
/// stored, [`seal`] after; [`proved`] reads an end with its conversion, both of one
/// publication.
pub(crate) fn unseal(converted: &AtomicU64) {
    converted.store(0, Ordering::Relaxed);
    fence(Ordering::Release);
}

/// Publishes `value`, the conversion of the ends stored since [`unseal`].
pub(crate) fn seal(converted: &AtomicU64, value: u64) {
    converted.store(value, Ordering::Release);
}

/// The end that a coarse `reading` proves has not been reached: `end` as the lock published
/// it with its conversion in `converted`; `None` where the reading proves nothing, the end is
/// 0 (none), or the conversion changed while the end was read.
#[inline(always)]
pub(crate) fn proved(converted: &AtomicU64, end: &AtomicU64, reading: u64) -> Option<u64> {
    let first = converted.load(Ordering::Acquire);
    if reading >= first {
        return None;
    }
    let end = end.load(Ordering::Relaxed);
    fence(Ordering::Acquire);
    (end != 0 && converted.load(Ordering::Relaxed) == first).then_some(end)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::{Clock, SystemClock};

    #[test]
    #[cfg(target_os = "linux")]
    fn the_coarse_clock_trails_the_precise_one_by_under_a_tick() {
        let tick = tick();
        assert!(tick > 0 && tick <= 10_000_000, "tick {tick} ns");
        let precise = || {
            let time = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64
        };
        // Two ticks behind only where this thread was preempted between its two reads.
        let mut late = 0;
        for _ in 0..1_000 {
            let coarse = now();
            let after = precise();
            assert!(coarse <= after, "coarse {coarse} ahead of {after}");
            late += usize::from(after - coarse >= 2 * tick);
        }
        assert!(
            late <= 10,
            "{late} of 1,000 coarse readings two ticks behind"
        );
    }

    #[test]
    fn no_deadline_stays_none_and_a_near_one_proves_nothing() {
        assert_eq!(convert(u64::MAX, 0, || unreachable!()), u64::MAX);
        assert_eq!(convert(0, 0, || unreachable!()), 0);
        let t = SystemClock.now();
        // Closer than two ticks: nothing to prove on the coarse clock.
        assert_eq!(convert(t + 1_000, t, || unreachable!()), 0);
        assert_eq!(convert(t, t, || unreachable!()), 0);
        assert_eq!(convert(t.saturating_sub(5), t, || unreachable!()), 0);
        // Beyond two ticks of the earlier reading but not of the precise one.
        let far = t + 2 * tick() + 1_000;
        assert_eq!(convert(far, t, || far - 1_000), 0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_coarse_reading_below_the_safe_deadline_is_before_the_deadline() {
        // A deadline 30 ms out: every coarse reading below its safe form must come while the
        // precise clock is still before it.
        let clock = SystemClock;
        let deadline = clock.now() + 30_000_000;
        let safe = convert(deadline, clock.now(), || clock.now());
        assert!(safe > 0, "30 ms is beyond the margin");
        let mut proved = 0;
        loop {
            let coarse = now();
            let precise = clock.now();
            if coarse >= safe {
                break;
            }
            proved += 1;
            assert!(
                precise < deadline,
                "proved before the deadline, but it has passed"
            );
        }
        assert!(proved > 0);
        // And the proof ends before the deadline by no more than the margin and a tick.
        assert!(clock.now() + 4 * tick() + (30_000_000 >> 10) >= deadline);
    }
}

/// A model of the conversion's sequence lock (`loom_` so that CI's `--lib loom_` runs it): a
/// refusal that reads a 60 s break's conversion while the lock cuts the break to an end
/// already past (no conversion: it is within two ticks) never pairs the old conversion with
/// the new end.
#[cfg(all(test, loom))]
mod loom_kernel {
    use super::*;
    use crate::loom::Arc;

    #[test]
    fn loom_a_conversion_is_read_with_its_own_end() {
        loom::model(|| {
            // Ends on the precise scale, conversions on the coarse one: 60 s is proved by a
            // conversion of 900 (a coarse reading of 500 is below it); the cut end, 5, by none.
            let (long, cut) = (60_000, 5);
            let converted = Arc::new(AtomicU64::new(900));
            let until = Arc::new(AtomicU64::new(long));
            let lock = {
                let (converted, until) = (Arc::clone(&converted), Arc::clone(&until));
                loom::thread::spawn(move || {
                    unseal(&converted);
                    until.store(cut, Ordering::Relaxed);
                    seal(&converted, 0);
                })
            };
            if let Some(end) = proved(&converted, &until, 500) {
                assert_eq!(end, long, "the old conversion read with the cut end");
            }
            lock.join().unwrap();
            assert_eq!(proved(&converted, &until, 500), None);
        });
    }
}
