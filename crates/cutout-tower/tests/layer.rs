//! The breaker layer against tower-test's mock service, on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use cutout::{Breaker, Jitter, RejectReason, Settings, State};
use cutout_tower::{BreakerLayer, ServiceBuilderExt, TokioClock};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_test::mock;

fn breaker(failures: u32) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(failures))
        .break_duration(Duration::from_secs(10))
        .jitter(Jitter::None)
        .adaptive(false)
        .half_open_probes(1)
        .probe_successes(1)
        .build()
        .unwrap();
    Breaker::builder("dependency")
        .settings(settings)
        .clock(TokioClock::new())
        .build()
}

/// Takes every request the mock has received so far, answering none.
fn received(handle: &mut mock::Handle<&'static str, &'static str>) -> usize {
    let mut n = 0;
    while let Poll::Ready(Some(_)) = handle.poll_request() {
        n += 1;
    }
    n
}

#[tokio::test(start_paused = true)]
async fn open_breaker_never_calls_the_inner_service() {
    let breaker = breaker(3);
    let (mut service, mut handle) = mock::spawn_layer(BreakerLayer::new(breaker.clone()));
    for _ in 0..3 {
        assert!(service.poll_ready().is_ready());
        let call = service.call("rate");
        let (_, reply) = handle.next_request().await.unwrap();
        reply.send_error("connection reset");
        let error = call.await.unwrap_err();
        assert!(!error.is_rejected());
        assert_eq!(error.into_inner().unwrap().to_string(), "connection reset");
    }
    assert_eq!(breaker.state(), State::Open);

    // The inner service is not ready, and is never polled: the open breaker answers Ready.
    handle.allow(0);
    for _ in 0..10 {
        match service.poll_ready() {
            Poll::Ready(Ok(())) => {}
            other => panic!("open breaker must be ready, got {other:?}"),
        }
        let error = service.call("rate").await.unwrap_err();
        let rejection = error.rejection().expect("refused");
        assert_eq!(rejection.reason(), RejectReason::Open);
        assert_eq!(rejection.breaker().as_str(), "dependency");
        assert_eq!(rejection.retry_after(), Some(Duration::from_secs(10)));
    }
    assert_eq!(
        received(&mut handle),
        0,
        "no call reached the inner service"
    );
}

#[tokio::test(start_paused = true)]
async fn open_breaker_call_count_with_a_counting_service() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let breaker = breaker(2);
    let mut service = ServiceBuilder::new()
        .breaker(breaker.clone())
        .service_fn(move |_: ()| {
            counted.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), _>(std::io::Error::other("down")) }
        });
    for _ in 0..20 {
        let _ = service.ready().await.unwrap().call(()).await;
    }
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn dropped_response_future_frees_the_half_open_probe() {
    let breaker = breaker(1);
    let (mut service, mut handle) = mock::spawn_layer(BreakerLayer::new(breaker.clone()));
    assert!(service.poll_ready().is_ready());
    let call = service.call("first");
    handle.next_request().await.unwrap().1.send_error("down");
    assert!(call.await.is_err());
    assert_eq!(breaker.state(), State::Open);

    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(breaker.state(), State::HalfOpen);

    // The probe is in flight: a second caller is refused.
    let mut other = mock::Spawn::new(service.get_ref().clone());
    assert!(service.poll_ready().is_ready());
    let probe = service.call("probe");
    let (_, _probe_reply) = handle.next_request().await.unwrap();
    assert!(other.poll_ready().is_ready());
    let refused = other.call("second").await.unwrap_err();
    assert_eq!(
        refused.rejection().unwrap().reason(),
        RejectReason::HalfOpenFull
    );
    assert_eq!(breaker.snapshot().probes_in_flight, 1);

    // The caller gives up on the probe: nothing is recorded, the slot is free again.
    drop(probe);
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(other.poll_ready().is_ready());
    let retry = other.call("second again");
    handle
        .next_request()
        .await
        .expect("the freed slot admits a new probe")
        .1
        .send_response("ok");
    assert_eq!(retry.await.unwrap(), "ok");
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn refusal_pause_is_off_by_default_and_waits_when_set() {
    let breaker = breaker(1);
    breaker.isolate();
    let (mut plain, _handle) =
        mock::spawn_layer::<&str, &str, _>(BreakerLayer::new(breaker.clone()));
    let start = tokio::time::Instant::now();
    assert!(plain.poll_ready().is_ready());
    assert!(plain.call("x").await.unwrap_err().is_rejected());
    assert_eq!(start.elapsed(), Duration::ZERO);

    let (mut paused, _handle) = mock::spawn_layer::<&str, &str, _>(
        BreakerLayer::new(breaker.clone()).refusal_pause(Duration::from_millis(250)),
    );
    let start = tokio::time::Instant::now();
    assert!(paused.poll_ready().is_ready());
    let mut refusal = tokio_test_spawn(paused.call("x"));
    assert!(refusal.poll().is_pending(), "waits before refusing");
    tokio::time::advance(Duration::from_millis(249)).await;
    assert!(refusal.poll().is_pending());
    tokio::time::advance(Duration::from_millis(1)).await;
    match refusal.poll() {
        Poll::Ready(Err(error)) => assert!(error.is_rejected()),
        other => panic!("expected the refusal, got {:?}", other.map(|r| r.is_ok())),
    }
    assert_eq!(start.elapsed(), Duration::from_millis(250));

    // Never longer than the break: an open breaker with 100 ms left pauses 100 ms.
    breaker.reset();
    let short = Breaker::builder("short")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .break_duration(Duration::from_millis(100))
                .jitter(Jitter::None)
                .adaptive(false)
                .build()
                .unwrap(),
        )
        .clock(TokioClock::new())
        .build();
    let _ = short.call(|| Err::<(), _>("down"));
    let (mut service, _handle) = mock::spawn_layer::<&str, &str, _>(
        BreakerLayer::new(short).refusal_pause(Duration::from_secs(5)),
    );
    let start = tokio::time::Instant::now();
    assert!(service.poll_ready().is_ready());
    assert!(service.call("x").await.unwrap_err().is_rejected());
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

/// A future polled by hand (tower-test re-exports no task helper).
struct Manual<F> {
    future: std::pin::Pin<Box<F>>,
}

impl<F: std::future::Future> Manual<F> {
    fn poll(&mut self) -> Poll<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        self.future.as_mut().poll(&mut cx)
    }
}

fn tokio_test_spawn<F: std::future::Future>(future: F) -> Manual<F> {
    Manual {
        future: Box::pin(future),
    }
}

#[tokio::test(start_paused = true)]
async fn attempt_timeout_inside_the_breaker_counts_as_failure() {
    let breaker = breaker(2);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let mut service = ServiceBuilder::new()
        .breaker(breaker.clone())
        .timeout(Duration::from_secs(1))
        .service_fn(move |_: ()| {
            counted.fetch_add(1, Ordering::Relaxed);
            async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, std::io::Error>(())
            }
        });
    for _ in 0..2 {
        let error = service.ready().await.unwrap().call(()).await.unwrap_err();
        assert!(error.is_timeout());
    }
    assert_eq!(breaker.state(), State::Open);
    let error = service.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(error.is_rejected());
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn clones_share_the_breaker() {
    let breaker = breaker(1);
    let layer = BreakerLayer::new(breaker.clone());
    let mut a = tower::Layer::layer(
        &layer,
        tower::service_fn(|_: ()| async { Err::<(), _>(std::io::Error::other("x")) }),
    );
    let mut b = a.clone();
    let _ = a.ready().await.unwrap().call(()).await;
    assert!(
        b.ready()
            .await
            .unwrap()
            .call(())
            .await
            .unwrap_err()
            .is_rejected()
    );
}
