//! `cutout-lab fit`: a scenario fitted to a service's own record of calls to one dependency
//! (the shapes of [`crate::record`]), so the simulation runs on that traffic instead of a
//! guessed one.
//!
//! # What is fitted
//! The record is read twice (a file, not a stream):
//! - **arrivals**: one `[[phases]]` entry per `--phase` (5 min) of the record, each with the
//!   rate the record had then, and a `burst` where its calls came in bunches: the variance of
//!   its per-second counts over their mean (1 for Poisson arrivals, b for bunches of b),
//!   rounded;
//! - **the incidents**: those the replay finds ([`crate::replay`], "Incidents"), each written
//!   as an `outage` (at least 90% failed, fast), a `hang` (at least 90% failed, most of them
//!   more than 10 times slower than usual: timeouts), an `error-spike` (fewer failed: the
//!   share beyond the usual error rate) or a `brownout` (slow only: its slowdown);
//! - **the dependency** outside the incidents: its service time as the recorded
//!   distribution of the successes' durations (`latency-quantiles`, 19 points from the
//!   fastest to the slowest, so a bimodal latency and the tail past p99 are kept), its
//!   error rate, and one replica per host the record names;
//! - **the fleet**: one pod (a record is one caller's view) at the record's mean rate, with a
//!   timeout a little over the slowest call recorded, no retries (a retry is in the record as
//!   a call of its own).
//!
//! # What is not
//! The dependency's capacity: a record shows the load it met, not the load it could take, so
//! the scenario gives it ten times the busiest phase (the busiest second for `burst`s), and
//! says so; set it to what you know. Durations are what the caller saw, network and queueing
//! included, where the model's service time has no queue: at a busy dependency the fitted
//! latency is a little high. Several pods, and unevenness between them, need a pod column the
//! shapes do not have.

use std::fmt::Write as _;
use std::io::BufRead;
use std::time::Duration;

use crate::latency::Histogram;
use crate::record::{Answer, Record};
use crate::replay::{Bins, Candidate, Incident};

/// How a fit reads the record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// The incidents' bin width, in nanoseconds.
    pub bin: u64,
    /// One phase's length, in nanoseconds.
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

/// The quantiles written for the service time.
const QUANTILES: [f64; 19] = [
    0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999,
    0.9999, 1.0,
];

/// One phase of the record: its calls, and its per-second counts' sums.
#[derive(Debug, Clone, Copy, Default)]
struct Phase {
    calls: u64,
    seconds: u64,
    sum_sq: f64,
    busiest: u64,
}

/// The first pass: the record's span, phases and bins.
struct Shape {
    origin: u64,
    end: u64,
    phases: Vec<Phase>,
    bins: Bins,
    hosts: usize,
    calls: u64,
    longest: u64,
}

/// Per-second counts into phases: call [`Seconds::tick`] with each call's second.
struct Seconds {
    current: u64,
    count: u64,
}

impl Seconds {
    fn close(&mut self, phases: &mut Vec<Phase>, per_phase: u64, until: u64) {
        // The current second, then every empty one until `until`.
        while self.current < until {
            let p = usize::try_from(self.current / per_phase).unwrap_or(usize::MAX);
            if phases.len() <= p {
                phases.resize(p + 1, Phase::default());
            }
            let phase = &mut phases[p];
            phase.seconds += 1;
            phase.sum_sq += (self.count * self.count) as f64;
            phase.busiest = phase.busiest.max(self.count);
            self.count = 0;
            self.current += 1;
        }
    }
}

/// The most phases a fit writes.
pub const MAX_PHASES: u64 = 2016;

fn first_pass<R: BufRead>(record: &mut Record<R>, options: &Options) -> Result<Shape, String> {
    let per_phase = (options.phase / 1_000_000_000).max(1);
    let mut shape = Shape {
        origin: 0,
        end: 0,
        phases: Vec::new(),
        bins: Bins::new(options.bin),
        hosts: 0,
        calls: 0,
        longest: 0,
    };
    let mut seconds = Seconds {
        current: 0,
        count: 0,
    };
    let mut origin = None;
    while let Some(call) = record.next_call()? {
        let origin = *origin.get_or_insert(call.start);
        let start = call.start - origin;
        let second = start / 1_000_000_000;
        if second / per_phase >= MAX_PHASES {
            return Err(format!(
                "line {}: past {MAX_PHASES} phases of {per_phase} s; give a longer --phase",
                call.line
            ));
        }
        seconds.close(&mut shape.phases, per_phase, second);
        seconds.count += 1;
        let p = usize::try_from(second / per_phase).unwrap_or(usize::MAX);
        if shape.phases.len() <= p {
            shape.phases.resize(p + 1, Phase::default());
        }
        shape.phases[p].calls += 1;
        shape
            .bins
            .add(start, call.duration, call.answer)
            .map_err(|e| format!("line {}: {e}", call.line))?;
        shape.end = shape.end.max(start.saturating_add(call.duration));
        shape.longest = shape.longest.max(call.duration);
        shape.calls += 1;
    }
    let Some(origin) = origin else {
        return Err("the record holds no call to fit".into());
    };
    let last = seconds.current + 1;
    seconds.close(&mut shape.phases, per_phase, last);
    shape.origin = origin;
    shape.hosts = record.hosts().len();
    Ok(shape)
}

/// What the second pass measures outside and inside the incidents.
struct Health {
    latency: Histogram,
    fastest: u64,
    slowest: u64,
    known: u64,
    failures: u64,
    /// Per incident: its failures, and how many of them took over 10 times the usual.
    failed_slow: Vec<(u64, u64)>,
}

fn second_pass<R: BufRead>(
    record: &mut Record<R>,
    origin: u64,
    incidents: &[Incident],
    usual: f64,
) -> Result<Health, String> {
    let mut health = Health {
        latency: Histogram::default(),
        fastest: u64::MAX,
        slowest: 0,
        known: 0,
        failures: 0,
        failed_slow: vec![(0, 0); incidents.len()],
    };
    while let Some(call) = record.next_call()? {
        let start = call.start.saturating_sub(origin);
        if let Some(i) = incidents
            .iter()
            .position(|i| (i.start..i.end).contains(&start))
        {
            if call.answer == Answer::Failure {
                health.failed_slow[i].0 += 1;
                health.failed_slow[i].1 += u64::from(call.duration as f64 > 10.0 * usual);
            }
            continue;
        }
        match call.answer {
            Answer::Success => {
                health.known += 1;
                health.latency.add(call.duration / 1000);
                health.fastest = health.fastest.min(call.duration);
                health.slowest = health.slowest.max(call.duration);
            }
            Answer::Failure => {
                health.known += 1;
                health.failures += 1;
            }
            Answer::Unknown => {}
        }
    }
    Ok(health)
}

/// A fitted scenario: its text, and what was fitted, for the user.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The scenario file's text.
    pub scenario: String,
    /// The record's calls.
    pub calls: u64,
    /// The incidents found.
    pub incidents: Vec<Incident>,
}

/// Microseconds, as a scenario writes a duration exactly (`1234us`).
fn micros(nanos: f64) -> String {
    format!("{}us", (nanos / 1000.0).round().max(1.0) as u64)
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
    let shape = first_pass(record, options)?;
    let (incidents, usual) = shape
        .bins
        .incidents(options.incident_errors, options.incident_slowdown);
    let mut again = again()?;
    let health = second_pass(&mut again, shape.origin, &incidents, usual)?;
    if health.latency.total() == 0 {
        return Err("no success outside the incidents: nothing to fit the latency to".into());
    }
    // The phases cover every second from the first call's to the last call's start.
    let span = shape.phases.iter().map(|p| p.seconds).sum::<u64>().max(1);
    let per_phase = (options.phase / 1_000_000_000).max(1);
    let mean_rate = shape.calls as f64 / span as f64;
    let busiest = shape
        .phases
        .iter()
        .map(|p| p.busiest as f64)
        .fold(0.0, f64::max)
        .max(mean_rate);
    let replicas = shape.hosts.max(1);
    let error_rate = health.failures as f64 / health.known.max(1) as f64;
    let mut points: Vec<(f64, f64)> = QUANTILES
        .iter()
        .map(|&q| {
            let nanos = match q {
                0.0 => health.fastest as f64,
                1.0 => health.slowest as f64,
                q => health.latency.quantile(q).unwrap_or(0.0) * 1000.0,
            };
            (q, nanos.max(1000.0))
        })
        .collect();
    // The histogram's buckets may put a quantile past its neighbours: keep them rising.
    for i in 1..points.len() {
        points[i].1 = points[i].1.max(points[i - 1].1);
    }
    let mean_service: f64 = points
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum::<f64>()
        / 1e9;
    // Ten times the busiest second, and enough that each replica has a worker.
    let capacity = (10.0 * busiest)
        .max(replicas as f64 / mean_service.max(1e-9))
        .ceil();
    let timeout = (Duration::from_nanos(shape.longest).as_secs_f64() * 1.2)
        .max(1.0)
        .ceil() as u64;
    let start_time = std::time::UNIX_EPOCH + Duration::from_nanos(shape.origin);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Fitted by `cutout-lab fit` from {source}: {} calls over {} from {}.\n\
         # Edit freely: capacity especially (a record shows the load met, not the load the\n\
         # dependency could take).",
        shape.calls,
        cutout::HumanDuration(Duration::from_secs(span)),
        humantime::format_rfc3339_seconds(start_time),
    );
    let _ = writeln!(out, "name = {:?}", name);
    let _ = writeln!(
        out,
        "description = \"fitted from {}: {} incidents\"",
        source.replace('"', "'"),
        incidents.len()
    );
    let _ = writeln!(out, "seed = 1\nduration = \"{span}s\"\n");
    let _ = writeln!(out, "[dependency]");
    let _ = writeln!(
        out,
        "# The successes' durations outside the incidents, fastest to slowest (p0 … p100)."
    );
    let list: Vec<String> = points
        .iter()
        .map(|(q, n)| format!("[{q:?}, \"{}\"]", micros(*n)))
        .collect();
    let _ = writeln!(out, "latency-quantiles = [\n  {},\n]", list.join(",\n  "));
    let _ = writeln!(
        out,
        "# Failed calls outside the incidents: {} of {}.\nerror-rate = {error_rate:.6}",
        health.failures, health.known
    );
    let _ = writeln!(
        out,
        "# Not in the record: ten times its busiest second ({busiest:.0} calls).\n\
         capacity = {capacity}"
    );
    if replicas > 1 {
        let _ = writeln!(
            out,
            "# One per host the record names.\nreplicas = {replicas}"
        );
    }
    let _ = writeln!(
        out,
        "\n[fleet]\n# One caller at the record's mean rate; a retry is a call of its own.\n\
         pods = 1\nrate = {mean_rate:.4}\ntimeout = \"{timeout}s\"\nretries = 0"
    );
    for phase in &shape.phases {
        let rate = phase.calls as f64 / phase.seconds.max(1) as f64;
        let seconds = phase.seconds.max(1) as f64;
        let mean = phase.calls as f64 / seconds;
        let variance = (phase.sum_sq / seconds - mean * mean).max(0.0);
        let burst = if mean > 0.0 {
            (variance / mean).round().clamp(1.0, 10_000.0) as u64
        } else {
            1
        };
        let _ = writeln!(
            out,
            "\n[[phases]]\nduration = \"{}s\"\nrate = {rate:.4}{}",
            phase.seconds.max(1).min(per_phase),
            if burst > 1 {
                format!("\nburst = {burst}")
            } else {
                String::new()
            }
        );
    }
    for (incident, (failed, slow)) in incidents.iter().zip(&health.failed_slow) {
        let share = incident.failures as f64 / incident.calls.max(1) as f64;
        let (kind, extra) = if incident.failing && share >= 0.9 {
            if *slow * 2 > *failed {
                ("hang", String::new())
            } else {
                ("outage", String::new())
            }
        } else if incident.failing {
            (
                "error-spike",
                format!("\nerror-rate = {:.4}", (share - error_rate).clamp(0.0, 1.0)),
            )
        } else {
            (
                "brownout",
                format!("\nlatency-factor = {:.2}", incident.slowdown.max(1.0)),
            )
        };
        let _ = writeln!(
            out,
            "\n[[incidents]]\n# {} of {} calls failed; {:.1}× the usual duration.\n\
             kind = \"{kind}\"\nstart = \"{}s\"\nduration = \"{}s\"{extra}",
            incident.failures,
            incident.calls,
            incident.slowdown,
            incident.start / 1_000_000_000,
            ((incident.end - incident.start) / 1_000_000_000).max(1),
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
