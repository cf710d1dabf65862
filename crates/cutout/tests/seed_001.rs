//! The manual-clock scenario of the resilience4j-style breaker (seed 001): a 10-call count
//! window at 50% opens after 5 successes and 5 failures; a call is refused; after the break,
//! two probes close it.

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, HalfOpenRule, Jitter, RejectReason, Settings, State, TripWindow};

fn payments(clock: &ManualClock, rule: HalfOpenRule) -> Breaker {
    let settings = Settings::builder()
        .window(TripWindow::Count(10))
        .minimum_calls(10)
        .failure_ratio(Some(0.5))
        .consecutive_failures(None)
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .half_open_probes(2)
        .probe_successes(2)
        .half_open_rule(rule)
        .build()
        .unwrap();
    Breaker::builder("payments")
        .settings(settings)
        .clock(clock.clone())
        .build()
}

fn scenario(rule: HalfOpenRule) {
    let clock = ManualClock::new();
    let breaker = payments(&clock, rule);
    let backend_calls = std::cell::Cell::new(0);
    let charge = |down: bool| {
        breaker.call(|| {
            backend_calls.set(backend_calls.get() + 1);
            if down {
                Err("backend down")
            } else {
                Ok("receipt")
            }
        })
    };

    for _ in 0..5 {
        charge(false).unwrap();
    }
    for i in 0..5 {
        assert!(
            charge(true).unwrap_err().into_inner().is_some(),
            "failure {i} ran"
        );
        if i < 4 {
            assert_eq!(
                breaker.state(),
                State::Closed,
                "below 50% of 10 after failure {i}"
            );
        }
    }
    assert_eq!(breaker.state(), State::Open, "10 calls, 50% failed");
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (10, 5));
    assert_eq!(snapshot.failure_rate, Some(0.5));

    let refused = charge(false).unwrap_err();
    let rejection = refused.rejection().expect("refused while open");
    assert_eq!(rejection.reason(), RejectReason::Open);
    assert_eq!(rejection.breaker().as_str(), "payments");
    assert_eq!(
        backend_calls.get(),
        10,
        "the refused call never reached the backend"
    );

    clock.elapse_break(&breaker);
    assert_eq!(clock.elapsed(), Duration::from_secs(30));
    // Still open until a call arrives; state() reports what the next call will see.
    assert_eq!(breaker.state(), State::HalfOpen);
    charge(false).unwrap();
    assert_eq!(breaker.state(), State::HalfOpen, "one probe is not enough");
    charge(false).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().calls, 0, "closes with an empty window");
    assert_eq!(backend_calls.get(), 12);
}

#[test]
fn two_probes_close_it_under_the_default_rule() {
    scenario(HalfOpenRule::Consecutive);
}

#[test]
fn two_probes_close_it_under_the_rates_rule() {
    scenario(HalfOpenRule::Rates);
}
