//! A tower-style method: `fn call(&self, req) -> impl Future + Send + 'static` (the future
//! outlives the borrow of the service, as `tower::Service::call`'s does). The eager `impl
//! Future` path holds the delegate's future and an owned permit, not `&self`: a first version
//! held `&self.<breaker>`, a borrow of the wrapper, and this did not compile.
#![cfg(feature = "macros")]

use std::future::Future;
use std::task::{Context, Poll, Waker};

use cutout::{Registry, Rejected};

/// The service's error.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Service {
    #[breaker(name = "static-future")]
    fn call(&self, req: u32) -> impl Future<Output = Result<u32, E>> + Send + 'static;
}

struct Echo;
impl Service for Echo {
    // The shape under test: an `impl Future + 'static`, not an `async fn`.
    #[allow(clippy::manual_async_fn)]
    fn call(&self, req: u32) -> impl Future<Output = Result<u32, E>> + Send + 'static {
        async move { Ok(req) }
    }
}

#[test]
fn a_static_future_outlives_the_wrapper_borrow() {
    let registry = Registry::new();
    let w = ServiceResilient::new(Echo, &registry).unwrap();
    let future = w.call(5);
    drop(w);
    let mut future = Box::pin(future);
    assert_eq!(
        future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop())),
        Poll::Ready(Ok(5))
    );
}
