//! Ending a break early on a proven recovery (`Breaker::end_break_on_signal`), on the manual
//! clock: only an open breaker serving a break of its own, only on evidence gathered since it
//! opened, and its own probes still decide.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{BreakEndReason, Breaker, Jitter, OpenReason, Recovery, Settings, State, Transition};

const SEC: Duration = Duration::from_secs(1);
const HEALTH: BreakEndReason = BreakEndReason::HealthCheck;

fn breaker(clock: &ManualClock) -> (Breaker, Arc<Mutex<Vec<Transition>>>) {
    breaker_with(clock, Settings::builder())
}

fn breaker_with(
    clock: &ManualClock,
    settings: cutout::SettingsBuilder,
) -> (Breaker, Arc<Mutex<Vec<Transition>>>) {
    let settings = settings
        .break_duration(10 * SEC)
        .max_break_duration(80 * SEC)
        .jitter(Jitter::None)
        .consecutive_failures(Some(1))
        .probe_successes(1)
        .build()
        .unwrap();
    let breaker = Breaker::builder("inventory")
        .settings(settings)
        .clock(clock.clone())
        .build();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    (breaker, events)
}

fn fail(breaker: &Breaker) {
    let _ = breaker.call(|| Err::<(), _>(()));
}

#[test]
fn a_proven_recovery_ends_a_trip_s_break_and_the_probes_decide() {
    let clock = ManualClock::new();
    let (breaker, events) = breaker(&clock);
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    clock.advance(3 * SEC);
    assert!(breaker.end_break_on_signal(HEALTH, SEC));
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(
        events.lock().unwrap().last(),
        Some(&Transition::BreakEnded {
            reason: HEALTH,
            remaining: 7 * SEC,
        })
    );
    // The next call is a probe, admitted at once; its failure re-opens with a grown break.
    let probe = breaker.try_acquire().expect("a probe is admitted");
    assert!(breaker.try_acquire().is_err(), "one probe at a time");
    probe.failure();
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Open);
    assert_eq!(snapshot.current_break, Some(20 * SEC), "the break grew");
    assert_eq!(snapshot.consecutive_opens, 2);
    // Ended again, a successful probe closes it.
    assert!(breaker.end_break_on_signal(BreakEndReason::PeerRecovered, Duration::ZERO));
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().consecutive_opens, 0);
}

#[test]
fn evidence_gathered_before_the_break_began_is_stale() {
    let clock = ManualClock::new();
    let (breaker, events) = breaker(&clock);
    clock.advance(100 * SEC);
    fail(&breaker);
    clock.advance(2 * SEC);
    // A check that started 3 s ago started before the opening 2 s ago.
    assert!(!breaker.end_break_on_signal(HEALTH, 3 * SEC));
    assert!(!breaker.end_break_on_signal(HEALTH, Duration::MAX));
    assert_eq!(breaker.state(), State::Open);
    // Gathered exactly when it opened, or since: not stale.
    assert!(breaker.end_break_on_signal(HEALTH, 2 * SEC));
    let reasons: Vec<_> = events.lock().unwrap().iter().map(|t| t.to()).collect();
    assert_eq!(reasons, [State::Open, State::HalfOpen]);
}

#[test]
fn a_stale_signal_after_a_re_opening_does_nothing() {
    let clock = ManualClock::new();
    let (breaker, _) = breaker(&clock);
    fail(&breaker);
    clock.advance(10 * SEC);
    // The break elapsed; the probe fails 1 s later: a new opening.
    clock.advance(SEC);
    fail(&breaker);
    assert_eq!(breaker.snapshot().consecutive_opens, 2);
    clock.advance(SEC);
    // A peer's close seen 5 s ago predates the re-opening 1 s ago.
    assert!(!breaker.end_break_on_signal(BreakEndReason::PeerRecovered, 5 * SEC));
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn only_an_open_breaker_on_its_own_break_ends_it() {
    let clock = ManualClock::new();
    let (breaker, events) = breaker(&clock);
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "closed"
    );
    fail(&breaker);
    clock.advance(10 * SEC);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "half-open (lazily)"
    );
    let probe = breaker.try_acquire().unwrap();
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "half-open, probing"
    );
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
    breaker.isolate();
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "isolated"
    );
    assert_eq!(breaker.state(), State::Isolated);
    breaker.disable();
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "disabled"
    );
    assert_eq!(breaker.state(), State::Disabled);
    breaker.reset();
    // An operator's break is served whole.
    breaker.open_for(30 * SEC);
    clock.advance(SEC);
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "forced open"
    );
    assert_eq!(breaker.state(), State::Open);
    breaker.reset();
    // So is a break the dependency asked for.
    breaker.try_acquire().unwrap().open_for(30 * SEC);
    assert_eq!(breaker.state(), State::Open);
    clock.advance(SEC);
    assert!(
        !breaker.end_break_on_signal(HEALTH, Duration::ZERO),
        "retry-after"
    );
    assert_eq!(breaker.state(), State::Open);
    // After the asked break, a probe fails: that break is the breaker's own again.
    clock.advance(30 * SEC);
    fail(&breaker);
    assert!(breaker.end_break_on_signal(HEALTH, Duration::ZERO));
    let ended = events
        .lock()
        .unwrap()
        .iter()
        .filter(|t| matches!(t, Transition::BreakEnded { .. }))
        .count();
    assert_eq!(ended, 1);
}

#[test]
fn recovering_is_left_as_it_is() {
    let clock = ManualClock::new();
    let (breaker, _) = breaker_with(
        &clock,
        Settings::builder().recovery(Some(Recovery::over(1.0))),
    );
    fail(&breaker);
    clock.advance(10 * SEC);
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(breaker.state(), State::Recovering);
    assert!(!breaker.end_break_on_signal(HEALTH, Duration::ZERO));
    assert_eq!(breaker.state(), State::Recovering);
}

#[test]
fn a_signal_trip_s_break_ends_like_any_trip_s() {
    let clock = ManualClock::new();
    let (breaker, events) = breaker(&clock);
    assert!(breaker.trip_on_signal());
    assert!(breaker.end_break_on_signal(BreakEndReason::Signal, Duration::ZERO));
    let seen = events.lock().unwrap().clone();
    assert!(matches!(
        seen[0],
        Transition::Opened {
            reason: OpenReason::Signal,
            ..
        }
    ));
    assert_eq!(
        seen[1],
        Transition::BreakEnded {
            reason: BreakEndReason::Signal,
            remaining: 10 * SEC,
        }
    );
    assert_eq!(
        seen[1].to_string(),
        "a signal from outside its calls said it recovered"
    );
    assert_eq!(BreakEndReason::HealthCheck.as_str(), "health_check");
    assert_eq!(BreakEndReason::PeerRecovered.as_str(), "peer_recovered");
}
