//! The caller-side models do what they claim: a saturated pod's calls take the episode's
//! delay (in what the breaker measures and against the timeout), a new connection's setup is
//! paid by the calls that open one and by no other, the pool's idle timeout reaps, phases
//! shape the traffic, and a mistake in these sections is refused with its `LAB-CFG` code.

use std::time::Duration;

use cutout_lab::connections::{Checkout, Connections, ConnectionsSpec};
use cutout_lab::saturation::Saturation;
use cutout_lab::{Lab, Metrics, Run, Scenario};

/// A lab's runs, metrics and table, kept past its scenario.
struct Out {
    runs: Vec<Run>,
    metrics: Vec<Metrics>,
    table: String,
}

fn run(scenario: Scenario) -> Out {
    let lab = Lab::run(&scenario);
    Out {
        table: lab.table(),
        runs: lab.runs,
        metrics: lab.metrics,
    }
}

/// A fleet of `pods` pods at `rate` req/s against a dependency that always takes exactly
/// 10 ms and never fails, with room to spare; `extra` is appended (sections, settings).
fn scenario(pods: u32, rate: f64, timeout: &str, extra: &str) -> Scenario {
    let text = format!(
        r#"
        seed = 3
        duration = "2m"

        [dependency]
        latency-median = "10ms"
        latency-p99 = "10ms"
        error-rate = 0
        capacity = 100000

        [fleet]
        pods = {pods}
        rate = {rate}
        timeout = "{timeout}"

        {extra}
        "#
    );
    Scenario::from_toml(&text, "caller-side").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A saturation that is on all run long after its first nanosecond, with a fixed delay.
fn always_saturated(delay: &str, pods: Option<u32>) -> String {
    let pods = pods.map_or(String::new(), |n| format!("pods = {n}\n"));
    format!(
        "[saturation]\n{pods}every = \"1ns\"\nlength = \"150h\"\n\
         delay-median = \"{delay}\"\ndelay-p99 = \"{delay}\"\ndelay-max = \"{delay}\"\n"
    )
}

const NO_TRIP_SETTING: &str = "[breakers.instances.plain]\nadaptive = false\n";

#[test]
fn a_saturated_pods_calls_take_the_episodes_delay() {
    let plain = scenario(2, 5.0, "1s", NO_TRIP_SETTING);
    let hot = scenario(
        2,
        5.0,
        "1s",
        &format!("{}{NO_TRIP_SETTING}", always_saturated("20ms", None)),
    );
    let (plain, hot) = (run(plain), run(hot));
    for (p, h) in plain.runs.iter().zip(&hot.runs) {
        let (p, h) = (p.counts, h.counts);
        assert_eq!(p.requests, h.requests, "the same requests arrive");
        assert!(p.requests > 1_000, "{}", p.requests);
        assert_eq!(h.requests_ok, h.requests, "a delay of 20 ms fails nothing");
        // Every request takes exactly 20 ms longer, and nothing else changes.
        assert_eq!(
            h.latency_total_us,
            p.latency_total_us + 20_000 * p.requests,
            "{p:?}\n{h:?}"
        );
        assert_eq!(h.attempts_slowed_by_caller, h.admitted);
        assert_eq!(p.attempts_slowed_by_caller, 0);
    }
}

#[test]
fn the_breaker_measures_the_callers_delay() {
    // An absolute slow threshold of 25 ms: a 10 ms dependency is never slow, 10 ms + 20 ms
    // of the pod's own delay always is, in the duration the breaker times itself.
    let threshold = "[breakers.instances.slow]\nadaptive = false\nslow-call-threshold = \"25ms\"\n";
    let plain = run(scenario(1, 5.0, "1s", threshold));
    let hot = run(scenario(
        1,
        5.0,
        "1s",
        &format!("{}{threshold}", always_saturated("20ms", None)),
    ));
    assert_eq!(plain.metrics[1].trips, 0);
    assert!(hot.metrics[1].trips > 0, "{:?}", hot.metrics[1].reasons);
    assert!(
        hot.metrics[1].reasons.contains_key("slow_call_ratio"),
        "{:?}",
        hot.metrics[1].reasons
    );
}

#[test]
fn the_callers_delay_counts_against_its_timeout() {
    // 10 ms of dependency + 20 ms of the pod's own delay pass a 25 ms timeout.
    let plain = run(scenario(1, 5.0, "25ms", NO_TRIP_SETTING));
    let hot = run(scenario(
        1,
        5.0,
        "25ms",
        &format!("{}{NO_TRIP_SETTING}", always_saturated("20ms", None)),
    ));
    let (p, h) = (plain.runs[0].counts, hot.runs[0].counts);
    assert_eq!(p.attempts_timed_out, 0);
    assert_eq!(h.attempts_timed_out, h.admitted);
    assert_eq!(h.requests_ok, 0);
}

#[test]
fn only_the_first_pods_saturate() {
    let hot = run(scenario(
        4,
        5.0,
        "1s",
        &format!("{}{NO_TRIP_SETTING}", always_saturated("20ms", Some(1))),
    ));
    let c = hot.runs[0].counts;
    let share = c.attempts_slowed_by_caller as f64 / c.admitted as f64;
    assert!((0.2..0.3).contains(&share), "{share}: one pod of four");
}

#[test]
fn episodes_keep_their_means_and_one_delay_each() {
    let text = "[saturation]\nevery = \"90s\"\nlength = \"10s\"\ndelay-median = \"10ms\"\n\
                delay-p99 = \"30ms\"\ndelay-max = \"40ms\"\n";
    let spec = scenario(1, 1.0, "1s", &format!("{text}{NO_TRIP_SETTING}"))
        .saturation
        .unwrap();
    let mut s = Saturation::new(spec, 1, 11);
    // 100 hours in steps of 100 ms.
    let step = 100_000_000;
    let steps = 100 * 3600 * 10;
    let (mut saturated, mut previous) = (0u64, 0u64);
    let mut delays = Vec::new();
    for i in 0..steps {
        let d = s.delay_at(0, i * step);
        if d > 0 {
            saturated += 1;
            if d != previous {
                // A new episode (two episodes that touch draw two delays, almost surely
                // not equal).
                delays.push(d);
            }
            assert!(d <= 40_000_000, "{d}: the cap");
        }
        previous = d;
    }
    let share = saturated as f64 / steps as f64;
    assert!((share - 0.1).abs() < 0.01, "{share}: 10 s of every 100 s");
    // 100 hours / 100 s per cycle = 3,600 episodes.
    assert!((3_000..4_200).contains(&delays.len()), "{}", delays.len());
    delays.sort_unstable();
    let median = delays[delays.len() / 2] as f64 / 1e6;
    assert!((median - 10.0).abs() < 0.8, "{median} ms");
    // The cap is reached by some (p99 30 ms: about 0.5% are above 40 ms).
    assert!(delays.contains(&40_000_000));
}

fn pool(idle: &str, setup: &str) -> String {
    format!(
        "[connections]\nidle-timeout = \"{idle}\"\nsetup-median = \"{setup}\"\n\
         setup-p99 = \"{setup}\"\n"
    )
}

#[test]
fn setup_is_paid_only_by_the_calls_that_open_a_connection() {
    let plain = run(scenario(2, 2.0, "1s", NO_TRIP_SETTING));
    // Connections never reaped: only the first calls, and those that overlap another, open
    // one.
    let warm = run(scenario(
        2,
        2.0,
        "1s",
        &format!("{}{NO_TRIP_SETTING}", pool("150h", "5ms")),
    ));
    // Connections reaped at once: every call opens one.
    let cold = run(scenario(
        2,
        2.0,
        "1s",
        &format!("{}{NO_TRIP_SETTING}", pool("1ns", "5ms")),
    ));
    for ((p, w), c) in plain.runs.iter().zip(&warm.runs).zip(&cold.runs) {
        let (p, w, c) = (p.counts, w.counts, c.counts);
        assert_eq!(p.requests, w.requests);
        assert_eq!(p.connections_opened, 0);
        assert!(
            (2..20).contains(&w.connections_opened),
            "{}: one per pod and a few for overlaps",
            w.connections_opened
        );
        assert_eq!(
            w.latency_total_us,
            p.latency_total_us + 5_000 * w.connections_opened,
            "5 ms for each connection opened, nothing for a reused one"
        );
        assert_eq!(c.connections_opened, c.admitted);
        assert_eq!(c.latency_total_us, p.latency_total_us + 5_000 * c.requests);
    }
}

#[test]
fn setup_counts_against_the_timeout() {
    let cold = run(scenario(
        1,
        2.0,
        "12ms",
        &format!("{}{NO_TRIP_SETTING}", pool("1ns", "5ms")),
    ));
    let c = cold.runs[0].counts;
    // 5 ms of setup + 10 ms of service pass a 12 ms timeout.
    assert_eq!(c.attempts_timed_out, c.admitted);
    assert_eq!(c.setups_timed_out, 0, "the setup alone fits");
    let slow = run(scenario(
        1,
        2.0,
        "4ms",
        &format!("{}{NO_TRIP_SETTING}", pool("1ns", "5ms")),
    ));
    let s = slow.runs[0].counts;
    assert_eq!(s.setups_timed_out, s.admitted, "never sent");
}

#[test]
fn the_most_recently_used_connection_is_reused_and_idle_ones_are_reaped() {
    let spec = ConnectionsSpec {
        idle_timeout: Duration::from_secs(8),
        ..ConnectionsSpec::default()
    };
    let s = 1_000_000_000;
    let mut pool = Connections::new(spec, 1, 5);
    // A busy moment: three calls at once open three connections.
    for _ in 0..3 {
        assert!(matches!(pool.checkout(0, 0, 0), Checkout::Opened(_)));
    }
    pool.checkin(0, 0, s);
    pool.checkin(0, 0, 2 * s);
    pool.checkin(0, 0, 5 * s);
    assert_eq!(pool.idle_at(0, 0, 5 * s), 3);
    // At 9.5 s the one idle since 1 s is reaped; the one idle since 5 s is taken first.
    assert_eq!(pool.idle_at(0, 0, 9 * s + s / 2), 2);
    assert_eq!(pool.checkout(0, 0, 9 * s + s / 2), Checkout::Reused);
    assert_eq!(pool.checkout(0, 0, 9 * s + s / 2), Checkout::Reused);
    // The one left has been idle since 1 s: reaped, so the next call opens a connection.
    assert!(matches!(
        pool.checkout(0, 0, 9 * s + s / 2),
        Checkout::Opened(_)
    ));
    assert_eq!(pool.opened(), 4);
    // Another replica has a pool of its own.
    assert!(matches!(pool.checkout(0, 1, 10 * s), Checkout::Opened(_)));
    // After a quiet spell longer than the idle timeout, nothing is left.
    for t in [10, 11, 12] {
        pool.checkin(0, 0, t * s);
    }
    assert_eq!(pool.idle_at(0, 0, 12 * s), 3);
    assert_eq!(pool.idle_at(0, 0, 20 * s), 0);
    assert!(matches!(pool.checkout(0, 0, 20 * s), Checkout::Opened(_)));
}

#[test]
fn light_traffic_after_a_busy_period_finds_the_pool_reaped() {
    // Busy for a minute (200 req/s a pod, several connections warm), then one call every
    // 20 s on average: with a 5 s idle timeout most light calls open a connection and take
    // 13 ms (3 ms setup, 10 ms service); with an idle timeout of an hour none does.
    let phases = "[[phases]]\nduration = \"60s\"\nrate = 200\n\
                  [[phases]]\nduration = \"60s\"\nrate = 0.05\n";
    let one = |idle: &str| {
        run(scenario(
            20,
            1.0,
            "1s",
            &format!("{phases}{}{NO_TRIP_SETTING}", pool(idle, "3ms")),
        ))
        .runs
        .swap_remove(0)
    };
    let (reaped, kept) = (one("5s"), one("1h"));
    assert_eq!(reaped.counts.requests, kept.counts.requests);
    // The light minute's seconds (after the busy minute's last calls have ended), by the
    // median latency of the requests that ended in them.
    let medians = |r: &Run| -> Vec<u32> {
        r.timeline[62..120]
            .iter()
            .filter(|s| s.ended > 0)
            .map(|s| s.latency_p50_us)
            .collect()
    };
    let (cold, warm) = (medians(&reaped), medians(&kept));
    assert!(cold.len() >= 20, "{cold:?}");
    assert!(warm.iter().all(|&m| m == 10_000), "{warm:?}");
    let paid = cold.iter().filter(|&&m| m == 13_000).count();
    // P(a gap of 20 s on average lasts over 5 s) = e^-0.25 = 78%.
    assert!(paid * 2 > cold.len(), "{cold:?}");
    assert!(cold.iter().all(|&m| m == 10_000 || m == 13_000), "{cold:?}");
    assert!(reaped.counts.connections_opened > kept.counts.connections_opened);
}

#[test]
fn phases_set_the_rate_and_bursts_arrive_together() {
    let phases = "[[phases]]\nduration = \"30s\"\nrate = 40\n\
                  [[phases]]\nduration = \"30s\"\nrate = 2\nburst = 10\n";
    let lab = run(scenario(
        10,
        1.0,
        "1s",
        &format!("{phases}{NO_TRIP_SETTING}"),
    ));
    let run = &lab.runs[0];
    // Two cycles of 60 s: 40 req/s then 2 req/s, a pod.
    let expected = 10.0 * 2.0 * (40.0 * 30.0 + 2.0 * 30.0);
    let got = run.counts.requests as f64;
    assert!((got / expected - 1.0).abs() < 0.05, "{got} vs {expected}");
    // Per second: the busy half sends about 20 times the light half.
    let offered = |from: usize, to: usize| -> u64 {
        run.timeline[from..to]
            .iter()
            .map(|s| u64::from(s.offered))
            .sum()
    };
    let busy = offered(0, 30) + offered(60, 90);
    let light = offered(30, 60) + offered(90, 120);
    let ratio = busy as f64 / light as f64;
    assert!((14.0..28.0).contains(&ratio), "{ratio}");
    // The light halves' requests come ten at a time, all in the same instant (no error, no
    // retry: a second's attempts are whole bursts).
    for (i, s) in run.timeline[30..60]
        .iter()
        .chain(&run.timeline[90..120])
        .enumerate()
    {
        assert_eq!(
            s.offered % 10,
            0,
            "second {i} of the light halves: {}",
            s.offered
        );
    }
}

#[test]
fn trips_per_100_pod_hours_are_the_false_trips_over_the_pod_hours() {
    // 5 pods for 2 minutes whose calls always pass an absolute slow threshold through
    // their own delay: every trip is on a healthy dependency.
    let threshold = "[breakers.instances.slow]\nadaptive = false\nslow-call-threshold = \"25ms\"\n";
    let lab = run(scenario(
        5,
        20.0,
        "1s",
        &format!("{}{threshold}", always_saturated("20ms", None)),
    ));
    let m = &lab.metrics[1];
    assert!(m.false_trips > 0);
    let pod_hours = 5.0 * 120.0 / 3600.0;
    let expected = f64::from(m.false_trips) / pod_hours * 100.0;
    assert!((m.false_trips_per_100_pod_hours - expected).abs() < 1e-9);
    let row = lab
        .table
        .lines()
        .find(|l| l.starts_with("trips on a healthy dependency per 100 pod-hours"))
        .map(str::to_owned)
        .expect("the row");
    let shown = if expected.fract() == 0.0 {
        format!("{expected:.0}")
    } else if expected >= 1.0 {
        format!("{expected:.1}")
    } else {
        format!("{expected:.3}")
    };
    // The setting's cell, before the oracle's (the last column).
    let cell = row.split_whitespace().rev().nth(1);
    assert_eq!(cell, Some(shown.as_str()), "{row}");
}

/// The error of a scenario with `extra` appended.
fn refused(extra: &str) -> String {
    let text = format!(
        "seed = 1\nduration = \"1m\"\n[dependency]\nlatency-median = \"10ms\"\n\
         latency-p99 = \"20ms\"\nerror-rate = 0\ncapacity = 1000\n[fleet]\npods = 2\nrate = 1\n\
         timeout = \"1s\"\n[breakers.instances.a]\n{extra}"
    );
    Scenario::from_toml(&text, "bad").expect_err(extra)
}

#[test]
fn mistakes_in_the_caller_side_sections_are_refused_with_codes() {
    // Line 13 is the first line of `extra`.
    let e = refused("[connections]\nidle-timout = \"5s\"\n");
    assert!(e.contains("LAB-CFG-001"), "{e}");
    assert!(e.contains("did you mean idle-timeout?"), "{e}");
    assert!(e.contains("line 14, column 1"), "{e}");
    let e = refused("[saturation]\ncolour = 1\n");
    assert!(
        e.contains("LAB-CFG-001") && e.contains("the keys are pods, every"),
        "{e}"
    );
    let e = refused("[connections]\nsetup-median = \"3 soon\"\n");
    assert!(e.contains("LAB-CFG-002"), "{e}");
    assert!(
        e.contains("connections.setup-median = \"3 soon\": invalid duration"),
        "{e}"
    );
    assert!(e.contains("line 14, column 16"), "{e}");
    let e = refused("[connections]\nsetup-median = 3\n");
    assert!(
        e.contains("LAB-CFG-002") && e.contains("needs a duration"),
        "{e}"
    );
    let e = refused("[saturation]\ndelay-median = \"10ms\"\ndelay-p99 = \"5ms\"\n");
    assert!(e.contains("LAB-CFG-003"), "{e}");
    assert!(e.contains("saturation.delay-p99 = 5ms is below"), "{e}");
    let e = refused("[saturation]\ndelay-max = \"1ms\"\n");
    assert!(e.contains("LAB-CFG-003") && e.contains("delay-max"), "{e}");
    let e = refused("[saturation]\npods = 3\n");
    assert!(
        e.contains("LAB-CFG-003") && e.contains("at most fleet.pods = 2"),
        "{e}"
    );
    let e = refused("[saturation]\npods = -1\n");
    assert!(e.contains("LAB-CFG-002"), "{e}");
    let e = refused("[saturation]\nevery = \"0s\"\n");
    assert!(
        e.contains("LAB-CFG-003") && e.contains("saturation.every must be above 0"),
        "{e}"
    );
    let e = refused("[saturation]\nevery = \"1ns\"\nlength = \"1ns\"\n");
    assert!(
        e.contains("LAB-CFG-003") && e.contains("episodes expected"),
        "{e}"
    );
    let e = refused("[connections]\nidle-timeout = \"0s\"\n");
    assert!(e.contains("LAB-CFG-003"), "{e}");
    let e = refused("[[phases]]\nrate = 5\n");
    assert!(
        e.contains("LAB-CFG-004") && e.contains("no duration"),
        "{e}"
    );
    let e = refused("[[phases]]\nduration = \"10ms\"\n");
    assert!(
        e.contains("LAB-CFG-003") && e.contains("at least 1s"),
        "{e}"
    );
    let e = refused("[[phases]]\nduration = \"1m\"\nburst = 0\n");
    assert!(
        e.contains("LAB-CFG-003") && e.contains("phases.burst = 0"),
        "{e}"
    );
    let e = refused("[[phases]]\nduration = \"1m\"\nrate = \"fast\"\n");
    assert!(
        e.contains("LAB-CFG-002") && e.contains("phases.rate"),
        "{e}"
    );
    let e = refused("[[phases]]\nduration = \"1m\"\nrate = 0\n");
    assert!(
        e.contains("LAB-CFG-003") && e.contains("send nothing"),
        "{e}"
    );
    let e = refused("[[phases]]\nduration = \"1m\"\nrte = 1\n");
    assert!(
        e.contains("LAB-CFG-001") && e.contains("did you mean rate?"),
        "{e}"
    );
}

#[test]
fn without_the_sections_no_call_pays_anything_on_the_callers_side() {
    let lab = run(scenario(2, 5.0, "1s", NO_TRIP_SETTING));
    for run in &lab.runs {
        assert_eq!(run.counts.attempts_slowed_by_caller, 0);
        assert_eq!(run.counts.connections_opened, 0);
    }
    let table = &lab.table;
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("connections opened") && l.trim_end().ends_with("off")),
        "{table}"
    );
}

/// A shipped scenario cut to `pods` pods and `minutes` of simulated time (its dependency,
/// traffic shape, caller-side models and settings unchanged).
fn shipped(name: &str, pods: u32, minutes: u64) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"));
    let mut scenario = Scenario::load(&path).unwrap();
    scenario.traffic.pods = pods;
    scenario.duration = Duration::from_secs(60 * minutes);
    scenario
}

/// The defaults' trips on a healthy dependency in `scenario`, with the reasons, for the
/// message.
fn false_trips(scenario: Scenario) -> (u32, String) {
    let lab = run(scenario);
    let m = &lab.metrics[1];
    assert_eq!(lab.metrics[0].trips, 0, "no breaker, no trip");
    assert_eq!(m.trips_overloaded + m.trips_after_incident, 0);
    (m.false_trips, format!("{:?}", m.reasons))
}

#[test]
fn the_defaults_never_trip_on_a_healthy_dependency_whose_callers_saturate() {
    // caller-saturation.toml, 20 pods for 20 minutes (6.7 pod-hours, ~40 episodes).
    let (trips, reasons) = false_trips(shipped("caller-saturation", 20, 20));
    assert_eq!(
        trips, 0,
        "the callers' saturation opened breakers: {reasons}"
    );
}

#[test]
fn the_defaults_never_trip_on_a_healthy_dependency_reached_over_fresh_connections() {
    // fresh-connections.toml, 20 pods for two of its 10-minute cycles.
    let (trips, reasons) = false_trips(shipped("fresh-connections", 20, 20));
    assert_eq!(
        trips, 0,
        "new connections' setup opened breakers: {reasons}"
    );
}

#[test]
fn extreme_values_in_bounds_run_without_panicking() {
    // The widest distributions and the slowest phase the bounds allow: draws near u64::MAX
    // saturate (a setup past the timeout is a timeout), a phase that sends almost nothing
    // hands over to the next.
    let extra = "[saturation]\nevery = \"1ms\"\nlength = \"7days\"\ndelay-median = \"1ns\"\n\
                 delay-p99 = \"7days\"\ndelay-max = \"7days\"\n\
                 [connections]\nidle-timeout = \"1ns\"\nsetup-median = \"1ns\"\n\
                 setup-p99 = \"7days\"\n\
                 [[phases]]\nduration = \"1s\"\nrate = 1e-300\n\
                 [[phases]]\nduration = \"7days\"\nrate = 50\nburst = 10000\n";
    let lab = run(scenario(2, 1.0, "1s", &format!("{extra}{NO_TRIP_SETTING}")));
    for r in &lab.runs {
        let c = r.counts;
        assert!(c.requests > 0);
        assert_eq!(c.requests_unfinished, 0);
        // A connection given back is taken again at the same nanosecond (its idle time, 0,
        // is below 1 ns), so fewer are opened than attempts admitted.
        assert!((1..=c.admitted).contains(&c.connections_opened), "{c:?}");
    }
}
