//! `cutout-lab replay`: candidate breaker settings run against a service's recorded calls
//! themselves (each call's own start, duration and answer, as the dependency gave it), so a
//! user sees when each setting would have opened and what it would have refused, beside the
//! oracle.
//!
//! # The rule
//! Every candidate is a real cutout [`Breaker`] on one [`ManualClock`] that follows the
//! record: at each call's start the clock is moved there, every earlier call's end first (in
//! end order, each at its end), and each candidate admits the call or refuses it. An admitted
//! call finishes at its recorded end with its recorded answer (a success or a failure; one
//! whose answer is unknown, because the recording's own breaker refused it, finishes with no
//! outcome). A refused call is counted by what the dependency answered it: a refused
//! would-be success is a cost, a refused would-be failure a saving.
//!
//! The replay is open-loop: a refusal changes nothing after it. The recorded dependency
//! answered as it did, retries are in the record as calls of their own, and a dependency that
//! recovered sooner because the breaker spared it cannot be seen. So the replay says when a
//! setting opens, on what, and what it refuses; the simulation (`cutout-lab SCENARIO.toml`)
//! says what the refusals do to the dependency and the callers.
//!
//! # Incidents
//! The record is cut into bins (`--bin`, 10 s). A bin with at least 5 calls of known answer
//! is *failing* when at least `--incident-errors` (20%) of them failed, and *slow* when the
//! geometric mean of its calls' durations is more than `--incident-slowdown` (5) times the
//! usual one (the median over the bins of that mean). A bin where the recording's own
//! breaker refused at least 5 calls, and most of its calls, is failing too: that breaker was
//! open, and the few calls it let through (its probes) are all a candidate sees there. Flagged bins one bin apart or less make
//! one incident. A trip (an opening) within one bin of a failing incident is the incident's;
//! any other is a trip on a healthy dependency, a false trip, and so is one in a slow-only
//! incident: its calls succeeded, and a record cannot tell the dependency's slowness from the
//! caller's own. `--latency-budget` says which slow calls failed the callers.
//!
//! # The oracle, regret and the recommendation
//! The oracle refuses exactly the calls that failed and admits every other: it refuses no
//! success and lets no failure through. A setting's regret against it is the would-be
//! successes it refused plus the would-be failures it admitted. The recommendation is the
//! setting with the least regret among those with no false trip, ties going to the earliest
//! opening in the incidents; it is printed as a `[configs.recommended]` block that
//! `cutout::config` (and the gateway's `[breakers]`) reads as those settings, checked here.

mod bins;
mod candidate;
mod report;

pub use bins::{Bins, MAX_BINS};
pub use candidate::{Candidate, HOST_MAX_BREAK};
pub use report::OBJECTIVE;

use std::collections::{BinaryHeap, HashMap};
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, OwnedPermit, Transition};

use crate::record::{Answer, Record};

/// How incidents are found and the replay seeded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// The bin width, in nanoseconds.
    pub bin: u64,
    /// The share of failed calls that makes a bin failing.
    pub incident_errors: f64,
    /// How many times the usual duration makes a bin slow.
    pub incident_slowdown: f64,
    /// The breakers' seed (their jitter).
    pub seed: u64,
    /// The longest a caller waits for an answer, in nanoseconds: a success that took longer
    /// came too late and counts as a failure for the oracle, the regret and the incidents
    /// (the breakers still see it as the success it was, with its duration).
    pub latency_budget: Option<u64>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bin: 10_000_000_000,
            incident_errors: 0.2,
            incident_slowdown: 5.0,
            seed: 1,
            latency_budget: None,
        }
    }
}

/// What each candidate did with the record's calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Admitted calls, by what the dependency answered.
    pub admitted: [u64; 3],
    /// Refused calls, by what the dependency answered.
    pub refused: [u64; 3],
}

/// `answer`'s place in [`Counts`]'s arrays and [`Replay::calls`].
fn index(answer: Answer) -> usize {
    answer as usize
}

impl Counts {
    /// Refused calls the dependency answered with a success: the cost.
    pub fn refused_successes(&self) -> u64 {
        self.refused[0]
    }
    /// Admitted calls the dependency failed: calls that reached it while failing.
    pub fn admitted_failures(&self) -> u64 {
        self.admitted[1]
    }
    /// Regret against the oracle.
    pub fn regret(&self) -> u64 {
        self.refused_successes() + self.admitted_failures()
    }
}

/// A state change of a candidate's breaker, at nanoseconds since the record's first call.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// It opened, for this reason.
    Opened(String),
    /// It closed (or started its recovery ramp).
    Closed,
}

/// One candidate's replay.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The candidate.
    pub candidate: Candidate,
    /// Its calls.
    pub counts: Counts,
    /// Its state changes, in time order.
    pub changes: Vec<(u64, Change)>,
}

impl Outcome {
    /// When it opened (nanoseconds since the record's first call).
    pub fn opens(&self) -> impl Iterator<Item = (u64, &str)> {
        self.changes.iter().filter_map(|(at, c)| match c {
            Change::Opened(reason) => Some((*at, reason.as_str())),
            Change::Closed => None,
        })
    }

    /// How long it was not closed, up to `end`.
    pub fn time_open(&self, end: u64) -> u64 {
        let mut open_since = None;
        let mut total = 0;
        for (at, change) in &self.changes {
            match change {
                Change::Opened(_) => {
                    open_since.get_or_insert(*at);
                }
                Change::Closed => {
                    if let Some(since) = open_since.take() {
                        total += at.saturating_sub(since);
                    }
                }
            }
        }
        total + open_since.map_or(0, |since| end.saturating_sub(since))
    }

    /// The first closing at or after `at`.
    fn closed_after(&self, at: u64) -> Option<u64> {
        self.changes
            .iter()
            .find(|(t, c)| *t >= at && *c == Change::Closed)
            .map(|(t, _)| *t)
    }
}

/// A stretch of the record when the dependency failed or was slow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Incident {
    /// Its first bin's start (nanoseconds since the record's first call).
    pub start: u64,
    /// Its last bin's end.
    pub end: u64,
    /// The latest end of its calls: a call that started in it may fail (a timeout) after
    /// its last bin, and a trip on that failure is still the incident's.
    pub last_end: u64,
    /// Whether any of its bins was failing (else every one was slow).
    pub failing: bool,
    /// Its calls of known answer, and how many failed.
    pub calls: u64,
    /// How many of them failed.
    pub failures: u64,
    /// Its calls the recording's own breaker refused (a record not made in shadow mode).
    pub refused: u64,
    /// The geometric mean of its calls' durations over the usual one.
    pub slowdown: f64,
}

impl Incident {
    /// Whether a trip at `at` is this incident's: within `bin` of it, or before its last
    /// call ended.
    pub fn holds(&self, at: u64, bin: u64) -> bool {
        at.saturating_add(bin) >= self.start
            && at <= self.end.max(self.last_end).saturating_add(bin)
    }
}

/// A finished replay.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The options it ran with.
    pub options: Options,
    /// The first call's start, nanoseconds since the Unix epoch.
    pub origin: u64,
    /// The last call's end, nanoseconds since the origin.
    pub end: u64,
    /// The record's calls by what the caller got (success, failure, unknown): a success past
    /// the latency budget is a failure.
    pub calls: [u64; 3],
    /// The successes that came past the latency budget.
    pub late: u64,
    /// The incidents found.
    pub incidents: Vec<Incident>,
    /// Each candidate's replay, in order.
    pub outcomes: Vec<Outcome>,
    /// The usual duration (the median over the bins of their geometric mean), nanoseconds.
    pub usual: f64,
}

/// A candidate's state changes as its listener hears them.
type ChangeLog = Arc<Mutex<Vec<(u64, Change)>>>;

/// A call admitted and not finished yet.
struct Pending {
    permit: OwnedPermit,
    answer: Answer,
}

/// Replays `record` with every candidate.
pub fn run<R: BufRead>(
    record: &mut Record<R>,
    candidates: &[Candidate],
    options: &Options,
) -> Result<Replay, String> {
    if options.bin == 0 {
        return Err("--bin must be more than 0".into());
    }
    let clock = ManualClock::new();
    let changes: Vec<ChangeLog> = candidates.iter().map(|_| Arc::default()).collect();
    let breakers: Vec<Breaker> = candidates
        .iter()
        .zip(&changes)
        .map(|(c, log)| {
            let breaker = Breaker::builder(c.name.as_str())
                .settings(c.settings.clone())
                .clock(clock.clone())
                .seed(options.seed)
                .build();
            let log = Arc::clone(log);
            breaker.subscribe(move |event| {
                let at = u64::try_from(event.at.as_nanos()).unwrap_or(u64::MAX);
                let change = match event.transition {
                    Transition::Opened { reason, .. } => Change::Opened(reason.to_string()),
                    Transition::Closed { .. } => Change::Closed,
                    _ => return,
                };
                log.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((at, change));
            });
            breaker
        })
        .collect();
    let mut counts = vec![Counts::default(); candidates.len()];
    let mut pending: BinaryHeap<std::cmp::Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut waiting: HashMap<u64, Pending> = HashMap::new();
    let mut seq = 0u64;
    let mut origin = None;
    let mut now = 0u64;
    let mut end = 0u64;
    let mut calls = [0u64; 3];
    let mut late = 0u64;
    let mut bins = Bins::new(options.bin);
    let move_to = |now: &mut u64, to: u64| {
        if to > *now {
            clock.advance(Duration::from_nanos(to - *now));
            *now = to;
        }
    };
    let finish = |p: Pending| match p.answer {
        Answer::Success => p.permit.success(),
        Answer::Failure => p.permit.failure(),
        Answer::Unknown => drop(p.permit),
    };
    while let Some(call) = record.next_call()? {
        let origin = *origin.get_or_insert(call.start);
        let start = call.start - origin;
        while let Some(std::cmp::Reverse((at, id))) = pending.peek().copied() {
            if at > start {
                break;
            }
            pending.pop();
            move_to(&mut now, at);
            if let Some(p) = waiting.remove(&id) {
                finish(p);
            }
        }
        move_to(&mut now, start);
        let ends = start.saturating_add(call.duration);
        end = end.max(ends);
        // What the caller got: a success past the latency budget came too late.
        let judged = match options.latency_budget {
            Some(budget) if call.answer == Answer::Success && call.duration > budget => {
                late += 1;
                Answer::Failure
            }
            _ => call.answer,
        };
        calls[index(judged)] += 1;
        bins.add(start, call.duration, judged)
            .map_err(|e| format!("line {}: {e}", call.line))?;
        for (i, breaker) in breakers.iter().enumerate() {
            match breaker.try_acquire_owned() {
                Ok(permit) => {
                    counts[i].admitted[index(judged)] += 1;
                    seq += 1;
                    pending.push(std::cmp::Reverse((ends, seq)));
                    waiting.insert(
                        seq,
                        Pending {
                            permit,
                            answer: call.answer,
                        },
                    );
                }
                Err(_) => counts[i].refused[index(judged)] += 1,
            }
        }
    }
    while let Some(std::cmp::Reverse((at, id))) = pending.pop() {
        move_to(&mut now, at);
        if let Some(p) = waiting.remove(&id) {
            finish(p);
        }
    }
    let Some(origin) = origin else {
        return Err("the record holds no call to replay".into());
    };
    let (incidents, usual) = bins.incidents(options.incident_errors, options.incident_slowdown);
    drop(breakers);
    let outcomes = candidates
        .iter()
        .zip(changes)
        .zip(counts)
        .map(|((candidate, log), counts)| {
            let mut changes = std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()));
            changes.sort_by_key(|(at, _)| *at);
            Outcome {
                candidate: candidate.clone(),
                counts,
                changes,
            }
        })
        .collect();
    Ok(Replay {
        options: *options,
        origin,
        end,
        calls,
        late,
        incidents,
        outcomes,
        usual,
    })
}

impl Replay {
    /// The number (from 1) of the incident a trip at `at` belongs to, if any.
    pub fn incident_number(&self, at: u64) -> Option<usize> {
        let bin = self.options.bin;
        self.incidents
            .iter()
            .position(|i| i.holds(at, bin))
            .map(|p| p + 1)
    }

    /// Whether a trip at `at` is on a healthy dependency: outside every failing incident. A
    /// slow-only incident's calls succeeded, and the replay cannot tell the dependency's
    /// slowness from the caller's own (its load, its fresh connections): a trip there
    /// refused successes the callers waited for, so it is a false trip too, unless a
    /// `--latency-budget` made those slow calls failures (and the bins failing).
    pub fn on_healthy(&self, at: u64) -> bool {
        let bin = self.options.bin;
        !self.incidents.iter().any(|i| i.failing && i.holds(at, bin))
    }

    /// A candidate's trips on a healthy dependency ([`Replay::on_healthy`]).
    pub fn false_trips(&self, outcome: &Outcome) -> usize {
        outcome
            .opens()
            .filter(|(at, _)| self.on_healthy(*at))
            .count()
    }

    /// When a candidate first opened in `incident`, if it did (nanoseconds since the
    /// record's first call).
    pub fn opened_in(&self, outcome: &Outcome, incident: &Incident) -> Option<u64> {
        let bin = self.options.bin;
        outcome
            .opens()
            .map(|(at, _)| at)
            .find(|&at| incident.holds(at, bin))
    }

    /// How long after `incident` began a candidate first opened in it, if it did.
    pub fn time_to_open(&self, outcome: &Outcome, incident: &Incident) -> Option<u64> {
        self.opened_in(outcome, incident)
            .map(|at| at.saturating_sub(incident.start))
    }

    /// How long after `incident` ended a candidate that opened in it first closed after
    /// that opening: `None` if it did not open in it, `Some(None)` if it was still open at
    /// the end of the record (0 for a close before the incident's end).
    pub fn closed_after_end(&self, outcome: &Outcome, incident: &Incident) -> Option<Option<u64>> {
        let opened = self.opened_in(outcome, incident)?;
        Some(
            outcome
                .closed_after(opened)
                .map(|t| t.saturating_sub(incident.end)),
        )
    }

    /// The longest a candidate took to first open in an incident, over the incidents it
    /// opened in, and in how many it did not open.
    pub fn window(&self, outcome: &Outcome) -> (Option<u64>, usize) {
        let opened: Vec<u64> = self
            .incidents
            .iter()
            .filter_map(|i| self.time_to_open(outcome, i))
            .collect();
        (
            opened.iter().copied().max(),
            self.incidents.len() - opened.len(),
        )
    }

    /// The recommended candidate: no false trip, the least regret, then the earliest
    /// openings in the incidents (unopened counting as the incident's length).
    pub fn recommended(&self) -> Option<&Outcome> {
        self.outcomes
            .iter()
            .filter(|o| self.false_trips(o) == 0)
            .min_by_key(|o| {
                let late: u64 = self
                    .incidents
                    .iter()
                    .map(|i| self.time_to_open(o, i).unwrap_or(i.end - i.start))
                    .sum();
                (o.counts.regret(), late)
            })
    }
}
