//! Time sources: the [`Clock`] trait, the fast [`SystemClock`], and [`ManualClock`] for tests.
//!
//! A breaker reads time in two ways. [`Clock::now`] is precise and times calls (slow-call
//! detection). [`Clock::recent`] may lag by a bounded amount and serves every decision that only
//! needs coarse time: whether a break has elapsed, which time-window bucket a call falls in.
//! Refusing a call while open reads only `recent`, so with a coarse clock running a refusal
//! costs a few loads.
//!
//! # Orderings
//! [`ManualClock`] keeps its time in an `AtomicU64` read and written with `Relaxed`: a test
//! advances it from one thread and the breaker reads it under its own lock or on the call's
//! thread; no other memory is published through the clock, so no ordering beyond the atomicity
//! of the value itself is needed. The coarse clock's orderings are in `coarse.rs`.

mod coarse;
pub(crate) mod kernel;
#[cfg(feature = "tokio")]
mod tokio;

use std::fmt;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A monotonic source of nanoseconds.
///
/// Implementations must never go backwards. The origin is arbitrary but fixed for one clock.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time in nanoseconds, as precisely as the source allows.
    fn now(&self) -> u64;

    /// The current time, possibly lagging by a bounded amount in exchange for a cheaper read.
    /// Defaults to [`Clock::now`].
    fn recent(&self) -> u64 {
        self.now()
    }

    /// Waits `duration` as this clock counts time: what a sync retry's backoff waits on (the
    /// declarative layer's `retry(backoff = ...)` on a sync method). Defaults to
    /// [`std::thread::sleep`]; a [`ManualClock`] advances itself instead, so that a test's
    /// retries take no real time and its breakers see the backoff pass.
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

#[cfg(feature = "tokio")]
pub use self::tokio::TokioClock;
pub(crate) use coarse::coarse_time;
pub use coarse::{CoarseClock, CoarseClockError};

static ANCHOR: OnceLock<quanta::Instant> = OnceLock::new();

/// The default clock: the time-stamp counter where the processor has an invariant one (through
/// `quanta`), the OS monotonic clock elsewhere.
///
/// On the VMs this project is measured on, `std::time::Instant::now` costs 29–48 ns and this
/// clock 20–36 ns (the time-stamp counter itself reads slowly there: about 19–23 ns); see
/// BENCHMARKS.md. [`SystemClock::recent`] is one relaxed load (under 1 ns) while a
/// [`CoarseClock`] guard is alive, and falls back to `now` otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    #[inline]
    fn since_anchor(instant: quanta::Instant) -> u64 {
        let anchor = *ANCHOR.get_or_init(quanta::Instant::now);
        // A u64 of nanoseconds lasts 584 years; saturating only matters for a reading taken
        // before the anchor was set by another thread, which reads as the anchor itself.
        instant.saturating_duration_since(anchor).as_nanos() as u64
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> u64 {
        Self::since_anchor(quanta::Instant::now())
    }

    #[inline]
    fn recent(&self) -> u64 {
        match coarse_time() {
            0 => self.now(),
            recent => recent,
        }
    }
}

/// A clock that moves only when told to. Clones share one time.
///
/// ```
/// use std::time::Duration;
/// use cutout::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let view = clock.clone();
/// clock.advance(Duration::from_secs(30));
/// assert_eq!(view.now(), 30_000_000_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves time forward by `by` (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(by))
            });
    }

    /// The time elapsed since the clock was created.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.now())
    }

    /// Advances exactly to the end of `breaker`'s current break, so that the break has elapsed
    /// (breaks end inclusively) and the next call becomes a probe. Does nothing unless the
    /// breaker is open with time left. The breaker must run on this clock.
    pub fn elapse_break(&self, breaker: &crate::Breaker) {
        if let Some(left) = breaker.break_remaining() {
            self.advance(left);
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.nanos.load(Ordering::Relaxed)
    }

    /// Advances the clock by `duration` at once: no real time passes.
    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// One clock lent to many breakers: cloning it shares the instance (what a registry, a keyed
/// layer or a gateway gives each breaker it builds), and every method, [`Clock::sleep`]
/// included, is the shared clock's.
///
/// ```
/// use std::time::Duration;
/// use cutout::clock::{Clock, ManualClock, SharedClock};
///
/// let manual = ManualClock::new();
/// let shared = SharedClock::new(manual.clone());
/// shared.clone().sleep(Duration::from_secs(2));
/// assert_eq!(manual.elapsed(), Duration::from_secs(2));
/// ```
#[derive(Debug, Clone)]
pub struct SharedClock(Arc<dyn Clock>);

impl SharedClock {
    /// `clock`, to be shared.
    pub fn new(clock: impl Clock) -> SharedClock {
        SharedClock(Arc::new(clock))
    }

    /// A clock already shared.
    pub fn from_arc(clock: Arc<dyn Clock>) -> SharedClock {
        SharedClock(clock)
    }
}

impl Clock for SharedClock {
    #[inline]
    fn now(&self) -> u64 {
        self.0.now()
    }

    #[inline]
    fn recent(&self) -> u64 {
        self.0.recent()
    }

    fn sleep(&self, duration: Duration) {
        self.0.sleep(duration);
    }
}

/// The clock a breaker holds: the default one inlined, any other behind a pointer.
#[derive(Debug, Clone)]
pub(crate) enum TimeSource {
    System(SystemClock),
    Custom(Arc<dyn Clock>),
}

impl TimeSource {
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self {
            TimeSource::System(clock) => clock.now(),
            TimeSource::Custom(clock) => clock.now(),
        }
    }

    #[inline]
    pub(crate) fn recent(&self) -> u64 {
        match self {
            TimeSource::System(clock) => clock.recent(),
            TimeSource::Custom(clock) => clock.recent(),
        }
    }

    /// [`Clock::sleep`] on the source (a sync declarative retry's backoff).
    #[cfg(feature = "macros")]
    pub(crate) fn sleep(&self, duration: Duration) {
        match self {
            TimeSource::System(clock) => clock.sleep(duration),
            TimeSource::Custom(clock) => clock.sleep(duration),
        }
    }
}

impl Default for TimeSource {
    fn default() -> Self {
        TimeSource::System(SystemClock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_monotonic() {
        let clock = SystemClock;
        let mut last = clock.now();
        for _ in 0..10_000 {
            let now = clock.now();
            assert!(now >= last);
            last = now;
        }
        assert!(clock.recent() <= clock.now());
    }

    #[test]
    fn manual_clock_clones_share_time_and_saturate() {
        let clock = ManualClock::new();
        let other = clock.clone();
        other.advance(Duration::from_millis(5));
        assert_eq!(clock.now(), 5_000_000);
        clock.advance(Duration::MAX);
        assert_eq!(other.now(), u64::MAX);
    }

    #[test]
    fn a_manual_clock_sleeps_by_advancing() {
        let clock = ManualClock::new();
        let started = std::time::Instant::now();
        clock.sleep(Duration::from_secs(3_600));
        assert_eq!(clock.now(), 3_600_000_000_000);
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no real hour passed"
        );
    }
}
