//! Caller CPU saturation (`[saturation]`): episodes in which a pod's own CPU is saturated and
//! every call it makes takes longer by the same delay, while the dependency stays healthy.
//!
//! # The model
//! Each pod that saturates (the first `pods` pods; all by default) alternates quiet spells
//! and saturation episodes, an alternating renewal process: a quiet spell lasts an
//! exponential time of mean `every`, an episode an exponential time of mean `length`, so a
//! pod is saturated `length / (every + length)` of the time, at moments no other pod shares
//! (each pod draws from a stream of its own). An episode draws one delay, log-normal with
//! `delay-median` and `delay-p99`, capped at `delay-max`; every attempt the pod starts during
//! the episode ends that much later than the dependency answers it. The delay is in the
//! duration the breaker measures (it times the call itself) and counts against the caller's
//! timeout: an attempt whose answer plus delay passes the timeout times out there, as a
//! saturated caller's own timer would see it.
//!
//! Why this shape: a saturated pod delays each call by the time its threads wait for a core
//! before they run the response (scheduler run-queue delay, or a CPU quota's throttling
//! until the next period): about the same for every call of the episode, whatever it calls,
//! and set by how overloaded the pod is, not by the dependency. The shipped defaults (an
//! episode of 30 s on average every 10 min, a delay of 10 ms median, 30 ms p99, at most
//! 40 ms) are a pod that runs hot a few percent of the time and then adds a few to ~40 ms,
//! the range of a run queue a few times deeper than the cores or of a quota throttled for
//! part of a 100 ms period. They were fixed before any scenario was run.
//!
//! What it leaves out: the delay is the one of the episode in force when the attempt
//! starts (an episode that starts or ends during a call does not change it); the caller's
//! own timer is not delayed; the delay does not vary from call to call within an episode;
//! the saturated pod sends no less traffic (its arrivals are the users').
//!
//! Keys (all optional; the section turns the model on): `pods` (the first k pods saturate,
//! at most `fleet.pods`), `every` (mean quiet spell, default `"10m"`), `length` (mean
//! episode, default `"30s"`), `delay-median` (`"10ms"`), `delay-p99` (`"30ms"`), `delay-max`
//! (`"40ms"`, at least the median). Mistakes are refused with the codes of
//! [`crate::keys`].

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, MapAccess, Visitor};

use crate::duration::nanos;
use crate::fleet::mix;
use crate::keys::{self, Key, LogNormal, OUT_OF_RANGE, Typed};

/// The longest `every`, `length` and delay a file may give.
const MOST: Duration = Duration::from_secs(7 * 24 * 3600);

/// `[saturation]` as read (every key checked; see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SaturationSpec {
    /// How many pods saturate (the first ones); `None`: all.
    pub pods: Option<u32>,
    /// The mean quiet spell between a pod's episodes.
    pub every: Duration,
    /// The mean episode.
    pub length: Duration,
    /// The delay an episode adds to each of its calls.
    pub delay: LogNormal,
    /// The largest delay an episode adds.
    pub delay_max: Duration,
}

impl Default for SaturationSpec {
    fn default() -> SaturationSpec {
        SaturationSpec {
            pods: None,
            every: Duration::from_secs(600),
            length: Duration::from_secs(30),
            delay: LogNormal::new::<de::value::Error>(
                ("", Duration::from_millis(10)),
                ("", Duration::from_millis(30)),
            )
            .expect("10ms and 30ms make a distribution"),
            delay_max: Duration::from_millis(40),
        }
    }
}

const KEYS: &[&str] = &[
    "pods",
    "every",
    "length",
    "delay-median",
    "delay-p99",
    "delay-max",
];

impl<'de> Deserialize<'de> for SaturationSpec {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<SaturationSpec, D::Error> {
        d.deserialize_map(SpecVisitor)
    }
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = SaturationSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the [saturation] section")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SaturationSpec, A::Error> {
        let mut spec = SaturationSpec::default();
        let (mut median, mut p99) = (Duration::from_millis(10), Duration::from_millis(30));
        let key = || Key {
            section: "[saturation]",
            known: KEYS,
        };
        while let Some(k) = map.next_key_seed(key())? {
            match k {
                "pods" => {
                    let n: u32 = map.next_value_seed(Typed::new(
                        "saturation.pods",
                        "a whole number of pods, at least 1",
                    ))?;
                    if n == 0 {
                        return Err(keys::error(
                            OUT_OF_RANGE,
                            "saturation.pods = 0: at least 1 (leave the section out for none)",
                        ));
                    }
                    spec.pods = Some(n);
                }
                "every" => spec.every = positive(&mut map, "saturation.every")?,
                "length" => spec.length = positive(&mut map, "saturation.length")?,
                "delay-median" => {
                    median = keys::duration(&mut map, "saturation.delay-median", MOST)?
                }
                "delay-p99" => p99 = keys::duration(&mut map, "saturation.delay-p99", MOST)?,
                "delay-max" => {
                    spec.delay_max = keys::duration(&mut map, "saturation.delay-max", MOST)?
                }
                _ => unreachable!("Key returns a known key"),
            }
        }
        spec.delay = LogNormal::new(
            ("saturation.delay-median", median),
            ("saturation.delay-p99", p99),
        )?;
        if spec.delay_max < median {
            return Err(keys::error(
                OUT_OF_RANGE,
                format_args!(
                    "saturation.delay-max = {:?} is below saturation.delay-median = \
                     {median:?}: the cap would move the median",
                    spec.delay_max
                ),
            ));
        }
        Ok(spec)
    }
}

fn positive<'de, A: MapAccess<'de>>(map: &mut A, key: &str) -> Result<Duration, A::Error> {
    let d = keys::duration(map, key, MOST)?;
    if d.is_zero() {
        return Err(keys::error(
            OUT_OF_RANGE,
            format_args!("{key} must be above 0"),
        ));
    }
    Ok(d)
}

impl SaturationSpec {
    /// The most episodes a run may hold over all pods: each is a few random draws.
    pub const MAX_EPISODES: f64 = 1e8;

    /// Checks the spec against the fleet and the run (`LAB-CFG-003`: `pods` past the fleet's,
    /// or more than [`SaturationSpec::MAX_EPISODES`] episodes expected over the run).
    pub fn check(&self, fleet_pods: u32, duration: Duration) -> Result<(), String> {
        if let Some(pods) = self.pods.filter(|&p| p > fleet_pods) {
            return Err(format!(
                "{OUT_OF_RANGE}: saturation.pods = {pods}: at most fleet.pods = {fleet_pods}"
            ));
        }
        let pods = f64::from(self.pods.unwrap_or(fleet_pods));
        let cycle = (self.every + self.length).as_secs_f64();
        let episodes = pods * duration.as_secs_f64() / cycle;
        if episodes > Self::MAX_EPISODES {
            return Err(format!(
                "{OUT_OF_RANGE}: saturation: {episodes:.0} episodes expected over the run \
                 (pods × duration / (every + length)): at most {}",
                Self::MAX_EPISODES
            ));
        }
        Ok(())
    }
}

/// One pod's episodes, drawn as time goes on.
#[derive(Debug, Clone)]
struct PodEpisodes {
    rng: fastrand::Rng,
    /// Whether the pod is saturated until `until`.
    saturated: bool,
    until: u64,
    /// The delay of the episode in force (when saturated).
    delay: u64,
}

/// The saturation of every pod of one run.
#[derive(Debug, Clone)]
pub struct Saturation {
    spec: SaturationSpec,
    pods: Vec<PodEpisodes>,
}

/// An exponential draw of mean `mean`, in nanoseconds (at least 1).
fn exponential(rng: &mut fastrand::Rng, mean: Duration) -> u64 {
    let u = 1.0 - rng.f64(); // (0, 1]
    ((-u.ln() * mean.as_nanos() as f64) as u64).max(1)
}

impl Saturation {
    /// The episodes of `pods` pods (those past `spec.pods` never saturate), from `seed` and
    /// each pod's index only: every setting of a scenario sees the same episodes.
    pub fn new(spec: SaturationSpec, pods: u32, seed: u64) -> Saturation {
        let saturating = spec.pods.unwrap_or(pods).min(pods);
        let pods = (0..saturating)
            .map(|pod| {
                let mut rng = fastrand::Rng::with_seed(mix(seed, 4 * u64::from(pod) + 3));
                let until = exponential(&mut rng, spec.every);
                PodEpisodes {
                    rng,
                    saturated: false,
                    until,
                    delay: 0,
                }
            })
            .collect();
        Saturation { spec, pods }
    }

    /// The delay pod `pod`'s calls started at `now` (nanoseconds) take on, 0 while it is not
    /// saturated. Asked in time order for each pod (the simulator asks at each attempt's
    /// start): a pod's episodes are drawn as it goes.
    pub fn delay_at(&mut self, pod: u32, now: u64) -> u64 {
        let Some(p) = self.pods.get_mut(pod as usize) else {
            return 0;
        };
        while now >= p.until {
            p.saturated = !p.saturated;
            let mean = if p.saturated {
                let drawn = self.spec.delay.draw(&mut p.rng);
                p.delay = drawn.min(nanos(self.spec.delay_max));
                self.spec.length
            } else {
                self.spec.every
            };
            p.until = p.until.saturating_add(exponential(&mut p.rng, mean));
        }
        if p.saturated { p.delay } else { 0 }
    }

    /// The spec in force.
    pub fn spec(&self) -> &SaturationSpec {
        &self.spec
    }
}
