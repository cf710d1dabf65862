//! Hostile review (rev31c): held: `#[cfg_attr(pred, breaker(...), others)]` keeps the others,
//! composes with a method `#[cfg]`, and a `name` shared with a method whose breaker is
//! compiled out is not taken (no conflict of settings with it).
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
    #[cfg(all())]
    #[cfg_attr(
        all(),
        breaker(name = "shared", consecutive_failures = 1),
        must_use = "x"
    )]
    fn get(&self) -> Result<u8, E>;
    #[cfg_attr(
        any(),
        breaker(name = "shared", consecutive_failures = 9),
        must_use = "y"
    )]
    fn put(&self) -> Result<u8, E>;
    #[cfg(any())]
    #[cfg_attr(all(), breaker(consecutive_failures = 1))]
    fn gone(&self) -> Result<u8, E>;
}

struct Backend;
impl Client for Backend {
    fn get(&self) -> Result<u8, E> {
        Err(E)
    }
    fn put(&self) -> Result<u8, E> {
        Err(E)
    }
}

#[test]
fn cfg_attr_breakers_compose() {
    let registry = Registry::new();
    let client = ClientResilient::new(Backend, &registry).unwrap();
    assert_eq!(client.get(), Err(E));
    assert_eq!(client.get(), Err(E));
    assert_eq!(registry.get("shared").unwrap().snapshot().calls, 1);
    for _ in 0..3 {
        assert_eq!(client.put(), Err(E));
    }
    let mut ids: Vec<String> = registry
        .ids()
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["shared"]);
}
