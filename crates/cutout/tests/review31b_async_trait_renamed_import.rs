//! Hostile review (rev31b): `#[async_trait]` imported under another name. The docs: "Put
//! the two attributes in either order". Above a renamed `#[boxed]`, `#[cutout::resilient]`
//! does not recognise it (it matches the last path segment `async_trait`), expands first,
//! and its impl of the `async fn`s does not match the trait async_trait then rewrites.
#![cfg(all(feature = "macros", feature = "tokio"))]

use async_trait::async_trait as boxed;
use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
#[boxed]
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
