//! Fleet signals (`[fleet-signals]`): each pod publishes its breakers' window counts to a
//! simulated Redis and reads the fleet's back, as cutout-fleet does, through cutout-fleet's
//! own layout, and trips its closed breaker with
//! [`Breaker::trip_on_signal`](cutout::Breaker::trip_on_signal) when the fleet's window reaches
//! the fleet rule; and fleet recovery, as cutout-fleet runs it: a pod whose own probes closed
//! its breaker publishes it, and open pods end their break early in release slots within a
//! probe budget.
//!
//! ```toml
//! [fleet-signals]
//! enabled = true          # default; false: the section is ignored
//! interval = "250ms"      # each pod's round, at a seeded random phase per pod
//! store-latency = "5ms"   # one way: a round reaches the store this late, and its answer
//! loss = 0.01             # probability that a round's call, or its answer, is lost
//! staleness = "1s"        # default: 3 × interval + 250 ms, as cutout-fleet's
//! recovery = true         # default, as cutout-fleet's; false: no fleet recovery
//! recovery-budget = 25    # probes per second fleet-wide (default cutout-fleet's, 25)
//! ```
//!
//! With the section (and `enabled = true`), every setting runs twice: its own column, local
//! rules only, and a column `<setting> + fleet signals` beside it.
//!
//! A round of a pod at time t: for each of its breakers, a
//! [`snapshot`](cutout::Breaker::snapshot), and whether it tripped from closed within the
//! staleness bound (cutout-fleet's grace: seen closed at a round, open at a later one), make
//! the request cutout-fleet's task would send (the report, and what the pod holds in the
//! breaker's ring: cutout-fleet's `sim::Publisher`). The call reaches the store at t +
//! `store-latency` (lost with probability `loss`); there the store (cutout-fleet's
//! `sim::Store`) does what cutout-fleet's script does on Redis, with its Rust twin: it moves
//! the pod's share of the breaker's ring (a ring of time buckets that sums every pod's
//! report; cutout-fleet's `store` module describes it) into the bucket of the store's time,
//! and the ring is read back. The answer is back at t + 2 × `store-latency` (lost with
//! probability `loss`): the pod takes it in with cutout-fleet's own parse and sums, and if
//! the rule fired, the pod's breaker gets `trip_on_signal()`, which opens it only if it is
//! still closed. A pod whose call or answer was lost forgets what it holds, as the task does
//! after a failed round (its share may then count twice until the older copy leaves the
//! window), and a pod does not start a round while its last one is still out, as the task's
//! ticks do not overlap. The rule is cutout-fleet's [`FleetRule::new()`] resolved on the
//! setting (its minimum calls, its failure ratio or 0.5); no open cap. A report counts while
//! its bucket is in the window (between ¾ of the staleness bound and all of it after the
//! pod's last round); rings expire cutout-fleet's default retention (60 s) after their last
//! write. A read costs the same whatever the number of pods, as it does on Redis.
//!
//! **Fleet recovery** goes through the same rounds, with cutout-fleet's own side of a pod
//! (`sim::Publisher::round`, `absorb_at` and `release`: the code the task runs) and the
//! script's twin for the breaker's recovery key. At each round the pod's snapshot is noted as
//! the task notes it at each tick: a close by its own probes since the last round (open or
//! half-open then, closed or recovering now, no manual action between) is published, dated at
//! the round before; an open breaker on a break of its own that holds no release slot asks
//! for one, with its opening's age and its own break's remainder. The store dates the
//! recovery on its clock and hands out slots a spacing apart (cutout-fleet's
//! `recovery_budget`: `1 / (⌊budget / w⌋ − 1)` s, `w` the probes one release may send, 2 at
//! the core's defaults). The answer's slot becomes an event of the run at the slot's time on
//! the pod's clock (the answer's arrival plus the slot's distance from the store's time),
//! where the pod's breaker gets `end_break_on_signal(PeerRecovered, age)`, the age being how
//! long before then the recovery was gathered; the core judges it against the breaker's
//! opening, and the breaker's own probes decide. A lost round publishes nothing (the
//! recovery goes with the next round) and grants nothing the pod learns of; a slot the store
//! granted whose answer was lost goes unused. Left out: cutout-fleet's timers run on the
//! task's millisecond clock, the lab's on the simulated one (the slot is rounded up to the
//! millisecond in both).

use std::collections::VecDeque;
use std::time::Duration;

use cutout::{Breaker, Settings};
use cutout_fleet::sim::{Publisher, Reply, Request, Store};
use cutout_fleet::{FleetRule, ResolvedRule, TripGrace};
use serde::Deserialize;

use crate::duration::{nanos, parse};
use crate::fleet::mix;

/// `[fleet-signals]` as written in a scenario file; every key is optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FleetSignalsSpec {
    /// Whether the section is in force (default true).
    pub enabled: Option<bool>,
    /// Each pod's round (default `"250ms"`, from 10 ms to 1 min, cutout-fleet's bounds).
    pub interval: Option<String>,
    /// One-way delay of a publish and of a read (default `"5ms"`, at most 1 min).
    pub store_latency: Option<String>,
    /// Probability that a publish, or a read, is lost, in [0, 1] (default 0.01).
    pub loss: Option<f64>,
    /// How old a report may be and count (default 3 × interval + 250 ms, from one interval
    /// to 1 h, as cutout-fleet's).
    pub staleness: Option<String>,
    /// Whether the pods take part in fleet recovery (default true, as cutout-fleet's
    /// `FleetBuilder::recovery`).
    pub recovery: Option<bool>,
    /// Fleet recovery's probe budget, probes per second fleet-wide (default cutout-fleet's,
    /// 25; from 1 to 100,000, as cutout-fleet allows).
    pub recovery_budget: Option<u32>,
}

/// `[fleet-signals]`, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetSignals {
    /// Each pod's round.
    pub interval: Duration,
    /// One-way delay of a publish and of a read.
    pub store_latency: Duration,
    /// Probability that a publish, or a read, is lost.
    pub loss: f64,
    /// How old a report may be and count.
    pub staleness: Duration,
    /// Fleet recovery's probe budget (probes per second fleet-wide); `None`: off.
    pub recovery: Option<u32>,
}

impl FleetSignalsSpec {
    /// The shortest interval (cutout-fleet's).
    pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
    /// The longest interval (cutout-fleet's).
    pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
    /// The longest store latency.
    pub const MAX_LATENCY: Duration = Duration::from_secs(60);
    /// The longest staleness bound (cutout-fleet's).
    pub const MAX_STALENESS: Duration = Duration::from_secs(3600);

    /// The section checked: `None` when `enabled = false`. An error names the key.
    pub fn build(&self) -> Result<Option<FleetSignals>, String> {
        let key = |k: &str| format!("fleet-signals.{k}");
        let interval = match &self.interval {
            Some(text) => parse(&key("interval"), text)?,
            None => Duration::from_millis(250),
        };
        if !(Self::MIN_INTERVAL..=Self::MAX_INTERVAL).contains(&interval) {
            return Err(format!(
                "fleet-signals.interval = {:?}: from {} to {}, as cutout-fleet allows",
                self.interval.as_deref().unwrap_or("250ms"),
                humantime::format_duration(Self::MIN_INTERVAL),
                humantime::format_duration(Self::MAX_INTERVAL)
            ));
        }
        let store_latency = match &self.store_latency {
            Some(text) => parse(&key("store-latency"), text)?,
            None => Duration::from_millis(5),
        };
        if store_latency > Self::MAX_LATENCY {
            return Err(format!(
                "fleet-signals.store-latency = {:?}: at most {}",
                self.store_latency.as_deref().unwrap_or_default(),
                humantime::format_duration(Self::MAX_LATENCY)
            ));
        }
        let loss = self.loss.unwrap_or(0.01);
        if !(0.0..=1.0).contains(&loss) {
            return Err(format!(
                "fleet-signals.loss = {loss}: a probability, from 0 to 1"
            ));
        }
        let staleness = match &self.staleness {
            Some(text) => parse(&key("staleness"), text)?,
            None => interval * 3 + Duration::from_millis(250),
        };
        if staleness < interval || staleness > Self::MAX_STALENESS {
            return Err(format!(
                "fleet-signals.staleness = {:?}: from one interval ({}) to {}, as cutout-fleet \
                 allows",
                self.staleness.as_deref().unwrap_or_default(),
                humantime::format_duration(interval),
                humantime::format_duration(Self::MAX_STALENESS)
            ));
        }
        let budget = self
            .recovery_budget
            .unwrap_or(cutout_fleet::sim::RECOVERY_BUDGET);
        let most = cutout_fleet::sim::MAX_RECOVERY_BUDGET;
        if !(1..=most).contains(&budget) {
            return Err(format!(
                "fleet-signals.recovery-budget = {budget}: from 1 to {most} probes per second, \
                 as cutout-fleet allows (recovery = false switches fleet recovery off)"
            ));
        }
        if !self.enabled.unwrap_or(true) {
            return Ok(None);
        }
        Ok(Some(FleetSignals {
            interval,
            store_latency,
            loss,
            staleness,
            recovery: self.recovery.unwrap_or(true).then_some(budget),
        }))
    }
}

/// The fleet rule a setting's breakers are judged by (cutout-fleet's defaults from the
/// setting). An error says why cutout-fleet would refuse it.
pub fn rule(settings: &Settings) -> Result<ResolvedRule, String> {
    FleetRule::new()
        .resolve(settings)
        .map_err(|e| e.to_string())
}

/// How long a ring outlives its last writer: cutout-fleet's default retention.
const RETENTION: Duration = Duration::from_secs(60);

/// What one round sent: one request per breaker, when, and whether the call and its answer
/// get through.
#[derive(Debug)]
struct Outbound {
    requests: Vec<Request>,
    sent: u64,
    arrives: bool,
    answered: bool,
}

/// What came back for one round: when it was sent, and each breaker's request and reply.
#[derive(Debug)]
struct Inbound {
    sent: u64,
    replies: Vec<(Request, Reply)>,
}

/// The simulated store and every pod's side of the signals, for one run.
#[derive(Debug)]
pub struct Signals {
    spec: FleetSignals,
    /// Each breaker's key (by its index in a pod's breakers).
    keys: Vec<String>,
    store: Store,
    /// `[pod][breaker]`: what the pod holds and its grace.
    pods: Vec<Vec<(Publisher, TripGrace)>>,
    outbound: Vec<VecDeque<Outbound>>,
    replies: Vec<VecDeque<Inbound>>,
    loss: fastrand::Rng,
    /// Trips `trip_on_signal()` made.
    pub trips: u64,
    /// Breaks fleet recovery ended (`end_break_on_signal(PeerRecovered, …)` that took
    /// effect).
    pub releases: u64,
    /// Per pod, the release slot last handed to the event loop.
    scheduled: Vec<Option<u64>>,
}

impl Signals {
    /// Signals for `pods` pods of `breakers` breakers each of `settings`, judged by `rule`.
    pub fn new(
        spec: FleetSignals,
        settings: &Settings,
        rule: ResolvedRule,
        pods: u32,
        breakers: usize,
        seed: u64,
    ) -> Signals {
        let pods = pods as usize;
        let mut publisher = Publisher::new(spec.staleness, RETENTION, rule);
        if let Some(budget) = spec.recovery {
            publisher = publisher.with_recovery(budget, settings);
        }
        Signals {
            spec,
            keys: (0..breakers)
                .map(|b| cutout_fleet::sim::key("cutout-lab", &format!("breaker-{b}")))
                .collect(),
            store: Store::new(),
            pods: vec![vec![(publisher, TripGrace::default()); breakers]; pods],
            outbound: (0..pods).map(|_| VecDeque::new()).collect(),
            replies: (0..pods).map(|_| VecDeque::new()).collect(),
            loss: fastrand::Rng::with_seed(mix(seed, u64::MAX - 2)),
            trips: 0,
            releases: 0,
            scheduled: vec![None; pods],
        }
    }

    /// Each pod's first round, in nanoseconds: a seeded random phase within one interval
    /// (a stream of its own, so the requests stay those of every other column).
    pub fn phases(&self, seed: u64) -> Vec<u64> {
        let mut rng = fastrand::Rng::with_seed(mix(seed, u64::MAX - 3));
        let interval = nanos(self.spec.interval);
        self.pods.iter().map(|_| rng.u64(0..interval)).collect()
    }

    /// The interval, in nanoseconds.
    pub fn interval(&self) -> u64 {
        nanos(self.spec.interval)
    }

    /// The one-way store latency, in nanoseconds.
    pub fn latency(&self) -> u64 {
        nanos(self.spec.store_latency)
    }

    /// A round of `pod` at `now`: snapshots its breakers and sends the requests (they reach
    /// the store after the latency: call [`Signals::at_store`] then). Skipped while the
    /// pod's last round is still out.
    pub fn round(&mut self, pod: usize, now: u64, breakers: &[Breaker]) {
        let arrives = self.loss.f64() >= self.spec.loss;
        let answered = self.loss.f64() >= self.spec.loss;
        if !self.outbound[pod].is_empty() || !self.replies[pod].is_empty() {
            return;
        }
        let grace = nanos(self.spec.staleness);
        let requests = breakers
            .iter()
            .zip(&mut self.pods[pod])
            .map(|(breaker, (publisher, seen))| {
                let state = breaker.snapshot().state;
                let tripped_lately = seen.observe(state, now, grace);
                publisher.round(breaker, tripped_lately, Duration::from_nanos(now))
            })
            .collect();
        self.outbound[pod].push_back(Outbound {
            requests,
            sent: now,
            arrives,
            answered,
        });
    }

    /// `pod`'s oldest round reaches the store at `now`; returns whether an answer goes back
    /// (call [`Signals::reply`] after the latency).
    pub fn at_store(&mut self, pod: usize, now: u64) -> bool {
        let Some(out) = self.outbound[pod].pop_front() else {
            return false;
        };
        let at = Duration::from_nanos(now);
        let replies: Vec<(Request, Reply)> = if out.arrives {
            out.requests
                .into_iter()
                .zip(&self.keys)
                .map(|(request, key)| {
                    let reply = self.store.round(key, &request, at);
                    (request, reply)
                })
                .collect()
        } else {
            Vec::new()
        };
        if !(out.arrives && out.answered) {
            // The pod cannot tell a lost call from a lost answer: it forgets what it holds.
            for (publisher, _) in &mut self.pods[pod] {
                publisher.forget();
            }
            return false;
        }
        self.replies[pod].push_back(Inbound {
            sent: out.sent,
            replies,
        });
        true
    }

    /// `pod`'s oldest answer arrives at `now`: trips each of its breakers the fleet rule
    /// fired for, and takes in fleet recovery's answer. Returns when the release slot a
    /// breaker of `pod` holds comes, if one does (call [`Signals::release`] then).
    pub fn reply(&mut self, pod: usize, now: u64, breakers: &[Breaker]) -> Option<u64> {
        let inbound = self.replies[pod].pop_front()?;
        let (sent, received) = (
            Duration::from_nanos(inbound.sent),
            Duration::from_nanos(now),
        );
        for ((breaker, (publisher, _)), (request, reply)) in breakers
            .iter()
            .zip(&mut self.pods[pod])
            .zip(inbound.replies)
        {
            let fires = publisher
                .absorb_at(&request, &reply, sent, received)
                .is_some_and(|(_, fires)| fires);
            if fires && breaker.trip_on_signal() {
                self.trips += 1;
            }
        }
        let next = self.pods[pod]
            .iter()
            .filter_map(|(publisher, _)| publisher.next_release())
            .map(nanos)
            .min();
        if next == self.scheduled[pod] {
            return None;
        }
        self.scheduled[pod] = next;
        next
    }

    /// At `now`, a release slot of `pod` has come: ends the break of each of its breakers
    /// whose slot it is, as cutout-fleet's task does (`end_break_on_signal(PeerRecovered,
    /// age)`, which the core judges against the breaker's opening).
    pub fn release(&mut self, pod: usize, now: u64, breakers: &[Breaker]) {
        for (breaker, (publisher, _)) in breakers.iter().zip(&mut self.pods[pod]) {
            if publisher.release(breaker, Duration::from_nanos(now)) {
                self.releases += 1;
            }
        }
    }
}
