//! Trips on a signal from outside the breaker's own calls (`Breaker::trip_on_signal`), on the
//! manual clock: an opening like any trip, through the open gate, only from closed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, OpenReason, Settings, State, Transition};

const SEC: Duration = Duration::from_secs(1);

fn breaker(
    clock: &ManualClock,
    gate: Option<Arc<AtomicBool>>,
) -> (Breaker, Arc<Mutex<Vec<Transition>>>) {
    let settings = Settings::builder()
        .break_duration(10 * SEC)
        .max_break_duration(80 * SEC)
        .jitter(Jitter::None)
        .probe_successes(1)
        .build()
        .unwrap();
    let mut builder = Breaker::builder("inventory")
        .settings(settings)
        .clock(clock.clone());
    if let Some(gate) = gate {
        builder = builder.open_gate(move |_| gate.load(Ordering::Relaxed));
    }
    let breaker = builder.build();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    (breaker, events)
}

#[test]
fn a_signal_opens_a_closed_breaker_like_a_trip_with_its_own_reason() {
    let clock = ManualClock::new();
    let (breaker, events) = breaker(&clock, None);
    assert!(breaker.trip_on_signal());
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        *events.lock().unwrap(),
        [Transition::Opened {
            from: State::Closed,
            reason: OpenReason::Signal,
            break_for: 10 * SEC,
        }]
    );
    let refusal = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
    assert_eq!(refusal.rejection().unwrap().retry_after(), Some(10 * SEC));
    // It probes on its own; a failed probe grows the break as after any trip.
    clock.advance(10 * SEC);
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.snapshot().current_break, Some(20 * SEC));
    assert_eq!(breaker.snapshot().consecutive_opens, 2);
}

#[test]
fn a_signal_leaves_every_state_but_closed_as_it_is() {
    let clock = ManualClock::new();
    let (breaker, events) = breaker(&clock, None);
    assert!(breaker.trip_on_signal());
    assert!(!breaker.trip_on_signal(), "open");
    clock.advance(10 * SEC);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(!breaker.trip_on_signal(), "half-open (lazily)");
    let probe = breaker.try_acquire().unwrap();
    assert!(!breaker.trip_on_signal(), "half-open with a probe out");
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
    breaker.isolate();
    assert!(!breaker.trip_on_signal(), "isolated");
    breaker.disable();
    assert!(!breaker.trip_on_signal(), "disabled");
    breaker.reset();
    assert!(breaker.trip_on_signal(), "closed again");
    let opened = events
        .lock()
        .unwrap()
        .iter()
        .filter(|t| matches!(t, Transition::Opened { .. }))
        .count();
    assert_eq!(opened, 2);
}

#[test]
fn a_signal_passes_the_open_gate() {
    let clock = ManualClock::new();
    let allowed = Arc::new(AtomicBool::new(false));
    let (breaker, _) = breaker(&clock, Some(Arc::clone(&allowed)));
    assert!(!breaker.trip_on_signal());
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().suppressed_opens, 1);
    allowed.store(true, Ordering::Relaxed);
    assert!(breaker.trip_on_signal());
    assert_eq!(breaker.state(), State::Open);
}
