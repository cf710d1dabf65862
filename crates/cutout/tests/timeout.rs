//! The attempt timeout the breaker counts (feature `tokio`), on tokio's paused time: hung calls
//! under it open the breaker, while the same calls under a timeout from outside leave it blind.

#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cutout::classify::Outcome;
use cutout::clock::TokioClock;
use cutout::timeout::AttemptError;
use cutout::{Breaker, Error, Jitter, RejectReason, Settings, State};

const SEC: Duration = Duration::from_secs(1);

fn five_consecutive() -> Breaker {
    Breaker::builder("inventory")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(5))
                .jitter(Jitter::None)
                .build()
                .unwrap(),
        )
        .clock(TokioClock::new())
        .build()
}

fn hung() -> std::future::Pending<Result<(), std::io::Error>> {
    std::future::pending()
}

#[tokio::test(start_paused = true)]
async fn ten_hung_calls_under_the_attempt_timeout_open_a_breaker_of_five_consecutive_failures() {
    let breaker = five_consecutive();
    let mut elapsed = 0;
    let mut refused = 0;
    for _ in 0..10 {
        match breaker.call_async_timeout(2 * SEC, hung()).await {
            Err(Error::Inner(AttemptError::Elapsed(after))) => {
                assert_eq!(after, 2 * SEC);
                elapsed += 1;
            }
            Err(Error::Rejected(rejected)) => {
                assert_eq!(rejected.reason(), RejectReason::Open);
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((elapsed, refused), (5, 5));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().consecutive_failures, 5);
}

#[tokio::test(start_paused = true)]
async fn ten_hung_calls_at_once_open_it_too() {
    let breaker = five_consecutive();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let breaker = breaker.clone();
            tokio::spawn(async move { breaker.call_async_timeout(2 * SEC, hung()).await })
        })
        .collect();
    for call in calls {
        let result = call.await.unwrap();
        assert!(matches!(
            result,
            Err(Error::Inner(AttemptError::Elapsed(_)))
        ));
    }
    assert_eq!(breaker.state(), State::Open);
}

/// The blind spot the attempt timeout closes: a timeout from outside cancels the call, and
/// the breaker counts nothing.
#[tokio::test(start_paused = true)]
async fn the_same_calls_under_a_timeout_from_outside_are_never_counted() {
    let breaker = five_consecutive();
    for _ in 0..10 {
        let outer = tokio::time::timeout(2 * SEC, breaker.call_async(hung())).await;
        assert!(outer.is_err(), "the outer timeout fired");
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().calls, 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_in_time_counts_by_its_result_and_its_classifier() {
    let breaker = five_consecutive();
    let ok = breaker
        .call_async_timeout(SEC, async {
            tokio::time::sleep(SEC / 2).await;
            Ok::<_, std::io::Error>(42)
        })
        .await;
    assert_eq!(ok.unwrap(), 42);
    let failed = breaker
        .call_async_timeout(SEC, async { Err::<(), _>("refused by peer") })
        .await;
    assert_eq!(
        failed.unwrap_err().into_inner(),
        Some(AttemptError::Failed("refused by peer"))
    );
    let not_found = |_: &Result<(), &str>| Outcome::Ignored;
    let ignored = breaker
        .call_async_timeout_with(&not_found, SEC, async { Err::<(), _>("404") })
        .await;
    assert!(ignored.is_err());
    // Ran out of time: a failure whatever the classifier says.
    let _ = breaker
        .call_async_timeout_with(&not_found, SEC, async {
            std::future::pending::<Result<(), &str>>().await
        })
        .await;
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (3, 2), "{snapshot:?}");
}

#[tokio::test(start_paused = true)]
async fn a_refused_call_never_polls_its_future() {
    let breaker = five_consecutive();
    breaker.isolate();
    let polled = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&polled);
    let result = breaker
        .call_async_timeout(SEC, async move {
            flag.store(true, Ordering::Relaxed);
            Ok::<_, ()>(())
        })
        .await;
    assert!(result.unwrap_err().is_rejected());
    assert!(!polled.load(Ordering::Relaxed));
}

#[test]
fn an_elapsed_attempt_reads_in_human_units() {
    let error: AttemptError<std::io::Error> = AttemptError::Elapsed(Duration::from_millis(2_500));
    assert_eq!(error.to_string(), "attempt timed out after 2.5s");
    assert!(error.is_elapsed());
}
