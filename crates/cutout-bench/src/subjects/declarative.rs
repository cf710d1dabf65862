//! cutout's breaker through a `#[cutout::resilient]` wrapper: the `cutout (count 100)` row's
//! breaker and call, generated instead of written, so the two rows of one run compare the
//! generated call with the hand-written one (issue #31, acceptance 5: within 1.1×).

use std::sync::Arc;

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

/// The generated wrapper; each thread's handle shares it.
pub struct Declarative(Arc<OperationResilient<Direct>>);

impl Subject for Declarative {
    type Handle = Arc<OperationResilient<Direct>>;
    fn handle(&self) -> Self::Handle {
        Arc::clone(&self.0)
    }
}

impl Call for Arc<OperationResilient<Direct>> {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        match self.run(fail) {
            Ok(()) => Outcome::Ok,
            Err(OpError::Refused) => Outcome::Rejected,
            Err(OpError::Failed) => Outcome::Failed,
        }
    }
}

/// The wrapper on a registry of its own, warmed up like the hand-written row.
pub fn count_window() -> Declarative {
    let wrapper = OperationResilient::new(Direct, &Registry::new()).expect("valid settings");
    let subject = Declarative(Arc::new(wrapper));
    assert_eq!(feed(&subject, WARM_UP_CALLS, false), Outcome::Ok);
    subject
}
