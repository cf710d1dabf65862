//! A pod's caller: a bounded pool of concurrent calls with a queue in front of it, and the
//! retry rules an attempt's failure is judged by.
//!
//! A request holds one pool slot from its first attempt to its end, retries and their
//! backoffs included (a retry runs in the task of its request, as with a client library's
//! retry layer). A request that finds every slot taken waits in the queue, first come first
//! served; one that finds the queue full as well fails at once, and one still waiting at its
//! deadline fails then.

use std::collections::VecDeque;
use std::time::Duration;

use cutout::{Breaker, State};
use serde::Deserialize;

/// How a failed attempt is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryPolicy {
    /// Retry while attempts are left and the backoff ends before the deadline.
    Naive,
    /// cutout-tower's `BreakerRetry` rules: also stop when the breaker that judged the attempt
    /// is open now, or when what is left of the deadline after the backoff is shorter than
    /// the breaker's normal latency (or is nothing, while it has none). Without a breaker (a
    /// disabled one) there is nothing to ask, and it retries as [`RetryPolicy::Naive`] does.
    BreakerAware,
}

impl RetryPolicy {
    /// Whether a request whose attempt just failed at `now` is retried after `backoff`, its
    /// deadline being `deadline` (nanoseconds) and `breaker` the breaker that admitted the
    /// attempt. The caller has already checked that attempts are left.
    pub fn retries(self, now: u64, backoff: Duration, deadline: u64, breaker: &Breaker) -> bool {
        let resumes = now.saturating_add(crate::duration::nanos(backoff));
        if resumes >= deadline {
            return false;
        }
        match self {
            RetryPolicy::Naive => true,
            RetryPolicy::BreakerAware if breaker.state() == State::Disabled => true,
            RetryPolicy::BreakerAware => {
                if matches!(breaker.state(), State::Open | State::Isolated) {
                    return false;
                }
                let left = Duration::from_nanos(deadline - resumes);
                breaker.normal_latency().is_none_or(|normal| left >= normal)
            }
        }
    }
}

/// What became of a request that arrived at the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// It took a slot: its first attempt starts now.
    Start,
    /// Every slot is taken: it waits in the queue.
    Queued,
    /// The queue is full too: it fails now.
    Full,
}

/// One pod's pool of concurrent calls and its queue of waiting requests (by request id).
#[derive(Debug, Clone)]
pub struct Pool {
    free: u32,
    queue_limit: u32,
    /// Waiting requests, oldest first; an id whose request has left (its deadline passed) is
    /// skipped when it comes up.
    waiting: VecDeque<usize>,
    /// How many of `waiting` are still waiting.
    live: u32,
}

impl Pool {
    /// A pool of `slots` concurrent calls with room for `queue` waiting requests.
    pub fn new(slots: u32, queue: u32) -> Pool {
        Pool {
            free: slots,
            queue_limit: queue,
            waiting: VecDeque::new(),
            live: 0,
        }
    }

    /// A request `id` arrives.
    pub fn arrive(&mut self, id: usize) -> Arrival {
        if self.free > 0 {
            self.free -= 1;
            Arrival::Start
        } else if self.live < self.queue_limit {
            self.waiting.push_back(id);
            self.live += 1;
            Arrival::Queued
        } else {
            Arrival::Full
        }
    }

    /// A waiting request left the queue (its deadline passed): it no longer counts against
    /// the queue's room, and is skipped when it comes up.
    pub fn leave(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    /// A request gives its slot back. The slot goes to the oldest waiting request for which
    /// `still_waiting` holds (returned: its first attempt starts now), or back to the pool.
    pub fn release(&mut self, mut still_waiting: impl FnMut(usize) -> bool) -> Option<usize> {
        while let Some(id) = self.waiting.pop_front() {
            if still_waiting(id) {
                self.live -= 1;
                return Some(id);
            }
        }
        self.free += 1;
        None
    }

    /// Slots free now.
    pub fn free(&self) -> u32 {
        self.free
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> u32 {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_take_slots_then_wait_then_fail() {
        let mut pool = Pool::new(2, 1);
        assert_eq!(pool.arrive(0), Arrival::Start);
        assert_eq!(pool.arrive(1), Arrival::Start);
        assert_eq!(pool.arrive(2), Arrival::Queued);
        assert_eq!(pool.arrive(3), Arrival::Full);
        assert_eq!((pool.free(), pool.waiting()), (0, 1));
        assert_eq!(
            pool.release(|_| true),
            Some(2),
            "the waiting request takes the slot"
        );
        assert_eq!(pool.release(|_| true), None);
        assert_eq!(pool.free(), 1);
    }

    #[test]
    fn a_request_that_left_the_queue_is_skipped_and_frees_its_room() {
        let mut pool = Pool::new(1, 2);
        assert_eq!(pool.arrive(0), Arrival::Start);
        assert_eq!(pool.arrive(1), Arrival::Queued);
        assert_eq!(pool.arrive(2), Arrival::Queued);
        assert_eq!(pool.arrive(3), Arrival::Full);
        // Request 1's deadline passes while it waits.
        pool.leave();
        assert_eq!(pool.arrive(4), Arrival::Queued, "its room is free again");
        assert_eq!(
            pool.release(|id| id != 1),
            Some(2),
            "first come, first served"
        );
        assert_eq!(pool.release(|id| id != 1), Some(4));
        assert_eq!(pool.release(|id| id != 1), None);
        assert_eq!((pool.free(), pool.waiting()), (1, 0));
    }

    #[test]
    fn slots_are_conserved_over_any_sequence() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut pool = Pool::new(4, 3);
        let mut running = 0u32;
        let mut waiting: Vec<usize> = Vec::new();
        for id in 0..10_000 {
            if rng.bool() {
                match pool.arrive(id) {
                    Arrival::Start => running += 1,
                    Arrival::Queued => waiting.push(id),
                    Arrival::Full => assert_eq!(waiting.len(), 3),
                }
            } else if rng.u8(..4) == 0 && !waiting.is_empty() {
                waiting.remove(0);
                pool.leave();
            } else if running > 0 {
                let left = waiting.clone();
                match pool.release(|id| left.contains(&id)) {
                    Some(id) => assert_eq!(waiting.remove(0), id),
                    None => running -= 1,
                }
            }
            assert_eq!(pool.free() + running, 4);
            assert_eq!(pool.waiting() as usize, waiting.len());
        }
    }
}
