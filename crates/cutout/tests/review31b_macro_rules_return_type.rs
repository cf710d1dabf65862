//! Hostile review (rev31b): a trait written by a `macro_rules!` macro, its return type passed
//! as a `$ret:ty` fragment. The attribute receives the type in an invisible group
//! (`syn::Type::Group`), which `Method::result` does not look through: the `#[breaker]`
//! method is refused as "not a Result", though it returns `Result<u8, E>`.
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
    ($name:ident, $ret:ty) => {
        #[cutout::resilient]
        pub trait $name {
            #[breaker(consecutive_failures = 1)]
            fn get(&self) -> $ret;
        }
    };
}

client!(Client, Result<u8, E>);

struct Backend;
impl Client for Backend {
    fn get(&self) -> Result<u8, E> {
        Err(E)
    }
}

#[test]
fn a_trait_written_by_macro_rules_is_wrapped() {
    let registry = Registry::new();
    let client = ClientResilient::new(Backend, &registry).unwrap();
    assert_eq!(client.get(), Err(E));
    assert_eq!(client.get(), Err(E)); // refused now
    assert_eq!(registry.get("Client#get()").unwrap().snapshot().calls, 1);
}
