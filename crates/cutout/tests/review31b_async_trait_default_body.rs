//! Hostile review (rev31b): an `#[async_trait]` trait with a default `async fn` body, without
//! a `Sync` supertrait. async_trait gives the rewritten default method `where Self: Sync +
//! 'async_trait`; the wrapper copies that signature (`Self` is the wrapper) and calls the
//! delegate's method, whose `Self: Sync` (`D: Sync`) the wrapper's impl cannot prove. The
//! trait stops compiling as soon as `#[cutout::resilient]` is added (in either order).
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
    #[breaker(consecutive_failures = 3)]
    async fn get(&self, key: &str) -> Result<u32, E>;

    /// A default body, passed through.
    async fn version(&self) -> u32 {
        1
    }
}

struct Backend;
#[async_trait]
impl Store for Backend {
    async fn get(&self, key: &str) -> Result<u32, E> {
        Ok(key.len() as u32)
    }
}

#[tokio::test]
async fn a_default_async_method_of_an_async_trait_is_wrapped() {
    let registry = Registry::new();
    let store = StoreResilient::new(Backend, &registry).unwrap();
    assert_eq!(store.get("abc").await.unwrap(), 3);
    assert_eq!(store.version().await, 1);
}
