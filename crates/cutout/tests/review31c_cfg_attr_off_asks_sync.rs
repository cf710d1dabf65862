//! Hostile review (rev31c): `#[cfg_attr(pred, breaker(retry(...)))]` on a `+ Send` future
//! method. Where `pred` does not hold the docs say "the method is passed through", and a
//! passed-through `impl Future + Send` method needs nothing of the delegate beyond its own
//! future. But `needs_sync_delegate` is computed from the breaker regardless of the
//! predicate, so the trait impl asks `D: Sync` in every build: a non-`Sync` delegate whose
//! futures are `Send` is not wrapped, even where there is no breaker at all.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, clippy::manual_async_fn, clippy::non_minimal_cfg)]

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

#[cutout::resilient]
pub trait Source {
    #[cfg_attr(any(), breaker(consecutive_failures = 5, retry(attempts = 2)))]
    fn get(&self) -> impl Future<Output = Result<u8, E>> + Send;
}

struct Backend {
    calls: Cell<u32>,
}
impl Source for Backend {
    fn get(&self) -> impl Future<Output = Result<u8, E>> + Send {
        self.calls.set(self.calls.get() + 1);
        async { Ok(7) }
    }
}

async fn via_trait(s: &impl Source) -> Result<u8, E> {
    s.get().await
}

#[tokio::test]
async fn a_compiled_out_breaker_asks_nothing_of_the_delegate() {
    let source = SourceResilient::new(
        Backend {
            calls: Cell::new(0),
        },
        &Registry::new(),
    )
    .unwrap();
    assert_eq!(via_trait(&source).await, Ok(7));
}
