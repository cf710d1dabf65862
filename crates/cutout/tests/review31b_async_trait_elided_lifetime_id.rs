//! Hostile review (rev31b): `&'_ str` under `#[async_trait]`. async_trait renames `'_` to
//! `'life1`, and id.rs turns `&'life1 str` into `&str`: the id is not the one the method has
//! as written (`&'_ str`, which is what the trait without async_trait gets).
#![cfg(all(feature = "macros", feature = "tokio"))]

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
    fn get(&self, key: &'_ str) -> Result<(), E>;
}

#[cutout::resilient]
#[async_trait]
pub trait Boxed: Send + Sync {
    #[breaker]
    async fn get(&self, key: &'_ str) -> Result<(), E>;
}

struct Backend;
impl Plain for Backend {
    fn get(&self, _: &str) -> Result<(), E> {
        Ok(())
    }
}
#[async_trait]
impl Boxed for Backend {
    async fn get(&self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

#[test]
fn an_explicitly_elided_lifetime_keeps_its_written_id_under_async_trait() {
    let registry = Registry::new();
    let _plain = PlainResilient::new(Backend, &registry).unwrap();
    let _boxed = BoxedResilient::new(Backend, &registry).unwrap();
    assert!(registry.get("Plain#get(&'_ str)").is_ok());
    assert!(
        registry.get("Boxed#get(&'_ str)").is_ok(),
        "ids: {:?}",
        registry.ids()
    );
}
