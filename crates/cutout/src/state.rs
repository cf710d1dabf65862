//! The breaker's states and their health.

use std::fmt;

/// The state of a breaker.
///
/// New states may be added (the enum is `#[non_exhaustive]`): match with a wildcard arm, or
/// on [`health`](State::health), which maps every state onto three values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum State {
    /// Calls flow; outcomes are recorded and the trip conditions evaluated.
    Closed,
    /// Calls are refused until the break has elapsed.
    Open,
    /// The break has elapsed: a bounded number of probe calls test the dependency.
    HalfOpen,
    /// Probes succeeded and a growing fraction of calls is admitted (only with a recovery ramp).
    Recovering,
    /// Forced open by [`Breaker::isolate`](crate::Breaker::isolate) until
    /// [`Breaker::reset`](crate::Breaker::reset).
    Isolated,
    /// Every call passes and nothing is recorded, until [`Breaker::reset`](crate::Breaker::reset).
    Disabled,
}

impl State {
    /// Every state, in the order of their codes.
    pub const ALL: [State; 6] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::Recovering,
        State::Isolated,
        State::Disabled,
    ];

    /// A stable lower-case name, for logs, metrics and configuration (`"half_open"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::Recovering => "recovering",
            State::Isolated => "isolated",
            State::Disabled => "disabled",
        }
    }

    pub(crate) const fn code(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::Recovering => 3,
            State::Isolated => 4,
            State::Disabled => 5,
        }
    }

    pub(crate) const fn from_code(code: u64) -> State {
        match code {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::Recovering,
            4 => State::Isolated,
            _ => State::Disabled,
        }
    }
}

/// What a health check should make of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// Closed (or disabled): calls flow.
    Healthy,
    /// Half-open or recovering: the dependency is being tested or warmed up. A breaker that
    /// stays recovering is a dependency that answers but stays slow.
    Degraded,
    /// Open or isolated: calls are refused.
    Unhealthy,
}

impl Health {
    /// A stable lower-case name (`"healthy"`, `"degraded"`, `"unhealthy"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Unhealthy => "unhealthy",
        }
    }
}

impl State {
    /// The health this state reports.
    pub const fn health(self) -> Health {
        match self {
            State::Closed | State::Disabled => Health::Healthy,
            State::HalfOpen | State::Recovering => Health::Degraded,
            State::Open | State::Isolated => Health::Unhealthy,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            State::Closed => "Closed",
            State::Open => "Open",
            State::HalfOpen => "HalfOpen",
            State::Recovering => "Recovering",
            State::Isolated => "Isolated",
            State::Disabled => "Disabled",
        };
        f.write_str(name)
    }
}
