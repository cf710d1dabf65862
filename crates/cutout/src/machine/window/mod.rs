//! Trip windows: the recent history the failure and slow ratios are measured over.

mod count;
mod time;

use crate::settings::TripWindow;
pub(crate) use count::CountWindow;
pub(crate) use time::TimeWindow;

/// Counts of a window at one moment (a time window keeps narrower ones per bucket, see
/// `time.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
}

impl std::ops::Add for Totals {
    type Output = Totals;

    fn add(self, other: Totals) -> Totals {
        Totals {
            calls: self.calls + other.calls,
            failures: self.failures + other.failures,
            slow: self.slow + other.slow,
        }
    }
}

impl Totals {
    /// With slow calls no more than calls.
    fn capped(self) -> Totals {
        Totals {
            slow: self.slow.min(self.calls),
            ..self
        }
    }
}

/// One counted call's mark in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) failure: bool,
    /// 0, or how many calls this slow one stands for (more than 1 when only a sample of calls
    /// is timed).
    pub(crate) slow: u8,
}

/// The marks the windows' tests record.
#[cfg(test)]
impl Mark {
    pub(crate) const OK: Mark = Mark {
        failure: false,
        slow: 0,
    };
    pub(crate) const FAIL: Mark = Mark {
        failure: true,
        slow: 0,
    };
    pub(crate) const SLOW_OK: Mark = Mark {
        failure: false,
        slow: 1,
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

    /// Records `n` fast successes that all happened in the bucket of `at`.
    pub(crate) fn record_successes(&mut self, at: u64, n: u64) {
        match self {
            Window::Count(window) => window.record_successes(n),
            Window::Time(window) => window.record_successes(at, n),
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

    /// The counts at `now`. A slow sample may stand for more calls than it is (see `Mark`):
    /// the estimate of slow calls never exceeds the calls the window holds.
    pub(crate) fn totals(&self, now: u64) -> Totals {
        match self {
            Window::Count(window) => window.totals(),
            Window::Time(window) => window.totals(now),
        }
        .capped()
    }

    /// The counts at `now` as if `n` more successes had landed at `at`, changing nothing (for
    /// reads of successes not yet folded).
    pub(crate) fn totals_with_successes(&self, now: u64, at: u64, n: u64) -> Totals {
        match self {
            Window::Count(window) => window.totals_after_successes(n),
            Window::Time(window) => {
                let mut totals = window.totals(now);
                if window.holds(at, now) {
                    totals.calls += n;
                }
                totals
            }
        }
        .capped()
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
