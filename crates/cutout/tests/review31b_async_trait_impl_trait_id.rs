//! Hostile review (rev31b): the ids of `#[async_trait]` methods with `impl Trait` (and `'_`)
//! parameters. The docs promise "Ids are the methods' as written", the same with the
//! attributes in either order as without `#[async_trait]`; async_trait writes
//! `impl 'async_trait + Display` (the lifetime first), which id.rs does not take out.
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use async_trait::async_trait;
use cutout::{Registry, Rejected};

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

// Without async_trait: the ids as written.
#[cutout::resilient]
pub trait Plain {
    #[breaker]
    fn shown(&self, x: impl std::fmt::Display) -> Result<(), E>;
    #[breaker]
    fn shown_ref(&self, x: &impl std::fmt::Display) -> Result<(), E>;
}

#[cutout::resilient]
#[async_trait(?Send)]
pub trait Shown {
    #[breaker]
    async fn shown(&self, x: impl std::fmt::Display) -> Result<(), E>;
    #[breaker]
    async fn shown_ref(&self, x: &impl std::fmt::Display) -> Result<(), E>;
}

struct Backend;

impl Plain for Backend {
    fn shown(&self, _: impl std::fmt::Display) -> Result<(), E> {
        Ok(())
    }
    fn shown_ref(&self, _: &impl std::fmt::Display) -> Result<(), E> {
        Ok(())
    }
}

#[async_trait(?Send)]
impl Shown for Backend {
    async fn shown(&self, _: impl std::fmt::Display) -> Result<(), E> {
        Ok(())
    }
    async fn shown_ref(&self, _: &impl std::fmt::Display) -> Result<(), E> {
        Ok(())
    }
}

fn ids(registry: &Registry, prefix: &str) -> Vec<String> {
    let mut ids: Vec<String> = registry
        .ids()
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .filter(|n| n.starts_with(prefix))
        .map(|n| n[prefix.len()..].to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn an_impl_trait_parameter_has_its_written_id_under_async_trait() {
    let registry = Registry::new();
    let _plain = PlainResilient::new(Backend, &registry).unwrap();
    let _shown = ShownResilient::new(Backend, &registry).unwrap();
    let plain = ids(&registry, "Plain#");
    assert_eq!(
        plain,
        [
            "shown(impl std::fmt::Display)",
            "shown_ref(&impl std::fmt::Display)"
        ]
    );
    assert_eq!(ids(&registry, "Shown#"), plain, "async_trait's ids differ");
}
