//! Hostile review (rev31c): the fix takes out "the parentheses [async_trait] puts around
//! `&impl Trait`" only when the group directly follows `&`. For `&mut impl Write`
//! async_trait writes `&'life1 mut (impl 'async_trait + Write)`: a `mut` stands between,
//! the parentheses stay, and the id is `&mut(impl std::fmt::Write)`, not the `&mut impl std::fmt::Write`
//! the same method has without `#[async_trait]`; so does a named lifetime (`&'a impl Display`
//! is `&'a(impl std::fmt::Display)`), (the docs: "Ids are the methods' as
//! written").
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, async_fn_in_trait, clippy::needless_lifetimes)]

use async_trait::async_trait;
use cutout::{Registry, Rejected};

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Plain {
    #[breaker]
    fn shown(&self, x: &mut impl std::fmt::Write) -> Result<(), E>;
    #[breaker]
    fn named<'a>(&self, x: &'a impl std::fmt::Display) -> Result<(), E>;
    #[breaker]
    fn cow(&self, x: std::borrow::Cow<'_, str>, y: &'_ mut Vec<u8>) -> Result<(), E>;
}

#[async_trait(?Send)]
#[cutout::resilient]
pub trait Below {
    #[breaker]
    async fn shown(&self, x: &mut impl std::fmt::Write) -> Result<(), E>;
    #[breaker]
    async fn named<'a>(&self, x: &'a impl std::fmt::Display) -> Result<(), E>;
    #[breaker]
    async fn cow(&self, x: std::borrow::Cow<'_, str>, y: &'_ mut Vec<u8>) -> Result<(), E>;
}

struct Backend;

impl Plain for Backend {
    fn shown(&self, _: &mut impl std::fmt::Write) -> Result<(), E> {
        Ok(())
    }
    fn named<'a>(&self, _: &'a impl std::fmt::Display) -> Result<(), E> {
        Ok(())
    }
    fn cow(&self, _: std::borrow::Cow<'_, str>, _: &'_ mut Vec<u8>) -> Result<(), E> {
        Ok(())
    }
}

#[async_trait(?Send)]
impl Below for Backend {
    async fn shown(&self, _: &mut impl std::fmt::Write) -> Result<(), E> {
        Ok(())
    }
    async fn named<'a>(&self, _: &'a impl std::fmt::Display) -> Result<(), E> {
        Ok(())
    }
    async fn cow(&self, _: std::borrow::Cow<'_, str>, _: &'_ mut Vec<u8>) -> Result<(), E> {
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
fn a_mut_impl_parameter_has_its_written_id_under_async_trait() {
    let registry = Registry::new();
    let _plain = PlainResilient::new(Backend, &registry).unwrap();
    let _below = BelowResilient::new(Backend, &registry).unwrap();
    let plain = ids(&registry, "Plain#");
    assert_eq!(
        plain,
        [
            "cow(std::borrow::Cow<'_, str>, &mut Vec<u8>)",
            "named(&'a impl std::fmt::Display)",
            "shown(&mut impl std::fmt::Write)",
        ]
    );
    assert_eq!(ids(&registry, "Below#"), plain, "async_trait's ids differ");
}
