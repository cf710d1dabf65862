//! [`Snapshot`]: a consistent read of a breaker's state and counts, for health endpoints.

use std::time::Duration;

use crate::State;

/// A breaker's state and counts at one moment, all read under one lock.
///
/// While closed the counts are the trip window's; from half-open on (and while open after
/// probes re-opened it) they are the probes'.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The state, as [`Breaker::state`](crate::Breaker::state) reports it.
    pub state: State,
    /// Failures / calls, `None` until the window holds the minimum calls.
    pub failure_rate: Option<f64>,
    /// Slow calls / calls, `None` until the minimum calls or while slow detection is off.
    pub slow_rate: Option<f64>,
    /// Counted calls in the window.
    pub calls: u64,
    /// Counted failures in the window.
    pub failures: u64,
    /// Slow calls in the window.
    pub slow: u64,
    /// Counted failures since the last success.
    pub consecutive_failures: u32,
    /// When it opened, on the breaker's clock; `None` while closed.
    pub opened_at: Option<Duration>,
    /// The break being served (after jitter) while open or half-open, or the break that was
    /// served before a recovery ramp.
    pub current_break: Option<Duration>,
    /// Opens since the breaker last closed fully; the break doubles with each.
    pub consecutive_opens: u32,
    /// Probes admitted and not yet finished.
    pub probes_in_flight: u32,
    /// Calls a shadow-mode breaker let through that it would have refused.
    pub shadow_refusals: u64,
    /// Trips an open gate kept closed (see
    /// [`BreakerBuilder::open_gate`](crate::BreakerBuilder::open_gate)).
    pub suppressed_opens: u64,
    /// The measured normal latency (adaptive breakers; `None` until armed).
    pub normal_latency: Option<Duration>,
    /// The measured normal failure rate (adaptive breakers; `None` until armed).
    pub normal_failure_rate: Option<f64>,
    /// The admitted fraction while recovering over a ramp.
    pub ramp_fraction: Option<f64>,
    /// How long the breaker has been recovering. A ramp against a dependency that stays slow
    /// never finishes: alert when this exceeds `current_break`.
    pub recovering_for: Option<Duration>,
}
