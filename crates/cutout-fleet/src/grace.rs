//! [`TripGrace`]: whether a watched breaker tripped from closed lately, so that it still
//! publishes the window that tripped it (the task's rule, and the lab's model of it).

use cutout::State;

/// One watched breaker's memory of a trip from closed, on any clock of whole units (the
/// task's milliseconds since it started, the lab's simulated ones).
///
/// A pod publishes its window's counts while closed and, for `grace` after a trip from
/// closed, the counts that tripped it: without the grace, pods that open withdraw their
/// failures and the last pods of a fleet could fall below the minimum; publishing the frozen
/// window for the whole break would re-open every pod that recovers.
///
/// The task observes it on every tick, whether or not Redis answers that tick, so that a
/// trip is dated when it happened rather than when Redis was next reachable (the lab's
/// model observes it every round, lost or not).
///
/// ```
/// use cutout::State;
/// use cutout_fleet::TripGrace;
///
/// let mut grace = TripGrace::default();
/// assert!(!grace.observe(State::Closed, 0, 500));
/// assert!(grace.observe(State::Open, 100, 500), "tripped from closed");
/// assert!(grace.observe(State::Open, 600, 500));
/// assert!(!grace.observe(State::Open, 601, 500), "the grace ran out");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TripGrace {
    was_closed: bool,
    tripped_at: Option<u64>,
}

impl TripGrace {
    /// Notes the breaker's state at `now`; returns whether it tripped from closed within
    /// `grace` of `now`.
    pub fn observe(&mut self, state: State, now: u64, grace: u64) -> bool {
        match state {
            State::Closed => self.tripped_at = None,
            State::Open if self.was_closed => self.tripped_at = Some(now),
            State::Open => {}
            _ => self.tripped_at = None,
        }
        self.was_closed = state == State::Closed;
        self.tripped_at
            .is_some_and(|at| now.saturating_sub(at) <= grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trip_from_closed_keeps_its_window_published_for_the_grace_only() {
        let grace = 1_000;
        let mut key = TripGrace::default();
        assert!(
            !key.observe(State::Open, 0, grace),
            "open when first seen: not a trip"
        );
        assert!(!key.observe(State::Closed, 0, grace));
        assert!(key.observe(State::Open, 250, grace));
        assert!(key.observe(State::Open, 1_250, grace));
        assert!(!key.observe(State::Open, 1_300, grace));
        // Re-opened from half-open: the probes' counts are not the fleet's business.
        assert!(!key.observe(State::HalfOpen, 20_000, grace));
        assert!(!key.observe(State::Open, 21_000, grace));
    }
}
