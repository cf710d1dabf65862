//! A healthy call's service time: log-normal from two numbers (`latency-median`,
//! `latency-p99`), or the empirical distribution of a recorded service (`latency-quantiles`,
//! what `cutout-lab fit` writes), drawn from the same standard normal draw either way so that
//! every column of a report sees the same calls.
//!
//! # The empirical distribution
//! `latency-quantiles = [[0.0, "0.4ms"], [0.5, "1.1ms"], [0.99, "9ms"], [1.0, "40ms"]]`: pairs
//! of a probability and the duration at that quantile, probabilities rising from 0 to 1 and
//! durations not falling. A call's draw z becomes u = Φ(z), and its service time the quantile
//! at u, log-linear between the listed points: a bimodal latency (a cache in front) and a tail
//! past p99 are kept as recorded, where a log-normal fitted to two numbers has neither.

use std::time::Duration;

use crate::duration::parse;

/// The z-score of the 99th percentile of a standard normal distribution.
pub(super) const Z99: f64 = 2.326_347_874;

/// The most points a `latency-quantiles` list may hold.
pub const MAX_QUANTILES: usize = 1000;

/// A healthy call's service time, before the condition's latency factor.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceTime {
    /// Log-normal: `median × exp(σ z)`.
    LogNormal {
        /// The median.
        median: Duration,
        /// σ of the underlying normal.
        sigma: f64,
    },
    /// Empirical: (probability, nanoseconds) points, probabilities from 0 to 1.
    Quantiles(Vec<(f64, f64)>),
}

impl ServiceTime {
    /// The log-normal with this median and 99th percentile.
    pub fn log_normal(median: Duration, p99: Duration) -> ServiceTime {
        ServiceTime::LogNormal {
            median,
            sigma: (p99.as_secs_f64() / median.as_secs_f64()).ln() / Z99,
        }
    }

    /// The empirical distribution of `points` as a scenario writes them (see the module
    /// docs), checked.
    pub fn quantiles(points: &[(f64, String)]) -> Result<ServiceTime, String> {
        let shape = "latency-quantiles: pairs of a probability and a duration, from [0.0, …] \
                     to [1.0, …], probabilities rising and durations not falling";
        if points.len() < 2 || points.len() > MAX_QUANTILES {
            return Err(format!(
                "{shape}: needs 2 to {MAX_QUANTILES} pairs, got {}",
                points.len()
            ));
        }
        let mut out = Vec::with_capacity(points.len());
        for (p, text) in points {
            if !(0.0..=1.0).contains(p) {
                return Err(format!("{shape}: probability {p} is not in [0, 1]"));
            }
            let d = parse("latency-quantiles", text)?;
            let nanos = d.as_nanos() as f64;
            if let Some(&(last_p, last)) = out.last()
                && (*p <= last_p || nanos < last)
            {
                return Err(format!("{shape}: [{p}, {text:?}] after [{last_p}, …]"));
            }
            out.push((*p, nanos));
        }
        if out[0].0 != 0.0 || out[out.len() - 1].0 != 1.0 || out[0].1 <= 0.0 {
            return Err(format!(
                "{shape}: the first probability must be 0.0 with a duration above 0, the last 1.0"
            ));
        }
        Ok(ServiceTime::Quantiles(out))
    }

    /// The mean, in seconds (the empirical one integrated over its log-linear pieces).
    pub fn mean_secs(&self) -> f64 {
        match self {
            ServiceTime::LogNormal { median, sigma } => {
                median.as_secs_f64() * (sigma * sigma / 2.0).exp()
            }
            ServiceTime::Quantiles(points) => {
                let mut sum = 0.0;
                for w in points.windows(2) {
                    let ((p0, a), (p1, b)) = (w[0], w[1]);
                    // The mean of a log-linear piece from a to b: (b − a) / ln(b / a).
                    let piece = if b > a { (b - a) / (b / a).ln() } else { a };
                    sum += (p1 - p0) * piece;
                }
                sum / 1e9
            }
        }
    }

    /// The service time of draw `z` (a standard normal draw), in nanoseconds.
    pub fn nanos(&self, z: f64) -> f64 {
        match self {
            ServiceTime::LogNormal { median, sigma } => {
                median.as_nanos() as f64 * (sigma * z).exp()
            }
            ServiceTime::Quantiles(points) => {
                let u = normal_cdf(z);
                let i = points
                    .partition_point(|&(p, _)| p <= u)
                    .clamp(1, points.len() - 1);
                let ((p0, a), (p1, b)) = (points[i - 1], points[i]);
                let t = ((u - p0) / (p1 - p0)).clamp(0.0, 1.0);
                a * (b / a).powf(t)
            }
        }
    }

    /// σ of the log-normal (for the queueing tests; NaN for an empirical distribution).
    #[cfg(test)]
    pub(super) fn sigma(&self) -> f64 {
        match self {
            ServiceTime::LogNormal { sigma, .. } => *sigma,
            ServiceTime::Quantiles(_) => f64::NAN,
        }
    }
}

/// Φ(z), the standard normal distribution function, to about 1e-7 (Abramowitz and Stegun
/// 7.1.26 for erf).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(list: &[(f64, &str)]) -> Vec<(f64, String)> {
        list.iter().map(|(p, d)| (*p, (*d).to_owned())).collect()
    }

    #[test]
    fn the_normal_cdf_is_right_where_it_matters() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(Z99) - 0.99).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_25).abs() < 1e-6);
    }

    #[test]
    fn draws_follow_the_listed_quantiles() {
        let s = ServiceTime::quantiles(&points(&[
            (0.0, "1ms"),
            (0.5, "2ms"),
            (0.99, "10ms"),
            (1.0, "100ms"),
        ]))
        .unwrap();
        assert!((s.nanos(0.0) - 2e6).abs() < 10.0, "the median");
        assert!((s.nanos(Z99) - 10e6).abs() < 1e3, "p99");
        let mut rng = fastrand::Rng::with_seed(1);
        let mut draws: Vec<f64> = (0..200_000)
            .map(|_| {
                let z = (-2.0 * (1.0 - rng.f64()).ln()).sqrt()
                    * (2.0 * std::f64::consts::PI * rng.f64()).cos();
                s.nanos(z)
            })
            .collect();
        draws.sort_by(f64::total_cmp);
        let q = |p: f64| draws[(p * draws.len() as f64) as usize];
        assert!((q(0.5) / 2e6 - 1.0).abs() < 0.02, "{}", q(0.5));
        assert!((q(0.99) / 10e6 - 1.0).abs() < 0.05, "{}", q(0.99));
        assert!(q(0.999) > 10e6 && q(0.999) < 100e6);
        // The mean of the draws is the integrated one.
        let mean = draws.iter().sum::<f64>() / draws.len() as f64 / 1e9;
        assert!(
            (mean / s.mean_secs() - 1.0).abs() < 0.02,
            "{mean} {}",
            s.mean_secs()
        );
    }

    #[test]
    fn a_bimodal_record_stays_bimodal() {
        // 70% cache hits at about 1 ms, 30% misses at about 40 ms.
        let s = ServiceTime::quantiles(&points(&[
            (0.0, "0.8ms"),
            (0.7, "1.2ms"),
            (0.71, "35ms"),
            (1.0, "50ms"),
        ]))
        .unwrap();
        let mid = s.nanos(-0.5); // u ≈ 0.31: a hit
        let miss = s.nanos(1.0); // u ≈ 0.84: a miss
        assert!(mid < 1.3e6 && miss > 35e6, "{mid} {miss}");
    }

    #[test]
    fn bad_lists_are_refused_naming_the_key() {
        for bad in [
            points(&[(0.0, "1ms")]),
            points(&[(0.1, "1ms"), (1.0, "2ms")]),
            points(&[(0.0, "1ms"), (0.9, "2ms")]),
            points(&[(0.0, "2ms"), (1.0, "1ms")]),
            points(&[(0.0, "1ms"), (0.5, "2ms"), (0.5, "3ms"), (1.0, "4ms")]),
            points(&[(0.0, "0ms"), (1.0, "1ms")]),
            points(&[(0.0, "soon"), (1.0, "1ms")]),
            points(&[(0.0, "1ms"), (f64::NAN, "2ms"), (1.0, "3ms")]),
        ] {
            let e = ServiceTime::quantiles(&bad).unwrap_err();
            assert!(e.contains("latency-quantiles"), "{bad:?}: {e}");
        }
    }
}
