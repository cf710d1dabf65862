//! The recovery ramp: after the probes succeed, hand traffic back over a ramp instead of a
//! cliff.
//!
//! The admitted fraction starts at the initial fraction. `probe_successes` consecutive fast
//! calls double it; a slow call halves it (never below the initial fraction); and the clock
//! bounds it from above, rising linearly from the initial fraction to 1 over the ramp's length.
//! Admission is a counter, not a coin: each call adds the current fraction to a credit and is
//! admitted when the credit reaches 1, so over any run of calls the admitted number never
//! exceeds the sum of the fractions in force. The ramp finishes when both the earned fraction
//! and the clock bound have reached 1.

use std::time::Duration;

/// How a breaker hands traffic back after a break: over a ramp of `fraction` × the break just
/// served, clamped to `[min, max]`.
///
/// ```
/// use std::time::Duration;
/// use cutout::{Recovery, Settings};
///
/// // Ramp back over a quarter of the break served: about 4 s after a 15 s break.
/// let settings = Settings::builder()
///     .recovery(Some(Recovery::over(0.25).initial_fraction(0.1)))
///     .build()?;
/// assert_eq!(settings.recovery().unwrap().fraction(), 0.25);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub(crate) fraction: f64,
    pub(crate) min: Duration,
    pub(crate) max: Duration,
    pub(crate) initial: f64,
}

impl Recovery {
    /// A ramp as long as `fraction` × the break just served (in (0, 10]), between 1 s and 2 min,
    /// starting at a tenth of the traffic.
    pub fn over(fraction: f64) -> Recovery {
        Recovery {
            fraction,
            min: Duration::from_secs(1),
            max: Duration::from_secs(120),
            initial: 0.1,
        }
    }

    /// The shortest ramp (default 1 s).
    pub fn min_duration(mut self, min: Duration) -> Recovery {
        self.min = min;
        self
    }

    /// The longest ramp (default 2 min).
    pub fn max_duration(mut self, max: Duration) -> Recovery {
        self.max = max;
        self
    }

    /// The fraction admitted when the ramp starts, and the floor a slow call halves it to,
    /// in [0.001, 1) (default 0.1).
    pub fn initial_fraction(mut self, initial: f64) -> Recovery {
        self.initial = initial;
        self
    }

    /// The ramp's length as a fraction of the break served.
    pub fn fraction(&self) -> f64 {
        self.fraction
    }

    /// The shortest ramp.
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The longest ramp.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The starting fraction.
    pub fn initial(&self) -> f64 {
        self.initial
    }

    /// The ramp's length after a break of `served`: `fraction` × `served`, clamped to
    /// `[min, max]`. Never panics: a fraction that is not a positive number gives `min`, an
    /// overflow gives `max`, and a `max` below `min` is raised to `min` (settings validation
    /// rejects all three; this keeps an unvalidated `Recovery` total).
    pub fn length_after(&self, served: Duration) -> Duration {
        let max = self.max.max(self.min);
        let length = if self.fraction > 0.0 {
            Duration::try_from_secs_f64(served.as_secs_f64() * self.fraction).unwrap_or(max)
        } else {
            self.min
        };
        length.clamp(self.min, max)
    }
}

/// A ramp in progress.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ramp {
    start: u64,
    length: u64,
    initial: f64,
    /// The fraction earned by the calls' performance.
    earned: f64,
    /// Fast calls in a row since the last step.
    streak: u32,
    /// Admission credit in millionths: a call is admitted when it reaches a million. Integer,
    /// so ten calls at 0.1 admit exactly one.
    credit: u64,
}

impl Ramp {
    pub(crate) fn start(now: u64, served: Duration, recovery: &Recovery) -> Ramp {
        let length = recovery.length_after(served);
        Ramp {
            start: now,
            length: u64::try_from(length.as_nanos()).unwrap_or(u64::MAX).max(1),
            initial: recovery.initial,
            earned: recovery.initial,
            streak: 0,
            credit: 0,
        }
    }

    /// The clock's bound: from the initial fraction to 1, linearly over the length.
    fn bound(&self, now: u64) -> f64 {
        let elapsed = now.saturating_sub(self.start) as f64 / self.length as f64;
        (self.initial + (1.0 - self.initial) * elapsed).min(1.0)
    }

    /// The fraction in force at `now`.
    pub(crate) fn fraction(&self, now: u64) -> f64 {
        self.earned.min(self.bound(now))
    }

    /// Whether this call is admitted.
    pub(crate) fn admit(&mut self, now: u64) -> bool {
        const WHOLE: u64 = 1_000_000;
        // At least a millionth: a fraction too small to count would otherwise refuse every
        // call for good (the initial fraction may be any number above 0).
        self.credit += ((self.fraction(now) * WHOLE as f64).round() as u64).max(1);
        if self.credit >= WHOLE {
            self.credit -= WHOLE;
            true
        } else {
            false
        }
    }

    /// An admitted call finished successfully; `slow` if above the slow threshold.
    pub(crate) fn succeeded(&mut self, slow: bool, streak_to_step: u32) {
        if slow {
            self.earned = (self.earned / 2.0).max(self.initial);
            self.streak = 0;
            return;
        }
        self.streak += 1;
        if self.streak >= streak_to_step {
            self.earned = (self.earned * 2.0).min(1.0);
            self.streak = 0;
        }
    }

    /// Whether the ramp has run out: earned and allowed all of the traffic.
    pub(crate) fn finished(&self, now: u64) -> bool {
        self.earned >= 1.0 && self.bound(now) >= 1.0
    }

    /// How long the ramp has lasted.
    pub(crate) fn elapsed(&self, now: u64) -> Duration {
        Duration::from_nanos(now.saturating_sub(self.start))
    }

    /// A short retry-after for a call the ramp refused: a tenth of its length, 10 ms to 1 s.
    pub(crate) fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.length / 10)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn length_is_a_fraction_of_the_break_within_clamps() {
        let r = Recovery::over(0.25);
        assert_eq!(
            r.length_after(Duration::from_secs(16)),
            Duration::from_secs(4)
        );
        assert_eq!(
            r.length_after(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
        assert_eq!(
            r.length_after(Duration::from_secs(3_600)),
            Duration::from_secs(120)
        );
    }

    #[test]
    fn admission_follows_the_fraction_exactly() {
        let mut ramp = Ramp::start(0, Duration::from_secs(40), &Recovery::over(0.25));
        // At t=0 the fraction is 0.1: exactly 10 of 100 calls.
        let admitted = (0..100).filter(|_| ramp.admit(0)).count();
        assert_eq!(admitted, 10);
    }

    #[test]
    fn earned_fraction_doubles_halves_and_floors() {
        let mut ramp = Ramp::start(0, Duration::from_secs(40), &Recovery::over(0.25));
        ramp.succeeded(false, 2);
        assert_eq!(ramp.earned, 0.1);
        ramp.succeeded(false, 2);
        assert_eq!(ramp.earned, 0.2);
        ramp.succeeded(true, 2);
        assert_eq!(ramp.earned, 0.1);
        ramp.succeeded(true, 2);
        assert_eq!(ramp.earned, 0.1, "never below the initial fraction");
        for _ in 0..8 {
            ramp.succeeded(false, 2);
        }
        assert_eq!(ramp.earned, 1.0);
        assert!(!ramp.finished(5 * SEC), "the clock still bounds it");
        assert!((ramp.fraction(5 * SEC) - (0.1 + 0.9 * 0.5)).abs() < 1e-9);
        assert!(ramp.finished(10 * SEC));
    }
}
