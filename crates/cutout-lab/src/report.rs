//! The report: the numbers that tell breaker settings apart, computed from a run and printed as
//! a table with one column per setting.
//!
//! Most figures come from one run alone; the decision-quality figures read a run against the
//! oracle's run of the same seed (goodput regret, time to give traffic back: see
//! [`crate::oracle`]), and are filled in by [`Metrics::read_against_oracle`] once both ran.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use cutout::{BreakEndReason, State, Transition};

use crate::incident::Incident;
use crate::latency::Histogram;
use crate::oracle::AgainstOracle;
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
    /// Refused attempts that would have succeeded (the what-if copy's judgement).
    pub refused_would_succeed: u64,
    /// Refused attempts that would have succeeded had they alone been sent (the oracle's
    /// judgement, [`Counts::refused_would_succeed_alone`]).
    pub refused_would_succeed_alone: u64,
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
    /// Trips on a healthy dependency: no incident on the breaker's replicas (its own replica,
    /// for a breaker per replica) over the outcomes the trip judged (its run's
    /// [`Run::window_reach`] back), and no queue at the dependency (a call reaching any
    /// replica at the start of the trip's second or of the next would have waited less than a
    /// healthy call's mean service time).
    pub false_trips: u32,
    /// Trips on a healthy dependency ([`Metrics::false_trips`]) per 100 pod-hours simulated:
    /// false trips / (pods × hours) × 100, the rate a fleet meets them at.
    pub false_trips_per_100_pod_hours: f64,
    /// Trips with no incident in force that judged outcomes of one that had just ended, or
    /// while the dependency still worked off the queue one left.
    pub trips_after_incident: u32,
    /// Trips with no incident in force or just ended, while the dependency queued its calls:
    /// load above its capacity.
    pub trips_overloaded: u32,
    /// Of the false trips, those on a busy dependency: no incident, a queue, but one shorter
    /// than the callers' timeout (their latency budget), so the calls it served were answered
    /// in time.
    pub trips_busy: u32,
    /// Breakers re-opened from half-open (failed, slow or timed-out probes).
    pub probe_reopens: u32,
    /// Breaks ended early because a peer's probes closed its breaker (fleet recovery,
    /// `[fleet-signals]`; see [`crate::signals`]).
    pub peer_releases: u32,
    /// Every opening (trips and probe re-opens) by reason, sorted by reason name.
    pub reasons: BTreeMap<&'static str, u32>,
    /// Successful requests per second over the whole run.
    pub goodput: f64,
    /// Successful requests per second from the first incident's start to the run's end
    /// (`None` without an incident).
    pub goodput_in_trouble: Option<f64>,
    /// Caller-side latency of every request (arrival to end), median and 99th percentile.
    pub latency_p50: Option<Duration>,
    /// See [`Metrics::latency_p50`].
    pub latency_p99: Option<Duration>,
    /// The 99th percentile of successful requests only.
    pub ok_latency_p99: Option<Duration>,
    /// The fleet's return step: after the dependency's recovery, the largest rise in
    /// admitted calls from one second to the next, in calls per second.
    pub return_step: Option<u32>,
    /// The totals of the run.
    pub counts: Counts,
    /// Whether the caller-side models were on: (`[saturation]`, `[connections]`).
    pub caller_models: (bool, bool),
    /// Whether this is the oracle's column ([`crate::oracle`]).
    pub oracle: bool,
    /// This run read against the oracle of its seed; `None` for the oracle itself, and until
    /// [`Metrics::read_against_oracle`] fills it in.
    pub against_oracle: Option<AgainstOracle>,
}

impl Metrics {
    /// Computes the metrics of `run`, a run of `scenario`.
    pub fn of(scenario: &Scenario, run: &Run) -> Metrics {
        let script = &scenario.script;
        let start = script.start().map(|d| d.as_nanos() as u64);
        // A queue counts when a call would wait at least as long as a healthy call takes.
        let backlog_floor = (scenario.dependency.mean_service().as_millis() as u64).max(1);
        // The callers' latency budget: a queue shorter than their timeout still answers them
        // in time, so a trip on it blames a dependency that did nothing wrong.
        let budget_ms = scenario.traffic.timeout.as_millis() as u64;
        let mut tripped = vec![0u32; scenario.traffic.pods as usize];
        let mut pods_after = vec![false; scenario.traffic.pods as usize];
        let pod_hours = f64::from(scenario.traffic.pods) * scenario.duration.as_secs_f64() / 3600.0;
        let mut m = Metrics {
            false_trips_per_100_pod_hours: 0.0,
            setting: run.setting.clone(),
            time_to_trip: None,
            pods_tripped: 0,
            reached_failing: run.counts.reached_failing,
            refused_would_succeed: run.counts.refused_would_succeed,
            refused_would_succeed_alone: run.counts.refused_would_succeed_alone,
            max_probes_per_second: max_in_window(&run.probe_times, SECOND),
            recovery_to_full: None,
            trips: 0,
            re_trips: 0,
            false_trips: 0,
            trips_after_incident: 0,
            trips_overloaded: 0,
            trips_busy: 0,
            probe_reopens: 0,
            peer_releases: 0,
            reasons: BTreeMap::new(),
            goodput: goodput(run, 0, scenario.duration),
            goodput_in_trouble: script
                .start()
                .map(|start| goodput(run, start.as_secs() as usize, scenario.duration)),
            latency_p50: quantile(&run.latencies, 0.5),
            latency_p99: quantile(&run.latencies, 0.99),
            ok_latency_p99: quantile(&run.ok_latencies, 0.99),
            return_step: script
                .recovery()
                .map(|r| return_step(run, r.as_secs() as usize)),
            counts: run.counts,
            caller_models: (false, false),
            oracle: run.oracle,
            against_oracle: None,
        };
        for t in &run.transitions {
            if let Transition::BreakEnded {
                reason: BreakEndReason::PeerRecovered,
                ..
            } = t.transition
            {
                m.peer_releases += 1;
            }
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
            let at = Duration::from_nanos(t.at);
            // The incidents this breaker's calls met: a breaker per replica meets its replica's
            // only.
            let met = |i: &&Incident| t.replica.is_none_or(|r| i.hits(r));
            let incidents = || script.incidents().iter().filter(met);
            if !incidents().any(|i| i.active_at(at)) {
                let from = at.saturating_sub(run.window_reach);
                let judged_incident = incidents().any(|i| i.start <= at && i.end() > from);
                let ended_before = incidents().any(|i| i.end() <= at);
                let second = (t.at / SECOND) as usize;
                let queueing = |s: usize, floor: u64| {
                    run.timeline
                        .get(s)
                        .is_some_and(|s| u64::from(s.backlog_ms) >= floor)
                };
                let queue = queueing(second, backlog_floor) || queueing(second + 1, backlog_floor);
                let over_budget = queueing(second, budget_ms) || queueing(second + 1, budget_ms);
                if judged_incident || (queue && ended_before) {
                    m.trips_after_incident += 1;
                } else if over_budget {
                    m.trips_overloaded += 1;
                } else {
                    m.false_trips += 1;
                    m.trips_busy += u32::from(queue);
                }
            }
            if let Some(start) = start.filter(|&s| t.at >= s) {
                if m.time_to_trip.is_none() {
                    m.time_to_trip = Some(Duration::from_nanos(t.at - start));
                }
                pods_after[pod] = true;
            }
        }
        m.pods_tripped = pods_after.iter().filter(|&&p| p).count() as u32;
        m.false_trips_per_100_pod_hours = f64::from(m.false_trips) / pod_hours * 100.0;
        m.caller_models = (
            scenario.saturation.is_some(),
            scenario.connections.is_some(),
        );
        m.recovery_to_full = script
            .recovery()
            .and_then(|r| recovery_to_full(run, r, scenario.duration));
        m
    }

    /// Reads `run` (the run these metrics are of) against `oracle`, the oracle's run of the
    /// same scenario and seed, whose goodput is `oracle_goodput`: the goodput regret and the
    /// time to give traffic back ([`AgainstOracle`]).
    pub fn read_against_oracle(
        &mut self,
        scenario: &Scenario,
        run: &Run,
        oracle: &Run,
        oracle_goodput: f64,
    ) {
        self.against_oracle = Some(AgainstOracle::of(
            run,
            self.goodput,
            oracle,
            oracle_goodput,
            scenario.script.recovery(),
            scenario.duration,
        ));
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
    /// How the value reads.
    pub unit: Unit,
    /// What the table says where the value is `None` ("never", "not within run").
    pub none: &'static str,
}

/// How a [`Figure`]'s value reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A whole count.
    Count,
    /// A share in [0, 1], shown as a percentage.
    Share,
    /// Seconds.
    Seconds,
    /// Milliseconds.
    Millis,
    /// A rate per second.
    PerSecond,
    /// A rate that may be well below 1 (trips per 100 pod-hours): one decimal from 1 on,
    /// three below.
    Rate,
}

/// `text`, a number as formatted, without the sign of a value that rounds to zero
/// (`-0.0` → `0.0`): a regret of -0.0004 req/s reads as none, not as a loss.
pub fn unsigned_zero(text: String) -> String {
    match text.strip_prefix('-') {
        Some(rest)
            if rest.starts_with('0') && rest.chars().all(|c| matches!(c, '0' | '.' | '%')) =>
        {
            rest.to_owned()
        }
        _ => text,
    }
}

impl Unit {
    /// `value` as the table shows it (a value that rounds to zero without its sign).
    pub fn show(self, value: f64) -> String {
        unsigned_zero(self.show_signed(value))
    }

    fn show_signed(self, value: f64) -> String {
        match self {
            Unit::Count if value.fract() == 0.0 => format!("{value:.0}"),
            Unit::Count => format!("{value:.1}"),
            Unit::Share => format!("{:.2}%", 100.0 * value),
            Unit::Seconds => format!("{value:.1}"),
            Unit::Millis if value < 10.0 => format!("{value:.2}"),
            Unit::Millis => format!("{value:.0}"),
            Unit::PerSecond => format!("{value:.1}"),
            Unit::Rate if value.fract() == 0.0 => format!("{value:.0}"),
            Unit::Rate if value.abs() >= 1.0 => format!("{value:.1}"),
            Unit::Rate => format!("{value:.3}"),
        }
    }
}

impl Metrics {
    /// Every figure of this report as a number, in table order: what a report over many
    /// seeds averages.
    pub fn figures(&self) -> Vec<Figure> {
        let c = &self.counts;
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        let millis = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        let count = |n: u64| Some(n as f64);
        let f = |name, value, better, unit, none| Figure {
            name,
            value,
            better,
            unit,
            none,
        };
        use Unit::{Count, Millis, PerSecond, Rate, Seconds, Share};
        let (saturation, connections) = self.caller_models;
        let (up, down) = (Some(true), Some(false));
        let against = self.against_oracle;
        // The oracle's column has no figure against itself, and opens nothing.
        let reference = if self.oracle { "-" } else { "never" };
        let give_back_none = match against {
            Some(a) if a.recovers => "not within run",
            _ => "-",
        };
        vec![
            f(
                "goodput (successful requests/s)",
                Some(self.goodput),
                up,
                PerSecond,
                "-",
            ),
            f(
                "goodput from the incident on (requests/s)",
                self.goodput_in_trouble,
                up,
                PerSecond,
                "no incident",
            ),
            f(
                "goodput regret against the oracle (requests/s)",
                against.map(|a| a.goodput_regret),
                down,
                PerSecond,
                "-",
            ),
            f(
                "goodput regret against the oracle (share of its goodput)",
                against.and_then(|a| a.goodput_regret_share),
                down,
                Share,
                "-",
            ),
            f(
                "requests that succeeded",
                share(c.requests_ok, c.requests),
                up,
                Share,
                "-",
            ),
            f(
                "caller latency p50 (ms)",
                millis(self.latency_p50),
                down,
                Millis,
                "-",
            ),
            f(
                "caller latency p99 (ms)",
                millis(self.latency_p99),
                down,
                Millis,
                "-",
            ),
            f(
                "caller p99 of successes (ms)",
                millis(self.ok_latency_p99),
                down,
                Millis,
                "-",
            ),
            f(
                "first trip after incident start (s)",
                secs(self.time_to_trip),
                None,
                Seconds,
                reference,
            ),
            f(
                "pods tripped after incident start",
                count(self.pods_tripped.into()),
                None,
                Count,
                "-",
            ),
            f(
                "calls that reached the failing dependency",
                count(self.reached_failing),
                down,
                Count,
                "-",
            ),
            f(
                "refused calls that would have succeeded",
                count(self.refused_would_succeed),
                down,
                Count,
                "-",
            ),
            f(
                "refused calls that would have succeeded alone (the oracle's judgement)",
                count(self.refused_would_succeed_alone),
                down,
                Count,
                "-",
            ),
            f(
                "most probes reaching it in any 1 s",
                count(self.max_probes_per_second.into()),
                down,
                Count,
                "-",
            ),
            f(
                "recovery to full traffic (s)",
                secs(self.recovery_to_full),
                down,
                Seconds,
                "not within run",
            ),
            f(
                "time to give traffic back (95% of the oracle's admitted, 10 s) (s)",
                secs(against.and_then(|a| a.give_back)),
                down,
                Seconds,
                give_back_none,
            ),
            f(
                "largest 1 s rise in admitted calls after recovery",
                self.return_step.map(f64::from),
                down,
                Count,
                "no recovery",
            ),
            f("trips", count(self.trips.into()), None, Count, "-"),
            f("re-trips", count(self.re_trips.into()), down, Count, "-"),
            f(
                "trips on a healthy dependency (no incident, no queue past the callers' timeout)",
                count(self.false_trips.into()),
                down,
                Count,
                "-",
            ),
            f(
                "trips on a healthy dependency per 100 pod-hours",
                Some(self.false_trips_per_100_pod_hours),
                down,
                Rate,
                "-",
            ),
            f(
                "trips on the outcomes or backlog of an incident just ended",
                count(self.trips_after_incident.into()),
                None,
                Count,
                "-",
            ),
            f(
                "trips on a busy healthy dependency (a queue within the callers' timeout; false trips too)",
                count(self.trips_busy.into()),
                None,
                Count,
                "-",
            ),
            f(
                "trips on an overloaded dependency (no incident, a queue past the callers' timeout)",
                count(self.trips_overloaded.into()),
                None,
                Count,
                "-",
            ),
            f(
                "probes that re-opened",
                count(self.probe_reopens.into()),
                None,
                Count,
                "-",
            ),
            f(
                "breaks ended early by a peer's recovery",
                count(self.peer_releases.into()),
                None,
                Count,
                "-",
            ),
            f("requests", count(c.requests), None, Count, "-"),
            f(
                "requests rejected by the caller's pool",
                share(
                    c.requests_rejected_by_pool + c.requests_expired_in_queue,
                    c.requests,
                ),
                down,
                Share,
                "-",
            ),
            f(
                "attempts refused",
                share(c.refused, c.attempts),
                None,
                Share,
                "-",
            ),
            f(
                "attempts timed out",
                count(c.attempts_timed_out),
                down,
                Count,
                "-",
            ),
            f(
                "admitted attempts that failed or timed out",
                count(c.attempts_failed + c.attempts_timed_out),
                down,
                Count,
                "-",
            ),
            f("retries", count(c.retries), None, Count, "-"),
            f(
                "attempts slowed by their pod's CPU saturation",
                saturation.then_some(c.attempts_slowed_by_caller as f64),
                None,
                Count,
                "off",
            ),
            f(
                "connections opened (each paid its setup)",
                connections.then_some(c.connections_opened as f64),
                None,
                Count,
                "off",
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

fn quantile(histogram: &Histogram, q: f64) -> Option<Duration> {
    histogram
        .quantile(q)
        .map(|micros| Duration::from_nanos((micros * 1_000.0) as u64))
}

/// Successful requests per second from second `from` to the end of the run.
fn goodput(run: &Run, from: usize, duration: Duration) -> f64 {
    let seconds = duration.as_secs_f64() - from as f64;
    let last = (duration.as_secs_f64().ceil() as usize).min(run.timeline.len());
    if seconds <= 0.0 || from >= last {
        return 0.0;
    }
    let ok: u64 = run.timeline[from..last]
        .iter()
        .map(|s| u64::from(s.goodput))
        .sum();
    ok as f64 / seconds
}

/// The largest rise in admitted calls from one second to the next, from second `from` on.
fn return_step(run: &Run, from: usize) -> u32 {
    run.timeline
        .get(from.saturating_sub(1)..)
        .unwrap_or_default()
        .windows(2)
        .map(|w| w[1].admitted.saturating_sub(w[0].admitted))
        .max()
        .unwrap_or(0)
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

/// The header line on what the dependency can serve when healthy: the configured capacity,
/// the model's own (each replica has a whole number of workers, so the two differ by the
/// rounding), and the offered load (first attempts, before retries) as a share of it.
fn effective_capacity(scenario: &Scenario) -> String {
    let d = &scenario.dependency;
    let mean = d.mean_service().as_secs_f64();
    let effective = f64::from(d.replicas()) * f64::from(d.workers()) / mean;
    let offered = f64::from(scenario.traffic.pods) * scenario.traffic.rate;
    format!(
        "dependency capacity {} calls/s as configured, {effective:.1} calls/s effective ({} \
         worker{} a replica over a mean service of {:.1} ms); the offered first attempts are \
         {:.0}% of it",
        d.capacity(),
        d.workers(),
        if d.workers() == 1 { "" } else { "s" },
        mean * 1e3,
        100.0 * offered / effective
    )
}

/// The report of a scenario's settings as a table: one row per metric, one column per
/// setting.
pub fn table(scenario: &Scenario, metrics: &[Metrics]) -> String {
    let mut out = String::new();
    let t = &scenario.traffic;
    let policies: Vec<String> = t.retry_policy.iter().map(|p| format!("{p:?}")).collect();
    let _ = writeln!(
        out,
        "scenario {}: {} pods x {} req/s, pool {} (queue {}), timeout {:?}, deadline {:?}, \
         {} retr{} ({}), {} replica{}, seed {}, {} s simulated",
        scenario.name,
        t.pods,
        t.rate,
        t.concurrency,
        t.queue,
        t.timeout,
        t.deadline,
        t.retries,
        if t.retries == 1 { "y" } else { "ies" },
        policies.join(" / "),
        scenario.dependency.replicas(),
        if scenario.dependency.replicas() == 1 {
            ""
        } else {
            "s"
        },
        scenario.seed,
        scenario.duration.as_secs()
    );
    if !scenario.description.is_empty() {
        let _ = writeln!(out, "  {}", scenario.description);
    }
    let _ = writeln!(out, "  {}", effective_capacity(scenario));
    if t.unevenness > 0.0 {
        let weights = crate::fleet::pod_weights(t.pods, t.unevenness, scenario.seed);
        let (least, most) = weights
            .iter()
            .fold((f64::MAX, 0.0_f64), |(l, m), &w| (l.min(w), m.max(w)));
        let _ = writeln!(
            out,
            "  uneven pods (fleet.unevenness = {}): on this seed the quietest pod sends {:.2}x \
             the mean pod's {} req/s, the busiest {:.2}x",
            t.unevenness, least, t.rate, most
        );
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
    if let Some(phases) = &t.phases {
        let list: Vec<String> = phases
            .phases()
            .iter()
            .map(|p| {
                format!(
                    "{} s at {} req/s{}",
                    p.duration as f64 / 1e9,
                    p.rate,
                    if p.burst > 1 {
                        format!(" in bursts of {}", p.burst)
                    } else {
                        String::new()
                    }
                )
            })
            .collect();
        let _ = writeln!(out, "  traffic phases, repeated: {}", list.join(", "));
    }
    let shown = |d: Duration| humantime::format_duration(d).to_string();
    if let Some(s) = &scenario.saturation {
        let pods = s
            .pods
            .map_or_else(|| "every pod".to_owned(), |n| format!("the first {n} pods"));
        let _ = writeln!(
            out,
            "  caller saturation ({pods}): episodes of {} on average after {} quiet on \
             average, each adding one delay to all its pod's calls (median {}, at most {})",
            shown(s.length),
            shown(s.every),
            shown(s.delay.median),
            shown(s.delay_max)
        );
    }
    if let Some(c) = &scenario.connections {
        let _ = writeln!(
            out,
            "  connection pools: idle timeout {}, a new connection's setup median {}",
            shown(c.idle_timeout),
            shown(c.setup.median)
        );
    }
    let figures: Vec<Vec<Figure>> = metrics.iter().map(Metrics::figures).collect();
    let rows: Vec<(&str, Vec<String>)> = figures
        .first()
        .map(|first| {
            (0..first.len())
                .map(|row| {
                    let cells = figures
                        .iter()
                        .map(|list| {
                            let figure = list[row];
                            figure
                                .value
                                .map_or_else(|| figure.none.to_owned(), |v| figure.unit.show(v))
                        })
                        .collect();
                    (first[row].name, cells)
                })
                .collect()
        })
        .unwrap_or_default();
    let label_width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let cells: Vec<&Vec<String>> = rows.iter().map(|(_, cells)| cells).collect();
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
    for (label, row) in &rows {
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

    #[test]
    fn the_header_names_the_capacity_the_model_serves() {
        // Median 20 ms and p99 80 ms: a mean service of 23.89 ms, so 100 calls/s round to two
        // workers, which serve 83.7 calls/s.
        let scenario = Scenario::from_toml(
            r#"
            seed = 1
            duration = "1m"
            [dependency]
            latency-median = "20ms"
            latency-p99 = "80ms"
            error-rate = 0.0
            capacity = 100
            [fleet]
            pods = 5
            rate = 10
            timeout = "1s"
            [breakers.instances.plain]
            "#,
            "header",
        )
        .unwrap();
        assert_eq!(
            effective_capacity(&scenario),
            "dependency capacity 100 calls/s as configured, 83.7 calls/s effective (2 workers \
             a replica over a mean service of 23.9 ms); the offered first attempts are 60% of it"
        );
    }
}
