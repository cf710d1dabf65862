//! `cutout-lab fit`: a scenario fitted to generated records reads back what generated them
//! (the rate phase by phase, bursts, the latency distribution with its second mode and its
//! tail, the error rate, the hosts, the incidents and their kinds), loads as a scenario and
//! runs; and its command line.

mod common;

use common::{Dir, normal};

use std::process::{Command, Output};

use cutout_lab::Scenario;

/// 2026-12-04T10:00:00Z, in seconds since the Unix epoch.
const T0: f64 = 1_796_378_400.0;

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .args(args)
        .output()
        .unwrap()
}

/// How the generated dependency answers at offset `t` (seconds): (duration s, ok).
type Answer = dyn Fn(f64, &mut fastrand::Rng) -> (f64, bool);

/// A CSV record: `bursts` calls at a time, bunches arriving at `rate(t) / bursts` a second,
/// for `seconds`, each answered by `answer`, on hosts h1..h3.
fn record(
    seconds: f64,
    rate: &dyn Fn(f64) -> f64,
    bursts: u32,
    answer: &Answer,
    seed: u64,
) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut text = String::from("timestamp,duration,outcome,host\n");
    let mut t = 0.0;
    loop {
        t += -(1.0 - rng.f64()).ln() / (rate(t) / f64::from(bursts));
        if t >= seconds {
            return text;
        }
        for k in 0..bursts {
            let (duration, ok) = answer(t, &mut rng);
            text += &format!(
                "{:.6},{:.4},{},h{}\n",
                T0 + t + f64::from(k) * 1e-4,
                duration * 1e3,
                if ok { "ok" } else { "error" },
                rng.u32(1..=3)
            );
        }
    }
}

/// Fits `text` (written as `name`) and returns the scenario's text.
fn fit(dir: &Dir, name: &str, text: &str, extra: &[&str]) -> String {
    let log = dir.path(name);
    std::fs::write(&log, text).unwrap();
    let out_path = dir.path("fitted.toml");
    let mut args = vec!["fit", log.as_str(), "--out", out_path.as_str()];
    args.extend(extra);
    let out = lab(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(out_path).unwrap()
}

/// The `[dependency]` table's `latency-quantiles`, as (probability, seconds).
fn quantiles(scenario: &toml::Table) -> Vec<(f64, f64)> {
    scenario["dependency"]["latency-quantiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            let pair = pair.as_array().unwrap();
            let d = humantime::parse_duration(pair[1].as_str().unwrap()).unwrap();
            (pair[0].as_float().unwrap(), d.as_secs_f64())
        })
        .collect()
}

fn at(points: &[(f64, f64)], q: f64) -> f64 {
    points
        .iter()
        .find(|(p, _)| (*p - q).abs() < 1e-9)
        .unwrap()
        .1
}

#[test]
fn a_fitted_scenario_reads_back_the_record_that_made_it_and_runs() {
    let dir = Dir::new("fit-outage");
    // 20 calls a second for 10 minutes, then 60 for 10: log-normal 20 ms (p99 ≈ 64 ms),
    // 1% errors; a 2-minute outage (fast failures) from 5 to 7 minutes.
    let text = record(
        1200.0,
        &|t| if t < 600.0 { 20.0 } else { 60.0 },
        1,
        &|t, rng| {
            if (300.0..420.0).contains(&t) {
                return (0.002, false);
            }
            (0.020 * (0.5 * normal(rng)).exp(), rng.f64() >= 0.01)
        },
        1,
    );
    let scenario_text = fit(&dir, "calls.csv", &text, &["--phase", "5m"]);
    let scenario: toml::Table = toml::from_str(&scenario_text).unwrap();
    let points = quantiles(&scenario);
    assert!((at(&points, 0.5) / 0.020 - 1.0).abs() < 0.06, "{points:?}");
    assert!((at(&points, 0.99) / 0.0639 - 1.0).abs() < 0.1, "{points:?}");
    let error_rate = scenario["dependency"]["error-rate"].as_float().unwrap();
    assert!((0.007..0.013).contains(&error_rate), "{error_rate}");
    assert_eq!(scenario["dependency"]["replicas"].as_integer(), Some(3));
    let phases = scenario["phases"].as_array().unwrap();
    let rates: Vec<f64> = phases
        .iter()
        .map(|p| p["rate"].as_float().unwrap())
        .collect();
    assert_eq!(rates.len(), 4, "{rates:?}");
    for (rate, want) in rates.iter().zip([20.0, 20.0, 60.0, 60.0]) {
        assert!((rate / want - 1.0).abs() < 0.1, "{rates:?}");
    }
    assert!(
        phases.iter().all(|p| p.get("burst").is_none()),
        "Poisson: no bursts"
    );
    let incidents = scenario["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{scenario_text}");
    assert_eq!(incidents[0]["kind"].as_str(), Some("outage"));
    assert_eq!(incidents[0]["start"].as_str(), Some("300s"));
    assert_eq!(incidents[0]["duration"].as_str(), Some("120s"));
    // It loads as the lab's scenario and runs, and the defaults trip in its outage.
    let loaded = Scenario::from_toml(&scenario_text, "fitted").unwrap();
    assert_eq!(loaded.name, "calls");
    let out = lab(&[&dir.path("fitted.toml"), "--svg", &dir.path("fitted.svg")]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trip = report
        .lines()
        .find(|l| l.starts_with("first trip after incident start"))
        .unwrap();
    // Columns: no breaker, defaults, oracle.
    let cells: Vec<&str> = trip.split_whitespace().rev().take(2).collect();
    let defaults: f64 = cells[1].parse().unwrap_or_else(|_| panic!("{report}"));
    assert!(defaults < 5.0, "{report}");
}

#[test]
fn bursts_a_second_mode_and_a_hang_are_fitted_as_such() {
    let dir = Dir::new("fit-shapes");
    // Bunches of 5 at 10 calls a second; 70% cache hits at 1 ms, 30% misses at 40 ms; a
    // minute of calls that time out at 1 s.
    let text = record(
        900.0,
        &|_| 10.0,
        5,
        &|t, rng| {
            if (300.0..360.0).contains(&t) {
                return (1.0, false);
            }
            let hit = rng.f64() < 0.7;
            let d = if hit { 0.001 } else { 0.040 } * (0.1 * normal(rng)).exp();
            (d, true)
        },
        2,
    );
    let scenario_text = fit(&dir, "cache.csv", &text, &[]);
    let scenario: toml::Table = toml::from_str(&scenario_text).unwrap();
    let points = quantiles(&scenario);
    assert!(at(&points, 0.5) < 0.0015, "a hit: {points:?}");
    assert!(at(&points, 0.8) > 0.030, "a miss: {points:?}");
    let bursts: Vec<i64> = scenario["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p.get("burst")
                .and_then(toml::Value::as_integer)
                .unwrap_or(1)
        })
        .collect();
    assert!(bursts.iter().all(|b| (4..=6).contains(b)), "{bursts:?}");
    let incidents = scenario["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{scenario_text}");
    assert_eq!(incidents[0]["kind"].as_str(), Some("hang"));
    Scenario::from_toml(&scenario_text, "fitted").unwrap();
}

#[test]
fn a_brownout_and_an_error_spike_are_fitted_with_their_sizes() {
    let dir = Dir::new("fit-brownout");
    let text = record(
        900.0,
        &|_| 20.0,
        1,
        &|t, rng| {
            let d = 0.010 * (0.3 * normal(rng)).exp();
            if (200.0..300.0).contains(&t) {
                (d * 20.0, true)
            } else if (500.0..560.0).contains(&t) {
                (d, rng.f64() >= 0.4)
            } else {
                (d, true)
            }
        },
        3,
    );
    let scenario_text = fit(&dir, "mixed.jsonl.csv", &text, &[]);
    let scenario: toml::Table = toml::from_str(&scenario_text).unwrap();
    let incidents = scenario["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 2, "{scenario_text}");
    assert_eq!(incidents[0]["kind"].as_str(), Some("brownout"));
    let factor = incidents[0]["latency-factor"].as_float().unwrap();
    assert!((15.0..25.0).contains(&factor), "{factor}");
    assert_eq!(incidents[1]["kind"].as_str(), Some("error-spike"));
    let rate = incidents[1]["error-rate"].as_float().unwrap();
    assert!((0.3..0.5).contains(&rate), "{rate}");
    Scenario::from_toml(&scenario_text, "fitted").unwrap();
}

#[test]
fn fit_refuses_stdin_and_a_record_with_no_call() {
    let out = lab(&["fit", "-", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reads the record twice"));
    let dir = Dir::new("fit-empty");
    let empty = dir.path("empty.csv");
    std::fs::write(&empty, "timestamp,duration,outcome\n").unwrap();
    let out = lab(&["fit", &empty]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no call to fit"));
    let out = lab(&["fit", &empty, "--phase", "2h"]);
    assert_eq!(out.status.code(), Some(2));
    let out = lab(&["fit", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("ten times the busiest second"));
}

/// A CSV record of `pods` pods, pod i sending `weights[i]` × `rate` calls a second for
/// `seconds` (Poisson each), all successes of 10 ms, in start order.
fn pods_record(weights: &[f64], rate: f64, seconds: f64, seed: u64) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut calls: Vec<(f64, usize)> = Vec::new();
    for (pod, w) in weights.iter().enumerate() {
        let mut t = 0.0;
        loop {
            t += -(1.0 - rng.f64()).ln() / (rate * w);
            if t >= seconds {
                break;
            }
            calls.push((t, pod));
        }
    }
    calls.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut text = String::from("timestamp,duration,outcome,pod\n");
    for (t, pod) in calls {
        text += &format!("{:.6},10,ok,pod-{pod}\n", T0 + t);
    }
    text
}

/// A record with a pod column is fitted as that many pods sharing its rate, with the spread
/// of their own rates as `fleet.unevenness` (within 20% of the spread that generated it);
/// pods at one rate get none (their counts differ by chance only); and the fitted fleet loads.
#[test]
fn pods_and_their_unevenness_are_fitted_from_a_pod_column() {
    let dir = Dir::new("fit-pods");
    let mut rng = fastrand::Rng::with_seed(5);
    // Log-normal weights of coefficient of variation 1 (σ² = ln 2), 40 pods.
    let sigma2 = 2f64.ln();
    let raw: Vec<f64> = (0..40)
        .map(|_| (sigma2.sqrt() * normal(&mut rng) - sigma2 / 2.0).exp())
        .collect();
    let mean = raw.iter().sum::<f64>() / raw.len() as f64;
    let weights: Vec<f64> = raw.iter().map(|w| w / mean).collect();
    let spread = (weights.iter().map(|w| (w - 1.0).powi(2)).sum::<f64>()
        / (weights.len() - 1) as f64)
        .sqrt();
    let text = pods_record(&weights, 2.5, 600.0, 6);
    let fitted = fit(&dir, "pods.csv", &text, &[]);
    let scenario: toml::Table = toml::from_str(&fitted).unwrap();
    let fleet = scenario["fleet"].as_table().unwrap();
    assert_eq!(fleet["pods"].as_integer(), Some(40), "{fitted}");
    let rate = fleet["rate"].as_float().unwrap();
    assert!((rate / 2.5 - 1.0).abs() < 0.05, "{rate}");
    let unevenness = fleet["unevenness"].as_float().unwrap();
    assert!(
        (unevenness / spread - 1.0).abs() < 0.2,
        "fitted {unevenness}, generated {spread}"
    );
    Scenario::from_toml(&fitted, "fitted").unwrap();

    let even = pods_record(&[1.0; 40], 2.5, 600.0, 7);
    let fitted = fit(&dir, "even.csv", &even, &[]);
    let scenario: toml::Table = toml::from_str(&fitted).unwrap();
    assert_eq!(scenario["fleet"]["pods"].as_integer(), Some(40));
    assert!(
        scenario["fleet"].get("unevenness").is_none(),
        "pods at one rate: {fitted}"
    );
}
