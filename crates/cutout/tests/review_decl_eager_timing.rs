//! Seed 001: "Slow calls are timed until the stage completes" and the breaker "asks for a
//! permit before calling". The eager `impl Future` path calls the delegate's method before
//! it asks, so the time the method itself takes (building a request, a blocking lookup
//! before the future is returned) is never timed: a slow call counts as fast.
// The shape under test is an `impl Future` method, not an `async fn`.
#![allow(clippy::manual_async_fn)]
#![cfg(feature = "macros")]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Registry, Rejected, State};

/// The error the tests' delegates answer.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Slow {
    #[breaker(
        name = "eager-slow",
        window_size = 2,
        minimum_calls = 2,
        slow_call_threshold = "1s",
        slow_call_ratio = "100%",
        consecutive_failures = "off"
    )]
    fn get(&self) -> impl Future<Output = Result<u8, E>> + Send;

    #[breaker(
        name = "async-slow",
        window_size = 2,
        minimum_calls = 2,
        slow_call_threshold = "1s",
        slow_call_ratio = "100%",
        consecutive_failures = "off"
    )]
    async fn get_async(&self) -> Result<u8, E>;
}

/// Takes 5 s of the registry's clock per call: in the method itself, or in its future.
struct Blocking(ManualClock);
impl Slow for Blocking {
    fn get(&self) -> impl Future<Output = Result<u8, E>> + Send {
        self.0.advance(Duration::from_secs(5)); // the slow part, before the future
        async { Ok(1) }
    }
    async fn get_async(&self) -> Result<u8, E> {
        self.0.advance(Duration::from_secs(5));
        Ok(1)
    }
}

fn ready<F: Future>(f: std::pin::Pin<&mut F>) -> F::Output {
    match f.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("pending"),
    }
}

#[test]
fn a_slow_impl_future_call_counts_as_slow_like_an_async_fn() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let w = SlowResilient::new(Blocking(clock), &registry).unwrap();
    for _ in 0..2 {
        assert_eq!(ready(pin!(w.get_async())), Ok(1));
        assert_eq!(ready(pin!(w.get())), Ok(1));
    }
    assert_eq!(
        registry.state("async-slow").unwrap(),
        State::Open,
        "the async fn's slow calls"
    );
    assert_eq!(
        registry.state("eager-slow").unwrap(),
        State::Open,
        "two 5 s calls of a 1 s threshold through the impl Future method, not counted slow"
    );
}
