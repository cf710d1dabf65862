//! Paced successes tallied by their own thread with a plain store: the untimed calls of a busy
//! adaptive breaker count without a read-modify-write.
//!
//! A thread whose slot ([`crate::slot`]) is below the cell count owns the cell of that index:
//! no other thread writes it, so a success is a load and a store of the thread's own line (about
//! a nanosecond, against ten for a locked compare-exchange here). Threads with higher slots, and
//! exiting ones, count through [`crate::shards`] instead. Each cell holds the generation its
//! count belongs to (high 32 bits) and the count (low 32 bits); an owner that sees a newer
//! generation starts its count again from one.
//!
//! The breaker's lock never writes a cell: every locked operation [folds](Tally::fold) what each
//! cell gained since it last looked, remembered in a `seen` copy of its own. Counts tagged with
//! another generation than the current one are dropped, so a success of a call admitted before
//! a transition never counts after it. An owner takes the lock every 2³¹ successes of one
//! generation ([`Tallied::CountedFold`]), so a cell never gains 2³² between folds and the wrapping
//! difference is exact.
//!
//! What the shards' epoch tags give and this gives up: a success that read the published word
//! before a locked operation can land after that operation's fold. It is then folded by the
//! next locked operation, not refused and sent to the lock. Counts stay exact (nothing is
//! lost or counted twice, the loom model checks it), but a trip that such a success makes
//! possible (the minimum calls reached) is evaluated one locked operation late: the word that
//! operation published is no longer fast, so the next success of any thread takes the lock.
//! Paced calls only happen on busy breakers (see [`crate::inflight`]), so that is the next call.
//!
//! # Orderings
//! `Relaxed` throughout. A cell has one writer, so its load and store need no atomicity between
//! them; the folds read it under the breaker's lock, which orders `seen` and the machine. A store
//! is seen by one fold or a later one, never lost: the next fold compares against `seen`. A
//! slot handed to a new thread was given back under a mutex (see [`crate::slot`]), so the new
//! owner's first load sees the previous owner's last store.

use crossbeam_utils::CachePadded;

use crate::loom::{AtomicU64, Ordering};
use crate::shards::cell_count;

/// An owner asks for a fold each time its count reaches a multiple of this.
const FOLD_EVERY: u32 = 1 << 31;

/// What [`Tally::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tallied {
    /// Counted.
    Counted,
    /// Counted; the caller must take the lock so that a fold comes before the count wraps.
    CountedFold,
    /// Not counted: the thread owns no cell.
    NotOwner,
}

fn join(generation: u32, count: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(count)
}

fn split(bits: u64) -> (u32, u32) {
    ((bits >> 32) as u32, bits as u32)
}

pub(crate) struct Tally {
    cells: Box<[CachePadded<AtomicU64>]>,
    /// Each cell as the last fold read it (written under the breaker's lock only).
    seen: Box<[AtomicU64]>,
}

impl Tally {
    /// Two more cells than the success shards (one a core): a process's first threads (a
    /// main thread that calls little, say) should not leave its workers without one. Each is
    /// a cache line of its own, so a breaker pays for them in memory: 4 lines on 2 cores.
    pub(crate) fn new(generation: u32) -> Tally {
        Tally::with_cells(cell_count() + 2, generation)
    }

    fn with_cells(cells: usize, generation: u32) -> Tally {
        Tally {
            cells: (0..cells)
                .map(|_| CachePadded::new(AtomicU64::new(join(generation, 0))))
                .collect(),
            seen: (0..cells)
                .map(|_| AtomicU64::new(join(generation, 0)))
                .collect(),
        }
    }

    /// Counts one success of `generation` on the cell of `slot`, if the thread holding `slot`
    /// owns one.
    #[inline]
    pub(crate) fn add(&self, slot: usize, generation: u32) -> Tallied {
        let Some(cell) = self.cells.get(slot) else {
            return Tallied::NotOwner;
        };
        let (tag, count) = split(cell.load(Ordering::Relaxed));
        let count = if tag == generation {
            count.wrapping_add(1)
        } else {
            1
        };
        cell.store(join(generation, count), Ordering::Relaxed);
        if count.is_multiple_of(FOLD_EVERY) {
            Tallied::CountedFold
        } else {
            Tallied::Counted
        }
    }

    /// The successes of `generation` (the current one) tallied since the last fold. Under the
    /// breaker's lock only.
    pub(crate) fn fold(&self, generation: u32) -> u64 {
        self.cells
            .iter()
            .zip(self.seen.iter())
            .map(|(cell, seen)| {
                let now = cell.load(Ordering::Relaxed);
                let before = seen.load(Ordering::Relaxed);
                if now == before {
                    return 0;
                }
                seen.store(now, Ordering::Relaxed);
                let ((tag, count), (seen_tag, seen_count)) = (split(now), split(before));
                match (tag == generation, tag == seen_tag) {
                    (false, _) => 0,
                    (true, true) => u64::from(count.wrapping_sub(seen_count)),
                    (true, false) => u64::from(count),
                }
            })
            .sum()
    }

    /// What the cells hold now, whatever the generation (tests only).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn held(&self) -> u64 {
        self.cells
            .iter()
            .map(|cell| u64::from(split(cell.load(Ordering::Relaxed)).1))
            .sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_fold_takes_what_each_cell_gained_once() {
        let tally = Tally::with_cells(4, 3);
        for _ in 0..5 {
            assert_eq!(tally.add(0, 3), Tallied::Counted);
        }
        assert_eq!(tally.add(2, 3), Tallied::Counted);
        assert_eq!(tally.fold(3), 6);
        assert_eq!(tally.fold(3), 0, "nothing new");
        assert_eq!(tally.add(0, 3), Tallied::Counted);
        assert_eq!(tally.fold(3), 1);
    }

    #[test]
    fn a_thread_without_a_cell_is_told_so() {
        let tally = Tally::with_cells(4, 0);
        assert_eq!(tally.add(4, 0), Tallied::NotOwner);
        assert_eq!(tally.add(crate::slot::NO_SLOT, 0), Tallied::NotOwner);
        assert_eq!(tally.fold(0), 0);
    }

    #[test]
    fn successes_of_another_generation_are_dropped() {
        let tally = Tally::with_cells(4, 0);
        tally.add(1, 0);
        tally.add(1, 0);
        // A transition's fold took them; then a late success of generation 0 lands.
        assert_eq!(tally.fold(0), 2);
        tally.add(1, 0);
        assert_eq!(tally.fold(1), 0, "generation 0 is over");
        // The owner sees generation 1 and starts again from one.
        tally.add(1, 1);
        tally.add(1, 1);
        assert_eq!(tally.fold(1), 2);
        // Generation 2 begins at a fold; a late success of 1 and a first one of 2 land before
        // the next fold: only the one of 2 counts. (An owner's generations only go up: it
        // reads them from the word in order.)
        assert_eq!(tally.fold(1), 0);
        tally.add(1, 1);
        tally.add(1, 2);
        assert_eq!(tally.fold(2), 1);
    }

    #[test]
    fn the_count_wraps_exactly_and_asks_for_a_fold_before_it_could_be_lost() {
        let tally = Tally::with_cells(4, 9);
        tally.cells[0].store(join(9, u32::MAX - 2), Ordering::Relaxed);
        tally.seen[0].store(join(9, u32::MAX - 2), Ordering::Relaxed);
        assert_eq!(tally.add(0, 9), Tallied::Counted);
        assert_eq!(tally.add(0, 9), Tallied::Counted);
        assert_eq!(
            tally.add(0, 9),
            Tallied::CountedFold,
            "0 is a multiple of 2^31"
        );
        assert_eq!(tally.add(0, 9), Tallied::Counted);
        assert_eq!(tally.fold(9), 4, "across the wrap");
        tally.cells[0].store(join(9, FOLD_EVERY - 1), Ordering::Relaxed);
        assert_eq!(tally.add(0, 9), Tallied::CountedFold);
    }
}

/// The fold against an owner racing it, under loom.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;

    /// An owner adds successes of the generation it reads in the published word; a locked
    /// operation folds (and may start a new generation) meanwhile; a last fold follows. Nothing
    /// is counted twice or into another generation, and every success of the last generation
    /// is counted.
    fn racing_fold(transition: bool) {
        loom::model(move || {
            let tally = Arc::new(Tally::with_cells(4, 0));
            let word = Arc::new(AtomicU64::new(0));
            let owner = {
                let (tally, word) = (Arc::clone(&tally), Arc::clone(&word));
                loom::thread::spawn(move || {
                    // A spawned thread whose first operation is a load is not explored
                    // (tokio-rs/loom#392): yield first.
                    loom::thread::yield_now();
                    let mut added = [0u64; 2];
                    for _ in 0..3 {
                        let generation = word.load(Ordering::Acquire) as u32;
                        assert_eq!(tally.add(0, generation), Tallied::Counted);
                        added[generation as usize] += 1;
                    }
                    added
                })
            };
            // The locked operation (the only one running, so no lock is modelled).
            let locked = {
                let (tally, word) = (Arc::clone(&tally), Arc::clone(&word));
                loom::thread::spawn(move || {
                    loom::thread::yield_now();
                    let folded = tally.fold(0);
                    if transition {
                        word.store(1, Ordering::Release);
                    }
                    folded
                })
            };
            let during = locked.join().unwrap();
            let added = owner.join().unwrap();
            let last = u32::from(transition);
            let after = tally.fold(last);
            if transition {
                assert!(during <= added[0], "{during} of {added:?} folded during");
                assert_eq!(after, added[1], "every success of generation 1, once");
            } else {
                assert_eq!(during + after, added[0], "every success once");
            }
        });
    }

    #[test]
    fn loom_a_fold_racing_an_owner_counts_each_success_once() {
        racing_fold(false);
    }

    #[test]
    fn loom_a_transition_racing_an_owner_drops_only_the_old_generation() {
        racing_fold(true);
    }
}
