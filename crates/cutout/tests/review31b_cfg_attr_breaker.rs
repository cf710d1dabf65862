//! Hostile review (rev31b): `#[cfg_attr(<pred>, breaker(...))]`, a breaker only in some
//! builds. An attribute macro sees `cfg_attr` unexpanded: the macro leaves it on the trait
//! method, the compiler then expands it to a bare `#[breaker]` that no macro reads.
#![cfg(all(feature = "macros", feature = "tokio"))]

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
