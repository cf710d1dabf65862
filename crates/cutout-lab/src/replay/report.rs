//! A replay's report: the text table beside no breaker and the oracle, each candidate's
//! openings, the recommendation as a block to paste, and the same figures as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use cutout::HumanDuration;

use super::{Outcome, Replay};

impl Replay {
    /// The report: the record, its incidents, a table with one column per candidate between
    /// no breaker and the oracle, each candidate's openings, and the recommendation.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let span = |n: u64| HumanDuration(Duration::from_nanos(n));
        let at = |n: u64| {
            let time = std::time::UNIX_EPOCH + Duration::from_nanos(self.origin.saturating_add(n));
            humantime::format_rfc3339_seconds(time).to_string()
        };
        let [ok, failed, unknown] = self.calls;
        let _ = writeln!(
            out,
            "record: {} calls over {} from {}: {ok} succeeded, {failed} failed, {unknown} of \
             unknown answer (refused by the recording's own breaker); usual duration {}",
            ok + failed + unknown,
            span(self.end),
            at(0),
            span(self.usual.round() as u64),
        );
        if let Some(budget) = self.options.latency_budget {
            let _ = writeln!(
                out,
                "latency budget {}: {} successes came later and count as failed",
                span(budget),
                self.late
            );
        }
        let _ = writeln!(
            out,
            "incidents (bins of {}: failing at {:.0}% failed, slow at {}× the usual duration):",
            span(self.options.bin),
            self.options.incident_errors * 100.0,
            self.options.incident_slowdown
        );
        if self.incidents.is_empty() {
            let _ = writeln!(out, "  none: every trip below is on a healthy dependency");
        }
        for (n, i) in self.incidents.iter().enumerate() {
            let refused = if i.refused > 0 {
                format!(
                    "; {} refused by the recording's own breaker (their answer unknown)",
                    i.refused
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {}. {} for {} ({}): {} of {} calls failed{refused}",
                n + 1,
                at(i.start),
                span(i.end - i.start),
                if i.failing { "failing" } else { "slow" },
                i.failures,
                i.calls
            );
        }
        out.push('\n');
        let mut rows: Vec<(String, Vec<String>)> = Vec::new();
        let mut row = |name: &str, cells: Vec<String>| rows.push((name.to_owned(), cells));
        let each = |f: &dyn Fn(&Outcome) -> String| -> Vec<String> {
            self.outcomes.iter().map(f).collect()
        };
        let around = |none: String, cells: Vec<String>, oracle: String| {
            let mut all = vec![none];
            all.extend(cells);
            all.push(oracle);
            all
        };
        row(
            "trips",
            around(
                "0".into(),
                each(&|o| o.opens().count().to_string()),
                "-".into(),
            ),
        );
        row(
            "trips on a healthy dependency (outside every failing incident)",
            around(
                "0".into(),
                each(&|o| self.false_trips(o).to_string()),
                "0".into(),
            ),
        );
        for (n, incident) in self.incidents.iter().enumerate() {
            row(
                &format!("incident {}: opened after", n + 1),
                around(
                    "never".into(),
                    each(&|o| {
                        self.time_to_open(o, incident)
                            .map_or("never".into(), |t| span(t).to_string())
                    }),
                    "0s".into(),
                ),
            );
            row(
                &format!("incident {}: closed after it ended", n + 1),
                around(
                    "-".into(),
                    each(&|o| match self.closed_after_end(o, incident) {
                        None => "-".into(),
                        Some(None) => "still open at the end".into(),
                        Some(Some(t)) => span(t).to_string(),
                    }),
                    "0s".into(),
                ),
            );
        }
        row(
            "time not closed",
            around(
                "0s".into(),
                each(&|o| span(o.time_open(self.end)).to_string()),
                "-".into(),
            ),
        );
        row(
            "refused calls that would have succeeded (cost)",
            around(
                "0".into(),
                each(&|o| o.counts.refused_successes().to_string()),
                "0".into(),
            ),
        );
        row(
            "refused calls that would have failed (spared)",
            around(
                "0".into(),
                each(&|o| o.counts.refused[1].to_string()),
                failed.to_string(),
            ),
        );
        row(
            "admitted calls that failed (reached the failing dependency)",
            around(
                failed.to_string(),
                each(&|o| o.counts.admitted_failures().to_string()),
                "0".into(),
            ),
        );
        row(
            "calls of unknown answer admitted",
            around(
                unknown.to_string(),
                each(&|o| o.counts.admitted[2].to_string()),
                "-".into(),
            ),
        );
        row(
            "regret against the oracle (cost + admitted failures)",
            around(
                failed.to_string(),
                each(&|o| o.counts.regret().to_string()),
                "0".into(),
            ),
        );
        let mut header = vec![crate::NO_BREAKER.to_owned()];
        header.extend(self.outcomes.iter().map(|o| o.candidate.name.clone()));
        header.push(crate::ORACLE.to_owned());
        let _ = writeln!(out, "| figure | {} |", header.join(" | "));
        let _ = writeln!(out, "|---|{}", "---|".repeat(header.len()));
        for (name, cells) in &rows {
            let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
        }
        for o in &self.outcomes {
            let opens: Vec<(u64, &str)> = o.opens().collect();
            if opens.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{} opened {} times:", o.candidate.name, opens.len());
            for (n, (t, reason)) in opens.iter().enumerate() {
                if n == 20 {
                    let _ = writeln!(out, "  … and {} more", opens.len() - 20);
                    break;
                }
                let whose = match self.incident_number(*t) {
                    Some(n) if !self.on_healthy(*t) => format!("incident {n}"),
                    Some(n) => format!(
                        "incident {n}, slow only: a trip on a healthy dependency unless a \
                         --latency-budget makes its calls failures"
                    ),
                    None => "a healthy dependency".into(),
                };
                let _ = writeln!(out, "  {} (+{}) on {reason}: {whose}", at(*t), span(*t));
            }
        }
        out.push('\n');
        match self.recommended() {
            Some(o) => {
                let window = match self.window(o) {
                    _ if self.incidents.is_empty() => "the record shows no incident".to_owned(),
                    (Some(w), 0) => format!(
                        "it opened within {} of the start of every incident",
                        span(w)
                    ),
                    (Some(w), missed) => format!(
                        "it opened within {} of the start of {} of the {} incidents and not \
                         in the others",
                        span(w),
                        self.incidents.len() - missed,
                        self.incidents.len()
                    ),
                    (None, _) => "it opened in none of the incidents".to_owned(),
                };
                let _ = writeln!(
                    out,
                    "recommendation ({}): {}, with no trip on a healthy dependency and a \
                     regret of {} against the oracle; {window}. Paste into your config \
                     file's configs (the gateway's [breakers.configs]):\n\n{}",
                    OBJECTIVE,
                    o.candidate.name,
                    o.counts.regret(),
                    o.candidate.section("recommended")
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "recommendation ({OBJECTIVE}): none: every setting tripped on a healthy \
                     dependency. Try a sweep (--sweep failure-ratio=…) or raise the \
                     thresholds; if it tripped on a slow stretch your callers could not \
                     wait out, say how long they wait (--latency-budget)."
                );
            }
        }
        out
    }
}

/// What the recommendation optimises, as the report names it.
pub const OBJECTIVE: &str = "no trip outside an incident; then the least regret against the \
                             oracle; then the earliest opening in the incidents";

/// Nanoseconds as seconds, for the JSON.
fn seconds(n: u64) -> f64 {
    n as f64 / 1e9
}

impl Replay {
    /// The report's figures as JSON, for a script or a test:
    ///
    /// ```json
    /// { "record": { "start": "2026-12-04T10:00:00Z", "seconds": 600.0,
    ///               "succeeded": 5900, "failed": 100, "unknown": 0,
    ///               "usual_duration_seconds": 0.012, "bin_seconds": 10.0 },
    ///   "incidents": [ { "offset_seconds": 120.0, "seconds": 60.0, "failing": true,
    ///                    "calls": 600, "failures": 590, "refused": 0 } ],
    ///   "candidates": [ { "name": "defaults", "block": {}, "trips": 1, "false_trips": 0,
    ///                     "opens": [ { "offset_seconds": 121.3, "reason": "…", "incident": 1 } ],
    ///                     "incidents": [ { "opened_after_seconds": 1.3,
    ///                                      "closed_after_end_seconds": 4.0 } ],
    ///                     "seconds_not_closed": 63.0,
    ///                     "refused": { "succeeded": 12, "failed": 570, "unknown": 0 },
    ///                     "admitted": { "succeeded": 5888, "failed": 20, "unknown": 0 },
    ///                     "regret": 32 } ],
    ///   "objective": "…", "recommended": "defaults" }
    /// ```
    ///
    /// Offsets are from the record's first call; `incident` (from 1) is `null` for a trip on
    /// a healthy dependency, and `opened_after_seconds` for an incident it did not open in,
    /// `closed_after_end_seconds` when it did not open there or was still open at the end.
    pub fn json(&self) -> serde_json::Value {
        use serde_json::json;
        let by_answer = |counts: &[u64; 3]| json!({ "succeeded": counts[0], "failed": counts[1], "unknown": counts[2] });
        let start = std::time::UNIX_EPOCH + Duration::from_nanos(self.origin);
        let incidents: Vec<_> = self
            .incidents
            .iter()
            .map(|i| {
                json!({
                    "offset_seconds": seconds(i.start),
                    "seconds": seconds(i.end - i.start),
                    "failing": i.failing,
                    "calls": i.calls,
                    "failures": i.failures,
                    "refused": i.refused,
                })
            })
            .collect();
        let candidates: Vec<_> = self
            .outcomes
            .iter()
            .map(|o| {
                let opens: Vec<_> = o
                    .opens()
                    .map(|(at, reason)| {
                        json!({
                            "offset_seconds": seconds(at),
                            "reason": reason,
                            "incident": self.incident_number(at),
                        })
                    })
                    .collect();
                let incidents: Vec<_> = self
                    .incidents
                    .iter()
                    .map(|i| {
                        let opened = self.time_to_open(o, i);
                        let closed = self.closed_after_end(o, i).flatten().map(seconds);
                        json!({
                            "opened_after_seconds": opened.map(seconds),
                            "closed_after_end_seconds": closed,
                        })
                    })
                    .collect();
                json!({
                    "name": o.candidate.name,
                    "block": o.candidate.block,
                    "trips": o.opens().count(),
                    "false_trips": self.false_trips(o),
                    "opens": opens,
                    "incidents": incidents,
                    "seconds_not_closed": seconds(o.time_open(self.end)),
                    "refused": by_answer(&o.counts.refused),
                    "admitted": by_answer(&o.counts.admitted),
                    "regret": o.counts.regret(),
                })
            })
            .collect();
        let [ok, failed, unknown] = self.calls;
        json!({
            "record": {
                "start": humantime::format_rfc3339_millis(start).to_string(),
                "seconds": seconds(self.end),
                "succeeded": ok,
                "failed": failed,
                "unknown": unknown,
                "late": self.late,
                "latency_budget_seconds": self.options.latency_budget.map(seconds),
                "usual_duration_seconds": self.usual / 1e9,
                "bin_seconds": seconds(self.options.bin),
            },
            "incidents": incidents,
            "candidates": candidates,
            "objective": OBJECTIVE,
            "recommended": self.recommended().map(|o| o.candidate.name.as_str()),
            "recommended_window_seconds": self
                .recommended()
                .and_then(|o| self.window(o).0)
                .map(seconds),
        })
    }
}
