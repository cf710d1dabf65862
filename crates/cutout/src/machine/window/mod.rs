//! Trip windows: the recent history the failure and slow ratios are measured over.

mod count;
pub(crate) mod time;

use crate::settings::TripWindow;
pub(crate) use count::CountWindow;
pub(crate) use time::TimeWindow;

/// Counts of a window at one moment (a time window keeps narrower ones per bucket, see
/// `time.rs`). What the slow counts estimate is `machine/sampling.rs`'s to say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    /// Slow calls among the timed ones.
    pub(crate) slow: u64,
    /// Calls whose duration was measured: all of them, a sample of them, or none.
    pub(crate) timed: u64,
    /// Of the slow calls, those timed by a draw: each stands for
    /// [`SAMPLE`](crate::machine::sampling::SAMPLE) calls.
    pub(crate) slow_drawn: u64,
}

impl std::ops::Add for Totals {
    type Output = Totals;

    fn add(self, other: Totals) -> Totals {
        Totals {
            calls: self.calls + other.calls,
            failures: self.failures + other.failures,
            slow: self.slow + other.slow,
            timed: self.timed + other.timed,
            slow_drawn: self.slow_drawn + other.slow_drawn,
        }
    }
}

/// One counted call's mark in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) failure: bool,
    /// Timed, and slower than the threshold.
    pub(crate) slow: bool,
    /// Timed.
    pub(crate) timed: bool,
    /// Timed by a draw (see `machine/sampling.rs`).
    pub(crate) drawn: bool,
}

/// The marks the windows' tests record.
#[cfg(test)]
impl Mark {
    pub(crate) const OK: Mark = Mark {
        failure: false,
        slow: false,
        timed: false,
        drawn: false,
    };
    pub(crate) const FAIL: Mark = Mark {
        failure: true,
        slow: false,
        timed: false,
        drawn: false,
    };
    pub(crate) const SLOW_OK: Mark = Mark {
        failure: false,
        slow: true,
        timed: true,
        drawn: false,
    };
}

/// A trip window of either kind.
#[derive(Debug, Clone)]
pub(crate) enum Window {
    Count(CountWindow),
    Time(TimeWindow),
}

impl Window {
    pub(crate) fn new(window: TripWindow) -> Window {
        match window {
            TripWindow::Count(size) => Window::Count(CountWindow::new(size)),
            TripWindow::Time(span) => Window::Time(TimeWindow::new(span)),
        }
    }

    pub(crate) fn record(&mut self, now: u64, mark: Mark) {
        match self {
            Window::Count(window) => window.record(mark),
            Window::Time(window) => window.record(now, mark),
        }
    }

    /// Records `n` successes counted off the lock, `timed` of them timed (none slow), all
    /// in the bucket of `at`.
    pub(crate) fn record_successes(&mut self, at: u64, n: u64, timed: u64) {
        match self {
            Window::Count(window) => window.record_successes(n, timed),
            Window::Time(window) => window.record_successes(at, n, timed),
        }
    }

    /// The most calls the window can hold (`u64::MAX` for a time window).
    pub(crate) fn capacity(&self) -> u64 {
        match self {
            Window::Count(window) => window.capacity(),
            Window::Time(_) => u64::MAX,
        }
    }

    /// When the next bucket drops out or starts (`u64::MAX` for a count window): until then,
    /// successes can only lower the window's ratios.
    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        match self {
            Window::Count(_) => u64::MAX,
            Window::Time(window) => window.next_boundary(now),
        }
    }

    /// The counts at `now`.
    pub(crate) fn totals(&self, now: u64) -> Totals {
        match self {
            Window::Count(window) => window.totals(),
            Window::Time(window) => window.totals(now),
        }
    }

    /// The counts at `now` as if `n` more successes had landed at `at`, changing nothing (for
    /// reads of successes not yet folded).
    pub(crate) fn totals_with_successes(
        &self,
        now: u64,
        at: u64,
        (n, timed): (u64, u64),
    ) -> Totals {
        match self {
            Window::Count(window) => window.totals_after_successes(n, timed),
            Window::Time(window) => {
                let mut totals = window.totals(now);
                if window.holds(at, now) {
                    totals.calls += n;
                    totals.timed += timed;
                }
                totals
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            Window::Count(window) => window.clear(),
            Window::Time(window) => window.clear(),
        }
    }

    /// Whether recording a fast success would leave the window exactly as it is, so the hot
    /// path may skip it: true for a count window full of successes; never for a time window,
    /// whose call counts move with every call.
    pub(crate) fn success_is_noop(&self) -> bool {
        match self {
            Window::Count(window) => window.is_full_and_clean(),
            Window::Time(_) => false,
        }
    }
}
