//! A hostile review of `cutout-lab fit` and `latency-quantiles`: records an SRE could hand
//! it whose fitted scenario does not load, or reads back a figure the record does not have.
//! Every test but those marked PASSES fails against the code it was written against.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{Dir, normal};
use cutout_lab::Scenario;
use cutout_lab::dependency::service::ServiceTime;
use cutout_lab::fit::{self, Fitted, Options};
use cutout_lab::record::{Record, Shape};
use cutout_lab::replay::Candidate;

/// 2026-12-04T10:00:00Z, in seconds since the Unix epoch.
const T0: f64 = 1_796_378_400.0;

/// One call of a CSV record: start offset (s), duration (s), ok, host.
type Call = (f64, f64, bool, u32);

fn csv(calls: &[Call]) -> String {
    let mut text = String::from("timestamp,duration,outcome,host\n");
    for &(t, d, ok, host) in calls {
        text += &format!(
            "{:.6},{},{},h{host}\n",
            T0 + t,
            d * 1e3, // plain milliseconds, full precision
            if ok { "ok" } else { "error" }
        );
    }
    text
}

/// Poisson arrivals at `rate(t)` over `seconds`, each answered by `answer`, on `hosts` hosts.
fn poisson(
    seconds: f64,
    rate: &dyn Fn(f64) -> f64,
    hosts: u32,
    answer: &dyn Fn(f64, &mut fastrand::Rng) -> (f64, bool),
    seed: u64,
) -> Vec<Call> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut calls = Vec::new();
    let mut t = 0.0;
    // Thinning, so a rate of 0 (silence) is allowed.
    let most = (0..(seconds as u64 + 1))
        .map(|s| rate(s as f64))
        .fold(0.0, f64::max);
    loop {
        t += -(1.0 - rng.f64()).ln() / most;
        if t >= seconds {
            return calls;
        }
        if rng.f64() * most >= rate(t) {
            continue;
        }
        let (d, ok) = answer(t, &mut rng);
        calls.push((t, d, ok, rng.u32(1..=hosts)));
    }
}

/// Fits a CSV `text` through the library, as the command line does.
fn fit_with(text: &str, name: &str, source: &str, options: &Options) -> Result<Fitted, String> {
    let open = || Record::new(text.as_bytes(), Shape::Csv, None);
    fit::fit(
        &mut open(),
        || Ok(open()),
        name,
        source,
        &Candidate::shipped(Shape::Csv),
        options,
    )
}

fn fitted(text: &str) -> Fitted {
    fit_with(text, "calls", "calls.csv", &Options::default()).expect("the record fits")
}

fn table(f: &Fitted) -> toml::Table {
    toml::from_str(&f.scenario).unwrap_or_else(|e| panic!("{e}\n{}", f.scenario))
}

fn secs(v: &toml::Value) -> f64 {
    humantime::parse_duration(v.as_str().unwrap())
        .unwrap()
        .as_secs_f64()
}

/// The `latency-quantiles` list as written: (probability, duration text).
fn points(t: &toml::Table) -> Vec<(f64, String)> {
    t["dependency"]["latency-quantiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let p = p.as_array().unwrap();
            (p[0].as_float().unwrap(), p[1].as_str().unwrap().to_owned())
        })
        .collect()
}

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .args(args)
        .output()
        .unwrap()
}

fn healthy(_: f64, rng: &mut fastrand::Rng) -> (f64, bool) {
    (0.020 * (0.4 * normal(rng)).exp(), true)
}

// ---------------------------------------------------------------------------------------
// Fitted scenarios the lab refuses.

/// A job that calls its dependency three times a day (every 12 h): the mean rate,
/// 3 / 86,401 s = 3.5e-5, is written with 4 decimals as `rate = 0.0000`, which the lab
/// refuses ("fleet.rate = 0: needs a rate above 0").
#[test]
fn a_sparse_record_fits_a_fleet_rate_the_lab_accepts() {
    let calls: Vec<Call> = (0..3)
        .map(|i| (i as f64 * 43_200.0, 0.02, true, 1))
        .collect();
    let f = fit_with(
        &csv(&calls),
        "cron",
        "cron.csv",
        &Options {
            phase: 3_600_000_000_000,
            ..Options::default()
        },
    )
    .unwrap();
    let rate = table(&f)["fleet"]["rate"].as_float().unwrap();
    assert!(rate > 0.0, "fleet.rate = {rate}\n{}", f.scenario);
    Scenario::from_toml(&f.scenario, "cron").unwrap();
}

/// Ten minutes of ordinary traffic and one success that took 55 minutes (a stuck call that
/// finally returned; records hold calls up to a day). The timeout is written as 1.2 × the
/// slowest call, 3,960 s, past the lab's bound on a timeout (1 h): the scenario is refused.
#[test]
fn a_call_of_55_minutes_does_not_make_the_scenario_unloadable() {
    let mut calls = poisson(600.0, &|_| 10.0, 3, &healthy, 1);
    calls.push((300.05, 55.0 * 60.0, true, 1));
    calls.sort_by(|a, b| a.0.total_cmp(&b.0));
    let f = fitted(&csv(&calls));
    let loaded = Scenario::from_toml(&f.scenario, "calls");
    assert!(loaded.is_ok(), "{}\n{}", loaded.unwrap_err(), f.scenario);
}

/// 2,000 calls a second for 5 s to a dependency that takes a minute (a long poll): the
/// fitted capacity, ten times the busiest second (about 21,000), times the mean service
/// time (60 s) is about 1.26 million calls in service, past the model's 1,000,000 workers:
/// the scenario `fit` chose the capacity for is refused.
#[test]
fn a_busy_slow_dependency_gets_a_capacity_the_lab_can_hold() {
    let calls = poisson(
        5.0,
        &|_| 2000.0,
        2,
        &|_, rng| (60.0 * (0.05 * normal(rng)).exp(), true),
        2,
    );
    let f = fitted(&csv(&calls));
    let loaded = Scenario::from_toml(&f.scenario, "calls");
    assert!(
        loaded.is_ok(),
        "{}\n{}",
        loaded.unwrap_err(),
        f.scenario.lines().take(40).collect::<Vec<_>>().join("\n")
    );
}

/// A low-rate service (1 call a second, 2,000 calls of about 1 ms) with one 30 s straggler:
/// capacity is 10 × the busiest second (6) = 60, floored at replicas / mean service time;
/// but `fit` takes that floor from the trapezoid mean of its points (linear between them,
/// ~17 ms: floor 57) while the lab integrates them log-linearly (6.8 ms): 60 × 6.8 ms =
/// 0.41 workers, under the lab's 0.5, and the scenario is refused (it needs 73.2).
#[test]
fn one_straggler_in_a_low_rate_record_does_not_make_the_scenario_unloadable() {
    let mut calls = poisson(
        2000.0,
        &|_| 1.0,
        1,
        &|_, rng| (0.001 * (0.2 * normal(rng)).exp(), true),
        3,
    );
    let at = calls[1000].0 + 1e-3;
    calls.insert(1001, (at, 30.0, true, 1));
    let f = fitted(&csv(&calls));
    let loaded = Scenario::from_toml(&f.scenario, "calls");
    assert!(loaded.is_ok(), "{}\n{}", loaded.unwrap_err(), f.scenario);
}

/// Recorded on Windows: the source path goes into `description = "fitted from …"`, a TOML
/// basic string, with its backslashes unescaped (`\l` is no TOML escape): the file does not
/// parse.
#[test]
fn a_windows_path_gives_a_scenario_that_parses() {
    let text = csv(&poisson(120.0, &|_| 10.0, 1, &healthy, 4));
    let f = fit_with(&text, "calls", r"C:\logs\calls.csv", &Options::default()).unwrap();
    let loaded = Scenario::from_toml(&f.scenario, "calls");
    assert!(
        loaded.is_ok(),
        "{}\n{}",
        loaded.unwrap_err(),
        f.scenario.lines().take(6).collect::<Vec<_>>().join("\n")
    );
}

/// A record named in decomposed Unicode (`cafe` + U+0301, as macOS writes `café`): the
/// name is written with Rust's `{:?}`, which escapes the combining accent as `\u{301}`, no
/// TOML escape: the file does not parse.
#[test]
fn a_record_named_with_a_combining_accent_gives_a_scenario_that_parses() {
    let dir = Dir::new("fit-review-nfd");
    let log = dir.0.join("cafe\u{301}.csv");
    std::fs::write(&log, csv(&poisson(120.0, &|_| 10.0, 1, &healthy, 5))).unwrap();
    let out_path = dir.0.join("fitted.toml");
    let out = lab(&[
        "fit",
        log.to_str().unwrap(),
        "--out",
        out_path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&out_path).unwrap();
    let loaded = Scenario::from_toml(&text, "fitted");
    assert!(
        loaded.is_ok(),
        "{}\n{}",
        loaded.unwrap_err(),
        text.lines().take(6).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(loaded.unwrap().name, "cafe\u{301}");
}

// ---------------------------------------------------------------------------------------
// Figures fitted wrongly.

/// 15% of calls fail all along, and 70% in a 2-minute error spike (bins found with
/// `--incident-errors 30%`). The lab composes the spike's `error-rate` with the base as
/// independent causes, 1 − (1 − base)(1 − extra), but `fit` writes `share − base` (0.55):
/// the lab's spike fails 1 − 0.85 × 0.45 = 62% of calls, not the 70% recorded.
#[test]
fn an_error_spike_reproduces_the_recorded_failure_share() {
    let calls = poisson(
        900.0,
        &|_| 30.0,
        1,
        &|t, rng| {
            let p = if (300.0..420.0).contains(&t) {
                0.7
            } else {
                0.15
            };
            (0.020 * (0.3 * normal(rng)).exp(), rng.f64() >= p)
        },
        6,
    );
    let f = fit_with(
        &csv(&calls),
        "spike",
        "spike.csv",
        &Options {
            incident_errors: 0.3,
            ..Options::default()
        },
    )
    .unwrap();
    let t = table(&f);
    let base = t["dependency"]["error-rate"].as_float().unwrap();
    let incidents = t["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{}", f.scenario);
    assert_eq!(incidents[0]["kind"].as_str(), Some("error-spike"));
    let extra = incidents[0]["error-rate"].as_float().unwrap();
    let recorded = f.incidents[0].failures as f64 / f.incidents[0].calls as f64;
    let lab = 1.0 - (1.0 - base) * (1.0 - extra);
    assert!(
        (lab - recorded).abs() < 0.02,
        "the lab's spike fails {lab:.3} of calls (base {base:.3}, extra {extra:.3}); the \
         record's {recorded:.3}"
    );
}

/// Poisson arrivals, no bunches at all: 20 calls a second that step to 60 at 7.5 minutes
/// (mid-phase), and 30 a second with 2 minutes of silence inside the third phase. The burst
/// is the per-second counts' variance over their mean, which a rate change within the phase
/// inflates: `burst = 11` and `burst = 13` are written, and the lab sends bunches the
/// record never had.
#[test]
fn poisson_arrivals_are_not_fitted_as_bursts_when_the_rate_steps_or_stops_within_a_phase() {
    let step = poisson(
        1200.0,
        &|t| if t < 450.0 { 20.0 } else { 60.0 },
        1,
        &healthy,
        7,
    );
    let gap = poisson(
        900.0,
        &|t| {
            if (660.0..780.0).contains(&t) {
                0.0
            } else {
                30.0
            }
        },
        1,
        &healthy,
        8,
    );
    let fitted_bursts: Vec<(&str, Vec<i64>)> =
        [("a step at 450 s", step), ("silence 660-780 s", gap)]
            .into_iter()
            .map(|(what, calls)| {
                let f = fitted(&csv(&calls));
                let bursts = table(&f)["phases"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        p.get("burst")
                            .and_then(toml::Value::as_integer)
                            .unwrap_or(1)
                    })
                    .collect();
                (what, bursts)
            })
            .collect();
    assert!(
        fitted_bursts.iter().all(|(_, b)| b.iter().all(|&b| b <= 2)),
        "Poisson arrivals fitted with bursts: {fitted_bursts:?}"
    );
}

/// A 30-second outage (every call fails fast) from 305 s to 335 s, across four 10 s bins:
/// the incident's bins run from 300 s to 340 s, so only 75% of its calls failed, under the
/// 90% an `outage` needs, and a plain outage is written as a 40-second `error-spike` of 74%.
#[test]
fn a_short_outage_across_bin_edges_is_fitted_as_an_outage() {
    let calls = poisson(
        900.0,
        &|_| 20.0,
        1,
        &|t, rng| {
            if (305.0..335.0).contains(&t) {
                (0.001, false)
            } else {
                healthy(t, rng)
            }
        },
        18,
    );
    let f = fitted(&csv(&calls));
    let t = table(&f);
    let incidents = t["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{}", f.scenario);
    assert_eq!(
        incidents[0]["kind"].as_str(),
        Some("outage"),
        "{}",
        toml::to_string(&incidents[0]).unwrap()
    );
}

/// The caller's timeout is 250 ms, and a one-minute hang shows as calls that failed at
/// 250 ms. The docs promise "a timeout a little over the slowest call recorded"; the timeout
/// is rounded up to whole seconds and at least 1 s, so it is written as 1 s, 4× the real
/// one, and the lab's hung calls hold the caller 4× as long as the record's did.
#[test]
fn the_timeout_is_a_little_over_the_slowest_call() {
    let calls = poisson(
        600.0,
        &|_| 20.0,
        1,
        &|t, rng| {
            if (300.0..360.0).contains(&t) {
                (0.250, false)
            } else {
                (0.010 * (0.2 * normal(rng)).exp(), true)
            }
        },
        9,
    );
    let f = fitted(&csv(&calls));
    let t = table(&f);
    assert_eq!(
        t["incidents"][0]["kind"].as_str(),
        Some("hang"),
        "{}",
        f.scenario
    );
    let timeout = secs(&t["fleet"]["timeout"]);
    assert!(
        (0.25..=0.25 * 1.5).contains(&timeout),
        "slowest call 250 ms, fitted timeout {timeout} s"
    );
}

/// With `--bin 1500ms` the replay finds an outage from 4.5 s to 9 s; `fit` writes its start
/// and duration in whole seconds, truncated: `start = "4s"`, `duration = "4s"`.
#[test]
fn an_incident_in_sub_second_bins_keeps_the_replays_start_and_duration() {
    let calls = poisson(
        30.0,
        &|_| 40.0,
        1,
        &|t, rng| {
            if (4.5..9.0).contains(&t) {
                (0.001, false)
            } else {
                healthy(t, rng)
            }
        },
        10,
    );
    let f = fit_with(
        &csv(&calls),
        "bins",
        "bins.csv",
        &Options {
            bin: 1_500_000_000,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(f.incidents.len(), 1, "{:?}", f.incidents);
    let found = &f.incidents[0];
    assert_eq!((found.start, found.end), (4_500_000_000, 9_000_000_000));
    let t = table(&f);
    let written = &t["incidents"][0];
    let (start, duration) = (secs(&written["start"]), secs(&written["duration"]));
    assert_eq!(
        (start, duration),
        (4.5, 4.5),
        "the replay's incident is 4.5 s to 9 s; fit wrote start {start} s, duration \
         {duration} s"
    );
}

/// `--phase 1500ms` was in the documented range (1 s to 1 h) but written as 1 s phases,
/// twice as many as asked; a phase is now whole seconds, and any other is refused by name.
#[test]
fn a_phase_of_1500ms_is_refused_not_written_as_1s_phases() {
    let calls = poisson(30.0, &|_| 10.0, 1, &healthy, 11);
    let refused = fit_with(
        &csv(&calls),
        "phases",
        "phases.csv",
        &Options {
            phase: 1_500_000_000,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(refused.contains("whole seconds"), "{refused}");
    let f = fit_with(
        &csv(&calls),
        "phases",
        "phases.csv",
        &Options {
            phase: 2_000_000_000,
            ..Options::default()
        },
    )
    .unwrap();
    let t = table(&f);
    let durations: Vec<f64> = t["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| secs(&p["duration"]))
        .collect();
    assert!(
        durations[..durations.len() - 1].iter().all(|&d| d == 2.0),
        "--phase 2s wrote phases of {durations:?} s"
    );
}

/// The successes' mean is what sizes the workers (c = capacity × mean service time) and the
/// queueing: 20,000 calls of about 1 ms and 10 of 10 s (0.05%: a GC pause, a cold cache)
/// have a mean of 6 ms, and the fitted 19 points, integrated as the lab draws them, give
/// under half of it: the tail past p99 is not kept where it counts.
#[test]
fn the_fitted_service_time_keeps_the_records_mean() {
    let mut rng = fastrand::Rng::with_seed(12);
    let mut calls: Vec<Call> = (0..20_000)
        .map(|i| {
            let d = 0.001 * (0.2 * normal(&mut rng)).exp();
            (i as f64 * 0.05, d, true, 1)
        })
        .collect();
    for k in 0..10 {
        calls[1000 + k * 1900].1 = 10.0;
    }
    let mean = calls.iter().map(|c| c.1).sum::<f64>() / calls.len() as f64;
    let f = fitted(&csv(&calls));
    let service = ServiceTime::quantiles(&points(&table(&f))).unwrap();
    let lab = service.mean_secs();
    assert!(
        (lab / mean - 1.0).abs() < 0.25,
        "the record's mean success {:.2} ms, the fitted distribution's {:.2} ms",
        mean * 1e3,
        lab * 1e3
    );
}

/// A sidecar answering in 300 ns: every point is written in whole microseconds, at least
/// 1 us, so the fitted service time is 3.3× the recorded one.
#[test]
fn sub_microsecond_latencies_are_fitted_as_recorded() {
    let calls = poisson(
        60.0,
        &|_| 50.0,
        1,
        &|_, rng| (300e-9 * (0.1 * normal(rng)).exp(), true),
        13,
    );
    let f = fitted(&csv(&calls));
    let service = ServiceTime::quantiles(&points(&table(&f))).unwrap();
    let median = service.nanos(0.0);
    assert!(
        (median / 300.0 - 1.0).abs() < 0.1,
        "recorded median 300 ns, fitted {median} ns: {:?}",
        points(&table(&f))
    );
}

// ---------------------------------------------------------------------------------------
// latency-quantiles: checking and drawing.

/// `nan` is a TOML float. `[nan, "2ms"]` between `[0.0, …]` and `[1.0, …]` passes the
/// "probabilities rising" check (every comparison with NaN is false), the scenario loads
/// with a NaN mean service time, and the run panics in `Duration::from_secs_f64(NaN)`
/// (`Dependency::mean_service`, called by the report).
#[test]
fn a_nan_probability_in_latency_quantiles_is_refused() {
    let text = r#"
name = "nan"
seed = 1
duration = "10s"

[dependency]
latency-quantiles = [[0.0, "1ms"], [nan, "2ms"], [1.0, "3ms"]]
error-rate = 0.0
capacity = 1000

[fleet]
pods = 1
rate = 10
timeout = "1s"

[breakers.instances.defaults]
"#;
    let points = vec![
        (0.0, "1ms".to_owned()),
        (f64::NAN, "2ms".to_owned()),
        (1.0, "3ms".to_owned()),
    ];
    let service = ServiceTime::quantiles(&points);
    let loaded = Scenario::from_toml(text, "nan");
    // What the lab does with it: run the scenario.
    let dir = Dir::new("fit-review-nan");
    let path = dir.0.join("nan.toml");
    std::fs::write(&path, text).unwrap();
    let out = lab(&[path.to_str().unwrap()]);
    assert!(
        service.is_err() && loaded.is_err(),
        "accepted: {service:?}; the run exits {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .find(|l| l.contains("panicked") || l.contains("NaN"))
            .unwrap_or("")
    );
}

// ---------------------------------------------------------------------------------------
// PASSES: what was checked and holds.

/// PASSES. A record of one call, and one shorter than a phase with a 20-minute silence in
/// it, fit to scenarios that load, whose phases sum to the scenario's duration.
#[test]
fn passes_a_record_of_one_call_and_a_gappy_record_load_with_phases_summing_to_the_duration() {
    let one = csv(&[(0.0, 0.012, true, 1)]);
    let mut gappy = poisson(100.0, &|_| 5.0, 2, &healthy, 14);
    gappy.extend(
        poisson(200.0, &|_| 5.0, 2, &healthy, 15)
            .into_iter()
            .map(|c| (c.0 + 1300.0, c.1, c.2, c.3)),
    );
    for text in [one, csv(&gappy)] {
        let f = fitted(&text);
        let loaded = Scenario::from_toml(&f.scenario, "calls").unwrap();
        let t = table(&f);
        let sum: f64 = t["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| secs(&p["duration"]))
            .sum();
        assert_eq!(
            Duration::from_secs_f64(sum),
            loaded.duration,
            "{}",
            f.scenario
        );
    }
}

/// PASSES. Three thousand hosts: one replica each, and the scenario loads.
#[test]
fn passes_thousands_of_hosts_fit_one_replica_each_and_load() {
    let calls = poisson(600.0, &|_| 100.0, 3000, &healthy, 16);
    let f = fitted(&csv(&calls));
    let loaded = Scenario::from_toml(&f.scenario, "calls").unwrap();
    let hosts: std::collections::HashSet<u32> = calls.iter().map(|c| c.3).collect();
    assert_eq!(loaded.dependency.replicas() as usize, hosts.len());
}

/// PASSES. The lab's mean of a heavy-tailed `latency-quantiles` list (its log-linear
/// integral) is the mean of its draws, and Φ is accurate enough that the draws' quantiles
/// sit at the listed points, out to p99.99.
#[test]
fn passes_the_integrated_mean_is_the_draws_mean_for_a_heavy_tail() {
    let list: Vec<(f64, String)> = [
        (0.0, "100us"),
        (0.5, "1ms"),
        (0.9, "3ms"),
        (0.99, "20ms"),
        (0.999, "200ms"),
        (0.9999, "2s"),
        (1.0, "30s"),
    ]
    .iter()
    .map(|(p, d)| (*p, (*d).to_owned()))
    .collect();
    let s = ServiceTime::quantiles(&list).unwrap();
    let mut rng = fastrand::Rng::with_seed(17);
    let n = 2_000_000;
    let mut draws: Vec<f64> = (0..n).map(|_| s.nanos(normal(&mut rng))).collect();
    let mean = draws.iter().sum::<f64>() / n as f64 / 1e9;
    assert!(
        (mean / s.mean_secs() - 1.0).abs() < 0.03,
        "{mean} {}",
        s.mean_secs()
    );
    draws.sort_by(f64::total_cmp);
    for (q, want) in [(0.5, 1e6), (0.99, 20e6), (0.999, 200e6), (0.9999, 2e9)] {
        let got = draws[(q * n as f64) as usize];
        assert!((got / want - 1.0).abs() < 0.1, "p{q}: {got} vs {want}");
    }
}
