//! Hostile review of the declarative layer (issue #31): a tower or async user clones clients
//! into tasks. The wrapper holds a delegate and breakers (cheap `Clone` handles sharing one
//! state); a first version was not `Clone` when the delegate was, so a trait with a `Clone`
//! supertrait could not be wrapped at all.
#![cfg(feature = "macros")]

use cutout::{Registry, Rejected};

/// The client's error.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Client: Clone + Send + Sync + 'static {
    #[breaker(name = "cloned")]
    fn get(&self) -> Result<u8, E>;
}

#[derive(Clone)]
struct C;
impl Client for C {
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn a_clone_of_the_wrapper_shares_its_breakers() {
    let registry = Registry::new();
    let w = ClientResilient::new(C, &registry).unwrap();
    let other = w.clone();
    assert_eq!(other.get(), Ok(1));
    assert_eq!(w.get(), Ok(1));
    assert_eq!(registry.snapshot("cloned").unwrap().calls, 2);
}
