//! [`Gateway`]: the shared state of both listeners: clusters, their breakers, recent transitions.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cutout::clock::Clock;
use cutout::{Event, Registry, Transition};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::cluster::{Cluster, http_client};
use crate::config::{GatewayConfig, Route};

/// How many transitions the gateway remembers for the status page.
pub const TRANSITIONS_KEPT: usize = 50;

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
    /// Why it opened (`None` for other transitions).
    pub reason: Option<&'static str>,
}

/// The gateway: routes, clusters (each with a breaker in one [`Registry`]) and the log of
/// recent transitions. Shared by the proxy and admin listeners behind an `Arc`.
#[derive(Debug)]
pub struct Gateway {
    config: GatewayConfig,
    registry: Registry,
    clusters: BTreeMap<String, Cluster>,
    transitions: Arc<Mutex<VecDeque<TransitionRecord>>>,
    metrics: Option<PrometheusHandle>,
    readiness: AtomicU8,
    listening: OnceLock<(SocketAddr, SocketAddr)>,
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
        Gateway::build(config, Registry::new())
    }

    /// A gateway whose breakers read `clock` (a `ManualClock` in tests, so breaks can be waited
    /// out instantly).
    pub fn with_clock(config: GatewayConfig, clock: impl Clock) -> Arc<Gateway> {
        Gateway::build(config, Registry::with_clock(clock))
    }

    fn build(config: GatewayConfig, registry: Registry) -> Arc<Gateway> {
        // The recorder must exist before breakers register their counters.
        let metrics = crate::metrics::install();
        let transitions = Arc::new(Mutex::new(VecDeque::with_capacity(TRANSITIONS_KEPT)));
        let mut clusters = BTreeMap::new();
        for (name, cluster) in &config.clusters {
            let settings = config.breakers.settings_for(name).clone();
            let breaker = registry
                .breaker(name, settings)
                .expect("cluster names are unique, so no settings conflict");
            let log = Arc::clone(&transitions);
            breaker.subscribe(move |event| record(&log, event));
            let client = http_client(cluster.attempt_timeout, config.limits.pool_idle_timeout);
            clusters.insert(
                name.clone(),
                Cluster::new(
                    name,
                    cluster.upstreams.clone(),
                    breaker,
                    cluster.attempt_timeout,
                    client,
                    cluster.classifier(),
                    config.breakers_enabled,
                ),
            );
        }
        Arc::new(Gateway {
            config,
            registry,
            clusters,
            transitions,
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

    /// The Prometheus handle (`None` if another recorder was installed in this process).
    pub fn metrics(&self) -> Option<&PrometheusHandle> {
        self.metrics.as_ref()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn record(log: &Mutex<VecDeque<TransitionRecord>>, event: &Event) {
    let t = &event.transition;
    let reason = match t {
        Transition::Opened { reason, .. } => Some(reason.as_str()),
        _ => None,
    };
    let at_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64;
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
