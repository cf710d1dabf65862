//! The probe tail on the manual clock (issue #28): a probe within the healthy dependency's own
//! tail is not slow, and the tail it stands on is the one from before any slow spell, so a brownout's
//! own calls cannot lift it.

use std::time::Duration;

use cutout::{OpenReason, Outcome, Settings, State};

const MS: Duration = Duration::from_millis(1);

mod manual_sim;
use manual_sim::Sim;

/// A dependency whose p99 is 5 × its median: 24 of every 25 calls take 20 ms, one 100 ms, ten
/// calls a second for `calls` calls.
fn long_tailed(sim: &Sim, calls: u32) {
    for i in 0..calls {
        let latency = if i % 25 == 0 { 100 * MS } else { 20 * MS };
        assert!(sim.call(latency, Outcome::Success, 100 * MS));
    }
}

/// Five minutes of the long-tailed dependency, then failures open the breaker; the break is
/// waited out.
fn opened_on_a_long_tailed_dependency() -> Sim {
    let sim = Sim::new(
        Settings::builder()
            .adaptive(true)
            .jitter(cutout::Jitter::None),
    );
    long_tailed(&sim, 3_000);
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
    sim.clock.elapse_break(&sim.breaker);
    sim
}

/// Runs a brownout (every call succeeds at `slow`, ten a second) until the breaker opens.
fn brownout_until_open(sim: &Sim, slow: Duration) {
    for _ in 0..600 {
        sim.call(slow, Outcome::Success, slow.max(100 * MS));
        if sim.breaker.state() == State::Open {
            return;
        }
    }
    panic!("a {slow:?} brownout did not trip in 600 calls");
}

#[test]
fn a_probe_within_the_dependency_s_normal_tail_is_not_slow() {
    // A probe at the healthy dependency's own p99 (100 ms, above 3 × its 20 ms median and
    // above 20 + 50 ms) says nothing against it: two such probes close the breaker.
    let sim = opened_on_a_long_tailed_dependency();
    sim.call(100 * MS, Outcome::Success, 100 * MS);
    sim.call(100 * MS, Outcome::Success, 100 * MS);
    assert_eq!(
        sim.breaker.state(),
        State::Closed,
        "{:?}",
        sim.open_reasons()
    );
    // Beyond that tail plus the 50 ms margin, a probe is slow.
    let slower = opened_on_a_long_tailed_dependency();
    slower.call(165 * MS, Outcome::Success, 100 * MS);
    assert_eq!(slower.open_reasons().last(), Some(&OpenReason::ProbeSlow));
}

#[test]
fn a_brownout_within_10x_fails_its_probe_though_its_calls_lifted_the_p99() {
    // An 8 × brownout (160 ms) on the long-tailed dependency: its own calls are 5% of the
    // baseline when it trips, so the baseline's p99 at the trip is 160 ms and a limit read
    // then (160 + 50 ms) would pass its probes. The tail from before the brownout is 100 ms.
    let sim = Sim::new(Settings::builder().adaptive(true));
    long_tailed(&sim, 3_000);
    brownout_until_open(&sim, 160 * MS);
    sim.clock.elapse_break(&sim.breaker);
    sim.call(160 * MS, Outcome::Success, 160 * MS);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::SlowCallRatio, OpenReason::ProbeSlow]
    );
}

#[test]
fn a_second_brownout_soon_after_the_first_still_fails_its_probe() {
    // The first brownout's calls stay in the baseline for its whole window (5 minutes): a
    // tail measured meanwhile would hold them. Recovered, healthy for two minutes, the
    // dependency browns out again: its probe is judged against the tail from before the first.
    let sim = Sim::new(
        Settings::builder()
            .adaptive(true)
            .jitter(cutout::Jitter::None),
    );
    long_tailed(&sim, 3_000);
    brownout_until_open(&sim, 160 * MS);
    sim.clock.elapse_break(&sim.breaker);
    sim.call(20 * MS, Outcome::Success, 100 * MS);
    sim.call(20 * MS, Outcome::Success, 100 * MS);
    assert_eq!(
        sim.breaker.state(),
        State::Closed,
        "{:?}",
        sim.open_reasons()
    );
    long_tailed(&sim, 1_200);
    brownout_until_open(&sim, 160 * MS);
    sim.clock.elapse_break(&sim.breaker);
    sim.call(160 * MS, Outcome::Success, 160 * MS);
    assert_eq!(
        sim.open_reasons(),
        [
            OpenReason::SlowCallRatio,
            OpenReason::SlowCallRatio,
            OpenReason::ProbeSlow
        ]
    );
}

#[test]
fn a_young_breaker_judges_its_probes_without_a_tail() {
    // Twenty seconds of traffic: a tail measured, none settled yet (a trip window later). A
    // probe at the dependency's p99 is judged as before the tail rule: above 20 + 50 ms, slow.
    let sim = Sim::new(Settings::builder().adaptive(true));
    long_tailed(&sim, 200);
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    sim.clock.elapse_break(&sim.breaker);
    sim.call(100 * MS, Outcome::Success, 100 * MS);
    assert_eq!(
        sim.open_reasons(),
        [OpenReason::ConsecutiveFailures(5), OpenReason::ProbeSlow]
    );
}
