//! The two readings of a record `fit` makes: the first finds its span, phases, bursts and
//! incidents; the second measures the dependency outside the incidents and each incident's
//! own span and failures.

use std::collections::BinaryHeap;
use std::io::BufRead;

use crate::latency::Histogram;
use crate::record::{Answer, Record};
use crate::replay::{Bins, Incident};

/// The most phases a fit writes.
pub const MAX_PHASES: u64 = 2016;

/// One phase of the record.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Phase {
    /// Its calls.
    pub calls: u64,
    /// Its seconds (the last phase's may be fewer than the others').
    pub seconds: u64,
    /// The most calls in one of its seconds.
    pub busiest: u64,
    /// Σ (count − the previous second's count)² over its pairs of consecutive seconds, and
    /// how many pairs: half its mean is the variance of the per-second counts, read so that a
    /// rate that steps or stops within the phase adds one pair's jump, not a variance.
    jumps: f64,
    pairs: u64,
}

impl Phase {
    /// The calls that arrive together: the per-second counts' variance over their mean (1
    /// for Poisson arrivals, b for bunches of b), rounded; the variance read from successive
    /// seconds' differences (the Allan variance), so a change of rate is not bunching.
    pub fn burst(&self) -> u64 {
        if self.pairs == 0 || self.calls == 0 {
            return 1;
        }
        let variance = self.jumps / (2.0 * self.pairs as f64);
        let mean = self.calls as f64 / self.seconds.max(1) as f64;
        let ratio = variance / mean;
        // Poisson arrivals give 1 give or take about √(3 / pairs): only a ratio three of
        // those above 1 is bunching (a phase of 75 pairs needs 1.6).
        if ratio < 1.0 + 3.0 * (3.0 / self.pairs as f64).sqrt() {
            return 1;
        }
        ratio.round().clamp(1.0, 10_000.0) as u64
    }
}

/// What the first reading finds.
pub(super) struct Shape {
    /// The first call's start, nanoseconds since the epoch.
    pub origin: u64,
    pub phases: Vec<Phase>,
    pub bins: Bins,
    pub hosts: usize,
    /// Each pod's calls, by the record's pod index (empty: the record names no pod).
    pub pod_calls: Vec<u64>,
    pub calls: u64,
    /// The longest call.
    pub longest: u64,
}

/// Per-second counts, closed into phases as the seconds pass.
struct Seconds {
    per_phase: u64,
    current: u64,
    count: u64,
    /// The previous second's count, in the same phase.
    previous: Option<u64>,
}

impl Seconds {
    fn phase(phases: &mut Vec<Phase>, p: u64) -> &mut Phase {
        let p = usize::try_from(p).unwrap_or(usize::MAX);
        if phases.len() <= p {
            phases.resize(p + 1, Phase::default());
        }
        &mut phases[p]
    }

    /// Closes every second before `until`.
    fn close(&mut self, phases: &mut Vec<Phase>, until: u64) {
        while self.current < until {
            let phase = Seconds::phase(phases, self.current / self.per_phase);
            phase.seconds += 1;
            phase.busiest = phase.busiest.max(self.count);
            if let Some(previous) = self.previous {
                phase.jumps += (self.count as f64 - previous as f64).powi(2);
                phase.pairs += 1;
            }
            // A phase's pairs stay within it.
            self.previous = if (self.current + 1).is_multiple_of(self.per_phase) {
                None
            } else {
                Some(self.count)
            };
            self.count = 0;
            self.current += 1;
        }
    }
}

/// Reads `record` to its end: phases of `phase_seconds`, bins of `bin` nanoseconds.
pub(super) fn first<R: BufRead>(
    record: &mut Record<R>,
    bin: u64,
    phase_seconds: u64,
) -> Result<Shape, String> {
    let mut shape = Shape {
        origin: 0,
        phases: Vec::new(),
        bins: Bins::new(bin),
        hosts: 0,
        pod_calls: Vec::new(),
        calls: 0,
        longest: 0,
    };
    let mut seconds = Seconds {
        per_phase: phase_seconds.max(1),
        current: 0,
        count: 0,
        previous: None,
    };
    let mut origin = None;
    while let Some(call) = record.next_call()? {
        let origin = *origin.get_or_insert(call.start);
        let start = call.start - origin;
        let second = start / 1_000_000_000;
        if second / seconds.per_phase >= MAX_PHASES {
            return Err(format!(
                "line {}: past {MAX_PHASES} phases of {} s; give a longer --phase",
                call.line, seconds.per_phase
            ));
        }
        seconds.close(&mut shape.phases, second);
        seconds.count += 1;
        Seconds::phase(&mut shape.phases, second / seconds.per_phase).calls += 1;
        shape
            .bins
            .add(start, call.duration, call.answer)
            .map_err(|e| format!("line {}: {e}", call.line))?;
        shape.longest = shape.longest.max(call.duration);
        shape.calls += 1;
        if let Some(pod) = call.pod.map(usize::from) {
            if shape.pod_calls.len() <= pod {
                shape.pod_calls.resize(pod + 1, 0);
            }
            shape.pod_calls[pod] += 1;
        }
    }
    let Some(origin) = origin else {
        return Err("the record holds no call to fit".into());
    };
    let last = seconds.current + 1;
    seconds.close(&mut shape.phases, last);
    shape.origin = origin;
    shape.hosts = record.hosts().len();
    Ok(shape)
}

/// How unevenly the pods shared the calls, as the lab's `fleet.unevenness` reads it (the
/// coefficient of variation of the pods' own rates), from each pod's count of calls: their
/// variance less what arrivals at one rate would give by chance (the mean count, times
/// `burst` for arrivals in bunches of that size), over their mean. 0 for fewer than 2 pods,
/// or when the spread is within three standard errors of chance (a sample variance of n
/// counts is off by about √(2 / (n − 1)) of itself).
pub(super) fn unevenness(pod_calls: &[u64], burst: f64) -> f64 {
    let n = pod_calls.len();
    if n < 2 {
        return 0.0;
    }
    let mean = pod_calls.iter().sum::<u64>() as f64 / n as f64;
    let variance = pod_calls
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / (n - 1) as f64;
    let chance = mean * burst.max(1.0);
    if mean <= 0.0 || variance <= chance * (1.0 + 3.0 * (2.0 / (n - 1) as f64).sqrt()) {
        return 0.0;
    }
    (variance - chance).sqrt() / mean
}

/// One slice of an incident: its calls, failures, and failures over 10 times the usual.
#[derive(Debug, Clone, Copy, Default)]
struct Slice {
    calls: u64,
    failures: u64,
    slow_failures: u64,
}

/// An incident as the second reading sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Span {
    /// Its start and end (nanoseconds since the first call): for a failing incident, from
    /// its first failing slice to its last (the bins' edges trimmed off), else its bins'.
    pub start: u64,
    pub end: u64,
    /// Its calls of known answer in that span, and how many failed.
    pub calls: u64,
    pub failures: u64,
    /// How many of those failures took over 10 times the usual duration (timeouts).
    pub slow_failures: u64,
}

/// How many of the slowest successes are kept for the tail's points.
pub(super) const TOP: usize = 64;

/// What the second reading measures.
pub(super) struct Health {
    /// The successes' durations outside the incidents, in nanoseconds.
    pub latency: Histogram,
    pub fastest: u64,
    pub slowest: u64,
    /// Their exact mean, nanoseconds.
    pub mean: f64,
    /// The [`TOP`] longest of them, longest first.
    pub top: Vec<u64>,
    /// Calls of known answer outside the incidents, and failures.
    pub known: u64,
    pub failures: u64,
    /// Each incident's span.
    pub spans: Vec<Span>,
}

/// Reads `record` again from its start, knowing its `incidents` (found in bins of `bin`),
/// the usual duration, and the share of failures that makes a slice failing.
pub(super) fn second<R: BufRead>(
    record: &mut Record<R>,
    origin: u64,
    incidents: &[Incident],
    bin: u64,
    usual: f64,
    errors: f64,
) -> Result<Health, String> {
    let slice = bin.clamp(1, 1_000_000_000);
    let mut slices: Vec<Vec<Slice>> = incidents
        .iter()
        .map(|i| vec![Slice::default(); ((i.end - i.start).div_ceil(slice)) as usize])
        .collect();
    let mut latency = Histogram::default();
    let (mut fastest, mut slowest, mut sum, mut successes) = (u64::MAX, 0u64, 0f64, 0u64);
    let mut top: BinaryHeap<std::cmp::Reverse<u64>> = BinaryHeap::with_capacity(TOP + 1);
    let (mut known, mut failures) = (0u64, 0u64);
    while let Some(call) = record.next_call()? {
        let start = call.start.saturating_sub(origin);
        if let Some(i) = incidents
            .iter()
            .position(|i| (i.start..i.end).contains(&start))
        {
            if call.answer != Answer::Unknown {
                let k = ((start - incidents[i].start) / slice) as usize;
                if let Some(s) = slices[i].get_mut(k) {
                    s.calls += 1;
                    if call.answer == Answer::Failure {
                        s.failures += 1;
                        s.slow_failures += u64::from(call.duration as f64 > 10.0 * usual);
                    }
                }
            }
            continue;
        }
        match call.answer {
            Answer::Success => {
                known += 1;
                latency.add(call.duration);
                fastest = fastest.min(call.duration);
                slowest = slowest.max(call.duration);
                sum += call.duration as f64;
                successes += 1;
                top.push(std::cmp::Reverse(call.duration));
                if top.len() > TOP {
                    top.pop();
                }
            }
            Answer::Failure => {
                known += 1;
                failures += 1;
            }
            Answer::Unknown => {}
        }
    }
    let spans = incidents
        .iter()
        .zip(&slices)
        .map(|(incident, slices)| {
            let failing = |s: &Slice| s.calls > 0 && s.failures as f64 >= errors * s.calls as f64;
            let (first, last) = if incident.failing {
                (
                    slices.iter().position(failing).unwrap_or(0),
                    slices
                        .iter()
                        .rposition(failing)
                        .unwrap_or(slices.len().saturating_sub(1)),
                )
            } else {
                (0, slices.len().saturating_sub(1))
            };
            let kept = slices.get(first..=last).unwrap_or(&[]);
            Span {
                start: incident.start + first as u64 * slice,
                end: (incident.start + (last as u64 + 1) * slice).min(incident.end),
                calls: kept.iter().map(|s| s.calls).sum(),
                failures: kept.iter().map(|s| s.failures).sum(),
                slow_failures: kept.iter().map(|s| s.slow_failures).sum(),
            }
        })
        .collect();
    let mut top: Vec<u64> = top.into_iter().map(|r| r.0).collect();
    top.sort_unstable_by(|a, b| b.cmp(a));
    Ok(Health {
        latency,
        fastest,
        slowest,
        mean: if successes > 0 {
            sum / successes as f64
        } else {
            0.0
        },
        top,
        known,
        failures,
        spans,
    })
}
