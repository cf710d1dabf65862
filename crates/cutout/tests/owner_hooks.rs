//! What a breaker's owner is told beside the events: an open gate told each opening's reason
//! (`BreakerBuilder::open_gate_for`) and a reset hook told of every reset
//! (`BreakerBuilder::on_reset`), on a manual clock. Both are what cutout-tower's keyed map
//! needs to keep its open cap and its carried break growth right for a breaker used through
//! its own handle (issue #29).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::classify::by_verdict;
use cutout::clock::ManualClock;
use cutout::{Breaker, BreakerBuilder, Jitter, OpenReason, Settings, State, Verdict};

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(Duration::from_secs(10))
        .max_break_duration(Duration::from_secs(80))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap()
}

fn builder(clock: &ManualClock) -> BreakerBuilder {
    Breaker::builder("owned")
        .settings(settings())
        .clock(clock.clone())
}

fn trip(breaker: &Breaker) {
    for _ in 0..2 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
}

/// A gate that records the reasons it is asked about and answers `allow(reason)`.
fn recording_gate(
    builder: BreakerBuilder,
    allow: impl Fn(OpenReason) -> bool + Send + Sync + 'static,
) -> (BreakerBuilder, Arc<Mutex<Vec<OpenReason>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let builder = builder.open_gate_for(move |id, reason| {
        assert_eq!(id.as_str(), "owned");
        seen.lock().unwrap().push(reason);
        allow(reason)
    });
    (builder, asked)
}

#[test]
fn an_open_gate_is_told_the_reason_of_each_opening_from_closed() {
    let clock = ManualClock::new();
    let (builder, asked) = recording_gate(builder(&clock), |_| true);
    let breaker = builder.build();

    trip(&breaker);
    assert_eq!(breaker.state(), State::Open);
    breaker.reset();
    breaker
        .try_acquire_owned()
        .unwrap()
        .record_verdict(Verdict::OpenFor(Duration::from_secs(5)));
    assert_eq!(breaker.break_remaining(), Some(Duration::from_secs(5)));
    breaker.reset();
    assert!(breaker.trip_on_signal());
    assert_eq!(
        *asked.lock().unwrap(),
        [
            OpenReason::ConsecutiveFailures(2),
            OpenReason::RetryAfter,
            OpenReason::Signal
        ]
    );
}

#[test]
fn a_gate_that_refuses_trips_still_lets_an_asked_opening_through() {
    let clock = ManualClock::new();
    let (builder, asked) = recording_gate(builder(&clock), |r| r == OpenReason::RetryAfter);
    let breaker = builder.build();

    trip(&breaker);
    assert_eq!(breaker.state(), State::Closed, "the cap is full for trips");
    assert_eq!(breaker.snapshot().suppressed_opens, 1);
    // Through `call_with` and a classifier, as any integration records it.
    let answered = breaker.call_with(
        &by_verdict(|_: &Result<(), ()>| Verdict::OpenFor(Duration::from_secs(20))),
        || Ok(()),
    );
    assert!(answered.is_ok());
    assert_eq!(
        (breaker.state(), breaker.break_remaining()),
        (State::Open, Some(Duration::from_secs(20)))
    );
    assert_eq!(breaker.snapshot().suppressed_opens, 1, "no refusal counted");
    assert_eq!(
        asked.lock().unwrap().last(),
        Some(&OpenReason::RetryAfter),
        "{asked:?}"
    );
}

#[test]
fn a_re_opening_from_half_open_asks_no_gate() {
    let clock = ManualClock::new();
    let (builder, asked) = recording_gate(builder(&clock), |_| true);
    let breaker = builder.build();
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let _ = breaker.call(|| Err::<(), _>("still down"));
    assert_eq!(
        breaker.snapshot().current_break,
        Some(Duration::from_secs(20))
    );
    assert_eq!(asked.lock().unwrap().len(), 1, "{asked:?}");
}

#[test]
fn a_panicking_gate_told_the_reason_counts_as_refusing() {
    let clock = ManualClock::new();
    let breaker = builder(&clock)
        .open_gate_for(|_, _| panic!("the shared counter is gone"))
        .build();
    trip(&breaker);
    breaker
        .try_acquire_owned()
        .unwrap()
        .record_verdict(Verdict::OpenFor(Duration::from_secs(5)));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().suppressed_opens, 2);
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok(), "still serving");
}

#[test]
fn the_later_of_open_gate_and_open_gate_for_is_the_gate() {
    let clock = ManualClock::new();
    let breaker = builder(&clock)
        .open_gate_for(|_, _| true)
        .open_gate(|_| false)
        .build();
    trip(&breaker);
    assert_eq!(breaker.state(), State::Closed);
}

/// A counter of the resets a hook was told of.
fn counting_hook(builder: BreakerBuilder) -> (BreakerBuilder, Arc<AtomicU32>) {
    let resets = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&resets);
    let builder = builder.on_reset(move |id| {
        assert_eq!(id.as_str(), "owned");
        seen.fetch_add(1, Ordering::Relaxed);
    });
    (builder, resets)
}

#[test]
fn the_reset_hook_is_told_of_every_reset_through_any_handle_and_of_nothing_else() {
    let clock = ManualClock::new();
    let (builder, resets) = counting_hook(builder(&clock));
    let breaker = builder.build();
    let events = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&events);
    breaker.subscribe(move |_| {
        count.fetch_add(1, Ordering::Relaxed);
    });

    breaker.isolate();
    breaker.disable();
    breaker.open_for(Duration::from_secs(3));
    assert_eq!(resets.load(Ordering::Relaxed), 0, "only resets are told");
    breaker.clone().reset();
    assert_eq!(resets.load(Ordering::Relaxed), 1);
    trip(&breaker);
    breaker.reset();
    breaker.reset();
    assert_eq!(resets.load(Ordering::Relaxed), 3);
    assert_eq!(
        events.load(Ordering::Relaxed),
        1,
        "the trip's opening only: a reset raises no event"
    );
}

#[test]
fn the_reset_hook_runs_inside_the_reset_before_its_word_is_published() {
    // The hook sees the reset done (a peek from inside it shows closed, a new generation)
    // and a reset the hook is told of is one no opening has followed yet.
    let clock = ManualClock::new();
    let seen: Arc<Mutex<Vec<(State, u32)>>> = Arc::default();
    let inside = Arc::clone(&seen);
    let handle: Arc<Mutex<Option<Breaker>>> = Arc::default();
    let peeker = Arc::clone(&handle);
    let breaker = builder(&clock)
        .on_reset(move |_| {
            if let Some(breaker) = peeker.lock().unwrap().as_ref() {
                inside.lock().unwrap().push(breaker.peek());
            }
        })
        .build();
    *handle.lock().unwrap() = Some(breaker.clone());
    trip(&breaker);
    let (_, opened) = breaker.peek();
    breaker.reset();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    // The word is published after the locked step: from inside, the hook still reads the
    // open word. What it can rely on is the machine's state, which the reset already
    // changed: no opening can come between the reset and the hook.
    assert_eq!(seen[0], (State::Open, opened));
    assert_eq!(breaker.state(), State::Closed);
    handle.lock().unwrap().take();
}

#[test]
fn a_panicking_reset_hook_leaves_the_reset_done_and_the_breaker_serving() {
    let clock = ManualClock::new();
    let breaker = builder(&clock)
        .on_reset(|_| panic!("the owner's map is gone"))
        .build();
    trip(&breaker);
    let reset = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| breaker.reset()));
    assert!(reset.is_ok(), "the hook's panic reached the caller");
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().consecutive_opens, 0);
    trip(&breaker);
    assert_eq!(
        breaker.snapshot().current_break,
        Some(Duration::from_secs(10)),
        "a reset means no break growth"
    );
}
