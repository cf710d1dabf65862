//! Hostile review (rev31c): held: `macro_rules!` fragments in `impl Future<Output = $r> + Send`
//! with a retry, a sync retry's `&mut $t` parameter (one value: each attempt sees the last
//! one's push), a `$t = Self` parameter, a `$fut:ty` future type.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, clippy::manual_async_fn)]

use std::future::Future;

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

macro_rules! api {
    ($r:ty, $t:ty, $s:ty, $fut:ty) => {
        #[cutout::resilient]
        pub trait Api: Send + Sync {
            #[breaker(consecutive_failures = 5, retry(attempts = 2))]
            fn get(&self) -> impl Future<Output = $r> + Send;
            #[breaker(consecutive_failures = 5, retry(attempts = 3))]
            fn fill(&self, buf: &mut $t) -> $r;
            fn same(&self, other: $s) -> bool;
            #[breaker(consecutive_failures = 5)]
            fn later(&self) -> $fut;
        }
    };
}

api!(Result<u8, E>, Vec<u8>, Self, impl Future<Output = Result<u8, E>> + Send);

struct Backend;
impl Api for Backend {
    fn get(&self) -> impl Future<Output = Result<u8, E>> + Send {
        async { Ok(1) }
    }
    fn fill(&self, buf: &mut Vec<u8>) -> Result<u8, E> {
        buf.push(1);
        if buf.len() < 3 {
            Err(E)
        } else {
            Ok(buf.len() as u8)
        }
    }
    fn same(&self, _: Self) -> bool {
        true
    }
    fn later(&self) -> impl Future<Output = Result<u8, E>> + Send {
        async { Ok(2) }
    }
}

#[tokio::test]
async fn macro_rules_fragments_everywhere() {
    let registry = Registry::new();
    let api = ApiResilient::new(Backend, &registry).unwrap();
    assert_eq!(api.get().await, Ok(1));
    let mut buf = Vec::new();
    assert_eq!(api.fill(&mut buf), Ok(3));
    assert_eq!(buf, [1, 1, 1]);
    assert_eq!(api.later().await, Ok(2));
    let other = ApiResilient::new(Backend, &Registry::new()).unwrap();
    assert!(api.same(other));
}
