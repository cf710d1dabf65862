//! Sharded success counters: healthy calls on a closed breaker with a dirty window count here,
//! each thread on its own cache line, and the breaker folds them into its window under its lock.
//!
//! Each cell packs an epoch tag (bits 37–63) with a count (bits 0–36). The epoch is published
//! in the state word and changes with every locked operation, which swaps every cell to the
//! new epoch and takes the old counts in the same motion. A call adds only to a cell tagged
//! with the epoch it read in the word, so an add can never land after the locked operation
//! that followed its read: it fails its compare-exchange and takes the locked path, where its
//! outcome is recorded and the trip conditions evaluated as for any other. (An earlier design
//! tagged cells with the generation only; a success could then land after a failure's drain
//! without the trip being evaluated, a lost open the loom model found.)
//!
//! # Orderings
//! Every access is `Relaxed`. The counts carry no other data; the lock that the rotating
//! thread holds orders the machine. The tag check and the add are one compare-exchange on one
//! word, and the rotation one swap per cell, so no ordering between locations is needed: an
//! add either precedes the swap of its cell (and is taken by it) or fails.

use std::sync::OnceLock;

use crossbeam_utils::CachePadded;

use crate::loom::{AtomicU64, Ordering};

const TAG_SHIFT: u32 = 37;
const COUNT_MASK: u64 = (1 << TAG_SHIFT) - 1;

fn tag(epoch: u32) -> u64 {
    u64::from(epoch & crate::state::EPOCH_MASK) << TAG_SHIFT
}

/// How many cells a breaker gets: the cores, rounded up to a power of two, at least 2 and at
/// most 64. Threads hold the lowest free slots (see [`crate::slot`]), so as many live threads
/// as cores use distinct cells; every locked operation swaps every cell, so more cells would
/// cost every failure.
pub(crate) fn cell_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        cores.next_power_of_two().clamp(2, 64)
    })
}

/// What [`SuccessShards::try_add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Add {
    Added,
    /// The cell is tagged with another epoch.
    Moved,
    /// The cell holds its limit.
    Full,
}

pub(crate) struct SuccessShards {
    cells: Box<[CachePadded<AtomicU64>]>,
}

impl SuccessShards {
    pub(crate) fn new(epoch: u32) -> SuccessShards {
        let cells = (0..cell_count())
            .map(|_| CachePadded::new(AtomicU64::new(tag(epoch))))
            .collect();
        SuccessShards { cells }
    }

    /// Counts one success for `epoch` on this thread's cell. Refused if the cell has moved on
    /// to another epoch ([`Add::Moved`]: a locked operation has begun since the caller read
    /// the word), or already holds `limit` successes ([`Add::Full`]: the caller then takes
    /// the locked path, which folds the cells into the window: a count window learns that its
    /// failures have slid out, and its healthy calls stop writing at all).
    #[inline]
    pub(crate) fn try_add(&self, epoch: u32, limit: u64) -> Add {
        let cell = &self.cells[crate::slot::thread_cell(self.cells.len())];
        let mut current = cell.load(Ordering::Relaxed);
        let limit = limit.min(COUNT_MASK);
        loop {
            if current & !COUNT_MASK != tag(epoch) {
                return Add::Moved;
            }
            if current & COUNT_MASK >= limit {
                return Add::Full;
            }
            // Fails only when another thread shares this cell or a drain emptied it: retry
            // with what is there now.
            match cell.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Add::Added,
                Err(now) => current = now,
            }
        }
    }

    /// Moves every cell to `epoch` and returns the counts they held (under the breaker's
    /// lock, at the start of every locked operation).
    pub(crate) fn rotate(&self, epoch: u32) -> u64 {
        self.cells
            .iter()
            .map(|cell| cell.swap(tag(epoch), Ordering::Relaxed) & COUNT_MASK)
            .sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_only_for_the_current_epoch() {
        let shards = SuccessShards::new(7);
        assert_eq!(shards.try_add(7, u64::MAX), Add::Added);
        assert_eq!(shards.try_add(7, u64::MAX), Add::Added);
        assert_eq!(shards.try_add(8, u64::MAX), Add::Moved);
        assert_eq!(shards.try_add(7, 2), Add::Full, "the cell holds its limit");
        assert_eq!(shards.rotate(8), 2);
        let late = shards.try_add(7, u64::MAX);
        assert_eq!(
            late,
            Add::Moved,
            "an add that read the old epoch is refused"
        );
        assert_eq!(shards.try_add(8, u64::MAX), Add::Added);
        assert_eq!(shards.rotate(9), 1);
        assert_eq!(shards.rotate(10), 0);
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let shards = std::sync::Arc::new(SuccessShards::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let shards = std::sync::Arc::clone(&shards);
                std::thread::spawn(move || {
                    (0..10_000)
                        .filter(|_| shards.try_add(0, u64::MAX) == Add::Added)
                        .count()
                })
            })
            .collect();
        let added: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            added, 40_000,
            "threads sharing a cell retry, so none is lost"
        );
        assert_eq!(shards.rotate(1), 40_000);
    }
}
