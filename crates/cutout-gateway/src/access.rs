//! The access log (one `tracing` line per request), request ids, and the per-request statistics and metrics recorded when an answer ends.
//!
//! Each request gets an id: the client's `x-request-id` when it sends a usable one (1–128
//! visible ASCII characters), else a new one (`<process prefix>-<counter>`). It is forwarded to
//! the upstream and returned in the answer's `x-request-id`.
//!
//! When the answer ends — its body sent whole, broken, cut at the attempt timeout, or the
//! client gone (and then, when its attempt runs on detached, when that attempt ends) — the
//! gateway writes one line at INFO with target `cutout_gateway::access` (`access-log = false`
//! turns it off):
//!
//! ```text
//! INFO request request_id=5f3a9c1e-1b method=GET path=/accounts/7 cluster=account-service host=127.0.0.1:7001 status=200 duration=1.2ms decision=admitted outcome=ok
//! ```
//!
//! | field | |
//! |---|---|
//! | `cluster`, `host` | `-` when none (no route; refused before any host was picked); `host` is the host that answered (the retry's, after a retry) |
//! | `retried_from` | only when the request was retried on another host ([`crate::hosts`]): the host whose attempt failed (a connect failure or a reset) |
//! | `status` | the status sent; `499` when the client left before any was (nginx's convention) |
//! | `duration` | from the request's head to the end of its answer (of a detached attempt: to the attempt's end), as people write it (`850µs`, `1.2s`) |
//! | `decision` | the cluster breaker's: `admitted`, `refused` (with `reason` = `open`, `half_open_full`, `ramp`, `isolated`), `ejected` (every host refused), `unguarded` (`breakers = false`), `none` (no cluster) |
//! | `outcome` | `ok`, `upstream_error` (a 5xx), `timeout`, `unreachable`, `body_error` (the upstream broke the body), `body_timeout` (it stalled), `client_fault`, `gave_up` (the client left; with `counted` = `detached` or `dropped`, see [`crate::attempt`]), `deadline` (`request-timeout`), `refused`, `ejected`, `bad_request`, `no_route` |
//! | `counted` | what became of the attempt of a client that left: `detached` (it ran on, its own outcome counted), `dropped` (cancelled, counting nothing: past `max-detached-attempts`, or no breaker); `deadline` with `outcome=deadline` |
//! | `upstream` | with `counted=detached`: the attempt's own outcome, in the `outcome` words (`ok`, `upstream_error`, `timeout`, `body_timeout`, …), or `capped` (its body passed `max-detached-body`: cancelled, counting nothing) |
//!
//! The same moment records the request in the cluster's and the host's statistics
//! ([`crate::stats`]: the upstream's errors as errors, the gateway's refusals apart) and
//! metrics ([`crate::metrics`]). A client leaving is not an error there either: a detached
//! request counts as its attempt's own outcome, a dropped one as no error.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cutout::HumanDuration;
use http::{HeaderMap, HeaderValue, Method};
use tokio::time::Instant;

use crate::attempt::{Exchange, GiveUpCount};
use crate::cluster::ClusterShared;
use crate::metrics::ClusterMetrics;
use crate::stats::Ended;

/// The request id header.
pub const REQUEST_ID: &str = "x-request-id";

/// The breaker's decision on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted by the cluster breaker.
    Admitted,
    /// Refused by the cluster breaker (its reason).
    Refused(&'static str),
    /// Every host of the cluster refused.
    Ejected,
    /// No breaker (`breakers = false`).
    Unguarded,
    /// No cluster (refused before routing, no route).
    None,
}

impl Decision {
    /// The `decision` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Admitted => "admitted",
            Decision::Refused(_) => "refused",
            Decision::Ejected => "ejected",
            Decision::Unguarded => "unguarded",
            Decision::None => "none",
        }
    }

    fn index(self) -> usize {
        match self {
            Decision::Admitted => 0,
            Decision::Refused(_) => 1,
            Decision::Ejected => 2,
            Decision::Unguarded => 3,
            Decision::None => 4,
        }
    }
}

/// How a request ended, as the `outcome` field tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The answer ended whole (any status but a 5xx from the upstream).
    Ok,
    /// The upstream answered 5xx.
    UpstreamError,
    /// The attempt timed out before the head.
    Timeout,
    /// The upstream could not be reached.
    Unreachable,
    /// The upstream broke the body.
    BodyError,
    /// The body stalled past the attempt timeout.
    BodyTimeout,
    /// The client's fault (400, 408, 413).
    ClientFault,
    /// The client left.
    GaveUp,
    /// (A detached attempt's `upstream` only.) Its body passed `max-detached-body`: cancelled,
    /// counting nothing.
    Capped,
    /// `request-timeout` passed.
    Deadline,
    /// The cluster breaker refused.
    Refused,
    /// Every host refused.
    Ejected,
    /// Refused before routing.
    BadRequest,
    /// No route.
    NoRoute,
    /// The client's address passed `rate-limit-per-source` (429).
    RateLimited,
    /// The gateway ran out of its own resources (descriptors, …) reaching the upstream: 503,
    /// counted by no breaker ([`crate::exhaustion`]).
    Exhausted,
}

impl Outcome {
    /// The `outcome` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::UpstreamError => "upstream_error",
            Outcome::Timeout => "timeout",
            Outcome::Unreachable => "unreachable",
            Outcome::BodyError => "body_error",
            Outcome::BodyTimeout => "body_timeout",
            Outcome::ClientFault => "client_fault",
            Outcome::GaveUp => "gave_up",
            Outcome::Capped => "capped",
            Outcome::Deadline => "deadline",
            Outcome::Refused => "refused",
            Outcome::Ejected => "ejected",
            Outcome::BadRequest => "bad_request",
            Outcome::NoRoute => "no_route",
            Outcome::RateLimited => "rate_limited",
            Outcome::Exhausted => "exhausted",
        }
    }

    /// Whether the upstream sent no answer, or a broken one.
    fn no_answer(self) -> bool {
        matches!(
            self,
            Outcome::Timeout | Outcome::Unreachable | Outcome::BodyError | Outcome::BodyTimeout
        )
    }

    /// How the statistics count the request (see [`crate::stats`]): the upstream's errors
    /// are errors, the gateway's refusals are refusals, and a client leaving is neither (a
    /// detached attempt is counted as its own outcome, by the caller).
    fn ended(self) -> Ended {
        match self {
            Outcome::Ok => Ended::Success,
            Outcome::UpstreamError
            | Outcome::Timeout
            | Outcome::Unreachable
            | Outcome::BodyError
            | Outcome::BodyTimeout => Ended::UpstreamError,
            Outcome::Refused | Outcome::Ejected | Outcome::Exhausted => Ended::Refused,
            Outcome::ClientFault
            | Outcome::GaveUp
            | Outcome::Capped
            | Outcome::Deadline
            | Outcome::BadRequest
            | Outcome::NoRoute
            | Outcome::RateLimited => Ended::Other,
        }
    }
}

/// The request id of `headers`: the client's when usable, else a new one.
pub fn request_id(headers: &HeaderMap) -> HeaderValue {
    if let Some(id) = headers.get(REQUEST_ID)
        && (1..=128).contains(&id.len())
        && id.as_bytes().iter().all(|b| (0x21..0x7f).contains(b))
    {
        return id.clone();
    }
    static NEXT: AtomicU64 = AtomicU64::new(1);
    // Relaxed: a ticket counter.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    HeaderValue::from_str(&format!("{:08x}-{n:x}", prefix()))
        .unwrap_or(HeaderValue::from_static("-"))
}

/// A per-process prefix, so that ids of two gateways (or two runs) do not collide.
fn prefix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    static PREFIX: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PREFIX.get_or_init(|| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish() as u32
    })
}

/// One request's record, finished (logged, counted) exactly once: when its answer ends, or
/// when it is dropped (the client left).
#[derive(Debug)]
pub struct Access {
    log: bool,
    /// One line in this many of the refused requests of a cluster (`access-log-refused`).
    refused_sample: u64,
    id: HeaderValue,
    method: Method,
    path: String,
    started: Instant,
    cluster: Option<Arc<ClusterShared>>,
    exchange: Option<Arc<Exchange>>,
    decision: Decision,
    status: Option<u16>,
    /// A detached attempt's own outcome and status, once it ended.
    upstream: Option<(Outcome, Option<u16>)>,
    finished: bool,
}

/// The no-cluster metrics (requests refused before routing or without a route).
fn unrouted() -> &'static ClusterMetrics {
    static NONE: std::sync::OnceLock<ClusterMetrics> = std::sync::OnceLock::new();
    NONE.get_or_init(ClusterMetrics::unrouted)
}

impl Access {
    /// The record of a request with these parts, started now; `log` says whether to log it,
    /// and `refused_sample` how many of a cluster's refused requests one line stands for.
    pub fn start(
        log: bool,
        refused_sample: u32,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Access {
        let mut path = path.to_owned();
        if path.len() > 512 {
            let mut cut = 512;
            while !path.is_char_boundary(cut) {
                cut -= 1;
            }
            path.truncate(cut);
        }
        Access {
            log,
            refused_sample: u64::from(refused_sample.max(1)),
            id: request_id(headers),
            method: method.clone(),
            path,
            started: Instant::now(),
            cluster: None,
            exchange: None,
            decision: Decision::None,
            status: None,
            upstream: None,
            finished: false,
        }
    }

    /// The request id.
    pub fn id(&self) -> &HeaderValue {
        &self.id
    }

    /// The request goes to `cluster`, its attempt sharing `exchange`.
    pub fn routed(&mut self, cluster: Arc<ClusterShared>, exchange: Arc<Exchange>) {
        cluster.metrics.in_flight(true);
        self.decision = if cluster.guarded {
            Decision::Admitted
        } else {
            Decision::Unguarded
        };
        self.cluster = Some(cluster);
        self.exchange = Some(exchange);
    }

    /// The breaker's decision.
    pub fn decide(&mut self, decision: Decision) {
        self.decision = decision;
    }

    /// The status sent.
    pub fn status(&mut self, status: u16) {
        self.status = Some(status);
    }

    /// The detached attempt of a client that left ended: with `outcome`, and the upstream's
    /// `status` when it answered one (see [`crate::attempt`]).
    pub fn detached_end(&mut self, outcome: Outcome, status: Option<u16>) {
        self.upstream = Some((outcome, status));
    }

    /// Logs and counts the request, once.
    pub fn finish(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let duration = self.started.elapsed();
        let host = self.exchange.as_ref().and_then(|e| e.host());
        let gave_up = self.exchange.as_ref().and_then(|e| e.gave_up());
        let outcome = match (outcome, gave_up) {
            (Outcome::GaveUp, Some(GiveUpCount::Deadline)) => Outcome::Deadline,
            _ => outcome,
        };
        let mut refused_of = None;
        match &self.cluster {
            Some(cluster) => {
                cluster.metrics.in_flight(false);
                cluster
                    .metrics
                    .request(self.status, self.decision.index(), duration);
                // A detached request is what its attempt was; any other, what its answer was.
                let (judged, upstream_status) = match self.upstream {
                    Some((upstream, status)) => (upstream, status.or(self.status)),
                    None => (outcome, self.status),
                };
                let ended = judged.ended();
                if ended == Ended::Refused {
                    refused_of = Some(cluster);
                }
                let slow = ended != Ended::Refused && duration > cluster.slow.limit();
                cluster.stats.record(duration, ended, slow);
                // The gateway's own exhaustion reached no host: nothing of the host's to count.
                if let Some(host) = host.filter(|_| judged != Outcome::Exhausted) {
                    let upstream_status = upstream_status.filter(|_| !judged.no_answer());
                    cluster.metrics.upstream(host, upstream_status);
                    if let Some(stats) = cluster.host_stats.get(host) {
                        stats.record(duration, ended, slow);
                    }
                }
                if let Some(count) = gave_up {
                    cluster.metrics.give_up(count.index());
                }
            }
            None => unrouted().request(self.status, self.decision.index(), duration),
        }
        if !self.log {
            return;
        }
        // A refusal costs the gateway almost nothing; its line would cost more than it: one
        // in `refused_sample` of a cluster's is logged, saying how many it stands for.
        let sampled = match refused_of {
            Some(cluster) if self.refused_sample > 1 => {
                let n = cluster.refused_lines.fetch_add(1, Ordering::Relaxed);
                if n % self.refused_sample != 0 {
                    return;
                }
                Some(self.refused_sample)
            }
            _ => None,
        };
        let cluster = self.cluster.as_ref().map_or("-", |c| c.name.as_str());
        let host = match (&self.cluster, host) {
            (Some(cluster), Some(host)) => {
                cluster.authorities.get(host).map_or("-", String::as_str)
            }
            _ => "-",
        };
        let status = match (self.status, outcome) {
            (Some(status), _) => status,
            (None, _) => 499,
        };
        let id = Shown(&self.id);
        let reason = match self.decision {
            Decision::Refused(reason) => Some(reason),
            _ => None,
        };
        let counted = gave_up.map(GiveUpCount::as_str);
        let upstream = self.upstream.map(|(outcome, _)| outcome.as_str());
        let retried_from = match (&self.cluster, self.exchange.as_ref()) {
            (Some(cluster), Some(exchange)) => exchange
                .retried_from()
                .and_then(|n| cluster.authorities.get(n))
                .map(String::as_str),
            _ => None,
        };
        tracing::info!(
            target: "cutout_gateway::access",
            request_id = %id,
            method = %self.method,
            path = %self.path,
            cluster = %cluster,
            host = %host,
            retried_from = retried_from.map(tracing::field::display),
            status,
            duration = %HumanDuration(duration),
            decision = %self.decision.as_str(),
            reason = reason.map(tracing::field::display),
            outcome = %outcome.as_str(),
            counted = counted.map(tracing::field::display),
            upstream = upstream.map(tracing::field::display),
            sampled,
            "request"
        );
    }
}

impl Drop for Access {
    fn drop(&mut self) {
        self.finish(Outcome::GaveUp);
    }
}

/// A header value shown as text (its bytes are visible ASCII, or it was made here).
struct Shown<'a>(&'a HeaderValue);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.to_str().unwrap_or("-"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_is_kept_when_usable_else_one_is_made() {
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_ID, HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&headers), "abc-123");
        headers.insert(REQUEST_ID, HeaderValue::from_static("has space"));
        let made = request_id(&headers);
        assert_ne!(made, "has space");
        let again = request_id(&HeaderMap::new());
        assert_ne!(made, again, "distinct");
        let too_long = "x".repeat(129);
        headers.insert(REQUEST_ID, HeaderValue::from_str(&too_long).unwrap());
        assert_ne!(request_id(&headers), too_long.as_str());
    }
}
