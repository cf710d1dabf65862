//! The latency baseline: a quantile of successful durations, in time slices of histograms.

use super::SLICES;
use super::histogram::Histogram;
use crate::slices::Slices;

/// Successful samples needed before the normal latency is known.
pub(crate) const MIN_SAMPLES: u64 = 20;

#[derive(Debug, Clone)]
pub(crate) struct LatencyBaseline {
    quantile: f64,
    slices: Slices<Histogram>,
}

impl LatencyBaseline {
    pub(crate) fn new(window: u64, quantile: f64) -> LatencyBaseline {
        LatencyBaseline {
            quantile,
            slices: Slices::new(window, SLICES),
        }
    }

    #[cfg(test)]
    pub(crate) fn record(&mut self, now: u64, nanos: u64) {
        if let Some(histogram) = self.slices.at(now) {
            histogram.record(nanos);
        }
    }

    /// Adds counts per bucket (drained from the fast path) to the slice of `now`.
    pub(crate) fn merge(&mut self, now: u64, counts: impl Iterator<Item = (usize, u32)>) {
        if let Some(histogram) = self.slices.at(now) {
            for (bucket, n) in counts {
                histogram.add(bucket, n);
            }
        }
    }

    /// The normal latency in nanoseconds; `None` until armed.
    pub(crate) fn normal(&self, now: u64) -> Option<u64> {
        let live = self.slices.live(now);
        let samples: u64 = live.clone().map(Histogram::total).sum();
        if samples < MIN_SAMPLES {
            return None;
        }
        Histogram::quantile(live, self.quantile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000 * MS;

    #[test]
    fn median_of_the_window_once_armed() {
        let mut baseline = LatencyBaseline::new(300 * SEC, 0.5);
        for _ in 0..19 {
            baseline.record(0, 20 * MS);
        }
        assert_eq!(baseline.normal(0), None);
        baseline.merge(
            SEC,
            [(super::super::histogram::bucket_of(20 * MS), 1)].into_iter(),
        );
        let normal = baseline.normal(SEC).unwrap() as f64;
        assert!((normal / (20 * MS) as f64 - 1.0).abs() < 0.125, "{normal}");
        // A brownout moves the median only once it is more than half the window.
        for _ in 0..19 {
            baseline.record(2 * SEC, 600 * MS);
        }
        assert!(baseline.normal(2 * SEC).unwrap() < 25 * MS);
        assert_eq!(baseline.normal(400 * SEC), None, "everything dropped out");
    }
}
