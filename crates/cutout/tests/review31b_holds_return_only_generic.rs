//! Hostile review (rev31b), held: a method generic only in its return type
//! (`fn get<T: FromStr>(&self, key: &str) -> Result<T, E>`, the shape of a typed cache or a
//! JSON client), in every shape, with a retry, with ignore, and under async_trait.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, dead_code, async_fn_in_trait)]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use std::future::Future;
use std::str::FromStr;

use async_trait::async_trait;
use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq, Clone)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}
fn never(_: &E) -> bool {
    false
}

#[cutout::resilient]
pub trait Cache {
    #[breaker]
    fn sync_get<T: FromStr>(&self, key: &str) -> Result<T, E>;
    #[breaker(retry(attempts = 2), ignore = never)]
    fn sync_retried<T: FromStr>(&self, key: &str) -> Result<T, E>;
    #[breaker]
    async fn async_get<T: FromStr>(&self, key: &str) -> Result<T, E>;
    #[breaker(retry(attempts = 2))]
    async fn async_retried<T: FromStr>(&self, key: &str) -> Result<T, E>;
    #[breaker]
    fn future_get<T: FromStr>(&self, key: &str) -> impl Future<Output = Result<T, E>>;
}

struct Backend;
impl Cache for Backend {
    fn sync_get<T: FromStr>(&self, key: &str) -> Result<T, E> {
        key.parse().map_err(|_| E)
    }
    fn sync_retried<T: FromStr>(&self, key: &str) -> Result<T, E> {
        key.parse().map_err(|_| E)
    }
    async fn async_get<T: FromStr>(&self, key: &str) -> Result<T, E> {
        key.parse().map_err(|_| E)
    }
    async fn async_retried<T: FromStr>(&self, key: &str) -> Result<T, E> {
        key.parse().map_err(|_| E)
    }
    fn future_get<T: FromStr>(&self, key: &str) -> impl Future<Output = Result<T, E>> {
        let r = key.parse().map_err(|_| E);
        async move { r }
    }
}

#[cutout::resilient]
#[async_trait]
pub trait BoxedCache: Send + Sync {
    #[breaker]
    async fn get<T: FromStr + Send>(&self, key: &str) -> Result<T, E>;
}

#[async_trait]
impl BoxedCache for Backend {
    async fn get<T: FromStr + Send>(&self, key: &str) -> Result<T, E> {
        key.parse().map_err(|_| E)
    }
}

#[tokio::test]
async fn a_return_only_generic_is_inferred_in_every_shape() {
    let registry = Registry::new();
    let cache = CacheResilient::new(Backend, &registry).unwrap();
    assert_eq!(cache.sync_get::<u8>("7"), Ok(7));
    assert_eq!(cache.sync_retried::<u8>("7"), Ok(7));
    assert_eq!(cache.async_get::<u8>("7").await, Ok(7));
    assert_eq!(cache.async_retried::<u8>("7").await, Ok(7));
    assert_eq!(cache.future_get::<u8>("7").await, Ok(7));
    let boxed = BoxedCacheResilient::new(Backend, &registry).unwrap();
    assert_eq!(boxed.get::<u8>("7").await, Ok(7));
}
