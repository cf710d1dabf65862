//! Hostile review (rev31b): a `retry` (or a `fallback`) on an `#[async_trait]` method of a
//! trait without a `Sync` supertrait. The docs: "With a `retry` or a `fallback` it holds
//! `&self` instead: a `+ Send` future then needs a `Sync` delegate." The delegate here is
//! `Sync`, but the generated impl (`impl<D: Trait>`) cannot prove `D: Sync`, so the trait
//! itself fails to compile, whatever delegate is used.
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
#[async_trait]
pub trait Store {
    #[breaker(consecutive_failures = 3, retry(attempts = 2))]
    async fn get(&self, key: &str) -> Result<u32, E>;
}

/// `Send + Sync`.
struct Backend;
#[async_trait]
impl Store for Backend {
    async fn get(&self, key: &str) -> Result<u32, E> {
        Ok(key.len() as u32)
    }
}

#[tokio::test]
async fn a_retried_async_trait_method_with_a_sync_delegate_compiles() {
    let registry = Registry::new();
    let store = StoreResilient::new(Backend, &registry).unwrap();
    assert_eq!(store.get("abc").await.unwrap(), 3);
}
