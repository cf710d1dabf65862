//! Hostile review (rev31b): a retried method with a `&mut` parameter. The docs: "Arguments
//! are cloned for each attempt, so a retried method's parameters must be `Clone` (references
//! are)". A `&mut Vec<u8>` is a reference, but not `Clone`: the trait does not compile
//! (a sync retry could reborrow it for each attempt).
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
pub trait Reader {
    #[breaker(consecutive_failures = 5, retry(attempts = 2))]
    fn read_into(&self, buf: &mut Vec<u8>) -> Result<usize, E>;
}

struct Backend;
impl Reader for Backend {
    fn read_into(&self, buf: &mut Vec<u8>) -> Result<usize, E> {
        buf.push(1);
        if buf.len() < 2 { Err(E) } else { Ok(buf.len()) }
    }
}

#[test]
fn a_retried_method_takes_a_mut_reference() {
    let reader = ReaderResilient::new(Backend, &Registry::new()).unwrap();
    let mut buf = Vec::new();
    assert_eq!(reader.read_into(&mut buf), Ok(2));
}
