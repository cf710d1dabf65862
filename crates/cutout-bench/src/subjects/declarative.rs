//! cutout's breaker through a `#[cutout::resilient]` wrapper: the `cutout (count 100)` row's
//! breaker and call, generated instead of written, so the two rows of one run compare the
//! generated call with the hand-written one (issue #31, acceptance 5: within 1.1×).

use cutout::{Registry, Rejected};

use super::{WARM_UP_CALLS, feed};
use crate::{Call, Outcome, Subject};

/// The protected operation's error, with the refusal the wrapper returns.
#[derive(Debug)]
pub enum OpError {
    /// The operation failed.
    Failed,
    /// The breaker refused the call.
    Refused,
}

impl From<Rejected> for OpError {
    fn from(_: Rejected) -> Self {
        OpError::Refused
    }
}

/// The operation, as a client trait; the settings are `cutout::count_window`'s.
#[cutout::resilient]
pub trait Operation {
    /// Succeeds unless `fail`.
    #[breaker(
        name = "bench-declarative",
        consecutive_failures = 5,
        failure_ratio = 0.5,
        adaptive = false,
        window_size = 100
    )]
    fn run(&self, fail: bool) -> Result<(), OpError>;
}

/// The delegate: the hand-written row's closure.
pub struct Direct;

impl Operation for Direct {
    #[inline(always)]
    fn run(&self, fail: bool) -> Result<(), OpError> {
        if fail { Err(OpError::Failed) } else { Ok(()) }
    }
}

/// The generated wrappers' registry: each thread's handle is a wrapper of its own over the
/// shared breaker, as the hand-written row's handle is a clone of the breaker.
pub struct Declarative(Registry);

impl Subject for Declarative {
    type Handle = OperationResilient<Direct>;
    fn handle(&self) -> Self::Handle {
        OperationResilient::new(Direct, &self.0).expect("the same settings")
    }
}

impl Call for OperationResilient<Direct> {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        match self.run(fail) {
            Ok(()) => Outcome::Ok,
            Err(OpError::Refused) => Outcome::Rejected,
            Err(OpError::Failed) => Outcome::Failed,
        }
    }
}

/// The wrapper's breaker on a registry of its own, warmed up like the hand-written row.
pub fn count_window() -> Declarative {
    let subject = Declarative(Registry::new());
    assert_eq!(feed(&subject, WARM_UP_CALLS, false), Outcome::Ok);
    subject
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_row_runs_the_hand_written_rows_settings() {
        let generated = count_window();
        let breaker = generated.0.get("bench-declarative").unwrap();
        let hand_written = super::super::cutout::count_window();
        let hand_written = hand_written.handle();
        assert_eq!(breaker.settings(), hand_written.settings());
        assert_eq!(breaker.state(), hand_written.state());
    }
}
