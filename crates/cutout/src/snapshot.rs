//! [`Snapshot`]: a consistent read of a breaker's state and counts, for health endpoints, and
//! the [`ManualAction`] it reports last.

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
    /// Whether the breaker is in shadow mode now (configured with
    /// [`SettingsBuilder::shadow`](crate::SettingsBuilder::shadow), or switched by
    /// [`Breaker::shadow`](crate::Breaker::shadow) and
    /// [`Breaker::enforce`](crate::Breaker::enforce)): it counts and trips, and refuses
    /// nothing. `state` is the state it is in either way.
    pub shadow: bool,
    /// Calls a shadow-mode breaker let through that it would have refused, since it was built
    /// (carried across every switch and reset).
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
    /// The last manual action that took effect (`reset`, `isolate`, `disable`, `open_for`,
    /// `open_until`, `shadow`, `enforce`), `None` until the first. Manual actions raise no transition event; this
    /// is where a dashboard sees that someone forced the state. An `open_for` or `open_until`
    /// refused by an isolated or disabled breaker changed nothing and is not shown.
    pub last_manual_action: Option<ManualAction>,
    /// When [`last_manual_action`](Snapshot::last_manual_action) happened, on the breaker's
    /// clock (as [`Event::at`](crate::Event::at)); `None` exactly when it is.
    pub last_manual_action_at: Option<Duration>,
    /// Calls refused in the current state episode, as resilience4j counts its not-permitted
    /// calls: an opening keeps the count of the state it ended (closed's is zero, a failed
    /// half-open's is what the full half-open refused), and every other state starts at zero
    /// (half-open, recovering, closed, isolated, disabled; `reset` too). Counted while open,
    /// isolated, half-open with every probe taken, and recovering over a ramp. A refusal
    /// decided just as the state changes may be counted in the next episode.
    pub refused_calls: u64,
    /// Adaptive throttling's refusal probability now, while closed (see
    /// [`SettingsBuilder::throttle`](crate::SettingsBuilder::throttle)); `None` for a binary
    /// breaker and in every other state.
    pub throttle_probability: Option<f64>,
}

/// An action taken on a breaker by hand rather than caused by a call. None raises a transition
/// event; each leaves its trace in [`Snapshot::last_manual_action`] and, with the `tracing`
/// feature, an info-level `tracing` event ("circuit breaker manual action"). The names from
/// [`ManualAction::as_str`] are stable. New actions may be added with new controls (the enum
/// is `#[non_exhaustive]`): match with a wildcard arm, or on [`as_str`](ManualAction::as_str).
///
/// ```
/// use std::time::Duration;
/// use cutout::{Breaker, ManualAction, clock::ManualClock};
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder("inventory").clock(clock.clone()).build();
/// clock.advance(Duration::from_secs(42));
/// breaker.isolate();
/// let snapshot = breaker.snapshot();
/// assert_eq!(snapshot.last_manual_action, Some(ManualAction::Isolate));
/// assert_eq!(snapshot.last_manual_action_at, Some(Duration::from_secs(42)));
/// assert_eq!(ManualAction::Isolate.as_str(), "isolate");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ManualAction {
    /// [`Breaker::reset`](crate::Breaker::reset) (`"reset"`).
    Reset,
    /// [`Breaker::isolate`](crate::Breaker::isolate) (`"isolate"`).
    Isolate,
    /// [`Breaker::disable`](crate::Breaker::disable) (`"disable"`).
    Disable,
    /// [`Breaker::open_for`](crate::Breaker::open_for) (`"open_for"`).
    OpenFor,
    /// [`Breaker::open_until`](crate::Breaker::open_until) (`"open_until"`).
    OpenUntil,
    /// [`Breaker::shadow`](crate::Breaker::shadow) (`"shadow"`): into shadow mode.
    Shadow,
    /// [`Breaker::enforce`](crate::Breaker::enforce) (`"enforce"`): out of shadow mode.
    Enforce,
}

impl ManualAction {
    /// The stable name of the action.
    pub const fn as_str(self) -> &'static str {
        match self {
            ManualAction::Reset => "reset",
            ManualAction::Isolate => "isolate",
            ManualAction::Disable => "disable",
            ManualAction::OpenFor => "open_for",
            ManualAction::OpenUntil => "open_until",
            ManualAction::Shadow => "shadow",
            ManualAction::Enforce => "enforce",
        }
    }
}

impl std::fmt::Display for ManualAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
