//! Slots: how many of something run at once, under a limit, taken and given back without a lock
//! (the detached attempts' bound and the retry budget both count with it).

use std::sync::atomic::{AtomicUsize, Ordering};

/// A count of slots taken, never past the limit each taker gives.
///
/// # Orderings
/// The count bounds itself: every change is one read-modify-write of it, and the
/// read-modify-writes of one atomic are totally ordered whatever their ordering, so `Relaxed`
/// keeps it exact against the limit each take gives. It publishes nothing else; a reader (the
/// metrics, the admin page, a test) may see it a moment late.
#[derive(Debug, Default)]
pub struct Slots(AtomicUsize);

impl Slots {
    /// Takes a slot if fewer than `limit` are taken; whether it did.
    pub fn try_take(&self, limit: usize) -> bool {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back a slot taken by [`try_take`](Slots::try_take).
    pub fn give_back(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    /// How many are taken now.
    pub fn taken(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn the_limit_holds_under_contention_and_every_slot_comes_back() {
        let slots = Arc::new(Slots::default());
        let peak = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let (slots, peak) = (Arc::clone(&slots), Arc::clone(&peak));
                scope.spawn(move || {
                    for _ in 0..2_000 {
                        if slots.try_take(3) {
                            peak.fetch_max(slots.taken(), Ordering::Relaxed);
                            slots.give_back();
                        }
                    }
                });
            }
        });
        assert!(peak.load(Ordering::Relaxed) <= 3);
        assert_eq!(slots.taken(), 0);
        assert!(!slots.try_take(0), "a limit of 0 takes nothing");
    }
}
