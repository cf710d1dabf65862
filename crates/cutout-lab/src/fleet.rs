//! The fleet: N pods, each with its own cutout breakers (one for the dependency, or one per
//! replica), a caller pool, and requests arriving at a rate with an attempt timeout, a
//! deadline and optional retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Settings, Transition};
use serde::Deserialize;

use crate::caller::{Pool, RetryPolicy};
use crate::duration::{nanos, parse_at_most};
use crate::phases::Phases;

/// The fleet as written in a scenario file (`[fleet]`).
///
/// Every key is bounded, so that a run's memory and time stay bounded whatever the file says
/// (the bounds are [`FleetSpec`]'s associated constants; a value past one is refused, naming
/// the key): at most 10,000 pods, 1,000,000 requests/s a pod and 1,000,000 over the whole
/// fleet, 100 retries, an hour for the timeout, the retry backoff and a given deadline, and
/// 10,000,000 requests held at once by all the pods' pools together.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FleetSpec {
    /// How many pods, 1 to 10,000 (each keeps its own breakers and pool in every run).
    pub pods: u32,
    /// Requests per second each pod sends (Poisson arrivals): above 0, at most 1,000,000 a
    /// pod and 1,000,000 for `pods` × `rate` (arrivals are whole nanoseconds apart, and every
    /// request is an event of the simulation).
    pub rate: f64,
    /// How long an attempt may take, above 0 and at most 1 hour; a timed-out attempt is a
    /// failure recorded at the timeout.
    pub timeout: String,
    /// Extra attempts after a failed or timed-out one (default 0, at most 100). A refused
    /// attempt is never retried: the breaker said the dependency is down.
    #[serde(default)]
    pub retries: u32,
    /// The pause before a retry (default `"100ms"`, at most 1 hour).
    pub retry_backoff: Option<String>,
    /// How retries are decided, as a list of runs to compare: `"breaker-aware"` (the
    /// default: cutout-tower's `BreakerRetry` rules) and `"naive"`, each at most once.
    #[serde(default)]
    pub retry_policy: Vec<RetryPolicy>,
    /// Concurrent calls each pod's caller pool allows (default 64).
    pub concurrency: Option<u32>,
    /// Requests that may wait for a slot of the pool (default 256); one more fails at once.
    /// `pods` × (`concurrency` + `queue`), the requests the fleet may hold at once, is at
    /// most 10,000,000.
    pub queue: Option<u32>,
    /// How long the caller waits for a request, queueing and retries included, above 0 and
    /// at most 1 hour when given (default: the timeout times the attempts plus the backoffs
    /// between them, so that by default only the pool's queue can run into it; at most 201
    /// hours by the bounds on those).
    pub deadline: Option<String>,
    /// Which breakers each pod keeps, as a list of runs to compare: `"dependency"` (one for
    /// the whole dependency, the default) and `"host"` (one per replica, as cutout-tower's
    /// keyed layer keys them; a call goes to a replica whose breaker admits it), each at most
    /// once.
    #[serde(default)]
    pub breaker_per: Vec<BreakerPer>,
    /// How unevenly the pods share the load (default 0: every pod at `rate`): the
    /// coefficient of variation of the pods' own rates, 0 to [`FleetSpec::MAX_UNEVENNESS`].
    /// Each pod's rate is `rate` times a weight drawn once per pod from a log-normal of mean 1
    /// with this coefficient, on the scenario's seed (every compared setting sees the same
    /// pods), and the weights are scaled to average exactly 1, so the fleet's load stays
    /// `pods` × `rate`. A load balancer that spreads connections, not requests, or clients
    /// that pin a pod, give a fleet like this: its busiest pods' breakers see more calls in
    /// a window than the mean, its quietest fewer.
    pub unevenness: Option<f64>,
}

/// Which breakers a pod keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerPer {
    /// One breaker for the whole dependency.
    Dependency,
    /// One breaker per replica.
    Host,
}

/// The fleet's traffic shape, checked.
#[derive(Debug, Clone, PartialEq)]
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
    /// The retry policies to run, in order (never empty).
    pub retry_policy: Vec<RetryPolicy>,
    /// Each pod's pool of concurrent calls.
    pub concurrency: u32,
    /// Requests that may wait for a slot.
    pub queue: u32,
    /// A request's deadline, from its arrival.
    pub deadline: Duration,
    /// The breaker layouts to run, in order (never empty).
    pub breaker_per: Vec<BreakerPer>,
    /// The cycle of traffic phases (`[[phases]]`, see [`crate::phases`]); `None`: `rate`
    /// in single requests all run long.
    pub phases: Option<Phases>,
    /// The coefficient of variation of the pods' rates (0: all at `rate`; see
    /// [`FleetSpec::unevenness`] and [`pod_weights`]).
    pub unevenness: f64,
}

impl Traffic {
    /// Requests per second per pod on average over the run: `rate`, or the phases' mean.
    pub fn mean_rate(&self) -> f64 {
        self.phases.as_ref().map_or(self.rate, Phases::mean_rate)
    }

    /// The lowest rate above 0 the mean pod sends at: `rate`, or the quietest phase's (an
    /// uneven fleet's quietest pod sends its weight times this, see [`pod_weights`]).
    pub fn lowest_rate(&self) -> f64 {
        self.phases.as_ref().map_or(self.rate, Phases::lowest_rate)
    }
}

impl FleetSpec {
    /// The most pods.
    pub const MAX_PODS: u32 = 10_000;
    /// The most requests per second, of a pod and of the whole fleet.
    pub const MAX_RATE: f64 = 1_000_000.0;
    /// The most retries.
    pub const MAX_RETRIES: u32 = 100;
    /// The longest timeout, retry backoff and given deadline.
    pub const MAX_WAIT: Duration = Duration::from_secs(3600);
    /// The most requests the fleet's pools hold at once: pods × (concurrency + queue).
    pub const MAX_HELD: u64 = 10_000_000;
    /// The most uneven fleet: the pods' rates' coefficient of variation at most 3 (a
    /// log-normal of σ ≈ 1.5, whose busiest pod of 100 takes some 20× the mean).
    pub const MAX_UNEVENNESS: f64 = 3.0;

    /// Checks the spec: every key in its bounds (see [`FleetSpec`]), each named in the error.
    pub fn build(&self) -> Result<Traffic, String> {
        // A rate as a person reads it: no 300 digits for 1e300.
        let shown = |x: f64| {
            if x.is_finite() && x != 0.0 && !(1e-6..1e9).contains(&x.abs()) {
                format!("{x:e}")
            } else {
                format!("{x}")
            }
        };
        if self.pods == 0 {
            return Err("fleet.pods must be at least 1".into());
        }
        if self.pods > Self::MAX_PODS {
            return Err(format!(
                "fleet.pods = {}: at most {} (each pod keeps its own breakers and pool in \
                 every run)",
                self.pods,
                Self::MAX_PODS
            ));
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!("fleet.rate = {}: needs a rate above 0", self.rate));
        }
        if self.rate > Self::MAX_RATE {
            return Err(format!(
                "fleet.rate = {}: at most {} requests/s a pod (arrivals are whole nanoseconds \
                 apart, and every request is simulated)",
                shown(self.rate),
                Self::MAX_RATE
            ));
        }
        let total = f64::from(self.pods) * self.rate;
        if total > Self::MAX_RATE {
            return Err(format!(
                "fleet.pods × fleet.rate = {} × {} = {} requests/s: at most {} in all (every \
                 request is simulated)",
                self.pods,
                shown(self.rate),
                shown(total),
                Self::MAX_RATE
            ));
        }
        if self.retries > Self::MAX_RETRIES {
            return Err(format!(
                "fleet.retries = {}: at most {}",
                self.retries,
                Self::MAX_RETRIES
            ));
        }
        let wait = |key: &str, text: &str| {
            parse_at_most(
                key,
                text,
                Self::MAX_WAIT,
                "the lab's bound on a caller's waits (a run lasts until its last request ends)",
            )
        };
        let timeout = wait("fleet.timeout", &self.timeout)?;
        if timeout.is_zero() {
            return Err("fleet.timeout must be above 0".into());
        }
        let retry_backoff = match &self.retry_backoff {
            Some(text) => wait("fleet.retry-backoff", text)?,
            None => Duration::from_millis(100),
        };
        let concurrency = self.concurrency.unwrap_or(64);
        if concurrency == 0 {
            return Err("fleet.concurrency must be at least 1".into());
        }
        let queue = self.queue.unwrap_or(256);
        let held = u64::from(self.pods) * (u64::from(concurrency) + u64::from(queue));
        if held > Self::MAX_HELD {
            return Err(format!(
                "fleet.pods × (fleet.concurrency + fleet.queue) = {} × ({concurrency} + \
                 {queue}) = {held} requests held at once: at most {}",
                self.pods,
                Self::MAX_HELD
            ));
        }
        let deadline = match &self.deadline {
            Some(text) => wait("fleet.deadline", text)?,
            // In bounds, as timeout, retries and retry-backoff are; checked all the same.
            None => timeout
                .checked_mul(self.retries + 1)
                .zip(retry_backoff.checked_mul(self.retries))
                .and_then(|(attempts, backoffs)| attempts.checked_add(backoffs))
                .ok_or(
                    "fleet.deadline: the default, fleet.timeout × (fleet.retries + 1) + \
                        fleet.retry-backoff × fleet.retries, is too long: give a deadline",
                )?,
        };
        if deadline.is_zero() {
            return Err("fleet.deadline must be above 0".into());
        }
        let mut breaker_per = self.breaker_per.clone();
        if breaker_per.is_empty() {
            breaker_per.push(BreakerPer::Dependency);
        }
        for (i, per) in breaker_per.iter().enumerate() {
            if breaker_per[..i].contains(per) {
                let name = match per {
                    BreakerPer::Dependency => "dependency",
                    BreakerPer::Host => "host",
                };
                return Err(format!(
                    "fleet.breaker-per names {name:?} twice: each layout is one column"
                ));
            }
        }
        let retry_policy = if self.retry_policy.is_empty() {
            vec![RetryPolicy::BreakerAware]
        } else {
            self.retry_policy.clone()
        };
        let unevenness = self.unevenness.unwrap_or(0.0);
        if !(0.0..=Self::MAX_UNEVENNESS).contains(&unevenness) {
            return Err(format!(
                "fleet.unevenness = {unevenness}: the pods' rates' coefficient of variation, \
                 from 0 (every pod at fleet.rate) to {}",
                Self::MAX_UNEVENNESS
            ));
        }
        for (i, policy) in retry_policy.iter().enumerate() {
            if retry_policy[..i].contains(policy) {
                let name = match policy {
                    RetryPolicy::Naive => "naive",
                    RetryPolicy::BreakerAware => "breaker-aware",
                };
                return Err(format!(
                    "fleet.retry-policy names {name:?} twice: each policy is one column"
                ));
            }
        }
        Ok(Traffic {
            pods: self.pods,
            rate: self.rate,
            timeout,
            retries: self.retries,
            retry_backoff,
            retry_policy,
            concurrency,
            queue,
            deadline,
            breaker_per,
            phases: None,
            unevenness,
        })
    }
}

/// A breaker transition of one pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodTransition {
    /// The pod.
    pub pod: u32,
    /// The replica whose breaker it was, for a breaker per replica; `None` for a pod's one
    /// breaker for the whole dependency.
    pub replica: Option<u32>,
    /// When, in nanoseconds of virtual time.
    pub at: u64,
    /// What happened.
    pub transition: Transition,
}

/// One pod: its breakers, its caller pool, and the random sources of its arrivals and of
/// the replicas its calls go to.
#[derive(Debug)]
pub struct Pod {
    /// The pod's breakers: one, or one per replica (index = replica).
    pub breakers: Vec<Breaker>,
    /// The caller pool.
    pub pool: Pool,
    arrivals: fastrand::Rng,
    /// Which replica each attempt tries first.
    pub route: fastrand::Rng,
    /// This pod's share of the load against the mean pod's (1 unless `fleet.unevenness`).
    pub weight: f64,
}

impl Pod {
    /// The gap to this pod's next request at the fleet's `rate` a pod, scaled by this pod's
    /// weight (exponential: Poisson arrivals), in nanoseconds.
    pub fn next_gap(&mut self, rate: f64) -> u64 {
        let u = 1.0 - self.arrivals.f64(); // (0, 1]
        ((-u.ln() / (rate * self.weight)) * 1e9) as u64
    }
}

/// Each of `pods` pods' share of the load for `seed`: all 1 at `unevenness` 0; otherwise
/// drawn from a log-normal of mean 1 whose coefficient of variation is `unevenness`
/// (σ² = ln(1 + cv²), μ = −σ²/2), then scaled so that they average exactly 1. Drawn from a
/// stream of their own, so an even fleet's arrivals are the ones it always had.
pub fn pod_weights(pods: u32, unevenness: f64, seed: u64) -> Vec<f64> {
    if unevenness == 0.0 || pods < 2 {
        return vec![1.0; pods as usize];
    }
    let sigma2 = unevenness.mul_add(unevenness, 1.0).ln();
    let sigma = sigma2.sqrt();
    // Streams from u64::MAX down are taken: the answers, the what-if answers, the fleet
    // signals' loss and rounds, the answers alone (`sim.rs`, `signals.rs`).
    let mut rng = fastrand::Rng::with_seed(mix(seed, u64::MAX - 5));
    let drawn: Vec<f64> = (0..pods)
        .map(|_| (sigma * crate::dependency::standard_normal(&mut rng) - sigma2 / 2.0).exp())
        .collect();
    let mean = drawn.iter().sum::<f64>() / f64::from(pods);
    drawn.into_iter().map(|w| w / mean).collect()
}

/// The pods of one run, all on one clock, with every transition collected in order.
#[derive(Debug)]
pub struct Fleet {
    /// The pods, by index.
    pub pods: Vec<Pod>,
    transitions: Arc<Mutex<Vec<PodTransition>>>,
}

impl Fleet {
    /// `traffic.pods` pods with breakers of `settings` on `clock`, `breakers` of them per pod
    /// (1, or one per replica). Each breaker's jitter seed and each pod's arrivals and routes
    /// derive from `seed` and the pod's index only, so every setting compared in a scenario
    /// sees the same requests arrive at the same moments.
    pub fn new(
        traffic: &Traffic,
        settings: &Settings,
        breakers: u32,
        clock: &ManualClock,
        seed: u64,
    ) -> Fleet {
        let transitions = Arc::new(Mutex::new(Vec::new()));
        let weights = pod_weights(traffic.pods, traffic.unevenness, seed);
        let pods = (0..traffic.pods)
            .map(|pod| {
                let stream = 4 * u64::from(pod);
                let breakers = (0..breakers.max(1))
                    .map(|replica| {
                        let breaker = Breaker::builder(format!("pod-{pod}/replica-{replica}"))
                            .settings(settings.clone())
                            .clock(clock.clone())
                            .seed(mix(seed, stream).wrapping_add(u64::from(replica)))
                            .build();
                        let sink = transitions.clone();
                        let per_replica = (breakers > 1).then_some(replica);
                        breaker.subscribe(move |event| {
                            let record = PodTransition {
                                pod,
                                replica: per_replica,
                                at: nanos(event.at),
                                transition: event.transition,
                            };
                            sink.lock().unwrap_or_else(|e| e.into_inner()).push(record);
                        });
                        breaker
                    })
                    .collect();
                Pod {
                    breakers,
                    pool: Pool::new(traffic.concurrency, traffic.queue),
                    arrivals: fastrand::Rng::with_seed(mix(seed, stream + 1)),
                    route: fastrand::Rng::with_seed(mix(seed, stream + 2)),
                    weight: weights[pod as usize],
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

    /// `pods` pods at `rate`, every other key at its default.
    fn spec(pods: u32, rate: f64, unevenness: Option<f64>) -> FleetSpec {
        FleetSpec {
            pods,
            rate,
            timeout: "1s".into(),
            retries: 0,
            retry_backoff: None,
            retry_policy: Vec::new(),
            concurrency: None,
            queue: None,
            deadline: None,
            breaker_per: Vec::new(),
            unevenness,
        }
    }

    #[test]
    fn arrivals_average_the_rate() {
        let spec = spec(1, 50.0, None);
        let traffic = spec.build().unwrap();
        let fleet = Fleet::new(&traffic, &Settings::default(), 1, &ManualClock::new(), 3);
        let mut pod = fleet.pods.into_iter().next().unwrap();
        let total: u64 = (0..10_000).map(|_| pod.next_gap(50.0)).sum();
        let mean = total as f64 / 10_000.0 / 1e9;
        assert!((mean - 0.02).abs() < 0.001, "{mean}");
    }

    /// The pods' weights average 1 exactly, spread as the coefficient of variation asks (over
    /// 10,000 pods), are the same for the same seed, and are all 1 for an even fleet.
    #[test]
    fn pod_weights_keep_the_load_and_spread_it_as_asked() {
        assert_eq!(pod_weights(5, 0.0, 1), vec![1.0; 5]);
        assert_eq!(pod_weights(1, 2.0, 1), vec![1.0]);
        for cv in [0.25, 1.0, 2.0] {
            let w = pod_weights(10_000, cv, 7);
            assert_eq!(w, pod_weights(10_000, cv, 7));
            assert_ne!(w, pod_weights(10_000, cv, 8));
            let mean = w.iter().sum::<f64>() / w.len() as f64;
            assert!((mean - 1.0).abs() < 1e-12, "{mean}");
            let var = w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / w.len() as f64;
            let measured = var.sqrt();
            // A log-normal's sample spread converges slowly at large σ: within 15% at cv 2.
            assert!(
                (measured / cv - 1.0).abs() < 0.15,
                "cv {cv}: measured {measured}"
            );
            assert!(w.iter().all(|&x| x > 0.0));
        }
    }

    /// An uneven fleet's pods send their weight's share: the busiest pod's gaps are the
    /// quietest's divided by their weights' ratio.
    #[test]
    fn a_pod_s_arrivals_follow_its_weight() {
        let spec = spec(50, 10.0, Some(1.0));
        let traffic = spec.build().unwrap();
        let fleet = Fleet::new(&traffic, &Settings::default(), 1, &ManualClock::new(), 3);
        for mut pod in fleet.pods {
            let weight = pod.weight;
            let total: u64 = (0..4_000).map(|_| pod.next_gap(10.0)).sum();
            let rate = 4_000.0 / (total as f64 / 1e9);
            assert!(
                (rate / (10.0 * weight) - 1.0).abs() < 0.08,
                "weight {weight}: {rate} req/s"
            );
        }
        for bad in [-0.1, 3.5, f64::NAN] {
            let spec = FleetSpec {
                unevenness: Some(bad),
                ..spec.clone()
            };
            assert!(
                spec.build().unwrap_err().contains("fleet.unevenness"),
                "{bad}"
            );
        }
    }

    #[test]
    fn streams_differ() {
        assert_ne!(mix(1, 0), mix(1, 1));
        assert_ne!(mix(1, 0), mix(2, 0));
    }
}
