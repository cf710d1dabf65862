//! A cluster: its upstreams, its breaker, its hosts' breakers, and the stack cluster breaker → host pick (host breakers) → attempt (blame, timeout, give-up) → forward.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use cutout::Breaker;
use cutout_tower::{BoxError, WholeResponseService};
use http::{Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

/// A boxed `Send` future.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

use crate::attempt::{AttemptFuture, DeadlinePassed, Detached, Exchange, find};
use crate::client_body::BodyWatch;
use crate::health::{CheckTarget, HealthCheckConfig, HostHealth};
use crate::hosts::{Hosts, Route, ServedBy, Spread, Target, host_service, pick, spread};
use crate::metrics::ClusterMetrics;
use crate::retry::RetryBudget;
use crate::stats::{SlowLimit, Stats};

pub use crate::classify::GatewayClassifier;
use crate::connector::{Connector, Protocol, UpstreamTls};

/// The pooled client every cluster forwards with (HTTP/1.1 or HTTP/2, plain or TLS: see
/// [`crate::connector`]).
pub type HttpClient = Client<Connector, Body>;

/// A cluster's stack, type-erased (this also keeps rustc's `Send` proof for axum handlers
/// simple; see cutout-tower's `axum_gateway` example).
type Stack = BoxCloneSyncService<Request<Body>, Response<Body>, cutout_tower::Error>;

/// One attempt at a host (to the request's [`Target`]), or the host level above it.
pub type AttemptService = BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// A new pooled client of plain HTTP/1.1 upstreams: keep-alive connections per upstream,
/// `TCP_NODELAY`, a connect timeout, and idle pooled connections closed after
/// `pool_idle_timeout` (hyper-util's pool reaps them only with a timer, which is why one is
/// set).
pub fn http_client(connect_timeout: Duration, pool_idle_timeout: Duration) -> HttpClient {
    upstream_client(
        &UpstreamTls::none(),
        Protocol::Auto,
        connect_timeout,
        pool_idle_timeout,
    )
}

/// A new pooled client as [`http_client`]'s, speaking `protocol` and TLS with `tls` to
/// `https://` upstreams. With [`Protocol::H2`] every connection is HTTP/2 (prior knowledge
/// over cleartext); with [`Protocol::Auto`] a TLS upstream that chose `h2` by ALPN gets
/// HTTP/2, the others HTTP/1.1. An HTTP/2 connection carries many requests at once, so the
/// pool keeps one per upstream.
pub fn upstream_client(
    tls: &UpstreamTls,
    protocol: Protocol,
    connect_timeout: Duration,
    pool_idle_timeout: Duration,
) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(pool_idle_timeout)
        .pool_max_idle_per_host(256)
        .http2_only(protocol.h2_only())
        .timer(TokioTimer::new())
        .build(tls.connector(protocol, connect_timeout))
}

/// What a cluster's requests share besides the stack: its statistics, slow mark, metrics and
/// detached attempts.
#[derive(Debug)]
pub struct ClusterShared {
    /// The cluster's name.
    pub name: String,
    /// The upstreams' `host:port`, in order.
    pub authorities: Vec<String>,
    /// The cluster's statistics.
    pub stats: Arc<Stats>,
    /// The hosts' statistics, in order.
    pub host_stats: Vec<Arc<Stats>>,
    /// The statistics' slow mark.
    pub slow: Arc<SlowLimit>,
    /// The budget of attempts whose client left ([`crate::attempt`]).
    pub detached: Arc<Detached>,
    /// The metric handles.
    pub metrics: ClusterMetrics,
    /// The attempt timeout.
    pub attempt_timeout: Duration,
    /// Whether breakers guard the cluster.
    pub guarded: bool,
    /// Each host's health checks, in order (empty without a `health-check` table).
    pub health: Vec<Arc<HostHealth>>,
    /// The retry budget (`None`: no retries: `retry = false`, or a single upstream).
    pub retry: Option<Arc<RetryBudget>>,
    /// Requests of this cluster refused by a breaker (or every host ejected) so far, for the
    /// access log's `access-log-refused` sampling.
    ///
    /// # Orderings
    /// A ticket counter: `Relaxed`, it publishes nothing (which of them is logged may vary).
    pub refused_lines: std::sync::atomic::AtomicU64,
}

/// How a cluster retries (see [`crate::hosts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// `retry`.
    pub enabled: bool,
    /// `retry-budget-percent`.
    pub budget_percent: u8,
    /// `min-concurrent-retries`.
    pub min_concurrent: usize,
}

/// How a cluster is built (see [`Cluster::new`]).
#[derive(Debug)]
pub struct ClusterParts {
    /// The cluster's name (its breaker's id).
    pub name: String,
    /// Its upstreams' base URLs.
    pub upstreams: Vec<Uri>,
    /// Its breaker.
    pub breaker: Breaker,
    /// Its hosts and their breakers, when it ejects hosts.
    pub hosts: Option<Arc<Hosts>>,
    /// The attempt timeout.
    pub attempt_timeout: Duration,
    /// `max-detached-attempts`.
    pub max_detached_attempts: usize,
    /// `max-detached-body`, in bytes.
    pub max_detached_body: usize,
    /// The client to forward with.
    pub client: HttpClient,
    /// How responses are classified.
    pub classifier: cutout_tower::HttpClassifier,
    /// Whether breakers guard the cluster (`false`: neither the cluster breaker nor the host
    /// breakers are in the stack).
    pub guarded: bool,
    /// How it retries on another host.
    pub retry: RetrySettings,
    /// Its `health-check` table, if any.
    pub health_check: Option<HealthCheckConfig>,
}

/// A cluster of upstreams behind one breaker, each host behind its own.
///
/// The stack is **cluster breaker → host pick → attempt → forward**:
/// - the cluster breaker (cutout-tower's [`WholeResponseService`]) refuses with 503 while the
///   cluster is open, and records the outcome at the end of the response's body;
/// - with host breakers ([`crate::hosts`]), round-robin over the hosts whose breaker admits
///   (each a keyed whole-response breaker, at most `max-ejection-percent` of them open), 503
///   when every host refuses (or, in a panic, around their breakers); without, plain
///   round-robin; either way a connect failure or a reset retried once on another host;
/// - the attempt ([`crate::attempt`]): the attempt timeout over the head and the whole body,
///   the gateway's deadline, and *blame*: a failure the client's body caused
///   ([`ClientFault`](crate::error::ClientFault)),
///   found through the [`BodyWatch`] the proxy puts in the request's extensions, is ignored by
///   every breaker;
/// - the forward over hyper-util's pooled client; a timed-out or cut forward, or one given up
///   and not detached ([`crate::attempt`]), is dropped, and hyper closes its connection, so the
///   upstream sees the request cancelled.
///
/// Responses are classified by [`GatewayClassifier`] (5xx and errors fail; 429 and 503 with
/// `Retry-After` are ignored, or with
/// [`honor-retry-after`](crate::config::ClusterConfig::honor_retry_after) open the breaker for
/// the time the upstream asked; a body that breaks or stalls fails).
#[derive(Debug)]
pub struct Cluster {
    name: String,
    upstreams: Arc<[Uri]>,
    breaker: Breaker,
    attempt_timeout: Duration,
    hosts: Option<Arc<Hosts>>,
    shared: Arc<ClusterShared>,
    health_check: Option<HealthCheckConfig>,
    stack: Stack,
}

impl Cluster {
    /// A cluster of `parts` (see [`ClusterParts`]).
    pub fn new(parts: ClusterParts) -> Cluster {
        let ClusterParts {
            name,
            upstreams,
            breaker,
            hosts,
            attempt_timeout,
            max_detached_attempts,
            max_detached_body,
            client,
            classifier,
            guarded,
            retry,
            health_check,
        } = parts;
        let upstreams: Arc<[Uri]> = upstreams.into();
        let authorities: Vec<String> = upstreams
            .iter()
            .map(|u| u.authority().map_or_else(String::new, ToString::to_string))
            .collect();
        let stats = Arc::new(Stats::new());
        let host_stats = match &hosts {
            Some(hosts) => (0..hosts.len())
                .filter_map(|n| hosts.stats(n).cloned())
                .collect(),
            None => authorities.iter().map(|_| Arc::new(Stats::new())).collect(),
        };
        let slow = Arc::new(SlowLimit::new(
            breaker.clone(),
            Arc::clone(&stats),
            attempt_timeout,
        ));
        let metrics = ClusterMetrics::new(&name, &authorities);
        let health = match &health_check {
            Some(_) => authorities
                .iter()
                .map(|host| HostHealth::new(&name, host))
                .collect(),
            None => Vec::new(),
        };
        // A retry needs another host.
        let budget = (retry.enabled && upstreams.len() >= 2).then(|| {
            RetryBudget::new(
                retry.budget_percent,
                retry.min_concurrent,
                metrics.in_flight_count(),
            )
        });
        let detached = Detached::new(
            max_detached_attempts,
            max_detached_body,
            metrics.detached_gauge(),
        );
        let shared = Arc::new(ClusterShared {
            metrics,
            detached,
            name: name.clone(),
            authorities,
            stats,
            host_stats,
            slow,
            attempt_timeout,
            guarded,
            health,
            retry: budget.clone(),
            refused_lines: std::sync::atomic::AtomicU64::new(0),
        });
        let attempt = attempt_service(client, Arc::clone(&upstreams), attempt_timeout);
        let hosts = hosts.filter(|_| guarded);
        let inner: AttemptService = match (&hosts, budget) {
            (Some(hosts), budget) => {
                let service = host_service(
                    attempt.clone(),
                    hosts,
                    GatewayClassifier::new(classifier.clone()),
                );
                let route = Arc::new(Route::new(
                    Arc::clone(hosts),
                    Arc::clone(&shared),
                    budget,
                    attempt,
                ));
                BoxCloneSyncService::new(tower::service_fn(move |request: Request<Body>| {
                    pick(Arc::clone(&route), service.clone(), request)
                }))
            }
            (None, Some(budget)) => {
                let route = Arc::new(Spread::new(Arc::clone(&shared), budget));
                BoxCloneSyncService::new(tower::service_fn(move |request: Request<Body>| {
                    spread(Arc::clone(&route), attempt.clone(), request)
                }))
            }
            (None, None) => attempt,
        };
        let stack = if guarded {
            let cluster_classifier = match &hosts {
                Some(hosts) => GatewayClassifier::new(classifier).absorbing(Arc::clone(hosts)),
                None => GatewayClassifier::new(classifier),
            };
            BoxCloneSyncService::new(
                WholeResponseService::with_classifier(inner, breaker.clone(), cluster_classifier)
                    .map_response(|response| response.map(Body::new)),
            )
        } else {
            BoxCloneSyncService::new(inner.map_err(cutout_tower::Error::inner))
        };
        Cluster {
            name,
            upstreams,
            breaker,
            attempt_timeout,
            hosts,
            shared,
            health_check,
            stack,
        }
    }

    /// Its `health-check` table, if any ([`crate::health`]).
    pub fn health_check(&self) -> Option<&HealthCheckConfig> {
        self.health_check.as_ref()
    }

    /// What host `n`'s health checks act on ([`crate::health`]): when the cluster ejects
    /// hosts, a pass ends the host's break and the cluster breaker's, `unhealthy-threshold`
    /// trips the host's; the cluster breaker when it has one upstream (a pass ends its break,
    /// `unhealthy-threshold` trips it); in a cluster of several upstreams without host
    /// breakers, a pass ends the cluster breaker's break and nothing trips; nothing without
    /// breakers.
    pub fn check_target(&self, n: usize) -> CheckTarget {
        if !self.shared.guarded {
            return CheckTarget::default();
        }
        match &self.hosts {
            Some(hosts) => {
                let host = hosts.breaker(n).cloned();
                CheckTarget {
                    ends: host.iter().cloned().chain([self.breaker.clone()]).collect(),
                    trips: host,
                }
            }
            None if self.upstreams.len() == 1 => CheckTarget {
                ends: vec![self.breaker.clone()],
                trips: Some(self.breaker.clone()),
            },
            None => CheckTarget {
                ends: vec![self.breaker.clone()],
                trips: None,
            },
        }
    }

    /// The cluster's name (also its breaker's id).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The upstream base URLs.
    pub fn upstreams(&self) -> &[Uri] {
        &self.upstreams
    }

    /// The cluster's breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The hosts' breakers, when the cluster ejects hosts (two or more upstreams,
    /// `max-ejection-percent` above 0, breakers on).
    pub fn hosts(&self) -> Option<&Arc<Hosts>> {
        self.hosts.as_ref()
    }

    /// The attempt timeout.
    pub fn attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }

    /// What the cluster's requests share: statistics, slow mark, metrics, detached attempts.
    pub fn shared(&self) -> &Arc<ClusterShared> {
        &self.shared
    }

    /// A new request's [`Exchange`] (put it in the request's extensions before [`call`]).
    ///
    /// [`call`]: Cluster::call
    pub fn exchange(&self) -> Arc<Exchange> {
        Exchange::new()
    }

    /// Sends `request` (a URI of path and query only, headers already prepared) through the
    /// stack. The future is `'static`: it owns a handle to the stack.
    pub fn call(
        &self,
        request: Request<Body>,
    ) -> BoxFuture<Result<Response<Body>, cutout_tower::Error>> {
        Box::pin(self.stack.clone().oneshot(request))
    }
}

/// The attempt service: to the request's [`Target`] host (else round-robin), under the
/// attempt timeout and the gateway's deadline, with the client's faults blamed on the client.
fn attempt_service(client: HttpClient, upstreams: Arc<[Uri]>, timeout: Duration) -> AttemptService {
    let next = Arc::new(AtomicUsize::new(0));
    BoxCloneSyncService::new(tower::service_fn(move |request: Request<Body>| {
        // A cluster always has an upstream (the configuration says so); without one, the
        // attempt fails as an unreachable upstream would.
        let len = upstreams.len().max(1);
        let n = match request.extensions().get::<Target>() {
            Some(target) => target.0 % len,
            // Relaxed: a ticket counter, it orders nothing.
            None => next.fetch_add(1, Ordering::Relaxed) % len,
        };
        let base = upstreams
            .get(n)
            .cloned()
            .unwrap_or_else(|| Uri::from_static("http://127.0.0.1:0"));
        let client = client.clone();
        let exchange = request.extensions().get::<Arc<Exchange>>().cloned();
        let watch = request.extensions().get::<Arc<BodyWatch>>().cloned();
        if let Some(exchange) = &exchange {
            exchange.set_host(n);
        }
        let attempt = AttemptFuture::new(
            forward(client, base, request),
            timeout,
            exchange.clone(),
            watch.clone(),
        );
        async move {
            match attempt.await {
                Ok(response) => {
                    let mut response = response.map(Body::new);
                    response.extensions_mut().insert(ServedBy(n));
                    Ok(response)
                }
                Err(error) => Err(blame(watch.as_deref(), error)),
            }
        }
    }))
}

/// The client's share of a failed attempt (see [`BodyWatch::blame`]); the gateway's deadline
/// stays the gateway's (no breaker counts it).
fn blame(watch: Option<&BodyWatch>, error: BoxError) -> BoxError {
    match watch {
        Some(watch) if find::<DeadlinePassed>(&*error).is_none() => watch.blame(error),
        _ => error,
    }
}

/// Sends `request` to `base` (scheme and authority), keeping its path and query.
async fn forward(
    client: HttpClient,
    base: Uri,
    mut request: Request<Body>,
) -> Result<Response<hyper::body::Incoming>, BoxError> {
    let mut parts = base.into_parts();
    parts.path_and_query = request.uri().path_and_query().cloned();
    *request.uri_mut() = Uri::from_parts(parts)?;
    Ok(client.request(request).await?)
}
