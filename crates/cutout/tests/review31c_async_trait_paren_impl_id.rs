//! Hostile review (rev31c): the fix that takes out "the parentheses [async_trait] puts
//! around `&impl Trait`" takes out parentheses the user wrote too. `&(impl Display + Send)`
//! (the parentheses are needed: `&impl Display + Send` is not a type) reaches the macro below
//! `#[async_trait]` as `&'life1 (impl 'async_trait + Display + Send)`, and its id becomes
//! `&impl Display + Send`: not the type as written, and not the id the same method has
//! without `#[async_trait]` or with the attributes in the other order, which the docs
//! promise ("Ids are the methods' as written").
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, async_fn_in_trait)]

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
    fn shown(&self, x: &(impl std::fmt::Display + Send)) -> Result<(), E>;
}

// async_trait first: the macro sees its rewrite.
#[async_trait(?Send)]
#[cutout::resilient]
pub trait Below {
    #[breaker]
    async fn shown(&self, x: &(impl std::fmt::Display + Send)) -> Result<(), E>;
}

struct Backend;

impl Plain for Backend {
    fn shown(&self, _: &(impl std::fmt::Display + Send)) -> Result<(), E> {
        Ok(())
    }
}

#[async_trait(?Send)]
impl Below for Backend {
    async fn shown(&self, _: &(impl std::fmt::Display + Send)) -> Result<(), E> {
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
fn user_parentheses_stay_in_the_id_under_async_trait() {
    let registry = Registry::new();
    let _plain = PlainResilient::new(Backend, &registry).unwrap();
    let _below = BelowResilient::new(Backend, &registry).unwrap();
    let plain = ids(&registry, "Plain#");
    assert_eq!(plain, ["shown(&(impl std::fmt::Display + Send))"]);
    assert_eq!(ids(&registry, "Below#"), plain, "async_trait's ids differ");
}
