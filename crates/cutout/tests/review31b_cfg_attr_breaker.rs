//! Hostile review (rev31b): `#[cfg_attr(<pred>, breaker(...))]`, a breaker only in some
//! builds. An attribute macro sees `cfg_attr` unexpanded: the macro leaves it on the trait
//! method, the compiler then expands it to a bare `#[breaker]` that no macro reads.
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

#[cutout::resilient]
pub trait Client {
    #[cfg_attr(all(), breaker(consecutive_failures = 1))]
    fn get(&self) -> Result<u8, E>;
}

struct Backend;
impl Client for Backend {
    fn get(&self) -> Result<u8, E> {
        Err(E)
    }
}

#[test]
fn a_cfg_attr_breaker_is_a_breaker() {
    let registry = Registry::new();
    let client = ClientResilient::new(Backend, &registry).unwrap();
    assert_eq!(client.get(), Err(E));
    assert!(registry.get("Client#get()").is_ok());
}

// Where the predicate does not hold: no breaker, the delegate's method as it is.
#[cutout::resilient]
pub trait Unguarded {
    #[cfg_attr(any(), breaker(consecutive_failures = 1))]
    fn get(&self) -> Result<u8, E>;
}

impl Unguarded for Backend {
    fn get(&self) -> Result<u8, E> {
        Err(E)
    }
}

#[test]
fn a_cfg_attr_breaker_whose_predicate_fails_is_no_breaker() {
    let registry = Registry::new();
    let client = UnguardedResilient::new(Backend, &registry).unwrap();
    for _ in 0..3 {
        assert_eq!(Unguarded::get(&client), Err(E), "never refused");
    }
    assert!(registry.ids().is_empty());
}
