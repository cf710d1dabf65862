//! A service's own record of calls to one dependency, read as a stream: the gateway's access
//! log, or a documented CSV or JSON-lines shape a user exports from their tracing or logs
//! (`cutout-lab replay`, see the README's section "Your own traffic").
//!
//! Each line is one call. Three shapes:
//! - **access**: the gateway's access log (`cutout_gateway::access`, one line per request).
//!   Its timestamp is when the answer ended; the call started `duration` before. `outcome=ok`
//!   is a success; `upstream_error`, `timeout`, `unreachable`, `body_error` and
//!   `body_timeout` are failures; a request the gateway's breaker refused (`refused`,
//!   `ejected`) never reached the dependency, so its outcome is unknown; a client that left
//!   counts as its detached attempt's `upstream` outcome, else as nothing; every other
//!   outcome (`client_fault`, `no_route`, `rate_limited`, `exhausted`, …) is not a call to
//!   the dependency and is skipped. Lines that are not access lines (the gateway's other
//!   logging) are skipped. `--cluster NAME` keeps one cluster's lines.
//! - **csv**: a header naming at least `timestamp`, `duration` and `outcome` (and optionally
//!   `host`), in any order, extra columns ignored.
//! - **jsonl**: one JSON object a line with the same keys.
//!
//! In CSV and JSON lines, `timestamp` is when the call **started** (what a tracing span
//! records): RFC 3339 (`2026-12-04T10:00:00.250Z`) or seconds since the Unix epoch
//! (`1796378400.25`). `duration` is a duration as people write it (`12ms`, `1.2s`, `850µs`,
//! `2m 30s`) or a plain number of milliseconds. `outcome` is `ok`/`success` (a success),
//! `error`/`failure`/`fail`/`timeout` or any gateway failure word (a failure), `refused`
//! (your own breaker refused it: never sent, outcome unknown) or `ignored` (skipped).
//!
//! # Malformed input
//! A line that cannot be read (truncated, an unknown outcome, a bad timestamp or duration,
//! not UTF-8, longer than [`MAX_LINE`] bytes) is skipped with a [`Warning`] naming its line
//! number. Memory stays bounded whatever the input's size: lines are read one at a time into
//! a buffer of at most [`MAX_LINE`] bytes, and calls wait to be replayed in start order for at
//! most [`REORDER`] of log time (a log written at each call's end is out of start order by
//! the calls' durations). A call that starts before one already handed on (the log's clock
//! went backwards, or lines out of order by more than [`REORDER`]) is handed on at that
//! call's start, with a warning.

mod access;
mod table;

use std::collections::BinaryHeap;
use std::io::BufRead;

/// The longest line read; the rest of a longer one is skipped (with a warning).
pub const MAX_LINE: usize = 64 * 1024;

/// How far out of start order a call may be logged and still be replayed in order, in
/// nanoseconds (2 minutes): longer than any attempt timeout a gateway or client should run.
pub const REORDER: u64 = 120_000_000_000;

/// The most distinct hosts a record names; further ones are read as no host.
pub const MAX_HOSTS: usize = 4096;

/// What the dependency answered a recorded call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Answer {
    /// It succeeded.
    Success,
    /// It failed (an error, a timeout, no connection).
    Failure,
    /// Never sent: the recording's own breaker refused it, so what the dependency would have
    /// answered is not known.
    Unknown,
}

/// One recorded call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// When it started, in nanoseconds since the Unix epoch.
    pub start: u64,
    /// How long it took, in nanoseconds.
    pub duration: u64,
    /// What the dependency answered.
    pub answer: Answer,
    /// The host it went to, an index into [`Record::hosts`], if the record names one.
    pub host: Option<u16>,
    /// Its line in the input (from 1).
    pub line: u64,
}

/// The input's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The gateway's access log.
    Access,
    /// CSV with a header.
    Csv,
    /// JSON lines.
    Jsonl,
}

impl Shape {
    /// The shape named `name` (`access`, `csv`, `jsonl`).
    pub fn named(name: &str) -> Result<Shape, String> {
        match name {
            "access" => Ok(Shape::Access),
            "csv" => Ok(Shape::Csv),
            "jsonl" | "json" => Ok(Shape::Jsonl),
            other => Err(format!(
                "--format {other:?}: expected access (the gateway's access log), csv or jsonl"
            )),
        }
    }

    /// The shape a file's name suggests (past a `.gz`): `.csv`, `.jsonl`/`.json`, else the
    /// access log.
    pub fn guess(path: &str) -> Shape {
        let lower = path.to_ascii_lowercase();
        let lower = lower.strip_suffix(".gz").unwrap_or(&lower);
        if lower.ends_with(".csv") {
            Shape::Csv
        } else if lower.ends_with(".jsonl") || lower.ends_with(".json") {
            Shape::Jsonl
        } else {
            Shape::Access
        }
    }

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Access => "access",
            Shape::Csv => "csv",
            Shape::Jsonl => "jsonl",
        }
    }
}

/// A line that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Its line number (from 1).
    pub line: u64,
    /// What was wrong.
    pub message: String,
}

/// What one line held.
pub(crate) enum Entry {
    /// A call: `at` is the line's timestamp (its end for the access log, its start otherwise).
    Call {
        at: u64,
        duration: u64,
        answer: Answer,
        host: Option<String>,
    },
    /// Nothing to replay (another log line, another cluster, an outcome that is no call).
    Skip,
    /// An access line of a second cluster, in a log read without `--cluster`.
    Cluster(String),
}

/// Tallies of what the record held beside its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lines read.
    pub lines: u64,
    /// Lines that were no call to replay (other log lines, other clusters, outcomes that did
    /// not reach the dependency).
    pub skipped: u64,
    /// Lines that could not be read (each one a [`Warning`]).
    pub bad: u64,
    /// Calls handed on out of start order (each one a [`Warning`]).
    pub reordered: u64,
}

/// A record being read: an iterator over its calls in start order.
pub struct Record<R> {
    input: R,
    shape: Shape,
    cluster: Option<String>,
    /// Without `cluster`: the access log's first cluster.
    first: Option<String>,
    header: Option<table::Header>,
    buffer: Vec<u8>,
    waiting: BinaryHeap<std::cmp::Reverse<(u64, u64, Waiting)>>,
    /// The latest timestamp read: calls starting more than [`REORDER`] before it are handed on.
    front: u64,
    /// The start of the last call handed on.
    last: u64,
    done: bool,
    hosts: Vec<String>,
    warnings: Vec<Warning>,
    tally: Tally,
}

/// A call waiting in the reorder buffer (ordered by start, then line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Waiting {
    duration: u64,
    answer: Answer,
    host: Option<u16>,
}

impl<R: BufRead> Record<R> {
    /// A record of `shape` read from `input`; with `cluster`, only that cluster's access
    /// lines.
    pub fn new(input: R, shape: Shape, cluster: Option<String>) -> Record<R> {
        Record {
            input,
            shape,
            cluster,
            first: None,
            header: None,
            buffer: Vec::with_capacity(1024),
            waiting: BinaryHeap::new(),
            front: 0,
            last: 0,
            done: false,
            hosts: Vec::new(),
            warnings: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// The hosts named so far, by index.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The warnings so far, in line order (a reorder's comes when the call is handed on).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// What the record held so far beside its calls.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    fn warn(&mut self, line: u64, message: String) {
        // The count is kept whatever the number; the messages up to a bound.
        if self.warnings.len() < 10_000 {
            self.warnings.push(Warning { line, message });
        }
    }

    /// Reads the next line into the buffer (at most [`MAX_LINE`] bytes of it): `None` at the
    /// end of the input, `Some(false)` for a line too long.
    fn read_line(&mut self) -> Result<Option<bool>, String> {
        self.buffer.clear();
        let mut fits = true;
        let mut any = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("cannot read the record: {e}")),
            };
            if available.is_empty() {
                return Ok(any.then_some(fits));
            }
            any = true;
            let (taken, end) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            let room = MAX_LINE.saturating_sub(self.buffer.len());
            if taken > room {
                fits = false;
            }
            let content = if end { taken - 1 } else { taken };
            self.buffer
                .extend_from_slice(&available[..content.min(room)]);
            self.input.consume(taken);
            if end {
                return Ok(Some(fits));
            }
        }
    }

    fn host(&mut self, name: Option<String>) -> Option<u16> {
        let name = name?;
        if let Some(i) = self.hosts.iter().position(|h| *h == name) {
            return u16::try_from(i).ok();
        }
        if self.hosts.len() >= MAX_HOSTS {
            return None;
        }
        self.hosts.push(name);
        u16::try_from(self.hosts.len() - 1).ok()
    }

    /// Reads lines until a call is waiting to be handed on or the input ends.
    fn fill(&mut self) -> Result<(), String> {
        while !self.done {
            if let Some(std::cmp::Reverse((start, _, _))) = self.waiting.peek()
                && start.saturating_add(REORDER) < self.front
            {
                return Ok(());
            }
            let Some(fits) = self.read_line()? else {
                self.done = true;
                break;
            };
            self.tally.lines += 1;
            let line = self.tally.lines;
            if !fits {
                self.tally.bad += 1;
                self.warn(line, format!("longer than {MAX_LINE} bytes: skipped"));
                continue;
            }
            let text = match std::str::from_utf8(&self.buffer) {
                Ok(text) => text.trim_end_matches('\r').to_owned(),
                Err(_) => {
                    self.tally.bad += 1;
                    self.warn(line, "not UTF-8: skipped".into());
                    continue;
                }
            };
            let entry = match self.shape {
                Shape::Access => access::entry(&text, self.cluster.as_deref(), &mut self.first),
                Shape::Csv => match &self.header {
                    None => match table::Header::parse(&text) {
                        Ok(header) => {
                            self.header = Some(header);
                            Ok(Entry::Skip)
                        }
                        Err(e) => return Err(format!("line {line}: {e}")),
                    },
                    Some(header) => header.entry(&text),
                },
                Shape::Jsonl => table::json_entry(&text),
            };
            match entry {
                Ok(Entry::Skip) => self.tally.skipped += 1,
                Ok(Entry::Cluster(other)) => {
                    return Err(format!(
                        "line {line}: cluster {other}, after {}: the log holds several \
                         clusters, each a dependency of its own; replay one with --cluster \
                         NAME",
                        self.first.as_deref().unwrap_or("another")
                    ));
                }
                Ok(Entry::Call {
                    at,
                    duration,
                    answer,
                    host,
                }) => {
                    let start = match self.shape {
                        Shape::Access => at.saturating_sub(duration),
                        Shape::Csv | Shape::Jsonl => at,
                    };
                    self.front = self.front.max(at);
                    let host = self.host(host);
                    let waiting = Waiting {
                        duration,
                        answer,
                        host,
                    };
                    self.waiting.push(std::cmp::Reverse((start, line, waiting)));
                }
                Err(e) => {
                    self.tally.bad += 1;
                    self.warn(line, format!("{e}: skipped"));
                }
            }
        }
        Ok(())
    }

    /// The next call in start order, or the reason the record cannot be read on.
    pub fn next_call(&mut self) -> Result<Option<Call>, String> {
        self.fill()?;
        let Some(std::cmp::Reverse((start, line, waiting))) = self.waiting.pop() else {
            return Ok(None);
        };
        let start = if start < self.last {
            self.tally.reordered += 1;
            self.warn(
                line,
                format!(
                    "starts {} before a call already replayed (the clock went backwards, or \
                     lines are out of order by more than 2 minutes): replayed at that call's \
                     start",
                    cutout::HumanDuration(std::time::Duration::from_nanos(self.last - start))
                ),
            );
            self.last
        } else {
            start
        };
        self.last = start;
        Ok(Some(Call {
            start,
            duration: waiting.duration,
            answer: waiting.answer,
            host: waiting.host,
            line,
        }))
    }
}

/// A duration as people write it: `850ns`, `120µs` (or `us`), `12ms`, `1.2s`, `2m 30s`,
/// `1h 5m`, or a plain number of milliseconds when `bare_millis`. Nanoseconds.
pub(crate) fn duration(text: &str, bare_millis: bool) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an empty duration".into());
    }
    if bare_millis && let Ok(ms) = text.parse::<f64>() {
        if !(0.0..=1e12).contains(&ms) {
            return Err(format!("duration {text:?}: out of range"));
        }
        return Ok((ms * 1e6).round() as u64);
    }
    let mut total: f64 = 0.0;
    for part in text.split_whitespace() {
        let split = part
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration {text:?}: a number without a unit"))?;
        let (number, unit) = part.split_at(split);
        let n: f64 = number
            .parse()
            .map_err(|_| format!("duration {text:?}: {number:?} is not a number"))?;
        let scale = match unit {
            "ns" => 1.0,
            "µs" | "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            _ => return Err(format!("duration {text:?}: unknown unit {unit:?}")),
        };
        total += n * scale;
    }
    if !(0.0..=1e21).contains(&total) {
        return Err(format!("duration {text:?}: out of range"));
    }
    Ok(total.round() as u64)
}

/// A timestamp: RFC 3339, or seconds since the Unix epoch. Nanoseconds since the epoch.
pub(crate) fn timestamp(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        if !(0.0..4e9).contains(&seconds) {
            return Err(format!("timestamp {text:?}: out of range"));
        }
        return Ok((seconds * 1e9).round() as u64);
    }
    let time = humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
        .or_else(|_| humantime::parse_rfc3339(text))
        .map_err(|e| format!("timestamp {text:?}: {e}"))?;
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("timestamp {text:?}: before 1970"))?;
    u64::try_from(since.as_nanos()).map_err(|_| format!("timestamp {text:?}: out of range"))
}

/// An outcome word of CSV or JSON lines.
pub(crate) fn answer(word: &str) -> Result<Option<Answer>, String> {
    let word = word.trim().to_ascii_lowercase();
    Ok(match word.as_str() {
        "ok" | "success" | "succeeded" => Some(Answer::Success),
        "error" | "failure" | "failed" | "fail" | "timeout" | "upstream_error" | "unreachable"
        | "body_error" | "body_timeout" => Some(Answer::Failure),
        "refused" | "rejected" | "ejected" => Some(Answer::Unknown),
        "ignored" => None,
        other => {
            return Err(format!(
                "unknown outcome {other:?} (expected ok, error, timeout, refused or ignored)"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(text: &str, shape: Shape) -> (Vec<Call>, Vec<Warning>, Tally) {
        let mut record = Record::new(text.as_bytes(), shape, None);
        let mut calls = Vec::new();
        while let Some(call) = record.next_call().unwrap() {
            calls.push(call);
        }
        (calls, record.warnings().to_vec(), record.tally())
    }

    #[test]
    fn durations_read_as_the_gateway_writes_them() {
        assert_eq!(duration("850µs", false), Ok(850_000));
        assert_eq!(duration("1.2s", false), Ok(1_200_000_000));
        assert_eq!(duration("2m 30s", false), Ok(150_000_000_000));
        assert_eq!(duration("12.5", true), Ok(12_500_000));
        assert!(duration("12.5", false).is_err());
        assert!(duration("3 parsecs", false).is_err());
        assert!(duration("", true).is_err());
    }

    #[test]
    fn timestamps_read_rfc3339_and_epoch_seconds() {
        let a = timestamp("2026-12-04T10:00:00.250Z").unwrap();
        let b = timestamp("2026-12-04T10:00:00.250000Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(timestamp("1.5"), Ok(1_500_000_000));
        assert!(timestamp("yesterday").is_err());
    }

    #[test]
    fn calls_come_out_in_start_order_and_a_clock_going_back_is_named() {
        // Written at each call's end: the second line's call started first.
        let text = "timestamp,duration,outcome\n\
                    100,10,ok\n\
                    99.5,10,error\n\
                    101,5,ok\n\
                    -3,5,ok\n\
                    101.5,abc,ok\n\
                    102,5,maybe\n";
        let (calls, warnings, tally) = calls(text, Shape::Csv);
        let starts: Vec<u64> = calls.iter().map(|c| c.start).collect();
        assert_eq!(starts, [99_500_000_000, 100_000_000_000, 101_000_000_000]);
        assert_eq!(calls[0].answer, Answer::Failure);
        assert_eq!(calls[0].line, 3);
        let lines: Vec<u64> = warnings.iter().map(|w| w.line).collect();
        assert_eq!(lines, [5, 6, 7], "{warnings:?}");
        assert_eq!(tally.bad, 3);
    }

    #[test]
    fn a_line_longer_than_the_limit_is_skipped_and_the_next_read() {
        let mut text = String::from("timestamp,duration,outcome\n");
        text.push_str(&"x".repeat(MAX_LINE + 10));
        text.push_str("\n1,5,ok\n2,5,ok");
        let (calls, warnings, _) = calls(&text, Shape::Csv);
        assert_eq!(
            calls.len(),
            2,
            "the last line has no newline and still counts"
        );
        assert_eq!(warnings[0].line, 2);
        assert!(warnings[0].message.contains("longer than"));
    }

    #[test]
    fn a_start_far_behind_is_replayed_at_the_last_start_with_a_warning() {
        // 10 minutes later, then a line 5 minutes back: beyond the reorder window.
        let text = "timestamp,duration,outcome\n0,5,ok\n600,5,ok\n900,5,ok\n300,5,error\n";
        let (calls, warnings, tally) = calls(text, Shape::Csv);
        assert_eq!(calls.len(), 4);
        assert_eq!(tally.reordered, 1);
        assert!(calls.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(
            warnings
                .iter()
                .any(|w| w.line == 5 && w.message.contains("backwards"))
        );
    }
}
