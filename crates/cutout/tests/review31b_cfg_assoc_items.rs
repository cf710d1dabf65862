//! Hostile review (rev31b): `#[cfg]` on an associated type or const. The methods' `cfg`s go
//! on everything generated for them, but an associated type or const compiled out of the
//! trait is still defined by the wrapper's impl (E0437/E0438).
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
pub trait Keyed {
    #[cfg(any())]
    type OnlyWithAFeature;

    #[cfg(any())]
    const ONLY_WITH_A_FEATURE: u8;

    #[breaker(consecutive_failures = 3)]
    fn get(&self) -> Result<u8, E>;
}

struct Backend;
impl Keyed for Backend {
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn a_cfgd_out_associated_item_is_not_generated() {
    let keyed = KeyedResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(keyed.get().unwrap(), 1);
}
