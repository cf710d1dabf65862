//! The simulated dependency: a latency distribution, a base error rate and a capacity, under
//! the condition the incident script puts it in.
//!
//! # The load model
//! The dependency counts the calls that reached it over the last second (ten 100 ms buckets).
//! With `ρ` = that rate / available capacity, a call above capacity (`ρ > 1`) takes `ρ` × its
//! latency (it queued) and fails with an extra probability of `1 − 1/ρ` (the dependency sheds
//! what it cannot serve, so it serves at most its capacity). Below capacity load has no effect.
//! The model was fixed before any scenario was run and is not tuned to any outcome.

use std::time::Duration;

use serde::Deserialize;

use crate::duration::parse;
use crate::incident::Condition;

/// The z-score of the 99th percentile of a standard normal distribution.
const Z99: f64 = 2.326_347_874;
/// The load meter's bucket.
const BUCKET_NANOS: u64 = 100_000_000;
/// Buckets in the load meter's one-second window.
const BUCKETS: usize = 10;

/// The dependency as written in a scenario file (`[dependency]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DependencySpec {
    /// The median latency of a healthy call (`"20ms"`).
    pub latency_median: String,
    /// The 99th percentile of a healthy call (`"80ms"`); latency is log-normal.
    pub latency_p99: String,
    /// The share of healthy calls that fail, in [0, 1].
    pub error_rate: f64,
    /// Calls per second it serves before it saturates.
    pub capacity: f64,
    /// How long a call takes to fail while the dependency is down (default `"1ms"`).
    pub outage_latency: Option<String>,
}

impl DependencySpec {
    /// Checks the spec and builds the model.
    pub fn build(&self) -> Result<Dependency, String> {
        let median = parse(&self.latency_median)?;
        let p99 = parse(&self.latency_p99)?;
        if median.is_zero() || p99 < median {
            return Err(
                "latency-p99 must be at least latency-median, which must be above 0".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "error-rate = {}: needs a ratio in [0, 1]",
                self.error_rate
            ));
        }
        if !(self.capacity.is_finite() && self.capacity > 0.0) {
            return Err(format!(
                "capacity = {}: needs calls per second above 0",
                self.capacity
            ));
        }
        let outage_latency = match &self.outage_latency {
            Some(text) => parse(text)?,
            None => Duration::from_millis(1),
        };
        Ok(Dependency::new(
            median,
            p99,
            self.error_rate,
            self.capacity,
            outage_latency,
        ))
    }
}

/// How the dependency answers one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Response {
    /// It succeeds after this long.
    Success(Duration),
    /// It fails after this long.
    Failure(Duration),
    /// It never answers.
    Hang,
}

impl Response {
    /// Whether a caller that waits at most `timeout` sees a success.
    pub fn succeeds_within(&self, timeout: Duration) -> bool {
        matches!(self, Response::Success(latency) if *latency <= timeout)
    }
}

/// The dependency model: see the module docs for how load acts on it.
#[derive(Debug, Clone)]
pub struct Dependency {
    median: Duration,
    sigma: f64,
    error_rate: f64,
    capacity: f64,
    outage_latency: Duration,
    buckets: [u32; BUCKETS],
    /// The absolute index of the newest bucket.
    newest: u64,
}

impl Dependency {
    /// A dependency whose healthy latency is log-normal with this median and 99th percentile.
    pub fn new(
        median: Duration,
        p99: Duration,
        error_rate: f64,
        capacity: f64,
        outage_latency: Duration,
    ) -> Dependency {
        let sigma = (p99.as_secs_f64() / median.as_secs_f64()).ln() / Z99;
        Dependency {
            median,
            sigma,
            error_rate,
            capacity,
            outage_latency,
            buckets: [0; BUCKETS],
            newest: 0,
        }
    }

    /// The capacity when healthy, in calls per second.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// The base error rate.
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    fn roll(&mut self, now: u64) {
        let index = now / BUCKET_NANOS;
        if index > self.newest {
            let stale = (index - self.newest).min(BUCKETS as u64);
            for k in 1..=stale {
                self.buckets[((self.newest + k) % BUCKETS as u64) as usize] = 0;
            }
            self.newest = index;
        }
    }

    /// Counts a call reaching the dependency at `now` (nanoseconds; never earlier than a
    /// previous call).
    pub fn arrive(&mut self, now: u64) {
        self.roll(now);
        self.buckets[(self.newest % BUCKETS as u64) as usize] += 1;
    }

    /// Calls that reached it in the last second as of `now`.
    pub fn load(&mut self, now: u64) -> u32 {
        self.roll(now);
        self.buckets.iter().sum()
    }

    /// How a call arriving at `now` is answered in `condition`. Does not count the call as
    /// load: call [`Dependency::arrive`] for calls that really reach it.
    pub fn respond(
        &mut self,
        now: u64,
        condition: &Condition,
        rng: &mut fastrand::Rng,
    ) -> Response {
        if condition.hung {
            return Response::Hang;
        }
        if condition.down {
            return Response::Failure(self.outage_latency);
        }
        let capacity = self.capacity * condition.capacity_factor;
        let rho = (f64::from(self.load(now)) / capacity).max(1.0);
        let shed = 1.0 - 1.0 / rho;
        let healthy = (1.0 - self.error_rate) * (1.0 - condition.extra_error_rate) * (1.0 - shed);
        let latency = self.median.as_secs_f64()
            * (self.sigma * standard_normal(rng)).exp()
            * condition.latency_factor
            * rho;
        let latency = Duration::try_from_secs_f64(latency).unwrap_or(Duration::MAX);
        if rng.f64() < healthy {
            Response::Success(latency)
        } else {
            Response::Failure(latency)
        }
    }
}

/// A draw from the standard normal distribution (Box–Muller).
fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = 1.0 - rng.f64(); // (0, 1]: ln is finite
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn dep(error_rate: f64, capacity: f64) -> Dependency {
        Dependency::new(20 * MS, 80 * MS, error_rate, capacity, MS)
    }

    fn sample(d: &mut Dependency, c: &Condition, n: usize) -> (f64, Duration) {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut failures = 0;
        let mut latencies = Vec::new();
        for _ in 0..n {
            match d.respond(0, c, &mut rng) {
                Response::Success(l) => latencies.push(l),
                Response::Failure(l) => {
                    failures += 1;
                    latencies.push(l);
                }
                Response::Hang => unreachable!(),
            }
        }
        latencies.sort();
        (failures as f64 / n as f64, latencies[n / 2])
    }

    #[test]
    fn healthy_latency_and_errors_follow_the_spec() {
        let mut d = dep(0.3, 1e9);
        let (rate, median) = sample(&mut d, &Condition::HEALTHY, 20_000);
        assert!((rate - 0.3).abs() < 0.02, "{rate}");
        assert!((median.as_secs_f64() - 0.020).abs() < 0.001, "{median:?}");
    }

    #[test]
    fn incidents_change_the_answers() {
        let mut d = dep(0.0, 1e9);
        let mut c = Condition::HEALTHY;
        c.latency_factor = 30.0;
        let (rate, median) = sample(&mut d, &c, 5_000);
        assert_eq!(rate, 0.0, "a brownout still answers 200 OK");
        assert!((median.as_secs_f64() - 0.6).abs() < 0.05, "{median:?}");
        c = Condition::HEALTHY;
        c.down = true;
        assert_eq!(sample(&mut d, &c, 10), (1.0, MS));
        c.hung = true;
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(d.respond(0, &c, &mut rng), Response::Hang);
        assert!(!Response::Hang.succeeds_within(Duration::MAX));
    }

    #[test]
    fn load_above_capacity_slows_and_sheds() {
        let mut d = dep(0.0, 100.0);
        for _ in 0..400 {
            d.arrive(500_000_000);
        }
        assert_eq!(d.load(900_000_000), 400);
        let (rate, median) = sample(&mut d, &Condition::HEALTHY, 10_000);
        // ρ = 4: three quarters shed, latency × 4.
        assert!((rate - 0.75).abs() < 0.02, "{rate}");
        assert!((median.as_secs_f64() - 0.080).abs() < 0.005, "{median:?}");
        // A second later the calls have aged out of the meter.
        assert_eq!(d.load(1_500_000_000), 0);
    }

    #[test]
    fn reduced_capacity_saturates_sooner() {
        let mut d = dep(0.0, 1000.0);
        for _ in 0..500 {
            d.arrive(0);
        }
        let mut c = Condition::HEALTHY;
        assert_eq!(sample(&mut d, &c, 1_000).0, 0.0);
        c.capacity_factor = 0.25;
        let (rate, _) = sample(&mut d, &c, 10_000);
        assert!((rate - 0.5).abs() < 0.02, "{rate}");
    }
}
