//! A hostile review of adaptive throttling (`SettingsBuilder::throttle`) and
//! `Breaker::trip_on_signal`: each test names the behaviour it expects. On the manual clock
//! unless it says otherwise; every test is bounded (a few thousand calls, a second of threads).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::observer::{Call, CallKind};
use cutout::{
    Breaker, ErrorCode, Jitter, OpenReason, Recovery, RejectReason, Settings, SettingsBuilder,
    State, Transition, TripWindow, Verdict,
};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn base(multiple: f64) -> SettingsBuilder {
    Settings::builder()
        .window(TripWindow::Time(10 * SEC))
        .throttle(Some(multiple))
        .jitter(Jitter::None)
}

fn build(settings: SettingsBuilder, clock: &ManualClock) -> Breaker {
    Breaker::builder("review")
        .settings(settings.build().unwrap())
        .clock(clock.clone())
        .seed(7)
        .build()
}

fn openings(breaker: &Breaker) -> Arc<Mutex<Vec<Transition>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    breaker.subscribe(move |event| {
        if let Transition::Opened { .. } = event.transition {
            sink.lock().unwrap().push(event.transition);
        }
    });
    seen
}

/// One call that fails (if it runs); whether it was throttled. Any other refusal panics.
fn fail(breaker: &Breaker) -> bool {
    outcome(breaker, false)
}

fn succeed(breaker: &Breaker) -> bool {
    outcome(breaker, true)
}

/// Fails calls until one runs (its outcome takes the lock, which counts the refusals made
/// before it for the probability); how many were refused on the way.
fn fail_until_admitted(breaker: &Breaker) -> u64 {
    (0..10_000_000)
        .find(|_| !fail(breaker))
        .expect("a call admitted within 10,000,000")
}

fn outcome(breaker: &Breaker, ok: bool) -> bool {
    match breaker.call(|| if ok { Ok(()) } else { Err(()) }) {
        Ok(()) => false,
        Err(e) => match e.rejection() {
            Some(r) => {
                assert_eq!(r.reason(), RejectReason::Throttled, "{r:?}");
                assert_eq!(r.retry_after(), None);
                true
            }
            None => false,
        },
    }
}

fn probability(breaker: &Breaker) -> f64 {
    breaker.snapshot().throttle_probability.unwrap()
}

// ---------------------------------------------------------------------------------------------
// Claim 2: no trip rule opens a throttling breaker.
// ---------------------------------------------------------------------------------------------

/// The slow-call rule on calls still in flight (`Machine::check_in_flight`) is a trip rule
/// like the others (failed on 3fe4fed with `Opened { from: Closed, reason: SlowCallRatio }`;
/// fixed by 2ae03ba's `rule_trip`, kept as a guard): a throttling breaker must not open from it. A binary breaker with the same
/// settings opens with `SlowCallRatio` (tests/adaptive.rs,
/// `a_dependency_that_hangs_trips_before_any_call_returns`).
#[test]
fn guard_calls_hung_in_flight_do_not_open_a_throttling_breaker() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0)
            .slow_call_threshold(Some(SEC))
            .minimum_calls(5)
            .adaptive(true),
        &clock,
    );
    let opened = openings(&breaker);
    let mut hung = Vec::new();
    // Calls keep arriving, ten a second; none returns (a hung dependency).
    for _ in 0..300 {
        if let Ok(permit) = breaker.try_acquire() {
            hung.push(permit);
        }
        clock.advance(100 * MS);
    }
    assert_eq!(
        (breaker.state(), opened.lock().unwrap().clone()),
        (State::Closed, vec![]),
        "a trip rule (slow calls in flight) opened a throttling breaker"
    );
    drop(hung);
}

/// The same, with the binary breaker, as the control of the test above: it does open.
#[test]
fn guard_calls_hung_in_flight_open_the_same_breaker_without_throttling() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0)
            .throttle(None)
            .slow_call_threshold(Some(SEC))
            .minimum_calls(5)
            .adaptive(true),
        &clock,
    );
    let opened = openings(&breaker);
    let mut hung = Vec::new();
    for _ in 0..300 {
        if let Ok(permit) = breaker.try_acquire() {
            hung.push(permit);
        }
        clock.advance(100 * MS);
    }
    assert!(matches!(
        opened.lock().unwrap()[..],
        [
            Transition::Opened {
                reason: OpenReason::SlowCallRatio,
                ..
            },
            ..
        ]
    ));
    drop(hung);
}

#[test]
fn guard_no_trip_rule_on_finished_calls_opens_a_throttling_breaker() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0)
            .consecutive_failures(Some(1))
            .failure_ratio(Some(0.1))
            .minimum_calls(2)
            .slow_call_threshold(Some(10 * MS))
            .slow_call_ratio(0.1)
            .adaptive(true),
        &clock,
    );
    let opened = openings(&breaker);
    // Healthy and fast first (arming baselines), then slow successes, then failures.
    for _ in 0..300 {
        succeed(&breaker);
        clock.advance(5 * MS);
    }
    for _ in 0..200 {
        let _ = breaker.call(|| {
            clock.advance(50 * MS);
            Ok::<_, ()>(())
        });
    }
    for _ in 0..2_000 {
        fail(&breaker);
        clock.advance(MS);
    }
    assert_eq!(breaker.state(), State::Closed);
    assert!(opened.lock().unwrap().is_empty());
    assert!(probability(&breaker) > 0.5);
}

#[test]
fn guard_probes_and_ramps_after_an_opening_work_as_before() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0)
            .break_duration(SEC)
            .probe_successes(1)
            .recovery(Some(
                Recovery::over(1.0)
                    .min_duration(2 * SEC)
                    .max_duration(2 * SEC),
            )),
        &clock,
    );
    let opened = openings(&breaker);
    assert!(breaker.trip_on_signal());
    clock.elapse_break(&breaker);
    // A failed probe re-opens with a grown break.
    assert!(!fail(&breaker));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().current_break, Some(2 * SEC));
    clock.elapse_break(&breaker);
    assert!(!succeed(&breaker));
    assert_eq!(breaker.state(), State::Recovering);
    // A ramp call that fails re-opens.
    let mut reopened = false;
    for _ in 0..50 {
        if let Ok(permit) = breaker.try_acquire() {
            permit.failure();
            reopened = true;
            break;
        }
        clock.advance(100 * MS);
    }
    assert!(reopened);
    assert_eq!(breaker.state(), State::Open);
    let reasons: Vec<_> = opened
        .lock()
        .unwrap()
        .iter()
        .map(|t| match t {
            Transition::Opened { reason, .. } => *reason,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        reasons,
        [
            OpenReason::Signal,
            OpenReason::ProbeFailed,
            OpenReason::RampFailed
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Claim 1 and 3: the probability, shadow mode, the snapshot.
// ---------------------------------------------------------------------------------------------

/// Shadow mode lets every call through, but counts the ones it would have refused
/// (`Snapshot::shadow_refusals`: "calls a shadow-mode breaker let through that it would have
/// refused"), which is what shadow mode is for: to see what the breaker would do before it is
/// trusted. A shadow throttling breaker against a dead dependency would refuse almost every
/// call; it reports none.
#[test]
fn a_shadow_throttling_breaker_counts_the_calls_it_would_have_refused() {
    let clock = ManualClock::new();
    let breaker = build(base(2.0).shadow(true), &clock);
    for _ in 0..2_000 {
        assert!(!fail(&breaker), "shadow mode never refuses");
    }
    let snapshot = breaker.snapshot();
    assert!(
        snapshot.throttle_probability.unwrap() > 0.99,
        "{snapshot:?}"
    );
    assert!(
        snapshot.shadow_refusals > 1_000,
        "a shadow breaker throttling at p = {:?} reports {} would-be refusals of 2,000 calls",
        snapshot.throttle_probability,
        snapshot.shadow_refusals
    );
}

/// `Snapshot::throttle_probability` is "the refusal probability now": what the next call's
/// draw is against. Refusals made since the last locked operation are added to the snapshot's
/// requests, but not to the threshold admission draws against, which only a locked operation
/// recomputes; calls whose permits are dropped (cancelled) or recorded as ignored never take
/// the lock, so within a slice of the window the two drift apart.
#[test]
fn the_snapshot_probability_is_the_one_admission_draws_against() {
    let clock = ManualClock::new();
    let breaker = build(base(2.0).adaptive(false), &clock);
    // Successes, then failures until a third of the calls would be refused.
    for _ in 0..40 {
        assert!(!succeed(&breaker));
    }
    while probability(&breaker) < 0.3 {
        if let Ok(permit) = breaker.try_acquire() {
            permit.failure();
        }
    }
    let before = probability(&breaker);
    assert!(before < 0.4, "{before}");
    // Admission and snapshot agree here.
    // Then calls that are cancelled (their permits dropped unrecorded), in the same instant.
    let mut refused = 0;
    let n = 4_000;
    for _ in 0..n {
        match breaker.try_acquire() {
            Ok(permit) => drop(permit),
            Err(r) => {
                assert_eq!(r.reason(), RejectReason::Throttled);
                refused += 1;
            }
        }
    }
    let observed = refused as f64 / n as f64;
    let reported = probability(&breaker);
    assert!(
        (observed - reported).abs() < 0.03,
        "the snapshot says p = {reported:.4}, admission refused {observed:.4} of {n} calls \
         (p was {before:.4} at the last locked operation)"
    );
}

/// The snapshot documents `throttle_probability` as `Some` while closed. A ramp that has run
/// out reads closed (`state()`, `snapshot().state`); a throttling breaker then reports `None`,
/// as a binary breaker would.
#[test]
fn a_throttling_breaker_closed_by_a_ramp_run_out_reports_a_probability() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0)
            .break_duration(SEC)
            .probe_successes(1)
            .recovery(Some(
                Recovery::over(1.0)
                    .initial_fraction(0.5)
                    .min_duration(2 * SEC)
                    .max_duration(2 * SEC),
            )),
        &clock,
    );
    assert!(breaker.open_for(SEC));
    clock.advance(SEC);
    assert!(!succeed(&breaker));
    assert_eq!(breaker.state(), State::Recovering);
    // One ramp success earns the whole traffic (from half); the clock does the rest.
    loop {
        if let Ok(permit) = breaker.try_acquire() {
            permit.success();
            break;
        }
    }
    clock.advance(3 * SEC);
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(
        snapshot.throttle_probability,
        Some(0.0),
        "closed, throttling, and no probability: {snapshot:?}"
    );
}

#[test]
fn guard_the_probability_is_the_formula_with_k_one_and_a_half() {
    let clock = ManualClock::new();
    let breaker = build(base(1.5).adaptive(false), &clock);
    // 7 failures in every 10 calls that run; some are throttled: count them.
    let mut refused = 0u64;
    let mut calls = 0u64;
    let mut failures = 0u64;
    for i in 0..40 {
        let ok = i % 10 >= 7;
        if outcome(&breaker, ok) {
            refused += 1;
        } else {
            calls += 1;
            failures += u64::from(!ok);
        }
    }
    // The snapshot reads the probability admission draws against: over the refusals counted
    // as of the last locked operation. An admitted call brings them all in.
    refused += fail_until_admitted(&breaker);
    calls += 1;
    failures += 1;
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (calls, failures));
    assert_eq!(snapshot.refused_calls, refused);
    let requests = (calls + refused) as f64;
    let accepts = (calls - failures) as f64;
    let want = ((requests - 1.5 * accepts) / (requests + 1.0)).max(0.0);
    assert!(
        (snapshot.throttle_probability.unwrap() - want).abs() < 1e-9,
        "{snapshot:?} against {want}"
    );
}

#[test]
fn guard_a_healthy_dependency_is_never_throttled_even_with_k_one() {
    let clock = ManualClock::new();
    let breaker = build(base(1.0), &clock);
    for _ in 0..5_000 {
        assert!(!succeed(&breaker));
        clock.advance(MS);
    }
    assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
    assert_eq!(breaker.snapshot().refused_calls, 0);
}

/// Refused calls never run, and traffic comes back under sustained load after the outage
/// ends (no stuck state) without an idle spell to empty the window.
#[test]
fn guard_refused_calls_never_run_and_traffic_comes_back_under_load() {
    let clock = ManualClock::new();
    let breaker = build(base(2.0).adaptive(false), &clock);
    let ran = AtomicU64::new(0);
    let mut refused = 0u64;
    // 10 s of outage at 200 calls a second.
    for _ in 0..2_000 {
        match breaker.call(|| {
            ran.fetch_add(1, Ordering::Relaxed);
            Err::<(), _>(())
        }) {
            Err(e) if e.rejection().is_some() => refused += 1,
            _ => {}
        }
        clock.advance(5 * MS);
    }
    assert_eq!(ran.load(Ordering::Relaxed) + refused, 2_000);
    assert!(probability(&breaker) > 0.98);
    // The dependency recovers; the load goes on. Within 3 minutes (18 windows), the breaker
    // lets (nearly) everything through again.
    let mut last = 0;
    for _ in 0..180 {
        last = (0..200)
            .filter(|_| {
                let r = succeed(&breaker);
                clock.advance(5 * MS);
                r
            })
            .count();
    }
    assert_eq!(last, 0, "still refusing in the last second");
    assert_eq!(probability(&breaker), 0.0);
}

/// Refusals made while open, isolated or half-open are not throttling's: once closed again,
/// the probability is as if they had never been made.
#[test]
fn guard_other_states_refusals_never_count_for_throttling() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0)
            .break_duration(5 * SEC)
            .probe_successes(2)
            .adaptive(false),
        &clock,
    );
    // Isolated: 1,000 refusals, then reset.
    breaker.isolate();
    for _ in 0..1_000 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    breaker.reset();
    assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
    assert!(!fail(&breaker));
    assert!((probability(&breaker) - 0.5).abs() < 1e-9, "1 failure only");
    // Open (a signal): refusals, half-open with a probe slot taken: refusals; then closed.
    breaker.reset();
    assert!(breaker.trip_on_signal());
    for _ in 0..1_000 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    clock.elapse_break(&breaker);
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    for _ in 0..1_000 {
        let r = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
        assert_eq!(r.rejection().unwrap().reason(), RejectReason::HalfOpenFull);
    }
    probe.success();
    assert!(!succeed(&breaker));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
    assert!(!fail(&breaker));
    assert!(
        (probability(&breaker) - 0.5).abs() < 1e-9,
        "{:?}",
        breaker.snapshot()
    );
    // open_for from closed, refusals, then it closes through its probes.
    assert!(breaker.open_for(SEC));
    for _ in 0..1_000 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    clock.advance(SEC);
    assert!(!succeed(&breaker));
    assert!(!succeed(&breaker));
    assert_eq!(breaker.state(), State::Closed);
    assert!(!fail(&breaker));
    assert!((probability(&breaker) - 0.5).abs() < 1e-9);
}

#[test]
fn guard_controls_verdicts_and_signals_work_on_a_throttling_breaker() {
    let clock = ManualClock::new();
    let breaker = build(base(2.0).break_duration(SEC).probe_successes(1), &clock);
    for _ in 0..500 {
        fail(&breaker);
    }
    assert!(probability(&breaker) > 0.99);
    // A verdict asking to open: find a call that runs.
    let classifier = cutout::classify::by_verdict(|_: &Result<(), ()>| Verdict::OpenFor(3 * SEC));
    let mut opened = false;
    for _ in 0..100_000 {
        if breaker.call_with(&classifier, || Ok(())).is_ok() {
            opened = true;
            break;
        }
    }
    assert!(opened);
    assert_eq!(breaker.state(), State::Open);
    let r = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
    assert_eq!(r.rejection().unwrap().reason(), RejectReason::Open);
    assert_eq!(r.rejection().unwrap().retry_after(), Some(3 * SEC));
    breaker.disable();
    assert_eq!(breaker.state(), State::Disabled);
    for _ in 0..100 {
        breaker.call(|| Err::<(), _>(())).unwrap_err();
        assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    }
    breaker.reset();
    assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
    assert!(breaker.open_until(clock.elapsed() + SEC));
    assert_eq!(breaker.state(), State::Open);
    breaker.isolate();
    assert_eq!(
        breaker
            .call(|| Ok::<_, ()>(()))
            .unwrap_err()
            .rejection()
            .unwrap()
            .reason(),
        RejectReason::Isolated
    );
    assert_eq!(breaker.snapshot().throttle_probability, None);
    breaker.reset();
    assert!(breaker.trip_on_signal());
    assert!(!breaker.trip_on_signal());
}

// ---------------------------------------------------------------------------------------------
// Claim 3: threads.
// ---------------------------------------------------------------------------------------------

#[test]
fn guard_refusals_of_many_threads_are_all_counted_and_observed() {
    let clock = ManualClock::new();
    let observed = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&observed);
    let breaker = Breaker::builder("threads")
        .settings(base(2.0).adaptive(false).build().unwrap())
        .clock(clock.clone())
        .observer(move |call: &Call<'_>| {
            if call.kind == CallKind::Refused(RejectReason::Throttled) {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build();
    for _ in 0..20 {
        fail(&breaker);
    }
    // More threads than lines (2 to 64 of them): some share a line.
    let threads = 8;
    let per = 3_000;
    let refused: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let breaker = breaker.clone();
                scope.spawn(move || (0..per).filter(|_| fail(&breaker)).count() as u64)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    // Bring every refusal into the probability (see `fail_until_admitted`).
    let extra = fail_until_admitted(&breaker);
    let refused = refused + extra;
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(
        snapshot.calls + snapshot.refused_calls,
        20 + threads * per + extra + 1,
        "{snapshot:?}"
    );
    assert_eq!(observed.load(Ordering::Relaxed), snapshot.refused_calls);
    assert!(refused <= snapshot.refused_calls);
    let requests = (snapshot.calls + snapshot.refused_calls) as f64;
    assert!((snapshot.throttle_probability.unwrap() - requests / (requests + 1.0)).abs() < 1e-9);
    // Converged: the last calls are refused as the formula says (all but ~1 in requests).
    assert!(snapshot.throttle_probability.unwrap() > 0.999);
}

#[test]
fn guard_trip_on_signal_racing_throttled_calls_neither_panics_nor_deadlocks() {
    let clock = ManualClock::new();
    let breaker = build(base(2.0).break_duration(MS).probe_successes(1), &clock);
    let opened = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&opened);
    breaker.subscribe(move |event| {
        if let Transition::Opened {
            reason: OpenReason::Signal,
            ..
        } = event.transition
        {
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    let stop = AtomicBool::new(false);
    let signalled = std::thread::scope(|scope| {
        for _ in 0..2 {
            let breaker = breaker.clone();
            let stop = &stop;
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = breaker.call(|| Err::<(), _>(()));
                }
            });
        }
        let signaller = {
            let breaker = breaker.clone();
            let clock = clock.clone();
            scope.spawn(move || {
                let mut n = 0u64;
                for _ in 0..2_000 {
                    n += u64::from(breaker.trip_on_signal());
                    clock.advance(MS / 2);
                }
                n
            })
        };
        let n = signaller.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        n
    });
    assert_eq!(signalled, opened.load(Ordering::Relaxed));
    assert!(signalled > 0);
}

// ---------------------------------------------------------------------------------------------
// Claim 5: bad input and extremes.
// ---------------------------------------------------------------------------------------------

#[test]
fn guard_bad_multiples_and_count_windows_are_refused_without_panicking() {
    for bad in [
        0.0,
        -0.0,
        0.999_999,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
    ] {
        let error = base(bad).build().unwrap_err();
        assert_eq!(error.code(), ErrorCode::ThrottleMultipleOutOfRange, "{bad}");
        assert_eq!(error.key(), "throttle");
    }
    // Count windows, in either order of the builder's calls, and through to_builder.
    let e = Settings::builder()
        .throttle(Some(2.0))
        .window(TripWindow::Count(10))
        .build()
        .unwrap_err();
    assert_eq!((e.code(), e.key()), (ErrorCode::Contradiction, "throttle"));
    let ok = base(2.0).build().unwrap();
    let e = ok
        .to_builder()
        .window(TripWindow::Count(10))
        .build()
        .unwrap_err();
    assert_eq!((e.code(), e.key()), (ErrorCode::Contradiction, "throttle"));
    // Huge multiples are fine and never throttle a half-healthy dependency.
    for huge in [1e300, f64::MAX] {
        let clock = ManualClock::new();
        let breaker = build(base(huge), &clock);
        for i in 0..200 {
            outcome(&breaker, i % 2 == 0);
        }
        assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
    }
}

#[cfg(feature = "serde")]
#[test]
fn guard_configuration_files_with_bad_throttle_values_fail_with_codes() {
    use cutout::config::Config;
    let codes = [
        ("throttle = true", None),
        ("throttle = \"2\"", None),
        ("throttle = 0", Some("CUT-CFG-017")),
        ("throttle = -3", Some("CUT-CFG-017")),
        ("throttle = 0.5", Some("CUT-CFG-017")),
        ("throttle = nan", Some("CUT-CFG-017")),
        ("throttle = inf", Some("CUT-CFG-017")),
        ("throttle = -inf", Some("CUT-CFG-017")),
        (
            "throttle = 2\nwindow-type = \"count\"\nwindow-size = 10",
            Some("CUT-CFG-006"),
        ),
        ("throttle = [2]", None),
    ];
    for (line, code) in codes {
        let error = Config::from_toml(&format!("[defaults]\n{line}\n")).unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("CUT-CFG-0"), "{line}: {text}");
        if let Some(code) = code {
            assert!(text.starts_with(code), "{line}: {text}");
        }
    }
    for (line, want) in [
        (
            "throttle = 9223372036854775807",
            Some(9_223_372_036_854_775_807.0),
        ),
        ("throttle = 1e300", Some(1e300)),
        ("throttle = \"off\"", None),
        ("throttle = false", None),
        ("throttle = 1", Some(1.0)),
    ] {
        let config = Config::from_toml(&format!("[defaults]\n{line}\n")).unwrap();
        assert_eq!(config.defaults().throttle(), want, "{line}");
    }
    // A defaults' throttle merged into an instance with a count window.
    let error = Config::from_toml(
        "[defaults]\nthrottle = 2\n[instances.a]\nwindow-type = \"count\"\nwindow-size = 5\n",
    )
    .unwrap_err();
    assert!(error.to_string().starts_with("CUT-CFG-006"), "{error}");
}

#[test]
fn guard_a_throttling_breaker_at_the_end_of_the_clock_never_panics() {
    let clock = ManualClock::new();
    let breaker = build(base(2.0), &clock);
    clock.advance(Duration::from_nanos(u64::MAX - 20_000_000_000));
    for _ in 0..300 {
        fail(&breaker);
        clock.advance(100 * MS);
    }
    clock.advance(Duration::MAX);
    assert_eq!(clock.elapsed(), Duration::from_nanos(u64::MAX));
    for i in 0..300 {
        outcome(&breaker, i % 3 == 0);
    }
    let _ = breaker.snapshot();
    assert!(breaker.trip_on_signal());
    assert!(breaker.open_for(SEC));
    breaker.reset();
    for _ in 0..100 {
        fail(&breaker);
    }
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn guard_very_long_and_very_short_windows_never_panic() {
    let mut built = Vec::new();
    for window in [
        Duration::from_nanos(1),
        Duration::from_nanos(7),
        MS,
        Duration::from_secs(365 * 24 * 3600),
        Duration::from_secs(u64::MAX / 1_000_000_000),
        Duration::MAX,
    ] {
        let settings = Settings::builder()
            .window(TripWindow::Time(window))
            .throttle(Some(2.0))
            .adaptive(false)
            .build();
        let Ok(settings) = settings else {
            continue;
        };
        built.push(window);
        let clock = ManualClock::new();
        let breaker = Breaker::builder("w")
            .settings(settings)
            .clock(clock.clone())
            .build();
        for i in 0..500 {
            outcome(&breaker, i % 5 == 0);
            clock.advance(Duration::from_nanos(3));
        }
        let _ = breaker.snapshot();
        clock.advance(Duration::from_secs(3600));
        for _ in 0..100 {
            succeed(&breaker);
        }
        assert_eq!(breaker.state(), State::Closed, "{window:?}");
    }
    assert!(built.len() >= 4, "{built:?}");
}

/// Throttling's refusals count "in the window" as its calls do: a refusal made in the same
/// instant as a failure leaves the probability when the failure leaves the window, not
/// before. The default 30 s window keeps calls in 30 buckets of a second; the refusals are
/// kept in 10 slices of 3 s, so refusals made 2.5 s into the window drop out at 30 s while
/// the calls made with them stay until 32 s.
#[test]
fn refusals_leave_the_window_with_the_calls_made_with_them() {
    let clock = ManualClock::new();
    let breaker = build(
        Settings::builder()
            .throttle(Some(2.0))
            .adaptive(false)
            .jitter(Jitter::None),
        &clock,
    );
    assert_eq!(breaker.settings().window(), TripWindow::Time(30 * SEC));
    clock.advance(2_500 * MS);
    let (mut failed, mut throttled) = (0u64, 0u64);
    // Ends on a failure: a locked operation, which took in every refusal before it.
    while failed < 10 {
        match breaker.try_acquire() {
            Ok(permit) => {
                permit.failure();
                failed += 1;
            }
            Err(_) => throttled += 1,
        }
    }
    let requests = (10 + throttled) as f64;
    let want = requests / (requests + 1.0);
    assert!((probability(&breaker) - want).abs() < 1e-9);
    // 28.5 s later, every one of those calls and refusals is still inside the 30 s window.
    clock.advance(28_500 * MS);
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.calls, 10, "the window still holds the calls");
    assert!(
        (snapshot.throttle_probability.unwrap() - want).abs() < 1e-9,
        "at 31 s the window holds the 10 failures of 2.5 s, but not the {throttled} refusals \
         made with them: p = {:?}, want {want}",
        snapshot.throttle_probability
    );
}

/// The ramp's refusals are not throttling's: once the ramp has run out, one failure makes
/// p = 1 / 2, as on a fresh breaker.
#[test]
fn guard_ramp_refusals_never_count_for_throttling() {
    let clock = ManualClock::new();
    let breaker = build(
        base(2.0).adaptive(false).probe_successes(1).recovery(Some(
            Recovery::over(1.0)
                .initial_fraction(0.01)
                .min_duration(2 * SEC)
                .max_duration(2 * SEC),
        )),
        &clock,
    );
    assert!(breaker.open_for(SEC));
    clock.advance(SEC);
    assert!(!succeed(&breaker));
    assert_eq!(breaker.state(), State::Recovering);
    let mut ramp_refusals = 0;
    while breaker.state() == State::Recovering {
        match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(r) => {
                assert_eq!(r.reason(), RejectReason::Ramp);
                ramp_refusals += 1;
            }
        }
        clock.advance(MS);
    }
    assert!(ramp_refusals > 100, "{ramp_refusals}");
    assert!(!fail(&breaker));
    assert_eq!(breaker.state(), State::Closed);
    assert!(
        (probability(&breaker) - 0.5).abs() < 1e-9,
        "{:?}",
        breaker.snapshot()
    );
}

/// A binary breaker never refuses for throttling and never reports a probability, in any
/// state; its healthy path stays off the lock (a still word: a million successes are instant).
#[test]
fn guard_a_binary_breaker_is_untouched_by_throttling() {
    let clock = ManualClock::new();
    let breaker = build(
        Settings::builder()
            .window(TripWindow::Count(100))
            .adaptive(false),
        &clock,
    );
    let start = std::time::Instant::now();
    for _ in 0..1_000_000 {
        breaker.call(|| Ok::<_, ()>(())).unwrap();
    }
    assert!(start.elapsed() < 5 * SEC);
    assert_eq!(breaker.snapshot().throttle_probability, None);
    for _ in 0..5 {
        let _ = breaker.call(|| Err::<(), _>(()));
    }
    assert_eq!(breaker.state(), State::Open);
    for _ in 0..100 {
        let r = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
        assert_eq!(r.rejection().unwrap().reason(), RejectReason::Open);
    }
    assert_eq!(breaker.snapshot().throttle_probability, None);
    assert_eq!(breaker.settings().throttle(), None);
}
