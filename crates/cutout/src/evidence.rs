//! What a trip rule saw when it opened a breaker: the window's figures and the baselines they
//! were compared with, carried on the [`Opened`](crate::Transition::Opened) event.
//!
//! An operator reading "failure rate above normal" needs the two numbers behind it (how many of
//! how many calls failed, against what normal rate) to tell a real incident from a baseline that
//! learned the wrong normal. The figures are read under the breaker's lock on the call that
//! tripped it, only when it trips: the hot path does not change.

use std::fmt;
use std::time::Duration;

use crate::HumanDuration;
use crate::event::{OpenReason, Transition};
use crate::state::State;

/// The trip window and the baselines as a rule that opens a breaker from Closed read them
/// ([`Event::evidence`](crate::Event::evidence)).
///
/// `slow` is the window's slow calls as the breaker estimates them (each timed call weighed by
/// the calls it stood for, see the crate's "Estimates" docs); the other counts are exact.
#[derive(Debug, Clone, Copy)]
pub struct TripEvidence {
    /// Calls in the trip window.
    pub calls: u64,
    /// Counted failures among them.
    pub failures: u64,
    /// Slow calls among them (estimated where only some calls are timed).
    pub slow: u64,
    /// The measured normal failure rate the relative rule compared with (None until armed).
    pub normal_failure_rate: Option<f64>,
    /// The measured normal latency (None until armed or where latency is not measured).
    pub normal_latency: Option<Duration>,
    /// The slow-call threshold in force: the absolute one, tightened by the relative one
    /// (None where no slow rule is configured or armed).
    pub slow_threshold: Option<Duration>,
}

impl PartialEq for TripEvidence {
    fn eq(&self, other: &Self) -> bool {
        self.calls == other.calls
            && self.failures == other.failures
            && self.slow == other.slow
            && self.normal_failure_rate.map(f64::to_bits)
                == other.normal_failure_rate.map(f64::to_bits)
            && self.normal_latency == other.normal_latency
            && self.slow_threshold == other.slow_threshold
    }
}

/// Equality compares the rates bit for bit, so it is total.
impl Eq for TripEvidence {}

/// "12 of 40 calls failed (normal 0.10%), 3 slow above 60ms (normal 20ms)": what is known.
impl fmt::Display for TripEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} calls failed", self.failures, self.calls)?;
        if let Some(rate) = self.normal_failure_rate {
            write!(f, " (normal {:.2}%)", rate * 100.0)?;
        }
        if let Some(threshold) = self.slow_threshold {
            write!(f, ", {} slow above {}", self.slow, HumanDuration(threshold))?;
            if let Some(normal) = self.normal_latency {
                write!(f, " (normal {})", HumanDuration(normal))?;
            }
        }
        Ok(())
    }
}

/// Whether `transition` is an opening by a rule of the closed state, or a threshold exceeded
/// while closed: the ones whose figures [`TripEvidence`] holds.
pub(crate) fn closed_rule(transition: &Transition) -> bool {
    matches!(
        transition,
        Transition::Opened {
            from: State::Closed,
            reason: OpenReason::ConsecutiveFailures(_)
                | OpenReason::FailureRatio
                | OpenReason::FailuresAboveNormal
                | OpenReason::SlowCallRatio,
            ..
        } | Transition::ThresholdExceeded { .. }
    )
}
