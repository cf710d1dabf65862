//! Hostile review (rev31b): a trait whose where-clause bounds one of its own associated types
//! (`where Self::Error: Debug`). The macro copies the trait's where-clause onto the wrapper
//! struct and its inherent impl, where `Self` is the wrapper, which has no `Error`.
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Service
where
    Self::Reply: std::fmt::Debug,
{
    type Reply;

    #[breaker(consecutive_failures = 1)]
    fn call(&self) -> Result<Self::Reply, E>;
}

struct Backend;
impl Service for Backend {
    type Reply = u8;
    fn call(&self) -> Result<u8, E> {
        Ok(7)
    }
}

#[test]
fn a_where_clause_on_an_associated_type_is_kept() {
    let service = ServiceResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(service.call(), Ok(7));
}
