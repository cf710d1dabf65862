//! Second hostile review of the probe rule "slow only above max(threshold, probe tail +
//! margin)", where the probe tail is the baseline's p99 as it stood at least a trip window
//! before the trip (issue #28, commit ff0ad8f): brownouts a probe must still catch, healthy
//! probes that must pass, and the hot path's agreement with the locked judgement, on the
//! manual clock. Nine of these failed on ff0ad8f, whose only sign of a brownout was a trip;
//! they pass since the tail is learned only while the baseline holds no slow spell
//! (`machine/baseline/tail.rs`).

use std::time::Duration;

use cutout::{OpenReason, Outcome, Settings, SettingsBuilder, SlowCalls, State, TripWindow};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

mod manual_sim;
use manual_sim::Sim;

fn adaptive() -> SettingsBuilder {
    Settings::builder().adaptive(true)
}

// ---------------------------------------------------------------------------------------
// Brownouts the probes must still catch
// ---------------------------------------------------------------------------------------

/// A 5 × brownout runs 12 s (under the 15 s its trip needs), then `interrupt` stops the
/// breaker from counting it and brings it back to closed; the brownout goes on until it trips.
/// Tried at every phase of the 30 s settle cycle (2 s steps): the offsets (s) whose first probe
/// after the trip did not re-open, with the openings.
fn brownout_interrupted(interrupt: impl Fn(&Sim)) -> Vec<(u32, Vec<OpenReason>)> {
    let mut passed = Vec::new();
    for offset in (0..30).step_by(2) {
        let sim = Sim::new(adaptive());
        sim.healthy(3_000 + offset * 10, 20 * MS, 100 * MS);
        for _ in 0..120 {
            sim.call(100 * MS, Outcome::Success, 100 * MS);
        }
        assert_eq!(sim.open_reasons(), [], "offset {offset}: no trip yet");
        interrupt(&sim);
        assert_eq!(sim.breaker.state(), State::Closed, "offset {offset}");
        sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
            .expect("the brownout trips");
        sim.probes_until_decided(100 * MS);
        if sim.after_last_slow_trip() != Some(OpenReason::ProbeSlow) {
            passed.push((offset, sim.open_reasons()));
        }
    }
    passed
}

/// Two probes at the healthy 20 ms: the dependency seemed fine for a moment.
fn two_good_probes(sim: &Sim) {
    sim.clock.elapse_break(&sim.breaker);
    for _ in 0..2 {
        sim.call(20 * MS, Outcome::Success, 100 * MS);
    }
}

/// An operator isolates the breaker a few seconds into a 5 × brownout (before its trip), then
/// resets it a minute later while the brownout goes on. `isolate` is not a trip, so the
/// pending tail measured during the brownout's first seconds is not discarded; the first merge
/// after the reset settles it, and the brownout's own probes pass.
#[test]
fn a_brownout_isolated_then_reset_still_fails_its_probes() {
    let passed = brownout_interrupted(|sim| {
        sim.breaker.isolate();
        sim.clock.advance(60 * SEC);
        sim.breaker.reset();
    });
    assert!(
        passed.is_empty(),
        "offsets (s) whose 5x brownout probes passed after isolate + reset: {passed:?}"
    );
}

/// The same with `disable` for a minute of the brownout (calls pass, uncounted), then reset.
#[test]
fn a_brownout_disabled_then_reset_still_fails_its_probes() {
    let passed = brownout_interrupted(|sim| {
        sim.breaker.disable();
        for _ in 0..600 {
            sim.call(100 * MS, Outcome::Success, 100 * MS);
        }
        sim.breaker.reset();
    });
    assert!(
        passed.is_empty(),
        "offsets (s) whose 5x brownout probes passed after disable + reset: {passed:?}"
    );
}

/// The same with a manual open (`open_for`, 40 s) a few seconds into the brownout: a control,
/// not a trip, so the pending tail holding the brownout's start survives it; two probes at 20
/// ms close the breaker and the brownout comes back.
#[test]
fn a_brownout_opened_by_hand_then_probed_closed_still_fails_its_later_probes() {
    let passed = brownout_interrupted(|sim| {
        assert!(sim.breaker.open_for(40 * SEC));
        two_good_probes(sim);
    });
    assert!(
        passed.is_empty(),
        "offsets (s) whose 5x brownout probes passed after a manual open: {passed:?}"
    );
}

/// The same when the browning-out dependency answers one call with "retry after 30 s"
/// (`Verdict::OpenFor`): the breaker opens as asked (`OpenReason::RetryAfter`), which is not
/// a trip, so the pending tail holding the brownout's start survives.
#[test]
fn a_brownout_that_asked_for_a_retry_after_still_fails_its_later_probes() {
    let passed = brownout_interrupted(|sim| {
        let permit = sim.breaker.try_acquire().expect("closed");
        sim.clock.advance(100 * MS);
        permit.record_verdict(cutout::classify::Verdict::OpenFor(30 * SEC));
        assert_eq!(sim.breaker.state(), State::Open);
        two_good_probes(sim);
    });
    assert!(
        passed.is_empty(),
        "offsets (s) whose 5x brownout probes passed after a Retry-After opening: {passed:?}"
    );
}

/// A count window of 200 calls at one call a second spans 200 s, but the tail's settle
/// period for a count window is a fixed 30 s: a 5 × brownout needs 100 slow calls (100 s) to
/// trip, its tail settles long before, and its probes pass.
#[test]
fn a_count_window_spanning_more_than_30s_still_fails_a_5x_brownout_s_probe() {
    let sim = Sim::new(adaptive().window(TripWindow::Count(200)));
    sim.healthy(900, 20 * MS, SEC);
    let calls = sim
        .brownout_for(100 * MS, SEC, 400 * SEC)
        .expect("the brownout trips");
    let after = sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "{calls} brownout calls (1/s) before the trip; after the probes {after:?}; opens {:?}",
        sim.open_reasons()
    );
}

/// The same count window with a 10 × brownout: the tail settles at 200 ms, the cap (10 × 20
/// ms) does not bite, and a probe at the brownout's 200 ms passes.
#[test]
fn a_count_window_spanning_more_than_30s_still_fails_a_10x_brownout_s_probe() {
    let sim = Sim::new(adaptive().window(TripWindow::Count(200)));
    sim.healthy(900, 20 * MS, SEC);
    let calls = sim
        .brownout_for(200 * MS, SEC, 400 * SEC)
        .expect("the brownout trips");
    let after = sim.probes_until_decided(200 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "{calls} brownout calls (1/s) before the trip; after the probes {after:?}; opens {:?}",
        sim.open_reasons()
    );
}

/// A long 5 × brownout at low traffic (one call a second): it trips, its probes fail for 150
/// s, then it ends. The tail is quiet for one baseline window after the trip, but the failed
/// probes' own samples (every success is a sample, whatever its role) came after the trip:
/// at the turnover they are a few of the first hundred-odd samples, above the 1% of the p99,
/// and that tail settles as the healthy one. A second 5 × brownout starting within the next
/// minutes must still fail its probes; tried for every start from 100 s to 300 s after the
/// first brownout's end, in 10 s steps.
#[test]
fn a_second_brownout_after_a_long_one_still_fails_its_probes() {
    let mut passed = Vec::new();
    for healthy in (100..=300).step_by(10) {
        let sim = Sim::new(adaptive());
        sim.healthy(600, 20 * MS, SEC);
        sim.brownout_for(100 * MS, SEC, 60 * SEC)
            .expect("the first brownout trips");
        // The first brownout goes on for 150 s more: the breaker refuses, and probes fail.
        let end = sim.clock.elapsed() + 150 * SEC;
        while sim.clock.elapsed() < end {
            sim.call(100 * MS, Outcome::Success, SEC);
        }
        let first = sim.open_reasons();
        assert!(
            first.len() >= 2 && first.iter().skip(1).all(|r| *r == OpenReason::ProbeSlow),
            "the first brownout's probes were slow: {first:?}"
        );
        for _ in 0..healthy {
            sim.call(20 * MS, Outcome::Success, SEC);
        }
        if sim.breaker.state() != State::Closed {
            passed.push((healthy, sim.open_reasons()));
            continue;
        }
        sim.brownout_for(100 * MS, SEC, 60 * SEC)
            .expect("the second brownout trips");
        sim.probes_until_decided(100 * MS);
        if sim.after_last_slow_trip() != Some(OpenReason::ProbeSlow) {
            passed.push((healthy, sim.open_reasons()));
        }
    }
    assert!(
        passed.is_empty(),
        "seconds of healthy traffic after the first brownout before a second one whose probes \
         passed: {passed:?}"
    );
}

/// An open gate that refuses the brownout's trip for a minute keeps the breaker closed
/// through it: the brownout's tail settles meanwhile (no trip discards it), and once the gate
/// allows the trip its probes pass.
#[test]
fn a_brownout_held_closed_by_the_open_gate_still_fails_its_probes_once_it_trips() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let allowed = Arc::new(AtomicBool::new(false));
    let gate = allowed.clone();
    let clock = cutout::clock::ManualClock::new();
    let breaker = cutout::Breaker::builder("dep")
        .settings(adaptive().build().unwrap())
        .clock(clock.clone())
        .seed(3)
        .open_gate(move |_| gate.load(Ordering::Relaxed))
        .build();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    breaker.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    let sim = Sim {
        clock,
        breaker,
        events,
    };
    sim.healthy(3_000, 20 * MS, 100 * MS);
    for _ in 0..600 {
        sim.call(100 * MS, Outcome::Success, 100 * MS);
    }
    assert_eq!(
        sim.breaker.state(),
        State::Closed,
        "the gate held it closed"
    );
    allowed.store(true, Ordering::Relaxed);
    sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
        .expect("the brownout trips");
    let after = sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "after {after:?}; opens {:?}",
        sim.open_reasons()
    );
}

/// Guard (passes): a 5 × brownout starting at every phase of the 30 s settle cycle, at 10
/// calls a second on a time window, re-opens on its first probe.
#[test]
fn a_brownout_starting_at_any_phase_of_the_settle_cycle_fails_its_probe() {
    let mut passed = Vec::new();
    for offset_ds in (0..340).step_by(15) {
        let sim = Sim::new(adaptive());
        sim.healthy(3_000 + offset_ds, 20 * MS, 100 * MS);
        sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
            .expect("trips");
        sim.probes_until_decided(100 * MS);
        if sim.after_last_slow_trip() != Some(OpenReason::ProbeSlow) {
            passed.push(offset_ds);
        }
    }
    assert!(passed.is_empty(), "offsets (0.1 s) that passed: {passed:?}");
}

/// Guard (passes): a brownout at 60% of calls (a partial one, 5 ×) trips within the trip
/// window and its slow probe re-opens.
#[test]
fn a_60_percent_brownout_fails_its_slow_probe() {
    let sim = Sim::new(adaptive());
    sim.healthy(3_000, 20 * MS, 100 * MS);
    let mut i = 0u32;
    let start = sim.clock.elapsed();
    while sim.breaker.state() == State::Closed && sim.clock.elapsed() - start < 120 * SEC {
        let latency = if i % 5 < 3 { 100 * MS } else { 20 * MS };
        sim.call(latency, Outcome::Success, 100 * MS);
        i += 1;
    }
    assert_eq!(sim.breaker.state(), State::Open, "a 60% brownout trips");
    sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "{:?}",
        sim.open_reasons()
    );
}

/// Guard: a half-and-half brownout (every other call at 5 ×) needs nearly the whole 30 s
/// trip window to reach the 50% slow ratio, the longest a time-window trip can take; at every
/// phase of the settle cycle its slow probe must still re-open.
#[test]
fn a_half_and_half_brownout_at_any_phase_fails_its_slow_probe() {
    let mut passed = Vec::new();
    for offset_ds in (0..300).step_by(20) {
        let sim = Sim::new(adaptive());
        sim.healthy(3_000 + offset_ds, 20 * MS, 100 * MS);
        let mut i = 0u32;
        let start = sim.clock.elapsed();
        while sim.breaker.state() == State::Closed && sim.clock.elapsed() - start < 120 * SEC {
            let latency = if i.is_multiple_of(2) {
                100 * MS
            } else {
                20 * MS
            };
            sim.call(latency, Outcome::Success, 100 * MS);
            i += 1;
        }
        assert_eq!(sim.breaker.state(), State::Open, "a 50% brownout trips");
        sim.probes_until_decided(100 * MS);
        if sim.after_last_slow_trip() != Some(OpenReason::ProbeSlow) {
            passed.push((offset_ds, i));
        }
    }
    assert!(
        passed.is_empty(),
        "(offset in 0.1 s, brownout calls) whose probes passed: {passed:?}"
    );
}

/// A brownout that creeps in: 20% of calls at 5 × for 90 s (under the 50% slow ratio, so no
/// trip, but the p99 is the brownout's within seconds, and that tail settles a period later),
/// then every call. (With 40 s of creeping it passes: the tail measured on the creep is still
/// pending when the full brownout trips, and is discarded.) `tail.rs` names this case
/// ("a brownout that trips more than a period after it began ... the 10 × cap bounds it"):
/// this test measures what that costs at 5 ×, under the cap: the probes pass.
#[test]
fn a_brownout_that_creeps_in_at_20_percent_still_fails_its_probes_once_full() {
    let sim = Sim::new(adaptive());
    sim.healthy(3_000, 20 * MS, 100 * MS);
    for i in 0..900u32 {
        let latency = if i % 5 == 0 { 100 * MS } else { 20 * MS };
        sim.call(latency, Outcome::Success, 100 * MS);
    }
    assert_eq!(sim.open_reasons(), [], "20% slow does not trip");
    sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
        .expect("the full brownout trips");
    let after = sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "after {after:?}; opens {:?}",
        sim.open_reasons()
    );
}

/// Guard (passes): quantile 0.25 and margin 0 with a 3 × multiple, on a dependency at 10–30
/// ms (normal latency the p25): the tail is capped at 10 × the p25, and a 5 × brownout's
/// probe (above the p99 of the baseline) is slow.
#[test]
fn quantile_0_25_margin_0_still_fails_a_5x_brownout_s_probe() {
    let sim = Sim::new(
        adaptive().slow_calls(SlowCalls::above(3.0).quantile(0.25).margin(Duration::ZERO)),
    );
    for i in 0..3_000u32 {
        assert!(sim.call((10 + (i % 3) * 10) * MS, Outcome::Success, 100 * MS));
    }
    sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
        .expect("trips");
    sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "{:?}",
        sim.open_reasons()
    );
}

/// Guard (passes): a relative rule with a configured 61 s baseline window (the shortest allowed
/// over a 30 s trip window at the median; the brownout's 15 s is a quarter of it at the trip)
/// still fails a 5 × brownout's probe.
#[test]
fn a_61s_baseline_window_still_fails_a_5x_brownout_s_probe() {
    let sim = Sim::new(adaptive().slow_calls(SlowCalls::above(3.0).window(61 * SEC)));
    sim.healthy(3_000, 20 * MS, 100 * MS);
    sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
        .expect("trips");
    sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeSlow),
        "{:?}",
        sim.open_reasons()
    );
}

// ---------------------------------------------------------------------------------------
// Healthy dependencies whose probes must not be slow
// ---------------------------------------------------------------------------------------

/// A dependency with a long healthy tail: 4% of its calls at 100 ms (5 × its 20 ms median).
fn long_tailed(sim: &Sim, n: u32, gap: Duration) {
    for i in 0..n {
        let latency = if i % 25 == 0 { 100 * MS } else { 20 * MS };
        assert!(sim.call(latency, Outcome::Success, gap));
    }
}

fn outage(sim: &Sim) {
    for _ in 0..5 {
        sim.call(20 * MS, Outcome::Failure, 100 * MS);
    }
    assert_eq!(sim.breaker.state(), State::Open);
}

/// Guard (passes): a mature long-tailed dependency trips on an outage (failures); once it is
/// back, a probe at its own healthy p99 (100 ms) does not re-open it.
#[test]
fn a_long_tailed_dependency_s_probe_at_its_own_p99_closes_after_an_outage() {
    let sim = Sim::new(adaptive());
    long_tailed(&sim, 3_000, 100 * MS);
    outage(&sim);
    assert_eq!(
        sim.probes_until_decided(100 * MS),
        State::Closed,
        "{:?}",
        sim.open_reasons()
    );
}

/// A young long-tailed breaker has an outage (a trip by failures, which add no latency
/// sample) before its first tail settled; it recovers, and 4 minutes of healthy traffic later
/// (2,400 samples, the same long tail) a second outage: a probe at its own healthy p99 still
/// re-opens it, because every trip (even one by failures) quiets the tail for a whole
/// baseline window.
#[test]
fn a_failure_trip_does_not_keep_a_long_tailed_dependency_young_for_a_baseline_window() {
    let sim = Sim::new(adaptive());
    long_tailed(&sim, 200, 100 * MS);
    outage(&sim);
    assert_eq!(sim.probes_until_decided(20 * MS), State::Closed);
    long_tailed(&sim, 2_400, 100 * MS);
    outage(&sim);
    let after = sim.probes_until_decided(100 * MS);
    assert_eq!(
        after,
        State::Closed,
        "a probe at the healthy p99 (100 ms on a 20 ms median, 4 min of healthy traffic): {:?}",
        sim.open_reasons()
    );
}

/// Guard: a long-tailed dependency's tail changed (from uniform 20 ms to 4% at 100 ms, a
/// deploy). The change shows in the trip window as slow calls beyond chance, a slow spell
/// (`machine/baseline/tail.rs`): 4 minutes later the probes still stand on the old tail (a
/// probe at the new p99 re-opens, as before the tail rule); once the baseline has turned
/// over after the spell (15 minutes), the settled tail is the new one and such a probe closes.
#[test]
fn a_tail_that_lengthened_is_the_probe_limit_once_the_baseline_has_turned_over() {
    let soon = Sim::new(adaptive());
    soon.healthy(3_000, 20 * MS, 100 * MS);
    long_tailed(&soon, 2_400, 100 * MS);
    outage(&soon);
    assert_eq!(
        soon.probes_until_decided(100 * MS),
        State::Open,
        "4 minutes after the change: {:?}",
        soon.open_reasons()
    );
    let later = Sim::new(adaptive());
    later.healthy(3_000, 20 * MS, 100 * MS);
    long_tailed(&later, 9_000, 100 * MS);
    outage(&later);
    assert_eq!(
        later.probes_until_decided(100 * MS),
        State::Closed,
        "15 minutes after the change: {:?}",
        later.open_reasons()
    );
}

// ---------------------------------------------------------------------------------------
// The hot path and the locked judgement
// ---------------------------------------------------------------------------------------

/// Three probes in flight at once (`half_open_probes = 3`) after `traffic` and an outage, all
/// taking `latency`, recorded in `reversed` order or not: they re-open the breaker on a slow
/// probe if `slow`, else close it.
fn three_probes_are_judged(traffic: impl Fn(&Sim), cases: [(Duration, bool); 2], reversed: bool) {
    for (latency, slow) in cases {
        let sim = Sim::new(adaptive().half_open_probes(3).probe_successes(3));
        traffic(&sim);
        outage(&sim);
        sim.clock.elapse_break(&sim.breaker);
        let mut permits: Vec<_> = (0..3)
            .map(|_| sim.breaker.try_acquire().expect("three probe slots"))
            .collect();
        assert!(sim.breaker.try_acquire().is_err(), "a fourth is refused");
        sim.clock.advance(latency);
        if reversed {
            permits.reverse();
        }
        for permit in permits {
            permit.record(Outcome::Success);
        }
        let reasons = sim.open_reasons();
        if slow {
            assert_eq!(reasons.last(), Some(&OpenReason::ProbeSlow), "{latency:?}");
        } else {
            assert_eq!(
                sim.breaker.state(),
                State::Closed,
                "{latency:?}: {reasons:?}"
            );
        }
    }
}

/// Guard (passes): on a uniform 20 ms baseline the probe limit is 20 ms + the 50 ms margin
/// (about 70 ms, within the histogram's resolution), for every one of three probes in flight
/// at once: the off-lock judgement (the published threshold) slows a probe above it and not
/// below, whichever order they finish in.
#[test]
fn concurrent_probes_are_judged_by_the_same_limit() {
    three_probes_are_judged(
        |sim| sim.healthy(3_000, 20 * MS, 100 * MS),
        [(60 * MS, false), (85 * MS, true)],
        true,
    );
}

/// Guard (passes): on a long-tailed dependency (4% at 100 ms, so a settled tail of about 100
/// ms and a probe limit of about 150 ms) the published threshold the off-lock path judges
/// three concurrent probes by is the tail's, not the threshold in force (70 ms): at 120 ms
/// they close the breaker, at 185 ms the first to finish re-opens it.
#[test]
fn concurrent_probes_on_a_long_tail_are_judged_by_the_tail_limit() {
    three_probes_are_judged(
        |sim| long_tailed(sim, 3_000, 100 * MS),
        [(120 * MS, false), (185 * MS, true)],
        false,
    );
}

/// resilience4j's rule over three probes: a 5 × brownout's three probes at its latency are
/// all slow, and re-open the breaker (`ProbeRates`), on a time window at 10 calls a second.
#[test]
fn the_rates_rule_still_fails_a_5x_brownout_s_probes() {
    let sim = Sim::new(
        adaptive()
            .half_open_rule(cutout::HalfOpenRule::Rates)
            .half_open_probes(3),
    );
    sim.healthy(3_000, 20 * MS, 100 * MS);
    sim.brownout_for(100 * MS, 100 * MS, 60 * SEC)
        .expect("trips");
    let after = sim.probes_until_decided(100 * MS);
    assert_eq!(
        sim.after_last_slow_trip(),
        Some(OpenReason::ProbeRates),
        "after {after:?}; opens {:?}",
        sim.open_reasons()
    );
}
