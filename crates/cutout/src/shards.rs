//! Sharded success counters: healthy calls on a closed breaker with a dirty window count here,
//! each thread on its own cache line, and the breaker folds them into its window under its lock.
//!
//! Each cell packs the low 16 bits of the generation it counts for (bits 48–63) with a count
//! (bits 0–47). A call adds only if the tag matches its permit's generation, so a success from
//! before a transition can never land in the window after it: at every transition the breaker
//! retags every cell under its lock, and a late add then fails its compare-exchange.
//!
//! # Orderings
//! Every access is `Relaxed`. The counts carry no other data: the lock that the draining
//! thread holds orders the machine, and a count that lands just after a drain is simply taken
//! by the next one (it is a success linearized after that drain). The tag check and the add
//! are one compare-exchange on one word, so no ordering between separate locations is needed.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::AtomicUsize;

use crossbeam_utils::CachePadded;

use crate::loom::{AtomicU64, Ordering};

const TAG_SHIFT: u32 = 48;
const COUNT_MASK: u64 = (1 << TAG_SHIFT) - 1;

fn tag(generation: u32) -> u64 {
    u64::from(generation & 0xFFFF) << TAG_SHIFT
}

/// How many cells a breaker gets: twice the cores, rounded to a power of two, at least 4 and at
/// most 64, so that two busy threads rarely share a line.
pub(crate) fn cell_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        (cores * 2).next_power_of_two().clamp(4, 64)
    })
}

/// The calling thread's cell index (before masking), assigned on first use.
pub(crate) fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|index| {
        let mut i = index.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            index.set(i);
        }
        i
    })
}

pub(crate) struct SuccessShards {
    cells: Box<[CachePadded<AtomicU64>]>,
}

impl SuccessShards {
    pub(crate) fn new(generation: u32) -> SuccessShards {
        let cells = (0..cell_count())
            .map(|_| CachePadded::new(AtomicU64::new(tag(generation))))
            .collect();
        SuccessShards { cells }
    }

    /// Counts one success for `generation` on this thread's cell; false if the cell belongs to
    /// another generation (the caller then takes the locked path).
    #[inline]
    pub(crate) fn try_add(&self, generation: u32) -> bool {
        let cell = &self.cells[thread_index() & (self.cells.len() - 1)];
        let mut current = cell.load(Ordering::Relaxed);
        loop {
            if current & !COUNT_MASK != tag(generation) || current & COUNT_MASK == COUNT_MASK {
                return false;
            }
            // Fails only when another thread shares this cell or a drain emptied it: retry
            // with what is there now.
            match cell.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
    }

    /// Takes every count of `generation` out of the cells (under the breaker's lock).
    pub(crate) fn drain(&self, generation: u32) -> u64 {
        let mut total = 0;
        for cell in self.cells.iter() {
            let current = cell.load(Ordering::Relaxed);
            if current & COUNT_MASK != 0 && current & !COUNT_MASK == tag(generation) {
                total += cell.swap(tag(generation), Ordering::Relaxed) & COUNT_MASK;
            }
        }
        total
    }

    /// Empties every cell and tags it for `generation` (under the breaker's lock, after a
    /// transition).
    pub(crate) fn retag(&self, generation: u32) {
        for cell in self.cells.iter() {
            cell.store(tag(generation), Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_only_for_the_tagged_generation() {
        let shards = SuccessShards::new(7);
        assert!(shards.try_add(7));
        assert!(shards.try_add(7));
        assert!(!shards.try_add(8));
        assert_eq!(shards.drain(7), 2);
        assert_eq!(shards.drain(7), 0);
        shards.retag(8);
        assert!(
            !shards.try_add(7),
            "a late success of the old generation is refused"
        );
        assert!(shards.try_add(8));
        assert_eq!(shards.drain(8), 1);
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let shards = std::sync::Arc::new(SuccessShards::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let shards = std::sync::Arc::clone(&shards);
                std::thread::spawn(move || (0..10_000).filter(|_| shards.try_add(0)).count())
            })
            .collect();
        let added: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            added, 40_000,
            "threads sharing a cell retry, so none is lost"
        );
        assert_eq!(shards.drain(0), 40_000);
    }
}
