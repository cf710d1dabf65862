//! Hostile review (rev31c): `#[cfg_attr(a, cfg_attr(b, breaker(...)))]`. Nested `cfg_attr`
//! is ordinary Rust (and what `cfg_attr(all(a, b), ..)` is written as by macros and by
//! people), but `cfg_attr_breaker` only looks one level down: the inner `cfg_attr` is left
//! on the trait method, the compiler expands it to a bare `#[breaker]` no macro reads. The
//! docs: "`#[cfg_attr(pred, breaker(...))]` puts the breaker on the method where `pred`
//! holds".
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, clippy::non_minimal_cfg)]

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
    #[cfg_attr(all(), cfg_attr(all(), breaker(consecutive_failures = 1)))]
    fn get(&self) -> Result<u8, E>;
}

struct Backend;
impl Client for Backend {
    fn get(&self) -> Result<u8, E> {
        Err(E)
    }
}

#[test]
fn a_nested_cfg_attr_breaker_is_a_breaker() {
    let registry = Registry::new();
    let client = ClientResilient::new(Backend, &registry).unwrap();
    assert_eq!(client.get(), Err(E));
    assert!(registry.get("Client#get()").is_ok());
}
