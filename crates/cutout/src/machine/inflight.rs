//! Calls still in flight that have already run longer than the slow threshold: a dependency
//! that hangs trips the breaker before any of its calls returns. Part of measuring the
//! dependency, so only adaptive breakers (with relative slow calls) watch calls in flight.
//!
//! Tracked calls (every timed call of an adaptive breaker: all of them at low traffic, one in
//! [`SAMPLE`](crate::front::cells::SAMPLE) above it) add one to their line's *started* count when
//! admitted and one to its *finished* count when their permit is recorded or dropped (see
//! `cells.rs`). Under the lock, the breaker notes the started total now and then ([`Marks`]);
//! at time `now`, the tracked calls started before `now − threshold` number at least
//! `started(then) − finished` still in flight (at most `finished` of them can have finished).
//! That lower bound counts real calls, each a timed call already slow (see
//! `Machine::check_in_flight`). No per-call allocation and no scan of calls in
//! flight: two counter adds per tracked call, a bounded ring under the lock.

/// Marks kept, spaced by a third of the threshold: they reach back four thresholds. A call
/// counts as hung once it has run between one and one and a third thresholds.
const MARKS: usize = 12;

/// The locked half: when the started total was what, and the totals at the last transition.
#[derive(Debug, Clone)]
pub(crate) struct Marks {
    marks: std::collections::VecDeque<(u64, u64)>,
    /// Started and finished totals when the current closed period began: calls from before
    /// it never count against it.
    base: (u64, u64),
}

impl Marks {
    pub(crate) fn new() -> Marks {
        Marks {
            marks: std::collections::VecDeque::with_capacity(MARKS),
            base: (0, 0),
        }
    }

    /// Starts a new closed period at these totals.
    pub(crate) fn rebase(&mut self, totals: (u64, u64)) {
        self.base = totals;
        self.marks.clear();
    }

    /// Notes the totals at `now` and returns the estimated number of calls in flight for
    /// longer than `threshold` nanoseconds.
    pub(crate) fn hung(
        &mut self,
        now: u64,
        (started, finished): (u64, u64),
        threshold: u64,
    ) -> u64 {
        let spacing = (threshold / 3).max(1);
        if self
            .marks
            .back()
            .is_none_or(|&(at, _)| now >= at.saturating_add(spacing))
        {
            if self.marks.len() == MARKS {
                self.marks.pop_front();
            }
            self.marks.push_back((now, started));
        }
        let Some(cutoff) = now.checked_sub(threshold) else {
            return 0;
        };
        let Some(&(_, started_then)) = self.marks.iter().rev().find(|(at, _)| *at <= cutoff) else {
            return 0;
        };
        let started_then = started_then.saturating_sub(self.base.0);
        let finished_since = finished.saturating_sub(self.base.1);
        started_then.saturating_sub(finished_since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hung_calls_are_those_started_before_the_threshold_and_not_finished() {
        let mut marks = Marks::new();
        let ms = 1_000_000;
        assert_eq!(marks.hung(0, (3, 0), 100 * ms), 0);
        assert_eq!(
            marks.hung(50 * ms, (5, 0), 100 * ms),
            0,
            "nothing old enough yet"
        );
        // At 120 ms, the calls started by 0 (3 tracked) are over the threshold; one finished.
        assert_eq!(marks.hung(120 * ms, (9, 1), 100 * ms), 2);
        // A later closed period does not count calls from before it.
        marks.rebase((9, 1));
        assert_eq!(marks.hung(300 * ms, (9, 1), 100 * ms), 0);
        assert_eq!(
            marks.hung(450 * ms, (12, 1), 100 * ms),
            0,
            "started after 300 ms"
        );
        assert_eq!(marks.hung(600 * ms, (12, 2), 100 * ms), 2);
    }
}
