//! A hostile review of the lab: bad input, the model's laws and accounting, the report's
//! classification of trips, determinism, and scenarios that make time or memory blow up.
//!
//! Every test here either guards something the lab promises or fails on a defect; each failing
//! one says, in its doc comment, where the defect is.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cutout_lab::sim::Second;
use cutout_lab::{Lab, Metrics, Run, Scenario};

/// cutout's breakers pick their sampling sequence by a process-wide thread slot, so the tests
/// that run breakers take turns: none of them disturbs another's slots (see
/// `a_settings_results_do_not_depend_on_other_threads`).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A small healthy scenario; `extra` is appended (more sections, incidents).
const BASE: &str = r#"
seed = 1
duration = "20s"
[dependency]
latency-median = "10ms"
latency-p99 = "40ms"
error-rate = 0.01
capacity = 1000
[fleet]
pods = 2
rate = 5
timeout = "1s"
[breakers.instances.a]
"#;

/// `BASE` with `key = value` set in `section` ("" for the top level, "incident" for a new
/// outage incident from 5 s for 5 s).
fn edit(section: &str, key: &str, value: &str) -> String {
    let mut doc: toml::Table = toml::from_str(BASE).unwrap();
    let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .unwrap()
        .remove("v")
        .unwrap();
    match section {
        "" => {
            doc.insert(key.into(), value);
        }
        "incident" => {
            let mut incident: toml::Table =
                toml::from_str("kind = \"outage\"\nstart = \"5s\"\nduration = \"5s\"").unwrap();
            incident.insert(key.into(), value);
            doc.insert(
                "incidents".into(),
                toml::Value::Array(vec![toml::Value::Table(incident)]),
            );
        }
        _ => {
            doc[section]
                .as_table_mut()
                .unwrap()
                .insert(key.into(), value);
        }
    }
    toml::to_string(&doc).unwrap()
}

fn load(text: &str) -> Scenario {
    Scenario::from_toml(text, "review").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run_of<'a>(lab: &'a Lab<'_>, label: &str) -> (&'a Run, &'a Metrics) {
    let i = lab
        .runs
        .iter()
        .position(|r| r.setting == label)
        .unwrap_or_else(|| panic!("no run {label:?}"));
    (&lab.runs[i], &lab.metrics[i])
}

// ---------------------------------------------------------------------------------------------
// Bad input: the library refuses it with an error naming the key, and never panics.
// ---------------------------------------------------------------------------------------------

/// Every invalid value of every key is refused, and the error names the key. Passes: a guard
/// over the checks in scenario.rs, fleet.rs, dependency/mod.rs and incident.rs.
#[test]
fn invalid_values_are_refused_naming_their_key() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("", "duration", "\"0s\"", "duration"),
        ("", "seed", "-1", "seed"),
        ("", "seed", "\"one\"", "seed"),
        ("", "frobnicate", "1", "frobnicate"),
        ("", "compare", "[\"nope\"]", "nope"),
        ("", "compare", "[]", "no breaker settings"),
        ("fleet", "pods", "0", "pods"),
        ("fleet", "pods", "-1", "pods"),
        ("fleet", "pods", "1.5", "pods"),
        ("fleet", "rate", "nan", "rate"),
        ("fleet", "rate", "inf", "rate"),
        ("fleet", "rate", "-inf", "rate"),
        ("fleet", "rate", "0.0", "rate"),
        ("fleet", "rate", "-5.0", "rate"),
        ("fleet", "rate", "\"fast\"", "rate"),
        ("fleet", "timeout", "\"0s\"", "timeout"),
        ("fleet", "timeout", "10", "timeout"),
        ("fleet", "retries", "-1", "retries"),
        ("fleet", "concurrency", "0", "concurrency"),
        ("fleet", "deadline", "\"0s\"", "deadline"),
        ("fleet", "retry-policy", "[\"smart\"]", "smart"),
        ("fleet", "breaker-per", "[\"pod\"]", "pod"),
        ("fleet", "frobnicate", "1", "frobnicate"),
        ("dependency", "error-rate", "nan", "error-rate"),
        ("dependency", "error-rate", "-0.1", "error-rate"),
        ("dependency", "error-rate", "1.5", "error-rate"),
        ("dependency", "capacity", "nan", "capacity"),
        ("dependency", "capacity", "inf", "capacity"),
        ("dependency", "capacity", "0.0", "capacity"),
        ("dependency", "capacity", "-1.0", "capacity"),
        ("dependency", "capacity", "1e12", "capacity"),
        ("dependency", "replicas", "0", "replicas"),
        ("dependency", "latency-median", "\"0s\"", "latency-median"),
        ("dependency", "latency-p99", "\"1ms\"", "latency-p99"),
        ("dependency", "outage-latency", "\"soon\"", "outage-latency"),
        ("dependency", "max-queue-wait", "\"soon\"", "max-queue-wait"),
        ("dependency", "frobnicate", "1", "frobnicate"),
        ("incident", "kind", "\"meltdown\"", "meltdown"),
        ("incident", "kind", "\"\"", "kind"),
        ("incident", "replicas", "0", "replicas"),
        ("incident", "replicas", "2", "replicas"),
        ("incident", "frobnicate", "1", "frobnicate"),
    ];
    let mut wrong = Vec::new();
    for &(section, key, value, named) in cases {
        let text = edit(section, key, value);
        match Scenario::from_toml(&text, "x") {
            Ok(_) => wrong.push(format!("[{section}] {key} = {value}: accepted")),
            Err(e) if !e.contains(named) => {
                wrong.push(format!(
                    "[{section}] {key} = {value}: {e:?} does not say {named}"
                ));
            }
            Err(_) => {}
        }
    }
    // Kind-specific keys.
    let incident =
        |body: &str| format!("{BASE}\n[[incidents]]\nstart = \"5s\"\nduration = \"5s\"\n{body}\n");
    for (body, named) in [
        ("kind = \"brownout\"", "latency-factor"),
        ("kind = \"brownout\"\nlatency-factor = 0", "latency-factor"),
        (
            "kind = \"brownout\"\nlatency-factor = nan",
            "latency-factor",
        ),
        (
            "kind = \"brownout\"\nlatency-factor = inf",
            "latency-factor",
        ),
        ("kind = \"brownout\"\nlatency-factor = -2", "latency-factor"),
        ("kind = \"error-spike\"\nerror-rate = nan", "error-rate"),
        ("kind = \"error-spike\"\nerror-rate = 2", "error-rate"),
        (
            "kind = \"capacity-limited\"\ncapacity-from = 0",
            "capacity-from",
        ),
        (
            "kind = \"capacity-limited\"\ncapacity-from = 1.5",
            "capacity-from",
        ),
        (
            "kind = \"capacity-limited\"\ncapacity-from = nan",
            "capacity-from",
        ),
        ("kind = \"flapping\"", "period"),
        ("kind = \"flapping\"\nperiod = \"0s\"", "period"),
        (
            "kind = \"flapping\"\nperiod = \"2s\"\ndown-share = 1",
            "down-share",
        ),
        (
            "kind = \"flapping\"\nperiod = \"2s\"\ndown-share = nan",
            "down-share",
        ),
    ] {
        match Scenario::from_toml(&incident(body), "x") {
            Ok(_) => wrong.push(format!("{body:?}: accepted")),
            Err(e) if !e.contains(named) => {
                wrong.push(format!("{body:?}: {e:?} does not say {named}"));
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// DEFECT: a duration that does not parse is refused as `invalid duration "soon"` without the
/// key it was given for. `fleet.rs:94` (timeout), `:99` (retry-backoff), `:107` (deadline),
/// `dependency/mod.rs:121-122` (latency-median, latency-p99), `incident.rs:268` (period) and
/// `:298-299` (start, duration) all call `duration::parse` with `?` and no key; only
/// outage-latency and max-queue-wait add theirs. A scenario with several durations gives the
/// user no way to tell which one is wrong.
#[test]
fn a_bad_duration_names_its_key() {
    let mut unnamed = Vec::new();
    for (section, key) in [
        ("fleet", "timeout"),
        ("fleet", "retry-backoff"),
        ("fleet", "deadline"),
        ("dependency", "latency-median"),
        ("dependency", "latency-p99"),
        ("incident", "start"),
    ] {
        let error = Scenario::from_toml(&edit(section, key, "\"soon\""), "x").unwrap_err();
        if !error.contains(key) {
            unnamed.push(format!("{key}: {error}"));
        }
    }
    let flapping = format!(
        "{BASE}\n[[incidents]]\nkind = \"flapping\"\nstart = \"5s\"\nduration = \"5s\"\n\
         period = \"soon\"\n"
    );
    let error = Scenario::from_toml(&flapping, "x").unwrap_err();
    if !error.contains("period") {
        unnamed.push(format!("period: {error}"));
    }
    assert!(
        unnamed.is_empty(),
        "errors without their key:\n{}",
        unnamed.join("\n")
    );
}

/// DEFECT: huge but parseable values panic instead of being refused.
/// - `retries = 4294967295`: `fleet.rs:108` computes `self.retries + 1` (overflow panic in
///   debug; in release it wraps to 0 and the default deadline is computed from a bogus count);
/// - `timeout = "500000000000y"` with `retries = 1`: `fleet.rs:108` multiplies the Duration
///   (`timeout * (retries + 1)`), which panics on overflow; so does `retry_backoff * retries`
///   with `retry-backoff = "500000000000y"`, `retries = 2`;
/// - `rate = 1e-300` (accepted: finite, above 0) with a count window: `sim::window_reach`
///   (`sim.rs:356`) calls `Duration::from_secs_f64(100 / 1e-300)`, which panics ("cannot
///   convert float seconds to Duration") at the end of every run with a breaker;
/// - an incident with `start` and `duration` of 300000000000y each: `Incident::end`
///   (`incident.rs:71`, `start + duration`) panics with "overflow when adding durations" as
///   soon as the run or the table asks when it ends.
#[test]
fn huge_values_are_refused_not_panicked_on() {
    let _serial = serial();
    let tiny = BASE
        .replace("rate = 5", "rate = 0.5")
        .replace("\"20s\"", "\"2s\"");
    let cases = [
        (
            "retries = 4294967295",
            tiny.replace("timeout = \"1s\"", "timeout = \"1s\"\nretries = 4294967295"),
        ),
        (
            "timeout = 500000000000y, retries = 1",
            tiny.replace(
                "timeout = \"1s\"",
                "timeout = \"500000000000y\"\nretries = 1",
            ),
        ),
        (
            "retry-backoff = 500000000000y, retries = 2",
            tiny.replace(
                "timeout = \"1s\"",
                "timeout = \"1s\"\nretries = 2\nretry-backoff = \"500000000000y\"",
            ),
        ),
        (
            "rate = 1e-300 with a count window",
            tiny.replace("rate = 0.5", "rate = 1e-300").replace(
                "[breakers.instances.a]",
                "[breakers.instances.a]\nwindow-type = \"count\"\nwindow-size = 100",
            ),
        ),
        (
            "incident start + duration past Duration::MAX",
            format!(
                "{tiny}\n[[incidents]]\nkind = \"outage\"\nstart = \"300000000000y\"\n\
                 duration = \"300000000000y\"\n"
            ),
        ),
    ];
    let mut panicked = Vec::new();
    for (what, text) in cases {
        let outcome = std::panic::catch_unwind(|| {
            if let Ok(scenario) = Scenario::from_toml(&text, "x") {
                let lab = Lab::run(&scenario);
                let _ = lab.table();
            }
        });
        if outcome.is_err() {
            panicked.push(what);
        }
    }
    assert!(panicked.is_empty(), "panicked on: {panicked:?}");
}

/// DEFECT: an incident key that does not belong to the incident's kind is silently ignored:
/// `kind = "outage"` with `latency-factor = 30` (a brownout meant, or a brownout on top of an
/// outage meant) runs a plain outage. `IncidentSpec` (`incident.rs:216-236`) has
/// `deny_unknown_fields`, but every kind's options are accepted on every kind and
/// `IncidentSpec::build` (`incident.rs:239`) only reads the ones its kind needs; the same
/// holds for `error-rate` on a brownout, `period` on a hang, and so on.
#[test]
fn an_incident_key_of_another_kind_is_refused() {
    let mut accepted = Vec::new();
    for body in [
        "kind = \"outage\"\nlatency-factor = 30",
        "kind = \"brownout\"\nlatency-factor = 3\nerror-rate = 0.5",
        "kind = \"hang\"\nperiod = \"10s\"",
    ] {
        let text = format!("{BASE}\n[[incidents]]\nstart = \"5s\"\nduration = \"5s\"\n{body}\n");
        if Scenario::from_toml(&text, "x").is_ok() {
            accepted.push(body);
        }
    }
    assert!(accepted.is_empty(), "accepted: {accepted:?}");
}

/// DEFECT: the model silently raises a capacity it cannot represent. Each replica gets
/// `c = max(1, round(capacity / replicas × mean service))` workers
/// (`dependency/mod.rs:216`): with `capacity = 1000` over `replicas = 100` (0.24 workers a
/// replica) every replica still gets one worker, so the dependency serves ~8,400 calls/s, 8.4×
/// what the file says, with no error or warning; a single replica of `capacity = 10` serves
/// ~84/s. "replicas larger than capacity allows" is accepted and the overload the user set up
/// never happens. The report's own capacity (the timeline's `capacity`) shows it.
///
/// The rule: a spec whose replica comes to less than half a worker (capacity / replicas ×
/// mean service time < 0.5; here the mean is 11.94 ms, so 41.87 calls/s a replica) is refused,
/// naming `capacity` and `replicas` and the least capacity that works; at half a worker or
/// more, the rounding keeps the model's capacity within 2/3 and 2× of the file's (up to the
/// timeline's whole calls/s).
#[test]
fn a_capacity_the_model_cannot_hold_is_refused_or_kept() {
    let _serial = serial();
    let mut wrong = Vec::new();
    for (capacity, replicas, refused) in [
        (1000.0, 100, true),
        (10.0, 1, true),
        (41.8, 1, true),
        (41.9, 1, false),
        (124.0, 1, false),
        (1000.0, 4, false),
    ] {
        let text = BASE
            .replace(
                "capacity = 1000",
                &format!("capacity = {capacity}\nreplicas = {replicas}"),
            )
            .replace("\"20s\"", "\"2s\"");
        let scenario = match Scenario::from_toml(&text, "x") {
            Err(e) if refused => {
                if !(e.contains("capacity =") && e.contains("replicas =") && e.contains("or more"))
                {
                    wrong.push(format!("capacity {capacity} over {replicas} replicas: {e}"));
                }
                continue;
            }
            Err(e) => {
                wrong.push(format!("capacity {capacity} over {replicas}: refused: {e}"));
                continue;
            }
            Ok(_) if refused => {
                wrong.push(format!(
                    "capacity {capacity} over {replicas} replicas: accepted, under half a \
                     worker a replica"
                ));
                continue;
            }
            Ok(scenario) => scenario,
        };
        let lab = Lab::run(&scenario);
        let modelled = f64::from(lab.runs[0].timeline[0].capacity);
        if !(capacity * 2.0 / 3.0 - 1.0..=capacity * 2.0 + 1.0).contains(&modelled) {
            wrong.push(format!(
                "capacity {capacity} over {replicas} replicas: the model serves {modelled}/s"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// DEFECT (minor): too many replicas is refused with a message that blames `capacity` and
/// states a false product: `replicas = 2000000` with `capacity = 1000` says "capacity = 1000:
/// 2000000 calls in service at once over all replicas (capacity × mean latency)", while
/// capacity × mean latency is 24; the count comes from the one-worker floor per replica
/// (`dependency/mod.rs:153-160`). The message never says `replicas`.
#[test]
fn too_many_replicas_is_refused_naming_replicas() {
    let error = Scenario::from_toml(&edit("dependency", "replicas", "2000000"), "x").unwrap_err();
    assert!(error.contains("replicas ="), "{error}");
}

/// DEFECT: an incident that starts after the run ends is accepted, and the report then states
/// a false figure: "goodput from the incident on" is 0.0 requests/s (`report.rs:379-383`:
/// `from >= last` returns 0.0), although no request ever met the incident, and the header
/// announces an incident that never happens. `Scenario::from_toml` (`scenario.rs:118-131`)
/// never compares incidents with `duration`.
#[test]
fn an_incident_past_the_run_is_refused_or_not_reported_as_zero_goodput() {
    let _serial = serial();
    let text =
        format!("{BASE}\n[[incidents]]\nkind = \"outage\"\nstart = \"1m\"\nduration = \"10s\"\n");
    let Ok(scenario) = Scenario::from_toml(&text, "x") else {
        return; // refused: fine
    };
    let lab = Lab::run(&scenario);
    let (run, m) = run_of(&lab, "a");
    assert!(run.counts.requests_ok > 100, "{:?}", run.counts);
    assert_ne!(
        m.goodput_in_trouble,
        Some(0.0),
        "an incident after the run is reported as zero goodput"
    );
}

/// Tiny rates and rates of nothing run and report without panicking: no request at all
/// (rate 1e-9 over 20 s), the report and the SVG still come out. Passes: a guard.
#[test]
fn a_run_with_no_request_reports_and_plots() {
    let _serial = serial();
    for rate in ["1e-9", "1e-300"] {
        let scenario = load(&edit("fleet", "rate", rate));
        let lab = Lab::run(&scenario);
        assert_eq!(lab.runs[0].counts.requests, 0);
        assert!(lab.table().contains("requests"));
        assert!(lab.svg().unwrap().starts_with("<svg"));
    }
}

// ---------------------------------------------------------------------------------------------
// The binary under bad input: it exits with a message, never crashes, never hangs.
// ---------------------------------------------------------------------------------------------

/// What a run of the binary came to.
struct Ran {
    /// The exit code; `None`: killed by a signal (an abort on a failed allocation).
    code: Option<i32>,
    stderr: String,
    /// Still running after the time allowed (then killed).
    hung: bool,
}

/// A scratch directory for the binary's runs, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("cutout-lab-review-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the binary on scenario `text` with `args`, its address space limited to `memory_mb`
/// (so a runaway allocation fails at once instead of taking the machine), for at most
/// `seconds`.
fn binary(
    dir: &Scratch,
    name: &str,
    text: &str,
    args: &[&str],
    memory_mb: u64,
    seconds: u64,
) -> Ran {
    let scenario = dir.0.join(format!("{name}.toml"));
    std::fs::write(&scenario, text).unwrap();
    let svg = dir.0.join(format!("{name}.svg"));
    let mut command = format!(
        "ulimit -v {}; exec '{}' '{}' --svg '{}'",
        memory_mb * 1024,
        env!("CARGO_BIN_EXE_cutout-lab"),
        scenario.display(),
        svg.display()
    );
    for a in args {
        command += &format!(" '{a}'");
    }
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&command)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut hung = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(seconds) {
            hung = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    Ran {
        code: if hung { None } else { status.code() },
        stderr,
        hung,
    }
}

/// The binary ended with exit status 0, or with 1 and a message naming `key`: not killed by a
/// signal, not hung. `None` when it did, else what went wrong.
fn clean(what: &str, ran: &Ran, key: &str) -> Option<String> {
    let tail: String = ran.stderr.lines().take(3).collect::<Vec<_>>().join(" | ");
    match ran.code {
        _ if ran.hung => Some(format!("{what}: still running, killed ({tail})")),
        None => Some(format!("{what}: killed by a signal: {tail}")),
        Some(0) => None,
        Some(1) if ran.stderr.contains(key) => None,
        Some(code) => Some(format!("{what}: exit {code} without naming {key}: {tail}")),
    }
}

/// A bad value makes the binary exit 1 with the library's message. Passes: a guard.
#[test]
fn the_binary_exits_1_naming_a_bad_value() {
    let dir = Scratch::new("bad-value");
    let ran = binary(&dir, "nan", &edit("fleet", "rate", "nan"), &[], 1024, 20);
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    assert!(ran.stderr.contains("fleet.rate = NaN"), "{}", ran.stderr);
    assert!(ran.stderr.contains("nan.toml"), "{}", ran.stderr);
}

/// DEFECT: scenarios whose timeline or fleet cannot fit are accepted and abort the process
/// ("memory allocation of 230400000000 bytes failed", SIGABRT) instead of being refused:
/// - `duration = "1000000h"`: `sim.rs:313` allocates one 64-byte `Second` per simulated
///   second up front (3.6 × 10⁹ of them: 230 GB), whatever the traffic;
/// - a hang with `timeout = "1000000h"`, or `retry-backoff = "1000000h"` with a retry: an
///   event long after the end reaches `World::second` (`sim.rs:373-379`), which resizes the
///   timeline to that second (230 GB again): the timeline grows with the latest event, not
///   with the run;
/// - `pods = 1000000`: `Fleet::new` builds a million breakers per run, two runs at once, over
///   1.8 GB each (it aborts at 3.7 GB under a 4 GB limit), with no bound or estimate checked (`fleet.rs:189`).
///
/// Each runs with its address space limited to 1 GB; a clean outcome is a report or an exit 1
/// naming the key.
#[test]
fn a_scenario_too_big_for_memory_is_refused() {
    let dir = Scratch::new("memory");
    let light = BASE
        .replace("rate = 5", "rate = 0.001")
        .replace("pods = 2", "pods = 1");
    let hang = format!(
        "{}\n[[incidents]]\nkind = \"hang\"\nstart = \"0s\"\nduration = \"20s\"\n",
        BASE.replace("timeout = \"1s\"", "timeout = \"1000000h\"")
            .replace("pods = 2", "pods = 1")
    );
    let backoff = BASE
        .replace("error-rate = 0.01", "error-rate = 0.5")
        .replace(
            "timeout = \"1s\"",
            "timeout = \"1s\"\nretries = 1\nretry-backoff = \"1000000h\"",
        );
    let pods = BASE
        .replace("pods = 2", "pods = 1000000")
        .replace("rate = 5", "rate = 0.000001")
        .replace("\"20s\"", "\"1s\"");
    let cases = [
        (
            "duration = 1000000h",
            light.replace("\"20s\"", "\"1000000h\""),
            "duration",
        ),
        ("hang, timeout = 1000000h", hang, "timeout"),
        ("retry-backoff = 1000000h", backoff, "retry-backoff"),
        ("pods = 1000000", pods, "pods"),
    ];
    let problems: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, (what, text, key))| {
            let ran = binary(&dir, &format!("case{i}"), text, &[], 1024, 20);
            clean(what, &ran, key)
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// DEFECT: a finite rate whose gaps round to 0 ns never ends. `Pod::next_gap`
/// (`fleet.rs:162-165`) truncates `-ln(u) / rate × 1e9` to whole nanoseconds: at
/// `rate = 1e300` every gap is 0, every arrival lands at t = 0 and schedules the next one at
/// t = 0 (`sim.rs:422`), so the loop spins forever at time zero (growing `this_second`,
/// one u32 per request ended in second 0). `FleetSpec::build` (`fleet.rs:91`) accepts any
/// finite rate above 0. Given 2 s here, it is still running (and would be after 20 s; at
/// rate 1e9 it takes ~1e9 events a simulated second per pod, also unbounded).
#[test]
fn a_rate_too_high_to_simulate_is_refused() {
    let dir = Scratch::new("rate");
    let text = edit("fleet", "rate", "1e300").replace("\"20s\"", "\"1s\"");
    let ran = binary(&dir, "fast", &text, &[], 1024, 2);
    assert!(
        clean("rate = 1e300", &ran, "rate").is_none(),
        "{}",
        clean("rate = 1e300", &ran, "rate").unwrap()
    );
}

/// DEFECT: `--seeds N` is checked by building the whole list of seeds first:
/// `seeds::seeds` (`seeds.rs:43-56`) collects `count` u64s before it can say they run past
/// `u64::MAX`, and `main.rs:312` calls it "before anything runs". `--seed 2 --seeds
/// 18446744073709551615` (which must fail with "run past the largest seed", exit 2),
/// `--seeds 18446744073709551615` from the file's seed 1 (seeds 1 to `u64::MAX`: they fit,
/// and must be refused as too many, at most 10,000, exit 2) and `--seeds 1000000000000`
/// instead allocate until the process aborts (SIGABRT under a 256 MB limit; on a machine
/// without one, until the OOM killer). A count check (`first.checked_add(count - 1)`) needs
/// no list.
#[test]
fn a_huge_seed_count_is_refused_without_allocating_it() {
    let dir = Scratch::new("seeds");
    let text = BASE
        .replace("\"20s\"", "\"1s\"")
        .replace("rate = 5", "rate = 0.5");
    let mut problems = Vec::new();
    for (name, args, says) in [
        (
            "past",
            &["--seed", "2", "--seeds", "18446744073709551615"][..],
            "past",
        ),
        ("max", &["--seeds", "18446744073709551615"][..], "at most"),
    ] {
        let ran = binary(&dir, name, &text, args, 256, 10);
        if ran.code != Some(2) || !ran.stderr.contains(says) {
            problems.push(format!(
                "{args:?}: exit {:?}, hung {}: {}",
                ran.code,
                ran.hung,
                ran.stderr.lines().next().unwrap_or("")
            ));
        }
    }
    // A count that does fit may run (slowly) or be refused, but must not abort.
    let many = binary(&dir, "many", &text, &["--seeds", "1000000000000"], 256, 2);
    if !many.hung && many.code.is_none() {
        problems.push(format!(
            "--seeds 1e12: killed by a signal: {}",
            many.stderr.lines().next().unwrap_or("")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `--seeds` and `--sweep` edge cases the binary refuses with exit 2: duplicate sweep values,
/// keys and values cutout rejects (NaN, inf, 0), a scenario key swept as a breaker key, and a
/// seed range past `u64::MAX`. Passes: a guard.
#[test]
fn seeds_and_sweep_edges_exit_2_with_a_message() {
    let dir = Scratch::new("flags");
    let text = BASE.replace("\"20s\"", "\"2s\"");
    let cases: &[(&[&str], &str)] = &[
        (&["--sweep", "failure-ratio=nan"], "CUT-CFG"),
        (&["--sweep", "failure-ratio=inf"], "CUT-CFG"),
        (&["--sweep", "consecutive-failures=0"], "CUT-CFG"),
        (&["--sweep", "window-size=0"], "CUT-CFG"),
        (&["--sweep", "pods=1,2"], "CUT-CFG-008"),
        (&["--sweep", "break-duration=5s,5s"], "twice"),
        (&["--sweep", "break-duration=5s, 5s"], "twice"),
        (&["--seed", "18446744073709551615", "--seeds", "2"], "past"),
        (&["--seeds", "-1"], "whole number"),
    ];
    for (i, (args, says)) in cases.iter().enumerate() {
        let ran = binary(&dir, &format!("f{i}"), &text, args, 1024, 20);
        assert_eq!(ran.code, Some(2), "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{args:?}: {}", ran.stderr);
    }
}

// ---------------------------------------------------------------------------------------------
// Laws: accounting, determinism, routing, retries, the what-if copy.
// ---------------------------------------------------------------------------------------------

/// Every law of `Counts` and the timeline for every run of `lab`.
fn check_laws(scenario: &Scenario, lab: &Lab<'_>) {
    let pods = scenario.traffic.pods;
    let seconds = scenario.duration.as_secs_f64().ceil() as usize;
    let requests = lab.runs[0].counts.requests;
    for run in &lab.runs {
        let c = run.counts;
        let name = &run.setting;
        assert_eq!(
            c.requests, requests,
            "{name}: every setting sees the same requests"
        );
        assert_eq!(
            c.requests,
            c.requests_ok
                + c.requests_failed
                + c.requests_timed_out
                + c.requests_refused
                + c.requests_rejected_by_pool
                + c.requests_expired_in_queue,
            "{name}: {c:?}"
        );
        assert_eq!(
            (c.requests_unfinished, c.in_flight_at_end),
            (0, 0),
            "{name}"
        );
        assert_eq!(
            c.attempts,
            c.requests - c.requests_rejected_by_pool - c.requests_expired_in_queue + c.retries,
            "{name}: {c:?}"
        );
        assert_eq!(c.attempts, c.admitted + c.refused, "{name}");
        assert_eq!(
            c.admitted,
            c.attempts_ok + c.attempts_failed + c.attempts_timed_out,
            "{name}"
        );
        if run.oracle {
            // The oracle's refusal is the failure it spares: its caller retries it as one,
            // and the oracle sends nothing that fails (no `[connections]` here).
            assert!(c.requests_refused <= c.refused, "{name}");
            assert_eq!(c.attempts_failed + c.attempts_timed_out, 0, "{name}: {c:?}");
            assert_eq!(c.refused_would_succeed_alone, 0, "{name}");
        } else {
            // A request ends refused exactly when its last attempt was refused: never retried.
            assert_eq!(
                c.requests_refused, c.refused,
                "{name}: a refusal is never retried"
            );
        }
        assert!(c.refused_would_succeed_alone <= c.refused, "{name}");
        assert_eq!(
            c.requests_ok, c.attempts_ok,
            "{name}: a success ends its request"
        );
        assert!(c.refused_would_succeed <= c.refused, "{name}");
        assert!(
            c.probes <= c.admitted && c.reached_failing <= c.admitted,
            "{name}"
        );
        let sum =
            |f: fn(&Second) -> u32| -> u64 { run.timeline.iter().map(|s| u64::from(f(s))).sum() };
        assert_eq!(sum(|s| s.offered), c.attempts, "{name}");
        assert_eq!(sum(|s| s.admitted), c.admitted, "{name}");
        assert_eq!(sum(|s| s.succeeded), c.attempts_ok, "{name}");
        assert_eq!(
            sum(|s| s.failed),
            c.attempts_failed + c.attempts_timed_out,
            "{name}"
        );
        assert_eq!(sum(|s| s.probes), c.probes, "{name}");
        assert_eq!(sum(|s| s.ended), c.requests, "{name}");
        assert_eq!(sum(|s| s.goodput), c.requests_ok, "{name}");
        assert_eq!(run.latencies.total(), c.requests, "{name}");
        assert_eq!(run.ok_latencies.total(), c.requests_ok, "{name}");
        assert_eq!(run.probe_times.len() as u64, c.probes, "{name}");
        assert!(run.probe_times.windows(2).all(|w| w[0] <= w[1]), "{name}");
        assert!(run.timeline.len() >= seconds, "{name}");
        for (i, s) in run.timeline[..seconds].iter().enumerate() {
            assert_eq!(
                s.closed + s.open + s.half_open + s.recovering,
                pods,
                "{name}: second {i}"
            );
        }
    }
}

/// The laws hold over breaker layouts, retry policies, a pool that rejects and expires, a
/// deadline that cuts attempts, overlapping incidents on some replicas and a run of a
/// fractional number of seconds. Passes: a guard.
#[test]
fn every_request_and_attempt_ends_one_way_in_every_layout() {
    let _serial = serial();
    let text = r#"
        seed = 11
        duration = "40.5s"
        compare = ["plain", "ratio"]
        [dependency]
        latency-median = "20ms"
        latency-p99 = "100ms"
        error-rate = 0.02
        capacity = 300
        replicas = 3
        max-queue-wait = "300ms"
        [fleet]
        pods = 6
        rate = 12
        timeout = "400ms"
        retries = 2
        retry-backoff = "30ms"
        deadline = "700ms"
        concurrency = 3
        queue = 2
        retry-policy = ["naive", "breaker-aware"]
        breaker-per = ["dependency", "host"]
        [[incidents]]
        kind = "outage"
        start = "5s"
        duration = "10s"
        replicas = 1
        [[incidents]]
        kind = "hang"
        start = "8s"
        duration = "6s"
        replicas = 2
        [[incidents]]
        kind = "brownout"
        start = "12s"
        duration = "10s"
        latency-factor = 20
        [[incidents]]
        kind = "capacity-limited"
        start = "20s"
        duration = "10s"
        capacity-from = 0.2
        [[incidents]]
        kind = "flapping"
        start = "30s"
        duration = "8s"
        period = "2s"
        replicas = 2
        [breakers.defaults]
        break-duration = "2s"
        max-break-duration = "5s"
        [breakers.instances.plain]
        [breakers.instances.ratio]
        adaptive = false
        failure-ratio = "50%"
        window-size = 10
        recovery-fraction = 0.5
    "#;
    let scenario = load(text);
    let lab = Lab::run(&scenario);
    assert_eq!(
        lab.runs.len(),
        1 + 2 * 2 * 2 + 1,
        "no breaker, 8 settings, the oracle"
    );
    check_laws(&scenario, &lab);
    let all =
        |f: fn(&cutout_lab::Counts) -> u64| lab.runs.iter().map(|r| f(&r.counts)).sum::<u64>();
    assert!(all(|c| c.requests_rejected_by_pool) > 0, "the pool rejects");
    assert!(all(|c| c.attempts_timed_out) > 0 && all(|c| c.refused) > 0);
    assert!(all(|c| c.retries) > 0 && all(|c| c.probes) > 0);
}

/// A 1-pod fleet at 500 requests/s: its breaker's 30 s window holds more than 8,192 calls, so
/// cutout times one call in eight (a sampled breaker); a brownout trips it on relative slow
/// calls. `twin` is `slow` under another name.
fn sampled_scenario(settings: &str) -> Scenario {
    let text = format!(
        r#"
        seed = 4
        duration = "50s"
        {settings}
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.001
        capacity = 100000
        [fleet]
        pods = 1
        rate = 500
        timeout = "2s"
        retries = 1
        concurrency = 10000
        [[incidents]]
        kind = "brownout"
        start = "25s"
        duration = "20s"
        # 10 ms to about 200 ms: slow past 3 x normal and past the 50 ms margin alike.
        latency-factor = 20
        [breakers.instances.slow]
        break-duration = "2s"
        [breakers.instances.twin]
        break-duration = "2s"
        "#
    );
    load(&text)
}

/// DEFECT: a run's result depends on what else runs in the process. cutout's sampled breakers
/// draw which calls they time from a per-line sequence whose start depends on the line's index
/// (`cutout/src/front/cells.rs:57-61`, `Line::new`), and a thread's line is its process-wide
/// thread slot (`cells.rs:117-122`, `front/slot.rs`): the lowest slot no live thread holds.
/// `sim::run` (`sim.rs:269-279`) gives each run a fresh thread believing that resets the
/// sequence, but the slot a fresh thread gets depends on which other threads hold one: the
/// runs that `Lab::run_with` (`lib.rs:116-153`) runs beside it, another lab in the same
/// process, or any thread of the embedding program that used a breaker. So:
/// - the same subject on the same seed gives another run while some other thread holds slot 0;
/// - in one `Lab::run`, two settings that are the same (`slow`, `twin`) give different runs,
///   because they run at the same time on different slots; adding a column changes another
///   column's numbers, and the numbers depend on the core count and on scheduling.
#[test]
fn a_settings_results_do_not_depend_on_other_threads() {
    let _serial = serial();
    let scenario = sampled_scenario("compare = [\"slow\"]");
    let subjects = Lab::subjects(&scenario);
    let alone = cutout_lab::sim::run(&scenario, &subjects[1], &|_| {});
    assert!(
        alone
            .transitions
            .iter()
            .any(|t| matches!(t.transition, cutout::Transition::Opened { .. })),
        "the brownout trips the breaker"
    );
    // Another thread of the process holds a slot (it used a breaker) while the run runs.
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (ready, is_ready) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let breaker = cutout::Breaker::builder("elsewhere").build();
        for _ in 0..10 {
            let _ = breaker.call(|| Ok::<(), ()>(()));
        }
        ready.send(()).unwrap();
        let _ = stopped.recv();
    });
    is_ready.recv().unwrap();
    let beside = cutout_lab::sim::run(&scenario, &subjects[1], &|_| {});
    drop(stop);
    holder.join().unwrap();
    let twins = sampled_scenario("compare = [\"slow\", \"twin\"]");
    let lab = Lab::run(&twins);
    let (slow, twin) = (&lab.runs[1], &lab.runs[2]);
    let mut problems = Vec::new();
    if alone != beside {
        problems.push(format!(
            "same subject, same seed, another thread holding a slot: {} vs {} refused",
            alone.counts.refused, beside.counts.refused
        ));
    }
    if (slow.counts, &slow.transitions) != (twin.counts, &twin.transitions) {
        problems.push(format!(
            "identical settings side by side: {} vs {} refused",
            slow.counts.refused, twin.counts.refused
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// With a breaker per replica and one of four replicas down, the pods send its share evenly
/// to the other three, which serve it (150 calls/s each of 200): nothing times out once the
/// breakers of the dead replica are open. Were the share sent to one replica (the next one,
/// say), that one would get 225 calls/s, past its capacity, and its queue would grow into
/// the timeout. Passes: a guard.
#[test]
fn per_host_breakers_spread_a_dead_replicas_share_evenly() {
    let _serial = serial();
    let text = r#"
        seed = 3
        duration = "60s"
        [dependency]
        latency-median = "20ms"
        latency-p99 = "20ms"          # a fixed 20 ms: 4 workers serve 200 calls/s a replica
        error-rate = 0.0
        capacity = 800
        replicas = 4
        [fleet]
        pods = 15
        rate = 30                     # 450 calls/s
        timeout = "1s"
        breaker-per = ["host"]
        [[incidents]]
        kind = "outage"
        start = "10s"
        duration = "50s"
        replicas = 1
        [breakers.instances.host]
        break-duration = "30s"
        max-break-duration = "60s"
    "#;
    let scenario = load(text);
    let lab = Lab::run(&scenario);
    let (run, _) = run_of(&lab, "host");
    let late = &run.timeline[25..60];
    let ok: u32 = late.iter().map(|s| s.goodput).sum();
    let ended: u32 = late.iter().map(|s| s.ended).sum();
    assert!(f64::from(ok) > 0.995 * f64::from(ended), "{ok} of {ended}");
    assert!(
        late.iter().all(|s| s.latency_p99_us < 200_000),
        "no queue builds up"
    );
    assert_eq!(run.counts.attempts_timed_out, 0, "{:?}", run.counts);
}

/// cutout-tower's `BreakerRetry`: a failure that opens the breaker is not retried, and a
/// refusal never is; naive retries keep going. With `consecutive-failures = 1` every failure
/// in the outage opens the breaker (or re-opens it, for a probe), so the breaker-aware fleet
/// makes no retry at all. Passes: a guard.
#[test]
fn breaker_aware_retries_stop_when_the_breaker_opens() {
    let _serial = serial();
    let text = r#"
        seed = 5
        duration = "30s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.0
        capacity = 10000
        [fleet]
        pods = 4
        rate = 20
        timeout = "1s"
        retries = 2
        retry-backoff = "10ms"
        retry-policy = ["naive", "breaker-aware"]
        [[incidents]]
        kind = "outage"
        start = "5s"
        duration = "20s"
        [breakers.instances.one]
        adaptive = false
        consecutive-failures = 1
        break-duration = "1s"
    "#;
    let scenario = load(text);
    let lab = Lab::run(&scenario);
    let (naive, _) = run_of(&lab, "one, naive retries");
    let (aware, _) = run_of(&lab, "one, breaker-aware retries");
    assert!(naive.counts.retries > 0, "{:?}", naive.counts);
    assert_eq!(aware.counts.retries, 0, "{:?}", aware.counts);
    assert!(aware.counts.refused > 0);
}

/// cutout-tower's `BreakerRetry`: no retry when what is left of the deadline after the backoff
/// (here 150 ms − ~10 ms − 135 ms ≈ 5 ms) is shorter than the breaker's normal latency
/// (~10 ms); naive retries start such attempts anyway, and the deadline cuts them. Passes: a
/// guard.
#[test]
fn breaker_aware_retries_stop_when_the_deadline_is_too_short() {
    let _serial = serial();
    let text = r#"
        seed = 6
        duration = "60s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "20ms"
        error-rate = 0.05
        capacity = 10000
        [fleet]
        pods = 4
        rate = 20
        timeout = "100ms"
        retries = 1
        retry-backoff = "135ms"
        deadline = "150ms"
        retry-policy = ["naive", "breaker-aware"]
        [breakers.instances.defaults]
    "#;
    let scenario = load(text);
    let lab = Lab::run(&scenario);
    let (naive, _) = run_of(&lab, "defaults, naive retries");
    let (aware, _) = run_of(&lab, "defaults, breaker-aware retries");
    assert!(naive.counts.retries > 100, "{:?}", naive.counts);
    assert!(
        aware.counts.retries * 10 < naive.counts.retries,
        "{} vs {}",
        aware.counts.retries,
        naive.counts.retries
    );
}

/// The what-if copy: with a dependency that never fails and never queues, a refused attempt
/// would have succeeded exactly when it was refused after the outage ended, so "refused calls
/// that would have succeeded" equals the refusals from the recovery on (from the timeline).
/// Passes: a guard.
#[test]
fn refusals_after_recovery_are_exactly_the_would_be_successes() {
    let _serial = serial();
    let text = r#"
        seed = 8
        duration = "60s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.0
        capacity = 100000
        [fleet]
        pods = 5
        rate = 10
        timeout = "1s"
        [[incidents]]
        kind = "outage"
        start = "10s"
        duration = "10s"
        [breakers.instances.long]
        break-duration = "25s"
        max-break-duration = "60s"
    "#;
    let scenario = load(text);
    let lab = Lab::run(&scenario);
    let (run, m) = run_of(&lab, "long");
    let after: u64 = run.timeline[20..]
        .iter()
        .map(|s| u64::from(s.offered - s.admitted))
        .sum();
    assert!(
        after > 100,
        "the breakers stay open past the recovery: {after}"
    );
    assert_eq!(m.refused_would_succeed, after);
}

// ---------------------------------------------------------------------------------------------
// The report: false trips against trips on an incident's outcomes, goodput.
// ---------------------------------------------------------------------------------------------

/// A trip on noise with no incident is a false trip; a trip after a hang has ended, on the
/// timeouts of calls started during it, is not. Passes: a guard.
#[test]
fn false_trips_and_trips_after_an_incident_are_told_apart() {
    let _serial = serial();
    let noisy = r#"
        seed = 2
        duration = "30s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.3
        capacity = 10000
        [fleet]
        pods = 3
        rate = 20
        timeout = "1s"
        [breakers.instances.three]
        adaptive = false
        consecutive-failures = 3
        break-duration = "1s"
    "#;
    let scenario = load(noisy);
    let lab = Lab::run(&scenario);
    let (_, m) = run_of(&lab, "three");
    assert!(m.trips > 10, "{m:?}");
    assert_eq!((m.false_trips, m.trips_after_incident), (m.trips, 0));

    let hang = r#"
        seed = 2
        duration = "30s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.0
        capacity = 10000
        [fleet]
        pods = 3
        rate = 20
        timeout = "2s"
        concurrency = 1000
        [[incidents]]
        kind = "hang"
        start = "10s"
        duration = "1s"
        [breakers.instances.five]
        adaptive = false
        consecutive-failures = 5
    "#;
    let scenario = load(hang);
    let lab = Lab::run(&scenario);
    let (_, m) = run_of(&lab, "five");
    // The hung calls time out from 12 s on, after the hang: the trips come then.
    assert!(m.trips >= 1, "{m:?}");
    assert_eq!(
        (m.false_trips, m.trips_after_incident),
        (0, m.trips),
        "{m:?}"
    );
}

/// Three pods on four replicas, `breaker-per = ["dependency", "host"]`, a count window of 40
/// calls and a 10 % failure ratio, consecutive failures off: the only failures of the whole
/// run are those of a 2 s error spike at the start (base error rate 0, no slow-call rule).
fn count_window_scenario() -> Scenario {
    load(
        r#"
        seed = 2
        duration = "40s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.0
        capacity = 10000
        replicas = 4
        [fleet]
        pods = 3
        rate = 10
        timeout = "1s"
        breaker-per = ["dependency", "host"]
        [[incidents]]
        kind = "error-spike"
        start = "0s"
        duration = "2s"
        error-rate = 1.0
        [breakers.instances.ratio]
        adaptive = false
        consecutive-failures = false
        failure-ratio = "10%"
        window-type = "count"
        window-size = 40
        minimum-calls = 40
    "#,
    )
}

/// DEFECT: with a breaker per replica, trips on an incident's failures are reported as trips
/// "on a healthy dependency". Every failure of this run is the error spike's, so no trip can
/// be a false one; with one breaker per pod the report agrees (its trips, at ~4 s, count as
/// "on the outcomes of an incident just ended"), but with a breaker per replica each breaker
/// sees a quarter of the pod's calls, fills its 40-call window at ~16 s, trips on the spike's
/// failures then, and the report calls those trips false. `sim::window_reach`
/// (`sim.rs:353-359`) spans a count window as `n / traffic.rate`, the pod's whole rate, while
/// a per-host breaker gets `rate / replicas`: it looks back 5 s where the window holds 17 s.
/// The sweep's recommendation rules values out on exactly this figure.
#[test]
fn per_host_trips_on_an_incidents_failures_are_not_false() {
    let _serial = serial();
    let scenario = count_window_scenario();
    let lab = Lab::run(&scenario);
    let (_, dependency) = run_of(&lab, "ratio, one per dependency");
    let (_, host) = run_of(&lab, "ratio, per host");
    assert!(
        dependency.trips > 0 && host.trips > 0,
        "{dependency:?}\n{host:?}"
    );
    assert_eq!(
        dependency.false_trips, 0,
        "one per dependency: {dependency:?}"
    );
    assert_eq!(
        host.false_trips, 0,
        "per host: {} of {} trips called false",
        host.false_trips, host.trips
    );
}

/// DEFECT: with a breaker per replica, a trip on a healthy replica while another replica is in
/// an incident is never counted as a false trip. Here replica 0 of 2 is down for the whole
/// run and replica 1 is healthy but noisy (30 % errors, 3 consecutive failures trip): its
/// breakers trip again and again on noise, trips no different from those of the noisy
/// scenario that the report does call false. The breakers of replica 0 trip at most once a
/// pod (the outage never ends: their probes fail and re-open, which are not trips), so at
/// least `trips - pods` trips are on the healthy replica; the report counts 0, because
/// `Metrics::of` (`report.rs:122`) asks `script.any_active(at)`, on any replica, and
/// `PodTransition` (`fleet.rs:138-146`) does not record which replica's breaker moved, so
/// the report cannot ask `is_failing_on` as `reached_failing` does.
#[test]
fn per_host_trips_on_a_healthy_replica_are_false() {
    let _serial = serial();
    let text = r#"
        seed = 2
        duration = "30s"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.3
        capacity = 10000
        replicas = 2
        [fleet]
        pods = 2
        rate = 20
        timeout = "1s"
        breaker-per = ["host"]
        [[incidents]]
        kind = "outage"
        start = "0s"
        duration = "30s"
        replicas = 1
        [breakers.instances.three]
        adaptive = false
        consecutive-failures = 3
        break-duration = "1s"
    "#;
    let scenario = load(text);
    let lab = Lab::run(&scenario);
    let (_, m) = run_of(&lab, "three");
    assert!(m.trips > 10, "{m:?}");
    assert!(
        m.false_trips + 2 >= m.trips,
        "{} trips, at least {} on the healthy replica, {} counted false",
        m.trips,
        m.trips - 2,
        m.false_trips
    );
}

/// DEFECT: a run shorter than a second reports a goodput of 0 requests/s although every
/// request succeeded. `report::goodput` (`report.rs:379-389`) sums the timeline up to
/// `duration.as_secs()`, whole seconds, truncated: 0 for `duration = "500ms"`, so the sum is
/// empty and the figure 0.0 (a 1.9 s run is counted over its first second only, the
/// rest dropped). The header says "0 s simulated" too.
#[test]
fn a_sub_second_run_has_its_goodput() {
    let _serial = serial();
    let text = BASE
        .replace("\"20s\"", "\"500ms\"")
        .replace("rate = 5", "rate = 100");
    let scenario = load(&text);
    let lab = Lab::run(&scenario);
    let (run, m) = run_of(&lab, "a");
    assert!(run.counts.requests_ok > 50, "{:?}", run.counts);
    assert!(
        m.goodput > 0.0,
        "{} requests succeeded, goodput {}",
        run.counts.requests_ok,
        m.goodput
    );
}

/// DEFECT: a list that names a setting twice gives two columns of one label:
/// `breaker-per = ["host", "host"]`, `retry-policy = ["naive", "naive"]`,
/// `compare = ["a", "a"]`, or an instance named `"no breaker"` (the label of the fleet without
/// breakers, `lib.rs:44`) are all accepted (`fleet.rs:113-128` and `scenario.rs:102-105` keep
/// duplicates; nothing reserves the label). Over several seeds `seeds::summarize`
/// (`seeds.rs:170-205`) matches columns by label, so the two columns fold into one whose cells
/// mix both settings' values ("4 of 4" over 2 seeds); the sweep refuses the same mistake
/// ("is given twice").
#[test]
fn a_setting_named_twice_is_refused_or_labelled_apart() {
    let _serial = serial();
    let named_no_breaker = BASE.replace(
        "[breakers.instances.a]",
        "[breakers.instances.a]\n[breakers.instances.\"no breaker\"]\nadaptive = false",
    );
    let named_oracle = BASE.replace(
        "[breakers.instances.a]",
        "[breakers.instances.a]\n[breakers.instances.oracle]\nadaptive = false",
    );
    let cases = [
        (
            "breaker-per",
            edit("fleet", "breaker-per", "[\"host\", \"host\"]"),
        ),
        (
            "retry-policy",
            edit("fleet", "retry-policy", "[\"naive\", \"naive\"]"),
        ),
        ("compare", edit("", "compare", "[\"a\", \"a\"]")),
        ("an instance named \"no breaker\"", named_no_breaker),
        ("an instance named \"oracle\"", named_oracle),
    ];
    let mut problems = Vec::new();
    for (what, text) in cases {
        let Ok(scenario) = Scenario::from_toml(&text, "x") else {
            continue; // refused: fine
        };
        let labels: Vec<String> = Lab::subjects(&scenario)
            .into_iter()
            .map(|s| s.label)
            .collect();
        let mut unique = labels.clone();
        unique.sort();
        unique.dedup();
        if unique.len() != labels.len() {
            let seeds = cutout_lab::seeds::run(&scenario, 2, &|_| {}).unwrap();
            let summary = seeds.summary();
            let row = summary.row("requests").unwrap();
            let cells: Vec<(usize, usize)> = row.cells.iter().map(|c| (c.had, c.of)).collect();
            problems.push(format!(
                "{what}: columns {labels:?}; over 2 seeds the summary has columns {:?}, \
                 (had, of) {cells:?}",
                summary.columns
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// DEFECT: with no incident in the whole script, trips are still reported as "trips on the
/// outcomes or backlog of an incident just ended" whenever the dependency has a queue: here a
/// busy (~96 % utilised) but healthy, noisy dependency, no `[[incidents]]` at all. Every trip
/// is on a healthy dependency (there is nothing else), yet `Metrics::of`
/// (`report.rs:122-132`) files every trip that finds a backlog of 1 ms or more at the start
/// of its second or the next under `trips_after_incident`, whether or not an incident ever
/// ran or recently ended. False trips are undercounted (the healthy-scenario claims and the
/// sweep's recommendation rest on that figure) and a non-existent incident is blamed.
#[test]
fn without_an_incident_no_trip_is_blamed_on_one() {
    let _serial = serial();
    let text = r#"
        seed = 2
        duration = "30s"
        [dependency]
        latency-median = "20ms"
        latency-p99 = "80ms"
        error-rate = 0.3
        capacity = 220
        [fleet]
        pods = 10
        rate = 20
        timeout = "1s"
        [breakers.instances.three]
        adaptive = false
        consecutive-failures = 3
        break-duration = "1s"
    "#;
    let scenario = load(text);
    assert!(scenario.script.incidents().is_empty());
    let lab = Lab::run(&scenario);
    let (_, m) = run_of(&lab, "three");
    assert!(m.trips > 10, "{m:?}");
    assert_eq!(
        (m.false_trips, m.trips_after_incident),
        (m.trips, 0),
        "no incident, yet {} of {} trips blamed on one",
        m.trips_after_incident,
        m.trips
    );
}
