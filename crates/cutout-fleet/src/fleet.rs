//! [`Fleet`]: the handle, the breakers it watches, the views and the open gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use cutout::{Breaker, BreakerId};

use crate::builder::{Config, FleetBuilder};
use crate::error::{FleetError, Kind};
use crate::health::{Health, Status};
use crate::rule::{FleetRule, ResolvedRule};
use crate::view::{FleetView, Slot};

/// Breaker signals shared across a fleet of pods through Redis. A cheap handle: clones share
/// one background task; the task stops when the last clone is dropped.
///
/// The task (one per `Fleet`, for any number of breakers) publishes every
/// [interval](FleetBuilder::interval) each watched breaker's window counts for this pod, reads
/// back the fleet's, and opens a closed breaker whose fleet window reaches its
/// [`FleetRule`] (through [`Breaker::trip_on_signal`]). The breakers' calls never wait on
/// it: the task reads each breaker with [`Breaker::snapshot`] and registers nothing on it, so
/// a watched breaker's hot path is the one it had. Probes stay local: a breaker the fleet
/// opened half-opens after its own jittered break.
///
/// Redis is a hint, never a dependency: when it is down, slow or refuses the password, the
/// task logs a warning, [`Fleet::health`] says degraded (with the metric
/// `cutout_fleet_connected{pod}` at 0, feature `metrics`), and every breaker decides on its
/// own calls until a round succeeds again. Nothing reaches the breakers' callers.
///
/// The task runs on the runtime the fleet was built on, and stops with it. When the fleet
/// opens a breaker, that breaker's listeners run on the task (as they run on the thread of
/// whatever caused a transition): keep them quick, or the next round waits for them.
///
/// ```no_run
/// use cutout::{Breaker, Settings};
/// use cutout_fleet::Fleet;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let fleet = Fleet::builder("redis://127.0.0.1:6379").pod("web-1").build()?;
/// let payments = Breaker::builder("payments")
///     .settings(Settings::default())
///     // At most 3 pods of the fleet open at once, from the task's cached view.
///     .open_gate(fleet.open_gate("payments", 3))
///     .build();
/// fleet.watch(&payments)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

/// The task's handle lives here, so that it is aborted once, when the last `Fleet` goes.
struct Inner {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shared = &self.inner.shared;
        f.debug_struct("Fleet")
            .field("pod", &shared.config.pod)
            .field("redis", &shared.config.addr)
            .field("prefix", &shared.config.prefix)
            .field("status", &shared.health().status)
            .finish_non_exhaustive()
    }
}

/// One watched breaker, as the task sees it.
pub(crate) struct Watched {
    pub(crate) breaker: Breaker,
    pub(crate) key: String,
    /// The breaker's recovery key (fleet recovery).
    pub(crate) recovery_key: String,
    /// The least time between two release slots for this breaker (µs), from the fleet's
    /// budget and the probes one release of it may send.
    pub(crate) spacing_us: u64,
    /// Whether a close of this breaker can be told to be its probes' (see `recovery`).
    pub(crate) publishes: bool,
    pub(crate) rule: ResolvedRule,
    pub(crate) slot: Arc<Slot>,
    #[cfg(feature = "metrics")]
    pub(crate) trips: metrics::Counter,
    #[cfg(feature = "metrics")]
    pub(crate) releases: metrics::Counter,
}

/// What the handle and the task share.
pub(crate) struct Shared {
    pub(crate) config: Config,
    watched: Mutex<Vec<Arc<Watched>>>,
    /// One per breaker id that was watched or given a gate; never removed (a gate may
    /// outlive `unwatch`), so bounded by the ids the program names.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    health: Mutex<Health>,
    status: tokio::sync::watch::Sender<Status>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: crate::metrics::Handles,
}

/// Locks, taking the data of a poisoned lock as it is: nothing here is left half-written
/// by a panic (each critical section is a single assignment or a push).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(config: Config) -> Shared {
        #[cfg(feature = "metrics")]
        let metrics = crate::metrics::Handles::new(&config.pod);
        Shared {
            config,
            watched: Mutex::new(Vec::new()),
            slots: Mutex::new(HashMap::new()),
            health: Mutex::new(Health::new()),
            status: tokio::sync::watch::Sender::new(Status::Connecting),
            #[cfg(feature = "metrics")]
            metrics,
        }
    }

    pub(crate) fn watched(&self) -> Vec<Arc<Watched>> {
        lock(&self.watched).clone()
    }

    pub(crate) fn health(&self) -> Health {
        lock(&self.health).clone()
    }

    fn slot(&self, id: &str) -> Arc<Slot> {
        Arc::clone(lock(&self.slots).entry(id.to_owned()).or_default())
    }

    /// A round succeeded. Returns the status it replaced and since when that held.
    pub(crate) fn round_ok(&self) -> (Status, SystemTime) {
        // Metrics first, then health, then the waiters: whoever sees connected in one of
        // them sees it in those before.
        #[cfg(feature = "metrics")]
        self.metrics.connected.set(1.0);
        let mut health = lock(&self.health);
        let before = (health.status, health.since);
        health.rounds = health.rounds.saturating_add(1);
        if health.status != Status::Connected {
            health.status = Status::Connected;
            health.since = SystemTime::now();
        }
        drop(health);
        self.status.send_replace(Status::Connected);
        before
    }

    /// A round or a connect failed. Returns the error it replaced while degraded, if any.
    pub(crate) fn round_failed(&self, error: FleetError) -> Option<FleetError> {
        #[cfg(feature = "metrics")]
        {
            self.metrics.connected.set(0.0);
            self.metrics.failed_rounds.increment(1);
        }
        let now = SystemTime::now();
        let mut health = lock(&self.health);
        let before = (health.status == Status::Degraded)
            .then(|| health.last_error.clone())
            .flatten();
        health.failed_rounds = health.failed_rounds.saturating_add(1);
        if health.status != Status::Degraded {
            health.status = Status::Degraded;
            health.since = now;
        }
        health.last_error = Some(error);
        health.last_error_at = Some(now);
        drop(health);
        self.status.send_replace(Status::Degraded);
        before
    }
}

impl Fleet {
    /// A builder for a fleet on the Redis at `url` (`redis://[user:password@]host[:port][/db]`
    /// or `redis+unix:///path`).
    pub fn builder(url: impl Into<String>) -> FleetBuilder {
        FleetBuilder::new(url.into())
    }

    pub(crate) fn new(shared: Arc<Shared>, task: tokio::task::JoinHandle<()>) -> Fleet {
        Fleet {
            inner: Arc::new(Inner { shared, task }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// This pod's id.
    pub fn pod(&self) -> &str {
        &self.shared().config.pod
    }

    /// The Redis key of a breaker's ring: `{<prefix>:<breaker id>}`, with `%`, `{` and `}`
    /// percent-escaped in both and `:` in the prefix (`{cutout%3Afleet:payments}` for the
    /// default prefix), so that no two (prefix, id) pairs share a key and the whole name is
    /// the key's Redis Cluster hash tag.
    pub fn key(&self, breaker_id: &str) -> String {
        crate::store::key(&self.shared().config.prefix, breaker_id)
    }

    /// The Redis key of a breaker's fleet recovery (its latest recovery and next release
    /// slot): its ring's [key](Fleet::key) followed by `:recovery`, so in the same Redis
    /// Cluster slot (`{cutout%3Afleet:payments}:recovery` for the default prefix).
    pub fn recovery_key(&self, breaker_id: &str) -> String {
        crate::recovery::key(&self.key(breaker_id))
    }

    /// The configuration the task runs with.
    pub(crate) fn config(&self) -> &Config {
        &self.shared().config
    }

    /// Watches `breaker` with the [`FleetRule`] taken from its settings. See
    /// [`Fleet::watch_with`].
    pub fn watch(&self, breaker: &Breaker) -> Result<(), FleetError> {
        self.watch_with(breaker, FleetRule::new())
    }

    /// Watches `breaker`: from the next tick on, the task publishes its window counts for
    /// this pod and opens it when the fleet's window reaches `rule`. The fleet keeps a clone
    /// of the handle until [`Fleet::unwatch`]; it registers nothing on the breaker.
    ///
    /// Every pod watching a breaker of the same id should give it the same settings: the
    /// fleet's window is the sum of the pods' trip windows.
    ///
    /// Errors: the rule is out of range ([`FleetError::is_invalid`]), or a breaker of this id
    /// is already watched ([`FleetError::is_already_watched`]).
    pub fn watch_with(&self, breaker: &Breaker, rule: FleetRule) -> Result<(), FleetError> {
        let rule = rule.resolve(breaker.settings())?;
        let id = breaker.id().as_str();
        let mut watched = lock(&self.shared().watched);
        if watched.iter().any(|w| w.breaker.id().as_str() == id) {
            return Err(FleetError::new(
                Kind::AlreadyWatched,
                format!("breaker {id:?} is already watched by pod {:?}", self.pod()),
            ));
        }
        let key = self.key(id);
        let budget = self
            .shared()
            .config
            .recovery_budget
            .unwrap_or(crate::builder::RECOVERY_BUDGET);
        watched.push(Arc::new(Watched {
            breaker: breaker.clone(),
            recovery_key: crate::recovery::key(&key),
            key,
            spacing_us: crate::recovery::spacing_us(
                budget,
                crate::recovery::probes_per_release(breaker.settings()),
            ),
            publishes: crate::recovery::publishes(breaker.settings()),
            rule,
            slot: self.shared().slot(id),
            #[cfg(feature = "metrics")]
            trips: crate::metrics::trips(self.pod(), id),
            #[cfg(feature = "metrics")]
            releases: crate::metrics::releases(self.pod(), id),
        }));
        Ok(())
    }

    /// Stops watching the breaker of this id: the task no longer publishes or reads it (its
    /// report goes stale for the other pods within the staleness bound) and drops its clone
    /// of the handle. Returns whether it was watched.
    pub fn unwatch(&self, breaker_id: &str) -> bool {
        let mut watched = lock(&self.shared().watched);
        let before = watched.len();
        watched.retain(|w| w.breaker.id().as_str() != breaker_id);
        let removed = watched.len() != before;
        drop(watched);
        if removed {
            self.shared().slot(breaker_id).invalidate();
        }
        removed
    }

    /// The ids of the watched breakers, in the order they were watched.
    pub fn watched(&self) -> Vec<BreakerId> {
        lock(&self.shared().watched)
            .iter()
            .map(|w| w.breaker.id().clone())
            .collect()
    }

    /// The rule in force for a watched breaker.
    pub fn rule(&self, breaker_id: &str) -> Option<ResolvedRule> {
        lock(&self.shared().watched)
            .iter()
            .find(|w| w.breaker.id().as_str() == breaker_id)
            .map(|w| w.rule)
    }

    /// The link's health: connected, or degraded with the last error and since when. Takes a
    /// short lock, never waits on Redis.
    pub fn health(&self) -> Health {
        self.shared().health()
    }

    /// Waits until a round has succeeded, at most `timeout`. Returns whether it has.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let mut status = self.shared().status.subscribe();
        let connected = status.wait_for(|status| *status == Status::Connected);
        matches!(tokio::time::timeout(timeout, connected).await, Ok(Ok(_)))
    }

    /// The fleet's counts for a watched breaker as the last successful round read them;
    /// `None` before the first round, once no longer fresh (Redis down), and while the
    /// breaker's key holds something else than a fleet ring.
    pub fn view(&self, breaker_id: &str) -> Option<FleetView> {
        lock(&self.shared().slots)
            .get(breaker_id)
            .and_then(|slot| slot.view())
    }

    /// A gate for [`BreakerBuilder::open_gate`](cutout::BreakerBuilder::open_gate): a trip
    /// from closed passes while fewer than `max_open_pods` *other* pods report the breaker
    /// `breaker_id` open (open, half-open, recovering or isolated) in the task's last view.
    /// `max_open_pods` of 0 is taken as 1.
    ///
    /// The gate runs under the breaker's lock: it reads two atomics and the clock, never
    /// Redis. Without a fresh view (before the first round, Redis down or slow, the breaker
    /// not watched) it lets every trip pass: a breaker that cannot open when its dependency
    /// fails is worse than a cap exceeded.
    ///
    /// The cap is approximate for a pod's own trips: the view is up to one interval old, so
    /// pods that trip on their own within the same interval can all pass. The fleet trip
    /// itself, where the whole fleet sees the outage at once, is exact: a closed pod whose
    /// fleet rule fires first claims a slot in Redis (atomically, in the ring that counts
    /// the open pods), and opens only if it got one, so that at most `max_open_pods` pods
    /// hold a slot however many see the outage in the same round; the others stay closed and
    /// keep their local rules. A breaker that cannot open (disabled, or not closed) never
    /// claims one. Make one gate per breaker id (the last one made sets the cap the claims
    /// use).
    pub fn open_gate(
        &self,
        breaker_id: impl AsRef<str>,
        max_open_pods: u32,
    ) -> impl Fn(&BreakerId) -> bool + Send + Sync + 'static {
        let max_open_pods = max_open_pods.max(1);
        let slot = self.shared().slot(breaker_id.as_ref());
        slot.set_cap(max_open_pods);
        move |_id: &BreakerId| slot.allows_open(max_open_pods)
    }

    /// How many pods other than this one report the breaker open, in the last fresh view.
    pub fn open_elsewhere(&self, breaker_id: &str) -> Option<u32> {
        lock(&self.shared().slots)
            .get(breaker_id)
            .and_then(|slot| slot.open_others())
    }
}
