//! Latency samples off the lock: each thread adds its successful durations to a histogram of
//! its own, which the breaker merges into the baseline under its lock about once a second.
//!
//! # Orderings
//! The counts are plain `Relaxed` counters: they carry no other data, and a sample that lands
//! just after a merge is taken by the next one. They are not modelled by loom (std atomics):
//! no decision of the state machine depends on their interleaving, only on their sums.

use std::sync::atomic::{AtomicU32, Ordering};

use crossbeam_utils::CachePadded;

use super::histogram::{BUCKETS, bucket_of};
use crate::shards::cell_count;
use crate::slot::thread_cell;

pub(crate) struct LatencySamples {
    cells: Box<[CachePadded<Box<[AtomicU32]>>]>,
}

impl LatencySamples {
    pub(crate) fn new() -> LatencySamples {
        let cells = (0..cell_count())
            .map(|_| CachePadded::new((0..BUCKETS).map(|_| AtomicU32::new(0)).collect()))
            .collect();
        LatencySamples { cells }
    }

    #[inline]
    pub(crate) fn add(&self, nanos: u64) {
        let cell = &self.cells[thread_cell(self.cells.len())];
        cell[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// Takes every count out: (bucket, count) for each non-empty bucket of every cell.
    pub(crate) fn drain(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.cells.iter().flat_map(|cell| {
            cell.iter()
                .enumerate()
                .filter(|(_, count)| count.load(Ordering::Relaxed) != 0)
                .map(|(bucket, count)| (bucket, count.swap(0, Ordering::Relaxed)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_what_was_added() {
        let samples = LatencySamples::new();
        samples.add(1_000);
        samples.add(1_000);
        samples.add(5);
        let mut drained: Vec<_> = samples.drain().collect();
        drained.sort();
        assert_eq!(drained, [(5, 1), (bucket_of(1_000), 2)]);
        assert_eq!(samples.drain().count(), 0);
    }
}
