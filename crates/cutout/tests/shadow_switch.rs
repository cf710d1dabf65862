//! The live switch into and out of shadow mode (resilience4j's METRICS_ONLY state):
//! [`Breaker::shadow`] and [`Breaker::enforce`]. A shadow breaker counts and runs its trip rules,
//! its transitions are raised, and it refuses nothing; the switch carries every count. On the
//! manual clock, but for one test on the system clock with a coarse clock running (the quick
//! refusal path).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::{CoarseClock, ManualClock};
use cutout::{
    Breaker, CloseReason, Error, Jitter, ManualAction, OpenReason, RejectReason, Settings,
    SettingsBuilder, State, Transition, TripWindow,
};

const SEC: Duration = Duration::from_secs(1);

/// Opens on the second consecutive failure for 10 s (doubling), no jitter, one probe success
/// closes; not adaptive, so every figure is exact.
fn base() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(10 * SEC)
        .max_break_duration(80 * SEC)
        .jitter(Jitter::None)
        .probe_successes(1)
        .adaptive(false)
}

struct Sim {
    breaker: Breaker,
    clock: ManualClock,
    events: Arc<Mutex<Vec<Transition>>>,
    ran: Arc<Mutex<u32>>,
}

impl Sim {
    fn new(settings: SettingsBuilder) -> Sim {
        let clock = ManualClock::new();
        let breaker = Breaker::builder("dep")
            .settings(settings.build().unwrap())
            .clock(clock.clone())
            .seed(7)
            .build();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
        Sim {
            breaker,
            clock,
            events,
            ran: Arc::new(Mutex::new(0)),
        }
    }

    fn call(&self, ok: bool) -> Result<(), Error<()>> {
        self.breaker.call(|| {
            *self.ran.lock().unwrap() += 1;
            if ok { Ok(()) } else { Err(()) }
        })
    }

    /// How many calls ran (were not refused) since the last look.
    fn ran(&self) -> u32 {
        std::mem::take(&mut *self.ran.lock().unwrap())
    }

    fn events(&self) -> Vec<Transition> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

#[test]
fn a_closed_breaker_switched_into_shadow_trips_and_raises_its_opening_but_refuses_nothing() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    assert!(!b.is_shadow());
    assert!(b.shadow(), "the switch took effect");
    assert!(b.is_shadow());
    assert!(b.snapshot().shadow);
    assert_eq!(b.snapshot().last_manual_action, Some(ManualAction::Shadow));
    assert!(sim.events().is_empty(), "a control raises no transition");

    let _ = sim.call(false);
    let _ = sim.call(false);
    assert_eq!(b.state(), State::Open, "the trip rules still run");
    assert_eq!(
        sim.events(),
        [Transition::Opened {
            from: State::Closed,
            reason: OpenReason::ConsecutiveFailures(2),
            break_for: 10 * SEC,
        }]
    );
    sim.ran();
    for _ in 0..3 {
        sim.call(true).expect("a shadow breaker refuses nothing");
    }
    assert_eq!(sim.ran(), 3);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(s.shadow_refusals, 3, "what it would have refused");
    assert_eq!(s.refused_calls, 0, "and refused none");
    // The would-be refusals run uncounted: the window still shows what tripped it.
    assert_eq!((s.calls, s.failures), (2, 2));

    // The break ends as it would have: the next call is a probe, and its success closes.
    sim.clock.advance(10 * SEC);
    sim.call(true).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        sim.events(),
        [
            Transition::HalfOpened,
            Transition::Closed {
                from: State::HalfOpen,
                reason: CloseReason::ProbesSucceeded,
            }
        ]
    );
}

#[test]
fn an_open_breaker_switched_into_shadow_stops_refusing_and_enforce_refuses_again() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    let _ = sim.call(false);
    let _ = sim.call(false);
    assert_eq!(b.state(), State::Open);
    sim.ran();
    let refused = sim.call(true).unwrap_err();
    assert_eq!(refused.rejection().unwrap().reason(), RejectReason::Open);
    assert_eq!(sim.ran(), 0);

    sim.clock.advance(3 * SEC);
    assert!(b.shadow());
    assert_eq!(b.state(), State::Open, "the mode is not a state");
    assert_eq!(b.break_remaining(), Some(7 * SEC), "the break runs on");
    sim.call(true).expect("let through");
    sim.call(true).expect("let through");
    assert_eq!(sim.ran(), 2);
    assert_eq!(b.snapshot().shadow_refusals, 2);

    sim.clock.advance(2 * SEC);
    assert!(b.enforce());
    assert!(!b.is_shadow());
    assert_eq!(b.snapshot().last_manual_action, Some(ManualAction::Enforce));
    let refused = sim.call(true).unwrap_err();
    let refused = refused.rejection().unwrap();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(
        refused.retry_after(),
        Some(5 * SEC),
        "the same break, 5 s left"
    );
    assert_eq!(sim.ran(), 0);
    let s = b.snapshot();
    assert_eq!(
        s.refused_calls, 2,
        "the opening's episode: one before, one after"
    );
    assert_eq!(s.shadow_refusals, 2, "carried");
    assert!(
        sim.events().len() == 1,
        "only the opening; the switches raise nothing"
    );
}

#[test]
fn counts_are_carried_across_the_switch_both_ways() {
    let sim = Sim::new(
        base()
            .consecutive_failures(Some(5))
            .window(TripWindow::Count(10))
            .minimum_calls(10)
            .failure_ratio(Some(0.5)),
    );
    let b = &sim.breaker;
    for ok in [true, false, true, false, false] {
        let _ = sim.call(ok);
    }
    let before = b.snapshot();
    assert_eq!(
        (before.calls, before.failures, before.consecutive_failures),
        (5, 3, 2)
    );

    assert!(b.shadow());
    let s = b.snapshot();
    assert_eq!(
        (s.calls, s.failures, s.consecutive_failures),
        (5, 3, 2),
        "carried in"
    );
    for ok in [true, false, true] {
        let _ = sim.call(ok);
    }
    assert!(b.enforce());
    let s = b.snapshot();
    assert_eq!(
        (s.calls, s.failures, s.consecutive_failures),
        (8, 4, 0),
        "carried out"
    );

    // The window's counts across the switch decide the trip: 5 failures of 10 calls.
    let _ = sim.call(true);
    assert_eq!(b.state(), State::Closed, "9 calls: below the minimum");
    let _ = sim.call(false);
    assert_eq!(
        b.state(),
        State::Open,
        "5 of 10, with the calls made in shadow"
    );

    // Break growth is carried too: a failed probe in shadow doubles the break.
    assert!(b.shadow());
    sim.clock.advance(10 * SEC);
    let _ = sim.call(false);
    let s = b.snapshot();
    assert_eq!(s.consecutive_opens, 2);
    assert_eq!(s.current_break, Some(20 * SEC));
}

#[test]
fn a_switch_to_the_mode_in_force_changes_nothing_and_reset_keeps_the_mode() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    assert!(!b.enforce(), "already enforcing");
    assert_eq!(b.snapshot().last_manual_action, None, "nothing took effect");
    assert!(b.shadow());
    assert!(!b.shadow(), "already shadow");
    b.reset();
    assert!(b.is_shadow(), "reset returns the state, not the mode");
    assert_eq!(b.snapshot().last_manual_action, Some(ManualAction::Reset));

    // A breaker configured in shadow mode is switched out the same way.
    let configured = Sim::new(base().shadow(true));
    assert!(configured.breaker.is_shadow());
    assert!(configured.breaker.enforce());
    let _ = configured.call(false);
    let _ = configured.call(false);
    let refused = configured.call(true).unwrap_err();
    assert_eq!(refused.rejection().unwrap().reason(), RejectReason::Open);
    assert_eq!(ManualAction::Shadow.as_str(), "shadow");
    assert_eq!(ManualAction::Enforce.as_str(), "enforce");
}

#[test]
fn an_isolated_breaker_switched_into_shadow_lets_calls_through_uncounted() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    b.isolate();
    assert_eq!(
        sim.call(true).unwrap_err().rejection().unwrap().reason(),
        RejectReason::Isolated
    );
    assert!(b.shadow());
    sim.ran();
    sim.call(true).expect("let through");
    sim.call(false)
        .expect_err("the call's own error, not a refusal");
    assert_eq!(sim.ran(), 2);
    let s = b.snapshot();
    assert_eq!(s.state, State::Isolated);
    assert_eq!(s.shadow_refusals, 2);
    assert_eq!((s.calls, s.failures), (0, 0), "uncounted");
    assert!(b.enforce());
    assert_eq!(
        sim.call(true).unwrap_err().rejection().unwrap().reason(),
        RejectReason::Isolated
    );
}

/// The quick refusal path (system clock, coarse clock running) decides without the lock: a
/// switch into shadow must reach it at once.
#[test]
fn the_quick_refusal_path_sees_the_switch_on_the_system_clock() {
    let _coarse = CoarseClock::start(Duration::from_millis(1)).expect("none runs");
    let breaker = Breaker::new("quick", base().break_duration(60 * SEC).build().unwrap());
    let _ = breaker.call(|| Err::<(), _>(()));
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.peek().0, State::Open);
    // Give the coarse clock a tick so that the quick path decides.
    std::thread::sleep(Duration::from_millis(5));
    assert!(
        breaker.call(|| Ok::<_, ()>(())).is_err(),
        "refused while open"
    );
    assert!(breaker.shadow());
    for _ in 0..100 {
        breaker
            .call(|| Ok::<_, ()>(()))
            .expect("shadow refuses nothing");
    }
    assert_eq!(breaker.snapshot().shadow_refusals, 100);
    assert!(breaker.enforce());
    let refused = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
    let refused = refused.rejection().unwrap();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert!(refused.retry_after().unwrap() > 50 * SEC);
}

#[test]
fn a_throttling_breaker_switched_into_shadow_lets_its_would_be_refusals_through() {
    let sim = Sim::new(
        Settings::builder()
            .consecutive_failures(None)
            .throttle(Some(2.0))
            .adaptive(false),
    );
    let b = &sim.breaker;
    for _ in 0..200 {
        let _ = sim.call(false);
    }
    let throttled = |sim: &Sim| {
        (0..100)
            .filter(|_| {
                sim.call(false)
                    .err()
                    .and_then(|e| e.rejection().map(|r| r.reason()))
                    == Some(RejectReason::Throttled)
            })
            .count()
    };
    assert!(throttled(&sim) > 50, "throttling refuses most calls");
    assert!(b.shadow());
    let before = b.snapshot().shadow_refusals;
    assert_eq!(throttled(&sim), 0, "shadow refuses nothing");
    assert!(
        b.snapshot().shadow_refusals - before > 50,
        "counted as would-be refusals"
    );
    assert!(b.snapshot().throttle_probability.unwrap() > 0.5);
    assert!(b.enforce());
    assert!(throttled(&sim) > 50, "enforcing again");
    assert_eq!(b.state(), State::Closed);
}
