//! [`Health`]: whether the fleet's signals are flowing, and since when.

use std::time::SystemTime;

use crate::FleetError;

/// Where the link to Redis stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// No round has finished yet (just built).
    Connecting,
    /// The last round succeeded: the fleet's counts are flowing.
    Connected,
    /// The last round (or connect) failed: every watched breaker decides on its own calls
    /// alone, and open gates allow every opening, until a round succeeds again.
    Degraded,
}

impl Status {
    /// A stable lower-case name: `"connecting"`, `"connected"`, `"degraded"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected => "connected",
            Status::Degraded => "degraded",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fleet's health, from [`Fleet::health`](crate::Fleet::health): never an error of a
/// breaker's callers, only what a health endpoint or a dashboard shows.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Health {
    /// Where the link stands.
    pub status: Status,
    /// Since when it has stood there (the first round of the current status).
    pub since: SystemTime,
    /// The last failure of a connect or a round, even once connected again (`None` if none
    /// ever failed).
    pub last_error: Option<FleetError>,
    /// When [`last_error`](Health::last_error) happened.
    pub last_error_at: Option<SystemTime>,
    /// Rounds that succeeded.
    pub rounds: u64,
    /// Rounds (and connects) that failed.
    pub failed_rounds: u64,
}

impl Health {
    pub(crate) fn new() -> Health {
        Health {
            status: Status::Connecting,
            since: SystemTime::now(),
            last_error: None,
            last_error_at: None,
            rounds: 0,
            failed_rounds: 0,
        }
    }

    /// Whether the last round succeeded.
    pub fn is_connected(&self) -> bool {
        self.status == Status::Connected
    }

    /// Whether the last round failed.
    pub fn is_degraded(&self) -> bool {
        self.status == Status::Degraded
    }

    /// The error of the failure that made the link degraded, while it is degraded.
    pub fn error(&self) -> Option<&FleetError> {
        match self.status {
            Status::Degraded => self.last_error.as_ref(),
            _ => None,
        }
    }
}
