//! Caller-side latencies: a compact histogram for a whole run's quantiles, and the exact
//! quantiles of one second's requests.

/// Buckets per power of two: quantiles within about 4.4% (2^(1/16)).
const PER_OCTAVE: f64 = 16.0;
/// Buckets in all: up to 2^48 microseconds (about nine years).
const BUCKETS: usize = 48 * 16;

/// A histogram of latencies in microseconds, in logarithmic buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

fn bucket(micros: u64) -> usize {
    if micros <= 1 {
        return 0;
    }
    ((micros as f64).log2() * PER_OCTAVE) as usize
}

/// A bucket's middle (geometric), in microseconds.
fn middle(bucket: usize) -> f64 {
    2f64.powf((bucket as f64 + 0.5) / PER_OCTAVE)
}

impl Histogram {
    /// Counts one latency.
    pub fn add(&mut self, micros: u64) {
        let b = bucket(micros).min(BUCKETS - 1);
        self.counts[b] += 1;
        self.total += 1;
    }

    /// Latencies counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (q in [0, 1]) in microseconds; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(middle(b));
            }
        }
        None
    }
}

/// The `q` quantile of `values` (sorted in place), nearest rank; 0 when empty.
pub fn exact_quantile(values: &mut [u32], q: f64) -> u32 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_the_bucket_precision() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        for micros in 1..=100_000u64 {
            h.add(micros);
        }
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.01, 1_000.0)] {
            let got = h.quantile(q).unwrap();
            assert!((got / exact - 1.0).abs() < 0.05, "q {q}: {got} vs {exact}");
        }
        assert_eq!(h.total(), 100_000);
    }

    #[test]
    fn exact_quantiles_take_the_nearest_rank() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(exact_quantile(&mut v, 0.5), 3);
        assert_eq!(exact_quantile(&mut v, 0.99), 5);
        assert_eq!(exact_quantile(&mut [], 0.5), 0);
    }
}
