//! The failure-rate baseline: counted failures over counted outcomes, in time slices.

use super::SLICES;
use crate::summed::SummedSlices;

/// Outcomes needed before the rate is known.
pub(crate) const MIN_OUTCOMES: u64 = 100;

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    outcomes: u64,
    failures: u64,
}

impl crate::slices::Reset for Counts {
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

#[derive(Debug, Clone)]
pub(crate) struct FailureBaseline {
    slices: SummedSlices<Counts>,
}

impl FailureBaseline {
    pub(crate) fn new(window: u64) -> FailureBaseline {
        FailureBaseline {
            slices: SummedSlices::new(window, SLICES),
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

    /// The rate as if `extra_successes` more successes had landed now; `None` until armed.
    pub(crate) fn rate_with(&self, now: u64, extra_successes: u64) -> Option<f64> {
        let (outcomes, failures) = self.totals(now);
        let outcomes = outcomes + extra_successes;
        (outcomes >= MIN_OUTCOMES).then(|| failures as f64 / outcomes as f64)
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.slices.next_boundary(now)
    }

    /// The length of a slice, in nanoseconds.
    pub(crate) fn period(&self) -> u64 {
        self.slices.period()
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
        assert_eq!(baseline.rate_with(0, 0), None);
        assert_eq!(baseline.rate_with(0, 1), Some(0.03));
        baseline.record(SEC, 1, 0);
        assert_eq!(baseline.rate_with(SEC, 0), Some(0.03));
        assert_eq!(
            baseline.rate_with(300 * SEC, 0),
            None,
            "slice 0 dropped out"
        );
    }
}
