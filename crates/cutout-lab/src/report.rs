//! The report: the numbers that tell breaker settings apart, computed from a run and printed as
//! a table with one column per setting.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use cutout::{State, Transition};

use crate::scenario::Scenario;
use crate::sim::{Counts, Run};

const SECOND: u64 = 1_000_000_000;

/// A second counts as full traffic when at least this share of attempts was admitted.
pub const FULL_TRAFFIC: f64 = 0.99;

/// The report of one setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// The setting's name.
    pub setting: String,
    /// From the first incident's start to the first trip (a breaker opening from closed or
    /// recovering) at or after it; `None` when no breaker tripped or there is no incident.
    pub time_to_trip: Option<Duration>,
    /// Pods that tripped at or after the first incident's start.
    pub pods_tripped: u32,
    /// Attempts admitted while a failing incident was in force.
    pub reached_failing: u64,
    /// Refused attempts that would have succeeded.
    pub refused_would_succeed: u64,
    /// The largest number of probes admitted fleet-wide within any 1 s.
    pub max_probes_per_second: u32,
    /// From the dependency's recovery to full traffic: the end of the last second, before
    /// the run ends, in which fewer than [`FULL_TRAFFIC`] of the attempts were admitted.
    /// `None` when there is no recovery, or traffic was still not full in the run's last
    /// second.
    pub recovery_to_full: Option<Duration>,
    /// Trips: breakers opening from closed or recovering (not probes re-opening).
    pub trips: u32,
    /// Trips of a pod that had already tripped earlier in the run.
    pub re_trips: u32,
    /// Trips while no incident was in force.
    pub false_trips: u32,
    /// Breakers re-opened from half-open (failed, slow or timed-out probes).
    pub probe_reopens: u32,
    /// Every opening (trips and probe re-opens) by reason, sorted by reason name.
    pub reasons: BTreeMap<&'static str, u32>,
    /// The totals of the run.
    pub counts: Counts,
}

impl Metrics {
    /// Computes the metrics of `run`, a run of `scenario`.
    pub fn of(scenario: &Scenario, run: &Run) -> Metrics {
        let script = &scenario.script;
        let start = script.start().map(|d| d.as_nanos() as u64);
        let mut tripped = vec![0u32; scenario.traffic.pods as usize];
        let mut pods_after = vec![false; scenario.traffic.pods as usize];
        let mut m = Metrics {
            setting: run.setting.clone(),
            time_to_trip: None,
            pods_tripped: 0,
            reached_failing: run.counts.reached_failing,
            refused_would_succeed: run.counts.refused_would_succeed,
            max_probes_per_second: max_in_window(&run.probe_times, SECOND),
            recovery_to_full: None,
            trips: 0,
            re_trips: 0,
            false_trips: 0,
            probe_reopens: 0,
            reasons: BTreeMap::new(),
            counts: run.counts,
        };
        for t in &run.transitions {
            let Transition::Opened { from, reason, .. } = t.transition else {
                continue;
            };
            *m.reasons.entry(reason.as_str()).or_default() += 1;
            if from == State::HalfOpen {
                m.probe_reopens += 1;
                continue;
            }
            m.trips += 1;
            let pod = t.pod as usize;
            if tripped[pod] > 0 {
                m.re_trips += 1;
            }
            tripped[pod] += 1;
            if !script.any_active(Duration::from_nanos(t.at)) {
                m.false_trips += 1;
            }
            if let Some(start) = start.filter(|&s| t.at >= s) {
                if m.time_to_trip.is_none() {
                    m.time_to_trip = Some(Duration::from_nanos(t.at - start));
                }
                pods_after[pod] = true;
            }
        }
        m.pods_tripped = pods_after.iter().filter(|&&p| p).count() as u32;
        m.recovery_to_full = script
            .recovery()
            .and_then(|r| recovery_to_full(run, r, scenario.duration));
        m
    }
}

/// One figure of a report, as a number: what [`Metrics::figures`] lists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// The row label (stable: the multi-seed table and the sweep key on it).
    pub name: &'static str,
    /// The value; `None` where the figure does not exist in this run (no trip, no recovery).
    pub value: Option<f64>,
    /// Whether larger is better (`Some(true)`), worse (`Some(false)`), or neither (`None`).
    pub better: Option<bool>,
}

impl Metrics {
    /// Every figure of this report as a number, in table order: what a report over many
    /// seeds averages.
    pub fn figures(&self) -> Vec<Figure> {
        let c = &self.counts;
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        let figure = |name, value, better| Figure {
            name,
            value,
            better,
        };
        vec![
            figure(
                "first trip after incident start (s)",
                secs(self.time_to_trip),
                None,
            ),
            figure(
                "pods tripped after incident start",
                Some(f64::from(self.pods_tripped)),
                None,
            ),
            figure(
                "calls that reached the failing dependency",
                Some(self.reached_failing as f64),
                Some(false),
            ),
            figure(
                "refused calls that would have succeeded",
                Some(self.refused_would_succeed as f64),
                Some(false),
            ),
            figure(
                "most probes reaching it in any 1 s",
                Some(f64::from(self.max_probes_per_second)),
                Some(false),
            ),
            figure(
                "recovery to full traffic (s)",
                secs(self.recovery_to_full),
                Some(false),
            ),
            figure("trips", Some(f64::from(self.trips)), None),
            figure("re-trips", Some(f64::from(self.re_trips)), Some(false)),
            figure(
                "trips with no incident in force",
                Some(f64::from(self.false_trips)),
                Some(false),
            ),
            figure(
                "probes that re-opened",
                Some(f64::from(self.probe_reopens)),
                None,
            ),
            figure("requests", Some(c.requests as f64), None),
            figure(
                "requests that succeeded",
                share(c.requests_ok, c.requests),
                Some(true),
            ),
            figure("attempts refused", share(c.refused, c.attempts), None),
            figure(
                "attempts timed out",
                share(c.attempts_timed_out, c.attempts),
                Some(false),
            ),
        ]
    }
}

/// The most timestamps (sorted) within any window of `width`.
pub fn max_in_window(times: &[u64], width: u64) -> u32 {
    let mut first = 0;
    let mut best = 0;
    for (last, &t) in times.iter().enumerate() {
        while t - times[first] >= width {
            first += 1;
        }
        best = best.max(last - first + 1);
    }
    best as u32
}

fn recovery_to_full(run: &Run, recovery: Duration, duration: Duration) -> Option<Duration> {
    let from = (recovery.as_secs_f64()).floor() as usize;
    let last = (duration.as_secs_f64().ceil() as usize).min(run.timeline.len());
    if from >= last {
        return None;
    }
    let short = (from..last).rev().find(|&s| {
        let second = &run.timeline[s];
        f64::from(second.admitted) < FULL_TRAFFIC * f64::from(second.offered)
    });
    match short {
        None => Some(Duration::ZERO),
        Some(s) if s + 1 >= last => None,
        Some(s) => Some(Duration::from_secs(s as u64 + 1).saturating_sub(recovery)),
    }
}

/// A table row: its label and how to compute its cell.
type Row = (&'static str, Box<dyn Fn(&Metrics) -> String>);

fn secs(d: Option<Duration>, none: &str) -> String {
    d.map_or_else(|| none.to_owned(), |d| format!("{:.1}", d.as_secs_f64()))
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.2}%", 100.0 * part as f64 / whole as f64)
}

/// The report of a scenario's settings as a table: one row per metric, one column per
/// setting.
pub fn table(scenario: &Scenario, metrics: &[Metrics]) -> String {
    let mut out = String::new();
    let t = &scenario.traffic;
    let _ = writeln!(
        out,
        "scenario {}: {} pods x {} req/s, timeout {:?}, {} retr{}, seed {}, {} s simulated",
        scenario.name,
        t.pods,
        t.rate,
        t.timeout,
        t.retries,
        if t.retries == 1 { "y" } else { "ies" },
        scenario.seed,
        scenario.duration.as_secs()
    );
    if !scenario.description.is_empty() {
        let _ = writeln!(out, "  {}", scenario.description);
    }
    for i in scenario.script.incidents() {
        let _ = writeln!(
            out,
            "  incident {:?} from {} s to {} s",
            i.kind,
            i.start.as_secs_f64(),
            i.end().as_secs_f64()
        );
    }
    if let Some(r) = scenario.script.recovery() {
        let _ = writeln!(out, "  dependency recovers at {} s", r.as_secs_f64());
    }
    let rows: Vec<Row> = vec![
        (
            "first trip after incident start (s)",
            Box::new(|m| secs(m.time_to_trip, "never")),
        ),
        (
            "pods tripped after incident start",
            Box::new(|m| m.pods_tripped.to_string()),
        ),
        (
            "calls that reached the failing dependency",
            Box::new(|m| m.reached_failing.to_string()),
        ),
        (
            "refused calls that would have succeeded",
            Box::new(|m| m.refused_would_succeed.to_string()),
        ),
        (
            "most probes reaching it in any 1 s",
            Box::new(|m| m.max_probes_per_second.to_string()),
        ),
        (
            "recovery to full traffic (s)",
            Box::new(|m| secs(m.recovery_to_full, "not within run")),
        ),
        ("trips", Box::new(|m| m.trips.to_string())),
        ("re-trips", Box::new(|m| m.re_trips.to_string())),
        (
            "trips with no incident in force",
            Box::new(|m| m.false_trips.to_string()),
        ),
        (
            "probes that re-opened",
            Box::new(|m| m.probe_reopens.to_string()),
        ),
        ("requests", Box::new(|m| m.counts.requests.to_string())),
        (
            "requests that succeeded",
            Box::new(|m| percent(m.counts.requests_ok, m.counts.requests)),
        ),
        (
            "attempts refused",
            Box::new(|m| percent(m.counts.refused, m.counts.attempts)),
        ),
        (
            "attempts timed out",
            Box::new(|m| percent(m.counts.attempts_timed_out, m.counts.attempts)),
        ),
    ];
    let label_width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(_, f)| metrics.iter().map(f).collect())
        .collect();
    let widths: Vec<usize> = metrics
        .iter()
        .enumerate()
        .map(|(c, m)| {
            cells
                .iter()
                .map(|row| row[c].len())
                .max()
                .unwrap_or(0)
                .max(m.setting.len())
        })
        .collect();
    let _ = write!(out, "\n{:label_width$}", "");
    for (m, w) in metrics.iter().zip(&widths) {
        let _ = write!(out, "  {:>w$}", m.setting);
    }
    out.push('\n');
    for ((label, _), row) in rows.iter().zip(&cells) {
        let _ = write!(out, "{label:label_width$}");
        for (cell, w) in row.iter().zip(&widths) {
            let _ = write!(out, "  {cell:>w$}");
        }
        out.push('\n');
    }
    out.push_str("\nopenings by reason:\n");
    for m in metrics {
        let list: Vec<String> = m.reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
        let list = if list.is_empty() {
            "none".to_owned()
        } else {
            list.join(", ")
        };
        let _ = writeln!(out, "  {}: {list}", m.setting);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_counts_within_one_second() {
        let s = SECOND;
        assert_eq!(max_in_window(&[], s), 0);
        assert_eq!(max_in_window(&[0, s - 1, s, 2 * s + 5], s), 2);
        assert_eq!(max_in_window(&[10, 20, 30, s + 9], s), 4);
    }
}
