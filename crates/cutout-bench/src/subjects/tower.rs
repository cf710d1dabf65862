//! tower-resilience 0.13 (feature `circuitbreaker`), driven through its tower `Service`.
//!
//! Its `Circuit` is crate-private: the `Service` is the only way in. Each call polls
//! `poll_ready` and then the boxed future `call` returns, once each, with a no-op waker; the
//! inner service answers with a ready future. When either is `Pending` (the breaker's tokio
//! mutex is held by the other thread, or, while open, `poll_ready` lost a `try_lock` and armed
//! a 1 ms tokio timer) the call is finished on the thread's current-thread tokio runtime with
//! `block_on`, as an executor would. Every harness thread has entered its runtime before its
//! loop, as a tower service inside a tokio task has.

use std::future::{Ready, poll_fn, ready};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use tokio::runtime::{EnterGuard, Runtime};
use tower_resilience::circuitbreaker::{
    CircuitBreaker, CircuitBreakerError, CircuitBreakerLayer, DefaultClassifier,
};
use tower_service::Service;

use super::{LONG_BREAK, WARM_UP_CALLS, feed, trip};
use crate::{Call, Outcome, Subject};

/// The protected service: answers at once, failing when asked to.
#[derive(Debug, Clone, Copy)]
pub struct Echo;

impl Service<bool> for Echo {
    type Response = ();
    type Error = ();
    type Future = Ready<Result<(), ()>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, fail: bool) -> Self::Future {
        ready(if fail { Err(()) } else { Ok(()) })
    }
}

type Svc = CircuitBreaker<Echo, DefaultClassifier>;

/// A tower-resilience breaker; handles are clones of the service (clones share the circuit).
pub struct Tower(Mutex<Svc>);

/// One thread's clone of the service, with the runtime it has entered.
pub struct Handle {
    svc: Svc,
    runtime: &'static Runtime,
    _entered: EnterGuard<'static>,
}

impl Subject for Tower {
    type Handle = Handle;
    fn handle(&self) -> Handle {
        // Leaked: a current-thread runtime is a few kilobytes, made once per measured thread,
        // and the guard that keeps it entered for the handle's life must borrow it for 'static.
        let runtime: &'static Runtime = Box::leak(Box::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("tokio runtime"),
        ));
        Handle {
            svc: self.0.lock().expect("prototype service").clone(),
            runtime,
            _entered: runtime.enter(),
        }
    }
}

impl Call for Handle {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        let Handle { svc, runtime, .. } = self;
        let mut cx = Context::from_waker(Waker::noop());
        let ready = match svc.poll_ready(&mut cx) {
            Poll::Ready(ready) => ready,
            Poll::Pending => runtime.block_on(poll_fn(|cx| svc.poll_ready(cx))),
        };
        if ready.is_err() {
            return Outcome::Failed;
        }
        let mut future = svc.call(fail);
        let result = match future.as_mut().poll(&mut cx) {
            Poll::Ready(result) => result,
            Poll::Pending => runtime.block_on(future),
        };
        match result {
            Ok(()) => Outcome::Ok,
            Err(CircuitBreakerError::OpenCircuit) => Outcome::Rejected,
            Err(CircuitBreakerError::Inner(())) => Outcome::Failed,
        }
    }
}

fn service(layer: CircuitBreakerLayer<DefaultClassifier>) -> Tower {
    Tower(Mutex::new(layer.layer_fn(Echo)))
}

/// 5 consecutive failures (its `FailureModel::ConsecutiveFailures`); 10% failures never trip it.
pub fn consecutive() -> Tower {
    let layer = CircuitBreakerLayer::builder()
        .consecutive_failures(5)
        .build()
        .expect("valid config");
    let subject = service(layer);
    feed(&subject, WARM_UP_CALLS, false);
    subject
}

/// `CircuitBreakerLayer::builder()` defaults: failure rate 0.5 over a count-based window of 100.
/// (Its time-based window keeps one record per call in a `VecDeque` and rescans all of them on
/// every call, so at these call rates it grows without bound; it is not measured.)
pub fn default_settings() -> Tower {
    let layer = CircuitBreakerLayer::builder()
        .build()
        .expect("valid config");
    let subject = service(layer);
    feed(&subject, WARM_UP_CALLS, false);
    subject
}

/// Opened by 5 consecutive failures, with a one-hour wait.
pub fn open() -> Tower {
    let layer = CircuitBreakerLayer::builder()
        .consecutive_failures(5)
        .wait_duration_in_open(LONG_BREAK)
        .build()
        .expect("valid config");
    let subject = service(layer);
    trip(&subject, 5);
    subject
}
