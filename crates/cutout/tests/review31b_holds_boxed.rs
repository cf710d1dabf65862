//! Hostile review (rev31b), held: hand-written boxed and `'static` futures, a `#[breaker]`
//! default body under async_trait (with a `Sync` supertrait), `Box<dyn Error>` errors.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, dead_code)]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use cutout::{Registry, Rejected, State};

#[derive(Debug, PartialEq)]
pub enum E {
    Down,
    Refused,
}
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E::Refused
    }
}
impl std::fmt::Display for E {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
impl std::error::Error for E {}
fn down(e: &E) -> bool {
    *e == E::Down
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cutout::resilient]
pub trait Hand {
    #[breaker(consecutive_failures = 1, record = down)]
    fn boxed(&self) -> Pin<Box<dyn Future<Output = Result<u8, E>> + Send + 'static>>;
    #[breaker(consecutive_failures = 1)]
    fn owned(&self) -> impl Future<Output = Result<u8, E>> + Send + 'static;
    #[breaker(consecutive_failures = 1)]
    fn dyn_error(&self) -> Result<u8, BoxError>;
}

struct Backend;
impl Hand for Backend {
    fn boxed(&self) -> Pin<Box<dyn Future<Output = Result<u8, E>> + Send + 'static>> {
        Box::pin(async { Err(E::Down) })
    }
    fn owned(&self) -> impl Future<Output = Result<u8, E>> + Send + 'static {
        async { Ok(2) }
    }
    fn dyn_error(&self) -> Result<u8, BoxError> {
        Err("down".into())
    }
}

#[tokio::test]
async fn hand_written_boxed_and_static_futures() {
    let registry = Registry::new();
    let w = HandResilient::new(Backend, &registry).unwrap();
    let f = w.boxed();
    let g = w.owned();
    drop(w);
    assert_eq!(f.await, Err(E::Down));
    assert_eq!(g.await, Ok(2));
    assert_eq!(registry.get("Hand#boxed()").unwrap().state(), State::Open);
    let w = HandResilient::new(Backend, &registry).unwrap();
    assert!(w.dyn_error().is_err());
    let refused = w.dyn_error().unwrap_err();
    assert!(refused.downcast_ref::<Rejected>().is_some(), "{refused}");
}

#[cutout::resilient]
#[async_trait]
pub trait Defaulted: Send + Sync {
    #[breaker(consecutive_failures = 1)]
    async fn get(&self) -> Result<u8, E> {
        Err(E::Down)
    }
}
struct UsesDefault;
#[async_trait]
impl Defaulted for UsesDefault {}

#[tokio::test]
async fn a_breaker_default_body_under_async_trait_with_a_sync_supertrait() {
    let registry = Registry::new();
    let w = DefaultedResilient::new(UsesDefault, &registry).unwrap();
    assert_eq!(w.get().await, Err(E::Down));
    assert_eq!(w.get().await, Err(E::Refused));
}
