//! Rate-limited log lines for refusals: at most one line per second per kind of refusal and listener, with the count of those left out.
//!
//! A flood of refused connections or requests must not turn into a flood of log lines (the
//! log is then the denial of service), yet an operator must see that a limit is refusing.
//! [`note`] logs a `tracing` warning the first time a kind refuses on a listener, then at most
//! once a second, saying how many refusals of that kind it left out in between.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What refused, as named in the log line (`limit = …`). The names are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A connection over `max-connections` / `admin-max-connections` was closed at accept.
    MaxConnections,
    /// A connection did not deliver a request head within `header-read-timeout`.
    HeaderReadTimeout,
    /// A connection moved no byte for `idle-timeout`.
    IdleTimeout,
    /// A request passed `request-timeout`.
    RequestTimeout,
    /// A body larger than `max-request-body`.
    BodyTooLarge,
    /// A client's broken or stalled body (400 / 408).
    ClientBody,
    /// A request refused before routing: bad target, `Host`, method.
    BadRequest,
    /// An admin request refused by the Host / Origin / token checks.
    AdminForbidden,
    /// `accept` failed (out of file descriptors, …); the listener backs off and retries.
    AcceptError,
    /// A client left while its cluster already ran `max-detached-attempts` detached
    /// attempts: its attempt was cancelled and counted nothing.
    MaxDetachedAttempts,
    /// A detached attempt's body passed `max-detached-body`: it was cancelled and counted
    /// nothing.
    MaxDetachedBody,
    /// A request past `rate-limit-per-source` was answered 429.
    RateLimit,
    /// A full listener closed an idle connection of the source holding the most to make room
    /// for a connection from another source (see [`crate::share`]).
    FairShare,
    /// The gateway ran out of its own resources (descriptors, …) reaching an upstream: 503,
    /// counted by no breaker ([`crate::exhaustion`]).
    Exhausted,
}

impl Refusal {
    const ALL: [Refusal; 14] = [
        Refusal::MaxConnections,
        Refusal::HeaderReadTimeout,
        Refusal::IdleTimeout,
        Refusal::RequestTimeout,
        Refusal::BodyTooLarge,
        Refusal::ClientBody,
        Refusal::BadRequest,
        Refusal::AdminForbidden,
        Refusal::AcceptError,
        Refusal::MaxDetachedAttempts,
        Refusal::MaxDetachedBody,
        Refusal::RateLimit,
        Refusal::FairShare,
        Refusal::Exhausted,
    ];

    /// The stable name (`max_connections`, `header_read_timeout`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::HeaderReadTimeout => "header_read_timeout",
            Refusal::IdleTimeout => "idle_timeout",
            Refusal::RequestTimeout => "request_timeout",
            Refusal::BodyTooLarge => "max_request_body",
            Refusal::ClientBody => "client_body",
            Refusal::BadRequest => "bad_request",
            Refusal::AdminForbidden => "admin_forbidden",
            Refusal::AcceptError => "accept_error",
            Refusal::MaxDetachedAttempts => "max_detached_attempts",
            Refusal::MaxDetachedBody => "max_detached_body",
            Refusal::RateLimit => "rate_limit",
            Refusal::FairShare => "fair_share",
            Refusal::Exhausted => "exhausted",
        }
    }

    fn index(self) -> usize {
        Refusal::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or_default()
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// At most one event per second: the time of the last one let through and how many were
/// held back since.
///
/// # Orderings
/// Both counters are statistics for a log line; nothing else is published through them, so
/// `Relaxed` suffices. Two threads racing past the same second both see the old `last`; the
/// compare-exchange lets exactly one through.
#[derive(Debug)]
pub struct Throttle {
    /// Milliseconds since [`epoch`] of the last event let through, plus one (0: never).
    last: AtomicU64,
    held_back: AtomicU64,
}

impl Throttle {
    /// A throttle that lets the first event through.
    pub const fn new() -> Throttle {
        Throttle {
            last: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
        }
    }

    /// Whether an event at `now_ms` (milliseconds on any monotonic scale) may be logged: then
    /// `Some(n)` with the events held back since the last one logged.
    pub fn allow_at(&self, now_ms: u64) -> Option<u64> {
        let stamp = now_ms.saturating_add(1);
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && stamp.saturating_sub(last) < 1000 {
            self.held_back.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        match self
            .last
            .compare_exchange(last, stamp, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Some(self.held_back.swap(0, Ordering::Relaxed)),
            Err(_) => {
                self.held_back.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new()
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// One refusal counter per (listener, refusal), registered on first use.
static COUNTERS: [[OnceLock<metrics::Counter>; Refusal::ALL.len()]; 3] =
    [const { [const { OnceLock::new() }; Refusal::ALL.len()] }; 3];

/// One throttle per (listener, refusal): the proxy's, the admin's, and any other listener's.
static THROTTLES: [[Throttle; Refusal::ALL.len()]; 3] =
    [const { [const { Throttle::new() }; Refusal::ALL.len()] }; 3];

/// Counts that `refusal` refused on `listener` (`"proxy"`, `"admin"`, …) in
/// `cutout_gateway_refusals_total`, and logs it at most once a second per pair; `detail` says
/// what happened.
pub fn note(refusal: Refusal, listener: &str, detail: impl fmt::Display) {
    let row = match listener {
        "proxy" => 0,
        "admin" => 1,
        _ => 2,
    };
    // Every one is counted; only the log line is throttled. The handle is registered once per
    // pair, not looked up per refusal (a 429 flood notes tens of thousands a second). The
    // gateway installs its recorder when it is built, before any of its listeners serves.
    COUNTERS[row][refusal.index()]
        .get_or_init(|| {
            metrics::counter!(
                crate::metrics::REFUSALS,
                "limit" => refusal.as_str(),
                "listener" => ["proxy", "admin", "other"][row]
            )
        })
        .increment(1);
    let now = u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX);
    if let Some(held_back) = THROTTLES[row][refusal.index()].allow_at(now) {
        tracing::warn!(
            limit = refusal.as_str(),
            listener,
            held_back,
            "refused: {detail} (at most one such line a second; held_back = refusals left out \
             since the last one)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_a_second_with_the_count_held_back() {
        let t = Throttle::new();
        assert_eq!(t.allow_at(0), Some(0), "the first is let through");
        assert_eq!(t.allow_at(10), None);
        assert_eq!(t.allow_at(999), None);
        assert_eq!(
            t.allow_at(1000),
            Some(2),
            "a second later, with the two held back"
        );
        assert_eq!(t.allow_at(1500), None);
        assert_eq!(t.allow_at(5000), Some(1));
        assert_eq!(t.allow_at(u64::MAX), Some(0), "never overflows");
        assert_eq!(t.allow_at(u64::MAX), None);
    }

    #[test]
    fn names_are_stable_and_distinct() {
        let names: std::collections::BTreeSet<_> =
            Refusal::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Refusal::ALL.len());
        for (n, r) in Refusal::ALL.iter().enumerate() {
            assert_eq!(r.index(), n);
        }
    }
}
