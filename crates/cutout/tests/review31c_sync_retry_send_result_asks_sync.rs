//! Hostile review (rev31c): `needs_sync_delegate` asks `D: Sync` of the whole trait impl
//! when a `#[breaker]` with a `retry` has an output that mentions `Send` and is not
//! `async` — meant for `impl Future<..> + Send`. A *sync* method has no future at all, yet
//! its `Result<Box<dyn Any + Send>, E>` (or an error type `Box<dyn Error + Send + Sync>`)
//! trips it: a non-`Sync` delegate (a `Cell` counter), which worked before the fix, no
//! longer implements the trait. The docs limit `D: Sync` to "a `+ Send` future with a
//! `retry` or `fallback`".
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs)]

use std::any::Any;
use std::cell::Cell;

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
    #[breaker(consecutive_failures = 5, retry(attempts = 2))]
    fn get(&self) -> Result<Box<dyn Any + Send>, E>;
}

struct Backend {
    calls: Cell<u32>,
}
impl Source for Backend {
    fn get(&self) -> Result<Box<dyn Any + Send>, E> {
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() < 2 {
            Err(E)
        } else {
            Ok(Box::new(7u8))
        }
    }
}

fn via_trait(s: &impl Source) -> Result<Box<dyn Any + Send>, E> {
    s.get()
}

#[test]
fn a_sync_retry_does_not_ask_a_sync_delegate() {
    let source = SourceResilient::new(
        Backend {
            calls: Cell::new(0),
        },
        &Registry::new(),
    )
    .unwrap();
    let got = via_trait(&source).unwrap();
    assert_eq!(got.downcast_ref::<u8>(), Some(&7));
}
