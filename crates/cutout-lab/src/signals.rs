//! Fleet signals (`[fleet-signals]`): each pod publishes its breakers' window counts to a
//! simulated store and reads the fleet's back, as cutout-fleet does over Redis, and trips its
//! closed breaker with [`Breaker::trip_on_signal`](cutout::Breaker::trip_on_signal) when the
//! fleet's window reaches the fleet rule.
//!
//! ```toml
//! [fleet-signals]
//! enabled = true          # default; false: the section is ignored
//! interval = "250ms"      # each pod's round, at a seeded random phase per pod
//! store-latency = "5ms"   # one way: a publish and a read reach the store this late
//! loss = 0.01             # probability that a publish, or a read, is lost
//! staleness = "1s"        # default: 3 × interval + 250 ms, as cutout-fleet's
//! ```
//!
//! With the section (and `enabled = true`), every setting runs twice: its own column, local
//! rules only, and a column `<setting> + fleet signals` beside it.
//!
//! A round of a pod at time t: for each of its breakers, a
//! [`snapshot`](cutout::Breaker::snapshot), and whether it tripped from closed within the
//! staleness bound (cutout-fleet's grace: seen closed at a round, open at a later one); the
//! publish and the read leave together and reach the store at t + `store-latency`, each lost
//! with probability `loss` on its own. There the publish (if it arrived) replaces the pod's
//! report, written at the store's time, and the read (if it arrived) takes every other pod's
//! report fresh at that time: [`FleetView::simulate`] sums them with the pod's own snapshot
//! of t, with cutout-fleet's own code (report encoding, freshness, sums, the rule). The answer
//! is back at t + 2 × `store-latency`; if the rule fired, the pod's breaker gets
//! `trip_on_signal()`, which opens it only if it is still closed. The rule is cutout-fleet's
//! [`FleetRule::new()`] resolved on the setting (its minimum calls, its failure ratio or 0.5);
//! no open cap. The store keeps every report (a pod's report that goes stale is only skipped).

use std::collections::VecDeque;
use std::time::Duration;

use cutout::{Breaker, Settings, Snapshot};
use cutout_fleet::{FleetRule, FleetView, ResolvedRule, TripGrace};
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
        if !self.enabled.unwrap_or(true) {
            return Ok(None);
        }
        Ok(Some(FleetSignals {
            interval,
            store_latency,
            loss,
            staleness,
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

/// A report as the store holds it.
#[derive(Debug, Clone)]
struct Stored {
    snapshot: Snapshot,
    tripped_lately: bool,
    at_ms: u64,
}

/// What one round sent: the pod's snapshots (one per breaker, with the grace flag), and
/// whether its publish and its read got through.
#[derive(Debug)]
struct Outbound {
    locals: Vec<(Snapshot, bool)>,
    publish: bool,
    read: bool,
}

/// The simulated store and every pod's side of the signals, for one run.
#[derive(Debug)]
pub struct Signals {
    spec: FleetSignals,
    rule: ResolvedRule,
    names: Vec<String>,
    /// `[breaker][pod]`: each pod's last report for the breaker of that index.
    store: Vec<Vec<Option<Stored>>>,
    /// `[pod][breaker]`.
    seen: Vec<Vec<TripGrace>>,
    outbound: Vec<VecDeque<Outbound>>,
    replies: Vec<VecDeque<Vec<bool>>>,
    loss: fastrand::Rng,
    /// Trips `trip_on_signal()` made.
    pub trips: u64,
}

impl Signals {
    /// Signals for `pods` pods of `breakers` breakers each, judged by `rule`.
    pub fn new(
        spec: FleetSignals,
        rule: ResolvedRule,
        pods: u32,
        breakers: usize,
        seed: u64,
    ) -> Signals {
        let pods = pods as usize;
        Signals {
            spec,
            rule,
            names: (0..pods).map(|pod| format!("pod-{pod}")).collect(),
            store: vec![vec![None; pods]; breakers],
            seen: vec![vec![TripGrace::default(); breakers]; pods],
            outbound: (0..pods).map(|_| VecDeque::new()).collect(),
            replies: (0..pods).map(|_| VecDeque::new()).collect(),
            loss: fastrand::Rng::with_seed(mix(seed, u64::MAX - 2)),
            trips: 0,
        }
    }

    /// Each pod's first round, in nanoseconds: a seeded random phase within one interval
    /// (a stream of its own, so the requests stay those of every other column).
    pub fn phases(&self, seed: u64) -> Vec<u64> {
        let mut rng = fastrand::Rng::with_seed(mix(seed, u64::MAX - 3));
        let interval = nanos(self.spec.interval);
        self.names.iter().map(|_| rng.u64(0..interval)).collect()
    }

    /// The interval, in nanoseconds.
    pub fn interval(&self) -> u64 {
        nanos(self.spec.interval)
    }

    /// The one-way store latency, in nanoseconds.
    pub fn latency(&self) -> u64 {
        nanos(self.spec.store_latency)
    }

    /// A round of `pod` at `now`: snapshots its breakers and sends the publish and the read
    /// (they reach the store after the latency: call [`Signals::at_store`] then).
    pub fn round(&mut self, pod: usize, now: u64, breakers: &[Breaker]) {
        let grace = nanos(self.spec.staleness);
        let locals = breakers
            .iter()
            .zip(&mut self.seen[pod])
            .map(|(breaker, seen)| {
                let snapshot = breaker.snapshot();
                let tripped_lately = seen.observe(snapshot.state, now, grace);
                (snapshot, tripped_lately)
            })
            .collect();
        let publish = self.loss.f64() >= self.spec.loss;
        let read = self.loss.f64() >= self.spec.loss;
        self.outbound[pod].push_back(Outbound {
            locals,
            publish,
            read,
        });
    }

    /// `pod`'s oldest round reaches the store at `now`; returns whether a reply goes back
    /// (the read got through: call [`Signals::reply`] after the latency).
    pub fn at_store(&mut self, pod: usize, now: u64) -> bool {
        let Some(out) = self.outbound[pod].pop_front() else {
            return false;
        };
        let now_ms = now / 1_000_000;
        if out.publish {
            for (b, (snapshot, tripped_lately)) in out.locals.iter().enumerate() {
                self.store[b][pod] = Some(Stored {
                    snapshot: snapshot.clone(),
                    tripped_lately: *tripped_lately,
                    at_ms: now_ms,
                });
            }
        }
        if !out.read {
            return false;
        }
        let fires = out
            .locals
            .iter()
            .enumerate()
            .map(|(b, (snapshot, tripped_lately))| {
                let others: Vec<(&str, &Snapshot, bool, u64)> = self.store[b]
                    .iter()
                    .enumerate()
                    .filter(|&(other, _)| other != pod)
                    .filter_map(|(other, stored)| {
                        stored.as_ref().map(|s| {
                            (
                                self.names[other].as_str(),
                                &s.snapshot,
                                s.tripped_lately,
                                s.at_ms,
                            )
                        })
                    })
                    .collect();
                FleetView::simulate(
                    &self.names[pod],
                    snapshot,
                    *tripped_lately,
                    &others,
                    now_ms,
                    self.spec.staleness,
                    &self.rule,
                )
                .1
            })
            .collect();
        self.replies[pod].push_back(fires);
        true
    }

    /// `pod`'s oldest reply arrives: trips each of its breakers the fleet rule fired for.
    pub fn reply(&mut self, pod: usize, breakers: &[Breaker]) {
        let Some(fires) = self.replies[pod].pop_front() else {
            return;
        };
        for (breaker, fires) in breakers.iter().zip(fires) {
            if fires && breaker.trip_on_signal() {
                self.trips += 1;
            }
        }
    }
}
