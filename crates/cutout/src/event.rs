//! Transition events, raised on the call that caused them, after the state changed and outside
//! the breaker's lock.
//!
//! # Threshold exceeded
//! Besides the state changes, one event that changes no state:
//! [`Transition::ThresholdExceeded`], resilience4j's FailureRateExceeded and
//! SlowCallRateExceeded. It is raised when an evaluation of the closed state's trip rules finds
//! a rate rule's threshold reached (the failure ratio, failures above normal, the slow-call
//! ratio) and the breaker stays closed: its [open gate](crate::BreakerBuilder::open_gate)
//! kept it closed, or it [throttles](crate::SettingsBuilder::throttle) instead of opening.
//! A crossing that opens the breaker raises its [`Transition::Opened`] alone, whose reason and
//! evidence say the same; resilience4j raises both there because its transition event says
//! neither.
//!
//! It is raised once per crossing, not on each evaluation above the threshold: the rules are
//! evaluated on every counted outcome, so a gated or throttling breaker above its threshold
//! would raise one event per call, each a run of every listener on a caller's thread, when
//! what an alert needs is the moment of the crossing. It is raised again once an evaluation
//! has found no rate rule above its threshold, when another rate rule is the one found
//! above, or in a new closed period (after the breaker left closed). What it can no longer
//! see: how long the rate stayed above (the snapshot's rates, and
//! [`Snapshot::suppressed_opens`](crate::Snapshot::suppressed_opens) for a gate, show that),
//! and a rule below another that is above (the rules are judged in order, the first found
//! above is the one reported). The consecutive-failure rule is not a rate rule and raises
//! nothing of the kind.
//!
//! It costs nothing off the lock: the rules are evaluated under the breaker's lock, where a
//! crossing is noted (one byte of the machine), and raised with the other events once the
//! lock is let go; with no listener, nothing runs but the event's tracing.

use std::fmt;
use std::time::Duration;

use crate::{BreakerId, State};

/// Why a breaker opened.
///
/// New reasons may be added (the enum is `#[non_exhaustive]`): match with a wildcard arm,
/// or use [`as_str`](OpenReason::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpenReason {
    /// This many consecutive counted failures.
    ConsecutiveFailures(u32),
    /// The window's failure ratio reached the configured ratio.
    FailureRatio,
    /// The window's failure rate exceeded the configured multiple of the measured normal rate.
    FailuresAboveNormal,
    /// The window's slow-call ratio reached the configured ratio.
    SlowCallRatio,
    /// A half-open probe failed.
    ProbeFailed,
    /// A half-open probe was slow.
    ProbeSlow,
    /// The probes' failure or slow rate reached a threshold ([`HalfOpenRule::Rates`](crate::HalfOpenRule::Rates)).
    ProbeRates,
    /// Half-open lasted longer than `max_wait_in_half_open`.
    HalfOpenTimeout,
    /// A call admitted by the recovery ramp failed.
    RampFailed,
    /// A call's dependency asked not to be called for a while (a classifier's
    /// [`Verdict::OpenFor`](crate::classify::Verdict::OpenFor): an HTTP 429 or 503 with
    /// `Retry-After`). The break is the time asked, capped by `max_break_duration`, without
    /// jitter or growth.
    RetryAfter,
    /// A signal from outside the breaker's own calls ([`Breaker::trip_on_signal`](crate::Breaker::trip_on_signal)):
    /// e.g. the failures a fleet of breakers sees together.
    Signal,
}

impl OpenReason {
    /// A stable lower-case name (`"consecutive_failures"`, …) for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            OpenReason::ConsecutiveFailures(_) => "consecutive_failures",
            OpenReason::FailureRatio => "failure_ratio",
            OpenReason::FailuresAboveNormal => "failures_above_normal",
            OpenReason::SlowCallRatio => "slow_call_ratio",
            OpenReason::ProbeFailed => "probe_failed",
            OpenReason::ProbeSlow => "probe_slow",
            OpenReason::ProbeRates => "probe_rates",
            OpenReason::HalfOpenTimeout => "half_open_timeout",
            OpenReason::RampFailed => "ramp_failed",
            OpenReason::RetryAfter => "retry_after",
            OpenReason::Signal => "signal",
        }
    }
}

impl fmt::Display for OpenReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenReason::ConsecutiveFailures(n) => write!(f, "{n} consecutive failures"),
            OpenReason::FailureRatio => f.write_str("failure ratio reached"),
            OpenReason::FailuresAboveNormal => f.write_str("failure rate above normal"),
            OpenReason::SlowCallRatio => f.write_str("slow-call ratio reached"),
            OpenReason::ProbeFailed => f.write_str("trial call failed"),
            OpenReason::ProbeSlow => f.write_str("trial call was slow"),
            OpenReason::ProbeRates => f.write_str("trial calls failed the thresholds"),
            OpenReason::HalfOpenTimeout => f.write_str("half-open for too long"),
            OpenReason::RampFailed => f.write_str("a call failed during the recovery ramp"),
            OpenReason::RetryAfter => f.write_str("the dependency asked to retry later"),
            OpenReason::Signal => f.write_str("a signal from outside its calls"),
        }
    }
}

/// What ended a break early ([`Breaker::end_break_on_signal`](crate::Breaker::end_break_on_signal)):
/// evidence from outside the breaker's own calls that its dependency is back.
///
/// New reasons may be added (the enum is `#[non_exhaustive]`): match with a wildcard arm,
/// or use [`as_str`](BreakEndReason::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakEndReason {
    /// An active health check of the dependency passed.
    HealthCheck,
    /// A peer's probes closed its breaker on the same dependency (fleet recovery).
    PeerRecovered,
    /// Any other signal from outside the breaker's own calls.
    Signal,
}

impl BreakEndReason {
    /// A stable lower-case name (`"health_check"`, …) for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            BreakEndReason::HealthCheck => "health_check",
            BreakEndReason::PeerRecovered => "peer_recovered",
            BreakEndReason::Signal => "signal",
        }
    }
}

impl fmt::Display for BreakEndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BreakEndReason::HealthCheck => "a health check passed",
            BreakEndReason::PeerRecovered => "a peer's probes closed its breaker",
            BreakEndReason::Signal => "a signal from outside its calls said it recovered",
        })
    }
}

/// Why a breaker closed (or, with a recovery ramp, started recovering).
///
/// New reasons may be added (the enum is `#[non_exhaustive]`): match with a wildcard arm,
/// or use [`as_str`](CloseReason::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseReason {
    /// The half-open probes succeeded.
    ProbesSucceeded,
    /// Half-open lasted longer than `max_wait_in_half_open` and the settings say to close
    /// then (`half-open-timeout = "close"`): no probe decided it.
    HalfOpenTimeout,
}

impl CloseReason {
    /// A stable lower-case name (`"probes_succeeded"`, …) for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            CloseReason::ProbesSucceeded => "probes_succeeded",
            CloseReason::HalfOpenTimeout => "half_open_timeout",
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CloseReason::ProbesSucceeded => "trial call succeeded",
            CloseReason::HalfOpenTimeout => "half-open for too long; closed as configured",
        })
    }
}

/// A state transition.
///
/// New transitions may be added (the enum is `#[non_exhaustive]`): match with a wildcard
/// arm; [`from`](Transition::from) and [`to`](Transition::to) name the states of any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transition {
    /// The breaker opened for `break_for` (the jittered break it serves).
    Opened {
        /// The state it left (closed, half-open or recovering).
        from: State,
        /// What opened it.
        reason: OpenReason,
        /// The break being served.
        break_for: Duration,
    },
    /// The break elapsed and a call became the first probe.
    HalfOpened,
    /// A signal that the dependency is back ended the break early: half-open now, and the
    /// breaker's own probes decide as after any break.
    BreakEnded {
        /// What ended it.
        reason: BreakEndReason,
        /// What was left of the break.
        remaining: Duration,
    },
    /// The breaker closed, or with a recovery ramp started recovering: either way it stopped
    /// refusing everything. The ramp's end is silent.
    Closed {
        /// The state it left.
        from: State,
        /// Why.
        reason: CloseReason,
    },
    /// Not a change of state (`from` and `to` are both closed): a rate rule's threshold was
    /// reached while closed and the breaker stayed closed (an open gate kept it closed, or it
    /// throttles instead of opening); resilience4j's FailureRateExceeded and
    /// SlowCallRateExceeded. The event's [`evidence`](Event::evidence) holds the window it
    /// read. A crossing that opens the breaker raises its [`Transition::Opened`] alone.
    ///
    /// Once per crossing, not on each evaluation above the threshold (the rules run on every
    /// counted outcome: a breaker held above would raise one per call). Raised again after an
    /// evaluation found no rate rule above, when another rate rule is the one found above,
    /// or in a new closed period. Rules are judged in order and the first found above is
    /// reported; the consecutive-failure rule is not a rate rule.
    ThresholdExceeded {
        /// The rule whose threshold was reached: [`OpenReason::FailureRatio`],
        /// [`OpenReason::FailuresAboveNormal`] or [`OpenReason::SlowCallRatio`].
        reason: OpenReason,
    },
}

impl Transition {
    /// The state left.
    pub fn from(&self) -> State {
        match self {
            Transition::Opened { from, .. } | Transition::Closed { from, .. } => *from,
            Transition::HalfOpened | Transition::BreakEnded { .. } => State::Open,
            Transition::ThresholdExceeded { .. } => State::Closed,
        }
    }

    /// The state entered.
    pub fn to(&self) -> State {
        match self {
            Transition::Opened { .. } => State::Open,
            Transition::HalfOpened | Transition::BreakEnded { .. } => State::HalfOpen,
            Transition::Closed { .. } | Transition::ThresholdExceeded { .. } => State::Closed,
        }
    }
}

/// A transition of one breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The breaker's id.
    pub breaker: BreakerId,
    /// The breaker's clock when it happened.
    pub at: Duration,
    /// What happened.
    pub transition: Transition,
    /// For an opening by a rule of the closed state (consecutive failures, failure ratio,
    /// failures above normal, slow calls) and a threshold exceeded: the window and the
    /// baselines it read. None for every other transition.
    pub evidence: Option<crate::TripEvidence>,
}

/// Why the transition happened, in a few words: the open reason, "open duration elapsed", what
/// ended the break early, the close reason ("trial call succeeded", …), or the rule whose
/// threshold was exceeded ("failure ratio reached; stayed closed").
impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transition::Opened { reason, .. } => fmt::Display::fmt(reason, f),
            Transition::HalfOpened => f.write_str("open duration elapsed"),
            Transition::BreakEnded { reason, .. } => fmt::Display::fmt(reason, f),
            Transition::Closed { reason, .. } => fmt::Display::fmt(reason, f),
            Transition::ThresholdExceeded { reason } => write!(f, "{reason}; stayed closed"),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.transition;
        write!(f, "{}: {} -> {}: {t}", self.breaker, t.from(), t.to())?;
        if let Some(evidence) = &self.evidence {
            write!(f, ": {evidence}")?;
        }
        if let Transition::Opened { break_for, .. } = t {
            write!(f, " (break {})", crate::HumanDuration(*break_for))?;
        }
        Ok(())
    }
}
