//! Signals from outside a breaker's own calls: [`Breaker::trip_on_signal`], for what a breaker
//! cannot see in its own window (the failures a fleet of breakers sees together), and its
//! mirror [`Breaker::end_break_on_signal`], for a recovery proven elsewhere (a health check
//! that passed, a peer whose probes closed its breaker).
//!
//! An early end judges its evidence by when it was gathered: the caller's `age`, taken back
//! from the breaker's precise time read when the call begins. Evidence from before the break
//! began is stale, a trip that lands between that read and the lock included (the evidence
//! then predates the break it would end). What it can no longer see: a recovery proven in the
//! moment before a concurrent trip, which the next check or peer signal proves again. What it
//! still cannot tell: an opening stamped by a lagging reading (`Clock::recent`, a
//! `CoarseClock`'s resolution) looks up to that lag older than it was, so evidence from within
//! the lag before it passes as fresh; its probes still decide. The
//! break it ends counts as served for as long as it lasted (a ramp after it is as long as its
//! fraction of that), while the growth stays, so a probe that fails still grows the break.

use std::time::Duration;

use crate::{BreakEndReason, Breaker};

impl Breaker {
    /// Opens a closed breaker because a signal from outside its own calls says its dependency
    /// is failing: an opening like any trip (it passes the [open
    /// gate](crate::BreakerBuilder::open_gate), grows the break, is jittered, raises an
    /// [`Opened`](crate::Transition::Opened) event of reason
    /// [`OpenReason::Signal`](crate::OpenReason::Signal)), then half-opens and probes on its
    /// own. Returns whether this signal opened it: an open, half-open, recovering, isolated or
    /// disabled breaker is left as it is, and so is one whose own trip rules opened it first
    /// (the call takes the lock as a call does, and folds and judges the breaker's own counts
    /// first).
    ///
    /// ```
    /// use cutout::{Breaker, OpenReason, State, Transition};
    ///
    /// let breaker = Breaker::new("search", cutout::Settings::default());
    /// let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let seen = std::sync::Arc::clone(&reasons);
    /// breaker.subscribe(move |event| {
    ///     if let Transition::Opened { reason, .. } = event.transition {
    ///         seen.lock().unwrap().push(reason);
    ///     }
    /// });
    /// assert!(breaker.trip_on_signal());
    /// assert_eq!(breaker.state(), State::Open);
    /// assert!(!breaker.trip_on_signal(), "already open");
    /// assert_eq!(*reasons.lock().unwrap(), [OpenReason::Signal]);
    /// ```
    pub fn trip_on_signal(&self) -> bool {
        let now = self.shared.hot.clock.recent();
        self.operate(now, None, |m| {
            let transition = m.trip_on_signal(now);
            (transition.is_some(), transition)
        })
    }

    /// Ends an open breaker's break early because evidence from outside its own calls says
    /// its dependency is back (DESIGN §2 "Giving traffic back"): the breaker becomes half-open
    /// at once and raises a [`BreakEnded`](crate::Transition::BreakEnded) event with `reason`;
    /// its own probes then decide, as after any break (a probe that fails re-opens it with a
    /// grown break, since the consecutive opens stay until it closes).
    ///
    /// `age` is how long ago the evidence was gathered, on any clock the caller trusts (a
    /// health check's start, a peer's close as its store timed it). Evidence gathered before
    /// this break began is stale: it says nothing about what opened the breaker, so it does
    /// nothing. That includes a trip that lands while this call waits for the breaker's lock:
    /// the evidence predates it. The time is read precisely
    /// ([`Clock::now`](crate::clock::Clock::now), not the lagging
    /// [`recent`](crate::clock::Clock::recent)), since a trip may be stamped precisely (a timed
    /// call's end); a lagging read would judge evidence from just after the opening stale.
    ///
    /// The break counts as served for as long as it lasted: a
    /// [recovery ramp](crate::Recovery) after the probes lasts its fraction of that, and the
    /// snapshot's `current_break` shows it. The break growth is kept: a probe that fails opens
    /// it for the break the next opening would have had anyway.
    ///
    /// Returns whether the break ended. Nothing happens to a breaker that is closed, half-open
    /// (including one whose break has already elapsed), recovering, isolated or disabled, nor
    /// to one serving a break its dependency asked for (a classifier's
    /// [`OpenFor`](crate::classify::Verdict::OpenFor), an HTTP `Retry-After`) or that an
    /// operator forced ([`open_for`](Breaker::open_for), [`open_until`](Breaker::open_until)):
    /// those are served whole.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{BreakEndReason, Breaker, State};
    ///
    /// let breaker = Breaker::new("search", cutout::Settings::default());
    /// breaker.trip_on_signal();
    /// // A health check that started before the breaker opened proves nothing.
    /// assert!(!breaker.end_break_on_signal(BreakEndReason::HealthCheck, Duration::from_secs(60)));
    /// // One that started after it did ends the break: the next call is a probe.
    /// assert!(breaker.end_break_on_signal(BreakEndReason::HealthCheck, Duration::ZERO));
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// assert!(!breaker.end_break_on_signal(BreakEndReason::HealthCheck, Duration::ZERO));
    /// ```
    pub fn end_break_on_signal(&self, reason: BreakEndReason, age: Duration) -> bool {
        let now = self.shared.hot.clock.now();
        let age = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
        self.operate(now, None, |m| {
            let transition = m.end_break_on_signal(now, reason, age);
            (transition.is_some(), transition)
        })
    }

    /// Whether [`end_break_on_signal`](Self::end_break_on_signal) could end the break now,
    /// given fresh evidence: the breaker is open on a break of its own (not one its dependency
    /// asked for, nor one an operator forced) that has not yet elapsed. A health checker asks
    /// it to check only what a pass can help, and to leave a host that asked not to be called
    /// alone. Changes nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Settings};
    ///
    /// let breaker = Breaker::new("search", Settings::default());
    /// assert!(!breaker.break_may_end(), "closed");
    /// breaker.trip_on_signal();
    /// assert!(breaker.break_may_end());
    /// breaker.open_for(Duration::from_secs(30));
    /// assert!(!breaker.break_may_end(), "an operator's break is served whole");
    /// ```
    pub fn break_may_end(&self) -> bool {
        let now = self.shared.hot.clock.now();
        self.read(|m, _| m.break_may_end(now))
    }
}
