//! A time window: counts in buckets of equal length, each dropping out whole as time passes.

use std::time::Duration;

use super::{Mark, Totals};

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Which bucket-length period since the clock's origin these counts belong to.
    epoch: u64,
    totals: Totals,
}

/// The calls of the last `span`, in one bucket per second of the span (at least 10, at most
/// 60 buckets). Memory is fixed at construction.
#[derive(Debug, Clone)]
pub(crate) struct TimeWindow {
    bucket_nanos: u64,
    buckets: Vec<Bucket>,
}

impl TimeWindow {
    pub(crate) fn new(span: Duration) -> TimeWindow {
        let count = span.as_secs().clamp(10, 60);
        let span_nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        let bucket_nanos = span_nanos.div_ceil(count).max(1);
        TimeWindow {
            bucket_nanos,
            // Epoch 0 with empty totals is indistinguishable from an unused bucket.
            buckets: vec![Bucket::default(); count as usize],
        }
    }

    fn epoch(&self, now: u64) -> u64 {
        now / self.bucket_nanos
    }

    /// The bucket for `now`, emptied first if it held an older period; `None` if it already
    /// holds a newer one (a late record for a period that has dropped out).
    fn bucket(&mut self, now: u64) -> Option<&mut Totals> {
        let epoch = self.epoch(now);
        let len = self.buckets.len() as u64;
        let bucket = &mut self.buckets[(epoch % len) as usize];
        if bucket.epoch > epoch {
            return None;
        }
        if bucket.epoch != epoch {
            *bucket = Bucket {
                epoch,
                totals: Totals::default(),
            };
        }
        Some(&mut bucket.totals)
    }

    pub(crate) fn record(&mut self, now: u64, mark: Mark) {
        if let Some(totals) = self.bucket(now) {
            totals.calls += 1;
            totals.failures += u64::from(mark.failure);
            totals.slow += u64::from(mark.slow);
        }
    }

    pub(crate) fn record_successes(&mut self, at: u64, n: u64) {
        if let Some(totals) = self.bucket(at) {
            totals.calls += n;
        }
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        (self.epoch(now) + 1).saturating_mul(self.bucket_nanos)
    }

    pub(crate) fn totals(&self, now: u64) -> Totals {
        let current = self.epoch(now);
        let len = self.buckets.len() as u64;
        let oldest = current.saturating_sub(len - 1);
        self.buckets
            .iter()
            .filter(|bucket| bucket.epoch >= oldest && bucket.epoch <= current)
            .fold(Totals::default(), |sum, bucket| Totals {
                calls: sum.calls + bucket.totals.calls,
                failures: sum.failures + bucket.totals.failures,
                slow: sum.slow + bucket.totals.slow,
            })
    }

    pub(crate) fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;
    const FAIL: Mark = Mark {
        failure: true,
        slow: false,
    };
    const OK: Mark = Mark {
        failure: false,
        slow: false,
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
        assert_eq!(window.bucket_nanos, 50_000_000);
    }
}
