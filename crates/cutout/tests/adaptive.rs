//! Adaptive trips on the manual clock: slow calls and failures judged against what the
//! breaker measured (DESIGN §2, trip conditions 3 and 4; seed 000's brownout and error-rate
//! stories).

use std::time::Duration;

use cutout::{
    Failures, OpenReason, Outcome, Permit, Settings, SettingsBuilder, SlowCalls, State, Transition,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

mod manual_sim;
use manual_sim::Sim;

fn adaptive() -> SettingsBuilder {
    Settings::builder().adaptive(true)
}

/// Runs a brownout (every call succeeds at `slow`) until the breaker opens or `limit` passes;
/// returns how long it took.
fn brownout(sim: &Sim, slow: Duration, limit: Duration) -> Option<Duration> {
    let start = sim.clock.elapsed();
    while sim.clock.elapsed() - start < limit {
        sim.call(slow, Outcome::Success, slow.max(100 * MS));
        if sim.breaker.state() == State::Open {
            return Some(sim.clock.elapsed() - start);
        }
    }
    None
}

#[test]
fn a_brownout_of_slow_successes_trips_within_one_trip_window() {
    let sim = Sim::new(adaptive());
    // Five minutes at 20 ms, ten calls a second: the baseline learns what normal is.
    sim.healthy(3_000, 20 * MS, 100 * MS);
    let normal = sim.breaker.normal_latency().unwrap();
    assert!(normal > 18 * MS && normal < 22 * MS, "{normal:?}");
    assert_eq!(sim.breaker.state(), State::Closed);
    let took = brownout(&sim, 600 * MS, 60 * SEC).expect("the brownout trips the breaker");
    assert!(took <= 30 * SEC, "tripped after {took:?}");
    assert_eq!(sim.open_reasons(), [OpenReason::SlowCallRatio]);

    // The same dependency behind a breaker that only counts errors never notices.
    let errors_only = Sim::new(adaptive().slow_calls(None));
    errors_only.healthy(3_000, 20 * MS, 100 * MS);
    assert_eq!(brownout(&errors_only, 600 * MS, 120 * SEC), None);
}

#[test]
fn normal_latency_and_rate_stay_none_until_armed() {
    // At low traffic every call is timed: the 20th sample is the 20th call.
    let sim = Sim::new(adaptive().consecutive_failures(None));
    sim.healthy(19, 20 * MS, 100 * MS);
    assert_eq!(sim.breaker.normal_latency(), None, "19 samples");
    sim.healthy(1, 20 * MS, 100 * MS);
    assert!(sim.breaker.normal_latency().is_some(), "20 samples");
    // Every counted outcome feeds the failure rate.
    let sim = Sim::new(adaptive().consecutive_failures(None));
    sim.healthy(99, 20 * MS, 100 * MS);
    assert_eq!(sim.breaker.normal_failure_rate(), None, "99 outcomes");
    sim.call(20 * MS, Outcome::Failure, 100 * MS);
    assert_eq!(sim.breaker.normal_failure_rate(), Some(0.01));
    assert_eq!(sim.breaker.snapshot().normal_failure_rate, Some(0.01));

    let off = Sim::new(Settings::builder().adaptive(false));
    off.healthy(200, 20 * MS, 100 * MS);
    assert_eq!(off.breaker.normal_latency(), None);
    assert_eq!(off.breaker.normal_failure_rate(), None);
}

/// Calls failing independently with probability `rate`, 100 a second, for `span`; returns
/// when the breaker opened, if it did.
fn noisy(sim: &Sim, rng: &mut fastrand::Rng, rate: f64, span: Duration) -> Option<Duration> {
    let start = sim.clock.elapsed();
    while sim.clock.elapsed() - start < span {
        let outcome = if rng.f64() < rate {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        sim.call(5 * MS, outcome, 10 * MS);
        if sim.breaker.state() == State::Open {
            return Some(sim.clock.elapsed() - start);
        }
    }
    None
}

#[test]
fn a_dependency_that_always_fails_30_percent_trips_only_an_absolute_ratio() {
    let ten_minutes = 600 * SEC;
    let mut rng = fastrand::Rng::with_seed(30);
    let relative = Sim::new(adaptive().consecutive_failures(None));
    assert_eq!(noisy(&relative, &mut rng, 0.30, ten_minutes), None);
    let rate = relative.breaker.normal_failure_rate().unwrap();
    assert!((rate - 0.3).abs() < 0.02, "measured {rate}");

    let absolute = Sim::new(
        Settings::builder()
            .adaptive(false)
            .consecutive_failures(None)
            .failure_ratio(Some(0.2)),
    );
    assert!(noisy(&absolute, &mut rng, 0.30, ten_minutes).is_some());
    assert_eq!(absolute.open_reasons(), [OpenReason::FailureRatio]);

    // The default consecutive trip (5) is not meant for such a dependency: 0.3^5 ≈ 0.24% of
    // calls end a run of five failures, so at 100 calls a second it opens within seconds.
    let consecutive = Sim::new(adaptive());
    let opened = noisy(&consecutive, &mut rng, 0.30, ten_minutes).expect("opens");
    assert!(opened < 30 * SEC, "{opened:?}");
    assert!(matches!(
        consecutive.open_reasons()[0],
        OpenReason::ConsecutiveFailures(5)
    ));
}

#[test]
fn a_payments_dependency_jumping_from_0_02_to_5_percent_trips() {
    let mut rng = fastrand::Rng::with_seed(2);
    let sim = Sim::new(adaptive().consecutive_failures(None));
    assert_eq!(noisy(&sim, &mut rng, 0.0002, 300 * SEC), None);
    let took = noisy(&sim, &mut rng, 0.05, 120 * SEC).expect("5% trips a 0.02% dependency");
    assert!(took < 60 * SEC, "{took:?}");
    assert_eq!(sim.open_reasons(), [OpenReason::FailuresAboveNormal]);
}

#[test]
fn the_first_errors_of_the_day_do_not_trip_on_a_zero_baseline() {
    let run = |floor: f64| {
        let sim = Sim::new(
            adaptive()
                .consecutive_failures(None)
                .failures(Some(Failures::above(5.0).floor(floor))),
        );
        sim.healthy(3_000, 5 * MS, 100 * MS);
        assert_eq!(sim.breaker.normal_failure_rate(), Some(0.0));
        sim.call(5 * MS, Outcome::Failure, 100 * MS);
        sim.healthy(10, 5 * MS, 100 * MS);
        assert_eq!(
            sim.breaker.state(),
            State::Closed,
            "one failure is not a rate"
        );
        // Six more within the window: seven failures where the baseline saw none in ten
        // times as many calls is more than chance (at 10⁻¹⁰), but 2% is below a floor of 5%.
        for _ in 0..6 {
            sim.call(5 * MS, Outcome::Failure, 100 * MS);
            for _ in 0..2 {
                sim.call(5 * MS, Outcome::Success, 100 * MS);
            }
        }
        sim.breaker.state()
    };
    assert_eq!(
        run(0.05),
        State::Closed,
        "7 errors in ~300 calls is below the 5% floor"
    );
    assert_eq!(
        run(0.001),
        State::Open,
        "without the floor the same errors trip it"
    );
}

#[test]
fn a_slow_probe_against_a_still_degraded_dependency_reopens() {
    let sim = Sim::new(adaptive().jitter(cutout::Jitter::None));
    sim.healthy(300, 20 * MS, 100 * MS);
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    sim.clock.elapse_break(&sim.breaker);
    // The probe succeeds, but at 30 × normal: the dependency is up, not recovered.
    assert!(sim.call(600 * MS, Outcome::Success, 600 * MS));
    assert_eq!(sim.breaker.state(), State::Open);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::ConsecutiveFailures(5), OpenReason::ProbeSlow]
    );
}

#[test]
fn a_dependency_that_hangs_trips_before_any_call_returns() {
    let sim = Sim::new(adaptive());
    sim.healthy(3_000, 20 * MS, 100 * MS);
    let mut hung: Vec<Permit<'_>> = Vec::new();
    let start = sim.clock.elapsed();
    // Calls keep arriving, ten a second; none returns.
    while sim.breaker.state() == State::Closed && sim.clock.elapsed() - start < 60 * SEC {
        if let Ok(permit) = sim.breaker.try_acquire() {
            hung.push(permit);
        }
        sim.clock.advance(100 * MS);
    }
    let took = sim.clock.elapsed() - start;
    assert_eq!(sim.breaker.state(), State::Open, "after {took:?}");
    assert!(took <= 35 * SEC, "{took:?}");
    assert_eq!(sim.open_reasons(), [OpenReason::SlowCallRatio]);
    assert!(sim.breaker.try_acquire().is_err());
    drop(hung);
}

#[test]
fn a_cold_breaker_behaves_as_its_absolute_configuration() {
    // Fewer than 100 outcomes and 20 samples: nothing relative is armed; a burst of failures
    // that is far above any "normal" trips only through the consecutive rule.
    let sim = Sim::new(adaptive().consecutive_failures(Some(5)));
    for _ in 0..4 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
        sim.healthy(1, 20 * MS, 100 * MS);
    }
    for _ in 0..4 {
        sim.call(2_000 * MS, Outcome::Success, 2_000 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Closed);
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.open_reasons(), [OpenReason::ConsecutiveFailures(5)]);
}

#[test]
fn the_baselines_survive_open_close_and_reset() {
    let sim = Sim::new(
        adaptive()
            .consecutive_failures(Some(3))
            .jitter(cutout::Jitter::None),
    );
    sim.healthy(200, 20 * MS, 100 * MS);
    let normal = sim.breaker.normal_latency().unwrap();
    let rate = sim.breaker.normal_failure_rate().unwrap();
    for _ in 0..3 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    assert_eq!(sim.breaker.normal_latency(), Some(normal));
    sim.breaker.reset();
    assert_eq!(sim.breaker.normal_latency(), Some(normal));
    assert!(sim.breaker.normal_failure_rate().unwrap() >= rate);
}

#[test]
fn a_configured_quantile_and_multiple_set_the_slow_threshold() {
    // p10 of a spread of latencies, times 2: calls above ~2 × 11 ms are slow.
    let sim = Sim::new(
        adaptive()
            .consecutive_failures(None)
            // Margin 0: this test is about the multiple and the quantile alone.
            .slow_calls(Some(
                SlowCalls::above(2.0).quantile(0.1).margin(Duration::ZERO),
            ))
            .minimum_calls(10),
    );
    for i in 0..300u32 {
        sim.call((10 + i % 10) * MS, Outcome::Success, 100 * MS);
    }
    let normal = sim.breaker.normal_latency().unwrap();
    // 10 ms, within the histogram's 12.5% precision.
    assert!(
        normal > 8_750 * Duration::from_micros(1) && normal < 11_250 * Duration::from_micros(1),
        "{normal:?}"
    );
    for _ in 0..20 {
        sim.call(15 * MS, Outcome::Success, 100 * MS);
    }
    assert_eq!(sim.breaker.snapshot().slow, 0, "15 ms is below 2 × normal");
    // Of eight calls one is timed; slow, it stands for all eight.
    for _ in 0..8 {
        sim.call(30 * MS, Outcome::Success, 100 * MS);
    }
    assert_eq!(sim.breaker.snapshot().slow, 8, "30 ms is above it");
    assert!(brownout(&sim, 30 * MS, 60 * SEC).is_some());
}

#[test]
fn no_call_is_slow_below_the_floor_however_fast_the_dependency() {
    let us = Duration::from_micros(1);
    // Margin 0: this test is about the floor alone.
    let no_margin = SlowCalls::above(3.0).margin(Duration::ZERO);
    let sim = Sim::new(
        adaptive()
            .consecutive_failures(None)
            .minimum_calls(10)
            .slow_calls(Some(no_margin)),
    );
    sim.healthy(300, 50 * us, 100 * MS);
    // 10 × a 50 µs normal, but under the 1 ms floor: scheduling noise, not a brownout.
    for _ in 0..20 {
        sim.call(500 * us, Outcome::Success, 100 * MS);
    }
    assert_eq!(sim.breaker.snapshot().slow, 0);
    for _ in 0..8 {
        sim.call(2 * MS, Outcome::Success, 100 * MS);
    }
    let slow = sim.breaker.snapshot().slow;
    assert_eq!(slow, 8, "above the floor and 3 × normal");

    let no_floor = Sim::new(
        adaptive()
            .consecutive_failures(None)
            .slow_calls(Some(no_margin.floor(Duration::ZERO))),
    );
    no_floor.healthy(300, 50 * us, 100 * MS);
    for _ in 0..8 {
        no_floor.call(500 * us, Outcome::Success, 100 * MS);
    }
    let slow = no_floor.breaker.snapshot().slow;
    assert_eq!(slow, 8, "without a floor, 10 × normal is slow");
}

#[test]
fn an_absolute_threshold_times_every_call() {
    let sim = Sim::new(
        adaptive()
            .consecutive_failures(None)
            .slow_call_threshold(Some(100 * MS)),
    );
    sim.call(200 * MS, Outcome::Success, 300 * MS);
    sim.call(200 * MS, Outcome::Success, 300 * MS);
    assert_eq!(sim.breaker.snapshot().slow, 2, "each slow call counts once");
}

// Judging latency (DESIGN §2): what the caller adds to every call (its CPU saturation, a new
// connection's setup, a change of traffic pattern) must not make a healthy dependency slow.
// Each test runs the same calls with a margin of zero as a control: that is the rule before the
// margin, and the control shows the test would fail without it.

/// A fast dependency (0.1 ms normal), then calls that each carry `added` of the caller's own.
fn caller_adds(slow_calls: SlowCalls, added: Duration) -> Sim {
    let sim = Sim::new(adaptive().slow_calls(Some(slow_calls)));
    sim.healthy(3_000, Duration::from_micros(100), 100 * MS);
    for _ in 0..600 {
        sim.call(
            Duration::from_micros(100) + added,
            Outcome::Success,
            100 * MS,
        );
    }
    sim
}

#[test]
fn a_caller_that_adds_a_constant_delay_does_not_make_a_fast_dependency_slow() {
    // A saturated caller (or a TLS handshake per call) adds 20 ms to a 0.1 ms dependency:
    // 200 × normal, and still no evidence about the dependency.
    let defaults = caller_adds(SlowCalls::above(3.0), 20 * MS);
    assert_eq!(defaults.breaker.state(), State::Closed);
    assert_eq!(defaults.breaker.snapshot().slow, 0);
    assert_eq!(defaults.open_reasons(), []);

    let control = caller_adds(SlowCalls::above(3.0).margin(Duration::ZERO), 20 * MS);
    assert_eq!(
        control.open_reasons().first(),
        Some(&OpenReason::SlowCallRatio)
    );
}

#[test]
fn a_brownout_beyond_the_margin_still_trips_a_fast_dependency() {
    // The same 0.1 ms dependency answering in 120 ms: over the margin, slow.
    let sim = caller_adds(SlowCalls::above(3.0), 120 * MS);
    assert_eq!(sim.open_reasons().first(), Some(&OpenReason::SlowCallRatio));
}

#[test]
fn the_margin_changes_nothing_for_a_dependency_slower_than_it() {
    // 20 ms normal: 3 × normal (60 ms) is above normal + 50 ms (70 ms)? No: 70 ms rules,
    // and a 30 × brownout (600 ms) is far beyond both.
    let slow = SlowCalls::above(3.0);
    assert_eq!(slow.threshold_for(20 * MS), 70 * MS);
    assert_eq!(slow.threshold_for(100 * MS), 300 * MS);
    assert_eq!(
        slow.threshold_for(Duration::from_micros(100)),
        Duration::from_micros(50_100)
    );
    assert_eq!(slow.margin(Duration::ZERO).threshold_for(20 * MS), 60 * MS);
    assert_eq!(
        slow.margin(Duration::ZERO)
            .threshold_for(Duration::from_micros(100)),
        MS,
        "the floor"
    );
    assert_eq!(slow.threshold_for(Duration::MAX), Duration::MAX);
}

/// An adaptive breaker over a 0.2 ms dependency, opened by failures, its break elapsed: the
/// next call is a probe. Breaks are exact (no jitter) so that they can be compared.
fn opened_on_a_fast_dependency(slow_calls: SlowCalls) -> Sim {
    let sim = Sim::new(
        adaptive()
            .slow_calls(Some(slow_calls))
            .jitter(cutout::Jitter::None),
    );
    sim.healthy(3_000, Duration::from_micros(200), 100 * MS);
    for _ in 0..5 {
        sim.call(Duration::from_micros(200), Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    sim.clock.elapse_break(&sim.breaker);
    sim
}

#[test]
fn a_probe_on_a_fresh_connection_is_not_slow() {
    // The dependency is back; each probe opens a fresh connection and takes 3 ms (15 × the
    // 0.2 ms learned on pooled ones): two probes close the breaker.
    let sim = opened_on_a_fast_dependency(SlowCalls::above(3.0));
    sim.call(3 * MS, Outcome::Success, 100 * MS);
    sim.call(3 * MS, Outcome::Success, 100 * MS);
    assert_eq!(sim.breaker.state(), State::Closed);
    assert_eq!(sim.open_reasons(), [OpenReason::ConsecutiveFailures(5)]);

    let control = opened_on_a_fast_dependency(SlowCalls::above(3.0).margin(Duration::ZERO));
    control.call(3 * MS, Outcome::Success, 100 * MS);
    assert_eq!(control.breaker.state(), State::Open);
    assert_eq!(
        control.open_reasons(),
        [OpenReason::ConsecutiveFailures(5), OpenReason::ProbeSlow]
    );
}

#[test]
fn a_slow_probe_grows_the_break_no_more_than_a_failed_one() {
    let slow = opened_on_a_fast_dependency(SlowCalls::above(3.0));
    slow.call(200 * MS, Outcome::Success, 100 * MS);
    let failed = opened_on_a_fast_dependency(SlowCalls::above(3.0));
    failed.call(Duration::from_micros(200), Outcome::Failure, 100 * MS);
    assert_eq!(slow.open_reasons().last(), Some(&OpenReason::ProbeSlow));
    assert_eq!(failed.open_reasons().last(), Some(&OpenReason::ProbeFailed));
    let (slow, failed) = (slow.breaker.snapshot(), failed.breaker.snapshot());
    assert!(
        slow.current_break <= failed.current_break,
        "{:?} > {:?}",
        slow.current_break,
        failed.current_break
    );
}

/// The evidence on each opening event, in order.
fn evidence(sim: &Sim) -> Vec<Option<cutout::TripEvidence>> {
    let events = sim.events.lock().unwrap();
    events
        .iter()
        .filter(|e| matches!(e.transition, Transition::Opened { .. }))
        .map(|e| e.evidence)
        .collect()
}

#[test]
fn a_relative_failure_trip_says_what_it_compared_with() {
    let mut rng = fastrand::Rng::with_seed(2);
    let sim = Sim::new(adaptive().consecutive_failures(None));
    assert_eq!(noisy(&sim, &mut rng, 0.0002, 300 * SEC), None);
    noisy(&sim, &mut rng, 0.05, 120 * SEC).expect("5% trips a 0.02% dependency");
    let snapshot = sim.breaker.snapshot();
    let [Some(evidence)] = evidence(&sim)[..] else {
        panic!("one opening with its evidence: {:?}", evidence(&sim));
    };
    // The window the snapshot still shows while open, and the baseline it was read against.
    assert_eq!(
        (evidence.calls, evidence.failures),
        (snapshot.calls, snapshot.failures)
    );
    assert!(evidence.failures >= 2);
    // The baseline as the rule read it (it had taken in the incident's first failures too),
    // which the open breaker no longer feeds.
    assert_eq!(evidence.normal_failure_rate, snapshot.normal_failure_rate);
    assert!(evidence.normal_failure_rate.expect("armed") < 0.05 / 5.0);
    let event = sim.events.lock().unwrap()[0].to_string();
    assert!(
        event.contains(&format!(
            "{} of {} calls failed (normal",
            evidence.failures, evidence.calls
        )),
        "{event}"
    );
}

#[test]
fn a_slow_trip_says_its_threshold_and_normal_latency() {
    let sim = Sim::new(adaptive());
    sim.healthy(3_000, 20 * MS, 100 * MS);
    brownout(&sim, 600 * MS, 60 * SEC).expect("the brownout trips the breaker");
    let [Some(evidence)] = evidence(&sim)[..] else {
        panic!("one opening with its evidence: {:?}", evidence(&sim));
    };
    let normal = evidence.normal_latency.expect("normal latency");
    assert!(normal > 18 * MS && normal < 22 * MS, "{normal:?}");
    // 3 × normal, raised to normal + the 50 ms margin.
    let threshold = evidence.slow_threshold.expect("the threshold in force");
    assert!(
        threshold >= 60 * MS && threshold <= 75 * MS,
        "{threshold:?}"
    );
    assert!(evidence.slow * 2 >= evidence.calls, "{evidence:?}");
    let event = sim.events.lock().unwrap()[0].to_string();
    assert!(event.contains("slow above"), "{event}");
}

#[test]
fn only_an_opening_by_a_closed_rule_carries_evidence() {
    let sim = Sim::new(adaptive());
    sim.healthy(3_000, 20 * MS, 100 * MS);
    brownout(&sim, 600 * MS, 60 * SEC).expect("trips");
    // The break passes; a slow probe re-opens it: no window rule decided that.
    sim.clock.advance(30 * SEC);
    assert!(sim.call(600 * MS, Outcome::Success, 600 * MS));
    let events = sim.events.lock().unwrap();
    let reasons: Vec<_> = events
        .iter()
        .map(|e| (e.transition.to(), e.evidence.is_some()))
        .collect();
    assert_eq!(
        reasons,
        [
            (State::Open, true),
            (State::HalfOpen, false),
            (State::Open, false)
        ],
        "{events:?}"
    );
}
