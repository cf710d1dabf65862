//! Readiness: what a breaker service's `poll_ready` decides, and how it composes with the
//! services around it (issue 29, items 3 and 4).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use cutout::clock::ManualClock;
use cutout::{Breaker, RejectReason, Settings};
use cutout_tower::BreakerService;
use tower::{Service, ServiceExt};

/// A dependency that has recovered (every call succeeds), behind a readiness that is pending
/// `pending` times (waking itself at once) before each ready answer: backpressure.
#[derive(Clone)]
struct Backpressured {
    pending: usize,
    polls: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl Service<()> for Backpressured {
    type Response = ();
    type Error = &'static str;
    type Future = std::future::Ready<Result<(), &'static str>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let n = self.polls.fetch_add(1, Ordering::Relaxed);
        if n % (self.pending + 1) < self.pending {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        self.calls.fetch_add(1, Ordering::Relaxed);
        std::future::ready(Ok(()))
    }
}

/// A throttling breaker warmed on a dependency that then failed for a while: it refuses about
/// one call in four or five, less with every success.
fn throttling() -> Breaker {
    let settings = Settings::builder().throttle(Some(2.0)).build().unwrap();
    let breaker = Breaker::builder("ads")
        .settings(settings)
        .clock(ManualClock::new())
        .seed(7)
        .build();
    // 100 successes, then 160 calls failing: K × accepts falls short of the requests.
    for n in 0..260 {
        let _ = breaker.call(|| if n < 100 { Ok(()) } else { Err("overloaded") });
    }
    println!(
        "throttling at {:?}",
        breaker.snapshot().throttle_probability
    );
    breaker
}

async fn refused_of_100(pending: usize) -> usize {
    let inner = Backpressured {
        pending,
        polls: Arc::default(),
        calls: Arc::default(),
    };
    let mut service = BreakerService::new(inner, throttling());
    let mut refused = 0;
    for _ in 0..100 {
        match service.ready().await.unwrap().call(()).await {
            Err(error)
                if error.rejection().map(|r| r.reason()) == Some(RejectReason::Throttled) =>
            {
                refused += 1;
            }
            _ => {}
        }
    }
    refused
}

#[tokio::test]
async fn backpressure_draws_one_throttling_decision_per_request() {
    let free = refused_of_100(0).await;
    let pressed = refused_of_100(10).await;
    println!("refused of 100: {free} without backpressure, {pressed} with 10 pending polls each");
    assert!(free < 30, "{free}");
    // One draw per request whatever the inner service's readiness: about the same share.
    assert!(
        pressed.abs_diff(free) <= 10,
        "{pressed} refused under backpressure against {free} without"
    );
}
