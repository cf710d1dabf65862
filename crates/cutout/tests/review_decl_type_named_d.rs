//! Hostile review of the declarative layer (issue #31): a user type named `D` in a method
//! signature. A first version's delegate parameter `D` hid it inside the generated impl, so
//! the signature no longer matched the trait's (E0053).
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

/// A document (a user type that happens to be spelled `D`).
#[derive(Debug, PartialEq)]
pub struct D(u8);

#[cutout::resilient]
trait Docs {
    #[breaker(name = "docs")]
    fn fetch(&self, id: u8) -> Result<D, E>;

    fn size(&self, doc: &D) -> usize;
}

struct Store;
impl Docs for Store {
    fn fetch(&self, id: u8) -> Result<D, E> {
        Ok(D(id))
    }
    fn size(&self, _: &D) -> usize {
        1
    }
}

#[test]
fn a_user_type_named_d() {
    let w = DocsResilient::new(Store, &Registry::new()).unwrap();
    assert_eq!(w.fetch(3), Ok(D(3)));
    assert_eq!(w.size(&D(1)), 1);
}
