//! Observability glue: a `tracing` event per transition and per manual action (feature
//! `tracing`), and the `metrics` feature's series: a [call observer](crate::observer) for the
//! calls, hooks under the lock for transitions and gauges. Without the features this module
//! compiles to nothing the breaker calls.
//!
//! The metrics and what each one means are listed in the crate docs
//! ([`crate::metrics`]).

#[cfg(feature = "metrics")]
pub(crate) use metrics_glue::Metrics;

#[cfg(feature = "tracing")]
pub(crate) fn trace(event: &crate::Event) {
    use crate::Transition;
    let t = &event.transition;
    match t {
        Transition::Opened {
            reason, break_for, ..
        } => {
            // What tripped it, when a rule of the closed state did: the window's counts and
            // the baselines they were read against (absent fields: not known).
            let evidence = event.evidence;
            tracing::warn!(
                breaker = %event.breaker,
                from = t.from().as_str(),
                to = t.to().as_str(),
                reason = reason.as_str(),
                break_ms = break_for.as_millis() as u64,
                calls = evidence.map(|e| e.calls),
                failures = evidence.map(|e| e.failures),
                slow = evidence.map(|e| e.slow),
                normal_failure_rate = evidence.and_then(|e| e.normal_failure_rate),
                normal_latency_ms = evidence
                    .and_then(|e| e.normal_latency)
                    .map(|d| d.as_secs_f64() * 1000.0),
                slow_threshold_ms = evidence
                    .and_then(|e| e.slow_threshold)
                    .map(|d| d.as_secs_f64() * 1000.0),
                "circuit breaker opened"
            )
        }
        Transition::BreakEnded { reason, remaining } => tracing::info!(
            breaker = %event.breaker,
            from = t.from().as_str(),
            to = t.to().as_str(),
            reason = reason.as_str(),
            remaining_ms = remaining.as_millis() as u64,
            "circuit breaker break ended early"
        ),
        Transition::ThresholdExceeded { reason } => {
            let evidence = event.evidence;
            tracing::warn!(
                breaker = %event.breaker,
                reason = reason.as_str(),
                calls = evidence.map(|e| e.calls),
                failures = evidence.map(|e| e.failures),
                slow = evidence.map(|e| e.slow),
                normal_failure_rate = evidence.and_then(|e| e.normal_failure_rate),
                "circuit breaker threshold exceeded; stayed closed"
            )
        }
        Transition::Closed { reason, .. } => tracing::info!(
            breaker = %event.breaker,
            from = t.from().as_str(),
            to = t.to().as_str(),
            reason = reason.as_str(),
            "circuit breaker closed"
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
mod metrics_glue;
