//! Time slices: a ring of per-period values that drop out whole as time passes. The trip
//! window's buckets and the baselines' slices are both made of these.

/// A value that can be emptied in place (without allocating, unlike assigning a new one).
pub(crate) trait Reset: Clone + Default {
    fn reset(&mut self);
}

impl Reset for u32 {
    fn reset(&mut self) {
        *self = 0;
    }
}

/// `len` periods of `period` nanoseconds each; the value for a period lives in slot
/// `period index % len`, tagged with that index.
#[derive(Debug, Clone)]
pub(crate) struct Slices<T> {
    period: u64,
    slots: Vec<(u64, T)>,
}

impl<T: Reset> Slices<T> {
    /// `len` slices covering `span` nanoseconds (each at least 1 ns).
    pub(crate) fn new(span: u64, len: usize) -> Slices<T> {
        let len = len.max(1);
        Slices {
            period: span.div_ceil(len as u64).max(1),
            // Period 0 with a default value is indistinguishable from an unused slot.
            slots: vec![(0, T::default()); len],
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn period(&self) -> u64 {
        self.period
    }

    /// The index of the period of `now`.
    pub(crate) fn index(&self, now: u64) -> u64 {
        now / self.period
    }

    /// Whether period `index` is still inside the span at period `current`.
    pub(crate) fn live_at(&self, index: u64, current: u64) -> bool {
        index <= current && index >= current.saturating_sub(self.slots.len() as u64 - 1)
    }

    /// The value for the period of `now`, emptied first if its slot held an older period;
    /// `None` if the slot already holds a newer one (a late write for a period gone by).
    pub(crate) fn at(&mut self, now: u64) -> Option<&mut T> {
        let index = self.index(now);
        let len = self.slots.len() as u64;
        let (tag, value) = &mut self.slots[(index % len) as usize];
        if *tag > index {
            return None;
        }
        if *tag != index {
            *tag = index;
            value.reset();
        }
        Some(value)
    }

    /// The values of the periods still inside the span at `now`.
    pub(crate) fn live(&self, now: u64) -> impl Iterator<Item = &T> + Clone {
        let current = self.index(now);
        self.slots
            .iter()
            .filter(move |(tag, _)| self.live_at(*tag, current))
            .map(|(_, value)| value)
    }

    /// When the period after the one of `now` starts.
    pub(crate) fn next_boundary(&self, now: u64) -> u64 {
        (self.index(now) + 1).saturating_mul(self.period)
    }

    pub(crate) fn clear(&mut self) {
        for (tag, value) in &mut self.slots {
            *tag = 0;
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
        *slices.at(30).unwrap() += 4; // reuses the slot of period 0, emptied first
        assert_eq!(slices.live(30).sum::<u32>(), 6);
        assert!(slices.at(0).is_none(), "the slot holds a newer period");
        assert_eq!(slices.next_boundary(31), 40);
        slices.clear();
        assert_eq!(slices.live(30).sum::<u32>(), 0);
    }
}
