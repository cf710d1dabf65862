//! Hostile review of the declarative layer (issue #31): `#[cfg]` on a trait method. A first
//! version dropped it from the generated impl, so a method compiled out of the trait was
//! still implemented (E0407).
#![cfg(feature = "macros")]

use cutout::{Registry, Rejected};

/// The metered call's error.
#[derive(Debug, PartialEq)]
pub struct E;

impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Metered {
    #[breaker(name = "metered")]
    fn get(&self) -> Result<u8, E>;

    #[cfg(any())]
    fn only_with_a_feature(&self) -> u8;

    #[cfg(any())]
    #[breaker(name = "metered-off")]
    fn breaker_only_with_a_feature(&self) -> Result<u8, E>;
}

struct M;
impl Metered for M {
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn a_cfgd_out_method_is_not_generated() {
    let registry = Registry::new();
    let w = MeteredResilient::new(M, &registry).unwrap();
    assert_eq!(w.get(), Ok(1));
    assert!(!registry.contains("metered-off"));
}
