//! The record cut into bins, and the incidents found in them (see the [module docs](super),
//! "Incidents"): what the replay judges trips by and `cutout-lab fit` writes as a scenario's
//! incidents.

use std::time::Duration;

use cutout::HumanDuration;

use super::Incident;
use crate::record::Answer;

/// The longest record cut into bins: about a week of 10 s bins.
pub const MAX_BINS: usize = 60_480;

/// The fewest calls of known answer a bin needs to be judged.
const MIN_CALLS: u32 = 5;

/// One bin of the record.
#[derive(Debug, Clone, Copy, Default)]
struct Bin {
    known: u32,
    failures: u32,
    /// Calls the recording's own breaker refused (their answer unknown).
    refused: u32,
    log_duration: f64,
    /// The latest end of its calls.
    last_end: u64,
}

/// The bins of a record, from its first call.
#[derive(Debug, Clone)]
pub struct Bins {
    width: u64,
    bins: Vec<Bin>,
}

impl Bins {
    /// No bins yet, each `width` nanoseconds wide (more than 0).
    pub fn new(width: u64) -> Bins {
        Bins {
            width: width.max(1),
            bins: Vec::new(),
        }
    }

    /// Counts a call starting `start` nanoseconds after the record's first, of `duration`,
    /// whose caller got `answer` (an unknown one counts for nothing). Refused past
    /// [`MAX_BINS`].
    pub fn add(&mut self, start: u64, duration: u64, answer: Answer) -> Result<(), String> {
        let bin = usize::try_from(start / self.width).unwrap_or(usize::MAX);
        if bin >= MAX_BINS {
            return Err(format!(
                "past the longest record replayed ({MAX_BINS} bins of {}); replay a shorter \
                 stretch, or give a wider --bin",
                HumanDuration(Duration::from_nanos(self.width))
            ));
        }
        if self.bins.len() <= bin {
            self.bins.resize(bin + 1, Bin::default());
        }
        let b = &mut self.bins[bin];
        if answer == Answer::Unknown {
            b.refused += 1;
            return Ok(());
        }
        b.known += 1;
        b.failures += u32::from(answer == Answer::Failure);
        b.log_duration += (duration.max(1) as f64).ln();
        b.last_end = b.last_end.max(start.saturating_add(duration));
        Ok(())
    }

    /// The incidents: bins of at least 5 calls failing at `errors` (a share) or slow past
    /// `slowdown` times the usual duration, and bins where the recording's own breaker
    /// refused at least 5 calls and most of them (it was open: the dependency had failed),
    /// one bin apart or less merged; and the usual duration (the median over the bins of
    /// their geometric mean), in nanoseconds.
    pub fn incidents(&self, errors: f64, slowdown: f64) -> (Vec<Incident>, f64) {
        let mut means: Vec<f64> = self
            .bins
            .iter()
            .filter(|b| b.known > 0)
            .map(|b| b.log_duration / f64::from(b.known))
            .collect();
        means.sort_by(f64::total_cmp);
        let usual_log = means.get(means.len() / 2).copied().unwrap_or(0.0);
        let slow_log = usual_log + slowdown.max(1.0).ln();
        let mut found: Vec<Incident> = Vec::new();
        let mut logs: Vec<f64> = Vec::new();
        for (i, b) in self.bins.iter().enumerate() {
            let cut = b.refused >= MIN_CALLS && b.refused >= b.known;
            if b.known < MIN_CALLS && !cut {
                continue;
            }
            let judged = b.known >= MIN_CALLS;
            let failing = cut || (judged && f64::from(b.failures) >= errors * f64::from(b.known));
            let slow = judged && b.log_duration / f64::from(b.known) > slow_log;
            if !(failing || slow) {
                continue;
            }
            let start = i as u64 * self.width;
            let end = start + self.width;
            match found.last_mut() {
                Some(last) if start <= last.end + self.width => {
                    last.end = end;
                    last.last_end = last.last_end.max(b.last_end);
                    last.failing |= failing;
                    last.calls += u64::from(b.known);
                    last.failures += u64::from(b.failures);
                    last.refused += u64::from(b.refused);
                    if let Some(log) = logs.last_mut() {
                        *log += b.log_duration;
                    }
                }
                _ => {
                    found.push(Incident {
                        start,
                        end,
                        last_end: b.last_end,
                        failing,
                        calls: u64::from(b.known),
                        failures: u64::from(b.failures),
                        refused: u64::from(b.refused),
                        slowdown: 1.0,
                    });
                    logs.push(b.log_duration);
                }
            }
        }
        for (incident, log) in found.iter_mut().zip(logs) {
            incident.slowdown = if incident.calls > 0 {
                (log / incident.calls as f64 - usual_log).exp()
            } else {
                1.0
            };
        }
        (found, usual_log.exp())
    }
}
