//! Hostile review (rev31b), held: an associated error type bounded `From<Rejected>`, and
//! two methods of one name under exclusive `cfg`s.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, dead_code)]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
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
pub trait Svc {
    type Error: From<Rejected> + std::fmt::Debug;
    type Item;

    #[breaker(consecutive_failures = 1)]
    fn call(&self) -> Result<Self::Item, Self::Error>;

    #[cfg(all())]
    #[breaker(consecutive_failures = 1)]
    fn twin(&self) -> Result<u8, E>;

    #[cfg(any())]
    #[breaker(consecutive_failures = 1)]
    fn twin(&self) -> Result<u16, E>;
}

struct Backend;
impl Svc for Backend {
    type Error = E;
    type Item = u8;
    fn call(&self) -> Result<u8, E> {
        Err(E)
    }
    fn twin(&self) -> Result<u8, E> {
        Ok(2)
    }
}

#[test]
fn associated_error_types_and_cfg_twins() {
    let registry = Registry::new();
    let svc = SvcResilient::new(Backend, &registry).unwrap();
    assert_eq!(svc.call(), Err(E));
    assert_eq!(svc.call(), Err(E));
    assert_eq!(svc.twin(), Ok(2));
    assert_eq!(registry.get("Svc#call()").unwrap().snapshot().calls, 1);
}
