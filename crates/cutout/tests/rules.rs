//! One test per rule of the breaker (DESIGN §2), on the manual clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, Error, Event, HalfOpenRule, Jitter, OpenReason, Outcome, RejectReason, Rejected,
    Settings, SettingsBuilder, State, Transition, TripWindow,
};

const SEC: Duration = Duration::from_secs(1);

fn base() -> SettingsBuilder {
    Settings::builder()
        .jitter(Jitter::None)
        .break_duration(10 * SEC)
        .max_break_duration(80 * SEC)
}

fn breaker(settings: SettingsBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let breaker = Breaker::builder("dep")
        .settings(settings.build().unwrap())
        .clock(clock.clone())
        .seed(1)
        .build();
    (breaker, clock)
}

fn events(breaker: &Breaker) -> Arc<Mutex<Vec<Event>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.clone()));
    seen
}

fn ok(breaker: &Breaker) -> Result<(), Error<()>> {
    breaker.call(|| Ok(()))
}

fn fail(breaker: &Breaker) -> Result<(), Error<()>> {
    breaker.call(|| Err(()))
}

fn refusal(result: Result<(), Error<()>>) -> Rejected {
    result.unwrap_err().rejection().cloned().expect("refused")
}

/// Acquires, lets `latency` pass on the clock, records `outcome`.
fn timed(breaker: &Breaker, clock: &ManualClock, latency: Duration, outcome: Outcome) {
    let permit = breaker.try_acquire().expect("admitted");
    clock.advance(latency);
    permit.record(outcome);
}

#[test]
fn consecutive_failures_open_and_a_success_resets_the_count() {
    let (b, _) = breaker(base().consecutive_failures(Some(3)));
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    ok(&b).unwrap();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 2);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

/// A healthy call admitted on a still breaker (closed, window all successes) skips recording
/// only if nothing changed while it ran: a success that ends after a failure recorded during
/// it counts, and ends that failure's run.
#[test]
fn a_success_ending_after_a_failure_recorded_while_it_ran_resets_the_count() {
    let (b, _) = breaker(
        base()
            .consecutive_failures(Some(2))
            .failure_ratio(None)
            .window(TripWindow::Count(4))
            .adaptive(false),
    );
    for _ in 0..4 {
        ok(&b).unwrap();
    }
    // Reading the snapshot folds the successes in: the window is full and clean, and the
    // breaker still.
    assert_eq!(b.snapshot().calls, 4);
    b.call(|| {
        fail(&b).unwrap_err();
        Ok::<(), ()>(())
    })
    .unwrap();
    let snapshot = b.snapshot();
    assert_eq!(
        (snapshot.consecutive_failures, snapshot.failures),
        (0, 1),
        "the failure is in the window and the success after it ended its run"
    );
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "one failure since the success");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn ignored_outcomes_do_not_reset_the_consecutive_count() {
    let (b, _) = breaker(base().consecutive_failures(Some(3)));
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    b.try_acquire().unwrap().ignored();
    assert_eq!(b.snapshot().consecutive_failures, 2);
    assert_eq!(
        b.snapshot().calls,
        2,
        "ignored calls are not counted in the window"
    );
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn failure_ratio_is_inclusive_over_a_count_window() {
    let settings = base()
        .consecutive_failures(None)
        .failure_ratio(Some(0.5))
        .window(TripWindow::Count(10))
        .minimum_calls(10);
    let (b, _) = breaker(settings.clone());
    for i in 0..10 {
        if i % 5 == 0 {
            fail(&b).unwrap_err();
        } else {
            ok(&b).unwrap();
        }
    }
    // 2 of 10 — below; slide in 3 more failures: 5 of 10 opens.
    assert_eq!(b.state(), State::Closed);
    fail(&b).unwrap_err(); // window: pushes out a failure (the first call)
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().failures, 4);
    assert_eq!(b.state(), State::Closed, "4 of 10 stays closed");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "5 of 10 opens at 50%");
}

#[test]
fn minimum_calls_is_capped_at_a_count_window_size() {
    let (b, _) = breaker(
        base()
            .consecutive_failures(None)
            .failure_ratio(Some(0.5))
            .window(TripWindow::Count(4))
            .minimum_calls(100),
    );
    ok(&b).unwrap();
    ok(&b).unwrap();
    fail(&b).unwrap_err();
    assert_eq!(
        b.state(),
        State::Closed,
        "3 calls: below the capped minimum of 4"
    );
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn the_success_that_reaches_minimum_calls_can_trip() {
    let (b, _) = breaker(
        base()
            .consecutive_failures(None)
            .failure_ratio(Some(0.5))
            .window(TripWindow::Count(10))
            .minimum_calls(4),
    );
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
    let seen = events(&b);
    ok(&b).unwrap(); // 2 failures of 4 calls
    assert_eq!(b.state(), State::Open);
    let reason = match seen.lock().unwrap()[0].transition {
        Transition::Opened { reason, .. } => reason,
        other => panic!("{other:?}"),
    };
    assert_eq!(reason, OpenReason::FailureRatio);
}

#[test]
fn a_time_window_forgets_failures_older_than_its_span() {
    let (b, clock) = breaker(
        base()
            .consecutive_failures(None)
            .failure_ratio(Some(0.5))
            .window(TripWindow::Time(30 * SEC))
            .minimum_calls(4),
    );
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    clock.advance(31 * SEC);
    assert_eq!(b.snapshot().calls, 0, "the failures have slid out");
    ok(&b).unwrap();
    ok(&b).unwrap();
    ok(&b).unwrap();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "1 of 4 in the window");
    clock.advance(10 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "2 of 5 is below 50%");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "3 of 6 reaches 50%");
}

#[test]
fn slow_successes_trip_on_the_slow_call_ratio() {
    let (b, clock) = breaker(
        base()
            .consecutive_failures(None)
            .slow_call_threshold(Some(Duration::from_millis(100)))
            .slow_call_ratio(0.5)
            .window(TripWindow::Count(10))
            .minimum_calls(4),
    );
    timed(&b, &clock, Duration::from_millis(100), Outcome::Success); // at the threshold: not slow
    timed(&b, &clock, Duration::from_millis(10), Outcome::Success);
    timed(&b, &clock, Duration::from_millis(101), Outcome::Success);
    assert_eq!(b.snapshot().slow, 1);
    assert_eq!(b.state(), State::Closed);
    let seen = events(&b);
    timed(&b, &clock, SEC, Outcome::Success); // 2 slow of 4
    assert_eq!(b.state(), State::Open);
    assert!(matches!(
        seen.lock().unwrap()[0].transition,
        Transition::Opened {
            reason: OpenReason::SlowCallRatio,
            ..
        }
    ));
}

#[test]
fn the_break_doubles_per_consecutive_open_and_resets_on_close() {
    let (b, clock) = breaker(base().consecutive_failures(Some(1)).probe_successes(1));
    let seen = events(&b);
    fail(&b).unwrap_err();
    assert_eq!(b.break_remaining(), Some(10 * SEC));
    for expected in [20, 40, 80, 80] {
        clock.elapse_break(&b);
        fail(&b).unwrap_err(); // the probe fails
        assert_eq!(b.break_remaining(), Some(expected * SEC));
        assert_eq!(b.snapshot().current_break, Some(expected * SEC));
    }
    assert_eq!(b.snapshot().consecutive_opens, 5);
    clock.elapse_break(&b);
    ok(&b).unwrap(); // the probe closes it
    assert_eq!(b.snapshot().consecutive_opens, 0);
    fail(&b).unwrap_err();
    assert_eq!(
        b.break_remaining(),
        Some(10 * SEC),
        "growth reset by the full close"
    );
    let breaks: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e.transition {
            Transition::Opened { break_for, .. } => Some(break_for.as_secs()),
            _ => None,
        })
        .collect();
    assert_eq!(breaks, [10, 20, 40, 80, 80, 10]);
}

#[test]
fn retry_after_is_what_is_left_of_the_jittered_break() {
    let (b, clock) = breaker(base().consecutive_failures(Some(1)).jitter(Jitter::Equal));
    fail(&b).unwrap_err();
    let served = b.snapshot().current_break.unwrap();
    assert!(served >= 5 * SEC && served <= 10 * SEC, "{served:?}");
    assert_eq!(refusal(ok(&b)).retry_after(), Some(served));
    clock.advance(2 * SEC);
    let rejection = refusal(ok(&b));
    assert_eq!(rejection.retry_after(), Some(served - 2 * SEC));
    assert_eq!(rejection.reason(), RejectReason::Open);
    clock.advance(served - 2 * SEC);
    assert!(
        b.try_acquire().unwrap().is_probe(),
        "the break ends inclusively"
    );
}

#[test]
fn jitter_keeps_equal_and_full_breaks_within_bounds() {
    for (jitter, low) in [(Jitter::Equal, 5 * SEC), (Jitter::Full, Duration::ZERO)] {
        let mut served = Vec::new();
        for seed in 0..200 {
            let b = Breaker::builder("dep")
                .settings(
                    base()
                        .jitter(jitter)
                        .consecutive_failures(Some(1))
                        .build()
                        .unwrap(),
                )
                .clock(ManualClock::new())
                .seed(seed)
                .build();
            fail(&b).unwrap_err();
            let d = b.snapshot().current_break.unwrap();
            assert!(d >= low && d <= 10 * SEC, "{jitter:?} {d:?}");
            served.push(d);
        }
        served.sort();
        served.dedup();
        assert!(
            served.len() > 150,
            "{jitter:?}: the breaks must be spread, got {}",
            served.len()
        );
        let mean = served.iter().sum::<Duration>() / served.len() as u32;
        let centre = (low + 10 * SEC) / 2;
        assert!(
            mean > centre - SEC && mean < centre + SEC,
            "{jitter:?}: mean {mean:?}"
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_breaks() {
    let breaks = |seed| {
        let b = Breaker::builder("dep")
            .settings(
                base()
                    .jitter(Jitter::Full)
                    .consecutive_failures(Some(1))
                    .build()
                    .unwrap(),
            )
            .clock(ManualClock::new())
            .seed(seed)
            .build();
        fail(&b).unwrap_err();
        b.snapshot().current_break
    };
    assert_eq!(breaks(42), breaks(42));
}

fn open_then_elapse(settings: SettingsBuilder) -> (Breaker, ManualClock) {
    let (b, clock) = breaker(settings.consecutive_failures(Some(1)));
    fail(&b).unwrap_err();
    clock.elapse_break(&b);
    (b, clock)
}

#[test]
fn half_open_admits_at_most_the_probe_limit_at_once() {
    let (b, _) = open_then_elapse(base().half_open_probes(2).probe_successes(3));
    let first = b.try_acquire().unwrap();
    let second = b.try_acquire().unwrap();
    assert!(first.is_probe() && second.is_probe());
    let third = b.try_acquire().unwrap_err();
    assert_eq!(third.reason(), RejectReason::HalfOpenFull);
    // What is left of the maximum wait in half-open (60 s by default; none has passed).
    assert_eq!(third.retry_after(), Some(60 * SEC));
    assert_eq!(b.snapshot().probes_in_flight, 2);
    first.success();
    let third = b.try_acquire().unwrap();
    second.success();
    assert_eq!(b.state(), State::HalfOpen, "two of three successes");
    third.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_failed_probe_reopens_with_a_grown_break() {
    let (b, _) = open_then_elapse(base());
    let seen = events(&b);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.break_remaining(), Some(20 * SEC));
    let transitions: Vec<_> = seen.lock().unwrap().iter().map(|e| e.transition).collect();
    assert_eq!(
        transitions,
        [
            Transition::HalfOpened,
            Transition::Opened {
                from: State::HalfOpen,
                reason: OpenReason::ProbeFailed,
                break_for: 20 * SEC
            },
        ]
    );
}

#[test]
fn a_slow_probe_reopens() {
    let (b, clock) = open_then_elapse(base().slow_call_threshold(Some(Duration::from_millis(200))));
    let seen = events(&b);
    timed(&b, &clock, Duration::from_millis(500), Outcome::Success);
    assert_eq!(b.state(), State::Open);
    assert!(matches!(
        seen.lock().unwrap()[1].transition,
        Transition::Opened {
            reason: OpenReason::ProbeSlow,
            ..
        }
    ));
}

#[test]
fn an_ignored_or_dropped_probe_gives_its_slot_back() {
    let (b, _) = open_then_elapse(base());
    b.try_acquire().unwrap().ignored();
    assert_eq!(b.snapshot().probes_in_flight, 0);
    drop(b.try_acquire().unwrap());
    assert_eq!(b.snapshot().probes_in_flight, 0);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn a_slow_call_from_before_the_break_cannot_decide_a_probe() {
    let (b, clock) = breaker(
        base()
            .consecutive_failures(Some(1))
            .slow_call_threshold(Some(SEC))
            .probe_successes(1),
    );
    let straggler = b.try_acquire().unwrap(); // started while closed
    fail(&b).unwrap_err(); // opens
    clock.elapse_break(&b);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    straggler.failure(); // slow and failed, but from an older generation
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the straggler did not re-open it"
    );
    assert_eq!(
        b.snapshot().probes_in_flight,
        1,
        "nor freed the probe's slot"
    );
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn too_long_in_half_open_reopens_on_the_next_call() {
    let (b, clock) = open_then_elapse(base().max_wait_in_half_open(Some(5 * SEC)));
    let hung = b.try_acquire().unwrap();
    clock.advance(4 * SEC);
    assert_eq!(refusal(ok(&b)).reason(), RejectReason::HalfOpenFull);
    let seen = events(&b);
    clock.advance(SEC);
    let rejection = refusal(ok(&b));
    assert_eq!(rejection.reason(), RejectReason::Open);
    assert_eq!(rejection.retry_after(), Some(20 * SEC));
    assert_eq!(
        seen.lock().unwrap()[0].transition,
        Transition::Opened {
            from: State::HalfOpen,
            reason: OpenReason::HalfOpenTimeout,
            break_for: 20 * SEC
        }
    );
    hung.success(); // too late: from the old generation
    assert_eq!(b.state(), State::Open);
}

#[test]
fn state_takes_nothing_and_reports_half_open_after_the_break() {
    let (b, clock) = breaker(base().consecutive_failures(Some(1)));
    assert_eq!(b.opened_at(), None);
    clock.advance(3 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.opened_at(), Some(3 * SEC));
    assert_eq!(b.state(), State::Open);
    clock.elapse_break(&b);
    let seen = events(&b);
    for _ in 0..3 {
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.snapshot().state, State::HalfOpen);
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "reading the state raised nothing"
    );
    assert!(
        b.try_acquire().unwrap().is_probe(),
        "the first call is still the probe"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn isolate_refuses_until_reset_and_raises_nothing() {
    let (b, _) = breaker(base());
    let seen = events(&b);
    b.isolate();
    assert_eq!(b.state(), State::Isolated);
    let rejection = refusal(ok(&b));
    assert_eq!(rejection.reason(), RejectReason::Isolated);
    assert_eq!(rejection.retry_after(), None);
    assert_eq!(rejection.breaker().as_str(), "dep");
    b.reset();
    assert_eq!(b.state(), State::Closed);
    ok(&b).unwrap();
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn disabled_passes_everything_and_records_nothing() {
    let (b, _) = breaker(base().consecutive_failures(Some(1)));
    b.disable();
    for _ in 0..10 {
        fail(&b).unwrap_err().into_inner().expect("ran");
    }
    assert_eq!(b.state(), State::Disabled);
    assert_eq!(b.snapshot().calls, 0);
    b.reset();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_breaker_configured_disabled_starts_and_resets_there() {
    let (b, _) = breaker(base().enabled(false));
    assert_eq!(b.state(), State::Disabled);
    b.isolate();
    b.reset();
    assert_eq!(b.state(), State::Disabled);
}

#[test]
fn reset_closes_with_an_empty_window_and_no_growth() {
    let (b, clock) = breaker(base().consecutive_failures(Some(2)));
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    clock.elapse_break(&b);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().consecutive_opens, 2);
    let seen = events(&b);
    b.reset();
    let snapshot = b.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(
        (
            snapshot.calls,
            snapshot.consecutive_failures,
            snapshot.consecutive_opens
        ),
        (0, 0, 0)
    );
    assert_eq!(snapshot.opened_at, None);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.break_remaining(), Some(10 * SEC));
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "reset raised nothing; the new opening did"
    );
}

#[test]
fn shadow_mode_reports_but_never_refuses() {
    let (b, clock) = breaker(base().consecutive_failures(Some(2)).shadow(true));
    let seen = events(&b);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    let ran = std::cell::Cell::new(0);
    for _ in 0..3 {
        b.call(|| {
            ran.set(ran.get() + 1);
            Ok::<_, ()>(())
        })
        .unwrap();
    }
    assert_eq!(ran.get(), 3);
    assert_eq!(b.snapshot().shadow_refusals, 3);
    b.isolate();
    ok(&b).unwrap();
    b.reset();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    clock.elapse_break(&b);
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed, "the probes still decide");
    assert_eq!(
        seen.lock().unwrap().len(),
        4,
        "opened, opened, half-opened, closed"
    );
}

#[test]
fn the_rates_rule_judges_all_probes_together() {
    let settings = || {
        base()
            .half_open_rule(HalfOpenRule::Rates)
            .half_open_probes(4)
            .failure_ratio(Some(0.5))
            .window(TripWindow::Count(4))
            .minimum_calls(4)
    };
    let (b, _) = open_then_elapse(settings());
    let probes: Vec<_> = (0..4).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(refusal(ok(&b)).reason(), RejectReason::HalfOpenFull);
    for (i, probe) in probes.into_iter().enumerate() {
        if i < 2 {
            probe.failure()
        } else {
            probe.success()
        }
        if i < 3 {
            assert_eq!(
                b.state(),
                State::HalfOpen,
                "undecided after {} probes",
                i + 1
            );
        }
    }
    assert_eq!(b.state(), State::Open, "2 of 4 failed: 50%");

    let (b, _) = open_then_elapse(settings());
    fail(&b).unwrap_err();
    ok(&b).unwrap();
    b.try_acquire().unwrap().ignored(); // gives its slot back: five calls, four counted
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed, "1 of 4 failed");
}

#[test]
fn clones_share_one_state() {
    let (b, _) = breaker(base().consecutive_failures(Some(2)));
    let other = b.clone();
    fail(&b).unwrap_err();
    fail(&other).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(refusal(ok(&other)).breaker(), b.id());
}

#[test]
fn a_classifier_sees_ok_values() {
    let (b, _) = breaker(base().consecutive_failures(Some(2)));
    let by_status = |r: &Result<u16, ()>| match r {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(()) => Outcome::Failure,
    };
    assert_eq!(b.call_with(&by_status, || Ok(500)).unwrap(), 500);
    assert_eq!(b.call_with(&by_status, || Ok(503)).unwrap(), 503);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn errors_are_send_sync_and_small() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Rejected>();
    send_sync::<Error<std::io::Error>>();
    send_sync::<cutout::ConfigError>();
    send_sync::<Breaker>();
    assert!(
        std::mem::size_of::<Rejected>() <= 80,
        "{}",
        std::mem::size_of::<Rejected>()
    );
}

#[test]
fn successes_counted_off_the_lock_land_in_the_right_bucket() {
    let (b, clock) = breaker(base().window(TripWindow::Time(30 * SEC)));
    for _ in 0..5 {
        ok(&b).unwrap();
    }
    clock.advance(10 * SEC);
    for _ in 0..5 {
        ok(&b).unwrap();
    }
    assert_eq!(b.snapshot().calls, 10);
    clock.advance(21 * SEC);
    assert_eq!(
        b.snapshot().calls,
        5,
        "the calls of t=0 have dropped out at t=31 s"
    );
    clock.advance(10 * SEC);
    assert_eq!(b.snapshot().calls, 0);
}

#[test]
fn successes_off_the_lock_keep_a_count_window_in_order() {
    let (b, _) = breaker(
        base()
            .consecutive_failures(None)
            .failure_ratio(Some(0.5))
            .window(TripWindow::Count(4))
            .minimum_calls(4),
    );
    fail(&b).unwrap_err();
    ok(&b).unwrap();
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!((b.snapshot().calls, b.snapshot().failures), (4, 1));
    ok(&b).unwrap(); // pushes the failure out
    assert_eq!(b.snapshot().failures, 0);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "2 of the last 4");
}

#[test]
fn an_open_gate_keeps_a_tripping_breaker_closed_until_it_allows() {
    let allow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gate = Arc::clone(&allow);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&asked);
    let clock = ManualClock::new();
    let b = Breaker::builder("host-a")
        .settings(base().consecutive_failures(Some(2)).build().unwrap())
        .clock(clock.clone())
        .open_gate(move |id| {
            log.lock().unwrap().push(id.to_string());
            gate.load(std::sync::atomic::Ordering::Relaxed)
        })
        .build();
    let seen = events(&b);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "the gate kept it closed");
    assert_eq!(b.snapshot().suppressed_opens, 2);
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(*asked.lock().unwrap(), ["host-a", "host-a"]);
    let (state, generation) = b.peek();
    allow.store(true, std::sync::atomic::Ordering::Relaxed);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.peek(), (State::Open, generation + 1));
    assert_eq!(state, State::Closed);
    // Re-opening from half-open is not gated.
    allow.store(false, std::sync::atomic::Ordering::Relaxed);
    clock.elapse_break(&b);
    assert_eq!(b.peek().0, State::Open, "peek shows the published word");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(asked.lock().unwrap().len(), 3);
}
