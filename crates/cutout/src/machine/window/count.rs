//! A count window: the marks of the last `n` counted calls in a ring.

use super::{Mark, Totals};

/// A call's code in the ring: bit 0 failure, bit 1 slow, bit 2 timed, bit 3 slow and timed by
/// a draw (a count window of 8,192 calls or more samples once full, see
/// `machine/sampling.rs`).
const FAILURE: u8 = 0b0001;
const SLOW: u8 = 0b0010;
const TIMED: u8 = 0b0100;
const SLOW_DRAWN: u8 = 0b1000;

fn code(mark: Mark) -> u8 {
    (if mark.failure { FAILURE } else { 0 })
        | (if mark.slow { SLOW } else { 0 })
        | (if mark.timed { TIMED } else { 0 })
        | (if mark.slow && mark.drawn {
            SLOW_DRAWN
        } else {
            0
        })
}

const fn bit(code: u8, flag: u8) -> u64 {
    (code & flag != 0) as u64
}

/// `flag` of `code` as a one in lane `index` of a [`Lanes`] word.
const fn lane(code: u8, flag: u8, index: u32) -> u64 {
    bit(code, flag) << (16 * index)
}

/// The four flags of replaced calls, summed in one word: a 16-bit lane per flag, added from
/// a table of the 16 codes, so that a run written over the ring costs a load and an add per
/// call instead of four tests and adds.
#[derive(Default)]
struct Lanes {
    sums: [u64; 4],
}

impl Lanes {
    /// The most calls one pass may add before a lane could carry into the next.
    const MOST: usize = u16::MAX as usize;

    /// Each code's flags, one per lane (failure, slow, timed, slow and drawn).
    const SPREAD: [u64; 16] = {
        let mut spread = [0u64; 16];
        let mut code = 0;
        while code < 16 {
            let code8 = code as u8;
            spread[code] = lane(code8, FAILURE, 0)
                | lane(code8, SLOW, 1)
                | lane(code8, TIMED, 2)
                | lane(code8, SLOW_DRAWN, 3);
            code += 1;
        }
        spread
    };

    /// Writes `code` over every call of `chunk` (at most [`Lanes::MOST`] of them), adding the
    /// replaced calls' flags.
    fn add_replaced(&mut self, chunk: &mut [u8], code: u8) {
        let mut lanes = 0u64;
        for slot in chunk {
            lanes += Self::SPREAD[usize::from(*slot & 0x0f)];
            *slot = code;
        }
        for (lane, sum) in self.sums.iter_mut().enumerate() {
            *sum += (lanes >> (16 * lane)) & 0xffff;
        }
    }

    /// The replaced calls that had `flag`.
    fn total(&self, flag: u8) -> u64 {
        self.sums[flag.trailing_zeros() as usize]
    }
}

/// The last `size` counted calls. Memory: one byte per call, allocated up front so that no
/// call ever allocates.
#[derive(Debug, Clone)]
pub(crate) struct CountWindow {
    size: usize,
    ring: Vec<u8>,
    head: usize,
    failures: u64,
    slow: u64,
    timed: u64,
    slow_drawn: u64,
}

impl CountWindow {
    pub(crate) fn new(size: u32) -> CountWindow {
        CountWindow {
            size: size as usize,
            ring: Vec::with_capacity(size as usize),
            head: 0,
            failures: 0,
            slow: 0,
            timed: 0,
            slow_drawn: 0,
        }
    }

    pub(crate) fn record(&mut self, mark: Mark) {
        let code = code(mark);
        if self.ring.len() < self.size {
            self.ring.push(code);
        } else {
            let old = std::mem::replace(&mut self.ring[self.head], code);
            self.failures -= bit(old, FAILURE);
            self.slow -= bit(old, SLOW);
            self.timed -= bit(old, TIMED);
            self.slow_drawn -= bit(old, SLOW_DRAWN);
            // A compare, not a `%`: a failure folds in a run of successes one by one.
            self.head += 1;
            if self.head == self.size {
                self.head = 0;
            }
        }
        self.failures += bit(code, FAILURE);
        self.slow += bit(code, SLOW);
        self.timed += bit(code, TIMED);
        self.slow_drawn += bit(code, SLOW_DRAWN);
    }

    /// Records `n` successes, `timed` of them timed (recorded last): a ring's worth or more
    /// leaves it full of successes.
    pub(crate) fn record_successes(&mut self, n: u64, timed: u64) {
        let timed = timed.min(n);
        if n >= self.size as u64 {
            let timed = timed.min(self.size as u64) as usize;
            self.ring.clear();
            self.ring.resize(self.size - timed, 0);
            self.ring.resize(self.size, TIMED);
            self.head = 0;
            self.failures = 0;
            self.slow = 0;
            self.timed = timed as u64;
            self.slow_drawn = 0;
            return;
        }
        // Fewer than a ring's worth: the untimed ones first, then the timed ones, each run
        // filling the free slots and then replacing the oldest calls in place.
        self.push_run((n - timed) as usize, 0);
        self.push_run(timed as usize, TIMED);
    }

    /// Records `n` calls of one `code` (a success's: no failure or slow flag), `n` less than
    /// the ring's size: pushed while the ring fills, then written over the oldest in one or two
    /// slices (one pass, no per-call branch on the ring's fill), the replaced calls' flags
    /// taken off the totals.
    fn push_run(&mut self, n: usize, code: u8) {
        let free = (self.size - self.ring.len()).min(n);
        self.ring.resize(self.ring.len() + free, code);
        let mut left = n - free;
        let mut gone = Lanes::default();
        while left > 0 {
            let end = (self.head + left).min(self.size);
            for chunk in self.ring[self.head..end].chunks_mut(Lanes::MOST) {
                gone.add_replaced(chunk, code);
            }
            left -= end - self.head;
            self.head = if end == self.size { 0 } else { end };
        }
        self.failures -= gone.total(FAILURE);
        self.slow -= gone.total(SLOW);
        self.timed = self.timed - gone.total(TIMED) + bit(code, TIMED) * n as u64;
        self.slow_drawn -= gone.total(SLOW_DRAWN);
    }

    /// The totals as if `n` more successes, `timed` of them timed, had been recorded, changing
    /// nothing: the window fills, then the `n` oldest calls slide out.
    pub(crate) fn totals_after_successes(&self, n: u64, timed: u64) -> Totals {
        let mut ahead = self.totals();
        let timed = timed.min(n);
        let kept = n.min(self.size as u64);
        // The new successes that stay: the last `kept` of them, timed ones last.
        let timed_kept = timed.min(kept);
        let free = (self.size - self.ring.len()) as u64;
        let pushed = usize::try_from(n.saturating_sub(free)).unwrap_or(usize::MAX);
        ahead.calls = (ahead.calls + n).min(self.size as u64);
        // The oldest call is at `head` (0 until the ring is full); calls pushed out beyond the
        // ring's own are among the new successes.
        for i in 0..pushed.min(self.ring.len()) {
            let old = self.ring[(self.head + i) % self.size];
            ahead.failures -= bit(old, FAILURE);
            ahead.slow -= bit(old, SLOW);
            ahead.timed -= bit(old, TIMED);
            ahead.slow_drawn -= bit(old, SLOW_DRAWN);
        }
        ahead.timed += timed_kept;
        ahead
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.size as u64
    }

    pub(crate) fn totals(&self) -> Totals {
        Totals {
            calls: self.ring.len() as u64,
            failures: self.failures,
            slow: self.slow,
            timed: self.timed,
            slow_drawn: self.slow_drawn,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.ring.clear();
        self.head = 0;
        self.failures = 0;
        self.slow = 0;
        self.timed = 0;
        self.slow_drawn = 0;
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
    const TIMED_OK: Mark = Mark {
        timed: true,
        ..Mark::OK
    };

    const SLOW_DRAWN_FAIL: Mark = Mark {
        failure: true,
        slow: true,
        timed: true,
        drawn: true,
    };

    fn totals(calls: u64, failures: u64, slow: u64, timed: u64) -> Totals {
        Totals {
            calls,
            failures,
            slow,
            timed,
            slow_drawn: 0,
        }
    }

    #[test]
    fn slides_over_the_last_n_calls() {
        let mut window = CountWindow::new(3);
        window.record(FAIL);
        window.record(SLOW_OK);
        assert_eq!(window.totals(), totals(2, 1, 1, 1));
        window.record(OK);
        window.record(OK); // pushes the failure out
        assert_eq!(window.totals(), totals(3, 0, 1, 1));
        assert!(!window.is_full_and_clean());
        window.record(OK); // pushes the slow call out
        assert!(window.is_full_and_clean());
        window.clear();
        assert_eq!(window.totals(), Totals::default());
    }

    #[test]
    fn a_slow_sample_slides_out_with_what_it_stood_for() {
        let mut window = CountWindow::new(3);
        window.record(SLOW_DRAWN_FAIL);
        window.record(SLOW_OK);
        let held = window.totals();
        assert_eq!((held.slow, held.slow_drawn, held.failures), (2, 1, 1));
        assert_eq!(
            window.totals_after_successes(2, 0).slow_drawn,
            0,
            "read ahead"
        );
        window.record(OK);
        window.record(OK); // pushes the sample out, and its weight with it
        assert_eq!(window.totals(), totals(3, 0, 1, 1));
    }

    #[test]
    fn bulk_successes_slide_like_single_ones() {
        let mut bulk = CountWindow::new(4);
        let mut single = CountWindow::new(4);
        for window in [&mut bulk, &mut single] {
            window.record(FAIL);
            window.record(SLOW_OK);
        }
        bulk.record_successes(3, 1);
        for mark in [OK, OK, TIMED_OK] {
            single.record(mark);
        }
        assert_eq!(bulk.totals(), single.totals());
        assert_eq!(bulk.totals(), totals(4, 0, 1, 2));
        bulk.record_successes(10, 0);
        assert!(bulk.is_full_and_clean());
    }

    #[test]
    fn a_run_longer_than_a_lane_holds_counts_every_replaced_call() {
        // More replaced failures than a 16-bit lane counts in one pass.
        let size = 3 * Lanes::MOST as u32;
        let mut window = CountWindow::new(size);
        for i in 0..size {
            window.record(if i % 2 == 0 { FAIL } else { SLOW_OK });
        }
        let failures = window.totals().failures;
        assert_eq!(failures, u64::from(size).div_ceil(2));
        // Replaces the oldest 2.5 lanes' worth of calls: half failures, half slow.
        let run = 5 * Lanes::MOST as u64 / 2;
        window.record_successes(run, 0);
        let replaced_failures = run.div_ceil(2);
        assert_eq!(window.totals().failures, failures - replaced_failures);
        assert_eq!(
            window.totals().slow,
            u64::from(size) / 2 - (run - replaced_failures)
        );
        assert_eq!(window.totals().calls, u64::from(size));
    }

    proptest::proptest! {
        /// Any mix of single marks and runs of successes (some of them timed, last): a run
        /// slides the window exactly as that many single successes would, filling, wrapping or
        /// replacing the whole ring, and reading a run ahead changes nothing.
        #[test]
        fn runs_of_successes_slide_like_single_ones(
            size in 1u32..9,
            steps in proptest::collection::vec((0u64..20, 0u64..20, 0u8..5), 1..60),
        ) {
            let mut bulk = CountWindow::new(size);
            let mut single = CountWindow::new(size);
            for (n, timed, kind) in steps {
                let timed = timed.min(n);
                let run: Vec<Mark> = (0..n).map(|i| if i >= n - timed { TIMED_OK } else { OK }).collect();
                proptest::prop_assert_eq!(bulk.totals_after_successes(n, timed), {
                    let mut ahead = bulk.clone();
                    for &mark in &run {
                        ahead.record(mark);
                    }
                    ahead.totals()
                });
                bulk.record_successes(n, timed);
                for &mark in &run {
                    single.record(mark);
                }
                proptest::prop_assert_eq!(bulk.totals(), single.totals());
                let mark = [OK, FAIL, SLOW_OK, TIMED_OK, SLOW_DRAWN_FAIL][usize::from(kind)];
                bulk.record(mark);
                single.record(mark);
                proptest::prop_assert_eq!(bulk.totals(), single.totals());
                proptest::prop_assert_eq!(bulk.is_full_and_clean(), single.is_full_and_clean());
            }
        }
    }
}
