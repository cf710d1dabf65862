//! Hostile review of the declarative layer (issue #31): a trait method named `delegate`. A
//! first version's inherent `delegate(&self)` hid it, so calling it on the wrapper did not
//! compile; the accessors are associated functions now.
#![cfg(feature = "macros")]

use cutout::{Registry, Rejected};

/// The queue's error.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

/// A work queue whose method hands a task to a worker: `delegate`.
#[cutout::resilient]
trait Queue {
    #[breaker(name = "queue")]
    fn delegate(&self, task: u32) -> Result<u32, E>;
}

struct Q;
impl Queue for Q {
    fn delegate(&self, task: u32) -> Result<u32, E> {
        Ok(task)
    }
}

#[test]
fn a_method_named_delegate_goes_through_its_breaker() {
    let registry = Registry::new();
    let w = QueueResilient::new(Q, &registry).unwrap();
    let answer: Result<u32, E> = w.delegate(7);
    assert_eq!(answer, Ok(7));
    assert_eq!(registry.snapshot("queue").unwrap().calls, 1);
}
