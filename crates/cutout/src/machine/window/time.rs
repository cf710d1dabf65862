//! A time window: counts in buckets of equal length, each dropping out whole as time passes.

use std::time::Duration;

use super::{Mark, Totals};
use crate::machine::summed::{Counts, SummedSlices};

/// The calls of the last `span`, in one bucket per second of the span (at least 10, at most
/// 60 buckets). Memory is fixed at construction: 24 bytes a bucket (720 for the default 30 s).
#[derive(Debug, Clone)]
pub(crate) struct TimeWindow {
    buckets: SummedSlices<Bucket>,
}

/// One bucket's counts, 24 bytes: calls in a `u64`; failures, slow calls, timed calls and
/// slow calls timed by a draw in `u32`s, saturating. Sums over the window are [`Totals`] of
/// `u64`s.
///
/// Calls are a `u64` because successes arrive in bulk from the fast path: a 60 s bucket (a
/// 1-hour window's) on a many-core machine can see more than 2^32 of them, and a saturated call
/// count would raise the failure and slow ratios, and could trip a healthy breaker. Failures and
/// slow calls come one locked operation each: 2^32 in a 60 s bucket is 72 million a second,
/// more than a lock passes; only windows of days, whose buckets last many minutes, could get
/// there, in a sustained outage. If one does saturate, its ratio reads low: the breaker trips
/// later, never falsely (a saturated count of slow samples only lowers the estimate too).
/// Timed calls are counted for the chance test only (`machine/sampling.rs`): saturated, they
/// would make the window's slow calls look less like chance, but only after 2^32 timed calls in
/// one bucket, which the slow ones, each under the lock, would have tripped long before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    calls: u64,
    failures: u32,
    slow: u32,
    timed: u32,
    slow_drawn: u32,
}

impl crate::machine::slices::Reset for Bucket {
    fn reset(&mut self) {
        *self = Bucket::default();
    }
}

/// `field + n`, saturating at `u32::MAX`; returns what was added.
fn add_u32(field: &mut u32, n: u64) -> u64 {
    let before = *field;
    *field = field.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    u64::from(*field - before)
}

impl Counts for Bucket {
    type Sum = Totals;

    fn add(&mut self, n: Totals) -> Totals {
        self.calls += n.calls;
        Totals {
            calls: n.calls,
            failures: add_u32(&mut self.failures, n.failures),
            slow: add_u32(&mut self.slow, n.slow),
            timed: add_u32(&mut self.timed, n.timed),
            slow_drawn: add_u32(&mut self.slow_drawn, n.slow_drawn),
        }
    }

    fn widen(self) -> Totals {
        Totals {
            calls: self.calls,
            failures: u64::from(self.failures),
            slow: u64::from(self.slow),
            timed: u64::from(self.timed),
            slow_drawn: u64::from(self.slow_drawn),
        }
    }
}

impl TimeWindow {
    /// How many buckets a window of `span` has: one a second, 10 to 60.
    pub(crate) fn buckets(span: Duration) -> usize {
        span.as_secs().clamp(10, 60) as usize
    }

    pub(crate) fn new(span: Duration) -> TimeWindow {
        let count = TimeWindow::buckets(span);
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
                timed: u64::from(mark.timed),
                slow_drawn: u64::from(mark.slow && mark.drawn),
            },
        );
    }

    pub(crate) fn record_successes(&mut self, at: u64, n: u64, timed: u64) {
        self.buckets.add(
            at,
            Totals {
                calls: n,
                timed,
                ..Totals::default()
            },
        );
    }

    /// Whether calls recorded at `at` would land and count in the totals at `now`: their
    /// bucket is still in the window then, and a later write has not pushed it out.
    pub(crate) fn holds(&self, at: u64, now: u64) -> bool {
        self.buckets.holds(at, now)
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.buckets.next_boundary(now)
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
    const FAIL: Mark = Mark::FAIL;
    const OK: Mark = Mark::OK;

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
                ..Totals::default()
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
                ..Totals::default()
            }
        );
    }

    #[test]
    fn a_bucket_is_24_bytes_and_saturates_low() {
        assert_eq!(std::mem::size_of::<Bucket>(), 24);
        let many = Totals {
            calls: 1 << 40,
            failures: u64::from(u32::MAX) - 1,
            ..Totals::default()
        };
        let mut window = TimeWindow::new(Duration::from_secs(30));
        window.buckets.add(0, many);
        assert_eq!(window.totals(0), many, "read: the sum is kept from here");
        window.record(0, FAIL);
        window.record(0, FAIL);
        let kept = window.totals(0);
        // The same adds with no read between: a fresh sum.
        let mut fresh = TimeWindow::new(Duration::from_secs(30));
        fresh.buckets.add(0, many);
        fresh.record(0, FAIL);
        fresh.record(0, FAIL);
        assert_eq!(fresh.totals(0), kept, "the saturated failure is in neither");
        assert_eq!(
            kept,
            Totals {
                calls: (1 << 40) + 2,
                failures: u64::from(u32::MAX),
                ..Totals::default()
            }
        );
        // Sums over buckets are u64.
        window.record(SEC, FAIL);
        assert_eq!(window.totals(SEC).failures, u64::from(u32::MAX) + 1);
    }

    #[test]
    fn a_window_idle_past_its_span_starts_empty() {
        let mut window = TimeWindow::new(Duration::from_secs(30));
        window.record(5 * SEC, FAIL);
        let later = 5 * SEC + 3_600 * SEC;
        assert_eq!(window.totals(later), Totals::default());
        window.record(later, OK);
        assert_eq!(window.totals(later).calls, 1);
        assert!(!window.holds(5 * SEC, later));
        window.record(5 * SEC, FAIL); // late by an hour: dropped
        assert_eq!(window.totals(later).failures, 0);
        assert!(window.holds(later - SEC, later) && window.holds(later, later + 29 * SEC));
        assert!(!window.holds(later, later + 30 * SEC), "gone by then");
    }

    #[test]
    fn short_spans_use_ten_buckets() {
        let window = TimeWindow::new(Duration::from_millis(500));
        assert_eq!(window.buckets.len(), 10);
        assert_eq!(window.buckets.period(), 50_000_000);
    }
}
