//! Time slices of counts whose live sum is kept: reading it costs one comparison instead of a
//! pass over every slice, which every locked operation of a time-window breaker did two to
//! four times (publishing, evaluating a trip, the failure baseline).

use std::cell::Cell;
use std::ops::Add;

use crate::machine::slices::{Reset, Slices};

/// Counts kept per slice: added to and summed in a type of their own, so that a slice may
/// keep narrower fields than a sum over many of them needs.
pub(crate) trait Counts: Reset + Copy {
    /// What adds are given in and sums are kept in.
    type Sum: Copy + Default + Add<Output = Self::Sum> + std::fmt::Debug;

    /// Adds `n` (saturating where a field is narrower than its sum's); returns what was
    /// added, so that a kept sum stays the sum of the slices.
    fn add(&mut self, n: Self::Sum) -> Self::Sum;

    /// These counts as a sum.
    fn widen(self) -> Self::Sum;
}

/// [`Slices`] of counts, with the sum of the slices live at one period cached.
///
/// The cache holds the sum for the period of the last read. A later period recomputes it once
/// (slices drop out as periods pass); an add to a period the cache covers keeps it exact,
/// and an add to a later period drops it.
#[derive(Debug, Clone)]
pub(crate) struct SummedSlices<T: Counts> {
    slices: Slices<T>,
    /// The period index and the live sum at it.
    cache: Cell<Option<(u64, T::Sum)>>,
}

impl<T: Counts> SummedSlices<T> {
    /// `len` slices covering `span` nanoseconds (see [`Slices::new`]).
    pub(crate) fn new(span: u64, len: usize) -> SummedSlices<T> {
        SummedSlices {
            slices: Slices::new(span, len),
            cache: Cell::new(None),
        }
    }

    /// Adds `counts` to the slice of `at`; a late add for a period the ring no longer holds is
    /// dropped, as [`Slices::at`] does.
    pub(crate) fn add(&mut self, at: u64, counts: T::Sum) {
        let index = self.slices.index(at);
        let Some(slot) = self.slices.at_index(index) else {
            return;
        };
        let added = slot.add(counts);
        match self.cache.get() {
            // The slice is live at the cached period: the sum moves with it. (The periods `at`
            // may have opened pushed out only periods `len` or more before it: too old to be
            // in the sum.)
            Some((cached, sum)) if index <= cached && self.slices.live_at(index, cached) => {
                self.cache.set(Some((cached, sum + added)));
            }
            Some((cached, _)) if index > cached => self.cache.set(None),
            _ => {}
        }
    }

    /// The sum of the slices live at `now`.
    pub(crate) fn sum(&self, now: u64) -> T::Sum {
        let index = self.slices.index(now);
        if let Some((cached, sum)) = self.cache.get()
            && cached == index
        {
            return sum;
        }
        let sum = self
            .slices
            .live(now)
            .fold(T::Sum::default(), |sum, value| sum + value.widen());
        self.cache.set(Some((index, sum)));
        sum
    }

    /// Whether counts added at `at` would land and count in the sum at `now`.
    pub(crate) fn holds(&self, at: u64, now: u64) -> bool {
        self.slices
            .holds(self.slices.index(at), self.slices.index(now))
    }

    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.slices.next_boundary(now)
    }

    #[cfg(test)]
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

    impl Counts for u64 {
        type Sum = u64;

        fn add(&mut self, n: u64) -> u64 {
            *self += n;
            n
        }

        fn widen(self) -> u64 {
            self
        }
    }

    /// Sums of slices kept by hand: every value with its time, summed over the live periods
    /// the ring still holds.
    fn reference(adds: &[(u64, u64)], period: u64, len: u64, now: u64) -> u64 {
        let current = now / period;
        // The ring holds the `len` periods up to the newest written: an add for a period
        // before them was dropped, and one kept drops out once a write `len` periods later
        // pushes it out.
        let mut newest = 0;
        let mut kept = Vec::new();
        for &(at, value) in adds {
            let index = at / period;
            if index + len <= newest {
                continue;
            }
            newest = newest.max(index);
            kept.push((index, value));
        }
        kept.iter()
            .filter(|(index, _)| {
                *index + len > newest && *index + len > current && *index <= current
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
