//! `cutout-lab fit`: a scenario fitted to a service's own record of calls to one dependency
//! (the shapes of [`crate::record`]), so the simulation runs on that traffic instead of a
//! guessed one.
//!
//! # What is fitted
//! The record is read twice (a file, not a stream):
//! - **arrivals**: one `[[phases]]` entry per `--phase` (5 min) of the record, each with the
//!   rate the record had then, and a `burst` where its calls came in bunches: the variance of
//!   its per-second counts over their mean (1 for Poisson arrivals, b for bunches of b),
//!   rounded, the variance read from successive seconds' differences so that a change of rate
//!   within the phase is not bunching, and 1 unless the ratio is clearly above it (three
//!   standard errors);
//! - **the incidents**: those the replay finds ([`crate::replay`], "Incidents"), a failing
//!   one trimmed to its failing slices (a second, or the bin if shorter), each written as an
//!   `outage` (at least 90% failed, fast), a `hang` (at least 90% failed, most of them
//!   more than 10 times slower than usual: timeouts), an `error-spike` (fewer failed: the
//!   extra rate the lab combines with the usual one to give the share recorded) or a `brownout` (slow only: its slowdown);
//! - **the dependency** outside the incidents: its service time as the recorded
//!   distribution of the successes' durations (`latency-quantiles`: 17 quantiles, the
//!   slowest calls at their own ranks, and the slowest, so a bimodal latency and the tail
//!   past p99 keep their weight), its
//!   error rate, and one replica per host the record names;
//! - **the fleet**: one pod per pod the record names (a `pod` column; one pod if it names
//!   none: a record is one caller's view), at the record's mean rate shared between them, and
//!   their unevenness (`fleet.unevenness`: the spread of the pods' own counts beyond what
//!   chance gives at one rate, as `passes.rs` reads it), with a
//!   timeout 1.2 times the slowest call recorded (at most the lab's hour), no retries (a retry is in the record as
//!   a call of its own).
//!
//! # What is not
//! The dependency's capacity: a record shows the load it met, not the load it could take, so
//! the scenario gives it ten times the busiest second, within what the model holds and at
//! least a worker a replica, and says which; set it to what you know. Durations are what the caller saw, network and queueing
//! included, where the model's service time has no queue: at a busy dependency the fitted
//! latency is a little high. Which pods were quiet the whole record (so never named), and
//! whether a pod's share changed over the day: the unevenness is one figure for the record.

mod passes;

pub use passes::MAX_PHASES;

use std::fmt::Write as _;
use std::io::BufRead;
use std::time::Duration;

use crate::dependency::ServiceTime;
use crate::fleet::FleetSpec;
use crate::record::Record;
use crate::replay::{Candidate, Incident};

/// How a fit reads the record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// The incidents' bin width, in nanoseconds.
    pub bin: u64,
    /// One phase's length, in nanoseconds: whole seconds, from 1 s to 1 h.
    pub phase: u64,
    /// The share of failed calls that makes a bin failing.
    pub incident_errors: f64,
    /// How many times the usual duration makes a bin slow.
    pub incident_slowdown: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bin: 10_000_000_000,
            phase: 300_000_000_000,
            incident_errors: 0.2,
            incident_slowdown: 5.0,
        }
    }
}

/// The quantiles written for the service time, beside the slowest calls' own ranks.
const QUANTILES: [f64; 17] = [
    0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999,
];

/// A fitted scenario: its text, and what was fitted, for the user.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The scenario file's text.
    pub scenario: String,
    /// The record's calls.
    pub calls: u64,
    /// The incidents found (as the replay finds them, in bins).
    pub incidents: Vec<Incident>,
}

/// A duration as a scenario writes it, exactly: `305s`, `4500ms`, `1234us`, `300ns`.
fn exact(nanos: u64) -> String {
    match nanos {
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// A rate to 6 significant digits, however small (a rate of 0 is refused by the lab).
fn rate(x: f64) -> String {
    if !(x.is_finite() && x > 0.0) {
        return "0.0".into();
    }
    let digits = (5 - x.log10().floor() as i32).clamp(1, 20) as usize;
    format!("{x:.digits$}")
}

/// A TOML string.
fn string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The service time's points: the fixed quantiles from the histogram, then the slowest calls
/// at their own ranks (so a rare long call keeps its weight in the mean), and the slowest.
fn points(health: &passes::Health) -> Vec<(f64, u64)> {
    let n = health.latency.total().max(1) as f64;
    let mut points: Vec<(f64, u64)> = QUANTILES
        .iter()
        .map(|&q| {
            let nanos = match q {
                0.0 => health.fastest as f64,
                q => health.latency.quantile(q).unwrap_or(0.0),
            };
            (q, nanos.round().max(1.0) as u64)
        })
        .collect();
    // The r-th slowest call is the quantile 1 − r/n.
    for r in [64usize, 32, 16, 8, 4, 2] {
        if let Some(&d) = health.top.get(r - 1) {
            let q = 1.0 - r as f64 / n;
            if q > points.last().map_or(0.0, |p| p.0) {
                points.push((q, d));
            }
        }
    }
    points.push((1.0, health.slowest.max(1)));
    // The histogram's buckets may put a quantile past its neighbours: keep them rising.
    for i in 1..points.len() {
        points[i].1 = points[i].1.max(points[i - 1].1);
    }
    points
}

/// Fits a scenario named `name` to `record`, read to its end, and then again from its start
/// as `again` opens it; the scenario compares `candidate`. `source` names the record in the
/// scenario's description.
pub fn fit<R: BufRead, S: BufRead>(
    record: &mut Record<R>,
    again: impl FnOnce() -> Result<Record<S>, String>,
    name: &str,
    source: &str,
    candidate: &Candidate,
    options: &Options,
) -> Result<Fitted, String> {
    if !options.phase.is_multiple_of(1_000_000_000)
        || !(1..=3600).contains(&(options.phase / 1_000_000_000))
    {
        return Err("a phase is whole seconds, from 1 s to 1 h".into());
    }
    let phase_seconds = options.phase / 1_000_000_000;
    let shape = passes::first(record, options.bin, phase_seconds)?;
    let (incidents, usual) = shape
        .bins
        .incidents(options.incident_errors, options.incident_slowdown);
    let mut again = again()?;
    let health = passes::second(
        &mut again,
        shape.origin,
        &incidents,
        options.bin,
        usual,
        options.incident_errors,
    )?;
    if health.latency.total() == 0 {
        return Err("no success outside the incidents: nothing to fit the latency to".into());
    }
    // The phases cover every second from the first call's to the last call's start.
    let span = shape.phases.iter().map(|p| p.seconds).sum::<u64>().max(1);
    let mean_rate = shape.calls as f64 / span as f64;
    let pods = shape.pod_calls.len().max(1);
    // Bunched arrivals spread the pods' counts by chance too: by the phases' bursts, weighed
    // by their calls.
    let burst = shape
        .phases
        .iter()
        .map(|p| p.burst() as f64 * p.calls as f64)
        .sum::<f64>()
        / shape.calls.max(1) as f64;
    let unevenness = passes::unevenness(&shape.pod_calls, burst);
    let busiest = shape
        .phases
        .iter()
        .map(|p| p.busiest as f64)
        .fold(0.0, f64::max)
        .max(mean_rate);
    let replicas = shape.hosts.max(1);
    let error_rate = health.failures as f64 / health.known.max(1) as f64;
    let points = points(&health);
    let written: Vec<(f64, String)> = points.iter().map(|(q, n)| (*q, exact(*n))).collect();
    let service = ServiceTime::quantiles(&written)?;
    let mean = service.mean_secs();
    // Ten times the busiest second; at least a worker a replica; at most what the model
    // holds.
    let least = replicas as f64 / mean;
    let most = 0.9 * crate::dependency::MAX_WORKERS / mean;
    if least > most {
        return Err(format!(
            "{replicas} hosts of a mean service time of {}: more workers than the model holds",
            cutout::HumanDuration(Duration::from_secs_f64(mean))
        ));
    }
    let capacity = (10.0 * busiest).clamp(least, most).ceil();
    let longest = Duration::from_nanos(shape.longest).mul_f64(1.2);
    let timeout = longest.clamp(Duration::from_millis(1), FleetSpec::MAX_WAIT);
    let start_time = std::time::UNIX_EPOCH + Duration::from_nanos(shape.origin);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Fitted by `cutout-lab fit` from {}: {} calls over {} from {}.\n\
         # Edit freely: capacity especially (a record shows the load met, not the load the\n\
         # dependency could take).",
        source.replace(['\n', '\r'], " "),
        shape.calls,
        cutout::HumanDuration(Duration::from_secs(span)),
        humantime::format_rfc3339_seconds(start_time),
    );
    let _ = writeln!(out, "name = {}", string(name));
    let _ = writeln!(
        out,
        "description = {}",
        string(&format!(
            "fitted from {source}: {} incidents",
            incidents.len()
        ))
    );
    let _ = writeln!(out, "seed = 1\nduration = \"{span}s\"\n");
    let _ = writeln!(out, "[dependency]");
    let _ = writeln!(
        out,
        "# The successes' durations outside the incidents, fastest to slowest, the slowest\n\
         # at their own ranks (mean {} recorded, {} as drawn from these points).",
        cutout::HumanDuration(Duration::from_nanos(health.mean.round() as u64)),
        cutout::HumanDuration(Duration::from_secs_f64(mean)),
    );
    let list: Vec<String> = written
        .iter()
        .map(|(q, d)| format!("[{q:?}, \"{d}\"]"))
        .collect();
    let _ = writeln!(out, "latency-quantiles = [\n  {},\n]", list.join(",\n  "));
    let _ = writeln!(
        out,
        "# Failed calls outside the incidents: {} of {}.\nerror-rate = {error_rate:.6}",
        health.failures, health.known
    );
    let why = if capacity <= least.ceil() {
        "a worker a replica, more than ten times its busiest second"
    } else if capacity >= most.floor() {
        "the most the model holds, less than ten times its busiest second"
    } else {
        "ten times its busiest second"
    };
    let _ = writeln!(
        out,
        "# Not in the record: {why} ({busiest:.0} calls).\ncapacity = {capacity}"
    );
    if replicas > 1 {
        let _ = writeln!(
            out,
            "# One per host the record names.\nreplicas = {replicas}"
        );
    }
    let capped = if timeout < longest {
        " (capped at the lab's longest)"
    } else {
        ""
    };
    let callers = if pods > 1 {
        format!("The {pods} pods the record names, sharing its mean rate")
    } else {
        "One caller at the record's mean rate".to_owned()
    };
    let _ = writeln!(
        out,
        "\n[fleet]\n# {callers}; a retry is a call of its own; the\n\
         # timeout 1.2 times the slowest call{capped}.\npods = {pods}\nrate = {}\ntimeout = \"{}\"\n\
         retries = 0",
        rate(mean_rate / pods as f64),
        exact(u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX) * 1000)
    );
    if unevenness > 0.0 {
        let capped = unevenness.min(FleetSpec::MAX_UNEVENNESS);
        let _ = writeln!(
            out,
            "# The pods' own rates spread beyond chance: their coefficient of variation{}.\n\
             unevenness = {capped:.3}",
            if capped < unevenness {
                format!(" ({unevenness:.2}, capped at the lab's most)")
            } else {
                String::new()
            }
        );
    }
    for phase in &shape.phases {
        let burst = phase.burst();
        let _ = writeln!(
            out,
            "\n[[phases]]\nduration = \"{}s\"\nrate = {}{}",
            phase.seconds.max(1),
            rate(phase.calls as f64 / phase.seconds.max(1) as f64 / pods as f64),
            if burst > 1 {
                format!("\nburst = {burst}")
            } else {
                String::new()
            }
        );
    }
    for (incident, span) in incidents.iter().zip(&health.spans) {
        let share = span.failures as f64 / span.calls.max(1) as f64;
        let (kind, extra) = if incident.failing && share >= 0.9 {
            if span.slow_failures * 2 > span.failures {
                ("hang", String::new())
            } else {
                ("outage", String::new())
            }
        } else if incident.failing {
            // The lab fails a call at 1 − (1 − base)(1 − extra).
            let extra = ((share - error_rate) / (1.0 - error_rate)).clamp(0.0, 1.0);
            ("error-spike", format!("\nerror-rate = {extra:.4}"))
        } else {
            (
                "brownout",
                format!("\nlatency-factor = {:.2}", incident.slowdown.max(1.0)),
            )
        };
        let _ = writeln!(
            out,
            "\n[[incidents]]\n# {} of {} calls failed; {:.1}× the usual duration.\n\
             kind = \"{kind}\"\nstart = \"{}\"\nduration = \"{}\"{extra}",
            span.failures,
            span.calls,
            incident.slowdown,
            exact(span.start),
            exact((span.end - span.start).max(1)),
        );
    }
    let _ = writeln!(
        out,
        "\n# The settings compared. Add [breakers.instances.<name>] to compare more, or run\n\
         # with --sweep KEY=V1,V2.\n[breakers.instances.{}]\n{}",
        candidate.name,
        toml::to_string(&candidate.block)
            .unwrap_or_default()
            .trim_end()
    );
    Ok(Fitted {
        scenario: out,
        calls: shape.calls,
        incidents,
    })
}
