//! failsafe 1.3: a `StateMachine` (parking_lot mutex around the policy), driven through
//! `CircuitBreaker::call`.

use failsafe::failure_policy::{ConsecutiveFailures, FailurePolicy, consecutive_failures};
use failsafe::{CircuitBreaker, Config, StateMachine, backoff};

use super::{LONG_BREAK, WARM_UP_CALLS, feed, trip};
use crate::{Call, Outcome, Subject};

/// A failsafe breaker; handles are clones of the `Arc`-backed state machine.
pub struct Failsafe<P>(StateMachine<P, ()>);

impl<P: FailurePolicy + Send> Subject for Failsafe<P> {
    type Handle = StateMachine<P, ()>;
    fn handle(&self) -> Self::Handle {
        self.0.clone()
    }
}

impl<P: FailurePolicy + Send> Call for StateMachine<P, ()> {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        match CircuitBreaker::call(self, || if fail { Err(()) } else { Ok(()) }) {
            Ok(()) => Outcome::Ok,
            Err(failsafe::Error::Rejected) => Outcome::Rejected,
            Err(failsafe::Error::Inner(())) => Outcome::Failed,
        }
    }
}

/// 5 consecutive failures (failsafe has no count window); 10% failures never trip it.
pub fn consecutive() -> Failsafe<ConsecutiveFailures<backoff::Constant>> {
    let policy = consecutive_failures(5, backoff::constant(LONG_BREAK));
    let subject = Failsafe(Config::new().failure_policy(policy).build());
    feed(&subject, WARM_UP_CALLS, false);
    subject
}

/// `Config::new()`: success rate over a 30 s window (EMA + windowed adder), or else 5
/// consecutive failures.
pub fn default_settings() -> Failsafe<impl FailurePolicy + Send + Sync> {
    let subject = Failsafe(Config::new().build());
    feed(&subject, WARM_UP_CALLS, false);
    subject
}

/// Opened by 5 consecutive failures, with a one-hour break.
pub fn open() -> Failsafe<ConsecutiveFailures<backoff::Constant>> {
    let policy = consecutive_failures(5, backoff::constant(LONG_BREAK));
    let subject = Failsafe(Config::new().failure_policy(policy).build());
    trip(&subject, 5);
    subject
}
