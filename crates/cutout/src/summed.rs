//! Time slices of counts whose live sum is kept: reading it costs one comparison instead of a
//! pass over every slice, which every locked operation of a time-window breaker did two to
//! four times (publishing, evaluating a trip, the failure baseline).

use std::cell::Cell;
use std::ops::Add;

use crate::slices::{Reset, Slices};

/// [`Slices`] of counts, with the sum of the slices live at one period cached.
///
/// The cache holds the sum for the period of the last read. A later period recomputes it once
/// (slices drop out as periods pass); an add to a period the cache covers keeps it exact,
/// and an add to a later period drops it.
#[derive(Debug, Clone)]
pub(crate) struct SummedSlices<T: Copy> {
    slices: Slices<T>,
    /// The period index and the live sum at it.
    cache: Cell<Option<(u64, T)>>,
}

impl<T: Reset + Copy + Add<Output = T>> SummedSlices<T> {
    /// `len` slices covering `span` nanoseconds (see [`Slices::new`]).
    pub(crate) fn new(span: u64, len: usize) -> SummedSlices<T> {
        SummedSlices {
            slices: Slices::new(span, len),
            cache: Cell::new(None),
        }
    }

    /// Adds `counts` to the slice of `at`; a late add for a period gone by is dropped, as
    /// [`Slices::at`] does.
    pub(crate) fn add(&mut self, at: u64, counts: T) {
        let index = self.slices.index(at);
        let Some(slot) = self.slices.at(at) else {
            return;
        };
        *slot = *slot + counts;
        match self.cache.get() {
            // The slice is live at the cached period: the sum moves with it. (Had `at` emptied
            // its slot first, the period it held was too old to be in the sum.)
            Some((cached, sum)) if index <= cached && self.slices.live_at(index, cached) => {
                self.cache.set(Some((cached, sum + counts)));
            }
            Some((cached, _)) if index > cached => self.cache.set(None),
            _ => {}
        }
    }

    /// The sum of the slices live at `now`.
    pub(crate) fn sum(&self, now: u64) -> T {
        let index = self.slices.index(now);
        if let Some((cached, sum)) = self.cache.get()
            && cached == index
        {
            return sum;
        }
        let sum = self
            .slices
            .live(now)
            .fold(T::default(), |sum, value| sum + *value);
        self.cache.set(Some((index, sum)));
        sum
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.slices.next_boundary(now)
    }

    pub(crate) fn period(&self) -> u64 {
        self.slices.period()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slices.len()
    }

    pub(crate) fn clear(&mut self) {
        self.slices.clear();
        self.cache.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Reset for u64 {
        fn reset(&mut self) {
            *self = 0;
        }
    }

    /// Sums of slices kept by hand: every value with its time, summed over the live periods.
    fn reference(adds: &[(u64, u64)], period: u64, len: u64, now: u64) -> u64 {
        let current = now / period;
        let oldest = current.saturating_sub(len - 1);
        // A late add (its slot already holds a newer period) was dropped; the rest count if
        // their period is live and their slot has not been reused since.
        let mut newest_per_slot = std::collections::HashMap::new();
        let mut kept = Vec::new();
        for &(at, value) in adds {
            let index = at / period;
            let newest = newest_per_slot.entry(index % len).or_insert(index);
            if index < *newest {
                continue;
            }
            *newest = index;
            kept.push((index, value));
        }
        kept.iter()
            .filter(|(index, _)| {
                *index >= oldest && *index <= current && newest_per_slot[&(index % len)] == *index
            })
            .map(|(_, value)| value)
            .sum()
    }

    proptest! {
        /// Adds and reads at times around a clock that moves forward: some late (past slices,
        /// some of them gone), some early (as a thread that read the clock earlier and took
        /// the lock later). The kept sum always equals a fresh sum over the live slices.
        #[test]
        fn the_kept_sum_is_the_live_sum(
            steps in prop::collection::vec(
                (0u64..30, -100i64..20, 1u64..5, any::<bool>()),
                1..300,
            )
        ) {
            let (period, len) = (10, 6);
            let mut slices: SummedSlices<u64> = SummedSlices::new(period * len, len as usize);
            let mut adds = Vec::new();
            let mut now = 200;
            for (forward, offset, value, read) in steps {
                now += forward;
                let at = now.saturating_add_signed(offset);
                if read {
                    prop_assert_eq!(slices.sum(at), reference(&adds, period, len, at));
                } else {
                    slices.add(at, value);
                    adds.push((at, value));
                }
            }
            slices.clear();
            prop_assert_eq!(slices.sum(now), 0);
        }
    }
}
