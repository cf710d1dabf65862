//! The fleet: N pods, each with its own cutout breaker, each sending requests at a rate with
//! an attempt timeout and optional retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Settings, Transition};
use serde::Deserialize;

use crate::duration::{nanos, parse};

/// The fleet as written in a scenario file (`[fleet]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FleetSpec {
    /// How many pods.
    pub pods: u32,
    /// Requests per second each pod sends (Poisson arrivals).
    pub rate: f64,
    /// How long an attempt may take; a timed-out attempt is a failure recorded at the timeout.
    pub timeout: String,
    /// Extra attempts after a failed or timed-out one (default 0). A refused attempt is never
    /// retried: the breaker said the dependency is down.
    #[serde(default)]
    pub retries: u32,
    /// The pause before a retry (default `"100ms"`).
    pub retry_backoff: Option<String>,
}

/// The fleet's traffic shape, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// How many pods.
    pub pods: u32,
    /// Requests per second per pod.
    pub rate: f64,
    /// The attempt timeout.
    pub timeout: Duration,
    /// Extra attempts after a failure.
    pub retries: u32,
    /// The pause before a retry.
    pub retry_backoff: Duration,
}

impl FleetSpec {
    /// Checks the spec.
    pub fn build(&self) -> Result<Traffic, String> {
        if self.pods == 0 {
            return Err("fleet.pods must be at least 1".into());
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!("fleet.rate = {}: needs a rate above 0", self.rate));
        }
        let timeout = parse(&self.timeout)?;
        if timeout.is_zero() {
            return Err("fleet.timeout must be above 0".into());
        }
        let retry_backoff = match &self.retry_backoff {
            Some(text) => parse(text)?,
            None => Duration::from_millis(100),
        };
        Ok(Traffic {
            pods: self.pods,
            rate: self.rate,
            timeout,
            retries: self.retries,
            retry_backoff,
        })
    }
}

/// A breaker transition of one pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodTransition {
    /// The pod.
    pub pod: u32,
    /// When, in nanoseconds of virtual time.
    pub at: u64,
    /// What happened.
    pub transition: Transition,
}

/// One pod: its breaker and the random source of its arrivals.
#[derive(Debug)]
pub struct Pod {
    /// The pod's own breaker.
    pub breaker: Breaker,
    arrivals: fastrand::Rng,
}

impl Pod {
    /// The gap to this pod's next request (exponential: Poisson arrivals), in nanoseconds.
    pub fn next_gap(&mut self, rate: f64) -> u64 {
        let u = 1.0 - self.arrivals.f64(); // (0, 1]
        ((-u.ln() / rate) * 1e9) as u64
    }
}

/// The pods of one run, all on one clock, with every transition collected in order.
#[derive(Debug)]
pub struct Fleet {
    /// The pods, by index.
    pub pods: Vec<Pod>,
    transitions: Arc<Mutex<Vec<PodTransition>>>,
}

impl Fleet {
    /// `traffic.pods` pods with breakers of `settings` on `clock`. Each breaker's jitter seed
    /// and each pod's arrivals derive from `seed` and the pod's index only, so every setting
    /// compared in a scenario sees the same requests arrive at the same moments.
    pub fn new(traffic: &Traffic, settings: &Settings, clock: &ManualClock, seed: u64) -> Fleet {
        let transitions = Arc::new(Mutex::new(Vec::new()));
        let pods = (0..traffic.pods)
            .map(|pod| {
                let breaker = Breaker::builder(format!("pod-{pod}"))
                    .settings(settings.clone())
                    .clock(clock.clone())
                    .seed(mix(seed, 2 * u64::from(pod)))
                    .build();
                let sink = transitions.clone();
                breaker.subscribe(move |event| {
                    let record = PodTransition {
                        pod,
                        at: nanos(event.at),
                        transition: event.transition,
                    };
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push(record);
                });
                Pod {
                    breaker,
                    arrivals: fastrand::Rng::with_seed(mix(seed, 2 * u64::from(pod) + 1)),
                }
            })
            .collect();
        Fleet { pods, transitions }
    }

    /// Every transition so far, in the order they happened.
    pub fn take_transitions(&self) -> Vec<PodTransition> {
        std::mem::take(&mut *self.transitions.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Derives an independent stream's seed from a scenario seed and a stream number (SplitMix64).
pub fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_average_the_rate() {
        let spec = FleetSpec {
            pods: 1,
            rate: 50.0,
            timeout: "1s".into(),
            retries: 0,
            retry_backoff: None,
        };
        let traffic = spec.build().unwrap();
        let fleet = Fleet::new(&traffic, &Settings::default(), &ManualClock::new(), 3);
        let mut pod = fleet.pods.into_iter().next().unwrap();
        let total: u64 = (0..10_000).map(|_| pod.next_gap(50.0)).sum();
        let mean = total as f64 / 10_000.0 / 1e9;
        assert!((mean - 0.02).abs() < 0.001, "{mean}");
    }

    #[test]
    fn streams_differ() {
        assert_ne!(mix(1, 0), mix(1, 1));
        assert_ne!(mix(1, 0), mix(2, 0));
    }
}
