//! Per-host outlier ejection inside a cluster: one breaker per upstream host (cutout-tower's keyed breakers), at most `max-ejection-percent` of them open at once, round-robin over the hosts that admit.
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
//! **The cluster breaker is kept for whole-cluster failure.** A host's failure is the host
//! breaker's to judge while ejection can still deal with it; the cluster breaker counts it as
//! nothing then ([`Hosts::absorbs`]): when the host is ejected already (it holds a slot), or
//! when fewer than `max_ejected` hosts are. Failures that ejection cannot absorb (the cap is
//! reached, so the failing host stays in the rotation) count for the cluster breaker, which
//! opens when the cluster as a whole fails. One dead host of two: its failures eject it, the
//! cluster breaker sees only the healthy host's successes. Both dead: one is ejected, the
//! other's failures open the cluster.
//!
//! **Readmission.** A host breaker's break stops growing at
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
//! `max-break-duration` instead.
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

use crate::classify::GatewayClassifier;
use crate::stats::Stats;

/// The host an attempt is sent to, by index in the cluster's upstreams (in the request's
/// extensions; without it the attempt picks round-robin itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target(pub usize);

/// The host that answered, by index (in the response's extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBy(pub usize);

/// An attempt's error, with the host it went to.
#[derive(Debug)]
pub struct HostError {
    /// The host's index in the cluster.
    pub host: usize,
    /// The error.
    pub error: BoxError,
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
    next: AtomicUsize,
    stats: Vec<Arc<Stats>>,
}

impl Hosts {
    /// The hosts of `cluster`'s `upstreams`, each with a breaker of `settings(id)` on `clock`,
    /// at most `max_ejected` ejected at once. Host breakers are made at once (and never
    /// evicted) so that they can be listed and controlled before their first call.
    pub fn new(
        cluster: &str,
        upstreams: &[Uri],
        max_ejected: usize,
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

    /// Whether a failure of host `n` is ejection's to deal with, so that the cluster breaker
    /// counts it as nothing: the host is ejected already, or fewer than `max_ejected` hosts
    /// are (it may still be). One atomic load per host.
    pub fn absorbs(&self, n: usize) -> bool {
        let Some(host) = self.breakers.get(n) else {
            return false;
        };
        Hosts::ejected_in(host.peek().0) || self.ejected() < self.max_ejected
    }

    /// The order in which request number `ticket` asks the hosts: round-robin's host first,
    /// then the others, rotated by one more each time round-robin comes back to the same
    /// host. So the share of a host that refuses is spread evenly over the others (DESIGN §8),
    /// instead of all going to the host after it in the list (with the first of three
    /// ejected, the second took two thirds of the traffic).
    fn order(&self, ticket: usize) -> impl Iterator<Item = usize> {
        let n = self.ids.len();
        let first = ticket % n;
        let turn = ticket / n;
        std::iter::once(first).chain((0..n - 1).map(move |k| {
            let other = (turn + k) % (n - 1);
            (first + 1 + other) % n
        }))
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

/// Sends `request` to the first host, in round-robin order (the others after it in an order
/// that spreads a refusing host's share evenly), whose breaker admits it; its
/// verdict waits for the end of the response's body. Fails with [`AllEjected`] when every
/// host refuses, with a [`HostError`] naming the host when its attempt fails.
pub async fn pick<S>(
    hosts: Arc<Hosts>,
    mut service: HostService<S>,
    mut request: Request<Body>,
) -> Result<Response<Body>, BoxError>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = BoxError>,
{
    std::future::poll_fn(|cx| tower::Service::poll_ready(&mut service, cx)).await?;
    if hosts.is_empty() {
        return Err(Box::new(AllEjected {
            cluster: hosts.cluster.clone(),
            retry_after: None,
        }));
    }
    let ticket = hosts.ticket();
    let mut retry_after: Option<Duration> = None;
    for n in hosts.order(ticket) {
        request.extensions_mut().insert(Target(n));
        match service.try_call_whole_response(&hosts.ids[n], request) {
            Ok(future) => {
                return match future.await {
                    Ok(response) => Ok(response.map(Body::new)),
                    Err(error) => Err(Box::new(HostError {
                        host: n,
                        error: Box::new(error),
                    })),
                };
            }
            Err((back, refused)) => {
                request = back;
                if let Some(after) = refused.retry_after() {
                    retry_after = Some(retry_after.map_or(after, |r| r.min(after)));
                }
            }
        }
    }
    Err(Box::new(AllEjected {
        cluster: hosts.cluster.clone(),
        retry_after,
    }))
}
