//! Hostile review of the probe rule "slow only above min(p99, 10 × normal) + margin" (issue
//! #28): brownouts a probe must still catch, on the manual clock.

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, OpenReason, Outcome, Settings, SlowCalls, State, Transition};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

mod manual_sim;
use manual_sim::Sim;

impl Sim {
    /// Runs a brownout (every call succeeds at `slow`) until the breaker opens; panics
    /// after `limit`.
    fn brownout_until_open(&self, slow: Duration, limit: Duration) -> u32 {
        let start = self.clock.elapsed();
        let mut calls = 0;
        while self.clock.elapsed() - start < limit {
            self.call(slow, Outcome::Success, slow.max(100 * MS));
            calls += 1;
            if self.breaker.state() == State::Open {
                return calls;
            }
        }
        panic!("a {slow:?} brownout did not trip within {limit:?}");
    }

    /// Waits out the break, then sends probes at `probe` until the breaker leaves half-open
    /// (at most 10).
    fn probe_through(&self, probe: Duration) -> State {
        self.clock.elapse_break(&self.breaker);
        for _ in 0..10 {
            self.call(probe, Outcome::Success, probe.max(100 * MS));
            match self.breaker.state() {
                State::HalfOpen => continue,
                other => return other,
            }
        }
        self.breaker.state()
    }
}

/// A 20 ms dependency browning out to `factor` × its median: after the trip its probes (at the
/// brownout's latency) must re-open the breaker, as they did before the tail rule.
fn brownout_probe_reopens(factor: u32) {
    let sim = Sim::new(Settings::builder().adaptive(true));
    sim.healthy(3_000, 20 * MS, 100 * MS);
    let slow = 20 * MS * factor;
    let calls = sim.brownout_until_open(slow, 60 * SEC);
    let after = sim.probe_through(slow);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::SlowCallRatio, OpenReason::ProbeSlow],
        "a {factor}x brownout ({slow:?} on a 20 ms median, {calls} brownout calls before the \
         trip): its first probe, at the brownout's own latency, was not slow; state after the \
         probes: {after:?}, normal latency {:?}",
        sim.breaker.normal_latency()
    );
}

#[test]
fn a_5x_brownout_s_probe_is_still_slow() {
    brownout_probe_reopens(5);
}

#[test]
fn a_10x_brownout_s_probe_is_still_slow() {
    brownout_probe_reopens(10);
}

#[test]
fn a_30x_brownout_s_probe_is_still_slow() {
    brownout_probe_reopens(30);
}

/// A dependency whose healthy p99 is already 20 × its median (2 of 100 calls at 400 ms, the
/// rest 20 ms) browns out to 30 × (600 ms): the probe at 600 ms stands above the cap (200 ms)
/// plus the margin and must be slow.
#[test]
fn a_brownout_above_the_cap_on_a_20x_tailed_dependency_fails_its_probe() {
    let sim = Sim::new(Settings::builder().adaptive(true));
    for i in 0..3_000 {
        let latency = if i % 50 == 0 { 400 * MS } else { 20 * MS };
        assert!(sim.call(latency, Outcome::Success, 100 * MS));
    }
    sim.brownout_until_open(600 * MS, 60 * SEC);
    let after = sim.probe_through(600 * MS);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::SlowCallRatio, OpenReason::ProbeSlow],
        "after: {after:?}"
    );
}

/// An absolute threshold with no relative rule: the probe's limit is the threshold raised to
/// the 50 ms margin, never a tail (no baseline is measured).
#[test]
fn an_absolute_threshold_alone_judges_probes_above_threshold_or_50ms() {
    let settings = || {
        Settings::builder()
            .adaptive(true)
            .slow_calls(None)
            .slow_call_threshold(10 * MS)
    };
    // 2 ms dependency, then a brownout at 80 ms trips; an 80 ms probe is slow (> 50 ms).
    let sim = Sim::new(settings());
    sim.healthy(500, 2 * MS, 100 * MS);
    sim.brownout_until_open(80 * MS, 60 * SEC);
    sim.probe_through(80 * MS);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::SlowCallRatio, OpenReason::ProbeSlow]
    );
    // A 40 ms probe (a fresh connection) is not slow: two close it.
    let sim = Sim::new(settings());
    sim.healthy(500, 2 * MS, 100 * MS);
    sim.brownout_until_open(80 * MS, 60 * SEC);
    assert_eq!(
        sim.probe_through(40 * MS),
        State::Closed,
        "{:?}",
        sim.open_reasons()
    );
}

/// margin(0) on a uniform 20 ms baseline: the probe limit is 3 × 20 = 60 ms; a 100 ms
/// brownout's probe is slow.
#[test]
fn margin_zero_judges_a_probe_by_the_multiple_and_tail() {
    let sim = Sim::new(
        Settings::builder()
            .adaptive(true)
            .slow_calls(SlowCalls::above(3.0).margin(Duration::ZERO)),
    );
    sim.healthy(3_000, 20 * MS, 100 * MS);
    sim.brownout_until_open(100 * MS, 60 * SEC);
    let after = sim.probe_through(100 * MS);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::SlowCallRatio, OpenReason::ProbeSlow],
        "after {after:?}"
    );
}

/// Probe judgement right after arming: 20 samples at 20 ms, then failures open it; a probe at
/// 200 ms (10 ×, above 20 + 50 ms and above the tail) is slow.
#[test]
fn a_probe_right_after_arming_is_judged_against_the_fresh_tail() {
    let sim = Sim::new(Settings::builder().adaptive(true));
    sim.healthy(20, 20 * MS, 100 * MS);
    assert!(sim.breaker.normal_latency().is_some());
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    sim.probe_through(200 * MS);
    assert_eq!(sim.open_reasons().last(), Some(&OpenReason::ProbeSlow));
}

/// A breaker with no seed and seeded ones: none panics, and two seeds draw different
/// breaks.
#[test]
fn seeded_and_unseeded_breakers_draw_breaks_without_panicking() {
    let opened_at = |seed: Option<u64>| {
        let clock = ManualClock::new();
        let mut b = Breaker::builder("dep")
            .settings(Settings::builder().build().unwrap())
            .clock(clock.clone());
        if let Some(s) = seed {
            b = b.seed(s);
        }
        let breaker = b.build();
        for _ in 0..5 {
            if let Ok(p) = breaker.try_acquire() {
                p.record(Outcome::Failure);
            }
        }
        assert_eq!(breaker.state(), State::Open);
        // How long until a probe is admitted, in ms steps.
        let mut waited = 0u64;
        while breaker.state() == State::Open && waited < 600_000 {
            clock.advance(MS);
            waited += 1;
        }
        waited
    };
    let _ = opened_at(None);
    let draws: std::collections::BTreeSet<u64> = (1..=8).map(|s| opened_at(Some(s))).collect();
    assert!(
        draws.len() > 1,
        "8 seeds all drew the same break: {draws:?}"
    );
}

fn closes(sim: &Sim) -> Vec<(State, cutout::CloseReason)> {
    sim.events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e.transition {
            Transition::Closed { from, reason } => Some((from, reason)),
            _ => None,
        })
        .collect()
}

/// Every close path names its reason: probes succeeding (with and without a ramp), and the
/// half-open timeout configured to close.
#[test]
fn every_close_names_why() {
    let open_by_failures = |sim: &Sim| {
        for _ in 0..5 {
            sim.call(10 * MS, Outcome::Failure, 100 * MS);
        }
        assert_eq!(sim.breaker.state(), State::Open);
        sim.clock.elapse_break(&sim.breaker);
    };
    let sim = Sim::new(Settings::builder());
    open_by_failures(&sim);
    sim.healthy(2, 10 * MS, 100 * MS);
    assert_eq!(
        closes(&sim),
        [(State::HalfOpen, cutout::CloseReason::ProbesSucceeded)]
    );

    let sim = Sim::new(Settings::builder().recovery(cutout::Recovery::over(0.25)));
    open_by_failures(&sim);
    sim.healthy(2, 10 * MS, 100 * MS);
    assert_eq!(sim.breaker.state(), State::Recovering);
    assert_eq!(
        closes(&sim),
        [(State::HalfOpen, cutout::CloseReason::ProbesSucceeded)]
    );

    let sim = Sim::new(
        Settings::builder()
            .max_wait_in_half_open(5 * SEC)
            .half_open_timeout(cutout::HalfOpenTimeout::Close),
    );
    open_by_failures(&sim);
    let hung = sim.breaker.try_acquire().expect("the first probe");
    sim.clock.advance(6 * SEC);
    let _ = sim.breaker.try_acquire();
    drop(hung);
    assert_eq!(
        closes(&sim),
        [(State::HalfOpen, cutout::CloseReason::HalfOpenTimeout)]
    );
}

/// The evidence on a slow-ratio opening matches what tripped: slow calls counted, none
/// failed, the threshold in force 3 × the measured normal (20 ms).
#[test]
fn a_slow_trip_s_evidence_matches_the_window() {
    let sim = Sim::new(Settings::builder().adaptive(true));
    sim.healthy(3_000, 20 * MS, 100 * MS);
    sim.brownout_until_open(600 * MS, 60 * SEC);
    let events = sim.events.lock().unwrap();
    let opened = events
        .iter()
        .find(|e| matches!(e.transition, Transition::Opened { .. }))
        .expect("opened");
    let ev = opened
        .evidence
        .expect("a closed rule's opening carries evidence");
    assert_eq!(ev.failures, 0, "{ev:?}");
    assert!(ev.slow > 0 && ev.slow <= ev.calls, "{ev:?}");
    let normal = ev.normal_latency.expect("armed");
    assert_eq!(Some(normal), sim.breaker.normal_latency(), "{ev:?}");
    let threshold = ev.slow_threshold.expect("a slow rule in force");
    assert!(threshold >= 3 * normal && threshold < 600 * MS, "{ev:?}");
}

/// A call admitted while closed that hangs through the trip and ends while half-open cannot
/// decide the probe (DESIGN §2): the breaker stays half-open, and the probe decides.
#[test]
fn a_hung_closed_call_ending_in_half_open_does_not_decide_the_probe() {
    let sim = Sim::new(Settings::builder());
    let hung = sim.breaker.try_acquire().expect("closed");
    for _ in 0..5 {
        sim.call(10 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    sim.clock.elapse_break(&sim.breaker);
    let probe = sim.breaker.try_acquire().expect("the probe");
    hung.record(Outcome::Failure);
    assert_eq!(
        sim.breaker.state(),
        State::HalfOpen,
        "{:?}",
        sim.open_reasons()
    );
    probe.record(Outcome::Success);
    assert_eq!(sim.open_reasons(), [OpenReason::ConsecutiveFailures(5)]);
}

/// Just armed (20 samples), the p99 is the largest sample: one 200 ms outlier among nineteen
/// 20 ms calls sets every probe's limit at 250 ms, so a 10 × probe passes after a trip by
/// failures.
#[test]
fn one_outlier_in_a_just_armed_baseline_does_not_set_the_probe_limit() {
    let sim = Sim::new(Settings::builder().adaptive(true));
    sim.healthy(19, 20 * MS, 100 * MS);
    sim.healthy(1, 200 * MS, 200 * MS);
    assert!(sim.breaker.normal_latency().is_some(), "armed");
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    let after = sim.probe_through(200 * MS);
    assert_eq!(
        sim.open_reasons().last(),
        Some(&OpenReason::ProbeSlow),
        "a 200 ms probe on a 20 ms median (one outlier in 20 samples): {after:?}, {:?}",
        sim.open_reasons()
    );
}

/// The change's doc says a slowdown the probes no longer see is judged by the closed state's
/// slow rule once the probes close the breaker. With a recovery ramp, a 5 × brownout past the
/// probes is served through the ramp (whose slow calls only hold its raise back), the
/// baseline learns it meanwhile, and once closed the brownout goes on unjudged.
#[test]
fn a_5x_brownout_past_the_probes_is_still_judged_after_the_ramp() {
    let sim = Sim::new(
        Settings::builder()
            .adaptive(true)
            .recovery(cutout::Recovery::over(0.25)),
    );
    sim.healthy(3_000, 20 * MS, 100 * MS);
    sim.brownout_until_open(100 * MS, 60 * SEC);
    let after = sim.probe_through(100 * MS);
    let mut ramp_calls = 0;
    for _ in 0..6_000 {
        if sim.breaker.state() != State::Recovering {
            break;
        }
        if sim.call(100 * MS, Outcome::Success, 100 * MS) {
            ramp_calls += 1;
        }
    }
    // The brownout goes on for another minute once the ramp is over: the brownout must have
    // opened the breaker again somewhere (a probe, the ramp, or the closed rule).
    for _ in 0..600 {
        if sim.breaker.state() == State::Open {
            break;
        }
        sim.call(100 * MS, Outcome::Success, 100 * MS);
    }
    assert!(
        sim.open_reasons().len() >= 2,
        "after the probes {after:?}; {ramp_calls} ramp calls at 100 ms; then a minute more of \
         the brownout closed: {:?}; normal latency now {:?}; opens {:?}",
        sim.breaker.state(),
        sim.breaker.normal_latency(),
        sim.open_reasons()
    );
}

/// Without a ramp, the closed rule catches the 5 × brownout again after its probes passed
/// (the mitigation the change's docs name).
#[test]
fn without_a_ramp_the_closed_rule_catches_a_5x_brownout_after_the_probes() {
    let sim = Sim::new(Settings::builder().adaptive(true));
    sim.healthy(3_000, 20 * MS, 100 * MS);
    sim.brownout_until_open(100 * MS, 60 * SEC);
    let after = sim.probe_through(100 * MS);
    if after == State::Closed {
        let took = sim.brownout_until_open(100 * MS, 60 * SEC);
        assert!(took > 0);
    }
    assert!(sim.open_reasons().len() >= 2, "{:?}", sim.open_reasons());
}

/// The refused count: an opening from closed starts at zero, a failed half-open's opening
/// keeps what the half-open refused (snapshot docs).
#[test]
fn refused_calls_rebase_on_an_opening_from_closed_and_carry_a_failed_half_open() {
    let sim = Sim::new(Settings::builder());
    for _ in 0..5 {
        sim.call(10 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    assert_eq!(sim.breaker.snapshot().refused_calls, 0);
    for _ in 0..3 {
        assert!(sim.breaker.try_acquire().is_err());
    }
    assert_eq!(sim.breaker.snapshot().refused_calls, 3);
    sim.clock.elapse_break(&sim.breaker);
    let probe = sim.breaker.try_acquire().expect("the probe");
    assert_eq!(
        sim.breaker.snapshot().refused_calls,
        0,
        "half-open starts at zero"
    );
    for _ in 0..2 {
        assert!(sim.breaker.try_acquire().is_err());
    }
    assert_eq!(sim.breaker.snapshot().refused_calls, 2);
    probe.record(Outcome::Failure);
    assert_eq!(sim.breaker.state(), State::Open);
    assert_eq!(
        sim.breaker.snapshot().refused_calls,
        2,
        "a failed half-open's opening keeps its count"
    );
    assert!(sim.breaker.try_acquire().is_err());
    assert_eq!(sim.breaker.snapshot().refused_calls, 3);
}

/// A failure-rate trip after successes counted off the lock: the evidence on the Opened
/// event is the window the open snapshot shows (DESIGN: while open, the snapshot still shows
/// the window that tripped it), and its rate is at the threshold.
#[test]
fn a_failure_rate_trip_s_evidence_counts_the_successes_folded_off_the_lock() {
    let sim = Sim::new(
        Settings::builder()
            .consecutive_failures(None)
            .failure_ratio(0.5),
    );
    sim.healthy(500, MS, 10 * MS);
    let mut n = 0;
    while sim.breaker.state() == State::Closed && n < 10_000 {
        let outcome = if n % 3 == 0 {
            Outcome::Success
        } else {
            Outcome::Failure
        };
        sim.call(MS, outcome, 10 * MS);
        n += 1;
    }
    assert_eq!(sim.breaker.state(), State::Open);
    let snap = sim.breaker.snapshot();
    let events = sim.events.lock().unwrap();
    let ev = events
        .iter()
        .find_map(|e| match e.transition {
            Transition::Opened { .. } => e.evidence,
            _ => None,
        })
        .expect("evidence");
    assert_eq!(
        (ev.calls, ev.failures),
        (snap.calls, snap.failures),
        "{ev:?} vs {snap:?}"
    );
    assert!(ev.failures * 2 >= ev.calls, "{ev:?}");
}
