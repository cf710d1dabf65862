//! [`FleetView`]: the fleet's counts for a breaker, how they are summed, what the gate reads.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::report::{Counts, Ledger, Outcome, Request, Ring};

/// The fleet's counts for one breaker, from the last successful round.
///
/// The sums of the ring's window (see the crate's layout): every pod whose last round fell
/// within the fleet's [staleness](crate::FleetBuilder::staleness) bound (between ¾ of it and
/// all of it, on Redis's clock, so the pods' own clocks do not matter), each pod once, this
/// one with the report it published in this very round.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FleetView {
    /// Pods with a report in the window, this one included.
    pub pods: u32,
    /// Of those, pods whose breaker holds an open slot (open, half-open, recovering or
    /// isolated), this one included.
    pub open_pods: u32,
    /// Calls in the trip windows of the pods whose breaker is closed, and of those that
    /// tripped from closed within the last staleness bound (the window that tripped them
    /// stays visible that long, so that pods reading a moment later still see it).
    pub calls: u64,
    /// Failures in those windows.
    pub failures: u64,
    /// Slow calls in those windows.
    pub slow: u64,
    /// Pods whose last report left the window within the last staleness bound: gone, or cut
    /// off from Redis, lately (one that is back counts in `pods` again).
    pub stale_pods: u32,
    /// Redis's clock at the round.
    pub server_time: SystemTime,
    /// When the round read it, on this process's clock.
    pub read_at: Instant,
}

impl FleetView {
    /// Failures / calls, `None` when no closed pod reported a call.
    pub fn failure_rate(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.failures as f64 / self.calls as f64)
    }

    /// Slow calls / calls, `None` when no closed pod reported a call.
    pub fn slow_rate(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.slow as f64 / self.calls as f64)
    }
}

/// A view and what the task needs besides it.
#[derive(Debug)]
pub(crate) struct Aggregate {
    pub(crate) view: FleetView,
    /// Other pods holding an open slot.
    pub(crate) open_others: u32,
}

fn narrow(count: u64) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// The view of a ring read right after the script answered `outcome`. `mine`: what this pod
/// holds in the window (its ledger), if it knows; its open flag is not another pod's.
pub(crate) fn aggregate(ring: &Ring, outcome: &Outcome, mine: Option<&Counts>) -> Aggregate {
    let sums = ring.sums(outcome.epoch);
    let open_others = sums
        .open
        .saturating_sub(u64::from(mine.is_some_and(|counts| counts.open)));
    let view = FleetView {
        pods: narrow(sums.pods.max(1)),
        open_pods: narrow(sums.open),
        calls: sums.calls,
        // Each share keeps them within its calls; a share counted twice after a lost reply
        // (see the layout's consistency) could tip the sums over, never the ratio past 1.
        failures: sums.failures.min(sums.calls),
        slow: sums.slow.min(sums.calls),
        stale_pods: narrow(sums.gone),
        server_time: SystemTime::UNIX_EPOCH + Duration::from_millis(outcome.now_ms),
        read_at: Instant::now(),
    };
    Aggregate {
        view,
        open_others: narrow(open_others),
    }
}

/// Milliseconds on this process's monotonic clock, from 1 (0 means "no view").
pub(crate) fn monotonic_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// What the task knows of one breaker id, shared with its open gates.
///
/// # Orderings
/// The gate reads `valid_until` with `Acquire`, then `open_others` with `Relaxed`; the task
/// writes `open_others` with `Relaxed`, then `valid_until` with `Release`. A gate that reads a
/// round's deadline therefore reads that round's count or a later one's, never an older
/// round's count under a newer deadline. Invalidating stores 0 with `Release`; a gate that
/// still reads the previous deadline answers from the previous round, which is what it would
/// have done a moment earlier. Nothing else relates the two: no `SeqCst`. `cap` is loaded
/// and stored `Relaxed`: it is one number, read by the task alone, and a gate made during a
/// round takes effect from the next one.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    open_others: AtomicU32,
    valid_until: AtomicU64,
    /// The open cap of the last gate made for this id (0: none): a fleet trip claims a slot
    /// under it first.
    cap: AtomicU32,
    /// For [`Fleet::view`](crate::Fleet::view): never read by a gate.
    view: Mutex<Option<FleetView>>,
}

impl Slot {
    /// Stores a round's view, fresh until `valid_for` from now.
    pub(crate) fn store(&self, aggregate: &Aggregate, valid_for: Duration) {
        self.open_others
            .store(aggregate.open_others, Ordering::Relaxed);
        let until =
            monotonic_ms().saturating_add(u64::try_from(valid_for.as_millis()).unwrap_or(u64::MAX));
        self.valid_until.store(until, Ordering::Release);
        if let Ok(mut view) = self.view.lock() {
            *view = Some(aggregate.view.clone());
        }
    }

    /// Forgets the view: the gate allows every opening, and `Fleet::view` shows nothing.
    pub(crate) fn invalidate(&self) {
        self.valid_until.store(0, Ordering::Release);
        if let Ok(mut view) = self.view.lock() {
            *view = None;
        }
    }

    /// The last round's view, `None` once it is no longer fresh.
    pub(crate) fn view(&self) -> Option<FleetView> {
        if !self.is_valid() {
            return None;
        }
        self.view.lock().ok().and_then(|view| view.clone())
    }

    fn is_valid(&self) -> bool {
        let until = self.valid_until.load(Ordering::Acquire);
        until != 0 && monotonic_ms() <= until
    }

    /// How many other pods report the breaker open, while the view is fresh.
    pub(crate) fn open_others(&self) -> Option<u32> {
        self.is_valid()
            .then(|| self.open_others.load(Ordering::Relaxed))
    }

    /// The open gate: lock-free loads and a clock read, no I/O. Without a fresh view
    /// (Redis down, slow, no round yet) every opening is allowed: the cap is a hint, and a
    /// breaker that cannot open when its dependency fails is worse than a cap exceeded.
    pub(crate) fn allows_open(&self, max_open_pods: u32) -> bool {
        self.open_others().is_none_or(|open| open < max_open_pods)
    }

    pub(crate) fn set_cap(&self, cap: u32) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    pub(crate) fn cap(&self) -> Option<u32> {
        Some(self.cap.load(Ordering::Relaxed)).filter(|&cap| cap > 0)
    }
}

/// What a round's reply does to this pod's side: what it holds now (`ledger`), and the view.
pub(crate) fn absorb(
    request: &Request,
    outcome: &Outcome,
    ring: &Ring,
    ledger: &mut Option<Ledger>,
) -> Aggregate {
    *ledger = request.ledger_after(outcome);
    aggregate(ring, outcome, ledger.as_ref().map(|held| &held.counts))
}

/// The layout's parts for simulators and benches (cutout-lab, cutout-bench), not part of the
/// API: one pod's side of a breaker ([`Publisher`](sim::Publisher)), Redis as the lab models
/// it with the script's twin in Rust ([`Store`](sim::Store)), and a connection that runs the
/// real script for any number of simulated pods ([`Connection`](sim::Connection)). All of it
/// is the task's own code: the same reports, requests, ledgers, parse and sums.
#[doc(hidden)]
pub mod sim {
    use std::collections::HashMap;
    use std::time::Duration;

    use cutout::{BreakEndReason, Breaker, Settings, Snapshot};

    use super::{FleetView, absorb};
    use crate::recovery::{self, Recovery};
    pub use crate::report::Request;
    use crate::report::{Geometry, Ledger, Ring, apply};
    use crate::rule::ResolvedRule;
    pub use crate::store::Connection;
    use crate::store::KeyReply;

    /// What the script and the read after it answered for one breaker, from Redis or from a
    /// [`Store`].
    #[derive(Debug)]
    pub struct Reply(pub(crate) KeyReply);

    impl Reply {
        /// Redis's clock (ms) at the script, when it answered with a ring.
        pub fn now_ms(&self) -> Option<u64> {
            match &self.0 {
                KeyReply::Ring { outcome, .. } => Some(outcome.now_ms),
                _ => None,
            }
        }

        /// Whether the script wrote (a claim refused writes nothing).
        pub fn wrote(&self) -> bool {
            matches!(&self.0, KeyReply::Ring { outcome, .. } if outcome.wrote)
        }

        /// Fleet recovery's answer, when the script answered with a ring: Redis's clock, the
        /// latest recovery's date and the slot granted, in µs (0: none, or not asked).
        pub fn recovery(&self) -> Option<(u64, u64, u64)> {
            match &self.0 {
                KeyReply::Ring { outcome, .. } => {
                    Some((outcome.now_us, outcome.recovered_us, outcome.slot_us))
                }
                _ => None,
            }
        }
    }

    /// The default fleet recovery budget, probes per second (see
    /// [`FleetBuilder::recovery_budget`](crate::FleetBuilder::recovery_budget)).
    pub const RECOVERY_BUDGET: u32 = crate::builder::RECOVERY_BUDGET;
    /// The largest fleet recovery budget a fleet accepts.
    pub const MAX_RECOVERY_BUDGET: u32 = crate::builder::MAX_RECOVERY_BUDGET;

    /// The key of breaker `id`'s ring under `prefix`, as [`Fleet::key`](crate::Fleet::key).
    pub fn key(prefix: &str, id: &str) -> String {
        crate::store::key(prefix, id)
    }

    /// The recovery key of the breaker whose ring is `ring_key`, as
    /// [`Fleet::recovery_key`](crate::Fleet::recovery_key).
    pub fn recovery_key(ring_key: &str) -> String {
        recovery::key(ring_key)
    }

    /// One pod's side of one breaker, as the task keeps it: the ring's geometry it asks for,
    /// the rule, what it holds, and its side of fleet recovery (off unless
    /// [`with_recovery`](Publisher::with_recovery)).
    #[derive(Debug, Clone)]
    pub struct Publisher {
        geometry: Geometry,
        rule: ResolvedRule,
        ledger: Option<Ledger>,
        recovery: Recovery,
        /// The spacing of release slots (µs) and whether this breaker's closes are
        /// published; `None`: fleet recovery off.
        recovery_config: Option<(u64, bool)>,
    }

    fn ms(duration: Duration) -> u64 {
        u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
    }

    impl Publisher {
        /// A pod of a fleet with this staleness bound and retention, judging by `rule`.
        pub fn new(staleness: Duration, retention: Duration, rule: ResolvedRule) -> Publisher {
            Publisher {
                geometry: Geometry::new(ms(staleness), ms(retention)),
                rule,
                ledger: None,
                recovery: Recovery::default(),
                recovery_config: None,
            }
        }

        /// With fleet recovery, as a fleet of this recovery budget (probes per second) runs
        /// it for a breaker of these settings (see
        /// [`FleetBuilder::recovery_budget`](crate::FleetBuilder::recovery_budget)).
        pub fn with_recovery(mut self, budget: u32, settings: &Settings) -> Publisher {
            let spacing = recovery::spacing_us(budget, recovery::probes_per_release(settings));
            self.recovery_config = Some((spacing, recovery::publishes(settings)));
            self
        }

        /// The request of a round: the report of `snapshot` (with the trip grace's verdict),
        /// and what this pod holds. Asks nothing of fleet recovery (see
        /// [`Publisher::round`]).
        pub fn request(&self, snapshot: &Snapshot, tripped_lately: bool) -> Request {
            let local = crate::report::Local::of(snapshot, tripped_lately);
            Request {
                geometry: self.geometry,
                cap: 0,
                report: local.counts(),
                ledger: self.ledger,
                closed: local.closed,
                recovery: recovery::Args::default(),
            }
        }

        /// The request of a round at `now` (any clock of the pod's, in whole milliseconds):
        /// the snapshot of `breaker` noted by fleet recovery as the task notes it, its report,
        /// and, with fleet recovery, the recovery to publish and the slot to ask for.
        pub fn round(&mut self, breaker: &Breaker, tripped_lately: bool, now: Duration) -> Request {
            let snapshot = breaker.snapshot();
            let mut request = self.request(&snapshot, tripped_lately);
            if let Some((spacing, publishes)) = self.recovery_config {
                let now = ms(now);
                self.recovery.observe(&snapshot, publishes, now);
                request.recovery = self.recovery.args(breaker, &snapshot, spacing, now);
            }
            request
        }

        /// A claim of an open slot under `cap`, in the place of the last request (it asks
        /// nothing of fleet recovery: the request it follows did).
        pub fn claim(&self, request: &Request, cap: u32) -> Request {
            Request {
                cap: cap.max(1),
                ledger: self.ledger,
                recovery: recovery::Args::default(),
                ..request.clone()
            }
        }

        /// The reply to `request`: the view, and whether the rule opens this pod's breaker
        /// (it was closed, and the fleet's window reaches a threshold; no open cap). `None`
        /// for anything but a ring (the pod then holds nothing it knows of).
        pub fn absorb(&mut self, request: &Request, reply: &Reply) -> Option<(FleetView, bool)> {
            let KeyReply::Ring { outcome, ring } = &reply.0 else {
                self.ledger = None;
                return None;
            };
            let view = absorb(request, outcome, ring, &mut self.ledger).view;
            let fires = request.closed
                && self
                    .rule
                    .fires(view.calls, view.failures, view.slow)
                    .is_some();
            Some((view, fires))
        }

        /// [`Publisher::absorb`] for a round sent at `sent` and answered at `received` (the
        /// pod's clock): also takes in fleet recovery's answer (the recovery published, the
        /// slot granted).
        pub fn absorb_at(
            &mut self,
            request: &Request,
            reply: &Reply,
            sent: Duration,
            received: Duration,
        ) -> Option<(FleetView, bool)> {
            if let KeyReply::Ring { outcome, .. } = &reply.0 {
                self.recovery.answered(
                    &request.recovery,
                    (outcome.now_us, outcome.recovered_us, outcome.slot_us),
                    ms(sent),
                    ms(received),
                );
            }
            self.absorb(request, reply)
        }

        /// When the slot granted comes, on the pod's clock.
        pub fn next_release(&self) -> Option<Duration> {
            self.recovery.next_release().map(Duration::from_millis)
        }

        /// At `now`: if the slot granted has come, ends `breaker`'s break with
        /// [`end_break_on_signal`](cutout::Breaker::end_break_on_signal)`(PeerRecovered,
        /// age)`, as the task does. Returns whether the break ended.
        pub fn release(&mut self, breaker: &Breaker, now: Duration) -> bool {
            self.recovery
                .take_due(ms(now))
                .is_some_and(|age| breaker.end_break_on_signal(BreakEndReason::PeerRecovered, age))
        }

        /// A reply that never came: the call may or may not have run, so the pod no longer
        /// knows what it holds.
        pub fn forget(&mut self) {
            self.ledger = None;
        }
    }

    /// Redis as the lab models it: each key's value and expiry (ms), written by the script's
    /// twin in Rust, read as the `GET` after the script reads it.
    #[derive(Debug, Default)]
    pub struct Store {
        keys: HashMap<String, (Vec<u8>, u64)>,
    }

    impl Store {
        /// An empty store.
        pub fn new() -> Store {
            Store::default()
        }

        /// The script and the read after it, for `request` on `key` (and its recovery key)
        /// at `now` on the store's clock.
        pub fn round(&mut self, key: &str, request: &Request, now: Duration) -> Reply {
            let now_us = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
            let now_ms = now_us / 1000;
            let recovery_key = recovery::key(key);
            let mut live = |key: &str| match self.keys.remove(key) {
                Some((value, expires)) if expires > now_ms => (Some(value), expires),
                _ => (None, 0),
            };
            let (mut value, mut expires) = live(key);
            let (mut recovered, mut recovered_expires) = live(&recovery_key);
            let applied = apply(&mut value, &mut recovered, request, now_us);
            let ttl = now_ms.saturating_add(request.geometry.ttl_ms);
            let reply = match (applied, &value) {
                (Some(applied), Some(bytes)) => {
                    if applied.expiry {
                        expires = ttl;
                    }
                    if applied.recovery_written {
                        recovered_expires = ttl;
                    }
                    match Ring::parse(bytes) {
                        Some(ring) => KeyReply::Ring {
                            outcome: applied.outcome,
                            ring,
                        },
                        None => KeyReply::Malformed,
                    }
                }
                _ => KeyReply::Foreign("string".to_owned()),
            };
            if let Some(value) = value {
                self.keys.insert(key.to_owned(), (value, expires));
            }
            if let Some(value) = recovered {
                self.keys.insert(recovery_key, (value, recovered_expires));
            }
            Reply(reply)
        }

        /// A key's value, as a `GET` at `now` would answer it.
        pub fn value(&self, key: &str, now: Duration) -> Option<&[u8]> {
            let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
            self.keys
                .get(key)
                .filter(|(_, expires)| *expires > now_ms)
                .map(|(value, _)| value.as_slice())
        }

        /// Sets a key's value and expiry (ms on the store's clock), as another writer would.
        pub fn insert(&mut self, key: &str, value: Vec<u8>, expires_ms: u64) {
            self.keys.insert(key.to_owned(), (value, expires_ms));
        }

        /// Deletes a key, as another writer would (or its expiry).
        pub fn remove(&mut self, key: &str) {
            self.keys.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Geometry, Ledger, Request, apply};

    fn publish(
        value: &mut Option<Vec<u8>>,
        calls: u64,
        failures: u64,
        open: bool,
        at_ms: u64,
    ) -> (Outcome, Option<Ledger>) {
        let request = Request {
            geometry: Geometry::new(1_000, 60_000),
            cap: 0,
            report: Counts {
                calls,
                failures,
                slow: 1.min(calls),
                open,
            },
            ledger: None,
            closed: !open,
            recovery: crate::recovery::Args::default(),
        };
        let applied = apply(value, &mut None, &request, at_ms * 1000).unwrap();
        (applied.outcome, request.ledger_after(&applied.outcome))
    }

    #[test]
    fn sums_the_window_and_counts_this_pod_once() {
        let mut value = None;
        let now = 1_700_000_100_000;
        publish(&mut value, 20, 10, false, now - 300);
        publish(&mut value, 0, 0, true, now - 200);
        // Gone 1.5 s ago: out of the window, counted as gone lately.
        publish(&mut value, 50, 50, false, now - 1_500);
        let (outcome, mine) = publish(&mut value, 10, 5, false, now);
        let ring = Ring::parse(value.as_ref().unwrap()).unwrap();
        let aggregate = aggregate(&ring, &outcome, mine.as_ref().map(|l| &l.counts));
        let view = &aggregate.view;
        assert_eq!((view.pods, view.open_pods), (3, 1));
        assert_eq!((view.calls, view.failures, view.slow), (30, 15, 2));
        assert_eq!(view.stale_pods, 1);
        assert_eq!(view.failure_rate(), Some(0.5));
        assert_eq!(aggregate.open_others, 1);
        assert_eq!(
            view.server_time,
            SystemTime::UNIX_EPOCH + Duration::from_millis(now)
        );
    }

    #[test]
    fn an_open_pod_is_not_another() {
        let mut value = None;
        let now = 1_700_000_100_000;
        publish(&mut value, 4, 4, false, now - 10);
        let (outcome, mine) = publish(&mut value, 0, 0, true, now);
        let ring = Ring::parse(value.as_ref().unwrap()).unwrap();
        let aggregate = aggregate(&ring, &outcome, mine.as_ref().map(|l| &l.counts));
        assert_eq!((aggregate.view.pods, aggregate.view.open_pods), (2, 1));
        assert_eq!(aggregate.open_others, 0, "this pod is not another");
    }

    #[test]
    fn the_gate_allows_without_a_fresh_view() {
        let slot = Slot::default();
        assert!(slot.allows_open(1), "no view yet");
        let aggregate = Aggregate {
            view: FleetView {
                pods: 3,
                open_pods: 2,
                calls: 0,
                failures: 0,
                slow: 0,
                stale_pods: 0,
                server_time: SystemTime::UNIX_EPOCH,
                read_at: Instant::now(),
            },
            open_others: 2,
        };
        slot.store(&aggregate, Duration::from_secs(60));
        assert!(!slot.allows_open(2));
        assert!(slot.allows_open(3));
        assert_eq!(slot.view().map(|view| view.open_pods), Some(2));
        slot.invalidate();
        assert!(slot.allows_open(2), "Redis gone: local decisions");
        assert_eq!(slot.view(), None);
        slot.store(&aggregate, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(3));
        assert!(slot.allows_open(2), "the view went stale");
    }
}
