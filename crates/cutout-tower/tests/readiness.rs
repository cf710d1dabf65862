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

mod composes {
    use std::time::Duration;

    use cutout::{Breaker, Jitter, RejectReason, Settings, State};
    use cutout_tower::{BreakerService, Readiness, TokioClock};
    use tower::buffer::Buffer;
    use tower::limit::ConcurrencyLimit;
    use tower::{Service, ServiceExt};

    /// A breaker on tokio's clock, open for five seconds.
    fn open_breaker() -> Breaker {
        let settings = Settings::builder()
            .jitter(Jitter::None)
            .probe_successes(1)
            .build()
            .unwrap();
        let breaker = Breaker::builder("inventory")
            .settings(settings)
            .clock(TokioClock::new())
            .build();
        assert!(breaker.open_for(Duration::from_secs(5)));
        breaker
    }

    fn answer() -> impl Service<u32, Response = u32, Error = std::io::Error, Future: Send> + Send {
        tower::service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) })
    }

    #[tokio::test(start_paused = true)]
    async fn a_buffer_in_front_of_an_open_breaker_waits_for_the_break_and_then_serves() {
        let breaker = open_breaker();
        let service =
            BreakerService::new(answer(), breaker.clone()).readiness(Readiness::WaitForBreak);
        let buffer = Buffer::new(service, 8);
        let started = tokio::time::Instant::now();
        let calls: Vec<_> = (0..3)
            .map(|n| tokio::spawn(buffer.clone().oneshot(n)))
            .collect();
        // Nothing answers while the break lasts: the buffer's worker waits, nothing spins.
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert!(calls.iter().all(|call| !call.is_finished()));
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.unwrap().unwrap());
        }
        answers.sort_unstable();
        assert_eq!(
            answers,
            vec![0, 1, 2],
            "woken at the break's end, not wedged"
        );
        assert!(started.elapsed() >= Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(6));
        assert_eq!(breaker.state(), State::Closed, "the first was the probe");
    }

    #[tokio::test(start_paused = true)]
    async fn a_buffer_in_front_of_a_fail_in_call_breaker_drains_refusals_at_once() {
        let breaker = open_breaker();
        let buffer = Buffer::new(BreakerService::new(answer(), breaker), 8);
        let started = tokio::time::Instant::now();
        for n in 0..3 {
            let error = buffer.clone().oneshot(n).await.unwrap_err();
            let error = error.downcast::<cutout_tower::Error>().unwrap();
            assert_eq!(error.rejection().unwrap().reason(), RejectReason::Open);
        }
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_caller_under_a_concurrency_limit_leaves_nothing_behind() {
        let breaker = open_breaker();
        let service =
            BreakerService::new(answer(), breaker.clone()).readiness(Readiness::WaitForBreak);
        let mut limited = ConcurrencyLimit::new(service, 1);
        // A caller that gives up after a second of waiting for readiness.
        let gave_up = tokio::time::timeout(Duration::from_secs(1), limited.ready())
            .await
            .is_err();
        assert!(gave_up);
        // Its limit permit and the breaker hold nothing: the next caller waits for the break's
        // end and is served.
        let answer = limited.ready().await.unwrap().call(7).await.unwrap();
        assert_eq!(answer, 7);
        assert_eq!(breaker.snapshot().probes_in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_isolated_breaker_is_asked_again_every_second_and_serves_once_reset() {
        let breaker = open_breaker();
        breaker.isolate();
        let mut service =
            BreakerService::new(answer(), breaker.clone()).readiness(Readiness::WaitForBreak);
        let waiting = tokio::spawn(async move { service.ready().await.unwrap().call(3).await });
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!waiting.is_finished());
        breaker.reset();
        tokio::time::sleep(Duration::from_millis(1_001)).await;
        assert!(waiting.is_finished());
        assert_eq!(waiting.await.unwrap().unwrap(), 3);
    }
}
