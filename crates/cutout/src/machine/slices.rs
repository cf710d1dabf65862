//! Time slices: a ring of per-period values that drop out whole as time passes. The trip
//! window's buckets and the baselines' slices are both made of these.
//!
//! The ring holds exactly the `len` periods up to the newest one written, so a slot needs no
//! tag saying which period it holds: its position and the newest period's index say it. A
//! write to a later period opens the periods up to it, emptying the slots of the periods they
//! push out. (The slots used to carry a `u64` tag each: 8 of the 16 bytes of a failure-baseline
//! slice, and 8 of 32 of a trip-window bucket. A narrower tag would wrap: a `u32` index of 1 ms
//! periods after 49 days, and a slot untouched for that long would come back to life.)

/// A value that can be emptied in place (without allocating, unlike assigning a new one).
pub(crate) trait Reset: Clone + Default {
    fn reset(&mut self);
}

impl Reset for u32 {
    fn reset(&mut self) {
        *self = 0;
    }
}

/// `len` periods of `period` nanoseconds each, in consecutive slots of a ring (wrapping at its
/// end) while they are among the `len` newest.
#[derive(Debug, Clone)]
pub(crate) struct Slices<T> {
    period: u64,
    /// The index of the newest period written: the ring holds `newest − len + 1 ..= newest`
    /// (the ones below 0, at first, as empty values).
    newest: u64,
    /// The slot of the newest period: finding a period's slot is a subtraction, not a `%`.
    newest_slot: usize,
    slots: Box<[T]>,
}

impl<T: Reset> Slices<T> {
    /// `len` slices covering `span` nanoseconds (each at least 1 ns).
    pub(crate) fn new(span: u64, len: usize) -> Slices<T> {
        let len = len.max(1);
        Slices {
            period: span.div_ceil(len as u64).max(1),
            newest: 0,
            newest_slot: 0,
            slots: vec![T::default(); len].into_boxed_slice(),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn len64(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The span the slices cover, in nanoseconds (their period × their number).
    pub(crate) fn span(&self) -> u64 {
        self.period.saturating_mul(self.len64())
    }

    #[cfg(test)]
    pub(crate) fn period(&self) -> u64 {
        self.period
    }

    /// The index of the period of `now`.
    pub(crate) fn index(&self, now: u64) -> u64 {
        now / self.period
    }

    /// Whether period `index` is inside the span at period `current`. (Whether the ring still
    /// holds it is another matter: not once a write `len` periods later has pushed it out.)
    pub(crate) fn live_at(&self, index: u64, current: u64) -> bool {
        index <= current && index >= current.saturating_sub(self.len64() - 1)
    }

    /// Whether a write to period `index` would land (the ring holds it, or it is newer than
    /// the newest) and count at period `current`.
    pub(crate) fn holds(&self, index: u64, current: u64) -> bool {
        self.newest.saturating_sub(index) < self.len64() && self.live_at(index, current)
    }

    /// The slot of the period `back` periods before the newest (`back < len`).
    fn slot_back(&self, back: u64) -> usize {
        let back = back as usize;
        if back <= self.newest_slot {
            self.newest_slot - back
        } else {
            self.newest_slot + self.slots.len() - back
        }
    }

    /// The value for the period of `now` (see [`Slices::at_index`]).
    pub(crate) fn at(&mut self, now: u64) -> Option<&mut T> {
        self.at_index(self.index(now))
    }

    /// The value for period `index`, after opening the periods up to it if it is newer than
    /// the newest; `None` if the ring no longer holds it (a late write for a period `len` or
    /// more before the newest).
    pub(crate) fn at_index(&mut self, index: u64) -> Option<&mut T> {
        let len = self.slots.len();
        if index > self.newest {
            // Open `newest + 1 ..= index`, each in the slot after the one before, emptying the
            // period `len` before it. At most `len` of them: after an idle spell of a whole
            // ring, every slot starts over (and which one holds the newest is free).
            let ahead = index - self.newest;
            let mut slot = self.newest_slot;
            for _ in 0..ahead.min(len as u64) {
                slot += 1;
                if slot == len {
                    slot = 0;
                }
                self.slots[slot].reset();
            }
            self.newest = index;
            self.newest_slot = slot;
            return Some(&mut self.slots[slot]);
        }
        let back = self.newest - index;
        if back >= len as u64 {
            return None;
        }
        let slot = self.slot_back(back);
        Some(&mut self.slots[slot])
    }

    /// The values of the periods inside the span at `now` that the ring holds, oldest first.
    pub(crate) fn live(&self, now: u64) -> impl Iterator<Item = &T> + Clone {
        let len = self.len64();
        let current = self.index(now);
        let first = current
            .saturating_sub(len - 1)
            .max(self.newest.saturating_sub(len - 1));
        let last = current.min(self.newest);
        let (start, count) = if first <= last {
            (self.slot_back(self.newest - first), last - first + 1)
        } else {
            (0, 0)
        };
        self.slots[start..]
            .iter()
            .chain(self.slots[..start].iter())
            .take(count as usize)
    }

    /// When the period after the one of `now` starts.
    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        self.index(now)
            .saturating_add(1)
            .saturating_mul(self.period)
    }

    /// Empties every slot. The ring still holds the same periods, now empty: a late write for
    /// one of them lands, one for a period before them is refused.
    pub(crate) fn clear(&mut self) {
        for value in &mut self.slots {
            value.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_drop_out_whole_and_late_writes_are_refused() {
        let mut slices: Slices<u32> = Slices::new(30, 3); // periods of 10
        *slices.at(0).unwrap() += 1;
        *slices.at(15).unwrap() += 2;
        assert_eq!(slices.live(29).sum::<u32>(), 3);
        assert_eq!(
            slices.live(30).sum::<u32>(),
            2,
            "period 0 dropped out at 30"
        );
        *slices.at(30).unwrap() += 4; // takes the slot of period 0, emptied first
        assert_eq!(slices.live(30).sum::<u32>(), 6);
        assert!(slices.at(0).is_none(), "the ring holds periods 1 to 3");
        assert!(!slices.holds(0, 2) && slices.holds(1, 3) && slices.holds(4, 4));
        assert!(!slices.holds(1, 4), "held, but not live at 4");
        *slices.at(10).unwrap() += 8; // late, but still held
        assert_eq!(slices.live(30).sum::<u32>(), 14);
        // A read behind the newest write sees the periods both live then and held.
        assert_eq!(slices.live(20).sum::<u32>(), 10);
        assert_eq!(slices.next_boundary(31), 40);
        slices.clear();
        assert_eq!(slices.live(30).sum::<u32>(), 0);
        assert!(slices.at(0).is_none(), "clearing keeps the periods held");
    }

    #[test]
    fn an_idle_spell_longer_than_the_ring_empties_it() {
        let mut slices: Slices<u32> = Slices::new(30, 3);
        for t in [0, 10, 20] {
            *slices.at(t).unwrap() += 1;
        }
        assert_eq!(slices.live(20).sum::<u32>(), 3);
        // Periods 1 000 000 and 1 000 001 are opened empty along with the written 1 000 002.
        *slices.at(10_000_020).unwrap() += 5;
        assert_eq!(slices.live(10_000_020).sum::<u32>(), 5);
        assert_eq!(slices.live(20).sum::<u32>(), 0, "old periods are gone");
        assert_eq!(slices.live(10_000_040).sum::<u32>(), 5);
        assert_eq!(slices.live(10_000_050).sum::<u32>(), 0);
    }

    #[test]
    fn indices_past_any_narrow_tag_are_exact() {
        // 1 ns periods: the index is the time, far past where a u32 would wrap.
        let mut slices: Slices<u32> = Slices::new(4, 4);
        let base = (1u64 << 32) * 3 + 5;
        *slices.at(5).unwrap() += 1;
        *slices.at(base).unwrap() += 2;
        *slices.at(base + 2).unwrap() += 4;
        assert_eq!(slices.live(base + 3).sum::<u32>(), 6);
        assert_eq!(slices.live(base + 4).sum::<u32>(), 4);
        assert_eq!(
            slices.live(5).sum::<u32>(),
            0,
            "5 aliases base mod 2^32, not here"
        );
        *slices.at(u64::MAX).unwrap() += 8;
        assert_eq!(slices.live(u64::MAX).sum::<u32>(), 8);
        assert_eq!(slices.next_boundary(u64::MAX), u64::MAX);
    }
}
