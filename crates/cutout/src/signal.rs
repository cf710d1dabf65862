//! Trips from outside a breaker's own calls: [`Breaker::trip_on_signal`], for what a breaker
//! cannot see in its own window (the failures a fleet of breakers sees together).

use crate::Breaker;

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
}
