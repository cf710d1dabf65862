//! Hostile review (rev31b), held: an `impl Future + Send` method without retry or fallback is
//! `Send` with a delegate that is not `Sync`, as the docs say.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, dead_code)]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use std::cell::Cell;
use std::future::Future;

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}
impl From<cutout::declarative::TimedOut> for E {
    fn from(_: cutout::declarative::TimedOut) -> Self {
        E
    }
}
fn never(_: &E) -> bool {
    false
}

#[cutout::resilient]
pub trait Stock {
    #[breaker(consecutive_failures = 3, ignore = never, timeout = "1s")]
    fn stock(&self, sku: &str) -> impl Future<Output = Result<u32, E>> + Send;
}

/// Not `Sync`.
struct Backend(Cell<u32>);
impl Stock for Backend {
    fn stock(&self, sku: &str) -> impl Future<Output = Result<u32, E>> + Send {
        self.0.set(self.0.get() + 1);
        let n = sku.len() as u32;
        async move { Ok(n) }
    }
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

#[tokio::test]
async fn an_eager_future_is_send_with_a_delegate_that_is_not_sync() {
    let stock = StockResilient::new(Backend(Cell::new(0)), &Registry::new()).unwrap();
    assert_eq!(assert_send(stock.stock("abc")).await, Ok(3));
}
