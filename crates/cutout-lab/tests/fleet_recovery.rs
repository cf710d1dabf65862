//! Fleet recovery in the lab (`[fleet-signals]`, issue #28): the pods that stay open after
//! the dependency is back end their break early in release slots a budget apart, through
//! cutout-fleet's own code and its script's twin.

use std::time::Duration;

use cutout::{BreakEndReason, Transition};
use cutout_lab::{Lab, Scenario};

/// outage-fleet cut to 30 pods and 12 minutes: a 3-minute outage from 5 minutes, the core's
/// default breaker.
fn scenario(signals: &str) -> Scenario {
    let text = format!(
        r#"
        seed = 7
        duration = "12m"

        [dependency]
        latency-median = "20ms"
        latency-p99 = "100ms"
        error-rate = 0.001
        capacity = 5000

        [fleet]
        pods = 30
        rate = 10
        timeout = "1s"
        retries = 1
        retry-backoff = "100ms"

        [[incidents]]
        kind = "outage"
        start = "5m"
        duration = "3m"

        {signals}

        [breakers.instances.defaults]
        "#
    );
    Scenario::from_toml(&text, "fleet-recovery-small").unwrap()
}

/// When each break a peer's recovery ended, in ns.
fn releases(run: &cutout_lab::sim::Run) -> Vec<u64> {
    let mut at: Vec<u64> = run
        .transitions
        .iter()
        .filter(|t| {
            matches!(
                t.transition,
                Transition::BreakEnded {
                    reason: BreakEndReason::PeerRecovered,
                    ..
                }
            )
        })
        .map(|t| t.at)
        .collect();
    at.sort_unstable();
    at
}

#[test]
fn fleet_recovery_gives_traffic_back_within_seconds_of_the_first_close() {
    let scenario = scenario("[fleet-signals]");
    let lab = Lab::run(&scenario);
    let labels: Vec<&str> = lab.metrics.iter().map(|m| m.setting.as_str()).collect();
    assert_eq!(
        labels,
        [
            "no breaker",
            "defaults",
            "defaults + fleet signals",
            "oracle"
        ]
    );
    let (local, fleet) = (&lab.metrics[1], &lab.metrics[2]);
    let full = |m: &cutout_lab::report::Metrics| m.recovery_to_full.expect("full traffic");
    // Alone, the pods serve breaks grown to their 2 minute cap (jittered: 60 to 120 s).
    assert!(full(local) > Duration::from_secs(40), "{:?}", full(local));
    assert!(
        full(fleet) * 3 < full(local),
        "fleet {:?} against local {:?}",
        full(fleet),
        full(local)
    );
    assert!(fleet.goodput > local.goodput);
    // Most pods came back through a peer's recovery, none of them before it.
    let released = releases(&lab.runs[2]);
    assert!(released.len() >= 15, "{} releases", released.len());
    let recovery = Duration::from_secs(480).as_nanos() as u64;
    assert!(released.iter().all(|&at| at > recovery));
    assert!(releases(&lab.runs[1]).is_empty(), "no fleet, no release");
}

#[test]
fn releases_are_a_spacing_apart_within_the_budget() {
    for budget in [8, 25] {
        let scenario = scenario(&format!("[fleet-signals]\nrecovery-budget = {budget}"));
        let lab = Lab::run(&scenario);
        let released = releases(&lab.runs[2]);
        assert!(
            released.len() >= 10,
            "{budget}: {} releases",
            released.len()
        );
        // Two probes a release at the core's defaults: ⌊budget / 2⌋ − 1 releases a second.
        let per_second = u64::from(budget / 2 - 1);
        let spacing = 1_000_000_000 / per_second;
        let closest = released.windows(2).map(|w| w[1] - w[0]).min().unwrap();
        // Slots are whole microseconds on the store and rounded up to the millisecond on
        // the pod: never closer than a spacing less that millisecond.
        assert!(
            closest + 1_000_000 >= spacing,
            "{budget}: two releases {closest} ns apart, the spacing is {spacing} ns"
        );
        // So no sliding second holds more than ⌊budget / 2⌋ releases.
        let most = (0..released.len())
            .map(|i| {
                released[i..]
                    .iter()
                    .take_while(|&&at| at < released[i] + 1_000_000_000)
                    .count()
            })
            .max()
            .unwrap();
        assert!(
            most as u32 <= budget / 2,
            "{budget}: {most} releases in a second"
        );
    }
}

#[test]
fn recovery_can_be_switched_off_and_its_budget_is_checked() {
    let off = scenario("[fleet-signals]\nrecovery = false");
    assert_eq!(off.fleet_signals.unwrap().recovery, None);
    let lab = Lab::run(&off);
    assert!(releases(&lab.runs[2]).is_empty());
    let on = scenario("[fleet-signals]");
    assert_eq!(
        on.fleet_signals.unwrap().recovery,
        Some(25),
        "cutout-fleet's default"
    );
    for (value, expected) in [
        ("0", "fleet-signals.recovery-budget = 0: from 1 to 100000"),
        (
            "100001",
            "fleet-signals.recovery-budget = 100001: from 1 to 100000",
        ),
    ] {
        let text = format!(
            "seed = 1\nduration = \"1m\"\n[dependency]\nlatency-median = \"20ms\"\n\
             latency-p99 = \"100ms\"\nerror-rate = 0.001\ncapacity = 1000\n[fleet]\npods = 2\n\
             rate = 1\ntimeout = \"1s\"\n[fleet-signals]\nrecovery-budget = {value}\n\
             [breakers.instances.a]\n"
        );
        let error = Scenario::from_toml(&text, "x").unwrap_err();
        assert!(error.contains(expected), "{error}");
    }
}
