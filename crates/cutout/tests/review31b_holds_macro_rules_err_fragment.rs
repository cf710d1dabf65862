//! Hostile review (rev31b), held: a trait written by a `macro_rules!` macro whose error type is a
//! `$err:ty` fragment given by the caller (the refusal arm is spanned at the error type).
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

macro_rules! client {
    ($err:ty) => {
        #[cutout::resilient]
        pub trait Client {
            #[breaker(consecutive_failures = 1)]
            fn get(&self) -> Result<u8, $err>;
        }
    };
}

client!(E);

struct Backend;
impl Client for Backend {
    fn get(&self) -> Result<u8, E> {
        Err(E)
    }
}

#[test]
fn a_trait_written_inside_macro_rules_is_wrapped() {
    let registry = Registry::new();
    let client = ClientResilient::new(Backend, &registry).unwrap();
    assert_eq!(client.get(), Err(E));
    assert_eq!(client.get(), Err(E)); // refused now
    assert_eq!(registry.get("Client#get()").unwrap().snapshot().calls, 1);
}
