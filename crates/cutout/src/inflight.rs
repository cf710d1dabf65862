//! Calls still in flight that have already run longer than the slow threshold: a dependency
//! that hangs trips the breaker before any of its calls returns. Part of measuring the
//! dependency, so only adaptive breakers (with relative slow calls) watch calls in flight.
//!
//! One call in [`SAMPLE`] per breaker and thread is tracked: it adds one to its thread's *started* cell when
//! admitted and one to its *finished* cell when its permit is recorded or dropped. Under the
//! lock, the breaker notes the started total now and then ([`Marks`]); at time `now`, the
//! tracked calls started before `now − threshold` number at least `started(then) − finished`
//! still in flight (at most `finished` of them can have finished). Scaled by [`SAMPLE`], that
//! lower bound joins the window as slow calls. No per-call allocation and no scan of calls in
//! flight: two counter adds per tracked call, a bounded ring under the lock. The price of the
//! sample is granularity: one tracked call in flight stands for eight, so at very low traffic a
//! single hung call weighs as eight slow ones.
//!
//! # Orderings
//! `Relaxed` throughout: the counters are monotonic sums read under the breaker's lock; a
//! start or finish that lands just after a read is seen by the next one, and a late finish
//! only makes the estimate lower (it never counts a finished call as hung).

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::shards::cell_count;
use crate::slot::thread_cell;

/// One call in this many is tracked.
pub(crate) const SAMPLE: u64 = 8;

/// Marks kept, spaced by a sixteenth of the threshold: they reach back four thresholds.
const MARKS: usize = 64;

/// The top bit of a cell's turn word: this cell's timed calls come at most a pace apart.
const PACED: u64 = 1 << 63;

struct Cells {
    /// Calls admitted on this cell (bits 0–62), for choosing which to track, and the paced
    /// flag (bit 63). A plain load and store (not a read-modify-write): threads sharing a
    /// cell may lose a turn, which only shifts the sample.
    turn: AtomicU64,
    started: AtomicU64,
    finished: AtomicU64,
    /// When this cell's last tracked call started (`u64::MAX`: none yet).
    last_start: AtomicU64,
}

impl Default for Cells {
    fn default() -> Cells {
        Cells {
            turn: AtomicU64::new(0),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            last_start: AtomicU64::new(u64::MAX),
        }
    }
}

/// A call's turn on its cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Turn {
    /// The call is the sampled one: timed and tracked.
    pub(crate) sampled: bool,
    /// The cell's tracked calls have come at most a pace apart (see [`InFlight::track`]).
    pub(crate) paced: bool,
}

/// The lock-free half: per-thread started and finished counts of tracked calls.
pub(crate) struct InFlight {
    cells: Box<[CachePadded<Cells>]>,
}

impl InFlight {
    pub(crate) fn new() -> InFlight {
        InFlight {
            cells: (0..cell_count()).map(|_| CachePadded::default()).collect(),
        }
    }

    #[inline]
    fn cell(&self) -> &Cells {
        &self.cells[thread_cell(self.cells.len())]
    }

    /// Called as a call is admitted: whether it is the sampled one (one in [`SAMPLE`] of this
    /// breaker's calls on this thread's cell, so the choice depends on nothing outside it).
    #[inline]
    pub(crate) fn turn(&self) -> Turn {
        let cell = self.cell();
        let turn = cell.turn.load(Ordering::Relaxed);
        cell.turn.store(
            turn.wrapping_add(1) & !PACED | turn & PACED,
            Ordering::Relaxed,
        );
        Turn {
            sampled: (turn & !PACED).is_multiple_of(SAMPLE),
            paced: turn & PACED != 0,
        }
    }

    /// Counts a sampled call as started at `start` (it is then tracked until it finishes),
    /// and notes whether it came less than `pace` nanoseconds after the cell's previous one
    /// (never, with a `pace` of 0). While
    /// they do, the timed calls of the cell see every deadline of the breaker's hot path
    /// (bucket boundaries) within about `pace` of its passing, and the untimed calls between
    /// them may skip reading the clock.
    #[inline]
    pub(crate) fn track(&self, start: u64, pace: u64) {
        let cell = self.cell();
        cell.started.fetch_add(1, Ordering::Relaxed);
        // A load and a store, not a swap: threads sharing a cell may each judge against the
        // other's start, which only shifts the pace by one sample.
        let last = cell.last_start.load(Ordering::Relaxed);
        cell.last_start.store(start, Ordering::Relaxed);
        let paced = last != u64::MAX && start >= last && start - last < pace;
        let turn = cell.turn.load(Ordering::Relaxed);
        if (turn & PACED != 0) != paced {
            cell.turn.store(turn ^ PACED, Ordering::Relaxed);
        }
    }

    /// [`InFlight::turn`], then [`InFlight::track`] if sampled.
    #[cfg(test)]
    fn start(&self, now: u64) -> Turn {
        let turn = self.turn();
        if turn.sampled {
            self.track(now, 101);
        }
        turn
    }

    /// Called once when a tracked call's permit is recorded or dropped.
    pub(crate) fn finish(&self) {
        self.cell().finished.fetch_add(1, Ordering::Relaxed);
    }

    /// The started and finished totals.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.cells.iter().fold((0, 0), |(s, f), cell| {
            (
                s + cell.started.load(Ordering::Relaxed),
                f + cell.finished.load(Ordering::Relaxed),
            )
        })
    }
}

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
        let spacing = (threshold / 16).max(1);
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
        started_then.saturating_sub(finished_since) * SAMPLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_in_eight_is_tracked_per_breaker() {
        let in_flight = InFlight::new();
        let other = InFlight::new();
        let tracked = (0..64).filter(|_| in_flight.start(0).sampled).count();
        assert_eq!(tracked, 8);
        assert_eq!(in_flight.totals(), (8, 0));
        // Another breaker's calls on the same thread do not move this one's turn.
        assert!(other.start(0).sampled);
        assert!(
            in_flight.start(0).sampled,
            "call 65 is the next tracked one"
        );
    }

    #[test]
    fn a_cell_is_paced_while_its_tracked_calls_come_within_the_pace() {
        let in_flight = InFlight::new();
        let turns: Vec<Turn> = (0..8).map(|_| in_flight.start(1_000)).collect();
        assert!(turns.iter().all(|t| !t.paced), "no earlier tracked call");
        // The second tracked call comes 100 ns after the first: paced from then on.
        let turn = in_flight.start(1_100);
        assert!(
            turn.sampled && !turn.paced,
            "the flag is read before the call is tracked"
        );
        assert!((0..7).all(|_| in_flight.start(1_100).paced));
        // Traffic thins out: the next tracked call comes 101 ns later, and the flag drops.
        assert!(in_flight.start(1_201).sampled);
        assert!(!in_flight.start(1_201).paced);
        // Stays sampled one in eight, whatever the flag.
        let sampled = (0..62).filter(|_| in_flight.start(1_201).sampled).count();
        assert_eq!(sampled, 7);
    }

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
        assert_eq!(marks.hung(120 * ms, (9, 1), 100 * ms), 2 * SAMPLE);
        // A later closed period does not count calls from before it.
        marks.rebase((9, 1));
        assert_eq!(marks.hung(300 * ms, (9, 1), 100 * ms), 0);
        assert_eq!(
            marks.hung(450 * ms, (12, 1), 100 * ms),
            0,
            "started after 300 ms"
        );
        assert_eq!(marks.hung(600 * ms, (12, 2), 100 * ms), 2 * SAMPLE);
    }
}
