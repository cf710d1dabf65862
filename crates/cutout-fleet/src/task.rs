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
use crate::recovery::{self, Recovery};
use crate::report::{Geometry, Ledger, Local, Request};
use crate::rule::Trigger;
use crate::store::{KeyReply, Link, Publish, Target};
use crate::view::{FleetView, absorb};

/// The throttle key of connection warnings (breaker keys all start with `{`).
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
    /// What this pod holds in the key's ring, as the last answered round wrote it; `None`
    /// once a round may have run unanswered (see the layout's consistency in `store`).
    ledger: Option<Ledger>,
    /// A trip from closed lately (on the task's milliseconds since it started).
    grace: TripGrace,
    /// Fleet recovery: a probe close to publish, the release slot granted.
    recovery: Recovery,
    /// The timer that ends the break at the slot granted.
    release: Option<tokio::task::AbortHandle>,
}

impl Drop for KeyState {
    fn drop(&mut self) {
        // An unwatched breaker, or a fleet gone: its slot is not used.
        if let Some(release) = self.release.take() {
            release.abort();
        }
    }
}

/// What one breaker's reply asks of the task.
struct Applied {
    /// The server error that failed its part of the round.
    error: Option<FleetError>,
    /// The fleet's window reached this threshold while the breaker was closed, and that
    /// window.
    fires: Option<(Trigger, FleetView)>,
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
                        // Another connection may reach another server (a failover): what
                        // this pod held in the old one's rings is not known to be in this
                        // one's.
                        self.forget_ledgers();
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
        let geometry = Geometry::new(millis(config.staleness), millis(config.retention));
        let requests: Vec<Request> = watched
            .iter()
            .zip(&locals)
            .map(|(w, (local, recovery))| Request {
                geometry,
                cap: 0,
                report: local.counts(),
                ledger: self.keys.get(&w.key).and_then(|key| key.ledger),
                closed: local.closed,
                recovery: *recovery,
            })
            .collect();
        let publishes: Vec<Publish<'_>> = watched
            .iter()
            .zip(&requests)
            .map(|(w, request)| Publish {
                key: &w.key,
                recovery_key: &w.recovery_key,
                request,
            })
            .collect();
        let sent = millis(self.started.elapsed());
        let replies = link.exchange(&publishes, config.timeout).await;
        let received = millis(self.started.elapsed());
        drop(publishes);
        match replies {
            Ok(replies) => {
                let mut server_error = None;
                let mut claims = Vec::new();
                for ((w, request), reply) in watched.iter().zip(&requests).zip(replies) {
                    let applied = self.apply(w, request, reply, (sent, received));
                    if let Some(error) = applied.error {
                        server_error.get_or_insert(error);
                    }
                    if let Some((trigger, view)) = applied.fires {
                        match w.slot.cap() {
                            // Under a cap, a slot first: claimed in the same tick.
                            Some(cap) => {
                                claims.push((Arc::clone(w), request.clone(), cap, trigger));
                            }
                            None => trip(&self.shared.config.pod, w, trigger, &view),
                        }
                    }
                }
                if !claims.is_empty()
                    && let Err(error) = self.claim(&claims).await
                {
                    server_error.get_or_insert(error);
                }
                // Keep the warnings' memory bounded by what is watched now.
                let keys: HashSet<&str> = watched.iter().map(|w| w.key.as_str()).collect();
                self.warned.retain(|key| key == LINK || keys.contains(&key));
                match server_error {
                    None => self.succeeded(),
                    Some(error) => self.failed(error, &[]),
                }
            }
            Err(error) => {
                // The calls may or may not have run.
                self.forget_ledgers();
                self.failed(error, &watched);
            }
        }
    }

    /// Snapshots every watched breaker and notes its state in its trip grace and its fleet
    /// recovery, on every tick whether or not a round follows; returns what each would
    /// publish now and ask of its recovery key. `snapshot` changes nothing and is the only
    /// read of a breaker, with, for an open one that holds no release slot,
    /// `break_may_end` and `break_remaining`. Taken right before the round, so that what is
    /// published is what the breakers hold now.
    fn observe(&mut self, watched: &[Arc<Watched>]) -> Vec<(Local, recovery::Args)> {
        let now_ms = millis(self.started.elapsed());
        let grace_ms = millis(self.shared.config.staleness);
        let recovering = self.shared.config.recovery_budget.is_some();
        // Keep the per-key state bounded by what is watched now.
        let keys: HashSet<&str> = watched.iter().map(|w| w.key.as_str()).collect();
        self.keys.retain(|key, _| keys.contains(&key.as_str()));
        watched
            .iter()
            .map(|w| {
                let snapshot = w.breaker.snapshot();
                let key = self.keys.entry(w.key.clone()).or_default();
                let tripped_lately = key.grace.observe(snapshot.state, now_ms, grace_ms);
                let mut args = recovery::Args::default();
                if recovering {
                    let held = key.recovery.next_release().is_some();
                    key.recovery.observe(&snapshot, w.publishes, now_ms);
                    if held
                        && key.recovery.next_release().is_none()
                        && let Some(release) = key.release.take()
                    {
                        // Dropped by a new state (see `Recovery::observe`): not used.
                        release.abort();
                    }
                    if key.recovery.take_due(now_ms).is_some() {
                        // Come: its timer ends the break (or has); the handle goes.
                        key.release = None;
                    }
                    args = key
                        .recovery
                        .args(&w.breaker, &snapshot, w.spacing_us, now_ms);
                }
                (Local::of(&snapshot, tripped_lately), args)
            })
            .collect()
    }

    /// The claims of an open slot of the breakers whose fleet rule fired under a cap, in one
    /// more round trip: those that got one open. A failed round leaves them closed (their
    /// local rules still apply) and forgets what they held.
    async fn claim(
        &mut self,
        claims: &[(Arc<Watched>, Request, u32, Trigger)],
    ) -> Result<(), FleetError> {
        let requests: Vec<Request> = claims
            .iter()
            .map(|(w, request, cap, _)| Request {
                cap: *cap,
                ledger: self.keys.get(&w.key).and_then(|key| key.ledger),
                // The round before asked what fleet recovery had to ask.
                recovery: recovery::Args::default(),
                ..request.clone()
            })
            .collect();
        let publishes: Vec<Publish<'_>> = claims
            .iter()
            .zip(&requests)
            .map(|((w, ..), request)| Publish {
                key: &w.key,
                recovery_key: &w.recovery_key,
                request,
            })
            .collect();
        let Some(link) = self.link.as_mut() else {
            return Ok(());
        };
        let sent = millis(self.started.elapsed());
        let replies = match link.exchange(&publishes, self.shared.config.timeout).await {
            Ok(replies) => replies,
            Err(error) => {
                for (w, ..) in claims {
                    w.slot.invalidate();
                    if let Some(key) = self.keys.get_mut(&w.key) {
                        key.ledger = None;
                    }
                }
                return Err(error);
            }
        };
        let received = millis(self.started.elapsed());
        drop(publishes);
        let mut server_error = None;
        for (((w, _, _, trigger), request), reply) in claims.iter().zip(&requests).zip(replies) {
            let claimed = matches!(&reply, KeyReply::Ring { outcome, .. } if outcome.wrote);
            let applied = self.apply(w, request, reply, (sent, received));
            if let Some(error) = applied.error {
                server_error.get_or_insert(error);
            }
            if claimed && let Some(view) = w.slot.view() {
                trip(&self.shared.config.pod, w, *trigger, &view);
            }
        }
        server_error.map_or(Ok(()), Err)
    }

    fn forget_ledgers(&mut self) {
        for key in self.keys.values_mut() {
            key.ledger = None;
        }
    }

    /// One breaker's reply to a round sent and answered at `(sent, received)` (the task's
    /// ms): update what it holds, its view and its fleet recovery (a release slot granted
    /// starts its timer); whether the fleet's window fires for it (closed), and the server
    /// error that failed its part of the round.
    fn apply(
        &mut self,
        w: &Watched,
        request: &Request,
        reply: KeyReply,
        (sent, received): (u64, u64),
    ) -> Applied {
        let pod = self.shared.config.pod.as_str();
        let key = self.keys.entry(w.key.clone()).or_default();
        let (outcome, ring) = match reply {
            KeyReply::Ring { outcome, ring } => (outcome, ring),
            other => {
                key.ledger = None;
                w.slot.invalidate();
                let error = match other {
                    KeyReply::Foreign(kind) => {
                        if self.warned.allow(&w.key, Instant::now()) {
                            tracing::warn!(
                                pod,
                                key = %w.key,
                                breaker = %w.breaker.id(),
                                kind = %kind,
                                "fleet signals: the key holds a {kind}, not a fleet ring; left \
                                 as it is, and this breaker decides on its own calls"
                            );
                        }
                        None
                    }
                    KeyReply::Error(error) => Some(error),
                    _ => {
                        if self.warned.allow(&w.key, Instant::now()) {
                            tracing::warn!(
                                pod,
                                key = %w.key,
                                "fleet signals: unexpected reply for the key; this breaker \
                                 decides on its own calls"
                            );
                        }
                        None
                    }
                };
                return Applied { error, fires: None };
            }
        };
        let aggregate = absorb(request, &outcome, &ring, &mut key.ledger);
        let had = key.recovery.next_release();
        key.recovery.answered(
            &request.recovery,
            (outcome.now_us, outcome.recovered_us, outcome.slot_us),
            sent,
            received,
        );
        if let Some(ticket) = key.recovery.ticket().filter(|_| had.is_none()) {
            if let Some(old) = key.release.take() {
                old.abort();
            }
            key.release = Some(release_at(&self.shared.config.pod, w, ticket, self.started));
        }
        w.slot.store(&aggregate, self.shared.config.staleness);
        let view = aggregate.view;
        let fires = if request.closed && request.cap == 0 {
            w.rule
                .fires(view.calls, view.failures, view.slow)
                .map(|trigger| (trigger, view))
        } else {
            None
        };
        Applied { error: None, fires }
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

/// Starts the timer that ends `w`'s break at the slot of `ticket` (on the task's clock, which
/// started at `started`), with the evidence's age then: `end_break_on_signal` judges it
/// against the breaker's opening, so a breaker that opened again since, or that left open
/// on its own, is left as it is. A timer of its own, so that a round that waits on Redis
/// never makes a release late (the budget's spacing holds to the millisecond).
fn release_at(
    pod: &str,
    w: &Watched,
    ticket: recovery::Ticket,
    started: Instant,
) -> tokio::task::AbortHandle {
    let at = started + Duration::from_millis(ticket.release_ms);
    let evidence = started + Duration::from_millis(ticket.evidence_ms);
    let breaker = w.breaker.clone();
    let pod = pod.to_owned();
    #[cfg(feature = "metrics")]
    let releases = w.releases.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(at.into()).await;
        let age = evidence.elapsed();
        if breaker.end_break_on_signal(cutout::BreakEndReason::PeerRecovered, age) {
            #[cfg(feature = "metrics")]
            releases.increment(1);
            tracing::info!(
                pod = pod.as_str(),
                breaker = %breaker.id(),
                evidence_age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                "fleet recovery: a peer's probes closed its breaker; this one's break ended \
                 early, its own probes decide"
            );
        }
    })
    .abort_handle()
}

/// Opens a breaker on the fleet's window (a no-op if it is no longer closed).
fn trip(pod: &str, w: &Watched, trigger: Trigger, view: &FleetView) {
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
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
