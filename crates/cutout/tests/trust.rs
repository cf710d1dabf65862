//! Defects found in the core and kept from coming back: each test is named after the behaviour
//! it holds the breaker to (see the note of the core-trust issue for how each one failed).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, HalfOpenRule, Jitter, Recovery, RejectReason, Settings, SettingsBuilder, State,
    Transition, TripWindow,
};

const MS: Duration = Duration::from_millis(1);

fn on_clock(settings: SettingsBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let breaker = Breaker::builder("trust")
        .settings(settings.build().expect("valid settings"))
        .clock(clock.clone())
        .seed(3)
        .build();
    (breaker, clock)
}

fn opened(events: &Mutex<Vec<Transition>>) -> usize {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|t| matches!(t, Transition::Opened { .. }))
        .count()
}

fn listen(breaker: &Breaker) -> Arc<Mutex<Vec<Transition>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    events
}

/// A call that takes `took` on the breaker's clock and ends as `ok` says.
fn timed_call(breaker: &Breaker, clock: &ManualClock, took: Duration, ok: bool) {
    let _ = breaker.call(|| {
        clock.advance(took);
        if ok { Ok(()) } else { Err(()) }
    });
}

#[test]
fn a_count_window_full_of_successes_still_feeds_the_failure_baseline() {
    let settings = Settings::builder()
        .window(TripWindow::Count(20))
        .adaptive(true)
        .consecutive_failures(None);
    let (breaker, clock) = on_clock(settings.clone());
    for _ in 0..1_000 {
        clock.advance(MS);
        breaker.call(|| Ok::<(), ()>(())).unwrap();
    }
    assert_eq!(breaker.normal_failure_rate(), Some(0.0));
    assert_eq!(breaker.snapshot().normal_failure_rate, Some(0.0));

    // One failure in 1,000 calls over 20 s measures 0.001, and then 10 failures among the 20
    // calls of the window stand far above it (beyond chance at 10⁻¹⁰: see trip.rs).
    let (breaker, clock) = on_clock(settings);
    for i in 0..1_000 {
        clock.advance(20 * MS);
        let _ = breaker.call(|| if i == 500 { Err(()) } else { Ok(()) });
    }
    let rate = breaker.normal_failure_rate().expect("armed");
    assert!((rate - 0.001).abs() < 1e-9, "measured {rate}");
    for i in 0..20 {
        clock.advance(20 * MS);
        let _ = breaker.call(|| if i % 2 == 1 { Err(()) } else { Ok(()) });
    }
    assert_eq!(breaker.state(), State::Open, "10 failures in 20 calls");
}

#[test]
fn a_listener_may_subscribe_and_call_its_breaker() {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let (breaker, _clock) = on_clock(Settings::builder().consecutive_failures(Some(1)));
        let handle = breaker.clone();
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        breaker.subscribe(move |_| {
            // Both would wait forever on a listener list locked for reading.
            handle.subscribe(|_| {});
            let _ = handle.state();
            let _ = handle.call(|| Ok::<(), ()>(()));
            seen.fetch_add(1, Ordering::Relaxed);
        });
        let _ = breaker.call(|| Err::<(), ()>(()));
        done.send(calls.load(Ordering::Relaxed)).unwrap();
    });
    let calls = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the call that raised the event returned");
    assert_eq!(calls, 1);
}

/// An adaptive breaker whose normal latency is armed at 20 ms, with 400 calls in flight. A
/// check of calls in flight notes how many calls have started; a check a second later finds
/// those still running hung, and opens the breaker.
fn with_hung_calls() -> (Breaker, ManualClock, Vec<cutout::OwnedPermit>) {
    let (breaker, clock) = on_clock(Settings::builder().jitter(Jitter::None));
    for _ in 0..160 {
        timed_call(&breaker, &clock, 20 * MS, true);
    }
    assert!(breaker.normal_latency().is_some(), "armed");
    let hung: Vec<_> = (0..400)
        .map(|_| breaker.try_acquire_owned().expect("closed"))
        .collect();
    clock.advance(10 * MS);
    (breaker, clock, hung)
}

#[test]
fn reads_and_controls_never_open_the_breaker() {
    type Action = fn(&Breaker);
    let actions: [(&str, Action); 7] = [
        ("state", |b| {
            let _ = b.state();
        }),
        ("snapshot", |b| {
            let _ = b.snapshot();
        }),
        ("normal_latency", |b| {
            let _ = b.normal_latency();
        }),
        ("normal_failure_rate", |b| {
            let _ = b.normal_failure_rate();
        }),
        ("reset", Breaker::reset),
        ("isolate", Breaker::isolate),
        ("disable", Breaker::disable),
    ];
    for (name, action) in actions {
        let (breaker, clock, hung) = with_hung_calls();
        let events = listen(&breaker);
        for _ in 0..3 {
            action(&breaker);
            clock.advance(Duration::from_millis(500));
        }
        assert_eq!(opened(&events), 0, "{name} raised Opened");
        let expected = match name {
            "isolate" => State::Isolated,
            "disable" => State::Disabled,
            _ => State::Closed,
        };
        assert_eq!(breaker.state(), expected, "after {name}");
        assert_eq!(breaker.snapshot().state, expected, "after {name}");
        if expected == State::Closed {
            assert_eq!(breaker.opened_at(), None, "after {name}");
            if name != "reset" {
                // The hung calls are real: a call's check of them opens the breaker (the
                // first timed one, so within a sample's worth of calls).
                for _ in 0..2 {
                    for _ in 0..8 {
                        let _ = breaker.call(|| Ok::<(), ()>(()));
                    }
                    clock.advance(Duration::from_secs(1));
                }
                assert_eq!(breaker.state(), State::Open, "calls after {name}");
                assert_eq!(opened(&events), 1);
            }
        }
        drop(hung);
    }
}

#[test]
fn a_slow_sample_never_counts_for_more_calls_than_the_window_holds() {
    let (breaker, clock) = on_clock(Settings::builder().window(TripWindow::Count(3)));
    for _ in 0..160 {
        timed_call(&breaker, &clock, 20 * MS, true);
    }
    assert!(breaker.normal_latency().is_some(), "armed");
    // One slow call in every three: a third of the window is slow, under the ratio of 0.5.
    for _ in 0..16 {
        timed_call(&breaker, &clock, Duration::from_secs(1), true);
        for _ in 0..2 {
            timed_call(&breaker, &clock, 20 * MS, true);
            let snapshot = breaker.snapshot();
            assert!(snapshot.slow <= snapshot.calls, "{snapshot:?}");
            assert!(snapshot.slow_rate.unwrap_or(0.0) <= 1.0, "{snapshot:?}");
        }
    }
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn minimum_calls_counts_real_calls_in_flight_not_weights() {
    let (breaker, clock) = on_clock(Settings::builder().minimum_calls(5).jitter(Jitter::None));
    for _ in 0..160 {
        timed_call(&breaker, &clock, 20 * MS, true);
    }
    assert!(breaker.normal_latency().is_some(), "armed");
    for _ in 0..4 {
        breaker.reset();
        // Four calls hang on an empty window: fewer than the five calls the ratios need.
        let hung: Vec<_> = (0..4)
            .map(|_| breaker.try_acquire_owned().expect("closed"))
            .collect();
        clock.advance(Duration::from_secs(1));
        // A call's locked operation checks the calls in flight before counting its own.
        let probe = breaker.try_acquire().expect("closed");
        assert_eq!(breaker.state(), State::Closed);
        drop(probe);
        drop(hung);
    }
}

#[test]
fn a_trip_window_of_any_valid_length_builds_without_panicking() {
    for secs in [u64::MAX / 10 + 1, u64::MAX / 2, u64::MAX] {
        let window = TripWindow::Time(Duration::from_secs(secs));
        match Settings::builder().window(window).build() {
            Ok(settings) => {
                let breaker = Breaker::new("huge", settings);
                breaker.call(|| Ok::<(), ()>(())).unwrap();
                let _ = breaker.snapshot();
            }
            Err(error) => assert!(!error.to_string().is_empty()),
        }
    }
}

#[test]
fn a_ramp_that_ran_out_reads_closed_everywhere() {
    let (breaker, clock) = on_clock(
        Settings::builder()
            .consecutive_failures(Some(1))
            .jitter(Jitter::None)
            .probe_successes(1)
            .adaptive(false)
            .recovery(Some(Recovery::over(0.5))),
    );
    let _ = breaker.call(|| Err::<(), ()>(()));
    clock.elapse_break(&breaker);
    breaker.call(|| Ok::<(), ()>(())).unwrap();
    assert_eq!(breaker.state(), State::Recovering);
    // Fast calls earn the whole fraction early; then traffic stops before the clock's bound
    // reaches 1, and nothing calls until long after the ramp's length.
    for _ in 0..64 {
        clock.advance(MS);
        let _ = breaker.call(|| Ok::<(), ()>(()));
    }
    assert_eq!(breaker.state(), State::Recovering);
    clock.advance(Duration::from_secs(600));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.opened_at(), None);
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(snapshot.opened_at, None);
    assert_eq!(snapshot.current_break, None);
    assert_eq!(snapshot.ramp_fraction, None);
    assert_eq!(breaker.health(), cutout::Health::Healthy);
}

#[test]
fn a_ramp_length_is_always_a_duration() {
    let served = Duration::from_secs(10);
    let odd = [
        Recovery::over(f64::NAN),
        Recovery::over(f64::INFINITY),
        Recovery::over(-1.0),
        Recovery::over(1e300),
        Recovery::over(0.5)
            .min_duration(Duration::from_secs(9))
            .max_duration(Duration::from_secs(3)),
    ];
    for recovery in odd {
        let length = recovery.length_after(served);
        assert!(length >= recovery.min().min(recovery.max()), "{recovery:?}");
        assert!(length <= recovery.max().max(recovery.min()), "{recovery:?}");
    }
    assert_eq!(
        Recovery::over(0.5).length_after(served),
        Duration::from_secs(5)
    );
}

#[test]
fn a_forgotten_probe_permit_holds_its_slot_only_until_the_max_wait() {
    let (breaker, clock) = on_clock(
        Settings::builder()
            .consecutive_failures(Some(1))
            .jitter(Jitter::None)
            .max_wait_in_half_open(Some(Duration::from_secs(5))),
    );
    let _ = breaker.call(|| Err::<(), ()>(()));
    clock.elapse_break(&breaker);
    std::mem::forget(breaker.try_acquire().expect("the probe"));
    let full = breaker.try_acquire().expect_err("the only slot is held");
    assert_eq!(full.reason(), RejectReason::HalfOpenFull);
    clock.advance(Duration::from_secs(5));
    let reopened = breaker.try_acquire().expect_err("the wait ran out");
    assert_eq!(reopened.reason(), RejectReason::Open);
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);
    assert!(
        breaker.try_acquire().is_ok(),
        "a fresh probe slot after the break"
    );
}

#[test]
fn half_open_rates_are_unknown_until_enough_probes_finished() {
    let (breaker, clock) = on_clock(
        Settings::builder()
            .consecutive_failures(Some(1))
            .jitter(Jitter::None)
            .half_open_probes(3)
            .probe_successes(3)
            .half_open_rule(HalfOpenRule::Consecutive),
    );
    let _ = breaker.call(|| Err::<(), ()>(()));
    clock.elapse_break(&breaker);
    for finished in 1..=2 {
        breaker.call(|| Ok::<(), ()>(())).unwrap();
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.state, State::HalfOpen);
        assert_eq!(snapshot.calls, finished);
        assert_eq!(snapshot.failure_rate, None, "{finished} of 3 probes");
    }
    // The rates-over-probes rule judges after all of them: the same holds until then.
    let (breaker, clock) = on_clock(
        Settings::builder()
            .consecutive_failures(Some(1))
            .jitter(Jitter::None)
            .half_open_probes(4)
            .half_open_rule(HalfOpenRule::Rates),
    );
    let _ = breaker.call(|| Err::<(), ()>(()));
    clock.elapse_break(&breaker);
    for _ in 0..3 {
        breaker.call(|| Ok::<(), ()>(())).unwrap();
        assert_eq!(breaker.snapshot().failure_rate, None);
    }
    breaker.call(|| Ok::<(), ()>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_reset_releases_what_an_open_gate_took() {
    // The pattern the gate's docs give: take a slot in the gate, give it back once `peek`
    // shows a newer generation in a state that holds none (reset raises no event).
    let taken = Arc::new(Mutex::new(None::<u32>));
    let gate_taken = Arc::clone(&taken);
    let breaker = Breaker::builder("gated")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .open_gate(move |_| {
            *gate_taken.lock().unwrap() = Some(0);
            true
        })
        .build();
    let _ = breaker.call(|| Err::<(), ()>(()));
    assert_eq!(breaker.state(), State::Open);
    let (_, generation) = breaker.peek();
    *taken.lock().unwrap() = Some(generation);
    breaker.reset();
    let (state, now) = breaker.peek();
    assert_eq!(state, State::Closed);
    assert_ne!(now, generation, "the reset is visible to a gate that peeks");
    // An event-driven release would never have run: no event at all.
    let events = listen(&breaker);
    breaker.reset();
    assert!(events.lock().unwrap().is_empty());
}

#[test]
fn a_panicking_open_gate_keeps_the_breaker_closed_and_serving() {
    // The gate is user code run under the breaker's lock: its panic must neither reach the
    // caller nor poison the breaker.
    let breaker = Breaker::builder("gate-panics")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(1))
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .open_gate(|_| panic!("the fleet's counter is unreachable"))
        .build();
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        breaker.call(|| Err::<(), ()>(()))
    }));
    assert!(failed.is_ok(), "the gate's panic reached the caller");
    assert_eq!(
        breaker.state(),
        State::Closed,
        "a refused gate keeps it closed"
    );
    assert_eq!(breaker.snapshot().suppressed_opens, 1);
    breaker.call(|| Ok::<(), ()>(())).expect("still serving");
}
