//! Routing inside a cluster: one breaker per upstream host (cutout-tower's keyed breakers), at most `max-ejection-percent` of them open at once, round-robin over the hosts that admit, a retry on another host after a connect failure or a reset, and the panic threshold.
//!
//! A cluster of two or more upstreams (with `max-ejection-percent` above 0 and breakers on)
//! has one breaker per host, named `<cluster>/<host>:<port>`, with the cluster's breaker
//! settings (or `[breakers.instances."<cluster>/<host>:<port>"]`). Round-robin asks each
//! host's breaker in turn, starting from the next host: the first that admits gets the request,
//! an open (ejected) or isolated host is skipped, and a host whose break has run out gets its
//! probe. When every host refuses, the cluster answers 503 with the soonest `Retry-After`
//! ([`AllEjected`]).
//!
//! **The ejection cap** is the keyed breakers' open cap: at most [`Hosts::max_ejected`] hosts
//! (`max-ejection-percent` of the upstreams rounded down, at least one: Envoy's
//! `max_ejection_percent` and its at-least-one rule) are open or half-open at once. A host that
//! would trip beyond the cap stays in the rotation.
//!
//! # Retries to another host
//! With `retry = true` (the default), a request whose attempt failed with a **connect
//! failure** (no byte of it reached the host: any method, its body still whole) or a
//! **reset** (the connection closed or reset before any byte of the answer: an idempotent
//! method only, RFC 9110 §9.2.2) is sent **once** more, to the next host of its round-robin
//! order that admits it, those serving ([`Hosts::serving`]) first, never to the host that
//! failed and never to another cluster
//! ([`crate::retry`] says exactly which failures and requests). Within a **retry budget** per
//! cluster (Envoy's): retries in flight at most `retry-budget-percent` (20) of the cluster's
//! active requests, or `min-concurrent-retries` (3), whichever is more; chosen so that a
//! cluster at `wrk -c4` retries every such failure and one at 1,000 concurrent requests cannot
//! add more than a fifth to what its surviving hosts carry. Never after a **refusal**: a host
//! whose breaker refuses is skipped before any attempt (that is routing, not a retry), the
//! cluster breaker's 503 reaches no host, and an upstream's own answer (a 5xx, a 503 with
//! `Retry-After`, any status) is passed on as it is. Nor after a timeout (the host may still be
//! working on it; a second host would double the work of a cluster that is slow everywhere).
//!
//! The failed attempt counts against its host: its breaker records the failure when it
//! happens (the attempt went through it), its statistics and
//! `cutout_gateway_upstream_requests_total{code="error"}` count it, and the access log line
//! names it (`retried_from=`). The cluster breaker judges the request's outcome, the retry's:
//! a connect failure that another host answered is nobody's failure at the cluster level.
//! `cutout_gateway_retries_total{decision}` counts the retries made and those the budget
//! refused. Cost on the healthy path: a cluster that may retry keeps each request's head (a
//! copy of its headers, and a non-empty body's place) until its answer's head: at most
//! about 2,500 instructions per request (callgrind: 1,300 to copy, 1,200 to drop), some 3 %
//! of the roughly 80,000 the gateway spends on a proxied request (BENCHMARKS.md); the budget
//! reads the in-flight count the access record keeps anyway. `retry = false` saves it; a
//! cluster of one upstream never pays it.
//!
//! # The panic threshold
//! When fewer than `panic-threshold` (50 %, Envoy's `healthy_panic_threshold`) of the hosts
//! an operator has not isolated are **healthy** (their breaker closed, half-open or
//! recovering), the cluster is **in panic**: a request whose round-robin host refuses goes to
//! that host anyway, around its breaker, instead of to the few hosts left (which would carry
//! everything) or to nobody (503). So the requests are spread over every host, as Envoy does,
//! on the view that so many hosts failing at once more likely says something about the
//! traffic or the checks than about each host. Isolated hosts stay out (the operator's
//! decision). A request sent around a host's breaker is not counted by it (its break and its
//! probes go on), and its failure is the cluster breaker's to count (ejection has been
//! overridden): a cluster whose hosts are all dead still opens. With the default
//! `max-ejection-percent` (50) at least half of the hosts stay closed and a panic never
//! starts; it matters when the cap is higher. `panic-threshold = 0` turns it off (every host
//! ejected: 503). The health read is each breaker's published state (one atomic load per
//! host, and only when a host refused): a host whose break has run out with no call since
//! reads open until its probe.
//!
//! # The cluster breaker: whole-cluster failure only, never while a healthy host serves
//! A host's failure is the host breaker's to judge while ejection can still deal with it; the
//! cluster breaker counts it as nothing then ([`Hosts::absorbs`]): when the host is ejected
//! already (it holds a slot), or when fewer than `max_ejected` hosts are. Past the cap, a
//! failing host stays in the rotation, and its failures used to count for the cluster breaker:
//! with two of three hosts dead, the capped dead host's failures opened the cluster, which
//! then refused the healthy host's traffic too (issue #28: 83,930 refusals while the healthy
//! host served 808 requests in 10 s). Now a host's failure also counts as nothing while
//! **another host of the cluster is serving**: its breaker closed, its last counted outcome a
//! success, and its window's failure rate (once it has `minimum-calls`) under 5 %, cutout's
//! floor for an abnormal failure rate. A cluster breaker that opened then would refuse the
//! serving host's requests, which succeed. So the cluster opens when it fails as a whole: no
//! host serving, each one failing (two dead hosts of two; a shared dependency failing every
//! host's calls: each host's rate then passes 5 %, and their failures count as before).
//! What the cluster breaker can no longer see: a failure confined to some hosts while another
//! serves; those are the host breakers' and the cap's to handle, and past the cap their
//! failures reach clients (retried when they are connect failures or resets). Reading whether
//! a host serves takes its breaker's snapshot (a lock), on the failure path only.
//!
//! # Readmission
//! A host breaker's break stops growing at
//! [`DEFAULT_HOST_MAX_BREAK`](crate::config::DEFAULT_HOST_MAX_BREAK) (15 s) unless the operator
//! set `max-break-duration` for it (why: [`GatewayConfig::host_settings`]), and on the shipped
//! defaults its probes are judged on their outcome only (no latency rule unless the operator
//! gives one, see [`crate::config`]), so a restarted host's probes on fresh connections pass.
//! The worst case for a host that comes back, whatever its downtime: it came back just after
//! a failed probe, so it waits for the whole break being served (at most 15 s, at least 7.5 s
//! with cutout's equal jitter), then for its `probe-successes` probes (2 by default, one in
//! flight at a time). Each probe is the next request that round-robin brings to it: the host
//! is asked first by one request in n among n hosts (sooner when the hosts before it refuse),
//! so at r requests a second each probe waits about n / r, plus its own latency. At 20 req/s
//! over three hosts: at most 15 s + 2 × 0.15 s + two probes' latency, about 15.3 s. A probe
//! is a request: with no traffic the host stays ejected until traffic comes (and nobody is
//! refused meanwhile). A host whose break the operator lets grow waits up to its
//! `max-break-duration` instead. With a `health-check` table ([`crate::health`]) a host that
//! comes back is found by its next check, which ends its break: readmitted within two check
//! intervals. A probe that fails is retried on another host when its failure is a connect
//! failure or a reset, so a dead host's probes cost clients nothing.
//!
//! [`GatewayConfig::host_settings`]: crate::config::GatewayConfig::host_settings

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use cutout::{Breaker, HumanDuration, Settings, State};
use cutout_tower::BoxError;
use cutout_tower::keyed::{KeyedBreakers, KeyedService};
use http::{Request, Response, Uri};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::classify::GatewayClassifier;
use crate::cluster::{AttemptService, ClusterShared};
use crate::retry::{Again, RetryBudget, RetrySlot, cause};
use crate::stats::{Ended, Stats};

/// The host an attempt is sent to, by index in the cluster's upstreams (in the request's
/// extensions; without it the attempt picks round-robin itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target(pub usize);

/// The host that answered, by index (in the response's extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBy(pub usize);

/// The answer of an attempt sent around its host's breaker in a panic (in the response's
/// extensions): the cluster breaker counts its failure (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Panicked;

/// An attempt's error, with the host it went to.
#[derive(Debug)]
pub struct HostError {
    /// The host's index in the cluster.
    pub host: usize,
    /// The error.
    pub error: BoxError,
    /// Whether the attempt went around the host's breaker in a panic.
    pub panic: bool,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for HostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

/// Every host of the cluster refused: all are ejected or isolated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllEjected {
    /// The cluster.
    pub cluster: String,
    /// The soonest a host's break ends (`None`: every host is isolated).
    pub retry_after: Option<Duration>,
}

impl fmt::Display for AllEjected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "every upstream host of {} is ejected", self.cluster)?;
        if let Some(after) = self.retry_after {
            write!(f, "; retry after {}", HumanDuration(after))?;
        }
        Ok(())
    }
}

impl std::error::Error for AllEjected {}

/// The breaker id of `authority` in `cluster`: `<cluster>/<host>:<port>`.
pub fn host_id(cluster: &str, authority: &str) -> String {
    format!("{cluster}/{authority}")
}

/// The hosts of one cluster and their breakers (see the [module docs](self)).
#[derive(Debug)]
pub struct Hosts {
    cluster: String,
    ids: Vec<String>,
    authorities: Vec<String>,
    breakers: Vec<Breaker>,
    keyed: KeyedBreakers<String>,
    max_ejected: usize,
    panic_threshold: u8,
    next: AtomicUsize,
    stats: Vec<Arc<Stats>>,
}

/// The highest window failure rate of a host that still counts as serving: cutout's floor for
/// an abnormal failure rate (see the [module docs](self)).
pub const SERVING_FAILURE_RATE: f64 = 0.05;

impl Hosts {
    /// The hosts of `cluster`'s `upstreams`, each with a breaker of `settings(id)` on `clock`,
    /// at most `max_ejected` ejected at once, in panic below `panic_threshold` % of healthy
    /// hosts (0: never). Host breakers are made at once (and never evicted) so that they can
    /// be listed and controlled before their first call.
    pub fn new(
        cluster: &str,
        upstreams: &[Uri],
        max_ejected: usize,
        panic_threshold: u8,
        settings: impl Fn(&str) -> Settings + Send + Sync + 'static,
        clock: impl cutout::clock::Clock,
    ) -> Hosts {
        let authorities: Vec<String> = upstreams
            .iter()
            .map(|u| u.authority().map_or_else(String::new, ToString::to_string))
            .collect();
        let ids: Vec<String> = authorities.iter().map(|a| host_id(cluster, a)).collect();
        let keyed = KeyedBreakers::builder_per_key(move |id: &String| settings(id))
            .max_keys(ids.len().max(1))
            // Never idle: a host is part of its cluster for the gateway's life.
            .idle_after(Duration::from_secs(u64::MAX))
            .max_open(max_ejected.max(1))
            .clock(clock)
            .build();
        let breakers: Vec<Breaker> = ids
            .iter()
            .map(|id| {
                keyed
                    .breaker(id)
                    .expect("max_keys holds every host of the cluster")
            })
            .collect();
        Hosts {
            cluster: cluster.to_owned(),
            stats: ids.iter().map(|_| Arc::new(Stats::new())).collect(),
            ids,
            authorities,
            breakers,
            keyed,
            max_ejected,
            panic_threshold: panic_threshold.min(100),
            next: AtomicUsize::new(0),
        }
    }

    /// How many hosts.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are none (never, for a cluster).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The breaker ids, `<cluster>/<host>:<port>`, in the order of the upstreams.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The hosts' `host:port`, in the order of the upstreams.
    pub fn authorities(&self) -> &[String] {
        &self.authorities
    }

    /// Host `n`'s breaker.
    pub fn breaker(&self, n: usize) -> Option<&Breaker> {
        self.breakers.get(n)
    }

    /// The host breakers, in the order of the upstreams.
    pub fn breakers(&self) -> &[Breaker] {
        &self.breakers
    }

    /// The breaker whose id is `id`.
    pub fn find(&self, id: &str) -> Option<(usize, &Breaker)> {
        let n = self.ids.iter().position(|i| i == id)?;
        Some((n, &self.breakers[n]))
    }

    /// Host `n`'s statistics.
    pub fn stats(&self, n: usize) -> Option<&Arc<Stats>> {
        self.stats.get(n)
    }

    /// The most hosts ejected at once.
    pub fn max_ejected(&self) -> usize {
        self.max_ejected
    }

    /// The keyed breakers (for their counters: suppressed ejections, open slots).
    pub fn keyed(&self) -> &KeyedBreakers<String> {
        &self.keyed
    }

    /// Whether the breaker of a host in `state` holds an ejection slot.
    fn ejected_in(state: State) -> bool {
        matches!(state, State::Open | State::HalfOpen | State::Recovering)
    }

    /// How many hosts are ejected now (open, half-open or recovering; isolated hosts are the
    /// operator's and are not counted against the cap).
    pub fn ejected(&self) -> usize {
        self.breakers
            .iter()
            .filter(|b| Hosts::ejected_in(b.peek().0))
            .count()
    }

    /// Whether a failure of host `n` is not the cluster breaker's to count (see the [module
    /// docs](self)): ejection deals with it (the host is ejected already, or fewer than
    /// `max_ejected` hosts are), unless the attempt went around the host's breaker in a
    /// `panic`; or another host is serving ([`Hosts::serving`]). One atomic load per host,
    /// and a snapshot of each other host when ejection does not absorb it.
    pub fn absorbs(&self, n: usize, panic: bool) -> bool {
        let Some(host) = self.breakers.get(n) else {
            return false;
        };
        if !panic && (Hosts::ejected_in(host.peek().0) || self.ejected() < self.max_ejected) {
            return true;
        }
        (0..self.breakers.len()).any(|m| m != n && self.serving(m))
    }

    /// Whether host `n` is serving: its breaker closed, its last counted outcome a success,
    /// and its window's failure rate (once it has `minimum-calls`) under
    /// [`SERVING_FAILURE_RATE`].
    pub fn serving(&self, n: usize) -> bool {
        let Some(host) = self.breakers.get(n) else {
            return false;
        };
        if host.peek().0 != State::Closed {
            return false;
        }
        let s = host.snapshot();
        s.state == State::Closed
            && s.consecutive_failures == 0
            && s.failure_rate
                .is_none_or(|rate| rate < SERVING_FAILURE_RATE)
    }

    /// `panic-threshold`, in percent (0: off).
    pub fn panic_threshold(&self) -> u8 {
        self.panic_threshold
    }

    /// Whether the cluster is in panic: fewer than `panic-threshold` of the hosts an operator
    /// has not isolated are healthy (closed, half-open or recovering, as published). One atomic
    /// load per host.
    pub fn panicking(&self) -> bool {
        if self.panic_threshold == 0 {
            return false;
        }
        let (mut healthy, mut counted) = (0usize, 0usize);
        for breaker in &self.breakers {
            match breaker.peek().0 {
                State::Isolated => {}
                State::Open => counted += 1,
                _ => {
                    counted += 1;
                    healthy += 1;
                }
            }
        }
        counted > 0 && healthy * 100 < usize::from(self.panic_threshold) * counted
    }

    /// Whether host `n` was isolated by an operator.
    pub fn isolated(&self, n: usize) -> bool {
        self.breakers
            .get(n)
            .is_some_and(|b| b.peek().0 == State::Isolated)
    }

    /// The order in which request number `ticket` asks the hosts: round-robin's host first,
    /// then the other hosts whose breaker reads closed, then the rest, each group rotated by
    /// the ticket's turn (see [`crate::order`]), so the share of the hosts that refuse is
    /// spread evenly over those that serve (DESIGN §8).
    fn order(&self, ticket: usize) -> crate::order::Order {
        crate::order::order(self.ids.len(), ticket, |n| {
            self.breakers
                .get(n)
                .is_some_and(|b| b.peek().0 == State::Closed)
        })
    }

    /// The next request's ticket.
    fn ticket(&self) -> usize {
        // Relaxed: a ticket counter, it orders nothing.
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// The host level of a cluster's stack: each host's breaker asked in round-robin order, the
/// first that admits takes the request.
pub type HostService<S> = KeyedService<S, String, fn(&Request<Body>) -> String, GatewayClassifier>;

fn no_key(_: &Request<Body>) -> String {
    String::new()
}

/// The host level over `attempt` (see [`pick`]).
pub fn host_service<S>(attempt: S, hosts: &Hosts, classifier: GatewayClassifier) -> HostService<S> {
    KeyedService::new(
        attempt,
        hosts.keyed.clone(),
        no_key as fn(&Request<Body>) -> String,
        classifier,
        None,
    )
}

/// How a cluster with host breakers routes (see the [module docs](self)): its hosts, what
/// its requests share, its retry budget (`None`: `retry = false`), and the attempt service to
/// send a request around a host's breaker in a panic.
#[derive(Debug)]
pub struct Route {
    hosts: Arc<Hosts>,
    shared: Arc<ClusterShared>,
    retry: Option<Arc<RetryBudget>>,
    around: AttemptService,
}

impl Route {
    /// The routing of `hosts`: retries within `retry` (`None`: none), `around` the attempt
    /// service a panic uses.
    pub fn new(
        hosts: Arc<Hosts>,
        shared: Arc<ClusterShared>,
        retry: Option<Arc<RetryBudget>>,
        around: AttemptService,
    ) -> Route {
        Route {
            hosts,
            shared,
            retry,
            around,
        }
    }
}

/// Whether the attempt of a request (made replayable as `again`) that failed with `error` at
/// host `n` after `took` is retried: the request to send again to another host and its slot
/// in the budget, or `None` (the request ends with the attempt's error). Counts the retry, or
/// the budget's refusal, and the failed attempt against its host.
fn after_failure(
    shared: &ClusterShared,
    budget: Option<&Arc<RetryBudget>>,
    mut again: Option<&mut Again>,
    n: usize,
    error: &BoxError,
    took: Duration,
) -> Option<(Request<Body>, RetrySlot)> {
    let cause = cause(&**error)?;
    let request = again.as_deref_mut()?.retry(cause)?;
    let Some(slot) = budget?.try_retry() else {
        shared.metrics.retry(false);
        return None;
    };
    shared.metrics.retry(true);
    // The failed attempt is its host's: its breaker recorded it; so do its statistics.
    shared.metrics.upstream(n, None);
    if let Some(stats) = shared.host_stats.get(n) {
        stats.record(took, Ended::UpstreamError, false);
    }
    if let Some(exchange) = again.as_deref().and_then(Again::exchange) {
        exchange.set_retried(n);
    }
    Some((request, slot))
}

/// Sends `request` to the first host, in round-robin order (the others after it in an order
/// that spreads a refusing host's share evenly), whose breaker admits it, or in a panic to
/// the first host around its breaker; its verdict waits for the end of the response's body.
/// A connect failure or a reset is retried once on the next host, within the budget (see the
/// [module docs](self)). Fails with [`AllEjected`] when every host refuses, with a
/// [`HostError`] naming the host when its attempt fails (the retry's, when one was made).
pub async fn pick<S>(
    route: Arc<Route>,
    mut service: HostService<S>,
    request: Request<Body>,
) -> Result<Response<Body>, BoxError>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = BoxError>,
{
    std::future::poll_fn(|cx| tower::Service::poll_ready(&mut service, cx)).await?;
    let hosts = &route.hosts;
    if hosts.is_empty() {
        return Err(Box::new(AllEjected {
            cluster: hosts.cluster.clone(),
            retry_after: None,
        }));
    }
    let (mut request, mut again) = match route.retry {
        Some(_) => {
            let (request, again) = Again::of(request);
            (request, Some(again))
        }
        None => (request, None),
    };
    let ticket = hosts.ticket();
    let mut retry_after: Option<Duration> = None;
    let mut panic: Option<bool> = None;
    let mut retried: Option<(HostError, RetrySlot)> = None;
    let mut order = hosts.order(ticket);
    // After a failed attempt: the hosts left in the order, those serving first.
    let mut rest: Option<std::vec::IntoIter<usize>> = None;
    loop {
        let next = match rest.as_mut() {
            Some(rest) => rest.next(),
            None => order.next(),
        };
        let Some(n) = next else {
            break;
        };
        request.extensions_mut().insert(Target(n));
        let started = Instant::now();
        let failed = match service.try_call_whole_response(&hosts.ids[n], request) {
            Ok(future) => match future.await {
                Ok(response) => return Ok(response.map(Body::new)),
                Err(error) => HostError {
                    host: n,
                    error: Box::new(error),
                    panic: false,
                },
            },
            Err((back, refused)) => {
                if let Some(after) = refused.retry_after() {
                    retry_after = Some(retry_after.map_or(after, |r| r.min(after)));
                }
                let panicking = *panic.get_or_insert_with(|| hosts.panicking());
                if !panicking || hosts.isolated(n) {
                    request = back;
                    continue;
                }
                match route.around.clone().oneshot(back).await {
                    Ok(mut response) => {
                        response.extensions_mut().insert(Panicked);
                        return Ok(response);
                    }
                    Err(error) => HostError {
                        host: n,
                        error,
                        panic: true,
                    },
                }
            }
        };
        if retried.is_some() {
            return Err(Box::new(failed));
        }
        match after_failure(
            &route.shared,
            route.retry.as_ref(),
            again.as_mut(),
            n,
            &failed.error,
            started.elapsed(),
        ) {
            None => return Err(Box::new(failed)),
            Some((next, slot)) => {
                request = next;
                retried = Some((failed, slot));
                // A host that serves is the likelier to answer: with two hosts of three
                // dead, the other dead one (still in the rotation past the ejection cap)
                // would fail the retry too.
                let mut others: Vec<usize> = order.by_ref().collect();
                others.sort_by_key(|m| !hosts.serving(*m));
                rest = Some(others.into_iter());
            }
        }
    }
    // No other host admitted the retry: the first attempt's error stands.
    if let Some((failed, _)) = retried {
        return Err(Box::new(failed));
    }
    Err(Box::new(AllEjected {
        cluster: hosts.cluster.clone(),
        retry_after,
    }))
}

/// How a cluster of several upstreams without host breakers (`max-ejection-percent = 0`, or
/// `breakers = false`) routes: plain round-robin, and the same retry on the next host.
#[derive(Debug)]
pub struct Spread {
    shared: Arc<ClusterShared>,
    retry: Arc<RetryBudget>,
    next: AtomicUsize,
}

impl Spread {
    /// The round-robin of `shared`'s hosts with retries within `retry`.
    pub fn new(shared: Arc<ClusterShared>, retry: Arc<RetryBudget>) -> Spread {
        Spread {
            shared,
            retry,
            next: AtomicUsize::new(0),
        }
    }
}

/// Sends `request` to the next host round-robin, and once more to the one after it after a
/// connect failure or a reset, within the budget.
pub async fn spread(
    route: Arc<Spread>,
    attempt: AttemptService,
    request: Request<Body>,
) -> Result<Response<Body>, BoxError> {
    let len = route.shared.authorities.len().max(1);
    let (mut request, mut again) = Again::of(request);
    // Relaxed: a ticket counter, it orders nothing.
    let n = route.next.fetch_add(1, Ordering::Relaxed) % len;
    request.extensions_mut().insert(Target(n));
    let started = Instant::now();
    let error = match attempt.clone().oneshot(request).await {
        Ok(response) => return Ok(response),
        Err(error) => error,
    };
    match after_failure(
        &route.shared,
        Some(&route.retry),
        Some(&mut again),
        n,
        &error,
        started.elapsed(),
    ) {
        None => Err(error),
        Some((mut next, _slot)) => {
            next.extensions_mut().insert(Target((n + 1) % len));
            attempt.oneshot(next).await
        }
    }
}
