//! Traffic phases (`[[phases]]`): a cycle of traffic patterns every pod follows in step, such
//! as busy steady traffic, then light traffic in bursts, repeated for the whole run.
//!
//! # The model
//! Each `[[phases]]` entry lasts `duration` and has its own `rate` (requests per second per
//! pod; default `fleet.rate`; 0 for silence) and `burst` (requests that arrive together,
//! default 1: a fan-out, a page that asks for many items at once). Within a phase a pod's
//! bursts arrive as a Poisson process of `rate / burst` bursts per second, so the phase's
//! requests still average `rate`; the phases follow one another in file order and the cycle
//! repeats until the run ends, all pods in step (traffic is the users', and they shift
//! together). A Poisson process with a rate that changes at known moments is drawn exactly by
//! restarting it at each change (it has no memory), which is what the simulator does.
//!
//! Without the section the fleet sends `fleet.rate` in single requests all run long, drawn as
//! the lab always drew them. The section exists for what the pools of [`crate::connections`]
//! do when traffic changes shape: busy steady traffic keeps connections warm, light bursty
//! traffic finds them reaped.
//!
//! Keys: `duration` (required, from 1 s to 7 days), `rate` (in [0, 1,000,000], and `pods` ×
//! `rate` at most 1,000,000), `burst` (1 to 10,000). The cycle's mean rate must be above 0.
//! Mistakes are refused with the codes of [`crate::keys`].

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, MapAccess, Visitor};

use crate::duration::nanos;
use crate::keys::{self, Key, MISSING_KEY, OUT_OF_RANGE, Typed};

/// One phase as read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseSpec {
    /// How long it lasts.
    pub duration: Duration,
    /// Requests per second per pod; `None`: `fleet.rate`.
    pub rate: Option<f64>,
    /// Requests per burst.
    pub burst: u32,
}

/// The most requests one burst holds.
pub const MAX_BURST: u32 = 10_000;
/// The shortest phase.
pub const MIN_PHASE: Duration = Duration::from_secs(1);
/// The longest phase.
pub const MAX_PHASE: Duration = Duration::from_secs(7 * 24 * 3600);

const KEYS: &[&str] = &["duration", "rate", "burst"];

impl<'de> Deserialize<'de> for PhaseSpec {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<PhaseSpec, D::Error> {
        d.deserialize_map(PhaseVisitor)
    }
}

struct PhaseVisitor;

impl<'de> Visitor<'de> for PhaseVisitor {
    type Value = PhaseSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [[phases]] entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PhaseSpec, A::Error> {
        let mut duration = None;
        let mut rate = None;
        let mut burst = 1;
        let key = || Key {
            section: "[[phases]]",
            known: KEYS,
        };
        while let Some(k) = map.next_key_seed(key())? {
            match k {
                "duration" => {
                    let d = keys::duration(&mut map, "phases.duration", MAX_PHASE)?;
                    if d < MIN_PHASE {
                        return Err(keys::error(
                            OUT_OF_RANGE,
                            format_args!("phases.duration = {d:?}: at least 1s"),
                        ));
                    }
                    duration = Some(d);
                }
                "rate" => {
                    let r: f64 = map.next_value_seed(Typed::new(
                        "phases.rate",
                        "requests per second, a number",
                    ))?;
                    if !(r.is_finite() && (0.0..=crate::fleet::FleetSpec::MAX_RATE).contains(&r)) {
                        return Err(keys::error(
                            OUT_OF_RANGE,
                            format_args!("phases.rate = {r}: needs a rate in [0, 1000000]"),
                        ));
                    }
                    rate = Some(r);
                }
                "burst" => {
                    let b: u32 = map.next_value_seed(Typed::new(
                        "phases.burst",
                        "a whole number of requests, at least 1",
                    ))?;
                    if !(1..=MAX_BURST).contains(&b) {
                        return Err(keys::error(
                            OUT_OF_RANGE,
                            format_args!("phases.burst = {b}: from 1 to {MAX_BURST}"),
                        ));
                    }
                    burst = b;
                }
                _ => unreachable!("Key returns a known key"),
            }
        }
        let Some(duration) = duration else {
            return Err(keys::error(
                MISSING_KEY,
                "a [[phases]] entry has no duration",
            ));
        };
        Ok(PhaseSpec {
            duration,
            rate,
            burst,
        })
    }
}

/// One phase, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    /// How long it lasts, in nanoseconds.
    pub duration: u64,
    /// Requests per second per pod.
    pub rate: f64,
    /// Requests per burst.
    pub burst: u32,
}

/// The cycle of phases, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Phases {
    phases: Vec<Phase>,
    cycle: u64,
}

impl Phases {
    /// The cycle of `specs` with `rate` as the default rate, for `pods` pods; an error
    /// (`LAB-CFG-003`) where a phase's fleet rate passes 1,000,000 requests/s or the cycle
    /// sends nothing. `None` without phases.
    pub fn new(specs: &[PhaseSpec], rate: f64, pods: u32) -> Result<Option<Phases>, String> {
        if specs.is_empty() {
            return Ok(None);
        }
        let phases: Vec<Phase> = specs
            .iter()
            .map(|s| Phase {
                duration: nanos(s.duration),
                rate: s.rate.unwrap_or(rate),
                burst: s.burst,
            })
            .collect();
        for (n, p) in phases.iter().enumerate() {
            let total = f64::from(pods) * p.rate;
            if total > crate::fleet::FleetSpec::MAX_RATE {
                return Err(format!(
                    "{OUT_OF_RANGE}: [[phases]] {}: fleet.pods × rate = {pods} × {} = {total} \
                     requests/s: at most 1000000 in all",
                    n + 1,
                    p.rate
                ));
            }
        }
        let cycle = phases.iter().map(|p| p.duration).sum();
        let phases = Phases { phases, cycle };
        if phases.mean_rate() <= 0.0 {
            return Err(format!(
                "{OUT_OF_RANGE}: [[phases]]: every phase has rate = 0: the fleet would send \
                 nothing"
            ));
        }
        Ok(Some(phases))
    }

    /// The phases, in cycle order.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// Requests per second per pod over a whole cycle.
    pub fn mean_rate(&self) -> f64 {
        let sent: f64 = self.phases.iter().map(|p| p.rate * p.duration as f64).sum();
        sent / self.cycle as f64
    }

    /// The lowest rate above 0 of any phase.
    pub fn lowest_rate(&self) -> f64 {
        self.phases
            .iter()
            .map(|p| p.rate)
            .filter(|&r| r > 0.0)
            .fold(f64::INFINITY, f64::min)
    }

    /// How many phase changes a run of `duration` has.
    pub fn changes(&self, duration: Duration) -> f64 {
        let shortest = self.phases.iter().map(|p| p.duration).min().unwrap_or(1);
        nanos(duration) as f64 / shortest.max(1) as f64
    }

    /// The phase in force at `t` (nanoseconds) and when it ends.
    pub fn at(&self, t: u64) -> (Phase, u64) {
        let start = t - t % self.cycle;
        let mut end = start;
        for p in &self.phases {
            end = end.saturating_add(p.duration);
            if t < end {
                return (*p, end);
            }
        }
        // Unreachable: the offset is below the cycle, the phases' sum.
        (self.phases[self.phases.len() - 1], end)
    }
}
