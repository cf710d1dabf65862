//! Hostile review (rev31b): a `#[deprecated]` trait method. Implementing it warns nothing,
//! but the wrapper's generated body *calls* the delegate's deprecated method, so the
//! `deprecated` lint fires in code the user did not write: a crate built with `-D warnings`
//! (here `#![deny(deprecated)]`) stops compiling as soon as the trait gets the attribute.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![deny(deprecated)]
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
pub trait Api {
    #[deprecated(note = "use get")]
    fn old_get(&self) -> u8;

    #[deprecated(note = "use get")]
    #[breaker(consecutive_failures = 3)]
    fn old_checked(&self) -> Result<u8, E>;

    #[breaker(consecutive_failures = 3)]
    fn get(&self) -> Result<u8, E>;
}

struct Backend;
impl Api for Backend {
    fn old_get(&self) -> u8 {
        0
    }
    fn old_checked(&self) -> Result<u8, E> {
        Ok(0)
    }
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn a_deprecated_method_does_not_warn_in_the_generated_code() {
    let api = ApiResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(api.get(), Ok(1));
}
