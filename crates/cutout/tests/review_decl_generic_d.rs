//! Hostile review of the declarative layer (issue #31): a generic trait whose type parameter
//! is named `D`. A first version spelled the wrapper's own delegate parameter `D` whatever
//! the trait named (E0403); it now picks a name the trait does not use.
#![cfg(feature = "macros")]

use cutout::{Registry, Rejected};

/// A type of the test's.
#[derive(Debug, PartialEq)]
pub struct E;

impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Store<D> {
    #[breaker(name = "store-d")]
    fn get(&self, key: D) -> Result<u8, E>;
}

struct S;
impl Store<String> for S {
    fn get(&self, _: String) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn a_trait_parameter_named_d_is_not_the_delegate() {
    let w = StoreResilient::new(S, &Registry::new()).unwrap();
    assert_eq!(w.get("k".to_owned()), Ok(1));
}
