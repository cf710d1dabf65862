//! Hostile review (rev31b), held: two methods sharing a `name` and asking for the same settings,
//! spelled differently (`"50%"` and `0.5`, `"30s"` and `"30000ms"`, a default written out).
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

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Shared {
    #[breaker(name = "shared", failure_ratio = "50%", break_duration = "30s")]
    fn a(&self) -> Result<(), E>;
    #[breaker(name = "shared", failure_ratio = 0.5, break_duration = "30000ms")]
    fn b(&self) -> Result<(), E>;
}

struct Backend;
impl Shared for Backend {
    fn a(&self) -> Result<(), E> {
        Ok(())
    }
    fn b(&self) -> Result<(), E> {
        Ok(())
    }
}

#[test]
fn the_same_settings_spelled_differently_share_one_breaker() {
    let registry = Registry::new();
    let shared = SharedResilient::new(Backend, &registry);
    assert!(shared.is_ok(), "{:?}", shared.err());
}
