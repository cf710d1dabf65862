//! [`Gateway`]: the shared state of both listeners: clusters, their breakers and hosts' breakers, recent transitions and manual actions.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cutout::clock::{Clock, SharedClock, SystemClock};
use cutout::{Breaker, Event, Registry, Transition};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cluster::Cluster;
use crate::config::GatewayConfig;
use crate::error::ConfigError;
use crate::fleet::{FleetConfig, GatewayFleet};
use crate::reload::ReloadRecord;
use crate::routing::{Parts, Routing};

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

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_unix_ms() -> u64 {
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

/// The gateway: the routing table ([`Routing`]: configuration, clusters, each with a breaker
/// in one [`Registry`], and its hosts' breakers), the log of recent transitions and of manual
/// actions, and the last reload. Shared by the proxy and admin listeners behind an `Arc`; the
/// routing table is swapped whole on a reload ([`crate::reload`]), and each request holds the
/// table it was routed on.
#[derive(Debug)]
pub struct Gateway {
    routing: RwLock<Arc<Routing>>,
    registry: Registry,
    clock: SharedClock,
    transitions: Arc<Mutex<VecDeque<TransitionRecord>>>,
    /// The reason each breaker last opened for, by id.
    reasons: Arc<Mutex<HashMap<String, &'static str>>>,
    actions: Mutex<VecDeque<ActionRecord>>,
    metrics: Option<PrometheusHandle>,
    readiness: AtomicU8,
    listening: OnceLock<(SocketAddr, SocketAddr)>,
    /// The configuration file, when the gateway was started from one (what a reload reads).
    source: OnceLock<PathBuf>,
    /// The last reload's outcome; its lock also keeps two reloads from running at once.
    reloads: Mutex<Option<ReloadRecord>>,
    /// The running health checks, by cluster.
    checks: Mutex<Checks>,
    /// The top-level sections of the file in force, as written (what a reload compares the
    /// sections it does not know part by part with).
    sections: Mutex<BTreeMap<String, toml::Value>>,
    /// `[fleet]`: the fleet watching the cluster breakers (or why it could not start), and
    /// the table it was started from; a reload that changes the table starts it anew.
    fleet: Mutex<Option<(FleetConfig, Result<GatewayFleet, ConfigError>)>>,
}

/// The health checks of a served gateway: the signal that stops them, and each cluster's
/// tasks (aborted when its cluster is rebuilt or removed).
#[derive(Debug, Default)]
struct Checks {
    stop: Option<watch::Receiver<bool>>,
    tasks: HashMap<String, JoinSet<()>>,
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
        let routing = {
            let listen = listener(&transitions, &reasons);
            let parts = Parts {
                registry: &registry,
                clock: &clock,
                listen: &listen,
            };
            Routing::build(config, None, &parts, &mut Vec::new(), &mut Vec::new())
        };
        let fleet = routing.config().fleet.clone().map(|config| {
            let started = start_fleet(&config, &routing);
            (config, started)
        });
        Arc::new(Gateway {
            routing: RwLock::new(Arc::new(routing)),
            fleet: Mutex::new(fleet),
            registry,
            clock,
            transitions,
            reasons,
            actions: Mutex::new(VecDeque::with_capacity(ACTIONS_KEPT)),
            metrics,
            readiness: AtomicU8::new(0),
            listening: OnceLock::new(),
            source: OnceLock::new(),
            reloads: Mutex::new(None),
            checks: Mutex::new(Checks::default()),
            sections: Mutex::new(BTreeMap::new()),
        })
    }

    /// The routing table in force: what a request is routed on, held to its end.
    pub fn routing(&self) -> Arc<Routing> {
        Arc::clone(&read(&self.routing))
    }

    /// Builds a routing table for `config` from the one in force (reusing what equal settings
    /// built, see [`crate::routing`]), installs it, and restarts the health checks of the
    /// clusters it rebuilt or added. Returns the parts rebuilt and the clusters added and
    /// removed. Callers serialise through [`Gateway::reload_lock`].
    pub(crate) fn install(&self, config: GatewayConfig) -> Installed {
        let old = self.routing();
        let mut installed = Installed::default();
        let listen = listener(&self.transitions, &self.reasons);
        let parts = Parts {
            registry: &self.registry,
            clock: &self.clock,
            listen: &listen,
        };
        let routing = Arc::new(Routing::build(
            config,
            Some(&old),
            &parts,
            &mut installed.rebuilt,
            &mut installed.added,
        ));
        for name in old.clusters().keys() {
            if !routing.clusters().contains_key(name) {
                installed.removed.push(format!("cluster {name}"));
                let _ = self.registry.remove(name);
            }
        }
        *write(&self.routing) = Arc::clone(&routing);
        self.refleet(&old, &routing);
        let mut checks = lock(&self.checks);
        if let Some(stop) = checks.stop.clone() {
            for (name, cluster) in old.clusters() {
                let kept = routing
                    .clusters()
                    .get(name)
                    .is_some_and(|c| Arc::ptr_eq(c, cluster));
                if !kept {
                    checks.tasks.remove(name);
                }
            }
            for (name, cluster) in routing.clusters() {
                if !checks.tasks.contains_key(name) {
                    let tasks = crate::health::start_cluster(
                        name,
                        cluster,
                        routing.config().clusters.get(name),
                        &stop,
                    );
                    if !tasks.is_empty() {
                        checks.tasks.insert(name.clone(), tasks);
                    }
                }
            }
        }
        installed
    }

    /// Keeps `[fleet]` watching the cluster breakers of `routing` after a reload from `old`: a
    /// changed (or added, or removed) `[fleet]` table starts the fleet anew on every cluster
    /// breaker (or stops it); an unchanged one keeps its connection and its view of the
    /// other replicas, stops watching the clusters the file removed, and watches again each
    /// cluster that was rebuilt (its breaker may be a new one) or added.
    fn refleet(&self, old: &Routing, routing: &Routing) {
        let mut fleet = lock(&self.fleet);
        let wanted = routing.config().fleet.as_ref();
        if fleet.as_ref().map(|(config, _)| config) != wanted {
            // The old fleet's task stops when it is dropped, before the new one starts.
            *fleet = None;
            *fleet = wanted.map(|config| (config.clone(), start_fleet(config, routing)));
            return;
        }
        let Some((_, Ok(running))) = fleet.as_ref() else {
            return;
        };
        for (name, cluster) in old.clusters() {
            let kept = routing
                .clusters()
                .get(name)
                .is_some_and(|c| Arc::ptr_eq(c, cluster));
            if !kept {
                running.fleet().unwatch(name);
            }
        }
        for (name, cluster) in routing.clusters() {
            let kept = old
                .clusters()
                .get(name)
                .is_some_and(|c| Arc::ptr_eq(c, cluster));
            if !kept && let Err(error) = running.fleet().watch(cluster.breaker()) {
                tracing::error!(%error, cluster = %name, "fleet signals off for this cluster");
            }
        }
    }

    /// The lock a reload holds from reading the file to installing it, and the last reload's
    /// record under it.
    pub(crate) fn reload_lock(&self) -> MutexGuard<'_, Option<ReloadRecord>> {
        lock(&self.reloads)
    }

    /// The last reload's outcome (`None` before the first).
    pub fn last_reload(&self) -> Option<ReloadRecord> {
        lock(&self.reloads).clone()
    }

    /// Starts the health checks of every cluster, each stopping when `stop` says `true` (or
    /// its sender is gone), and those of clusters a reload rebuilds or adds from then on;
    /// returns how many hosts are checked. [`Gateway::stop_checks`] aborts them.
    pub(crate) fn start_checks(&self, stop: &watch::Receiver<bool>) -> usize {
        let routing = self.routing();
        let mut checks = lock(&self.checks);
        checks.stop = Some(stop.clone());
        checks.tasks.clear();
        for (name, cluster) in routing.clusters() {
            let tasks = crate::health::start_cluster(
                name,
                cluster,
                routing.config().clusters.get(name),
                stop,
            );
            if !tasks.is_empty() {
                checks.tasks.insert(name.clone(), tasks);
            }
        }
        checks.tasks.values().map(JoinSet::len).sum()
    }

    /// Aborts every health check, and starts none on later reloads.
    pub(crate) fn stop_checks(&self) {
        let mut checks = lock(&self.checks);
        checks.stop = None;
        checks.tasks.clear();
    }

    /// The configuration file a reload reads, when the gateway was started from one.
    pub fn source(&self) -> Option<&Path> {
        self.source.get().map(PathBuf::as_path)
    }

    /// Names the configuration file the gateway was started from (once; later calls are
    /// ignored), so that SIGHUP and `POST /reload` can read it again.
    pub fn set_source(&self, path: impl Into<PathBuf>) {
        let path = path.into();
        if let Ok(text) = std::fs::read_to_string(&path) {
            self.set_sections(crate::reload::sections(&text));
        }
        let _ = self.source.set(path);
    }

    /// The top-level sections of the file in force, as written.
    pub(crate) fn sections(&self) -> BTreeMap<String, toml::Value> {
        lock(&self.sections).clone()
    }

    /// Remembers the top-level sections of the file now in force.
    pub(crate) fn set_sections(&self, sections: BTreeMap<String, toml::Value>) {
        *lock(&self.sections) = sections;
    }

    /// The fleet's health for `/healthz` and the status page ([`GatewayFleet::health_json`]),
    /// `status` `off` with the error when it could not start; `None` without `[fleet]`.
    pub fn fleet_json(&self) -> Option<serde_json::Value> {
        lock(&self.fleet).as_ref().map(|(_, fleet)| match fleet {
            Ok(fleet) => fleet.health_json(),
            Err(error) => serde_json::json!({
                "status": "off",
                "connected": false,
                "error": { "code": error.code(), "message": error.to_string() },
            }),
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

    /// The configuration in force (the routing table's).
    pub fn config(&self) -> Arc<GatewayConfig> {
        Arc::clone(read(&self.routing).config())
    }

    /// Each source's request rate (`rate-limit-per-source`) in force, if one is set.
    pub fn rate(&self) -> Option<Arc<crate::rate::SourceRate>> {
        read(&self.routing).rate_handle()
    }

    /// The breaker registry (one breaker per cluster, id = cluster name).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The clusters in force by name (the routing table's; see [`Gateway::routing`]).
    pub fn clusters(&self) -> Clusters {
        Clusters(self.routing())
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
    pub fn find_breaker(&self, id: &str) -> Option<(Arc<Cluster>, Breaker)> {
        let routing = self.routing();
        if let Some(cluster) = routing.clusters().get(id) {
            return Some((Arc::clone(cluster), cluster.breaker().clone()));
        }
        let (name, _) = id.split_once('/')?;
        let cluster = routing.clusters().get(name)?;
        let (_, breaker) = cluster.hosts()?.find(id)?;
        Some((Arc::clone(cluster), breaker.clone()))
    }

    /// Every breaker: each cluster's, then its hosts'.
    pub fn breakers(&self) -> Vec<Breaker> {
        self.routing()
            .clusters()
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

/// The clusters of one routing table, by name (derefs to the map).
#[derive(Debug, Clone)]
pub struct Clusters(Arc<Routing>);

impl std::ops::Deref for Clusters {
    type Target = BTreeMap<String, Arc<Cluster>>;

    fn deref(&self) -> &Self::Target {
        self.0.clusters()
    }
}

/// What [`Gateway::install`] did: the parts rebuilt, the clusters added and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Installed {
    pub(crate) rebuilt: Vec<String>,
    pub(crate) added: Vec<String>,
    pub(crate) removed: Vec<String>,
}

/// A subscription for new breakers: each transition goes to the log (and an opening's
/// reason to `reasons`).
/// Starts `[fleet]` on every cluster breaker of `routing`, logging why when it cannot (the
/// breakers then judge their own calls, and `/healthz` says `off`).
fn start_fleet(config: &FleetConfig, routing: &Routing) -> Result<GatewayFleet, ConfigError> {
    let started = GatewayFleet::start(config, routing.clusters().values().map(|c| c.breaker()));
    if let Err(error) = &started {
        tracing::error!(%error, "fleet signals off: the breakers judge their own calls");
    }
    started
}

fn listener(
    log: &Arc<Mutex<VecDeque<TransitionRecord>>>,
    reasons: &Arc<Mutex<HashMap<String, &'static str>>>,
) -> impl Fn(&Breaker) + use<> {
    let (log, reasons) = (Arc::clone(log), Arc::clone(reasons));
    move |breaker: &Breaker| {
        let log = Arc::clone(&log);
        let reasons = Arc::clone(&reasons);
        breaker.subscribe(move |event| record(&log, &reasons, event));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|poisoned| poisoned.into_inner())
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
