//! Adaptive throttling (Google SRE's client-side throttling), an admission mode instead of
//! opening: while closed, each call is refused with probability
//! `max(0, (requests − K × accepts) / (requests + 1))` over the trip window, where `requests`
//! are the calls the window counted plus the calls throttling refused in it, and `accepts` are
//! the counted calls that did not fail. A dependency that fails half its calls with K = 2 is
//! not throttled at all; one that fails every call is sent about one call in `requests + 1`.
//! No trip rule opens a throttling breaker (it refuses in proportion instead); a classifier's
//! open-for verdict, a signal, and the controls still do.

use std::time::Duration;

use crate::machine::slices::Slices;
use crate::machine::window::time::TimeWindow;

/// The throttling state of a closed breaker: its multiple `K`, and the refusals it made.
#[derive(Debug, Clone)]
pub(crate) struct Throttle {
    multiple: f64,
    /// Refusals per bucket of the trip window, laid out as the window's own buckets, so that
    /// refusals leave it with the calls made beside them.
    refusals: Slices<u32>,
    /// The breaker's refusal total (`Cells::refused`) as of the last locked operation: what
    /// came since is throttling's, when the breaker was closed all along.
    seen: u64,
}

impl Throttle {
    /// Throttling with multiple `multiple` over a trip window of `span`.
    pub(crate) fn new(multiple: f64, span: Duration) -> Throttle {
        Throttle {
            multiple,
            refusals: Slices::new(
                u64::try_from(span.as_nanos()).unwrap_or(u64::MAX),
                TimeWindow::buckets(span),
            ),
            seen: 0,
        }
    }

    /// Counts one refusal at `now` (a shadow breaker's would-be refusal, under the lock).
    pub(crate) fn add_refusal(&mut self, now: u64) {
        if let Some(slice) = self.refusals.at(now) {
            *slice = slice.saturating_add(1);
        }
    }

    /// Counts the refusals made since the last locked operation (the breaker's refusal total
    /// is `total`) at `now`. Under the lock, while closed.
    pub(crate) fn absorb(&mut self, now: u64, total: u64) {
        let refused = total.wrapping_sub(self.seen);
        self.seen = total;
        if refused > 0
            && let Some(slice) = self.refusals.at(now)
        {
            *slice = slice.saturating_add(u32::try_from(refused).unwrap_or(u32::MAX));
        }
    }

    /// Starts over at refusal total `total` (a new closed period: earlier refusals were the
    /// open or isolated breaker's, not throttling's).
    pub(crate) fn rebase(&mut self, total: u64) {
        self.seen = total;
        self.refusals.clear();
    }

    /// The refusal probability at `now` for a window holding `calls` counted calls, `failures`
    /// of them failed.
    pub(crate) fn probability(&self, now: u64, calls: u64, failures: u64) -> f64 {
        let refused: u64 = self.refusals.live(now).map(|&n| u64::from(n)).sum();
        let requests = (calls + refused) as f64;
        let accepts = calls.saturating_sub(failures) as f64;
        ((requests - self.multiple * accepts) / (requests + 1.0)).clamp(0.0, 1.0)
    }

    /// The next time the refusals' slices move (the probability may fall then).
    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.refusals.next_boundary(now)
    }
}

/// A probability as the threshold a uniform 64-bit draw is compared with (`draw < threshold`
/// refuses); 0 never refuses.
pub(crate) fn threshold(probability: f64) -> u64 {
    if probability <= 0.0 {
        0
    } else if probability >= 1.0 {
        u64::MAX
    } else {
        (probability * u64::MAX as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn the_probability_is_the_sre_formula_over_the_window() {
        let throttle = Throttle::new(2.0, Duration::from_secs(10));
        // Healthy, or failing half with K = 2: no throttling.
        assert_eq!(throttle.probability(0, 100, 0), 0.0);
        assert_eq!(throttle.probability(0, 100, 50), 0.0);
        // Failing everything: requests / (requests + 1).
        assert!((throttle.probability(0, 100, 100) - 100.0 / 101.0).abs() < 1e-12);
        // 80% failing: (100 − 2 × 20) / 101.
        assert!((throttle.probability(0, 100, 80) - 60.0 / 101.0).abs() < 1e-12);
    }

    #[test]
    fn refusals_count_as_requests_until_they_slide_out() {
        let mut throttle = Throttle::new(2.0, Duration::from_secs(10));
        throttle.rebase(1_000);
        throttle.absorb(SEC, 1_100);
        // 10 calls, 8 failed, 100 refused: (110 − 4) / 111.
        let p = throttle.probability(SEC, 10, 8);
        assert!((p - 106.0 / 111.0).abs() < 1e-12, "{p}");
        assert!(
            throttle.probability(12 * SEC, 10, 8) < p,
            "the refusals slid out"
        );
        throttle.rebase(5_000);
        assert_eq!(throttle.probability(SEC, 10, 0), 0.0);
    }

    #[test]
    fn thresholds_cover_the_whole_draw() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(-1.0), 0);
        assert_eq!(threshold(1.0), u64::MAX);
        assert_eq!(threshold(f64::NAN), 0);
        let half = threshold(0.5);
        assert!(half > u64::MAX / 2 - 4096 && half < u64::MAX / 2 + 4096);
    }
}
