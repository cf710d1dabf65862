//! The simulator itself: conservation of requests and attempts, determinism, timeouts recorded
//! at the timeout, and the shipped scenarios reading cleanly.

use std::path::Path;
use std::time::Duration;

use cutout_lab::{Lab, Metrics, Scenario};

/// A small scenario touching every path: an outage, a hang (timeouts), a brownout, flapping,
/// a capacity-limited recovery, retries, and settings with and without a ramp.
fn small(seed: u64) -> Scenario {
    let text = format!(
        r#"
        seed = {seed}
        duration = "4m"
        compare = ["plain", "ramp", "ratio"]

        [dependency]
        latency-median = "20ms"
        latency-p99 = "100ms"
        error-rate = 0.02
        capacity = 150

        [fleet]
        pods = 10
        rate = 10
        timeout = "500ms"
        retries = 2
        retry-backoff = "50ms"

        [[incidents]]
        kind = "outage"
        start = "30s"
        duration = "30s"

        [[incidents]]
        kind = "capacity-limited"
        start = "60s"
        duration = "40s"
        capacity-from = 0.3

        [[incidents]]
        kind = "hang"
        start = "110s"
        duration = "20s"

        [[incidents]]
        kind = "brownout"
        start = "140s"
        duration = "20s"
        latency-factor = 40

        [[incidents]]
        kind = "flapping"
        start = "170s"
        duration = "40s"
        period = "10s"

        [breakers.defaults]
        break-duration = "5s"
        max-break-duration = "20s"

        [breakers.instances.plain]
        [breakers.instances.ramp]
        recovery-fraction = 0.5
        [breakers.instances.ratio]
        adaptive = false
        failure-ratio = "50%"
        window-size = 20
        "#
    );
    Scenario::from_toml(&text, "small").unwrap()
}

#[test]
fn every_request_and_attempt_ends_exactly_one_way() {
    let scenario = small(1);
    let lab = Lab::run(&scenario);
    for run in &lab.runs {
        let c = run.counts;
        assert!(c.requests > 10_000, "{c:?}");
        assert_eq!(
            c.requests,
            c.requests_ok + c.requests_failed + c.requests_timed_out + c.requests_refused,
            "{}: requests",
            run.setting
        );
        assert_eq!(c.attempts, c.admitted + c.refused, "{}", run.setting);
        assert_eq!(
            c.admitted,
            c.attempts_ok + c.attempts_failed + c.attempts_timed_out,
            "{}: attempts",
            run.setting
        );
        assert!(c.attempts > c.requests, "retries happened");
        assert_eq!(c.in_flight_at_end, 0, "the loop drains every call");
        assert!(
            c.refused > 0 && c.attempts_timed_out > 0 && c.probes > 0,
            "{c:?}"
        );
        // The timeline adds up to the totals.
        let sum = |f: fn(&cutout_lab::sim::Second) -> u32| -> u64 {
            run.timeline.iter().map(|s| u64::from(f(s))).sum()
        };
        assert_eq!(sum(|s| s.offered), c.attempts);
        assert_eq!(sum(|s| s.admitted), c.admitted);
        assert_eq!(sum(|s| s.succeeded), c.attempts_ok);
        assert_eq!(sum(|s| s.failed), c.attempts_failed + c.attempts_timed_out);
        assert_eq!(sum(|s| s.probes), c.probes);
        assert_eq!(run.probe_times.len() as u64, c.probes);
        // Every pod is in exactly one state at every sampled second.
        for s in &run.timeline[..scenario.duration.as_secs() as usize] {
            assert_eq!(s.closed + s.open + s.half_open + s.recovering, 10);
        }
    }
    assert!(
        lab.runs[1].timeline.iter().any(|s| s.recovering > 0),
        "the ramp setting ramps"
    );
}

#[test]
fn the_same_seed_gives_the_same_report_and_timeline() {
    let a = small(42);
    let b = small(42);
    let (lab_a, lab_b) = (Lab::run(&a), Lab::run(&b));
    assert_eq!(lab_a.runs, lab_b.runs);
    assert_eq!(lab_a.table(), lab_b.table());
    assert_eq!(lab_a.svg().unwrap(), lab_b.svg().unwrap());
    let other = small(43);
    assert_ne!(Lab::run(&other).runs[0].counts, lab_a.runs[0].counts);
}

#[test]
fn every_setting_sees_the_same_requests() {
    let scenario = small(5);
    let lab = Lab::run(&scenario);
    let requests: Vec<u64> = lab.runs.iter().map(|r| r.counts.requests).collect();
    assert!(requests.windows(2).all(|w| w[0] == w[1]), "{requests:?}");
}

#[test]
fn a_hung_call_is_recorded_as_a_failure_at_the_timeout() {
    let text = r#"
        seed = 9
        duration = "60s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "20ms"
        error-rate = 0.0
        capacity = 10000
        [fleet]
        pods = 1
        rate = 100
        timeout = "2s"
        [[incidents]]
        kind = "hang"
        start = "10s"
        duration = "50s"
        [breakers.instances.consecutive]
        adaptive = false
    "#;
    let scenario = Scenario::from_toml(text, "hang").unwrap();
    let lab = Lab::run(&scenario);
    let m: &Metrics = &lab.metrics[0];
    // The first hung call fails at 10 s + 2 s; the fifth consecutive failure a few calls later.
    let trip = m.time_to_trip.expect("the hang trips the breaker");
    assert!(trip >= Duration::from_secs(2), "{trip:?}");
    assert!(trip < Duration::from_millis(2_200), "{trip:?}");
    // Calls started before the trip were all admitted and all time out.
    assert!(m.counts.attempts_timed_out >= 190, "{:?}", m.counts);
    assert_eq!(m.counts.attempts_failed, 0);
}

#[test]
fn probes_per_pod_never_exceed_the_half_open_limit() {
    let scenario = small(3);
    let lab = Lab::run(&scenario);
    for run in &lab.runs {
        let max = cutout_lab::report::max_in_window(&run.probe_times, 1);
        assert!(max <= 10, "{}: {max} probes at one instant", run.setting);
    }
}

#[test]
fn the_shipped_scenarios_read_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let scenario = Scenario::load(&path).unwrap();
            assert!(scenario.settings.len() >= 2, "{}", path.display());
            names.push(scenario.name);
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "brownout",
            "capacity-recovery",
            "healthy-0.1rps",
            "healthy-10rps",
            "healthy-1rps",
            "noisy",
            "outage-fleet"
        ]
    );
}
