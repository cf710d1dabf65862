//! Cancellation and panics on every call path (sync `call`, `call_async`, the borrowed and the
//! owned permit), in closed and in half-open (DESIGN §2: a permit dropped without recording —
//! a cancelled future, an early return, a panic — records nothing and gives a half-open probe
//! slot back; a panic inside the call keeps unwinding; a panicking listener must not break the
//! breaker). No ramp exists yet, so there is no recovering case.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Error, Jitter, RejectReason, Settings, State, Transition, TripWindow};

const BREAK: Duration = Duration::from_secs(10);

/// One failure opens; two probe slots; one probe success closes.
fn breaker() -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .window(TripWindow::Count(10))
        .jitter(Jitter::None)
        .break_duration(BREAK)
        .max_break_duration(BREAK * 4)
        .half_open_probes(2)
        .probe_successes(1)
        .build()
        .unwrap();
    let breaker = Breaker::builder("dep")
        .settings(settings)
        .clock(clock.clone())
        .seed(1)
        .build();
    (breaker, clock)
}

/// A breaker in half-open with both probe slots free and no probe counted. Half-open is entered
/// lazily by the first call after the break, so one probe is taken and handed back first.
fn half_open() -> (Breaker, ManualClock) {
    let (breaker, clock) = breaker();
    breaker.try_acquire().unwrap().failure();
    clock.elapse_break(&breaker);
    assert_eq!(breaker.state(), State::HalfOpen);
    drop(breaker.try_acquire().expect("the first probe"));
    assert_eq!(breaker.snapshot().calls, 0);
    (breaker, clock)
}

/// A closed breaker that recorded nothing: any recorded failure would have opened it.
fn assert_closed_and_untouched(breaker: &Breaker) {
    assert_eq!(breaker.state(), State::Closed);
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (0, 0));
    assert_eq!(snapshot.consecutive_failures, 0);
}

/// A half-open breaker whose probes recorded nothing and returned every slot: both slots can be
/// taken again.
fn assert_half_open_with_free_slots(breaker: &Breaker) {
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::HalfOpen);
    assert_eq!(
        snapshot.probes_in_flight, 0,
        "a probe slot was not given back"
    );
    assert_eq!(snapshot.calls, 0, "an unfinished probe was counted");
    assert_eq!(
        snapshot.consecutive_opens, 1,
        "an unfinished probe re-opened it"
    );
    let first = breaker.try_acquire().expect("first slot free");
    let second = breaker.try_acquire().expect("second slot free");
    assert!(first.is_probe() && second.is_probe());
    let full = breaker.try_acquire().map(drop).unwrap_err();
    assert_eq!(full.reason(), RejectReason::HalfOpenFull);
}

fn panicking_call(breaker: &Breaker) {
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let _ = breaker.call(|| -> Result<(), ()> { panic!("call panics") });
    }));
    let payload = unwound.expect_err("the panic keeps unwinding");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"call panics"));
}

// --- sync `call` -------------------------------------------------------------------------------

#[test]
fn a_panicking_call_in_closed_records_nothing_and_keeps_unwinding() {
    let (breaker, _) = breaker();
    panicking_call(&breaker);
    assert_closed_and_untouched(&breaker);
    // The breaker still works: a failure still opens it.
    assert!(breaker.call(|| Err::<(), _>(())).is_err());
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_panicking_call_in_half_open_gives_the_probe_slot_back() {
    let (breaker, _) = half_open();
    panicking_call(&breaker);
    panicking_call(&breaker);
    panicking_call(&breaker);
    assert_half_open_with_free_slots(&breaker);
}

#[test]
fn a_panicking_call_with_a_classifier_in_half_open_gives_the_slot_back() {
    let (breaker, _) = half_open();
    let classifier = cutout::classify::by_error(|_: &()| cutout::ErrorClass::Transient);
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let _ = breaker.call_with(&classifier, || -> Result<(), ()> { panic!("boom") });
    }));
    assert!(unwound.is_err());
    assert_half_open_with_free_slots(&breaker);
}

// --- the borrowed permit -------------------------------------------------------------------------

fn early_return(breaker: &Breaker, bail: bool) -> Result<(), &'static str> {
    let permit = breaker.try_acquire().map_err(|_| "refused")?;
    if bail {
        return Err("gave up before the call"); // the permit drops here, unrecorded
    }
    permit.success();
    Ok(())
}

#[test]
fn a_permit_dropped_by_an_early_return_in_closed_records_nothing() {
    let (breaker, _) = breaker();
    assert!(early_return(&breaker, true).is_err());
    assert_closed_and_untouched(&breaker);
}

#[test]
fn a_permit_dropped_by_an_early_return_in_half_open_gives_the_slot_back() {
    let (breaker, _) = half_open();
    for _ in 0..3 {
        assert_eq!(early_return(&breaker, true), Err("gave up before the call"));
    }
    assert_half_open_with_free_slots(&breaker);
}

#[test]
fn a_permit_held_across_a_panic_in_half_open_gives_the_slot_back() {
    let (breaker, _) = half_open();
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let permit = breaker.try_acquire().unwrap();
        assert!(permit.is_probe());
        panic!("between acquire and record");
    }));
    assert!(unwound.is_err());
    assert_half_open_with_free_slots(&breaker);
}

#[test]
fn a_permit_held_across_a_panic_in_closed_records_nothing() {
    let (breaker, _) = breaker();
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let _permit = breaker.try_acquire().unwrap();
        panic!("between acquire and record");
    }));
    assert!(unwound.is_err());
    assert_closed_and_untouched(&breaker);
}

#[test]
fn an_ignored_probe_gives_the_slot_back_and_decides_nothing() {
    let (breaker, _) = half_open();
    breaker.try_acquire().unwrap().ignored();
    breaker.try_acquire().unwrap().ignored();
    assert_half_open_with_free_slots(&breaker);
}

// --- the owned permit ----------------------------------------------------------------------------

#[test]
fn an_owned_permit_in_a_panicking_thread_gives_the_slot_back() {
    let (breaker, _) = half_open();
    let permit = breaker.try_acquire_owned().unwrap();
    assert!(permit.is_probe());
    let joined = std::thread::spawn(move || {
        let _permit = permit;
        panic!("worker died");
    })
    .join();
    assert!(joined.is_err());
    assert_half_open_with_free_slots(&breaker);
}

#[test]
fn an_owned_permit_dropped_in_closed_records_nothing() {
    let (breaker, _) = breaker();
    let permit = breaker.try_acquire_owned().unwrap();
    std::thread::spawn(move || drop(permit)).join().unwrap();
    assert_closed_and_untouched(&breaker);
}

#[test]
fn an_owned_permit_outliving_its_handle_still_gives_the_slot_back() {
    let (breaker, _) = half_open();
    let permit = {
        let clone = breaker.clone();
        clone.try_acquire_owned().unwrap()
    }; // the clone that issued it is gone; the permit holds its own handle
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    drop(permit);
    assert_half_open_with_free_slots(&breaker);
}

// --- `call_async` --------------------------------------------------------------------------------

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_call_async_future_dropped_after_one_poll_in_half_open_gives_the_slot_back() {
    let (breaker, _) = half_open();
    {
        let mut call = pin!(breaker.call_async(std::future::pending::<Result<(), ()>>()));
        assert!(poll_once(call.as_mut()).is_pending());
        assert_eq!(
            breaker.snapshot().probes_in_flight,
            1,
            "the call holds a probe"
        );
    } // dropped mid-flight
    assert_half_open_with_free_slots(&breaker);
}

#[test]
fn a_call_async_future_dropped_before_its_first_poll_takes_no_slot() {
    let (breaker, _) = half_open();
    drop(breaker.call_async(async { Err::<(), ()>(()) }));
    assert_half_open_with_free_slots(&breaker);
}

#[tokio::test]
async fn a_timed_out_call_async_in_half_open_returns_the_slot_and_the_next_call_probes() {
    let (breaker, _) = half_open();
    let hung = breaker.call_async(std::future::pending::<Result<(), ()>>());
    let timed_out = tokio::time::timeout(Duration::from_millis(20), hung).await;
    assert!(
        timed_out.is_err(),
        "the hung call was cancelled by the timeout"
    );
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    assert_eq!(
        breaker.snapshot().calls,
        0,
        "the cancelled probe was counted"
    );
    // The next call is admitted as a probe, and its success closes the breaker.
    let permit = breaker.try_acquire().expect("the slot came back");
    assert!(permit.is_probe());
    drop(permit);
    assert_eq!(breaker.call_async(async { Ok::<_, ()>(7) }).await, Ok(7));
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_call_async_losing_a_select_in_closed_records_nothing() {
    let (breaker, _) = breaker();
    tokio::select! {
        biased;
        _ = breaker.call_async(async {
            std::future::pending::<()>().await;
            Err::<(), ()>(())
        }) => unreachable!("never finishes"),
        _ = tokio::time::sleep(Duration::from_millis(5)) => {}
    }
    assert_closed_and_untouched(&breaker);
}

#[tokio::test]
async fn an_aborted_task_running_call_async_in_half_open_gives_the_slot_back() {
    let (breaker, _) = half_open();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let task = {
        let breaker = breaker.clone();
        tokio::spawn(async move {
            breaker
                .call_async(async move {
                    started_tx.send(()).unwrap();
                    std::future::pending::<Result<(), ()>>().await
                })
                .await
        })
    };
    started_rx.await.unwrap();
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_half_open_with_free_slots(&breaker);
}

async fn explode() -> Result<(), ()> {
    panic!("future panics")
}

#[tokio::test]
async fn a_panicking_call_async_future_in_half_open_gives_the_slot_back() {
    let (breaker, _) = half_open();
    let task = {
        let breaker = breaker.clone();
        tokio::spawn(async move { breaker.call_async(explode()).await })
    };
    assert!(task.await.unwrap_err().is_panic());
    assert_half_open_with_free_slots(&breaker);
}

#[tokio::test]
async fn a_panicking_call_async_future_in_closed_records_nothing() {
    let (breaker, _) = breaker();
    let task = {
        let breaker = breaker.clone();
        tokio::spawn(async move { breaker.call_async(explode()).await })
    };
    assert!(task.await.unwrap_err().is_panic());
    assert_closed_and_untouched(&breaker);
}

#[tokio::test]
async fn a_refused_call_async_never_polls_its_future() {
    let (breaker, _) = breaker();
    breaker.isolate();
    let polled = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&polled);
    let result = breaker
        .call_async(async move {
            seen.fetch_add(1, Ordering::Relaxed);
            Ok::<_, ()>(())
        })
        .await;
    assert_eq!(
        result.unwrap_err().rejection().map(|r| r.reason()),
        Some(RejectReason::Isolated)
    );
    assert_eq!(polled.load(Ordering::Relaxed), 0);
}

// --- listeners -----------------------------------------------------------------------------------

#[test]
fn a_panicking_listener_is_contained_and_later_listeners_still_hear_every_event() {
    let (breaker, clock) = breaker();
    let panics = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&panics);
    breaker.subscribe(move |_| {
        counted.fetch_add(1, Ordering::Relaxed);
        panic!("listener panics");
    });
    let heard = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&heard);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));

    // The tripping call returns its own error, not the listener's panic.
    let result = catch_unwind(AssertUnwindSafe(|| breaker.call(|| Err::<(), _>("down"))));
    assert_eq!(result.expect("contained"), Err(Error::Inner("down")));
    assert_eq!(breaker.state(), State::Open);

    // Half-open and close: both raised through the panicking listener too.
    clock.elapse_break(&breaker);
    assert_eq!(breaker.call(|| Ok::<_, ()>(1)), Ok(1));
    assert_eq!(breaker.state(), State::Closed);

    assert_eq!(panics.load(Ordering::Relaxed), 3);
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 3, "{heard:?}");
    assert!(matches!(heard[0], Transition::Opened { .. }));
    assert_eq!(heard[1], Transition::HalfOpened);
    assert!(matches!(heard[2], Transition::Closed { .. }));

    // Nothing is poisoned: every entry point still answers.
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    breaker.isolate();
    breaker.reset();
    assert!(breaker.try_acquire().is_ok());
}

#[test]
fn a_panicking_listener_on_a_probe_does_not_leak_the_probe_slot() {
    let (breaker, _) = half_open();
    breaker.subscribe(|_| panic!("listener panics"));
    // The first probe's admission raises HalfOpened through the panicking listener.
    let probe = breaker
        .try_acquire()
        .expect("admitted despite the listener");
    assert!(probe.is_probe());
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    probe.failure(); // re-opens, raising Opened through it
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    assert_eq!(breaker.snapshot().consecutive_opens, 2);
}
