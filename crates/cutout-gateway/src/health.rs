//! Active health checks per upstream host: a task per host asks it for a path at an interval, and a passing check ends the host breaker's break early (its probes still decide).
//!
//! # What a check does
//! With a `[clusters.<name>.health-check]` table, every upstream host of the cluster gets one
//! task (started by [`crate::server::run`], stopped with the gateway) that sends
//! `GET <path>` to the host directly, on a connection of its own (never pooled, never
//! through a breaker), every `interval` plus a uniform draw up to `jitter`, the first one after
//! such a draw alone (so hosts are not all checked at the same instant). A check **passes**
//! when a 2xx head arrives within `timeout`; anything else (another status, a refused or reset
//! connection, the timeout) fails it. A host has at most one check in flight, each bounded by
//! its timeout.
//!
//! **A passing check ends a break early.** After `healthy-threshold` passes in a row, each
//! pass calls [`Breaker::end_break_on_signal`] with [`BreakEndReason::HealthCheck`] on the
//! host's breaker (DESIGN §2 "Giving traffic back"): an open host becomes half-open at once,
//! and its probes, which are requests, still decide whether it is readmitted (a failed probe
//! re-opens it with a grown break). The evidence's age is the time since the oldest of those
//! passing checks *began*, so a check that began before the host's break is stale and ends
//! nothing: it says nothing about what opened the breaker. A break the upstream asked for
//! (`Retry-After` with `honor-retry-after`) or an operator forced (`open-for`) is served whole,
//! and a closed, isolated or disabled breaker ignores the check (cutout's rules).
//!
//! Which breakers a pass acts on: in a cluster that ejects hosts ([`crate::hosts`]), the host's
//! own breaker and the cluster breaker (when every host died at once the cluster breaker opened
//! too, and a host that passes proves the cluster can serve again: without this, checks
//! readmitted the hosts within a second while the cluster refused for the rest of its break,
//! 8 s and 360 answers 503 in the review's run); the cluster breaker in a cluster of one
//! upstream (it is its host's); in a cluster of several upstreams without host breakers
//! (`max-ejection-percent = 0`), a pass of any host ends the cluster breaker's break. In each
//! case the probes, which are requests, decide. With `breakers = false` the checks run and are
//! shown, and act on nothing. A failing check trips only the host's breaker (or the cluster's
//! in a cluster of one upstream).
//!
//! Readmission with checks: a host that comes back is found by its next check, at most
//! `interval + jitter` later (both at most `interval`), and its break ends then; its probes
//! are the next requests round-robin brings to it (milliseconds under load). So a restarted
//! host is readmitted within two intervals of coming back (with the defaults, 5.5 s plus two
//! probes), instead of up to its break (15 s for a host, [`crate::config::DEFAULT_HOST_MAX_BREAK`]).
//!
//! **A failing check opens nothing by itself** unless `unhealthy-threshold` is set: then that
//! many failures in a row eject the host through [`Breaker::trip_on_signal`] (an opening of
//! reason `signal`, through the ejection cap like any host trip; again on each further failure
//! while the cap refuses). It is off by default because a check is one request on one path,
//! and the traffic is the better witness: a `/healthz` that tests a dependency the traffic does
//! not need (or a check path the operator forgot to deploy) would eject hosts that serve every
//! real request, which is exactly the cost of a breaker this issue is about; and a host that
//! really fails its traffic is ejected by that traffic within five calls anyway (passive
//! ejection stays).
//!
//! **Checks are not traffic**: they go around the breakers, so they count in no breaker's
//! window, no statistics of the status page, no access log line and no request metric. What
//! they leave: each host's last result and its time in `/breakers` (`hosts[].health_check`)
//! and on the status page, `cutout_gateway_health_checks_total{cluster, host, result}`, and a
//! log line when a host's result changes (pass to fail or back) and when a check ends a break.
//!
//! # Defaults, and why checks are off unless configured
//! No table, no checks: a check is load on an upstream the operator did not ask for, on a path
//! only the operator knows. With the table, `path` is required; `interval` 5 s (HAProxy's
//! `inter` is 2 s, Envoy makes it required; 5 s keeps a fleet of gateways' checks light while
//! still readmitting a host within about 6 s of its return); `timeout` 1 s, or the interval
//! when that is shorter; `healthy-threshold` 1 (the breaker's own probes, two by default, are
//! the second opinion: a higher threshold only delays them); `unhealthy-threshold` off
//! (above); `jitter` a tenth of the interval. The timeout and the jitter may not be longer
//! than the interval (`GW-CFG-010`), so a host is checked again at most two intervals after
//! the start of its previous check. So acceptance 3's "readmitted within two check intervals"
//! holds for a cluster whose operator configured checks; without them a host comes back
//! through its probes after its break (see [`crate::hosts`]).
//!
//! What the rule can no longer see: a check passes on the path it asks for, so a host whose
//! check passes while its traffic fails gets one probe per check interval (a failed request
//! whenever a probe is not retried) instead of one per break.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::connector::{Connector, Protocol, UpstreamTls};
use bytes::Bytes;
use cutout::{BreakEndReason, Breaker, State};
use http::Uri;
use http::uri::PathAndQuery;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics::Counter;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::config::ClusterConfig;
use crate::gateway::Gateway;

/// The default `interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// The default `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// The default `healthy-threshold`.
pub const DEFAULT_HEALTHY_THRESHOLD: u32 = 1;
/// The largest `healthy-threshold` and `unhealthy-threshold` accepted.
pub const MAX_THRESHOLD: u32 = 1000;
/// The `User-Agent` of a check.
pub const USER_AGENT: &str = "cutout-gateway-health-check";

/// A cluster's `health-check` table, validated (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckConfig {
    /// `path`: the path (and query) asked of each host.
    pub path: PathAndQuery,
    /// `interval`: between the starts of two checks of a host (plus the jitter's draw).
    pub interval: Duration,
    /// `timeout`: a check passes on a 2xx head within it (at most `interval`; unset,
    /// [`DEFAULT_TIMEOUT`] or the interval, whichever is shorter).
    pub timeout: Duration,
    /// `healthy-threshold`: passes in a row before a pass ends a break.
    pub healthy_threshold: u32,
    /// `unhealthy-threshold`: failures in a row that eject the host; `None` (`"off"`, the
    /// default): a failing check opens nothing.
    pub unhealthy_threshold: Option<u32>,
    /// `jitter`: each wait is `interval` plus a uniform draw up to this (at most `interval`).
    pub jitter: Duration,
}

/// One check's result, as `/breakers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Whether it passed.
    pub passed: bool,
    /// What the host answered: its status (`200`), or why there was no answer (`timeout`,
    /// `connect: connection refused`, …).
    pub detail: String,
    /// When the check began, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// How long it took.
    pub took: Duration,
    /// How many checks in a row ended this way, this one included.
    pub in_a_row: u32,
}

/// One host's checks: the last result and the counters by result.
#[derive(Debug)]
pub struct HostHealth {
    last: Mutex<Option<CheckResult>>,
    passed: Counter,
    failed: Counter,
}

impl HostHealth {
    /// The checks of `host` (`host:port`) of `cluster`; their counters are registered (and
    /// exported at 0) at once.
    pub fn new(cluster: &str, host: &str) -> Arc<HostHealth> {
        let counter = |result: &'static str| {
            metrics::counter!(
                crate::metrics::HEALTH_CHECKS,
                "cluster" => cluster.to_owned(),
                "host" => host.to_owned(),
                "result" => result,
            )
        };
        Arc::new(HostHealth {
            last: Mutex::new(None),
            passed: counter("pass"),
            failed: counter("fail"),
        })
    }

    /// The last check's result (`None` before the first one ended).
    pub fn last(&self) -> Option<CheckResult> {
        lock(&self.last).clone()
    }

    fn record(&self, result: CheckResult) {
        if result.passed {
            self.passed.increment(1);
        } else {
            self.failed.increment(1);
        }
        *lock(&self.last) = Some(result);
    }

    /// The last result as `/breakers` shows it: `result` (`pass` / `fail`), `detail`,
    /// `at_unix_ms`, `took_ms`, `in_a_row`; `null` before the first check ended.
    pub fn json(&self) -> Value {
        match self.last() {
            None => Value::Null,
            Some(r) => json!({
                "result": if r.passed { "pass" } else { "fail" },
                "detail": r.detail,
                "at_unix_ms": r.at_unix_ms,
                "took_ms": r.took.as_secs_f64() * 1000.0,
                "in_a_row": r.in_a_row,
            }),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What one host's checks act on (see the [module docs](self)).
#[derive(Debug, Clone, Default)]
pub struct CheckTarget {
    /// The breakers whose breaks a pass ends: the host's, and the cluster's when the host is
    /// one of its upstreams (a whole-cluster outage opens it too, and a host that passes
    /// proves the cluster can serve again).
    pub ends: Vec<Breaker>,
    /// The breaker `unhealthy-threshold` trips.
    pub trips: Option<Breaker>,
}

/// The running checks of a gateway (those of clusters a reload rebuilds or adds included),
/// aborted when dropped.
#[derive(Debug)]
pub struct HealthChecks {
    gateway: Arc<Gateway>,
    hosts: usize,
}

impl HealthChecks {
    /// How many hosts were checked at the start.
    pub fn len(&self) -> usize {
        self.hosts
    }

    /// Whether no host was checked at the start.
    pub fn is_empty(&self) -> bool {
        self.hosts == 0
    }
}

impl Drop for HealthChecks {
    fn drop(&mut self) {
        self.gateway.stop_checks();
    }
}

/// Starts one check task per upstream host of every cluster with a `health-check` table,
/// each stopping when `stop` says `true` (or its sender is gone); a reload that rebuilds or
/// adds a cluster restarts its checks on the same signal. Call it inside the runtime.
pub fn start(gateway: &Arc<Gateway>, stop: &watch::Receiver<bool>) -> HealthChecks {
    let hosts = gateway.start_checks(stop);
    HealthChecks {
        gateway: Arc::clone(gateway),
        hosts,
    }
}

/// The check tasks of one cluster (none without a `health-check` table), each stopping when
/// `stop` says `true`, reaching its hosts as the cluster's own `settings` say (TLS and
/// protocol; plain HTTP/1.1 without them). Call it inside the runtime.
pub fn start_cluster(
    name: &str,
    cluster: &Cluster,
    settings: Option<&ClusterConfig>,
    stop: &watch::Receiver<bool>,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let Some(config) = cluster.health_check() else {
        return tasks;
    };
    let (tls, protocol) = settings.map_or_else(
        || (UpstreamTls::none(), Protocol::Auto),
        |c| (c.tls.clone(), c.protocol),
    );
    // A connection of its own for each check: it tests that the host accepts new ones (its
    // TLS handshake too), in the cluster's protocol.
    let client: Client<Connector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .http2_only(protocol.h2_only())
        .build(tls.connector(protocol, config.timeout));
    let shared = cluster.shared();
    for (n, upstream) in cluster.upstreams().iter().enumerate() {
        let Some(health) = shared.health.get(n) else {
            continue;
        };
        let mut parts = upstream.clone().into_parts();
        parts.path_and_query = Some(config.path.clone());
        let Ok(uri) = Uri::from_parts(parts) else {
            continue;
        };
        let checker = Checker {
            cluster: name.to_owned(),
            host: shared.authorities.get(n).cloned().unwrap_or_default(),
            uri,
            config: config.clone(),
            client: client.clone(),
            health: Arc::clone(health),
            target: cluster.check_target(n),
        };
        tasks.spawn(checker.run(stop.clone()));
    }
    tasks
}

/// One host's checks.
struct Checker {
    cluster: String,
    host: String,
    uri: Uri,
    config: HealthCheckConfig,
    client: Client<Connector, Empty<Bytes>>,
    health: Arc<HostHealth>,
    target: CheckTarget,
}

/// Resolves when `stop` says `true` or its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

impl Checker {
    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut rng = Rng::seeded(&self.host);
        // The starts of the passes in a row, at most `healthy-threshold` of them.
        let threshold = self.config.healthy_threshold.max(1) as usize;
        let mut passes: VecDeque<Instant> = VecDeque::with_capacity(threshold);
        let mut failures = 0u32;
        let mut previous: Option<bool> = None;
        let mut next = Instant::now() + rng.upto(self.config.jitter);
        loop {
            tokio::select! {
                biased;
                () = stopped(&mut stop) => return,
                () = tokio::time::sleep_until(next) => {}
            }
            let started = Instant::now();
            let at_unix_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let checked = tokio::select! {
                biased;
                () = stopped(&mut stop) => return,
                result = self.check() => result,
            };
            let Some((passed, detail)) = checked else {
                // The gateway's own exhaustion: nothing was learnt of the host.
                next = started + self.config.interval + rng.upto(self.config.jitter);
                continue;
            };
            if passed {
                failures = 0;
                if passes.len() == threshold {
                    passes.pop_front();
                }
                passes.push_back(started);
            } else {
                passes.clear();
                failures = failures.saturating_add(1);
            }
            let in_a_row = if passed {
                passes.len() as u32
            } else {
                failures
            };
            if previous != Some(passed) {
                tracing::info!(
                    cluster = %self.cluster,
                    host = %self.host,
                    detail = %detail,
                    "health check {}",
                    if passed { "passes" } else { "fails" }
                );
            }
            previous = Some(passed);
            self.health.record(CheckResult {
                passed,
                detail,
                at_unix_ms,
                took: started.elapsed(),
                in_a_row,
            });
            if passed && passes.len() == threshold {
                self.end_break(passes.front().copied().unwrap_or(started));
            }
            if !passed {
                self.maybe_trip(failures);
            }
            next = started + self.config.interval + rng.upto(self.config.jitter);
        }
    }

    /// One check: whether it passed, and what the host said; `None` when the gateway could
    /// not make it for its own want of resources ([`crate::exhaustion`]): neither a pass nor a
    /// fail.
    async fn check(&self) -> Option<(bool, String)> {
        let request = http::Request::get(self.uri.clone())
            .header(http::header::USER_AGENT, USER_AGENT)
            .header(http::header::CONNECTION, "close")
            .body(Empty::new());
        let Ok(request) = request else {
            return Some((false, "the check's request cannot be built".to_owned()));
        };
        match tokio::time::timeout(self.config.timeout, self.client.request(request)).await {
            Err(_) => Some((false, "timeout".to_owned())),
            Ok(Err(error)) if let Some(errno) = crate::exhaustion::exhausted(&error) => {
                crate::refusal::note(
                    crate::refusal::Refusal::Exhausted,
                    "health",
                    format_args!(
                        "{} {}: the health check could not connect: {}: the gateway's own \
                         limit (raise ulimit -n?), counted neither a pass nor a fail",
                        self.cluster,
                        self.host,
                        crate::exhaustion::reason(errno)
                    ),
                );
                None
            }
            Ok(Err(error)) => Some((false, describe(&error))),
            // The head is the answer; the body is dropped with the connection.
            Ok(Ok(response)) => Some((
                response.status().is_success(),
                response.status().as_u16().to_string(),
            )),
        }
    }

    /// The passes in a row began at `oldest`: evidence that the host is back, if it began
    /// after the host's break did.
    fn end_break(&self, oldest: Instant) {
        for breaker in &self.target.ends {
            if breaker.peek().0 != State::Open {
                continue;
            }
            if breaker.end_break_on_signal(BreakEndReason::HealthCheck, oldest.elapsed()) {
                tracing::info!(
                    cluster = %self.cluster,
                    host = %self.host,
                    breaker = %breaker.id(),
                    "a health check passed: the break ended early, the probes decide"
                );
            }
        }
    }

    /// `failures` checks in a row failed: eject the host when `unhealthy-threshold` asks.
    fn maybe_trip(&self, failures: u32) {
        let (Some(threshold), Some(breaker)) =
            (self.config.unhealthy_threshold, &self.target.trips)
        else {
            return;
        };
        if failures < threshold || breaker.peek().0 != State::Closed {
            return;
        }
        if breaker.trip_on_signal() {
            tracing::warn!(
                cluster = %self.cluster,
                host = %self.host,
                failures,
                "health checks failed {failures} times in a row (unhealthy-threshold): the host \
                 is ejected"
            );
        }
    }
}

/// A check's error in a few words: `connect: connection refused`, `connection closed`, …
fn describe(error: &hyper_util::client::legacy::Error) -> String {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            let what = io.kind().to_string();
            return if error.is_connect() {
                format!("connect: {what}")
            } else {
                what
            };
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>()
            && hyper.is_incomplete_message()
        {
            return "connection closed before an answer".to_owned();
        }
        next = e.source();
    }
    if error.is_connect() {
        "connect failed".to_owned()
    } else {
        "no answer".to_owned()
    }
}

/// A small random source for the jitter (xorshift64*), seeded per host and start.
struct Rng(u64);

impl Rng {
    fn seeded(host: &str) -> Rng {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write(host.as_bytes());
        Rng(hasher.finish() | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform draw in `0..=max`.
    fn upto(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.next() % nanos.saturating_add(1).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jitter_draws_stay_within_their_bound_and_spread() {
        let mut rng = Rng::seeded("127.0.0.1:1");
        let max = Duration::from_millis(100);
        let draws: Vec<Duration> = (0..1000).map(|_| rng.upto(max)).collect();
        assert!(draws.iter().all(|d| *d <= max));
        let low = draws.iter().filter(|d| **d < max / 2).count();
        assert!((400..=600).contains(&low), "{low} of 1000 below the middle");
        assert_eq!(rng.upto(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_host_s_json_is_null_before_its_first_check_and_then_its_last() {
        let health = HostHealth::new("c", "127.0.0.1:1");
        assert_eq!(health.json(), Value::Null);
        health.record(CheckResult {
            passed: false,
            detail: "503".to_owned(),
            at_unix_ms: 7,
            took: Duration::from_millis(2),
            in_a_row: 3,
        });
        let json = health.json();
        assert_eq!(json["result"], "fail");
        assert_eq!(json["detail"], "503");
        assert_eq!(json["at_unix_ms"], 7);
        assert_eq!(json["in_a_row"], 3);
    }
}
