//! Hostile review (rev31c): `needs_sync_delegate` asks `D: Sync` when a retried method's
//! output mentions `Send` *anywhere*. Below `#[async_trait(?Send)]` the method is
//! `-> Pin<Box<dyn Future<Output = Result<Box<dyn Any + Send>, E>> + 'async_trait>>`: the
//! future is not `Send`, only the value is, yet the trait impl asks `D: Sync` and a `?Send`
//! delegate (the whole point of `?Send`: a `Cell`, an `Rc`) is no longer wrapped (in either
//! attribute order); with `Box<dyn Any>` as the value the same delegate is. The docs limit
//! `D: Sync` to "a method's future [that] must be `Send`", and say `?Send` "works the same
//! way".
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs)]

use std::any::Any;
use std::cell::Cell;

use async_trait::async_trait;
use cutout::{Registry, Rejected};

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[async_trait(?Send)]
#[cutout::resilient]
pub trait Source {
    #[breaker(consecutive_failures = 5, retry(attempts = 2))]
    async fn get(&self) -> Result<Box<dyn Any + Send>, E>;
}

struct Backend {
    calls: Cell<u32>,
}
#[async_trait(?Send)]
impl Source for Backend {
    async fn get(&self) -> Result<Box<dyn Any + Send>, E> {
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() < 2 {
            Err(E)
        } else {
            Ok(Box::new(7u8))
        }
    }
}

async fn via_trait(s: &impl Source) -> Result<Box<dyn Any + Send>, E> {
    s.get().await
}

#[tokio::test]
async fn a_not_send_async_trait_retry_does_not_ask_a_sync_delegate() {
    let source = SourceResilient::new(
        Backend {
            calls: Cell::new(0),
        },
        &Registry::new(),
    )
    .unwrap();
    let got = via_trait(&source).await.unwrap();
    assert_eq!(got.downcast_ref::<u8>(), Some(&7));
}
