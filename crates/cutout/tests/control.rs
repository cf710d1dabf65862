//! The controls and settings of resilience4j / Polly parity (DESIGN §2 "Control"), on the
//! manual clock: opening for a while, break schedules, what running out of the maximum wait in
//! half-open does, the initial state `reset()` returns to, a retry-after on every refusal but
//! an isolated breaker's, and the trace manual actions leave.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    BreakSchedule, Breaker, CloseReason, Error, ErrorCode, HalfOpenTimeout, Health, InitialState,
    Jitter, ManualAction, OpenReason, Recovery, RejectReason, Rejected, Settings, SettingsBuilder,
    State, Transition,
};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
const NS: Duration = Duration::from_nanos(1);

/// Opens on the first failure for 10 s, doubling up to 80 s, no jitter, one probe success
/// closes; not adaptive (no baselines), so every figure below is exact.
fn base() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(Some(1))
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
        }
    }

    fn ok(&self) -> Result<(), Error<()>> {
        self.breaker.call(|| Ok(()))
    }

    fn fail(&self) -> Result<(), Error<()>> {
        self.breaker.call(|| Err(()))
    }

    fn refusal(&self) -> Rejected {
        self.ok()
            .unwrap_err()
            .rejection()
            .cloned()
            .expect("refused")
    }

    fn events(&self) -> Vec<Transition> {
        self.events.lock().unwrap().clone()
    }

    fn current_break(&self) -> Option<Duration> {
        self.breaker.snapshot().current_break
    }
}

fn opened(from: State, reason: OpenReason, break_for: Duration) -> Transition {
    Transition::Opened {
        from,
        reason,
        break_for,
    }
}

// ---------------------------------------------------------------------------------------------
// Opening for a while.

#[test]
fn open_for_refuses_until_then_half_opens_with_no_event_and_no_growth() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.clock.advance(5 * SEC);
    assert!(b.open_for(30 * SEC));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.health(), Health::Unhealthy);
    let refused = sim.refusal();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(refused.retry_after(), Some(30 * SEC));
    let s = b.snapshot();
    assert_eq!(s.opened_at, Some(5 * SEC));
    assert_eq!(
        s.current_break,
        Some(30 * SEC),
        "exactly: no jitter, no cap"
    );
    assert_eq!(
        s.consecutive_opens, 0,
        "a manual open does not grow the break"
    );
    assert!(sim.events().is_empty(), "no call caused it");

    sim.clock.advance(30 * SEC - NS);
    assert_eq!(sim.refusal().retry_after(), Some(NS));
    sim.clock.advance(NS);
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the end is inclusive, as a break's"
    );
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.failure();
    // The first open since the breaker closed: the first break.
    assert_eq!(sim.current_break(), Some(10 * SEC));
    assert_eq!(b.snapshot().consecutive_opens, 1);
    assert_eq!(
        sim.events(),
        [
            Transition::HalfOpened,
            opened(State::HalfOpen, OpenReason::ProbeFailed, 10 * SEC)
        ]
    );
    sim.clock.elapse_break(b);
    sim.ok().unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn open_for_on_an_open_breaker_replaces_its_break_and_keeps_its_growth() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.fail().unwrap_err();
    sim.clock.elapse_break(b);
    sim.fail().unwrap_err(); // the probe fails: the second open, for 20 s, at t = 10 s
    assert_eq!(sim.current_break(), Some(20 * SEC));
    sim.clock.advance(3 * SEC);

    // Sooner than its own end.
    assert!(b.open_for(2 * SEC));
    assert_eq!(b.break_remaining(), Some(2 * SEC));
    let s = b.snapshot();
    assert_eq!(
        s.opened_at,
        Some(10 * SEC),
        "it has been open since t = 10 s"
    );
    assert_eq!(
        s.current_break,
        Some(5 * SEC),
        "from its opening to the new end"
    );
    assert_eq!(s.consecutive_opens, 2);
    // Later than its own end.
    assert!(b.open_for(100 * SEC));
    assert_eq!(sim.refusal().retry_after(), Some(100 * SEC));
    sim.clock.advance(100 * SEC);
    sim.fail().unwrap_err(); // a failed probe: the third open, grown from the second
    assert_eq!(sim.current_break(), Some(40 * SEC));
    assert_eq!(b.snapshot().consecutive_opens, 3);
    let opens: Vec<_> = sim
        .events()
        .into_iter()
        .filter_map(|t| match t {
            Transition::Opened { break_for, .. } => Some(break_for),
            _ => None,
        })
        .collect();
    assert_eq!(
        opens,
        [10 * SEC, 20 * SEC, 40 * SEC],
        "no event for the manual opens"
    );
}

#[test]
fn open_for_once_the_break_has_elapsed_opens_anew() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.fail().unwrap_err();
    sim.clock.advance(12 * SEC);
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "no call has entered half-open yet"
    );
    assert!(b.open_for(5 * SEC));
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(
        s.opened_at,
        Some(12 * SEC),
        "half-open as state() saw it: opened now"
    );
    assert_eq!(s.current_break, Some(5 * SEC));
    assert!(sim.events().len() == 1, "only the trip's event");
}

#[test]
fn open_for_from_half_open_drops_the_probes_in_flight() {
    let sim = Sim::new(base().half_open_probes(2));
    let b = &sim.breaker;
    sim.fail().unwrap_err();
    sim.clock.elapse_break(b);
    let probe = b.try_acquire_owned().unwrap();
    assert!(probe.is_probe());
    sim.clock.advance(SEC);
    assert!(b.open_for(5 * SEC));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().probes_in_flight, 0);
    assert_eq!(b.snapshot().opened_at, Some(11 * SEC));
    probe.success(); // an outcome of the half-open period: it decides nothing now
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.break_remaining(), Some(5 * SEC));
    assert_eq!(b.snapshot().consecutive_opens, 1);
    assert_eq!(
        sim.events(),
        [
            opened(State::Closed, OpenReason::ConsecutiveFailures(1), 10 * SEC),
            Transition::HalfOpened
        ]
    );
}

#[test]
fn open_for_from_a_recovery_ramp_ends_the_ramp() {
    let sim = Sim::new(base().recovery(Some(Recovery::over(1.0).min_duration(SEC))));
    let b = &sim.breaker;
    sim.fail().unwrap_err();
    sim.clock.elapse_break(b);
    sim.ok().unwrap();
    assert_eq!(b.state(), State::Recovering);
    assert!(b.open_for(3 * SEC));
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!((s.ramp_fraction, s.recovering_for), (None, None));
    assert_eq!(s.consecutive_opens, 1, "the ramp had not closed it fully");
    sim.clock.advance(3 * SEC);
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn open_for_leaves_isolated_and_disabled_breakers_as_they_are() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.clock.advance(SEC);
    b.isolate();
    sim.clock.advance(SEC);
    assert!(!b.open_for(5 * SEC), "isolation is stronger");
    assert!(!b.open_until(100 * SEC));
    assert_eq!(b.state(), State::Isolated);
    let refused = sim.refusal();
    assert_eq!(refused.reason(), RejectReason::Isolated);
    assert_eq!(refused.retry_after(), None);
    let s = b.snapshot();
    assert_eq!(s.last_manual_action, Some(ManualAction::Isolate));
    assert_eq!(
        s.last_manual_action_at,
        Some(SEC),
        "the refused open left no trace"
    );

    b.disable();
    assert!(!b.open_for(5 * SEC));
    assert!(!b.open_until(100 * SEC));
    assert_eq!(b.state(), State::Disabled);
    sim.ok().unwrap();
    sim.fail().unwrap_err();
    assert_eq!(b.state(), State::Disabled);
    assert_eq!(b.snapshot().last_manual_action, Some(ManualAction::Disable));
    assert!(sim.events().is_empty());
}

#[test]
fn open_until_an_instant_opens_until_then() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.clock.advance(100 * SEC);
    assert!(b.open_until(160 * SEC));
    assert_eq!(b.break_remaining(), Some(60 * SEC));
    assert_eq!(sim.refusal().retry_after(), Some(60 * SEC));
    assert_eq!(
        b.snapshot().last_manual_action,
        Some(ManualAction::OpenUntil)
    );
    sim.clock.advance(60 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    sim.ok().unwrap();
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
fn open_until_the_past_or_for_no_time_half_opens_on_the_next_call() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.clock.advance(100 * SEC);
    assert!(b.open_until(50 * SEC));
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "an instant already past opens for no time"
    );
    assert_eq!(b.break_remaining(), Some(Duration::ZERO));
    assert_eq!(b.opened_at(), Some(100 * SEC));
    assert!(b.try_acquire().unwrap().is_probe());
    assert_eq!(sim.events(), [Transition::HalfOpened]);

    b.reset();
    assert!(b.open_for(Duration::ZERO));
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    // The one probe slot is taken: a refusal with the maximum wait's remainder.
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(60 * SEC),
        "60 s, the default maximum wait"
    );
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn huge_open_durations_and_instants_saturate_instead_of_panicking() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.clock.advance(SEC);
    assert!(b.open_for(Duration::MAX));
    let forever = Duration::from_nanos(u64::MAX) - SEC;
    assert_eq!(b.break_remaining(), Some(forever));
    // A retry-after saturates sooner, at 2^63 ns (292 years) less 2 ns: its top bit tells a
    // relative wait from an end on the system clock.
    let longest = Duration::from_nanos((1 << 63) - 2);
    assert_eq!(sim.refusal().retry_after(), Some(longest));
    assert!(b.open_until(Duration::MAX));
    assert_eq!(b.break_remaining(), Some(forever));
    assert!(b.open_until(Duration::new(u64::MAX, 999_999_999)));
    // The clock reaches its end: the break (saturated at it) has elapsed.
    sim.clock.advance(Duration::MAX);
    assert_eq!(b.state(), State::HalfOpen);
    assert!(b.open_for(Duration::MAX));
    assert!(b.try_acquire().unwrap().is_probe());
}

// ---------------------------------------------------------------------------------------------
// Break schedules.

/// The breaks of `opens` consecutive opens: each break served, then a failed probe.
fn breaks(sim: &Sim, opens: usize) -> Vec<Duration> {
    sim.fail().unwrap_err();
    let mut served = Vec::new();
    for _ in 0..opens {
        served.push(sim.current_break().unwrap());
        sim.clock.elapse_break(&sim.breaker);
        sim.fail().unwrap_err();
    }
    served
}

#[test]
fn a_break_multiplier_of_one_and_a_half_from_5_s_gives_5_7_5_and_11_25_s() {
    let sim = Sim::new(
        base()
            .break_duration(5 * SEC)
            .max_break_duration(20 * SEC)
            .break_multiplier(1.5),
    );
    assert_eq!(
        breaks(&sim, 6),
        [5_000, 7_500, 11_250, 16_875, 20_000, 20_000].map(|ms| ms * MS),
        "× 1.5 per consecutive open, capped at the maximum break"
    );
    // The refusals count down the break served.
    assert_eq!(sim.refusal().retry_after(), Some(20 * SEC));
    // A full close resets the growth.
    sim.clock.elapse_break(&sim.breaker);
    sim.ok().unwrap();
    assert_eq!(breaks(&sim, 2), [5 * SEC, 7_500 * MS]);
}

#[test]
fn a_break_multiplier_of_one_keeps_the_break_constant() {
    let sim = Sim::new(base().break_multiplier(1.0));
    assert_eq!(breaks(&sim, 4), [10 * SEC; 4]);
    assert_eq!(sim.breaker.snapshot().consecutive_opens, 5);
}

#[test]
fn the_default_multiplier_doubles_as_before() {
    assert_eq!(Settings::default().break_multiplier(), 2.0);
    let sim = Sim::new(base());
    assert_eq!(
        breaks(&sim, 5),
        [10, 20, 40, 80, 80].map(|s| s * SEC),
        "doubling up to the maximum"
    );
}

#[test]
fn bad_break_multipliers_are_a_coded_error_naming_the_key() {
    for bad in [
        f64::NAN,
        -1.0,
        -0.0,
        0.0,
        0.5,
        0.999_999,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let error = base().break_multiplier(bad).build().unwrap_err();
        assert_eq!(
            (error.code(), error.key()),
            (ErrorCode::BreakMultiplierOutOfRange, "break-multiplier"),
            "{bad}"
        );
        assert_eq!(error.code().as_str(), "CUT-CFG-015");
    }
    let error = base().break_multiplier(0.5).build().unwrap_err();
    assert_eq!(
        error.to_string(),
        "CUT-CFG-015: invalid break-multiplier = 0.5: allowed a finite number of at least 1 \
         (1 keeps the break constant)"
    );
    for good in [1.0, 1.000_001, 1.5, 2.0, 10.0, 1e300] {
        base().break_multiplier(good).build().unwrap();
    }
}

#[test]
fn a_break_schedule_that_shrinks_is_refused_with_a_code_naming_the_key() {
    // 60 s, then 30 s, then 15 s …: a flapping dependency would be probed ever more often.
    let halving = BreakSchedule::new(|opens| Duration::from_secs(120 >> opens.min(7)));
    let error = base().break_schedule(Some(halving)).build().unwrap_err();
    assert_eq!(
        (error.code(), error.code().as_str(), error.key()),
        (
            ErrorCode::BreakScheduleShrinks,
            "CUT-CFG-016",
            "break-schedule"
        )
    );
    assert_eq!(
        error.to_string(),
        "CUT-CFG-016: invalid break-schedule = (60s, 30s): allowed a schedule whose break never \
         shrinks from one consecutive open to the next"
    );
    // One that shrinks late (after the tenth open) is caught too; constant and growing ones,
    // and ones that panic somewhere, pass.
    let late = BreakSchedule::new(|opens| if opens > 10 { SEC } else { 9 * SEC });
    assert!(base().break_schedule(Some(late)).build().is_err());
    for fine in [
        BreakSchedule::new(|_| 5 * SEC),
        BreakSchedule::new(|opens| opens * SEC),
        BreakSchedule::new(|opens| {
            assert!(opens < 3);
            SEC
        }),
    ] {
        base().break_schedule(Some(fine)).build().unwrap();
    }
}

#[test]
fn a_break_schedule_decides_the_break_capped_and_then_jittered() {
    let schedule = BreakSchedule::new(|opens| opens * 7 * SEC);
    let exact = Sim::new(
        base()
            .max_break_duration(20 * SEC)
            .break_schedule(Some(schedule.clone())),
    );
    assert_eq!(
        breaks(&exact, 4),
        [7 * SEC, 14 * SEC, 20 * SEC, 20 * SEC],
        "the schedule's breaks, capped at the maximum break"
    );
    // Jitter is applied after the schedule: Equal serves [d / 2, d].
    let jittered = Sim::new(
        base()
            .max_break_duration(20 * SEC)
            .jitter(Jitter::Equal)
            .break_schedule(Some(schedule.clone())),
    );
    let served = breaks(&jittered, 3);
    for (served, computed) in served.iter().zip([7 * SEC, 14 * SEC, 20 * SEC]) {
        assert!(
            *served >= computed / 2 && *served <= computed,
            "{served:?} of {computed:?}"
        );
    }
    // Settings sharing the schedule are equal; another function is not.
    let with = |schedule| base().break_schedule(Some(schedule)).build().unwrap();
    assert_eq!(with(schedule.clone()), with(schedule.clone()));
    assert_ne!(
        with(schedule),
        with(BreakSchedule::new(|opens| opens * 7 * SEC))
    );
}

#[test]
fn a_break_schedule_may_return_anything_without_a_panic() {
    // Zero: half-open on the next call. Beyond the maximum: the maximum.
    let zero = Sim::new(base().break_schedule(Some(BreakSchedule::new(|_| Duration::ZERO))));
    zero.fail().unwrap_err();
    assert_eq!(zero.breaker.state(), State::HalfOpen);
    assert!(zero.breaker.try_acquire().unwrap().is_probe());
    let huge = Sim::new(base().break_schedule(Some(BreakSchedule::new(|_| Duration::MAX))));
    assert_eq!(breaks(&huge, 2), [80 * SEC; 2]);
    // A panicking schedule: the multiplier's break instead, and the breaker keeps working.
    let panicking = Sim::new(base().break_schedule(Some(BreakSchedule::new(|opens| {
        assert!(opens < 2, "no break for open {opens}");
        SEC
    }))));
    assert_eq!(breaks(&panicking, 3), [SEC, 20 * SEC, 40 * SEC]);
}

// ---------------------------------------------------------------------------------------------
// Running out of the maximum wait in half-open.

#[test]
fn running_out_of_the_maximum_wait_in_half_open_closes_when_configured() {
    assert_eq!(
        Settings::default().half_open_timeout(),
        HalfOpenTimeout::Open
    );
    let sim = Sim::new(
        base()
            .probe_successes(2)
            .max_wait_in_half_open(Some(5 * SEC))
            .half_open_timeout(HalfOpenTimeout::Close),
    );
    let b = &sim.breaker;
    sim.fail().unwrap_err();
    sim.clock.elapse_break(b);
    sim.fail().unwrap_err(); // a failed probe: grown to 20 s
    sim.clock.elapse_break(b);
    let hung = b.try_acquire_owned().unwrap();
    assert!(hung.is_probe());
    sim.clock.advance(4 * SEC);
    let full = sim.refusal();
    assert_eq!(full.reason(), RejectReason::HalfOpenFull);
    assert_eq!(
        full.retry_after(),
        Some(SEC),
        "what is left of the maximum wait"
    );
    sim.clock.advance(SEC);

    let call = b.try_acquire().unwrap();
    assert!(!call.is_probe(), "admitted by the closed breaker");
    call.failure();
    assert_eq!(
        b.state(),
        State::Open,
        "a closed breaker's failure trips it"
    );
    assert_eq!(
        sim.current_break(),
        Some(10 * SEC),
        "closing reset the growth: the first break"
    );
    hung.failure(); // from the half-open period: dropped
    assert_eq!(b.snapshot().consecutive_opens, 1);
    let events = sim.events();
    assert_eq!(
        events[3..],
        [
            Transition::HalfOpened,
            Transition::Closed {
                from: State::HalfOpen,
                reason: CloseReason::HalfOpenTimeout,
            },
            opened(State::Closed, OpenReason::ConsecutiveFailures(1), 10 * SEC),
        ]
    );
}

#[test]
fn running_out_of_the_maximum_wait_re_opens_by_default_and_may_close_into_a_ramp() {
    let reopening = Sim::new(
        base()
            .probe_successes(2)
            .max_wait_in_half_open(Some(5 * SEC)),
    );
    reopening.fail().unwrap_err();
    reopening.clock.elapse_break(&reopening.breaker);
    let _hung = reopening.breaker.try_acquire().unwrap();
    reopening.clock.advance(5 * SEC);
    assert_eq!(reopening.refusal().retry_after(), Some(20 * SEC));
    assert_eq!(
        reopening.events().last(),
        Some(&opened(
            State::HalfOpen,
            OpenReason::HalfOpenTimeout,
            20 * SEC
        ))
    );

    let ramping = Sim::new(
        base()
            .probe_successes(2)
            .max_wait_in_half_open(Some(5 * SEC))
            .half_open_timeout(HalfOpenTimeout::Close)
            .recovery(Some(Recovery::over(1.0).initial_fraction(0.5))),
    );
    ramping.fail().unwrap_err();
    ramping.clock.elapse_break(&ramping.breaker);
    let _hung = ramping.breaker.try_acquire().unwrap();
    ramping.clock.advance(5 * SEC);
    let _ = ramping.ok();
    assert_eq!(ramping.breaker.state(), State::Recovering);
    // No probe decided it: the event says so, not "trial call succeeded".
    let closed = ramping.events().last().copied();
    assert_eq!(
        closed,
        Some(Transition::Closed {
            from: State::HalfOpen,
            reason: CloseReason::HalfOpenTimeout,
        })
    );
    assert_eq!(
        closed.unwrap().to_string(),
        "half-open for too long; closed as configured"
    );
}

// ---------------------------------------------------------------------------------------------
// The initial state.

#[test]
fn a_breaker_configured_isolated_starts_isolated_and_reset_returns_there() {
    let clock = ManualClock::new();
    clock.advance(2 * SEC);
    let b = Breaker::builder("new-dependency")
        .settings(
            base()
                .initial_state(InitialState::Isolated)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build();
    assert_eq!(b.state(), State::Isolated);
    assert_eq!(b.peek().0, State::Isolated, "published for the hot path");
    assert_eq!(b.health(), Health::Unhealthy);
    assert_eq!(b.opened_at(), Some(2 * SEC));
    let refused = b.call(|| Ok::<_, ()>(())).unwrap_err();
    let refused = refused.rejection().unwrap();
    assert_eq!(refused.reason(), RejectReason::Isolated);
    assert_eq!(
        refused.retry_after(),
        None,
        "only an isolated breaker has none"
    );
    assert_eq!(
        b.snapshot().last_manual_action,
        None,
        "configured, not a manual action"
    );

    clock.advance(SEC);
    b.reset();
    assert_eq!(
        b.state(),
        State::Isolated,
        "reset returns to the configured state"
    );
    assert_eq!(b.opened_at(), Some(3 * SEC));
    let s = b.snapshot();
    assert_eq!(s.last_manual_action, Some(ManualAction::Reset));
    assert_eq!(s.last_manual_action_at, Some(3 * SEC));
    // Let through by hand, and back.
    b.disable();
    b.call(|| Ok::<_, ()>(())).unwrap();
    b.reset();
    assert_eq!(b.state(), State::Isolated);
}

#[test]
fn a_breaker_configured_disabled_by_either_key_starts_and_resets_disabled() {
    let by_enabled = base().enabled(false).build().unwrap();
    let by_state = base()
        .initial_state(InitialState::Disabled)
        .build()
        .unwrap();
    let by_both = base()
        .enabled(false)
        .initial_state(InitialState::Disabled)
        .build()
        .unwrap();
    assert_eq!(by_enabled, by_state, "two ways of writing one setting");
    assert_eq!(by_enabled, by_both);
    assert!(!by_state.enabled());
    let b = Breaker::new("dep", by_state.clone());
    assert_eq!(b.state(), State::Disabled);
    b.isolate();
    b.reset();
    assert_eq!(b.state(), State::Disabled);

    // Over settings taken over whole, the later call decides.
    let enabled = by_state.to_builder().enabled(true).build().unwrap();
    assert_eq!(enabled.initial_state(), InitialState::Closed);
    let isolated = base()
        .initial_state(InitialState::Isolated)
        .build()
        .unwrap();
    assert!(isolated.enabled(), "isolated is not disabled");
    let still = isolated.to_builder().enabled(true).build().unwrap();
    assert_eq!(still.initial_state(), InitialState::Isolated);
    let disabled = isolated.to_builder().enabled(false).build().unwrap();
    assert_eq!(disabled.initial_state(), InitialState::Disabled);
    assert_eq!(
        Settings::default().initial_state(),
        InitialState::Closed,
        "closed by default"
    );
}

#[test]
fn enabled_and_initial_state_that_disagree_are_a_coded_error() {
    for (enabled, state) in [
        (false, InitialState::Isolated),
        (false, InitialState::Closed),
        (true, InitialState::Disabled),
    ] {
        let error = base()
            .initial_state(state)
            .enabled(enabled)
            .build()
            .unwrap_err();
        assert_eq!(
            (error.code(), error.key()),
            (ErrorCode::Contradiction, "initial-state"),
            "enabled = {enabled} with {state:?}"
        );
    }
    let error = base()
        .enabled(false)
        .initial_state(InitialState::Isolated)
        .build()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "CUT-CFG-006: invalid initial-state = \"isolated\": allowed only \"disabled\" with \
         enabled = false"
    );
}

// ---------------------------------------------------------------------------------------------
// A retry-after on every refusal but an isolated breaker's.

fn half_open_with_its_slot_taken(settings: SettingsBuilder) -> (Sim, cutout::OwnedPermit) {
    let sim = Sim::new(settings);
    sim.fail().unwrap_err();
    sim.clock.elapse_break(&sim.breaker);
    let probe = sim.breaker.try_acquire_owned().unwrap();
    assert!(probe.is_probe());
    (sim, probe)
}

#[test]
fn a_refusal_for_want_of_a_probe_slot_carries_what_is_left_of_the_maximum_wait() {
    let (sim, _probe) = half_open_with_its_slot_taken(base().max_wait_in_half_open(Some(20 * SEC)));
    sim.clock.advance(6 * SEC);
    let refused = sim.refusal();
    assert_eq!(refused.reason(), RejectReason::HalfOpenFull);
    assert_eq!(refused.retry_after(), Some(14 * SEC));
    assert!(
        refused.to_string().ends_with("retry after 14s"),
        "{refused}"
    );
}

#[test]
fn without_a_maximum_wait_it_carries_the_break_last_served() {
    let (sim, probe) = half_open_with_its_slot_taken(base().max_wait_in_half_open(None));
    assert_eq!(sim.refusal().retry_after(), Some(10 * SEC));
    probe.failure();
    sim.clock.elapse_break(&sim.breaker);
    let _probe = sim.breaker.try_acquire().unwrap();
    assert_eq!(
        sim.refusal().retry_after(),
        Some(20 * SEC),
        "the grown break"
    );
    // After a manual open for no time: the first break.
    let (zero, probe) = half_open_with_its_slot_taken(base().max_wait_in_half_open(None));
    drop(probe);
    assert!(zero.breaker.open_for(Duration::ZERO));
    let _probe = zero.breaker.try_acquire().unwrap();
    assert_eq!(zero.refusal().retry_after(), Some(10 * SEC));
}

/// An adaptive breaker whose normal latency is measured (40 calls of 20 ms), half-open with
/// its one probe slot taken: the breaker, its clock, the probe and the normal latency.
fn measured_and_half_open_full(
    max_wait: Option<Duration>,
) -> (Breaker, ManualClock, cutout::OwnedPermit, Duration) {
    let clock = ManualClock::new();
    let settings = base().adaptive(true).max_wait_in_half_open(max_wait);
    let b = Breaker::builder("dep")
        .settings(settings.build().unwrap())
        .clock(clock.clone())
        .build();
    for _ in 0..40 {
        let permit = b.try_acquire().unwrap();
        clock.advance(20 * MS);
        permit.success();
    }
    let normal = b.normal_latency().expect("measured");
    b.call(|| Err::<(), _>(())).unwrap_err();
    clock.elapse_break(&b);
    let probe = b.try_acquire_owned().unwrap();
    (b, clock, probe, normal)
}

#[test]
fn without_a_maximum_wait_it_carries_the_normal_latency_once_measured() {
    let (b, _clock, _probe, normal) = measured_and_half_open_full(None);
    let refused = b.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::HalfOpenFull);
    assert_eq!(refused.retry_after(), Some(normal));
}

#[test]
fn with_both_it_carries_the_sooner_of_the_normal_latency_and_the_wait_left() {
    let (b, clock, _probe, normal) = measured_and_half_open_full(Some(20 * SEC));
    // A probe in flight takes about the normal latency: far sooner than the 20 s wait.
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(normal));
    // With less of the wait left than a normal call takes, what is left.
    clock.advance(20 * SEC - normal / 2);
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(normal / 2));
}

// ---------------------------------------------------------------------------------------------
// The trace of manual actions.

#[test]
fn manual_actions_show_in_the_snapshot_with_when_and_raise_no_event() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    let s = b.snapshot();
    assert_eq!(
        (s.last_manual_action, s.last_manual_action_at),
        (None, None)
    );
    let actions: [(ManualAction, &dyn Fn()); 5] = [
        (ManualAction::Isolate, &|| b.isolate()),
        (ManualAction::Disable, &|| b.disable()),
        (ManualAction::Reset, &|| b.reset()),
        (ManualAction::OpenFor, &|| assert!(b.open_for(SEC))),
        (ManualAction::OpenUntil, &|| {
            assert!(b.open_until(100 * SEC))
        }),
    ];
    for (action, act) in actions {
        sim.clock.advance(SEC);
        act();
        let s = b.snapshot();
        assert_eq!(s.last_manual_action, Some(action));
        assert_eq!(s.last_manual_action_at, Some(sim.clock.elapsed()));
    }
    assert!(sim.events().is_empty());
    let names: Vec<_> = [
        ManualAction::Reset,
        ManualAction::Isolate,
        ManualAction::Disable,
        ManualAction::OpenFor,
        ManualAction::OpenUntil,
    ]
    .map(|a| a.to_string())
    .into();
    assert_eq!(
        names,
        ["reset", "isolate", "disable", "open_for", "open_until"]
    );
    // A manual action survives the transitions calls cause.
    sim.clock.advance(100 * SEC);
    sim.ok().unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        b.snapshot().last_manual_action,
        Some(ManualAction::OpenUntil)
    );
}
