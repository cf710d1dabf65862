//! A time window: counts in buckets of equal length, each dropping out whole as time passes.

use std::time::Duration;

use super::{Mark, Totals};
use crate::summed::SummedSlices;

/// The calls of the last `span`, in one bucket per second of the span (at least 10, at most
/// 60 buckets). Memory is fixed at construction.
#[derive(Debug, Clone)]
pub(crate) struct TimeWindow {
    buckets: SummedSlices<Totals>,
}

impl TimeWindow {
    pub(crate) fn new(span: Duration) -> TimeWindow {
        let count = span.as_secs().clamp(10, 60) as usize;
        let span = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        TimeWindow {
            buckets: SummedSlices::new(span, count),
        }
    }

    pub(crate) fn record(&mut self, now: u64, mark: Mark) {
        self.buckets.add(
            now,
            Totals {
                calls: 1,
                failures: u64::from(mark.failure),
                slow: u64::from(mark.slow),
            },
        );
    }

    pub(crate) fn record_successes(&mut self, at: u64, n: u64) {
        self.buckets.add(
            at,
            Totals {
                calls: n,
                ..Totals::default()
            },
        );
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.buckets.next_boundary(now)
    }

    /// The length of a bucket, in nanoseconds.
    pub(crate) fn period(&self) -> u64 {
        self.buckets.period()
    }

    pub(crate) fn totals(&self, now: u64) -> Totals {
        self.buckets.sum(now)
    }

    pub(crate) fn clear(&mut self) {
        self.buckets.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;
    const FAIL: Mark = Mark {
        failure: true,
        slow: 0,
    };
    const OK: Mark = Mark {
        failure: false,
        slow: 0,
    };

    #[test]
    fn buckets_drop_out_as_time_passes() {
        let mut window = TimeWindow::new(Duration::from_secs(30));
        window.record(0, FAIL);
        window.record(SEC, OK);
        assert_eq!(window.totals(SEC).calls, 2);
        // At 29.9 s the bucket of t=0 is still inside a 30-bucket window.
        assert_eq!(window.totals(29 * SEC + SEC / 2).failures, 1);
        // At 30 s it has dropped out; the t=1 s bucket has not.
        assert_eq!(
            window.totals(30 * SEC),
            Totals {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
        assert_eq!(window.totals(31 * SEC), Totals::default());
        // The slot of t=0 reused for t=30 s starts empty: its old failure is gone.
        window.record(30 * SEC, OK);
        assert_eq!(
            window.totals(30 * SEC),
            Totals {
                calls: 2,
                failures: 0,
                slow: 0
            }
        );
    }

    #[test]
    fn short_spans_use_ten_buckets() {
        let window = TimeWindow::new(Duration::from_millis(500));
        assert_eq!(window.buckets.len(), 10);
        assert_eq!(window.buckets.period(), 50_000_000);
    }
}
