//! Observability glue: a `tracing` event per transition and per manual action (feature
//! `tracing`) and counters and a state gauge through the `metrics` facade (feature
//! `metrics`). Without the features this module compiles to nothing the breaker calls.
//!
//! Metrics, all labelled `breaker = <id>`:
//! - `cutout_calls_total{outcome = success|failure|ignored}`: finished calls it counted;
//! - `cutout_rejections_total{reason = open|half_open_full|ramp|isolated}`;
//! - `cutout_transitions_total{from, to}`;
//! - `cutout_state{state}`: 1 for the current state, 0 for the five others.
//!
//! With `metrics` on, every call increments a shared counter (the exporter's): that write is
//! the feature's cost on the hot path, and the reason it is opt-in.
//!
//! A breaker registers its metric handles when it is built, with whatever recorder is
//! installed then: install the exporter's recorder (e.g. `metrics::set_global_recorder`)
//! before building breakers, or their metrics go to the no-op recorder.

#[cfg(feature = "metrics")]
pub(crate) use metrics_glue::Metrics;

#[cfg(feature = "tracing")]
pub(crate) fn trace(event: &crate::Event) {
    use crate::Transition;
    let t = &event.transition;
    match t {
        Transition::Opened {
            reason, break_for, ..
        } => tracing::warn!(
            breaker = %event.breaker,
            from = t.from().as_str(),
            to = t.to().as_str(),
            reason = reason.as_str(),
            break_ms = break_for.as_millis() as u64,
            "circuit breaker opened"
        ),
        _ => tracing::info!(
            breaker = %event.breaker,
            from = t.from().as_str(),
            to = t.to().as_str(),
            "circuit breaker transition"
        ),
    }
}

/// A manual action (`reset`, `isolate`, …): no transition event is raised for it, so this is
/// its trace. `at`: the breaker's clock; `applied`: whether it took effect; `state`: the state
/// after it.
#[cfg(feature = "tracing")]
pub(crate) fn trace_manual(
    breaker: &crate::BreakerId,
    action: crate::ManualAction,
    at: u64,
    applied: bool,
    state: crate::State,
) {
    tracing::info!(
        breaker = %breaker,
        action = action.as_str(),
        applied,
        state = state.as_str(),
        at_ms = at / 1_000_000,
        "circuit breaker manual action"
    );
}

#[cfg(feature = "metrics")]
mod metrics_glue {
    use metrics::{Counter, Gauge};

    use crate::classify::Outcome;
    use crate::error::RejectReason;
    use crate::{BreakerId, State};

    const STATES: [State; 6] = State::ALL;
    const REASONS: [RejectReason; 4] = [
        RejectReason::Open,
        RejectReason::HalfOpenFull,
        RejectReason::Ramp,
        RejectReason::Isolated,
    ];

    /// Every transition a breaker can make, as (from, to) of its events.
    const TRANSITIONS: [(State, State); 5] = [
        (State::Closed, State::Open),
        (State::Open, State::HalfOpen),
        (State::HalfOpen, State::Open),
        (State::HalfOpen, State::Closed),
        (State::Recovering, State::Open),
    ];

    /// Handles registered once per breaker, so recording is an increment: no lookup, no
    /// allocation.
    pub(crate) struct Metrics {
        calls: [Counter; 3],
        rejections: [Counter; 4],
        states: [Gauge; 6],
        transitions: [Counter; 5],
    }

    impl Metrics {
        pub(crate) fn new(id: &BreakerId, state: State) -> Metrics {
            let breaker = id.to_string();
            let calls = ["success", "failure", "ignored"].map(|outcome| {
                metrics::counter!("cutout_calls_total", "breaker" => breaker.clone(), "outcome" => outcome)
            });
            let rejections = REASONS.map(|reason| {
                metrics::counter!("cutout_rejections_total", "breaker" => breaker.clone(), "reason" => reason.as_str())
            });
            let states = STATES.map(|state| {
                metrics::gauge!("cutout_state", "breaker" => breaker.clone(), "state" => state.as_str())
            });
            let transitions = TRANSITIONS.map(|(from, to)| {
                metrics::counter!(
                    "cutout_transitions_total",
                    "breaker" => breaker.clone(),
                    "from" => from.as_str(),
                    "to" => to.as_str()
                )
            });
            let metrics = Metrics {
                calls,
                rejections,
                states,
                transitions,
            };
            metrics.set_state(state);
            metrics
        }

        #[inline]
        pub(crate) fn call(&self, outcome: Outcome) {
            let index = match outcome {
                Outcome::Success => 0,
                Outcome::Failure => 1,
                Outcome::Ignored => 2,
            };
            self.calls[index].increment(1);
        }

        #[inline]
        pub(crate) fn rejection(&self, reason: RejectReason) {
            let index = REASONS.iter().position(|r| *r == reason).unwrap_or(0);
            self.rejections[index].increment(1);
        }

        /// Moves the gauge: exactly one state reads 1.
        pub(crate) fn set_state(&self, state: State) {
            for (gauge, s) in self.states.iter().zip(STATES) {
                gauge.set(if s == state { 1.0 } else { 0.0 });
            }
        }

        pub(crate) fn transition(&self, from: State, to: State) {
            if let Some(index) = TRANSITIONS.iter().position(|t| *t == (from, to)) {
                self.transitions[index].increment(1);
            }
        }
    }
}
