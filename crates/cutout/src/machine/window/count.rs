//! A count window: the marks of the last `n` counted calls in a ring.

use super::{Mark, Totals};

/// A call's code in the ring: bit 0 failure, bits 1–7 its slow weight.
const FAILURE: u8 = 0b01;

/// The last `size` counted calls. Memory: one byte per call, allocated up front so that no
/// call ever allocates.
#[derive(Debug, Clone)]
pub(crate) struct CountWindow {
    size: usize,
    ring: Vec<u8>,
    head: usize,
    failures: u64,
    slow: u64,
}

impl CountWindow {
    pub(crate) fn new(size: u32) -> CountWindow {
        CountWindow {
            size: size as usize,
            ring: Vec::with_capacity(size as usize),
            head: 0,
            failures: 0,
            slow: 0,
        }
    }

    pub(crate) fn record(&mut self, mark: Mark) {
        let code = (if mark.failure { FAILURE } else { 0 }) | (mark.slow.min(127) << 1);
        if self.ring.len() < self.size {
            self.ring.push(code);
        } else {
            let old = std::mem::replace(&mut self.ring[self.head], code);
            self.failures -= u64::from(old & FAILURE != 0);
            self.slow -= u64::from(old >> 1);
            // A compare, not a `%`: a failure folds in a run of successes one by one.
            self.head += 1;
            if self.head == self.size {
                self.head = 0;
            }
        }
        self.failures += u64::from(mark.failure);
        self.slow += u64::from(mark.slow.min(127));
    }

    /// Records `n` successes: a ring's worth or more leaves it full of successes.
    pub(crate) fn record_successes(&mut self, n: u64) {
        if n >= self.size as u64 {
            self.ring.clear();
            self.ring.resize(self.size, 0);
            self.head = 0;
            self.failures = 0;
            self.slow = 0;
            return;
        }
        for _ in 0..n {
            self.record(Mark {
                failure: false,
                slow: 0,
            });
        }
    }

    /// The totals as if `n` more successes had been recorded, changing nothing: the window
    /// fills, then the `n` oldest calls slide out.
    pub(crate) fn totals_after_successes(&self, n: u64) -> Totals {
        let free = (self.size - self.ring.len()) as u64;
        let pushed = usize::try_from(n.saturating_sub(free)).unwrap_or(usize::MAX);
        let mut totals = self.totals();
        totals.calls = (totals.calls + n).min(self.size as u64);
        if pushed >= self.size {
            return Totals {
                calls: self.size as u64,
                ..Totals::default()
            };
        }
        // The oldest call is at `head` (0 until the ring is full); calls pushed out beyond the
        // ring's are among the new successes.
        for i in 0..pushed.min(self.ring.len()) {
            let old = self.ring[(self.head + i) % self.size];
            totals.failures -= u64::from(old & FAILURE != 0);
            totals.slow -= u64::from(old >> 1);
        }
        totals
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.size as u64
    }

    pub(crate) fn totals(&self) -> Totals {
        Totals {
            calls: self.ring.len() as u64,
            failures: self.failures,
            slow: self.slow,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.ring.clear();
        self.head = 0;
        self.failures = 0;
        self.slow = 0;
    }

    pub(crate) fn is_full_and_clean(&self) -> bool {
        self.ring.len() == self.size && self.failures == 0 && self.slow == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: Mark = Mark::OK;
    const FAIL: Mark = Mark::FAIL;
    const SLOW_OK: Mark = Mark::SLOW_OK;

    #[test]
    fn slides_over_the_last_n_calls() {
        let mut window = CountWindow::new(3);
        window.record(FAIL);
        window.record(SLOW_OK);
        assert_eq!(
            window.totals(),
            Totals {
                calls: 2,
                failures: 1,
                slow: 1
            }
        );
        window.record(OK);
        window.record(OK); // pushes the failure out
        assert_eq!(
            window.totals(),
            Totals {
                calls: 3,
                failures: 0,
                slow: 1
            }
        );
        assert!(!window.is_full_and_clean());
        window.record(OK); // pushes the slow call out
        assert!(window.is_full_and_clean());
        window.clear();
        assert_eq!(window.totals(), Totals::default());
    }

    #[test]
    fn bulk_successes_slide_like_single_ones() {
        let mut bulk = CountWindow::new(4);
        let mut single = CountWindow::new(4);
        for window in [&mut bulk, &mut single] {
            window.record(FAIL);
            window.record(SLOW_OK);
        }
        bulk.record_successes(3);
        for _ in 0..3 {
            single.record(OK);
        }
        assert_eq!(bulk.totals(), single.totals());
        assert_eq!(
            bulk.totals(),
            Totals {
                calls: 4,
                failures: 0,
                slow: 1
            }
        );
        bulk.record_successes(10);
        assert!(bulk.is_full_and_clean());
    }

    proptest::proptest! {
        /// Any mix of single marks and runs of successes: a run slides the window exactly as
        /// that many single successes would, filling, wrapping or replacing the whole ring.
        #[test]
        fn runs_of_successes_slide_like_single_ones(
            size in 1u32..9,
            steps in proptest::collection::vec((0u64..20, 0u8..3), 1..60),
        ) {
            let mut bulk = CountWindow::new(size);
            let mut single = CountWindow::new(size);
            for (n, kind) in steps {
                // A run of `n` successes, then one mark of the drawn kind.
                proptest::prop_assert_eq!(bulk.totals_after_successes(n), {
                    let mut ahead = bulk.clone();
                    for _ in 0..n {
                        ahead.record(OK);
                    }
                    ahead.totals()
                });
                bulk.record_successes(n);
                for _ in 0..n {
                    single.record(OK);
                }
                proptest::prop_assert_eq!(bulk.totals(), single.totals());
                let mark = [OK, FAIL, SLOW_OK][usize::from(kind)];
                bulk.record(mark);
                single.record(mark);
                proptest::prop_assert_eq!(bulk.totals(), single.totals());
                proptest::prop_assert_eq!(bulk.is_full_and_clean(), single.is_full_and_clean());
            }
        }
    }
}
