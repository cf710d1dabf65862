//! Threshold-exceeded events (resilience4j's FailureRateExceeded and SlowCallRateExceeded):
//! [`Transition::ThresholdExceeded`], raised to listeners when a rate rule's threshold is
//! crossed while closed and the breaker stays closed (an open gate kept it closed, or it
//! throttles instead of opening), once per crossing. A crossing that opens the breaker is
//! its [`Transition::Opened`]. On the manual clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, BreakerBuilder, Event, Jitter, OpenReason, Settings, SettingsBuilder, State,
    Transition, TripWindow,
};

const MS: Duration = Duration::from_millis(1);

/// 5 failures (or slow calls) of the last 10 calls trip it; nothing else does.
fn ratios() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(None)
        .window(TripWindow::Count(10))
        .minimum_calls(10)
        .failure_ratio(Some(0.5))
        .jitter(Jitter::None)
        .adaptive(false)
}

fn listen(builder: BreakerBuilder) -> (Breaker, Arc<Mutex<Vec<Event>>>) {
    let breaker = builder.build();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.clone()));
    (breaker, events)
}

fn outcomes(breaker: &Breaker, pattern: &str) {
    for c in pattern.chars() {
        let _ = breaker.call(|| if c == 'F' { Err(()) } else { Ok(()) });
    }
}

fn exceeded(events: &Mutex<Vec<Event>>) -> Vec<Event> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e.transition, Transition::ThresholdExceeded { .. }))
        .cloned()
        .collect()
}

#[test]
fn a_gated_breaker_raises_failure_rate_exceeded_once_per_crossing() {
    let (b, events) = listen(
        Breaker::builder("gated")
            .settings(ratios().build().unwrap())
            .clock(ManualClock::new())
            .open_gate(|_| false),
    );
    outcomes(&b, "SSSSSFFFFF");
    assert_eq!(b.state(), State::Closed, "the gate kept it closed");
    let raised = exceeded(&events);
    assert_eq!(raised.len(), 1);
    let event = &raised[0];
    assert_eq!(
        event.transition,
        Transition::ThresholdExceeded {
            reason: OpenReason::FailureRatio
        }
    );
    assert_eq!(
        (event.transition.from(), event.transition.to()),
        (State::Closed, State::Closed)
    );
    let evidence = event.evidence.expect("the window it read");
    assert_eq!((evidence.calls, evidence.failures), (10, 5));
    assert_eq!(
        event.to_string(),
        "gated: Closed -> Closed: failure ratio reached; stayed closed: 5 of 10 calls failed"
    );

    // Still above on every evaluation: no second event.
    outcomes(&b, "FFF");
    assert_eq!(exceeded(&events).len(), 1);
    // Below again (4 of 10), then above: a second crossing.
    outcomes(&b, "SSSSSS");
    assert_eq!(b.snapshot().failures, 4);
    assert_eq!(exceeded(&events).len(), 1);
    // The window's failures slide out (none of 10), then 5 of 10 fail again.
    outcomes(&b, "SSSSFFFF");
    assert_eq!(exceeded(&events).len(), 1);
    outcomes(&b, "F");
    assert_eq!(exceeded(&events).len(), 2);
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .all(|e| !matches!(e.transition, Transition::Opened { .. })),
        "never opened"
    );
}

#[test]
fn a_gated_breaker_raises_slow_call_rate_exceeded() {
    let clock = ManualClock::new();
    let (b, events) = listen(
        Breaker::builder("slow")
            .settings(
                ratios()
                    .failure_ratio(None)
                    .slow_call_threshold(Some(100 * MS))
                    .slow_call_ratio(0.5)
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .open_gate(|_| false),
    );
    for i in 0..10 {
        let permit = b.try_acquire().unwrap();
        clock.advance(if i < 5 { 10 * MS } else { 200 * MS });
        permit.success();
    }
    let raised = exceeded(&events);
    assert_eq!(raised.len(), 1);
    assert_eq!(
        raised[0].transition,
        Transition::ThresholdExceeded {
            reason: OpenReason::SlowCallRatio
        }
    );
    assert_eq!(raised[0].evidence.unwrap().slow, 5);
}

#[test]
fn a_throttling_breaker_raises_it_instead_of_opening() {
    let (b, events) = listen(
        Breaker::builder("throttled")
            .settings(
                Settings::builder()
                    .consecutive_failures(None)
                    .minimum_calls(10)
                    .failure_ratio(Some(0.5))
                    .throttle(Some(2.0))
                    .adaptive(false)
                    .build()
                    .unwrap(),
            )
            .clock(ManualClock::new())
            .seed(3),
    );
    outcomes(&b, &"F".repeat(200));
    assert_eq!(
        b.state(),
        State::Closed,
        "a throttling breaker never opens on a rule"
    );
    let raised = exceeded(&events);
    assert_eq!(
        raised.len(),
        1,
        "above its threshold all along: one crossing"
    );
    assert_eq!(
        raised[0].transition,
        Transition::ThresholdExceeded {
            reason: OpenReason::FailureRatio
        }
    );
}

#[test]
fn a_crossing_that_opens_the_breaker_is_its_opening_alone() {
    let (b, events) = listen(
        Breaker::builder("plain")
            .settings(ratios().build().unwrap())
            .clock(ManualClock::new()),
    );
    outcomes(&b, "SSSSSFFFFF");
    assert_eq!(b.state(), State::Open);
    let transitions: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.transition)
        .collect();
    assert!(
        matches!(
            transitions[..],
            [Transition::Opened {
                from: State::Closed,
                reason: OpenReason::FailureRatio,
                ..
            }]
        ),
        "{transitions:?}"
    );
}
