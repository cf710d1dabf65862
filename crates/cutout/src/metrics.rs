//! The series the `metrics` feature records, with their names, types and labels.
//!
//! With the feature on, every breaker registers these through the `metrics` facade when it
//! is built, with the recorder installed then (install the exporter's recorder, e.g.
//! `metrics-exporter-prometheus`, before building breakers; breakers built before record to
//! the no-op recorder). Each is described (`describe_*`), so a Prometheus exposition carries a
//! `# HELP` line for it. The calls reach them through a [call observer](crate::observer), so a
//! breaker with the feature on is an observed breaker (its healthy call is counted on its
//! core's line rather than skipped; see the observer module for the cost).
//!
//! Every series has the label `breaker` (the breaker's id).
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `cutout_calls_total` | counter | `outcome` = `success`, `failure`, `ignored`, `open_for` | calls that finished with an outcome the breaker saw (a disabled breaker's are not seen) |
//! | `cutout_slow_calls_total` | counter | | timed calls over the slow threshold |
//! | `cutout_rejections_total` | counter | `reason` = `open`, `half_open_full`, `ramp`, `isolated`, `throttled` | refused calls |
//! | `cutout_transitions_total` | counter | `from`, `to` (state names) | transitions (events); manual actions are not transitions |
//! | `cutout_state` | gauge | `state` = `closed`, `open`, `half_open`, `recovering`, `isolated`, `disabled` | 1 for the current state, 0 for the others |
//! | `cutout_failure_rate` | gauge | | failures / calls in the trip window (0 to 1); NaN until the window holds the minimum calls |
//! | `cutout_slow_rate` | gauge | | slow calls / calls in the trip window; NaN until the minimum calls or when nothing is timed |
//! | `cutout_normal_latency_seconds` | gauge | | the measured normal (median) latency of an adaptive breaker; NaN until armed |
//! | `cutout_call_duration_seconds` | histogram | | durations of timed calls (see [`Call::duration`](crate::observer::Call::duration)) |
//!
//! The gauges follow the breaker's locked operations: the state gauge at every change of
//! state, the rates and the latency at every transition and at most once a second otherwise.
//! A break that has run out shows as half-open in [`Breaker::state`](crate::Breaker::state)
//! before any call reaches the breaker; call `Breaker::refresh_metrics` (feature `metrics`)
//! before rendering an
//! exposition (on each scrape) to bring every gauge to what `state()` and `snapshot()` report.
//!
//! Histograms: `metrics-exporter-prometheus` renders a histogram as a summary unless buckets
//! are set for it (`PrometheusBuilder::set_buckets_for_metric`); durations are in seconds.

/// Calls by outcome: `cutout_calls_total{breaker, outcome}`.
pub const CALLS: &str = "cutout_calls_total";
/// Slow calls: `cutout_slow_calls_total{breaker}`.
pub const SLOW_CALLS: &str = "cutout_slow_calls_total";
/// Refusals by reason: `cutout_rejections_total{breaker, reason}`.
pub const REJECTIONS: &str = "cutout_rejections_total";
/// Transitions: `cutout_transitions_total{breaker, from, to}`.
pub const TRANSITIONS: &str = "cutout_transitions_total";
/// The state, one gauge per state: `cutout_state{breaker, state}`.
pub const STATE: &str = "cutout_state";
/// The trip window's failure rate: `cutout_failure_rate{breaker}`.
pub const FAILURE_RATE: &str = "cutout_failure_rate";
/// The trip window's slow rate: `cutout_slow_rate{breaker}`.
pub const SLOW_RATE: &str = "cutout_slow_rate";
/// The normal latency, in seconds: `cutout_normal_latency_seconds{breaker}`.
pub const NORMAL_LATENCY: &str = "cutout_normal_latency_seconds";
/// Timed calls' durations, in seconds: `cutout_call_duration_seconds{breaker}`.
pub const CALL_DURATION: &str = "cutout_call_duration_seconds";

/// Every series, as (name, type, HELP text): the descriptions the feature registers.
pub const ALL: [(&str, &str, &str); 9] = [
    (
        CALLS,
        "counter",
        "Calls through the circuit breaker that finished, by outcome.",
    ),
    (
        SLOW_CALLS,
        "counter",
        "Timed calls slower than the circuit breaker's slow threshold.",
    ),
    (
        REJECTIONS,
        "counter",
        "Calls the circuit breaker refused, by reason.",
    ),
    (
        TRANSITIONS,
        "counter",
        "Circuit breaker state transitions, by from and to state.",
    ),
    (
        STATE,
        "gauge",
        "1 for the circuit breaker's current state, 0 for the others.",
    ),
    (
        FAILURE_RATE,
        "gauge",
        "Failures over calls in the circuit breaker's trip window (NaN below the minimum calls).",
    ),
    (
        SLOW_RATE,
        "gauge",
        "Slow calls over calls in the circuit breaker's trip window (NaN below the minimum calls).",
    ),
    (
        NORMAL_LATENCY,
        "gauge",
        "The circuit breaker's measured normal (median) call latency in seconds (NaN until measured).",
    ),
    (
        CALL_DURATION,
        "histogram",
        "Durations of the calls the circuit breaker timed, in seconds.",
    ),
];
