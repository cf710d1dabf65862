//! [`Gateway`]: the shared state of both listeners: clusters, their breakers and hosts' breakers, recent transitions and manual actions.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cutout::clock::{Clock, SharedClock, SystemClock};
use cutout::{Breaker, Event, Registry, Transition};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::cluster::{Cluster, ClusterParts, RetrySettings, upstream_client};
use crate::config::{GatewayConfig, Route};
use crate::hosts::Hosts;
use crate::rate::SourceRate;

/// How many transitions the gateway remembers for the status page.
pub const TRANSITIONS_KEPT: usize = 50;
/// How many manual actions the gateway remembers for the status page.
pub const ACTIONS_KEPT: usize = 50;

/// One manual action (an operator's isolate, reset or open-for through the admin API).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The breaker (a cluster, or `<cluster>/<host>:<port>`).
    pub breaker: String,
    /// `isolate`, `reset`, `open_for`.
    pub action: &'static str,
    /// What it asked, for people (`for 30s`), empty if nothing.
    pub detail: String,
    /// Who asked: the admin client's address.
    pub by: String,
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64
}

/// One breaker transition, as the status page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRecord {
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The breaker (cluster) id.
    pub breaker: String,
    /// The state it left.
    pub from: &'static str,
    /// The state it entered.
    pub to: &'static str,
    /// Why it opened, or what ended its break early (`health_check`, …); `None` for other
    /// transitions.
    pub reason: Option<&'static str>,
}

/// The gateway: routes, clusters (each with a breaker in one [`Registry`], and its hosts'
/// breakers), the log of recent transitions and of manual actions. Shared by the proxy and
/// admin listeners behind an `Arc`.
#[derive(Debug)]
pub struct Gateway {
    config: GatewayConfig,
    registry: Registry,
    clusters: BTreeMap<String, Cluster>,
    transitions: Arc<Mutex<VecDeque<TransitionRecord>>>,
    /// The reason each breaker last opened for, by id.
    reasons: Arc<Mutex<HashMap<String, &'static str>>>,
    actions: Mutex<VecDeque<ActionRecord>>,
    metrics: Option<PrometheusHandle>,
    readiness: AtomicU8,
    listening: OnceLock<(SocketAddr, SocketAddr)>,
    /// Each source's request rate, when `rate-limit-per-source` is set.
    rate: Option<SourceRate>,
}

/// Where a gateway is in its life, as `/readyz` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// Configured, listeners not bound yet (or served some other way than [`crate::server::run`]).
    Starting,
    /// Both listeners are bound and serving.
    Ready,
    /// Shutting down: draining in-flight requests.
    Draining,
}

impl Readiness {
    /// `starting`, `ready`, `draining`.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Starting => "starting",
            Readiness::Ready => "ready",
            Readiness::Draining => "draining",
        }
    }
}

impl Gateway {
    /// A gateway for `config`, breakers on cutout's default clock.
    pub fn new(config: GatewayConfig) -> Arc<Gateway> {
        Gateway::build(config, Registry::new(), SharedClock::new(SystemClock))
    }

    /// A gateway whose breakers (the clusters' and the hosts') read `clock` (a `ManualClock`
    /// in tests, so breaks can be waited out instantly).
    pub fn with_clock(config: GatewayConfig, clock: impl Clock) -> Arc<Gateway> {
        let clock = SharedClock::new(clock);
        Gateway::build(config, Registry::with_clock(clock.clone()), clock)
    }

    fn build(config: GatewayConfig, registry: Registry, clock: SharedClock) -> Arc<Gateway> {
        // The recorder must exist before breakers register their counters.
        let metrics = crate::metrics::install();
        let transitions = Arc::new(Mutex::new(VecDeque::with_capacity(TRANSITIONS_KEPT)));
        let reasons = Arc::new(Mutex::new(HashMap::new()));
        let listen = |breaker: &Breaker| {
            let log = Arc::clone(&transitions);
            let reasons = Arc::clone(&reasons);
            breaker.subscribe(move |event| record(&log, &reasons, event));
        };
        let mut clusters = BTreeMap::new();
        for (name, cluster) in &config.clusters {
            let settings = config.cluster_settings(name);
            let breaker = registry
                .breaker(name, settings.clone())
                .expect("cluster names are unique, so no settings conflict");
            listen(&breaker);
            let max_ejected = cluster.max_ejected();
            let hosts = (config.breakers_enabled && max_ejected > 0).then(|| {
                // Every host's settings, worked out once (`GatewayConfig::host_settings`).
                let per_host: HashMap<String, cutout::Settings> = cluster
                    .upstreams
                    .iter()
                    .filter_map(|u| u.authority())
                    .map(|a| {
                        let id = crate::hosts::host_id(name, a.as_str());
                        let own = config.host_settings(name, &id);
                        (id, own)
                    })
                    .collect();
                let hosts = Hosts::new(
                    name,
                    &cluster.upstreams,
                    max_ejected,
                    cluster.panic_threshold,
                    move |id| {
                        per_host
                            .get(id)
                            .cloned()
                            .unwrap_or_else(|| settings.clone())
                    },
                    clock.clone(),
                );
                hosts.breakers().iter().for_each(listen);
                Arc::new(hosts)
            });
            let client = upstream_client(
                &cluster.tls,
                cluster.protocol,
                cluster.attempt_timeout,
                config.limits.pool_idle_timeout,
            );
            clusters.insert(
                name.clone(),
                Cluster::new(ClusterParts {
                    name: name.clone(),
                    upstreams: cluster.upstreams.clone(),
                    breaker,
                    hosts,
                    attempt_timeout: cluster.attempt_timeout,
                    max_detached_attempts: cluster.max_detached_attempts,
                    max_detached_body: config.max_detached_body,
                    client,
                    classifier: cluster.classifier(),
                    guarded: config.breakers_enabled,
                    retry: RetrySettings {
                        enabled: cluster.retry,
                        budget_percent: cluster.retry_budget_percent,
                        min_concurrent: cluster.min_concurrent_retries,
                    },
                    health_check: cluster.health_check.clone(),
                }),
            );
        }
        let rate = config.rate_limit.map(SourceRate::new);
        Arc::new(Gateway {
            config,
            rate,
            registry,
            clusters,
            transitions,
            reasons,
            actions: Mutex::new(VecDeque::with_capacity(ACTIONS_KEPT)),
            metrics,
            readiness: AtomicU8::new(0),
            listening: OnceLock::new(),
        })
    }

    /// Where the gateway is in its life (see [`Readiness`]).
    pub fn readiness(&self) -> Readiness {
        // Relaxed: a status word for /readyz; it publishes no other data.
        match self.readiness.load(Ordering::Relaxed) {
            0 => Readiness::Starting,
            1 => Readiness::Ready,
            _ => Readiness::Draining,
        }
    }

    /// The bound proxy and admin addresses, once [`crate::server::run`] bound them.
    pub fn listening(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.listening.get().copied()
    }

    /// Marks both listeners bound at `proxy` and `admin` ([`crate::server::run`] calls it).
    pub fn set_listening(&self, proxy: SocketAddr, admin: SocketAddr) {
        let _ = self.listening.set((proxy, admin));
        let _ = self
            .readiness
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Marks the gateway draining (shutdown has begun); it stays so.
    pub fn set_draining(&self) {
        self.readiness.store(2, Ordering::Relaxed);
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// Each source's request rate (`rate-limit-per-source`), if one is set.
    pub fn rate(&self) -> Option<&SourceRate> {
        self.rate.as_ref()
    }

    /// The breaker registry (one breaker per cluster, id = cluster name).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The clusters by name.
    pub fn clusters(&self) -> &BTreeMap<String, Cluster> {
        &self.clusters
    }

    /// The route for `path` and its cluster.
    pub fn route(&self, path: &str) -> Option<(&Route, &Cluster)> {
        let route = self.config.route(path)?;
        Some((route, self.clusters.get(&route.cluster)?))
    }

    /// The most recent transitions, oldest first.
    pub fn transitions(&self) -> Vec<TransitionRecord> {
        lock(&self.transitions).iter().cloned().collect()
    }

    /// The reason breaker `id` last opened for (`failure_ratio`, `slow_calls`, …), if it
    /// opened since the gateway started.
    pub fn open_reason(&self, id: &str) -> Option<&'static str> {
        lock(&self.reasons).get(id).copied()
    }

    /// The most recent manual actions, oldest first.
    pub fn actions(&self) -> Vec<ActionRecord> {
        lock(&self.actions).iter().cloned().collect()
    }

    /// Remembers a manual action (and logs it).
    pub fn record_action(&self, breaker: &str, action: &'static str, detail: String, by: String) {
        tracing::info!(breaker, action, detail = %detail, by = %by, "manual action");
        let mut actions = lock(&self.actions);
        if actions.len() == ACTIONS_KEPT {
            actions.pop_front();
        }
        actions.push_back(ActionRecord {
            at_unix_ms: now_unix_ms(),
            breaker: breaker.to_owned(),
            action,
            detail,
            by,
        });
    }

    /// The breaker named `id`: a cluster's, or a host's (`<cluster>/<host>:<port>`), with the
    /// cluster it belongs to.
    pub fn find_breaker(&self, id: &str) -> Option<(&Cluster, Breaker)> {
        if let Some(cluster) = self.clusters.get(id) {
            return Some((cluster, cluster.breaker().clone()));
        }
        let (name, _) = id.split_once('/')?;
        let cluster = self.clusters.get(name)?;
        let (_, breaker) = cluster.hosts()?.find(id)?;
        Some((cluster, breaker.clone()))
    }

    /// Every breaker: each cluster's, then its hosts'.
    pub fn breakers(&self) -> Vec<Breaker> {
        self.clusters
            .values()
            .flat_map(|c| {
                std::iter::once(c.breaker().clone()).chain(
                    c.hosts()
                        .into_iter()
                        .flat_map(|h| h.breakers().iter().cloned()),
                )
            })
            .collect()
    }

    /// The Prometheus handle (`None` if another recorder was installed in this process).
    pub fn metrics(&self) -> Option<&PrometheusHandle> {
        self.metrics.as_ref()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn record(
    log: &Mutex<VecDeque<TransitionRecord>>,
    reasons: &Mutex<HashMap<String, &'static str>>,
    event: &Event,
) {
    let t = &event.transition;
    let reason = match t {
        Transition::Opened { reason, .. } => {
            lock(reasons).insert(event.breaker.as_str().to_owned(), reason.as_str());
            Some(reason.as_str())
        }
        Transition::BreakEnded { reason, .. } => Some(reason.as_str()),
        // A host breaker held closed by its open cap: closed -> closed, with the rule.
        Transition::ThresholdExceeded { reason } => Some(reason.as_str()),
        _ => None,
    };
    let at_unix_ms = now_unix_ms();
    let mut log = lock(log);
    if log.len() == TRANSITIONS_KEPT {
        log.pop_front();
    }
    log.push_back(TransitionRecord {
        at_unix_ms,
        breaker: event.breaker.as_str().to_owned(),
        from: t.from().as_str(),
        to: t.to().as_str(),
        reason,
    });
}
