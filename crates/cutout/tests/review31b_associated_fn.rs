//! Hostile review (rev31b): a trait with an associated function (no receiver), such as
//! `fn name() -> &'static str`. It is refused ("a function without `self` cannot be
//! delegated"), though `<D as Trait>::name()` delegates it as the docs say methods without
//! `#[breaker]` are: "passed to the delegate as they are".
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
pub trait Named {
    fn name() -> &'static str;

    #[breaker(consecutive_failures = 3)]
    fn get(&self) -> Result<u8, E>;
}

struct Backend;
impl Named for Backend {
    fn name() -> &'static str {
        "backend"
    }
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn an_associated_function_is_delegated() {
    let named = NamedResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(named.get(), Ok(1));
    assert_eq!(<NamedResilient<Backend> as Named>::name(), "backend");
}
