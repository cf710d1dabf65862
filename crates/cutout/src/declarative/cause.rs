//! What a fallback answers ([`Cause`]) and what a timed-out call returns ([`TimedOut`]).

use std::fmt;
use std::time::Duration;

use crate::{HumanDuration, Rejected};

/// Why a `#[breaker(fallback = ...)]` method's fallback runs: the breaker refused the call,
/// or the call ran and failed (a timeout included).
#[derive(Debug)]
pub enum Cause<E> {
    /// The breaker refused the call; the delegate was not called.
    Refused(Rejected),
    /// The call ran and returned this error.
    Failed(E),
}

impl<E> Cause<E> {
    /// Whether the breaker refused the call.
    pub fn is_refused(&self) -> bool {
        matches!(self, Cause::Refused(_))
    }

    /// The refusal, if the breaker refused the call.
    pub fn rejection(&self) -> Option<&Rejected> {
        match self {
            Cause::Refused(rejected) => Some(rejected),
            Cause::Failed(_) => None,
        }
    }
}

/// A `#[breaker(timeout = "...")]` call ran out of time: cancelled, and its error judged as
/// any other (a failure, unless `ignore` or the classifier says otherwise).
/// The method's error type needs `From<TimedOut>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut(Duration);

impl TimedOut {
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // built by timeouts (feature `tokio`)
    pub(crate) fn new(after: Duration) -> Self {
        TimedOut(after)
    }

    /// The timeout that ran out.
    pub fn after(&self) -> Duration {
        self.0
    }
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the call ran out of its {} timeout",
            HumanDuration(self.0)
        )
    }
}

impl std::error::Error for TimedOut {}
