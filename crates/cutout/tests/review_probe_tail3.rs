//! Third hostile review of the probe tail's spell rule (issue #28, commit 0b003ba): the tail
//! is the baseline's p99, measured at a merge while closed only if the baseline holds no slow
//! spell, and settled a trip window later (`machine/baseline/tail.rs`). These tests drive a
//! breaker on the manual clock with many calls in flight at once (a realistic, lognormal
//! healthy dependency), at 1, 10, 100 and 400 calls a second, and ask whether a healthy
//! breaker's tail settles, and whether brownouts still fail their probes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use cutout::{Event, OpenReason, Outcome, Settings, SettingsBuilder, State, Transition};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

mod manual_sim;
use manual_sim::Sim;

fn adaptive() -> SettingsBuilder {
    Settings::builder().adaptive(true)
}

/// A lognormal latency: median `median`, log-sd `sigma` (Box–Muller on a seeded generator).
struct LogNormal {
    rng: fastrand::Rng,
    median: f64,
    sigma: f64,
}

impl LogNormal {
    fn new(seed: u64, median: Duration, sigma: f64) -> LogNormal {
        LogNormal {
            rng: fastrand::Rng::with_seed(seed),
            median: median.as_secs_f64(),
            sigma,
        }
    }

    fn draw(&mut self) -> Duration {
        let u1 = self.rng.f64().max(1e-12);
        let u2 = self.rng.f64();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        Duration::from_secs_f64(self.median * (self.sigma * z).exp())
    }

    /// The exact `z`-quantile (z in standard deviations).
    fn at(&self, z: f64) -> Duration {
        Duration::from_secs_f64(self.median * (self.sigma * z).exp())
    }
}

/// The z of the 99th percentile.
const Z99: f64 = 2.326;

/// Open-loop traffic: a call starts every `1 / rate` seconds (each with its latency and
/// outcome from `next`), many in flight at once, for `span`. Stops early once the breaker is
/// open if `until_open`. Returns the calls started.
fn drive(
    sim: &Sim,
    rate: f64,
    span: Duration,
    until_open: bool,
    mut next: impl FnMut() -> (Duration, Outcome),
) -> u64 {
    let gap = Duration::from_secs_f64(1.0 / rate);
    let start = sim.clock.elapsed();
    let end = start + span;
    let mut next_start = start;
    let mut flight: BinaryHeap<Reverse<(Duration, u64)>> = BinaryHeap::new();
    let mut permits = std::collections::HashMap::new();
    let mut id = 0u64;
    let mut started = 0;
    loop {
        let now = sim.clock.elapsed();
        // Finish everything due.
        while let Some(Reverse((at, key))) = flight.peek().copied() {
            if at > now {
                break;
            }
            flight.pop();
            let (permit, outcome): (cutout::Permit, Outcome) = permits.remove(&key).unwrap();
            permit.record(outcome);
        }
        if until_open && sim.breaker.state() == State::Open {
            break;
        }
        if now >= next_start && now < end {
            let (latency, outcome) = next();
            started += 1;
            if let Ok(permit) = sim.breaker.try_acquire() {
                flight.push(Reverse((now + latency, id)));
                permits.insert(id, (permit, outcome));
                id += 1;
            }
            next_start += gap;
        }
        let wake = match flight.peek() {
            Some(Reverse((at, _))) if next_start < end => (*at).min(next_start),
            Some(Reverse((at, _))) => *at,
            None if next_start < end => next_start,
            None => break,
        };
        if wake > now {
            sim.clock.advance(wake - now);
        }
    }
    started
}

fn reasons(events: &[Event]) -> Vec<OpenReason> {
    events
        .iter()
        .filter_map(|e| match e.transition {
            Transition::Opened { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

/// An outage (every call fails fast) at `rate` until the breaker opens.
fn outage(sim: &Sim, rate: f64) {
    drive(sim, rate, 120 * SEC, true, || (5 * MS, Outcome::Failure));
    assert_eq!(sim.breaker.state(), State::Open, "the outage trips");
}

/// Waits out the break, sends one probe of `probe`: the state after it (half-open or closed
/// if it was not slow, open if it was).
fn one_probe(sim: &Sim, probe: Duration) -> State {
    sim.clock.elapse_break(&sim.breaker);
    sim.call(probe, Outcome::Success, probe.max(100 * MS));
    sim.breaker.state()
}

/// `seeds` healthy breakers on a lognormal dependency (median 20 ms, log-sd `sigma`) at `rate`
/// calls a second for `minutes`; then an outage trips each and one probe at the dependency's
/// healthy p99 is sent. Returns the seeds whose probe re-opened the breaker (or which tripped
/// while healthy), with what happened.
fn healthy_p99_probe_reopens(
    rate: f64,
    minutes: u64,
    sigma: f64,
    seeds: u64,
) -> Vec<(u64, String)> {
    let mut reopened = Vec::new();
    for seed in 0..seeds {
        let sim = Sim::new(adaptive());
        let mut dep = LogNormal::new(seed + 1, 20 * MS, sigma);
        let p99 = dep.at(Z99);
        drive(&sim, rate, Duration::from_secs(minutes * 60), false, || {
            (dep.draw(), Outcome::Success)
        });
        let before = reasons(&sim.events.lock().unwrap());
        if sim.breaker.state() != State::Closed || !before.is_empty() {
            // A healthy dependency tripped: itself a finding, count it.
            reopened.push((seed, format!("tripped while healthy: {before:?}")));
            continue;
        }
        outage(&sim, rate);
        if one_probe(&sim, p99) == State::Open {
            let events = sim.events.lock().unwrap();
            let last = events.iter().rev().find(|e| e.evidence.is_some());
            reopened.push((
                seed,
                format!(
                    "probe {p99:?}: {:?}; last evidence {:?}",
                    reasons(&events),
                    last.and_then(|e| e.evidence)
                ),
            ));
        }
    }
    reopened
}

// ---------------------------------------------------------------------------------------
// A healthy lognormal dependency: does its tail settle?
// ---------------------------------------------------------------------------------------

/// Log-sd 0.7: p99 = 5.1 × the median (102 ms on 20 ms), 5.8% of calls above the 3 × median
/// threshold. After 10 minutes at 1 call a second (600 samples, 300 in the baseline) the tail
/// should have settled: a probe at the healthy p99 closes.
#[test]
fn a_healthy_lognormal_dependency_at_1_per_second_has_a_settled_tail_after_10_minutes() {
    let reopened = healthy_p99_probe_reopens(1.0, 10, 0.7, 8);
    assert!(
        reopened.is_empty(),
        "seeds (of 8) whose probe at the healthy p99 re-opened: {reopened:?}"
    );
}

/// The same at 10 calls a second.
#[test]
fn a_healthy_lognormal_dependency_at_10_per_second_has_a_settled_tail_after_10_minutes() {
    let reopened = healthy_p99_probe_reopens(10.0, 10, 0.7, 8);
    assert!(
        reopened.is_empty(),
        "seeds (of 8) whose probe at the healthy p99 re-opened: {reopened:?}"
    );
}

/// The same at 100 calls a second.
#[test]
fn a_healthy_lognormal_dependency_at_100_per_second_has_a_settled_tail_after_10_minutes() {
    let reopened = healthy_p99_probe_reopens(100.0, 10, 0.7, 4);
    assert!(
        reopened.is_empty(),
        "seeds (of 4) whose probe at the healthy p99 re-opened: {reopened:?}"
    );
}

/// Above the sampling switch (8,192 calls in the 30 s window: 400 calls a second here) one call
/// in eight is timed; the chance test reads timed calls against the baseline. The tail must
/// still settle.
#[test]
fn a_healthy_lognormal_dependency_at_400_per_second_has_a_settled_tail_after_10_minutes() {
    let reopened = healthy_p99_probe_reopens(400.0, 10, 0.7, 2);
    assert!(
        reopened.is_empty(),
        "seeds (of 2) whose probe at the healthy p99 re-opened: {reopened:?}"
    );
}

/// A heavier healthy tail (log-sd 1.0: p99 = 10 × the median, 13.6% above 3 × the median).
#[test]
fn a_heavy_tailed_healthy_dependency_at_10_per_second_has_a_settled_tail_after_10_minutes() {
    let reopened = healthy_p99_probe_reopens(10.0, 10, 1.0, 8);
    assert!(
        reopened.is_empty(),
        "seeds (of 8) whose probe at the healthy p99 re-opened: {reopened:?}"
    );
}

/// Guard of the guards above (passes): a young breaker (1 minute at 1 call a second, fewer
/// than the 100 samples a tail needs) judges the same p99 probe slow, so those tests can fail.
#[test]
fn a_young_breaker_s_probe_at_the_healthy_p99_is_slow() {
    let reopened = healthy_p99_probe_reopens(1.0, 1, 0.7, 4);
    assert_eq!(reopened.len(), 4, "{reopened:?}");
}

// ---------------------------------------------------------------------------------------
// Brownouts whose probes must fail
// ---------------------------------------------------------------------------------------

/// A brownout that trips by timeouts: at 1 call a second (a 300-sample baseline, whose p99 is
/// its 3rd-largest sample) the dependency turns slow, its first `k` calls succeed at 150 ms
/// (7.5 × its 20 ms) and the rest time out (failures at 200 ms) until the breaker opens on
/// failures, which is no slow spell. Its probes, once it is back, close it; a minute later a
/// 7.5 × brownout of successes trips on slow calls, and its probe at 150 ms must re-open it.
/// Tried for `k` from 0 to 8: the `k` whose second brownout's probe passed.
#[test]
fn a_brownout_that_tripped_by_timeouts_leaves_no_tail_that_passes_the_next_brownout_s_probes() {
    let mut passed = Vec::new();
    for k in 0..=8u32 {
        let sim = Sim::new(adaptive());
        sim.healthy(600, 20 * MS, SEC);
        for _ in 0..k {
            sim.call(150 * MS, Outcome::Success, SEC);
        }
        let mut n = 0;
        while sim.breaker.state() == State::Closed && n < 120 {
            sim.call(200 * MS, Outcome::Failure, SEC);
            n += 1;
        }
        let first = sim.open_reasons();
        assert_eq!(sim.breaker.state(), State::Open, "k {k}: {first:?}");
        assert_eq!(sim.probes_until_decided(20 * MS), State::Closed, "k {k}");
        for _ in 0..60 {
            sim.call(20 * MS, Outcome::Success, SEC);
        }
        if sim.brownout_for(150 * MS, SEC, 120 * SEC).is_none() {
            passed.push((k, format!("no trip: {:?}", sim.open_reasons())));
            continue;
        }
        sim.probes_until_decided(150 * MS);
        if sim.after_last_slow_trip() != Some(OpenReason::ProbeSlow) {
            passed.push((k, format!("{:?}", sim.open_reasons())));
        }
    }
    assert!(
        passed.is_empty(),
        "(slow successes before the timeouts, openings) whose later brownout probe passed: \
         {passed:?}"
    );
}

/// A brownout that creeps in, 20% of calls at 5 × (100 ms on 20 ms), for `minutes`, then
/// every call until the breaker trips on slow calls; at 10 calls a second on a time window.
/// The reason of the opening after that trip (the first probe's, at 100 ms).
fn creep_then_full(minutes: u32, every: u32) -> (Option<OpenReason>, Vec<OpenReason>) {
    let sim = Sim::new(adaptive());
    sim.healthy(3_000, 20 * MS, 100 * MS);
    for i in 0..minutes * 600 {
        let latency = if i % every == 0 { 100 * MS } else { 20 * MS };
        sim.call(latency, Outcome::Success, 100 * MS);
    }
    assert_eq!(sim.open_reasons(), [], "the creep does not trip");
    sim.brownout_for(100 * MS, 100 * MS, 120 * SEC)
        .expect("the full brownout trips");
    sim.probes_until_decided(100 * MS);
    (sim.after_last_slow_trip(), sim.open_reasons())
}

/// rev2's creeping brownout (20% at 5 ×, then every call) lasted 90 s and now passes: the
/// creep shows in the trip window beyond chance, a slow spell. Once the creep has lasted a
/// baseline window (5 minutes) the share outside the window is the creep's own, the window no
/// longer stands out, the spells stop, and a baseline window later the tail is measured on the
/// creep (its p99 is 100 ms) and settles: the full brownout's probe at 100 ms stays under
/// 100 ms + the 50 ms margin. `tail.rs` names only "a brownout too small to show beyond chance
/// (a few percent)" as what can lift the tail; this one showed beyond chance for minutes.
/// Tried for creeps of 4 to 12 minutes: the minutes whose full brownout's probe passed.
#[ignore = "known limit of the probe tail (issue #28): a brownout of 10-20% of calls that lasts a baseline window is the baseline's new normal, and its p99 (under the 10x cap) becomes the tail; see machine/baseline/tail.rs"]
#[test]
fn a_brownout_that_creeps_in_at_20_percent_for_minutes_still_fails_its_probes_once_full() {
    let passed: Vec<_> = (4..=12)
        .map(|minutes| (minutes, creep_then_full(minutes, 5)))
        .filter(|(_, (after, _))| *after != Some(OpenReason::ProbeSlow))
        .collect();
    assert!(
        passed.is_empty(),
        "(minutes of creep, (after the trip, openings)) whose probe at 100 ms passed: {passed:?}"
    );
}

/// The same creep for 4 minutes (less than the baseline window plus its quiet): guard, the
/// spells keep the tail from learning it.
#[test]
fn a_brownout_that_creeps_in_at_20_percent_for_4_minutes_still_fails_its_probes_once_full() {
    let (after, opens) = creep_then_full(4, 5);
    assert_eq!(after, Some(OpenReason::ProbeSlow), "opens {opens:?}");
}

/// The same with 10% of calls at 5 × for 12 minutes.
#[ignore = "known limit of the probe tail (issue #28): a brownout of 10-20% of calls that lasts a baseline window is the baseline's new normal, and its p99 (under the 10x cap) becomes the tail; see machine/baseline/tail.rs"]
#[test]
fn a_brownout_that_creeps_in_at_10_percent_for_12_minutes_still_fails_its_probes_once_full() {
    let (after, opens) = creep_then_full(12, 10);
    assert_eq!(after, Some(OpenReason::ProbeSlow), "opens {opens:?}");
}
