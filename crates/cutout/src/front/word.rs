//! The packed state word the hot path reads.
//!
//! The word is one `u64`: bits 0–2 hold the [`State`], bit 3 the *still* flag, bit 4 the *fast*
//! flag, bit 5 the *exact* flag, bit 6 the *throttling* flag, bit 7 the *shadow* flag, bits
//! 32–63 the generation. It is written only under the
//! breaker's lock, after every locked operation, and read without a lock on every call. The
//! generation changes with every transition.
//!
//! The flags are what the machine tells the hot path about the consumers of a success (the trip
//! window, the consecutive-failure count, the failure baseline, the latency baseline and the
//! trip rules), each computed from the machine's state when it publishes:
//!
//! - *Still*: a success would change no consumer at all, whenever it lands, until the next
//!   locked operation. Closed, no consecutive failures, a count window full of successes, no
//!   failure baseline, and no call timed (so no latency sample and no deadline). The healthy
//!   call then needs nothing but the word.
//! - *Fast*: closed, the latency baseline (if any) armed, and no run of successes landing
//!   before `fast_until` can trip the breaker (see `Machine::successes_can_trip`). A success
//!   may then be counted in its thread's cell (`cells.rs`), which the next locked operation
//!   folds into every consumer and follows with the trip rules.
//! - *Exact*: every call is timed (a sampled breaker at low traffic; see
//!   `Machine::publish`).
//! - *Throttling*: closed, adaptive throttling on, and a refusal probability above zero
//!   (published beside the word as a threshold; see `machine/throttle.rs`). Never still nor
//!   fast with it: every admitted call's outcome takes the lock, which recomputes the
//!   probability.
//! - *Shadow*: the breaker is in shadow mode (configured, or switched live by
//!   `Breaker::shadow`): the hot path decides no refusal of its own (an isolated or throttled
//!   call goes to the lock; an open breaker publishes its break's end as 0 for the same
//!   reason), so the machine turns every would-be refusal into an uncounted admission. Not a
//!   state and no new generation: a switch changes this flag alone.

use crate::state::State;

const STATE_MASK: u64 = 0b111;
const STILL: u64 = 0b1000;
const FAST: u64 = 0b1_0000;
const EXACT: u64 = 0b10_0000;
const THROTTLING: u64 = 0b100_0000;
const SHADOW: u64 = 0b1000_0000;
const GENERATION_SHIFT: u32 = 32;

/// The decoded state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(u64);

/// The flags of a [`Word`] (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Flags {
    pub(crate) still: bool,
    pub(crate) fast: bool,
    pub(crate) exact: bool,
    pub(crate) throttling: bool,
    pub(crate) shadow: bool,
}

impl Word {
    pub(crate) const fn new(state: State, generation: u32, flags: Flags) -> Word {
        let still = if flags.still { STILL } else { 0 };
        let fast = if flags.fast { FAST } else { 0 };
        let exact = if flags.exact { EXACT } else { 0 };
        let throttling = if flags.throttling { THROTTLING } else { 0 };
        let shadow = if flags.shadow { SHADOW } else { 0 };
        Word(
            state.code()
                | still
                | fast
                | exact
                | throttling
                | shadow
                | ((generation as u64) << GENERATION_SHIFT),
        )
    }

    /// Closed and still: one mask and compare (Closed's code is 0).
    #[inline]
    pub(crate) const fn is_closed_still(self) -> bool {
        self.0 & (STATE_MASK | STILL) == STILL
    }

    pub(crate) const fn from_bits(bits: u64) -> Word {
        Word(bits)
    }

    pub(crate) const fn bits(self) -> u64 {
        self.0
    }

    pub(crate) const fn state(self) -> State {
        State::from_code(self.0 & STATE_MASK)
    }

    pub(crate) const fn generation(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32
    }

    /// Whether a success of a call admitted in `generation` may be counted in its thread's
    /// cell under this word: the same generation, and fast.
    #[inline]
    pub(crate) const fn lets_success_off_lock(self, generation: u32) -> bool {
        self.generation() == generation && self.0 & FAST != 0
    }

    /// Whether every call is timed.
    #[inline]
    pub(crate) const fn is_exact(self) -> bool {
        self.0 & EXACT != 0
    }

    /// Whether adaptive throttling refuses some calls (a draw against the published threshold
    /// decides each).
    #[inline]
    pub(crate) const fn is_throttling(self) -> bool {
        self.0 & THROTTLING != 0
    }

    /// Whether the breaker is in shadow mode (it refuses nothing; see the module docs).
    #[inline]
    pub(crate) const fn is_shadow(self) -> bool {
        self.0 & SHADOW != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips_every_state_and_generation_edge() {
        for state in State::ALL {
            for generation in [0, 1, u32::MAX] {
                for bits in 0..32u8 {
                    let flags = Flags {
                        still: bits & 1 != 0,
                        fast: bits & 2 != 0,
                        exact: bits & 4 != 0,
                        throttling: bits & 8 != 0,
                        shadow: bits & 16 != 0,
                    };
                    let word = Word::from_bits(Word::new(state, generation, flags).bits());
                    assert_eq!(word.state(), state);
                    assert_eq!(word.generation(), generation);
                    assert_eq!(word.is_exact(), flags.exact);
                    assert_eq!(word.is_throttling(), flags.throttling);
                    assert_eq!(word.is_shadow(), flags.shadow);
                    assert_eq!(
                        word.is_closed_still(),
                        flags.still && state == State::Closed
                    );
                    assert_eq!(word.lets_success_off_lock(generation), flags.fast);
                    assert!(!word.lets_success_off_lock(generation.wrapping_add(1)));
                }
            }
        }
    }
}
