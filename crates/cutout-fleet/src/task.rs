//! The background task: snapshot, publish and read, update the views, trip on the fleet's.
//!
//! # A tick
//! Every [interval](crate::FleetBuilder::interval), whether or not Redis answers, the task
//! snapshots each watched breaker and notes its state in the breaker's [`TripGrace`]; then,
//! if it has a link (or the reconnect backoff has passed and a connect succeeds), it runs
//! one round: every breaker's publish-and-read, pipelined.
//!
//! The grace is observed on every tick, not only on the ticks that reach Redis, because it
//! measures time since a trip: a trip is dated by the first tick that sees the breaker open
//! after a closed one, and its window stays published for one staleness bound after that.
//! Observed only on rounds, a breaker that tripped while Redis was down would be "seen
//! tripping" by the first round after Redis came back, and would publish a window seconds
//! old as fresh, which opened healthy, idle pods on the fleet's rule. Observed on every
//! tick, a trip seen while disconnected expires on time: if Redis returns within the grace,
//! the rest of it is published; after it, only the open flag. What this gives up: a trip's
//! evidence older than the staleness bound never reaches the fleet, even if no pod saw it
//! (the same bound every other report is judged by).
//!
//! # Failures and failovers
//! A failed connect or round makes the health degraded and invalidates the views it leaves
//! without a fresh round. Whether the link is kept is the error's
//! ([`FleetError::drops_connection`]): a plain server error (`OOM`, `NOPERM`) keeps it
//! and the next tick tries again on it; everything that says this connection may not reach
//! a writable primary again drops it: an I/O error, a reset or closed connection, a timeout,
//! a reply not understood, refused credentials, and `READONLY`, `MASTERDOWN` or `LOADING`.
//! The last three are what a failover behind one address looks like: a Kubernetes Service,
//! a DNS name, a TCP load balancer or a Sentinel-managed address sends *new* connections to
//! the new primary, while the old connection stays on the demoted one, which answers every
//! write `READONLY` (or, as a replica that lost its primary, `MASTERDOWN`). Kept, the link
//! would fail every round until the pod restarted. Dropped, the task reconnects after the
//! jittered backoff (half an interval to one, for the first failure), and the client
//! resolves the URL's host again on every connect (through `redis+sentinel://`, asks the
//! sentinels again), so the new connection goes wherever the address points now: the pod
//! reports to the new primary within two rounds and its backoff. Nothing of this is on a
//! call's path. What it cannot see: a primary that still
//! takes writes but is no longer the one the other pods reach (a split brain behind the
//! address) looks healthy from here; the reports then split between the two until the old
//! one is demoted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{FleetError, Kind};
use crate::fleet::{Shared, Watched};
use crate::grace::TripGrace;
use crate::health::Status;
use crate::pacing::{Backoff, WarnPace};
use crate::report::Local;
use crate::store::{KeyReply, Link, Publish, Target};
use crate::view::{Ages, aggregate, ranked_in};

/// The throttle key of connection warnings (breaker keys all contain the prefix's `:`).
const LINK: &str = "link";

/// Warnings about one key or about the link: at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the task keeps between ticks.
struct Task {
    shared: Arc<Shared>,
    /// Where to connect: one address, or the primary the sentinels name.
    target: Target,
    link: Option<Link>,
    backoff: Backoff,
    next_attempt: Instant,
    rng: fastrand::Rng,
    warned: WarnPace,
    /// What the task remembers per watched key.
    keys: HashMap<String, KeyState>,
    /// When the task started: the origin of its milliseconds.
    started: Instant,
}

#[derive(Debug, Default)]
struct KeyState {
    /// Stale reports to delete in the next round, if unchanged.
    forget: Vec<(Vec<u8>, Vec<u8>)>,
    /// A trip from closed lately (on the task's milliseconds since it started).
    grace: TripGrace,
}

pub(crate) async fn run(shared: Arc<Shared>, target: Target) {
    let interval = shared.config.interval;
    let mut task = Task {
        backoff: Backoff::new(interval, shared.config.max_backoff),
        shared,
        target,
        link: None,
        next_attempt: Instant::now(),
        rng: fastrand::Rng::new(),
        warned: WarnPace::new(WARN_EVERY),
        keys: HashMap::new(),
        started: Instant::now(),
    };
    let mut ticker = tokio::time::interval(interval);
    // A tick that could not run on time (a slow round, a busy runtime) runs late once; the
    // ticks do not bunch up to catch up.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        task.tick().await;
    }
}

impl Task {
    async fn tick(&mut self) {
        let watched = self.shared.watched();
        if self.link.is_none() {
            let connected = Instant::now() >= self.next_attempt
                && match crate::store::connect(&mut self.target, &self.shared.config).await {
                    Ok(link) => {
                        self.link = Some(link);
                        true
                    }
                    Err(error) => {
                        self.failed(error, &watched);
                        false
                    }
                };
            if !connected {
                // No round this tick, but the trip grace keeps time: a breaker that trips
                // while Redis is away is seen tripping now, so its grace has run out by the
                // time Redis answers again, instead of starting then and publishing an old
                // window as fresh.
                self.observe(&watched);
                return;
            }
        }
        let locals = self.observe(&watched);
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let config = &self.shared.config;
        if watched.is_empty() {
            match link.ping(config.timeout).await {
                Ok(()) => self.succeeded(),
                Err(error) => self.failed(error, &watched),
            }
            return;
        }
        let empty = Vec::new();
        let publishes: Vec<Publish<'_>> = watched
            .iter()
            .zip(&locals)
            .map(|(w, local)| Publish {
                key: &w.key,
                value: local.encode(),
                forget: self.keys.get(&w.key).map_or(&empty, |key| &key.forget),
            })
            .collect();
        let ttl_ms = millis(config.retention);
        let replies = link
            .exchange(&config.pod, ttl_ms, &publishes, config.timeout)
            .await;
        drop(publishes);
        match replies {
            Ok(replies) => {
                let mut server_error = None;
                for ((w, local), reply) in watched.iter().zip(&locals).zip(replies) {
                    if let Some(error) = self.apply(w, local, reply) {
                        server_error.get_or_insert(error);
                    }
                }
                // Keep the warnings' memory bounded by what is watched now.
                let keys: HashSet<&str> = watched.iter().map(|w| w.key.as_str()).collect();
                self.warned.retain(|key| key == LINK || keys.contains(&key));
                match server_error {
                    None => self.succeeded(),
                    Some(error) => self.failed(error, &[]),
                }
            }
            Err(error) => self.failed(error, &watched),
        }
    }

    /// Snapshots every watched breaker and notes its state in its trip grace, on every tick
    /// whether or not a round follows; returns what each would publish now. `snapshot`
    /// changes nothing and is the only read of a breaker. Taken right before the round, so
    /// that what is published is what the breakers hold now.
    fn observe(&mut self, watched: &[Arc<Watched>]) -> Vec<Local> {
        let now_ms = millis(self.started.elapsed());
        let grace_ms = millis(self.shared.config.staleness);
        // Keep the per-key state bounded by what is watched now.
        let keys: HashSet<&str> = watched.iter().map(|w| w.key.as_str()).collect();
        self.keys.retain(|key, _| keys.contains(&key.as_str()));
        watched
            .iter()
            .map(|w| {
                let snapshot = w.breaker.snapshot();
                let key = self.keys.entry(w.key.clone()).or_default();
                let tripped_lately = key.grace.observe(snapshot.state, now_ms, grace_ms);
                Local::of(&snapshot, tripped_lately)
            })
            .collect()
    }

    /// One breaker's reply: update its view, trip it if the fleet says so. Returns the
    /// server error that failed its part of the round, if any.
    fn apply(&mut self, w: &Watched, local: &Local, reply: KeyReply) -> Option<FleetError> {
        let config = &self.shared.config;
        let pod = config.pod.as_str();
        let (now_ms, fields) = match reply {
            KeyReply::Hash { now_ms, fields } => (now_ms, fields),
            KeyReply::Foreign(kind) => {
                w.slot.invalidate();
                if self.warned.allow(&w.key, Instant::now()) {
                    tracing::warn!(
                        pod,
                        key = %w.key,
                        breaker = %w.breaker.id(),
                        kind = %kind,
                        "fleet signals: the key holds a {kind}, not a fleet hash; left as it \
                         is, and this breaker decides on its own calls"
                    );
                }
                return None;
            }
            KeyReply::Malformed => {
                w.slot.invalidate();
                if self.warned.allow(&w.key, Instant::now()) {
                    tracing::warn!(
                        pod,
                        key = %w.key,
                        "fleet signals: unexpected reply for the key; this breaker decides on \
                         its own calls"
                    );
                }
                return None;
            }
            KeyReply::Error(error) => {
                w.slot.invalidate();
                return Some(error);
            }
        };
        let ages = Ages {
            staleness_ms: millis(config.staleness),
            retention_ms: millis(config.retention),
        };
        let mut aggregate = aggregate(pod, local, now_ms, &fields, ages);
        if !aggregate.foreign.is_empty() && self.warned.allow(&w.key, Instant::now()) {
            tracing::warn!(
                pod,
                key = %w.key,
                fields = ?aggregate.foreign,
                "fleet signals: fields that are not `calls failures slow open unix_ms` \
                 reports; ignored"
            );
        }
        if let Some(key) = self.keys.get_mut(&w.key) {
            key.forget = std::mem::take(&mut aggregate.forget);
        }
        w.slot.store(&aggregate, config.staleness);

        if !local.closed {
            return None;
        }
        let view = &aggregate.view;
        let trigger = w.rule.fires(view.calls, view.failures, view.slow)?;
        if let Some(cap) = w.slot.cap() {
            let free = cap.saturating_sub(aggregate.open_others);
            if !ranked_in(w.breaker.id(), pod, &aggregate.closed, free) {
                return None;
            }
        }
        if w.breaker.trip_on_signal() {
            #[cfg(feature = "metrics")]
            w.trips.increment(1);
            tracing::info!(
                pod,
                breaker = %w.breaker.id(),
                rule = trigger.as_str(),
                pods = view.pods,
                calls = view.calls,
                failures = view.failures,
                slow = view.slow,
                "fleet signals: opened the breaker on the fleet's window"
            );
        }
        None
    }

    fn succeeded(&mut self) {
        self.backoff.reset();
        let (before, since) = self.shared.round_ok();
        let pod = self.shared.config.pod.as_str();
        let redis = self.shared.config.addr.as_str();
        match before {
            Status::Connected => {}
            Status::Connecting => tracing::info!(pod, redis, "fleet signals: connected"),
            _ => {
                let down = since.elapsed().unwrap_or_default();
                tracing::info!(
                    pod,
                    redis,
                    "fleet signals: connected again after {:.1} s; fleet rules back in force",
                    down.as_secs_f64()
                );
            }
        }
    }

    /// A connect or a round failed: local decisions only until one succeeds. `invalidate`:
    /// the breakers whose views this failure leaves without a fresh round.
    fn failed(&mut self, error: FleetError, invalidate: &[Arc<Watched>]) {
        for w in invalidate {
            w.slot.invalidate();
        }
        if error.drops_connection() {
            self.link = None;
        }
        if self.link.is_none() {
            let wait = self.backoff.fail(&mut self.rng);
            self.next_attempt = Instant::now() + wait;
        }
        let changed = self
            .shared
            .round_failed(error.clone())
            .is_none_or(|before| before.kind() != error.kind());
        // The first failure of a kind at once; the same failure again at most once a minute.
        if changed || self.warned.allow(LINK, Instant::now()) {
            if changed {
                // Restart the minute from this warning.
                self.warned.retain(|key| key != LINK);
                self.warned.allow(LINK, Instant::now());
            }
            let pod = self.shared.config.pod.as_str();
            let redis = self.shared.config.addr.as_str();
            let hint = match error.kind() {
                Kind::Auth => "check the password in the URL; ",
                _ => "",
            };
            tracing::warn!(
                pod,
                redis,
                error = %error,
                "fleet signals degraded: {hint}breakers decide on their own calls until Redis \
                 answers again"
            );
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
