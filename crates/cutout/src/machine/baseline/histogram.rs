//! A compact log histogram of durations: 4 buckets per power of two from 1.024 µs to 68.7 s,
//! in 105 `u32` counts (420 bytes).
//!
//! # Precision
//! Bucket 0 holds everything below 2^10 ns (1.024 µs); the last bucket everything from
//! 1.6875 × 2^35 ns (58 s) up. In between, each power of two [2^m, 2^(m+1)) is cut at
//! 38/32, 45/32 and 54/32 of 2^m, close to 2^(1/4), 2^(1/2) and 2^(3/4): each bucket is at most
//! 20% as wide as its lower bound (18.75%, 18.4%, 20% and 18.5%), so a quantile, reported as
//! the midpoint of its bucket, is within 10% of every value the bucket holds. (Four linear
//! quarters would be 25% wide at the bottom of each power of two, 12.5%. The histogram this
//! replaced had 8 linear buckets per power of two from 0 ns to 2^40 ns: 12.5% wide, 6.25%, in
//! 304 counts, 1,216 bytes.) Below a microsecond the quantile is 512 ns, whatever the
//! durations: the relative slow-call rule has a 1 ms floor and a 50 ms margin by default,
//! so it never decides down there.
//!
//! # Memory
//! The latency baseline keeps one histogram per slice, 4 slices: 1,680 bytes, where it held
//! 10 of 1,216 bytes each (12,160 bytes, with a separate allocation per slice).
//!
//! # Counts
//! Counts are `u32`, saturating: a slice of 60 s would need 71 million timed calls a second
//! in one bucket to saturate (`u16` would saturate at about a thousand a second).

/// Buckets per power of two.
const SUB: usize = 4;
/// Where the buckets of a power of two start, in 32nds of it (and where the next one starts).
const EDGES: [u64; SUB + 1] = [32, 38, 45, 54, 64];
/// Durations below 2^10 ns (about 1 µs) land in bucket 0.
const LOW_BITS: u32 = 10;
/// Durations of 2^36 ns (about 69 s) and more land in the last bucket, with the top of the
/// power of two below.
const HIGH_BITS: u32 = 36;
/// Buckets in all: one for everything below 2^10 ns, then 4 per power of two up to 2^36 ns.
pub(crate) const BUCKETS: usize = (HIGH_BITS - LOW_BITS) as usize * SUB + 1;

/// The bucket of `nanos`: no branch, no float, no table (two comparisons for the clamp and
/// three for the bucket within its power of two, which the compiler turns into conditional
/// moves and flag arithmetic; a leading-zero count; two shifts).
#[inline]
pub(crate) fn bucket_of(nanos: u64) -> usize {
    // 2^10 − 1 is in the last bucket of the power of two below 2^10, which the arithmetic
    // below maps to bucket 0; so is everything lower, clamped to it.
    let nanos = nanos.clamp((1 << LOW_BITS) - 1, (1 << HIGH_BITS) - 1);
    let msb = 63 - nanos.leading_zeros();
    // The top six bits: where `nanos` lies in its power of two, in 32nds of it (32 to 63).
    let fraction = nanos >> (msb - 5);
    let sub = usize::from(fraction >= EDGES[1])
        + usize::from(fraction >= EDGES[2])
        + usize::from(fraction >= EDGES[3]);
    (msb - (LOW_BITS - 1)) as usize * SUB + sub - (SUB - 1)
}

/// The smallest value of bucket `index`, and its width (the last bucket's as if it ended at
/// 2^36 ns).
fn bounds(index: usize) -> (u64, u64) {
    if index == 0 {
        return (0, 1 << LOW_BITS);
    }
    let shifted = index + SUB - 1;
    let msb = (shifted / SUB) as u32 + LOW_BITS - 1;
    let sub = shifted % SUB;
    let unit = 1u64 << (msb - 5);
    (EDGES[sub] * unit, (EDGES[sub + 1] - EDGES[sub]) * unit)
}

/// Counts per bucket, inline: the slices of a baseline are one allocation.
#[derive(Clone)]
pub(crate) struct Histogram {
    counts: [u32; BUCKETS],
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total())
            .finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; BUCKETS],
        }
    }
}

impl crate::machine::slices::Reset for Histogram {
    /// Empties the counts in place.
    fn reset(&mut self) {
        self.counts.fill(0);
    }
}

impl Histogram {
    #[cfg(test)]
    pub(crate) fn record(&mut self, nanos: u64) {
        self.add(bucket_of(nanos), 1);
    }

    pub(crate) fn add(&mut self, bucket: usize, n: u32) {
        self.counts[bucket] = self.counts[bucket].saturating_add(n);
    }

    /// The samples counted (a sum of the buckets: 105 additions, kept nowhere, so that a
    /// slice is its counts and nothing else).
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().map(|&n| u64::from(n)).sum()
    }

    /// The `q` quantile (0 < q ≤ 1) of everything in `parts`, as the midpoint of its bucket;
    /// `None` when they hold nothing.
    #[cfg(test)]
    pub(crate) fn quantile<'a>(
        parts: impl Iterator<Item = &'a Histogram> + Clone,
        q: f64,
    ) -> Option<u64> {
        let total: u64 = parts.clone().map(Histogram::total).sum();
        Histogram::quantile_of(parts, total, q)
    }

    /// The `q` quantile (0 < q ≤ 1) of everything in `parts`, which hold `total` samples, as
    /// the midpoint of its bucket; `None` when they hold nothing.
    pub(crate) fn quantile_of<'a>(
        parts: impl Iterator<Item = &'a Histogram> + Clone,
        total: u64,
        q: f64,
    ) -> Option<u64> {
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

    /// How many of everything in `parts` lie above `nanos`: whole buckets above it, and of the
    /// bucket that holds it the share of its width above it (samples taken as spread evenly
    /// over a bucket).
    pub(crate) fn count_above<'a>(
        parts: impl Iterator<Item = &'a Histogram> + Clone,
        nanos: u64,
    ) -> u64 {
        let holder = bucket_of(nanos);
        let (low, width) = bounds(holder);
        let in_holder: u64 = parts.clone().map(|h| u64::from(h.counts[holder])).sum();
        let above_in_holder = if nanos >= low + width {
            0
        } else {
            let share = (low + width - nanos.max(low)) as f64 / width as f64;
            (in_holder as f64 * share).round() as u64
        };
        let beyond: u64 = parts
            .map(|h| {
                h.counts[holder + 1..]
                    .iter()
                    .map(|&c| u64::from(c))
                    .sum::<u64>()
            })
            .sum();
        above_in_holder + beyond
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values to check: every one up to 5,000 ns, then both sides of every bucket bound.
    fn values() -> Vec<u64> {
        let mut values: Vec<u64> = (0..5_000).collect();
        for index in 0..BUCKETS {
            let (low, width) = bounds(index);
            values.extend([low.saturating_sub(1), low, low + width / 2, low + width - 1]);
        }
        values.extend([1_000_000, 20_000_000, 600_000_000, (1 << 36) - 1, 1 << 36]);
        values.extend([u64::MAX / 2, u64::MAX]);
        values
    }

    #[test]
    fn the_layout_is_as_documented() {
        assert_eq!(BUCKETS, 105);
        assert_eq!(std::mem::size_of::<Histogram>(), 420);
        assert!(
            BUCKETS < usize::from(u16::MAX),
            "indices fit the samples' u16"
        );
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1023), 0);
        assert_eq!(bucket_of(1024), 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(
            bounds(BUCKETS - 1),
            (54 << 30, 10 << 30),
            "1.6875 × 2^35 ns up"
        );
    }

    #[test]
    fn every_value_lands_in_a_bucket_that_holds_it() {
        for v in values() {
            let index = bucket_of(v);
            assert!(index < BUCKETS, "{v}");
            let (low, width) = bounds(index);
            // Out of range: the first or the last bucket.
            let v = v.min((1 << HIGH_BITS) - 1);
            assert!(
                low <= v && v < low + width,
                "{v} in [{low}, {})",
                low + width
            );
            if index > 0 {
                assert!(width * 5 <= low, "width {width} at {low}: within 20%");
                // The midpoint, reported for every value of the bucket, is within 10%.
                let mid = low + width / 2;
                assert!(mid.abs_diff(v) * 10 <= v, "{v}: {mid}");
            }
        }
    }

    #[test]
    fn buckets_are_in_order_and_adjacent() {
        for index in 1..BUCKETS {
            let (low, width) = bounds(index - 1);
            assert_eq!(bounds(index).0, low + width, "{index}");
            assert_eq!(bucket_of(low + width), index);
        }
    }

    #[test]
    fn quantiles_are_within_the_bucket_precision() {
        let mut h = Histogram::default();
        for ms in 1..=100u64 {
            h.record(ms * 1_000_000);
        }
        assert_eq!(h.total(), 100);
        for (q, expected) in [(0.5, 50e6), (0.1, 10e6), (0.01, 1e6), (1.0, 100e6)] {
            let got = Histogram::quantile(std::iter::once(&h), q).unwrap() as f64;
            assert!((got / expected - 1.0).abs() <= 0.1, "p{q}: {got}");
        }
        // Across slices: the quantile of everything they hold.
        let mut low = Histogram::default();
        let mut high = Histogram::default();
        for _ in 0..30 {
            low.record(2_000_000);
            high.record(80_000_000);
        }
        let median = Histogram::quantile([&low, &high].into_iter(), 0.5).unwrap() as f64;
        assert!((median / 2e6 - 1.0).abs() <= 0.1, "{median}");
        let p60 = Histogram::quantile([&low, &high].into_iter(), 0.6).unwrap() as f64;
        assert!((p60 / 80e6 - 1.0).abs() <= 0.1, "{p60}");
        assert_eq!(
            Histogram::quantile(std::iter::once(&Histogram::default()), 0.5),
            None
        );
    }

    #[test]
    fn counts_saturate() {
        let mut h = Histogram::default();
        h.add(3, u32::MAX);
        h.add(3, 5);
        h.add(4, 1);
        assert_eq!(h.total(), u64::from(u32::MAX) + 1);
    }
}
