//! The least a breaker that takes a lock for every failure pays at 10% failures: case (c)'s
//! floor rows.
//!
//! A failure takes a mutex, takes every thread's success count, updates one line of state
//! and publishes a word; a success reads the word and counts on its thread's own line. That is
//! all a breaker must do to order each failure against the other threads' successes (what a
//! count window and the consecutive rule are defined by), with nothing else: no window, no
//! clock, no events. Two ways of counting a success:
//! - [`Counting::Swapped`]: an atomic add on the thread's own line, which a failure swaps
//!   (the shape of cutout's per-core cells, `front/cells.rs`);
//! - [`Counting::Stored`]: a plain store of the thread's own count, which a failure only reads
//!   (a shape cutout gave up: exact counts with it need a fence on every success).
//!
//! # Orderings
//! The word is published with `Release` under the lock and read with `Acquire`, as cutout's
//! state word is; the counts are `Relaxed`, read or swapped under the lock.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;

use crate::{Call, Outcome, Subject};

/// How a success is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// `fetch_add` on the thread's line; a failure swaps every line to zero.
    Swapped,
    /// A load and a store of the thread's own line; a failure reads every line.
    Stored,
    /// `fetch_add` on the thread's line; a failure reads every line and keeps what it read.
    Added,
}

/// Two threads' lines (the harness runs at most two).
const THREADS: usize = 2;

/// A floor subject: its handles share one state.
pub struct LockFloor(Arc<State>);

struct State {
    counting: Counting,
    word: CachePadded<AtomicU64>,
    counts: [CachePadded<AtomicU64>; THREADS],
    /// What a failure updates: the successes it has taken, and the counts it last read.
    taken: CachePadded<Mutex<(u64, [u64; THREADS])>>,
    /// Handles made so far: consecutive handles (one measurement's threads) get distinct lines.
    handles: AtomicUsize,
}

impl LockFloor {
    /// A floor subject counting successes as `counting` says.
    pub fn new(counting: Counting) -> LockFloor {
        LockFloor(Arc::new(State {
            counting,
            word: CachePadded::new(AtomicU64::new(0)),
            counts: Default::default(),
            taken: CachePadded::new(Mutex::new((0, [0; THREADS]))),
            handles: AtomicUsize::new(0),
        }))
    }
}

/// One thread's handle: the shared state and the thread's line.
pub struct LockFloorHandle {
    state: Arc<State>,
    line: usize,
}

impl Subject for LockFloor {
    type Handle = LockFloorHandle;
    fn handle(&self) -> LockFloorHandle {
        LockFloorHandle {
            state: Arc::clone(&self.0),
            line: self.0.handles.fetch_add(1, Ordering::Relaxed) % THREADS,
        }
    }
}

impl Call for LockFloorHandle {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        let state = &*self.state;
        if fail {
            failure(state);
            return Outcome::Failed;
        }
        black_box(state.word.load(Ordering::Acquire));
        let count = &state.counts[self.line];
        match state.counting {
            Counting::Swapped => {
                count.fetch_add(1, Ordering::Relaxed);
            }
            Counting::Stored => {
                count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            Counting::Added => {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        Outcome::Ok
    }
}

#[inline(never)]
fn failure(state: &State) {
    let mut taken = state.taken.lock().unwrap_or_else(|p| p.into_inner());
    let (total, seen) = &mut *taken;
    for (count, seen) in state.counts.iter().zip(seen.iter_mut()) {
        *total += match state.counting {
            Counting::Swapped => count.swap(0, Ordering::Relaxed),
            Counting::Stored | Counting::Added => {
                let now = count.load(Ordering::Relaxed);
                now - std::mem::replace(seen, now)
            }
        };
    }
    state.word.store(*total, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_takes_every_threads_successes_once() {
        for counting in [Counting::Swapped, Counting::Stored, Counting::Added] {
            let floor = LockFloor::new(counting);
            let (mut a, mut b) = (floor.handle(), floor.handle());
            assert_ne!(
                a.line, b.line,
                "one measurement's threads get distinct lines"
            );
            for _ in 0..5 {
                assert_eq!(a.call(false), Outcome::Ok);
                b.call(false);
            }
            assert_eq!(a.call(true), Outcome::Failed);
            assert_eq!(floor.0.word.load(Ordering::Relaxed), 10, "{counting:?}");
            b.call(false);
            b.call(true);
            assert_eq!(floor.0.word.load(Ordering::Relaxed), 11, "{counting:?}");
        }
    }
}
