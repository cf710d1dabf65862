//! Calls still in flight that have already run longer than the slow threshold: a dependency
//! that hangs trips the breaker before any of its calls returns. Part of measuring the
//! dependency, so only adaptive breakers (with relative slow calls) watch calls in flight.
//!
//! Tracked calls (every timed call of an adaptive breaker: all of them at low traffic, one in
//! [`SAMPLE`](crate::machine::sampling::SAMPLE) above it) add to their line's *started* count
//! when admitted and to its *finished* count when their permit is recorded or dropped (see
//! `cells.rs`): one in the low half of the word for a call timed for certain, one in the high
//! half for a call timed by a draw ([`TRACKED_DRAWN`](crate::machine::sampling::TRACKED_DRAWN)),
//! so each kind keeps the weight it was timed with however the window moves. Under the lock,
//! the breaker notes the started totals now and then ([`Marks`]); at time `now`, the tracked
//! calls of each kind started before `now − threshold` number at least `started(then) −
//! finished` still in flight (at most `finished` of them can have finished). That lower bound
//! counts real calls, each a timed call already slow, weighed as its kind is (see
//! `Machine::check_in_flight` and `machine/sampling.rs`). No per-call allocation and no scan
//! of calls in flight: two counter adds per tracked call, a bounded ring under the lock.

use crate::machine::sampling::{self, Hung};

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

    /// Notes the totals at `now` and returns the calls in flight for longer than `threshold`
    /// nanoseconds, by kind (at least these many).
    pub(crate) fn hung(
        &mut self,
        now: u64,
        (started, finished): (u64, u64),
        threshold: u64,
    ) -> Hung {
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
            return Hung::default();
        };
        let Some(&(_, started_then)) = self.marks.iter().rev().find(|(at, _)| *at <= cutoff) else {
            return Hung::default();
        };
        // Both kinds at once, wrapping: each half of the difference is its own kind's.
        let started_then = started_then.wrapping_sub(self.base.0);
        let finished_since = finished.wrapping_sub(self.base.1);
        sampling::tracked(started_then.wrapping_sub(finished_since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certain(n: u64) -> Hung {
        Hung {
            certain: n,
            drawn: 0,
        }
    }

    #[test]
    fn hung_calls_are_those_started_before_the_threshold_and_not_finished() {
        let mut marks = Marks::new();
        let ms = 1_000_000;
        assert_eq!(marks.hung(0, (3, 0), 100 * ms), certain(0));
        assert_eq!(
            marks.hung(50 * ms, (5, 0), 100 * ms),
            certain(0),
            "nothing old enough yet"
        );
        // At 120 ms, the calls started by 0 (3 tracked) are over the threshold; one finished.
        assert_eq!(marks.hung(120 * ms, (9, 1), 100 * ms), certain(2));
        // A later closed period does not count calls from before it.
        marks.rebase((9, 1));
        assert_eq!(marks.hung(300 * ms, (9, 1), 100 * ms), certain(0));
        assert_eq!(
            marks.hung(450 * ms, (12, 1), 100 * ms),
            certain(0),
            "started after 300 ms"
        );
        assert_eq!(marks.hung(600 * ms, (12, 2), 100 * ms), certain(2));
    }

    #[test]
    fn hung_calls_keep_the_kind_they_were_timed_as() {
        let drawn = sampling::TRACKED_DRAWN;
        let ms = 1_000_000;
        let mut marks = Marks::new();
        marks.rebase((4 + 2 * drawn, 4 + 2 * drawn));
        // By 0: 3 calls timed one by one and 5 drawn ones started since the rebase.
        assert_eq!(
            marks.hung(0, (7 + 7 * drawn, 4 + 2 * drawn), 100 * ms),
            Hung::default()
        );
        // At 150 ms, 10 calls of the first kind have finished (more than had started by 0:
        // some started since, which leaves none of that kind) and 2 of the second.
        let started = 20 + 9 * drawn;
        let finished = 4 + 2 * drawn + 10 + 2 * drawn;
        assert_eq!(
            marks.hung(150 * ms, (started, finished), 100 * ms),
            Hung {
                certain: 0,
                drawn: 3
            }
        );
    }
}
