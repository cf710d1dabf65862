//! `[fleet-signals]`: the pods' summed windows trip breakers whose own rules cannot at 1
//! request a second, through a simulated store; a store that loses everything changes nothing.

use std::time::Duration;

use cutout_lab::{Lab, Scenario};

/// 20 pods at 1 req/s, a 60 s outage; each pod's 10 s window holds about 10 calls, never the
/// 30 its ratio rule needs, and consecutive failures are off: alone, no pod ever trips.
fn scenario(signals: &str) -> Scenario {
    let text = format!(
        r#"
        seed = 3
        duration = "2m"

        [dependency]
        latency-median = "20ms"
        latency-p99 = "100ms"
        error-rate = 0.001
        capacity = 1000

        [fleet]
        pods = 20
        rate = 1
        timeout = "1s"

        [[incidents]]
        kind = "outage"
        start = "30s"
        duration = "60s"

        {signals}

        [breakers.instances.ratio]
        adaptive = false
        consecutive-failures = "off"
        minimum-calls = 30
        failure-ratio = "50%"
        window-type = "time"
        window-duration = "10s"
        "#
    );
    Scenario::from_toml(&text, "fleet-signals-small").unwrap()
}

#[test]
fn fleet_signals_trip_the_pods_local_rules_cannot() {
    let scenario = scenario("[fleet-signals]");
    let lab = Lab::run(&scenario);
    let labels: Vec<&str> = lab.metrics.iter().map(|m| m.setting.as_str()).collect();
    assert_eq!(
        labels,
        ["no breaker", "ratio", "ratio + fleet signals", "oracle"]
    );
    let (local, fleet) = (&lab.metrics[1], &lab.metrics[2]);
    assert_eq!(local.trips, 0, "local rules alone never trip");
    assert_eq!(local.pods_tripped, 0);
    assert_eq!(
        fleet.pods_tripped, 20,
        "every pod trips on the fleet's window"
    );
    assert_eq!(fleet.reasons.get("signal"), Some(&20));
    assert_eq!(fleet.false_trips, 0);
    // The fleet's window (about 200 calls) is half failures some 5 s into the outage.
    let first = fleet.time_to_trip.expect("a trip");
    assert!(first < Duration::from_secs(10), "{first:?}");
    assert!(
        fleet.counts.reached_failing * 3 < local.counts.reached_failing,
        "{} vs {}",
        fleet.counts.reached_failing,
        local.counts.reached_failing
    );
}

#[test]
fn a_store_that_loses_everything_never_trips_and_changes_nothing() {
    let scenario = scenario("[fleet-signals]\nloss = 1.0");
    let lab = Lab::run(&scenario);
    let (local, fleet) = (&lab.runs[1], &lab.runs[2]);
    assert_eq!(lab.metrics[2].trips, 0);
    assert_eq!(lab.metrics[2].reasons.get("signal"), None);
    assert_eq!(local.counts, fleet.counts, "snapshots alone change nothing");
    assert_eq!(local.transitions, fleet.transitions);
}

#[test]
fn fleet_signals_are_deterministic() {
    let scenario = scenario("[fleet-signals]\nloss = 0.2\nstore-latency = \"50ms\"");
    let a = Lab::run(&scenario);
    let b = Lab::run(&scenario);
    assert_eq!(a.runs, b.runs);
    assert_eq!(
        a.metrics[2].pods_tripped, 20,
        "a lossy, slow store still gets through"
    );
}

#[test]
fn the_section_is_checked_and_can_be_turned_off() {
    let off = scenario("[fleet-signals]\nenabled = false");
    assert!(off.fleet_signals.is_none());
    assert_eq!(
        Lab::subjects(&off).len(),
        3,
        "no breaker, the setting and the oracle: no fleet-signals column"
    );
    let on = scenario("[fleet-signals]\ninterval = \"1s\"");
    let signals = on.fleet_signals.unwrap();
    assert_eq!(signals.interval, Duration::from_secs(1));
    assert_eq!(
        signals.staleness,
        Duration::from_millis(3250),
        "cutout-fleet's default"
    );
    assert_eq!(signals.store_latency, Duration::from_millis(5));
    assert_eq!(signals.loss, 0.01);

    let error = |section: &str| {
        let text = format!(
            "seed = 1\nduration = \"1m\"\n[dependency]\nlatency-median = \"20ms\"\n\
             latency-p99 = \"100ms\"\nerror-rate = 0.001\ncapacity = 1000\n[fleet]\npods = 2\nrate = 1\n\
             timeout = \"1s\"\n{section}\n[breakers.instances.a]\n"
        );
        Scenario::from_toml(&text, "x").unwrap_err()
    };
    for (section, expected) in [
        (
            "[fleet-signals]\ninterval = \"5ms\"",
            "fleet-signals.interval = \"5ms\": from 10ms",
        ),
        (
            "[fleet-signals]\ninterval = \"soon\"",
            "fleet-signals.interval = \"soon\": invalid",
        ),
        (
            "[fleet-signals]\nloss = 1.5",
            "fleet-signals.loss = 1.5: a probability",
        ),
        ("[fleet-signals]\nloss = nan", "fleet-signals.loss = NaN"),
        (
            "[fleet-signals]\nstaleness = \"100ms\"",
            "fleet-signals.staleness = \"100ms\": from one interval (250ms)",
        ),
        (
            "[fleet-signals]\nstore-latency = \"2m\"",
            "fleet-signals.store-latency = \"2m\": at most 1m",
        ),
        (
            "[fleet-signals]\n[breakers.instances.\"b + fleet signals\"]",
            "ends the label of a setting's column with fleet signals",
        ),
        (
            "[fleet-signals]\nintervall = \"1s\"",
            "unknown field `intervall`",
        ),
    ] {
        let e = error(section);
        assert!(e.contains(expected), "{section}: {e}");
    }
}
