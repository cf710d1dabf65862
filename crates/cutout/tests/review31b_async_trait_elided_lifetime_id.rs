//! Hostile review (rev31b): `&'_ str` under `#[async_trait]`. async_trait renames `'_` to
//! `'life1`, as it names the lifetime of a plain `&str`, so the rewrite cannot tell the two
//! apart. Decided: a reference's `'_` is written as nothing in every id (`&'_ str` and `&str`
//! are one type), so the two traits' ids agree, with and without async_trait.
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use async_trait::async_trait;
use cutout::{Registry, Rejected};

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Plain {
    #[breaker]
    fn get(&self, key: &'_ str) -> Result<(), E>;
}

#[cutout::resilient]
#[async_trait]
pub trait Boxed: Send + Sync {
    #[breaker]
    async fn get(&self, key: &'_ str) -> Result<(), E>;
}

struct Backend;
impl Plain for Backend {
    fn get(&self, _: &str) -> Result<(), E> {
        Ok(())
    }
}
#[async_trait]
impl Boxed for Backend {
    async fn get(&self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

#[test]
fn an_explicitly_elided_lifetime_has_one_id_with_and_without_async_trait() {
    let registry = Registry::new();
    let _plain = PlainResilient::new(Backend, &registry).unwrap();
    let _boxed = BoxedResilient::new(Backend, &registry).unwrap();
    assert!(
        registry.get("Plain#get(&str)").is_ok(),
        "{:?}",
        registry.ids()
    );
    assert!(
        registry.get("Boxed#get(&str)").is_ok(),
        "ids: {:?}",
        registry.ids()
    );
}
