//! Thread slots: small indices that live threads hold one each, given back when a thread exits.
//!
//! A breaker's per-core lines are picked by slot (`cells.rs`). Slots are handed out lowest first
//! and reused after their thread exits, so as many live threads as a breaker has lines land on
//! distinct lines, whatever threads came and went before (a pool that replaces its workers does
//! not drift onto shared lines).
//!
//! # Orderings
//! The free list is behind a mutex: a slot given back (its thread's last writes before it) happens
//! before it is handed out again, so the next holder sees everything the previous one wrote.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The slot of a thread that has none (it is exiting, or its slot was already given back).
pub(crate) const NO_SLOT: usize = usize::MAX;

/// Not asked for yet.
const UNSET: usize = usize::MAX - 1;

/// The slots not held: given back ones, and every one from `next` on.
struct Slots {
    given_back: BTreeSet<usize>,
    next: usize,
}

impl Slots {
    const fn new() -> Slots {
        Slots {
            given_back: BTreeSet::new(),
            next: 0,
        }
    }

    /// The lowest slot not held.
    fn take(&mut self) -> usize {
        self.given_back.pop_first().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }

    fn give_back(&mut self, slot: usize) {
        self.given_back.insert(slot);
    }
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots::new());

fn slots() -> std::sync::MutexGuard<'static, Slots> {
    SLOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(UNSET) };
    /// Gives the slot back when the thread exits (its destructor runs then).
    static GIVE_BACK: GiveBack = const { GiveBack };
}

struct GiveBack;

impl Drop for GiveBack {
    fn drop(&mut self) {
        let slot = SLOT.with(|cell| cell.replace(NO_SLOT));
        if slot < UNSET {
            slots().give_back(slot);
        }
    }
}

/// The calling thread's slot: taken on first use and held until the thread exits; [`NO_SLOT`]
/// while the thread is exiting.
#[inline]
pub(crate) fn thread_slot() -> usize {
    let slot = SLOT.with(Cell::get);
    if slot != UNSET {
        return slot;
    }
    take_slot()
}

#[cold]
fn take_slot() -> usize {
    // Register the give-back first: a thread already tearing its locals down gets no slot, so
    // it can never keep one.
    if GIVE_BACK.try_with(|_| ()).is_err() {
        return NO_SLOT;
    }
    let slot = slots().take();
    SLOT.with(|cell| cell.set(slot));
    slot
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_keeps_its_slot() {
        assert_eq!(thread_slot(), thread_slot());
        assert!(thread_slot() < UNSET);
    }

    #[test]
    fn slots_are_taken_lowest_first_and_reused() {
        let mut slots = Slots::new();
        assert_eq!((slots.take(), slots.take(), slots.take()), (0, 1, 2));
        slots.give_back(1);
        slots.give_back(0);
        assert_eq!((slots.take(), slots.take(), slots.take()), (0, 1, 3));
    }

    #[test]
    fn live_threads_hold_distinct_slots() {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let live: Vec<_> = (0..4)
            .map(|_| {
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let slot = thread_slot();
                    // Every one of them holds its slot until all have taken theirs.
                    barrier.wait();
                    slot
                })
            })
            .collect();
        let mut slots: Vec<usize> = live.into_iter().map(|t| t.join().unwrap()).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), 4, "live threads never share a slot");
    }

    #[test]
    fn exited_threads_give_their_slots_back() {
        // One thread after another: without the give-back each would take a new slot. Threads
        // of other tests may take a given-back slot in between, but not most of them.
        let mut slots: Vec<usize> = (0..64)
            .map(|_| std::thread::spawn(thread_slot).join().unwrap())
            .collect();
        slots.sort_unstable();
        slots.dedup();
        assert!(
            slots.len() <= 32,
            "{} slots for 64 threads in turn",
            slots.len()
        );
    }
}
