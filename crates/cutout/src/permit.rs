//! Permits: the right to run one call, and the duty to say how it went.

use crate::Breaker;
use crate::classify::Outcome;
use crate::machine::Role;

/// What a permit carries: the generation it was issued in, its role, when its call started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    pub(crate) generation: u32,
    pub(crate) role: Role,
    pub(crate) start: u64,
    /// Whether the call counts among the tracked calls in flight (see `inflight.rs`).
    pub(crate) tracked: bool,
}

impl Ticket {
    pub(crate) fn new(generation: u32, role: Role, start: u64) -> Ticket {
        Ticket {
            generation,
            role,
            start,
            tracked: false,
        }
    }

    pub(crate) fn uncounted() -> Ticket {
        Ticket::new(0, Role::Uncounted, 0)
    }

    /// Takes the ticket out, leaving one whose drop does nothing.
    fn take(&mut self) -> Ticket {
        std::mem::replace(self, Ticket::uncounted())
    }
}

macro_rules! permit_methods {
    () => {
        /// Records the call's outcome.
        pub fn record(mut self, outcome: Outcome) {
            let ticket = self.ticket.take();
            self.breaker().finish(ticket, outcome);
        }

        /// Records a success.
        pub fn success(self) {
            self.record(Outcome::Success);
        }

        /// Records a failure.
        pub fn failure(self) {
            self.record(Outcome::Failure);
        }

        /// Records an ignored outcome: nothing is counted and a probe slot is given back.
        pub fn ignored(self) {
            self.record(Outcome::Ignored);
        }

        /// Whether this call is a half-open probe.
        pub fn is_probe(&self) -> bool {
            self.ticket.role == Role::Probe
        }
    };
}

/// The right to run one call, borrowed from its breaker.
///
/// Record the outcome with [`Permit::record`] (or `success` / `failure` / `ignored`).
/// Dropping a permit without recording (a cancelled future, an early return, a panic) records
/// nothing and gives a half-open probe slot back: no slot can leak.
#[must_use = "a permit records nothing unless its outcome is recorded"]
#[derive(Debug)]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    ticket: Ticket,
}

impl<'a> Permit<'a> {
    pub(crate) fn new(breaker: &'a Breaker, ticket: Ticket) -> Self {
        Permit { breaker, ticket }
    }

    fn breaker(&self) -> &Breaker {
        self.breaker
    }

    permit_methods!();
}

impl Drop for Permit<'_> {
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

    fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    permit_methods!();
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        let ticket = self.ticket.take();
        self.breaker.release(ticket);
    }
}
