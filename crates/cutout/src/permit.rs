//! Permits: the right to run one call, and the duty to say how it went.

use crate::Breaker;
use crate::classify::{Outcome, Verdict};
use crate::error::{RejectReason, RetryAfter};
use crate::machine::Role;

/// What a permit carries, packed into one word so it moves in a register: the generation it
/// was issued in (bits 0–31), its role (bits 32–33), whether it is tracked in flight (bit 34),
/// timed (bit 35) or timed by a draw (bit 36: it stands for
/// [`SAMPLE`](crate::machine::sampling::SAMPLE) calls); and when its call started (0 when
/// calls are not timed).
///
/// A refusal travels as a ticket too (bit 37, the reason in bits 38–40, the retry-after in
/// `start` as [`RetryAfter`] encodes it): two registers, where a `Result` holding a
/// [`Rejected`](crate::Rejected) would be written to memory and copied at every level. The
/// `Rejected` is built once, where the caller wants it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    bits: u64,
    pub(crate) start: u64,
}

const ROLE_SHIFT: u32 = 32;
const TRACKED: u64 = 1 << 34;
const TIMED: u64 = 1 << 35;
const DRAWN: u64 = 1 << 36;
const REFUSED: u64 = 1 << 37;
const REASON_SHIFT: u32 = 38;

impl Ticket {
    #[inline]
    pub(crate) fn new(generation: u32, role: Role, start: u64) -> Ticket {
        let role = match role {
            Role::Normal => 0,
            Role::Probe => 1,
            Role::Ramp => 2,
            Role::Uncounted => 3,
        };
        Ticket {
            bits: u64::from(generation) | (role << ROLE_SHIFT),
            start,
        }
    }

    /// A ticket whose call is timed from `start`.
    #[inline]
    pub(crate) fn timed_from(generation: u32, role: Role, start: u64) -> Ticket {
        let mut ticket = Ticket::new(generation, role, start);
        ticket.bits |= TIMED;
        ticket
    }

    /// Whether the call is timed (`start` is meaningful).
    #[inline]
    pub(crate) fn timed(self) -> bool {
        self.bits & TIMED != 0
    }

    /// Whether a draw timed the call (see `machine/sampling.rs`).
    #[inline]
    pub(crate) fn drawn(self) -> bool {
        self.bits & DRAWN != 0
    }

    /// Marks a timed call as timed by a draw.
    #[inline]
    pub(crate) fn set_drawn(&mut self) {
        self.bits |= DRAWN;
    }

    /// A refusal (never handed to a permit).
    #[inline]
    pub(crate) fn refused(reason: RejectReason, retry_after: RetryAfter) -> Ticket {
        let code = match reason {
            RejectReason::Open => 0,
            RejectReason::HalfOpenFull => 1,
            RejectReason::Ramp => 2,
            RejectReason::Isolated => 3,
            RejectReason::Throttled => 4,
        };
        Ticket {
            bits: REFUSED | (code << REASON_SHIFT),
            start: retry_after.0,
        }
    }

    /// Whether this is a [`Ticket::refused`] one.
    #[inline]
    pub(crate) fn is_refused(self) -> bool {
        self.bits & REFUSED != 0
    }

    /// The reason and retry-after of a [`Ticket::refused`] one.
    #[inline]
    pub(crate) fn refusal(self) -> (RejectReason, RetryAfter) {
        let reason = match (self.bits >> REASON_SHIFT) & 0b111 {
            0 => RejectReason::Open,
            1 => RejectReason::HalfOpenFull,
            2 => RejectReason::Ramp,
            3 => RejectReason::Isolated,
            _ => RejectReason::Throttled,
        };
        (reason, RetryAfter(self.start))
    }

    /// A normal ticket, neither timed nor tracked: the plain healthy call.
    #[inline]
    pub(crate) fn is_plain(self) -> bool {
        self.bits >> ROLE_SHIFT == 0
    }

    #[inline]
    pub(crate) fn uncounted() -> Ticket {
        Ticket::new(0, Role::Uncounted, 0)
    }

    #[inline]
    pub(crate) fn generation(self) -> u32 {
        self.bits as u32
    }

    #[inline]
    pub(crate) fn role(self) -> Role {
        match (self.bits >> ROLE_SHIFT) & 0b11 {
            0 => Role::Normal,
            1 => Role::Probe,
            2 => Role::Ramp,
            _ => Role::Uncounted,
        }
    }

    /// Whether the call counts among the tracked calls in flight (see `machine/inflight.rs`).
    #[inline]
    pub(crate) fn tracked(self) -> bool {
        self.bits & TRACKED != 0
    }

    /// Marks the call tracked in flight.
    #[inline]
    pub(crate) fn set_tracked(&mut self) {
        self.bits |= TRACKED;
    }

    /// Takes the ticket out, leaving one whose drop does nothing.
    #[inline]
    fn take(&mut self) -> Ticket {
        std::mem::replace(self, Ticket::uncounted())
    }
}

macro_rules! permit_methods {
    () => {
        /// Records a success.
        #[inline]
        pub fn success(self) {
            self.record(Outcome::Success);
        }

        /// Records a failure.
        #[inline]
        pub fn failure(self) {
            self.record(Outcome::Failure);
        }

        /// Records an ignored outcome: nothing is counted and a probe slot is given back.
        #[inline]
        pub fn ignored(self) {
            self.record(Outcome::Ignored);
        }

        /// Records that the call's dependency asked not to be called for `duration` (an HTTP
        /// 429 or 503 with `Retry-After`): [`Verdict::OpenFor`]. Counted as nothing, it opens
        /// the breaker for `min(duration, max_break_duration)` from now and raises an
        /// [`OpenReason::RetryAfter`](crate::OpenReason::RetryAfter) event, without growing the
        /// break; no time at all is [`ignored`](Self::ignored). Unlike
        /// [`Breaker::open_for`](crate::Breaker::open_for), a control that raises no event and
        /// is not capped, this is an outcome of a call: see [`Verdict::OpenFor`] for every
        /// state.
        ///
        /// ```
        /// use std::time::Duration;
        /// use cutout::{Breaker, OpenReason, State, Transition, clock::ManualClock};
        ///
        /// let clock = ManualClock::new();
        /// let breaker = Breaker::builder("search").clock(clock.clone()).build();
        /// let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        /// let sink = events.clone();
        /// breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
        ///
        /// breaker.try_acquire().unwrap().open_for(Duration::from_secs(7));
        /// assert_eq!(breaker.break_remaining(), Some(Duration::from_secs(7)));
        /// assert!(matches!(
        ///     events.lock().unwrap()[..],
        ///     [Transition::Opened { reason: OpenReason::RetryAfter, .. }]
        /// ));
        /// assert_eq!(breaker.snapshot().calls, 0, "not counted in the window");
        /// clock.advance(Duration::from_secs(7));
        /// assert_eq!(breaker.state(), State::HalfOpen);
        /// ```
        #[inline]
        pub fn open_for(self, duration: std::time::Duration) {
            self.record_verdict(Verdict::OpenFor(duration));
        }

        /// Whether this call is a half-open probe.
        pub fn is_probe(&self) -> bool {
            self.ticket.role() == Role::Probe
        }
    };
}

/// The right to run one call, borrowed from its breaker.
///
/// Record the outcome with [`Permit::record`] (or `success` / `failure` / `ignored`), or a
/// classifier's verdict with [`Permit::record_verdict`] (or `open_for`).
/// Dropping a permit without recording (a cancelled future, an early return, a panic) records
/// nothing and gives a half-open probe slot back. A permit that is never dropped
/// (`mem::forget`, a leaked task) holds its probe slot until `max_wait_in_half_open` runs out
/// (60 s by default), when the next call re-opens the breaker. With the wait turned off
/// (`None`), a forgotten probe permit holds its slot until something else ends the half-open
/// state: another probe's counted failure re-opens it, or `reset`, `isolate` or `disable`;
/// with one probe slot, nothing else will.
#[must_use = "a permit records nothing unless its outcome is recorded"]
#[derive(Debug)]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    ticket: Ticket,
}

impl<'a> Permit<'a> {
    #[inline]
    pub(crate) fn new(breaker: &'a Breaker, ticket: Ticket) -> Self {
        Permit { breaker, ticket }
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        // Recording replaces the drop: a borrowed permit owns nothing else, so skipping its
        // drop leaves nothing behind and saves re-reading the ticket.
        let this = std::mem::ManuallyDrop::new(self);
        this.breaker.finish(this.ticket, outcome);
    }

    /// Records a classifier's [`Verdict`] on the call: an outcome as [`Permit::record`] does,
    /// or [`Verdict::OpenFor`] as [`Permit::open_for`] does.
    ///
    /// ```
    /// use cutout::Breaker;
    /// use cutout::classify::{Classify, DefaultClassifier};
    ///
    /// let breaker = Breaker::new("search", Default::default());
    /// let permit = breaker.try_acquire().unwrap();
    /// let result: Result<u32, ()> = Ok(42);
    /// permit.record_verdict(DefaultClassifier.verdict(&result));
    /// assert_eq!(breaker.snapshot().calls, 1);
    /// ```
    #[inline]
    pub fn record_verdict(self, verdict: Verdict) {
        let this = std::mem::ManuallyDrop::new(self);
        this.breaker.finish_verdict(this.ticket, verdict);
    }

    permit_methods!();
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        let ticket = self.ticket.take();
        self.breaker.release(ticket);
    }
}

/// A [`Permit`] that owns a handle to its breaker, for `'static` futures.
#[must_use = "a permit records nothing unless its outcome is recorded"]
#[derive(Debug)]
pub struct OwnedPermit {
    breaker: Breaker,
    ticket: Ticket,
}

impl OwnedPermit {
    pub(crate) fn new(breaker: Breaker, ticket: Ticket) -> Self {
        OwnedPermit { breaker, ticket }
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        // The ticket is taken out so that the drop that follows (which releases the handle)
        // gives nothing back.
        let ticket = self.ticket.take();
        self.breaker.finish(ticket, outcome);
    }

    /// Records a classifier's [`Verdict`] on the call: as [`Permit::record_verdict`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, State};
    /// use cutout::classify::Verdict;
    ///
    /// let breaker = Breaker::new("search", Default::default());
    /// let permit = breaker.try_acquire_owned().unwrap();
    /// permit.record_verdict(Verdict::OpenFor(Duration::from_secs(30)));
    /// assert_eq!(breaker.state(), State::Open);
    /// ```
    #[inline]
    pub fn record_verdict(mut self, verdict: Verdict) {
        let ticket = self.ticket.take();
        self.breaker.finish_verdict(ticket, verdict);
    }

    permit_methods!();
}

impl Drop for OwnedPermit {
    #[inline]
    fn drop(&mut self) {
        let ticket = self.ticket.take();
        self.breaker.release(ticket);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, SystemClock};

    #[test]
    fn a_refusal_round_trips_through_a_ticket() {
        let reasons = [
            RejectReason::Open,
            RejectReason::HalfOpenFull,
            RejectReason::Ramp,
            RejectReason::Isolated,
        ];
        let lefts = [
            None,
            Some(Duration::ZERO),
            Some(Duration::from_millis(1_500)),
            Some(Duration::from_nanos(u64::MAX)),
        ];
        for reason in reasons {
            for left in lefts {
                let ticket = Ticket::refused(reason, RetryAfter::new(left));
                assert!(ticket.is_refused() && !ticket.is_plain() && !ticket.tracked());
                let (back, after) = ticket.refusal();
                assert_eq!(back, reason);
                let expected = left.map(|d| d.min(Duration::from_nanos((1 << 63) - 2)));
                assert_eq!(after.get(), expected, "saturates 2 ns short of 2^63");
            }
        }
        // An end on the system clock travels as itself and is read when asked.
        let end = SystemClock.now() + 60_000_000_000;
        let ticket = Ticket::refused(RejectReason::Open, RetryAfter::until_system(end));
        let left = ticket.refusal().1.get().expect("an end says when");
        assert!(left <= Duration::from_secs(60) && left > Duration::from_secs(59));
        let past = Ticket::refused(RejectReason::Open, RetryAfter::until_system(1));
        assert_eq!(past.refusal().1.get(), Some(Duration::ZERO));
        assert!(!Ticket::new(7, Role::Normal, 0).is_refused());
        let mut tracked = Ticket::timed_from(7, Role::Normal, 1);
        tracked.set_tracked();
        assert!(!tracked.is_refused() && tracked.tracked() && tracked.timed());
        assert!(!tracked.is_plain() && !tracked.drawn());
        tracked.set_drawn();
        assert!(tracked.drawn() && tracked.tracked() && !tracked.is_refused());
        assert_eq!((tracked.generation(), tracked.role()), (7, Role::Normal));
    }
}
