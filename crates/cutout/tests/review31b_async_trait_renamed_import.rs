//! Hostile review (rev31b): `#[async_trait]` imported under another name. A macro sees names,
//! not what they resolve to, so above a renamed `#[boxed]` `#[cutout::resilient]` cannot know
//! it is async_trait (the docs say so: above it, the attribute must be spelled `async_trait`);
//! below it, any name works, since async_trait has rewritten the trait first. This is that
//! order, with the renamed import.
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use async_trait::async_trait as boxed;
use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[boxed]
#[cutout::resilient]
pub trait Store: Send + Sync {
    #[breaker(consecutive_failures = 3)]
    async fn get(&self, key: &str) -> Result<usize, E>;
}

struct Backend;
#[boxed]
impl Store for Backend {
    async fn get(&self, key: &str) -> Result<usize, E> {
        Ok(key.len())
    }
}

#[tokio::test]
async fn a_renamed_async_trait_composes() {
    let store = StoreResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(store.get("abc").await, Ok(3));
}
