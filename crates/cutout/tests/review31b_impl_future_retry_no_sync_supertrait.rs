//! Hostile review (rev31b): an `impl Future<Output = ..> + Send` method with a `retry`, in a
//! trait without a `Sync` supertrait, with a `Sync` delegate. The docs: "With a `retry` or a
//! `fallback` it holds `&self` instead: a `+ Send` future then needs a `Sync` delegate." The
//! delegate is `Sync`, yet the trait does not compile: the generated `impl<D: Trait>` cannot
//! prove `D: Sync` for any delegate.
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use std::future::Future;

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Stock {
    #[breaker(consecutive_failures = 3, retry(attempts = 2))]
    fn stock(&self, sku: &str) -> impl Future<Output = Result<u32, E>> + Send;
}

/// `Send + Sync`.
struct Backend;
impl Stock for Backend {
    fn stock(&self, sku: &str) -> impl Future<Output = Result<u32, E>> + Send {
        let n = sku.len() as u32;
        async move { Ok(n) }
    }
}

#[tokio::test]
async fn a_retried_send_future_with_a_sync_delegate_compiles() {
    let stock = StockResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(stock.stock("abc").await, Ok(3));
}
