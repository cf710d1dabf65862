//! The latency baseline: a quantile of successful durations, in time slices of histograms.
//!
//! Memory: [`LATENCY_SLICES`] histograms of 420 bytes (see [`super::histogram`]), one
//! allocation of 1,680 bytes whatever the window.

use super::LATENCY_SLICES;
use super::histogram::Histogram;
use super::tail::ProbeTail;
use crate::machine::slices::Slices;

/// Successful samples needed before the normal latency is known.
pub(crate) const MIN_SAMPLES: u64 = 20;

#[derive(Debug, Clone)]
pub(crate) struct LatencyBaseline {
    slices: Slices<Histogram>,
}

impl LatencyBaseline {
    /// A baseline over `window` (nanoseconds). The quantile it reports is the settings' (read
    /// at each merge rather than kept: a default breaker holds at most 4 KiB).
    pub(crate) fn new(window: u64) -> LatencyBaseline {
        LatencyBaseline {
            slices: Slices::new(window, LATENCY_SLICES),
        }
    }

    /// The span the baseline covers, in nanoseconds: a sample has left it this long after.
    fn turnover(&self) -> u64 {
        self.slices.span()
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

    /// The samples over the window at `now`, and how many of them are above `nanos`.
    pub(crate) fn share_above(&self, now: u64, nanos: u64) -> (u64, u64) {
        let live = self.slices.live(now);
        let samples: u64 = live.clone().map(Histogram::total).sum();
        (samples, Histogram::count_above(live, nanos))
    }

    /// At a merge while closed, `spell` saying whether the trip window's slow calls are a
    /// slow spell: `tail` (the machine's, kept beside its other small fields) settles `period`
    /// (nanoseconds) after it was measured (see [`ProbeTail::watch`]).
    pub(crate) fn watch_tail(&self, tail: &mut ProbeTail, now: u64, spell: bool, period: u64) {
        tail.watch(now, self.slices.live(now), spell, (period, self.turnover()));
    }

    /// A sign of a slow spell at `now` outside a merge: an opening on slow evidence (see
    /// [`ProbeTail::taint`]).
    pub(crate) fn taint_tail(&self, tail: &mut ProbeTail, now: u64) {
        tail.taint(now, self.turnover());
    }

    /// The normal latency in nanoseconds; `None` until armed.
    pub(crate) fn normal(&self, now: u64, quantile: f64) -> Option<u64> {
        let live = self.slices.live(now);
        let samples: u64 = live.clone().map(Histogram::total).sum();
        if samples < MIN_SAMPLES {
            return None;
        }
        Histogram::quantile_of(live, samples, quantile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000 * MS;

    #[test]
    fn median_of_the_window_once_armed() {
        let mut baseline = LatencyBaseline::new(300 * SEC);
        for _ in 0..19 {
            baseline.record(0, 20 * MS);
        }
        assert_eq!(baseline.normal(0, 0.5), None);
        baseline.merge(
            SEC,
            [(super::super::histogram::bucket_of(20 * MS), 1)].into_iter(),
        );
        let normal = baseline.normal(SEC, 0.5).unwrap() as f64;
        assert!((normal / (20 * MS) as f64 - 1.0).abs() <= 0.1, "{normal}");
        // A brownout moves the median only once it is more than half the window.
        for _ in 0..19 {
            baseline.record(2 * SEC, 600 * MS);
        }
        assert!(baseline.normal(2 * SEC, 0.5).unwrap() < 25 * MS);
        assert_eq!(
            baseline.normal(400 * SEC, 0.5),
            None,
            "everything dropped out"
        );
    }

    #[test]
    fn slices_drop_out_whole() {
        // 4 slices of 75 s: the samples of the first 75 s count until 5 minutes.
        let mut baseline = LatencyBaseline::new(300 * SEC);
        for _ in 0..30 {
            baseline.record(74 * SEC, 20 * MS);
        }
        for _ in 0..20 {
            baseline.record(75 * SEC, 2 * MS);
        }
        let median = baseline.normal(299 * SEC, 0.5).unwrap() as f64;
        assert!((median / (20 * MS) as f64 - 1.0).abs() <= 0.1, "{median}");
        let normal = baseline.normal(300 * SEC, 0.5).unwrap() as f64;
        assert!((normal / (2 * MS) as f64 - 1.0).abs() <= 0.1, "{normal}");
        assert_eq!(
            baseline.normal(375 * SEC, 0.5),
            None,
            "the second slice is gone too"
        );
    }
}
