//! Hostile review (rev31b): default ids "spaced as rustfmt writes types". `compact` drops the
//! spaces around `+` (trait-object and impl-Trait bounds), around `=` (associated-type
//! bindings) and after `for<'a>`, so the id is not the type as written (nor as rustfmt writes
//! it), and an `[instances."<id>"]` section written from the source does not match.
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
pub trait Api {
    #[breaker]
    fn bounds(&self, x: &(dyn std::fmt::Debug + Sync)) -> Result<(), E>;
    #[breaker]
    fn binding(&self, x: impl Iterator<Item = u8>) -> Result<(), E>;
    #[breaker]
    fn higher_ranked(&self, x: for<'a> fn(&'a u8) -> u8) -> Result<(), E>;
}

struct Backend;
impl Api for Backend {
    fn bounds(&self, _: &(dyn std::fmt::Debug + Sync)) -> Result<(), E> {
        Ok(())
    }
    fn binding(&self, _: impl Iterator<Item = u8>) -> Result<(), E> {
        Ok(())
    }
    fn higher_ranked(&self, _: for<'a> fn(&'a u8) -> u8) -> Result<(), E> {
        Ok(())
    }
}

#[test]
fn ids_are_spaced_as_rustfmt_writes_types() {
    let registry = Registry::new();
    let _api = ApiResilient::new(Backend, &registry).unwrap();
    let mut ids: Vec<String> = registry
        .ids()
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "Api#binding(impl Iterator<Item = u8>)",
            "Api#bounds(&(dyn std::fmt::Debug + Sync))",
            "Api#higher_ranked(for<'a> fn(&'a u8) -> u8)",
        ]
    );
}
