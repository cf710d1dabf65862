//! Hostile review (rev31b), held: a documented `pub` trait under `#![deny(missing_docs)]`, with
//! `#[cutout::resilient]` above `#[async_trait]`: the generated code must not add an
//! undocumented public item.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![deny(missing_docs)]
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

/// The error.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

/// A store.
#[cutout::resilient]
#[async_trait]
pub trait Store: Send + Sync {
    /// Gets.
    #[breaker(consecutive_failures = 3)]
    async fn get(&self, key: &str) -> Result<usize, E>;
}

/// A plain one, for comparison.
#[cutout::resilient]
pub trait Plain {
    /// Gets.
    #[breaker(consecutive_failures = 3)]
    fn get(&self, key: &str) -> Result<usize, E>;
}

struct Backend;
#[async_trait]
impl Store for Backend {
    async fn get(&self, key: &str) -> Result<usize, E> {
        Ok(key.len())
    }
}

#[tokio::test]
async fn no_undocumented_public_item_is_generated() {
    let store = StoreResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(store.get("abc").await, Ok(3));
}
