//! A compact log-linear histogram of durations: 8 buckets per power of two, so any value is
//! known within 12.5%, in 304 `u32` counts covering 0 ns to about 18 minutes.

/// Buckets per power of two.
const SUB: usize = 8;
const SUB_BITS: u32 = 3;
/// Durations above this many nanoseconds (2^40 ns, about 18 minutes) land in the last bucket.
const MAX_BITS: u32 = 40;
/// Buckets in all: 8 exact ones for 0–7 ns, then 8 per power of two up to 2^40.
pub(crate) const BUCKETS: usize = (MAX_BITS as usize - SUB_BITS as usize + 1) * SUB;

/// The bucket of `nanos`.
pub(crate) fn bucket_of(nanos: u64) -> usize {
    if nanos < SUB as u64 {
        return nanos as usize;
    }
    let nanos = nanos.min((1 << MAX_BITS) - 1);
    let msb = 63 - nanos.leading_zeros();
    let octave = (msb - SUB_BITS + 1) as usize;
    let sub = ((nanos >> (msb - SUB_BITS)) & (SUB as u64 - 1)) as usize;
    octave * SUB + sub
}

/// The smallest value of bucket `index`, and its width.
fn bounds(index: usize) -> (u64, u64) {
    if index < SUB {
        return (index as u64, 1);
    }
    let octave = (index / SUB) as u32;
    let sub = (index % SUB) as u64;
    let width = 1u64 << (octave - 1);
    ((SUB as u64 + sub) * width, width)
}

/// Counts per bucket.
#[derive(Clone)]
pub(crate) struct Histogram {
    counts: Box<[u32; BUCKETS]>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

impl crate::slices::Reset for Histogram {
    /// Empties the counts in place: a slice's histogram is reused, never reallocated.
    fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }
}

impl Histogram {
    #[cfg(test)]
    pub(crate) fn record(&mut self, nanos: u64) {
        self.add(bucket_of(nanos), 1);
    }

    pub(crate) fn add(&mut self, bucket: usize, n: u32) {
        self.counts[bucket] = self.counts[bucket].saturating_add(n);
        self.total += u64::from(n);
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0 < q ≤ 1) of everything in `parts`, as the midpoint of its bucket;
    /// `None` when they hold nothing.
    pub(crate) fn quantile<'a>(
        parts: impl Iterator<Item = &'a Histogram> + Clone,
        q: f64,
    ) -> Option<u64> {
        let total: u64 = parts.clone().map(Histogram::total).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for index in 0..BUCKETS {
            seen += parts
                .clone()
                .map(|h| u64::from(h.counts[index]))
                .sum::<u64>();
            if seen >= rank {
                let (low, width) = bounds(index);
                return Some(low + width / 2);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_that_holds_it() {
        let mut values: Vec<u64> = (0..2_000).collect();
        values.extend([1_000_000, 20_000_000, 600_000_000, (1 << 40) - 1, u64::MAX]);
        for v in values {
            let index = bucket_of(v);
            assert!(index < BUCKETS, "{v}");
            let (low, width) = bounds(index);
            let v = v.min((1 << MAX_BITS) - 1);
            assert!(
                low <= v && v < low + width,
                "{v} in [{low}, {})",
                low + width
            );
            assert!(
                width <= low.max(1) / 8 + 1,
                "width {width} at {low}: within 12.5%"
            );
        }
    }

    #[test]
    fn quantiles_are_within_the_bucket_precision() {
        let mut h = Histogram::default();
        for ms in 1..=100u64 {
            h.record(ms * 1_000_000);
        }
        let median = Histogram::quantile(std::iter::once(&h), 0.5).unwrap() as f64;
        assert!((median / 50e6 - 1.0).abs() < 0.125, "{median}");
        let p10 = Histogram::quantile(std::iter::once(&h), 0.1).unwrap() as f64;
        assert!((p10 / 10e6 - 1.0).abs() < 0.125, "{p10}");
        assert_eq!(
            Histogram::quantile(std::iter::once(&Histogram::default()), 0.5),
            None
        );
    }
}
