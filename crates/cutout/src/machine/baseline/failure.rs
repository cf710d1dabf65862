//! The failure-rate baseline: counted failures over counted outcomes, in time slices.
//!
//! Memory: [`FAILURE_SLICES`] slices of two `u64` counts, 160 bytes in one allocation.

use super::FAILURE_SLICES;
use crate::machine::summed::SummedSlices;

/// Outcomes needed before the rate is known.
pub(crate) const MIN_OUTCOMES: u64 = 100;

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    outcomes: u64,
    failures: u64,
}

impl crate::machine::slices::Reset for Counts {
    fn reset(&mut self) {
        *self = Counts::default();
    }
}

impl std::ops::Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        Counts {
            outcomes: self.outcomes + other.outcomes,
            failures: self.failures + other.failures,
        }
    }
}

/// A slice keeps its counts as they are summed: 16 bytes, now that a slice carries no tag.
/// (Narrower fields would save nothing: a `u64` of outcomes, which fast successes add by the
/// thousand, pads a `u32` of failures to 16 bytes.)
impl crate::machine::summed::Counts for Counts {
    type Sum = Counts;

    fn add(&mut self, n: Counts) -> Counts {
        *self = *self + n;
        n
    }

    fn widen(self) -> Counts {
        self
    }
}

#[derive(Debug, Clone)]
pub(crate) struct FailureBaseline {
    slices: SummedSlices<Counts>,
}

impl FailureBaseline {
    pub(crate) fn new(window: u64) -> FailureBaseline {
        FailureBaseline {
            slices: SummedSlices::new(window, FAILURE_SLICES),
        }
    }

    pub(crate) fn record(&mut self, now: u64, outcomes: u64, failures: u64) {
        self.slices.add(now, Counts { outcomes, failures });
    }

    /// Outcomes and failures inside the window at `now`.
    fn totals(&self, now: u64) -> (u64, u64) {
        let counts = self.slices.sum(now);
        (counts.outcomes, counts.failures)
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.slices.next_boundary(now)
    }
}

/// What the trips read: counts, and how far from armed.
impl FailureBaseline {
    /// Outcomes and failures at `now` as if `extra_successes` more successes had landed;
    /// `None` until armed.
    pub(crate) fn counts_with(&self, now: u64, extra_successes: u64) -> Option<(u64, u64)> {
        let (outcomes, failures) = self.totals(now);
        let outcomes = outcomes + extra_successes;
        (outcomes >= MIN_OUTCOMES).then_some((outcomes, failures))
    }

    /// Whether outcomes recorded at `at` still count at `now`.
    pub(crate) fn holds(&self, at: u64, now: u64) -> bool {
        self.slices.holds(at, now)
    }

    /// How many more outcomes arm the baseline at `now` (0 once armed).
    pub(crate) fn outcomes_to_arm(&self, now: u64) -> u64 {
        MIN_OUTCOMES.saturating_sub(self.totals(now).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn unarmed_until_a_hundred_outcomes_then_slides() {
        let mut baseline = FailureBaseline::new(300 * SEC);
        baseline.record(0, 99, 3);
        assert_eq!(baseline.counts_with(0, 0), None);
        assert_eq!(baseline.outcomes_to_arm(0), 1);
        assert_eq!(baseline.counts_with(0, 1), Some((100, 3)));
        baseline.record(SEC, 1, 0);
        assert_eq!(baseline.counts_with(SEC, 0), Some((100, 3)));
        assert_eq!(baseline.outcomes_to_arm(SEC), 0);
        // 10 slices of 30 s: both records are in slice 0, which drops out at 300 s.
        assert_eq!(baseline.counts_with(299 * SEC, 0), Some((100, 3)));
        assert_eq!(
            baseline.counts_with(300 * SEC, 0),
            None,
            "slice 0 dropped out"
        );
        assert_eq!(baseline.outcomes_to_arm(300 * SEC), 100);
    }
}
