//! The breaker's states and the packed state word the hot path reads.
//!
//! The word is one `u64`: bits 0–2 hold the [`State`], bit 3 the *quiet* flag, bit 4 the *fast*
//! flag, bit 5 the *still* flag, bits 6–31 the epoch, bits 32–63 the generation. It is written only under the
//! breaker's lock, after every locked operation, and read without a lock on every call. The
//! generation changes with every transition; the epoch with every locked operation (it tags
//! the success counters, see `shards.rs`).
//!
//! *Quiet* means: the breaker is closed and a fast, successful call would change nothing it
//! records (no consecutive failures to reset, a count window full of successes). A call that
//! sees the flag with its own generation finishes without any shared write.
//!
//! *Still* means: quiet, and staying quiet until the next locked operation whatever the time
//! (no bucket or slice boundary, no refresh due), on a breaker that times no call. The
//! healthy path then needs nothing but the word: admission tests the state and the flag with
//! one mask, and the success compares the generation too.
//!
//! *Fast* means: the breaker is closed, no consecutive failure needs resetting, and no run of
//! successes can trip it before the window's next bucket boundary. A success then only adds
//! one to its thread's success counter (see `shards.rs`).

use std::fmt;

/// The state of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Calls flow; outcomes are recorded and the trip conditions evaluated.
    Closed,
    /// Calls are refused until the break has elapsed.
    Open,
    /// The break has elapsed: a bounded number of probe calls test the dependency.
    HalfOpen,
    /// Probes succeeded and a growing fraction of calls is admitted (only with a recovery ramp).
    Recovering,
    /// Forced open by [`Breaker::isolate`](crate::Breaker::isolate) until
    /// [`Breaker::reset`](crate::Breaker::reset).
    Isolated,
    /// Every call passes and nothing is recorded, until [`Breaker::reset`](crate::Breaker::reset).
    Disabled,
}

impl State {
    /// Every state, in the order of their codes.
    pub const ALL: [State; 6] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::Recovering,
        State::Isolated,
        State::Disabled,
    ];

    /// A stable lower-case name, for logs, metrics and configuration (`"half_open"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::Recovering => "recovering",
            State::Isolated => "isolated",
            State::Disabled => "disabled",
        }
    }

    const fn code(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::Recovering => 3,
            State::Isolated => 4,
            State::Disabled => 5,
        }
    }

    const fn from_code(code: u64) -> State {
        match code {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::Recovering,
            4 => State::Isolated,
            _ => State::Disabled,
        }
    }
}

/// What a health check should make of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// Closed (or disabled): calls flow.
    Healthy,
    /// Half-open or recovering: the dependency is being tested or warmed up. A breaker that
    /// stays recovering is a dependency that answers but stays slow.
    Degraded,
    /// Open or isolated: calls are refused.
    Unhealthy,
}

impl Health {
    /// A stable lower-case name (`"healthy"`, `"degraded"`, `"unhealthy"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Unhealthy => "unhealthy",
        }
    }
}

impl State {
    /// The health this state reports.
    pub const fn health(self) -> Health {
        match self {
            State::Closed | State::Disabled => Health::Healthy,
            State::HalfOpen | State::Recovering => Health::Degraded,
            State::Open | State::Isolated => Health::Unhealthy,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            State::Closed => "Closed",
            State::Open => "Open",
            State::HalfOpen => "HalfOpen",
            State::Recovering => "Recovering",
            State::Isolated => "Isolated",
            State::Disabled => "Disabled",
        };
        f.write_str(name)
    }
}

const STATE_MASK: u64 = 0b111;
const QUIET: u64 = 0b1000;
const FAST: u64 = 0b1_0000;
const STILL: u64 = 0b10_0000;
const EPOCH_SHIFT: u32 = 6;
/// The epoch's 26 bits: it wraps after 67 million locked operations, far beyond how long a
/// call could sit between reading the word and adding to its counter.
pub(crate) const EPOCH_MASK: u32 = (1 << 26) - 1;
#[cfg_attr(feature = "metrics", allow(dead_code))]
const GENERATION_MASK: u64 = !0 << 32;
const GENERATION_SHIFT: u32 = 32;

/// The decoded state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(u64);

impl Word {
    pub(crate) const fn new(
        state: State,
        generation: u32,
        epoch: u32,
        quiet: bool,
        fast: bool,
        still: bool,
    ) -> Word {
        let quiet = if quiet { QUIET } else { 0 };
        let fast = if fast { FAST } else { 0 };
        let still = if still { STILL } else { 0 };
        let epoch = ((epoch & EPOCH_MASK) as u64) << EPOCH_SHIFT;
        Word(
            state.code() | quiet | fast | still | epoch | ((generation as u64) << GENERATION_SHIFT),
        )
    }

    /// Closed and still: one mask and compare (Closed's code is 0).
    #[inline]
    pub(crate) const fn is_closed_still(self) -> bool {
        self.0 & (STATE_MASK | STILL) == STILL
    }

    /// Still, with generation `generation`.
    // With `metrics`, every call is counted and no success skips the lock.
    #[cfg_attr(feature = "metrics", allow(dead_code))]
    #[inline]
    pub(crate) const fn is_still_in(self, generation: u32) -> bool {
        (self.0 ^ ((generation as u64) << GENERATION_SHIFT)) & (GENERATION_MASK | STILL) == STILL
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

    pub(crate) const fn is_quiet(self) -> bool {
        self.0 & QUIET != 0
    }

    pub(crate) const fn is_fast(self) -> bool {
        self.0 & FAST != 0
    }

    pub(crate) const fn epoch(self) -> u32 {
        ((self.0 >> EPOCH_SHIFT) as u32) & EPOCH_MASK
    }

    /// Whether a success of a call admitted in `generation` may be counted without the lock
    /// under this word: still that generation, and quiet (nothing to count) or fast.
    pub(crate) const fn lets_success_off_lock(self, generation: u32) -> bool {
        self.generation() == generation && (self.is_quiet() || self.is_fast())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips_every_state_and_generation_edge() {
        for state in State::ALL {
            for generation in [0, 1, u32::MAX] {
                for flags in 0..8u8 {
                    let (quiet, fast, still) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
                    for epoch in [0, 1, EPOCH_MASK] {
                        let word = Word::new(state, generation, epoch, quiet, fast, still);
                        let word = Word::from_bits(word.bits());
                        assert_eq!(word.state(), state);
                        assert_eq!(word.generation(), generation);
                        assert_eq!(word.epoch(), epoch);
                        assert_eq!((word.is_quiet(), word.is_fast()), (quiet, fast));
                        assert_eq!(word.is_closed_still(), still && state == State::Closed);
                        assert_eq!(word.is_still_in(generation), still);
                        assert!(!word.is_still_in(generation.wrapping_add(1)));
                    }
                }
            }
        }
    }
}
