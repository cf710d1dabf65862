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
//!   `host`, the replica called, and `pod`, the caller that called it), in any order, extra
//!   columns ignored.
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
//! the calls' durations). A line dated more than [`REORDER`] before the latest time read (the
//! log's clock went back, lines out of order, a garbled field) or more than [`MAX_GAP`] after
//! it is skipped with a warning, and so is a timestamp outside 2000–2100 or a duration over
//! [`MAX_DURATION`]; an access-log call longer than [`REORDER`], whose start falls before
//! calls already handed on, is handed on at the last start, with a warning. A byte-order mark
//! is read as no part of the first line.

mod access;
mod table;

use std::collections::BinaryHeap;
use std::io::BufRead;

/// The longest line read; the rest of a longer one is skipped (with a warning).
pub const MAX_LINE: usize = 64 * 1024;

/// How far out of start order a call may be logged and still be replayed in order, in
/// nanoseconds (2 minutes): longer than any attempt timeout a gateway or client should run.
pub const REORDER: u64 = 120_000_000_000;

/// How far after the latest time read a line may be dated (a day): a later one is a bad
/// field, skipped with a warning, unless [`GAP_RUN`] lines in a row are.
pub const MAX_GAP: u64 = 86_400_000_000_000;

/// How many lines in a row dated past [`MAX_GAP`] make a gap in the record (an error) rather
/// than bad fields.
pub const GAP_RUN: u64 = 1000;

/// The most distinct hosts a record names; further ones are read as no host.
pub const MAX_HOSTS: usize = 4096;

/// The most distinct pods (callers) a record names; further ones are read as no pod.
pub const MAX_PODS: usize = 10_000;

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
    /// The pod that made it, an index into [`Record::pods`], if the record names one.
    pub pod: Option<u16>,
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

    /// The shape a file's name suggests (past a rotation's `.gz` and `.1`): `.csv`,
    /// `.jsonl`/`.json`, else the access log.
    pub fn guess(path: &str) -> Shape {
        let lower = path.to_ascii_lowercase();
        let lower = lower.strip_suffix(".gz").unwrap_or(&lower);
        let lower = match lower.rsplit_once('.') {
            Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => stem,
            _ => lower,
        };
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
        pod: Option<String>,
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
    /// The line that set `front`.
    front_line: u64,
    /// Lines skipped in a row for being more than [`MAX_GAP`] after `front`.
    ahead: u64,
    /// The start of the last call handed on.
    last: u64,
    done: bool,
    hosts: Names,
    pods: Names,
    warnings: Vec<Warning>,
    tally: Tally,
}

/// A call waiting in the reorder buffer (ordered by start, then line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Waiting {
    duration: u64,
    answer: Answer,
    host: Option<u16>,
    pod: Option<u16>,
}

/// The distinct names of one column (hosts, pods) in the order first read, each given the
/// index it is handed on as; past `most` of them, a new name is read as none.
struct Names {
    names: Vec<String>,
    /// Each name's index (a linear search costs a line one comparison per name).
    index: std::collections::HashMap<String, u16>,
    most: usize,
}

impl Names {
    fn new(most: usize) -> Names {
        Names {
            names: Vec::new(),
            index: std::collections::HashMap::new(),
            most: most.min(usize::from(u16::MAX)),
        }
    }

    fn get(&mut self, name: Option<String>) -> Option<u16> {
        let name = name?;
        if let Some(&i) = self.index.get(&name) {
            return Some(i);
        }
        if self.names.len() >= self.most {
            return None;
        }
        let i = u16::try_from(self.names.len()).ok()?;
        self.index.insert(name.clone(), i);
        self.names.push(name);
        Some(i)
    }
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
            front_line: 0,
            ahead: 0,
            last: 0,
            done: false,
            hosts: Names::new(MAX_HOSTS),
            pods: Names::new(MAX_PODS),
            warnings: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// The hosts named so far, by index.
    pub fn hosts(&self) -> &[String] {
        &self.hosts.names
    }

    /// The pods named so far, by index.
    pub fn pods(&self) -> &[String] {
        &self.pods.names
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

    /// Reads lines until a call is waiting to be handed on or the input ends.
    fn fill(&mut self) -> Result<(), String> {
        while !self.done {
            if self.ahead >= GAP_RUN {
                return Err(format!(
                    "line {}: the last {GAP_RUN} calls are all more than a day after line \
                     {}'s time: a gap in the record, or a bad time on line {}; replay each \
                     stretch apart",
                    self.tally.lines, self.front_line, self.front_line
                ));
            }
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
                // A byte-order mark is no part of the first line.
                Ok(text) if line == 1 => text
                    .trim_start_matches('\u{feff}')
                    .trim_end_matches('\r')
                    .to_owned(),
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
                    pod,
                }) => {
                    let start = match self.shape {
                        Shape::Access => at.saturating_sub(duration),
                        Shape::Csv | Shape::Jsonl => at,
                    };
                    if let Some(why) = self.misplaced(at) {
                        self.tally.bad += 1;
                        self.warn(line, format!("{why}: skipped"));
                        continue;
                    }
                    self.ahead = 0;
                    if at > self.front {
                        self.front = at;
                        self.front_line = line;
                    }
                    let waiting = Waiting {
                        duration,
                        answer,
                        host: self.hosts.get(host),
                        pod: self.pods.get(pod),
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

    /// Why a line dated `at` is not where the record is, if it is not: more than
    /// [`REORDER`] before the latest time read (a clock that went back, lines out of order,
    /// a bad field), or more than [`MAX_GAP`] after it. A run of [`GAP_RUN`] lines after such
    /// a gap is a gap in the record, not a bad line, and stops the replay (by the counter
    /// this keeps).
    fn misplaced(&mut self, at: u64) -> Option<String> {
        let span = |n: u64| cutout::HumanDuration(std::time::Duration::from_nanos(n));
        if self.front == 0 {
            return None;
        }
        if at.saturating_add(REORDER) < self.front {
            return Some(format!(
                "dated {} before line {}'s time: out of order by more than {} (a clock that \
                 went back?)",
                span(self.front - at),
                self.front_line,
                span(REORDER)
            ));
        }
        if at > self.front.saturating_add(MAX_GAP) {
            self.ahead += 1;
            return Some(format!(
                "dated {} after line {}'s time, more than {} ahead (a bad field?)",
                span(at - self.front),
                self.front_line,
                span(MAX_GAP)
            ));
        }
        None
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
            pod: waiting.pod,
            line,
        }))
    }
}

/// The longest call a record may hold: a line with a longer duration is misread.
pub const MAX_DURATION: u64 = 86_400_000_000_000;

/// The earliest and latest timestamps read (2000-01-01 and 2100-01-01): anything else is a
/// null or garbled field, not a call.
const PLAUSIBLE: std::ops::Range<u64> = 946_684_800_000_000_000..4_102_444_800_000_000_000;

/// A field as a warning quotes it: at most 80 characters, so that a warning stays small
/// whatever the line.
pub(crate) fn quoted(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{:?}…", &text[..at]),
        None => format!("{text:?}"),
    }
}

/// A duration as people write it: `850ns`, `120µs` (or `us`), `12ms`, `1.2s`, `2m 30s`,
/// `1h 5m`, or a plain number of milliseconds when `bare_millis`; at most [`MAX_DURATION`].
/// Nanoseconds.
pub(crate) fn duration(text: &str, bare_millis: bool) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an empty duration".into());
    }
    let out_of_range = || {
        format!(
            "duration {}: out of range (a call of at most a day)",
            quoted(text)
        )
    };
    let total = match text.parse::<f64>() {
        Ok(ms) if bare_millis => ms * 1e6,
        _ => {
            let mut total: f64 = 0.0;
            for part in text.split_whitespace() {
                let split = part
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .ok_or_else(|| format!("duration {}: a number without a unit", quoted(text)))?;
                let (number, unit) = part.split_at(split);
                let n: f64 = number.parse().map_err(|_| {
                    format!(
                        "duration {}: {} is not a number",
                        quoted(text),
                        quoted(number)
                    )
                })?;
                let scale = match unit {
                    "ns" => 1.0,
                    // The micro sign (U+00B5) and the Greek mu (U+03BC) both.
                    "µs" | "\u{3bc}s" | "us" => 1e3,
                    "ms" => 1e6,
                    "s" => 1e9,
                    "m" | "min" => 60e9,
                    "h" => 3600e9,
                    _ => {
                        return Err(format!(
                            "duration {}: unknown unit {}",
                            quoted(text),
                            quoted(unit)
                        ));
                    }
                };
                total += n * scale;
            }
            total
        }
    };
    if !(0.0..=MAX_DURATION as f64).contains(&total) {
        return Err(out_of_range());
    }
    Ok(total.round() as u64)
}

/// A timestamp: RFC 3339 with `Z` or an offset (`2026-12-04T11:00:00.5+01:00`), one without
/// a zone read as UTC (`2026-12-04 10:00:00`), or seconds since the Unix epoch; from 2000 to
/// 2100. Nanoseconds since the epoch.
pub(crate) fn timestamp(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let nanos = if let Ok(seconds) = text.parse::<f64>() {
        if !(0.0..4.2e9).contains(&seconds) {
            return Err(format!("timestamp {}: out of range", quoted(text)));
        }
        epoch_nanos(text).unwrap_or((seconds * 1e9).round() as u64)
    } else {
        use time::format_description::well_known::Rfc3339;
        let nanos = match time::OffsetDateTime::parse(text, &Rfc3339) {
            Ok(time) => Some(time.unix_timestamp_nanos()),
            // No zone: humantime reads it as UTC.
            Err(_) => humantime::parse_rfc3339_weak(text)
                .ok()
                .filter(|_| !has_zone(text))
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i128),
        };
        let nanos = nanos.ok_or_else(|| {
            format!(
                "timestamp {}: expected RFC 3339 (2026-12-04T10:00:00.250Z, or with an \
                 offset) or seconds since the epoch",
                quoted(text)
            )
        })?;
        u64::try_from(nanos).unwrap_or(0)
    };
    if !PLAUSIBLE.contains(&nanos) {
        return Err(format!(
            "timestamp {}: not between 2000 and 2100 (a null or garbled field?)",
            quoted(text)
        ));
    }
    Ok(nanos)
}

/// Seconds since the epoch in plain decimal (`1796378400.25`), exactly to the nanosecond: a
/// 64-bit float holds such a time only to about 250 ns.
fn epoch_nanos(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut nanos: u64 = 0;
    for (i, digit) in fraction.bytes().take(9).enumerate() {
        nanos += u64::from(digit - b'0') * 10u64.pow(8 - i as u32);
    }
    whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(nanos)
}

/// Whether an RFC 3339-like text ends with a zone (`Z`, `+01:00`, `-0500`), which humantime's
/// weak reading would drop.
fn has_zone(text: &str) -> bool {
    let Some((_, time)) = text.split_once(['T', 't', ' ']) else {
        return false;
    };
    time.ends_with(['Z', 'z']) || time.contains(['+', '-'])
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
                "unknown outcome {} (expected ok, error, timeout, refused or ignored)",
                quoted(other)
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
    fn timestamps_read_rfc3339_with_offsets_and_epoch_seconds() {
        let a = timestamp("2026-12-04T10:00:00.250Z").unwrap();
        assert_eq!(timestamp("2026-12-04T10:00:00.250000Z"), Ok(a));
        assert_eq!(timestamp("2026-12-04T12:00:00.250+02:00"), Ok(a));
        assert_eq!(timestamp("2026-12-04T05:00:00.25-05:00"), Ok(a));
        assert_eq!(timestamp("2026-12-04 10:00:00.250"), Ok(a), "no zone: UTC");
        assert_eq!(timestamp("1796378400.25"), Ok(a));
        assert!(timestamp("yesterday").is_err());
        // A null exported as 0, and a year off by a century, are no calls.
        assert!(
            timestamp("0")
                .unwrap_err()
                .contains("not between 2000 and 2100")
        );
        assert!(timestamp("2126-12-04T10:00:00Z").is_err());
    }

    #[test]
    fn durations_past_a_day_are_refused_and_warnings_stay_short() {
        assert!(duration("25h", false).is_err());
        assert!(duration("100000000h", false).is_err());
        assert_eq!(duration("24h", false), Ok(MAX_DURATION));
        assert_eq!(duration("5\u{3bc}s", false), Ok(5_000), "the Greek mu");
        let long = "x".repeat(60_000);
        assert!(duration(&long, false).unwrap_err().len() < 200);
        assert!(answer(&long).unwrap_err().len() < 200);
    }

    /// A CSV record of `rows` (seconds after 2026-12-04T10:00:00Z, duration, outcome).
    fn csv(rows: &[(&str, &str, &str)]) -> String {
        let mut text = String::from("timestamp,duration,outcome\n");
        for (at, duration, outcome) in rows {
            let at = match at.parse::<f64>() {
                Ok(offset) => format!("{:.3}", 1_796_378_400.0 + offset),
                Err(_) => (*at).to_owned(),
            };
            text += &format!("{at},{duration},{outcome}\n");
        }
        text
    }

    const T0: u64 = 1_796_378_400_000_000_000;

    #[test]
    fn calls_come_out_in_start_order_and_bad_lines_are_named() {
        // Written at each call's end: the second line's call started first.
        let text = csv(&[
            ("100", "10", "ok"),
            ("99.5", "10", "error"),
            ("101", "5", "ok"),
            ("-300", "5", "ok"),
            ("101.5", "abc", "ok"),
            ("102", "5", "maybe"),
        ]);
        let (calls, warnings, tally) = calls(&text, Shape::Csv);
        let starts: Vec<u64> = calls.iter().map(|c| c.start - T0).collect();
        assert_eq!(starts, [99_500_000_000, 100_000_000_000, 101_000_000_000]);
        assert_eq!(calls[0].answer, Answer::Failure);
        assert_eq!(calls[0].line, 3);
        let lines: Vec<u64> = warnings.iter().map(|w| w.line).collect();
        assert_eq!(lines, [5, 6, 7], "{warnings:?}");
        assert!(warnings[0].message.contains("out of order"), "{warnings:?}");
        assert_eq!(tally.bad, 3);
    }

    #[test]
    fn a_line_longer_than_the_limit_is_skipped_and_the_next_read() {
        let mut text = String::from("timestamp,duration,outcome\n");
        text.push_str(&"x".repeat(MAX_LINE + 10));
        text.push_str("\n1796378401,5,ok\n1796378402,5,ok");
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
    fn a_line_far_behind_or_far_ahead_is_skipped_with_a_warning() {
        // 10 minutes on, then a line 5 minutes back (beyond the reorder window), one a year
        // ahead, and one 1970 line.
        let text = csv(&[
            ("0", "5", "ok"),
            ("600", "5", "ok"),
            ("900", "5", "ok"),
            ("600", "5", "error"),
            ("31536000", "5", "ok"),
            ("1.5", "5", "ok"),
            ("901", "5", "ok"),
        ]);
        let (calls, warnings, tally) = calls(&text, Shape::Csv);
        assert_eq!(calls.len(), 4, "{warnings:?}");
        assert_eq!((tally.bad, tally.reordered), (3, 0));
        let lines: Vec<u64> = warnings.iter().map(|w| w.line).collect();
        assert_eq!(lines, [5, 6, 7], "{warnings:?}");
        assert!(warnings[1].message.contains("ahead"), "{warnings:?}");
    }

    #[test]
    fn a_record_that_moves_on_by_more_than_a_day_is_a_gap_not_bad_lines() {
        let mut rows = vec![("0".to_owned(), "5", "ok")];
        for i in 0..GAP_RUN + 5 {
            rows.push(((200_000 + i).to_string(), "5", "ok"));
        }
        let rows: Vec<(&str, &str, &str)> =
            rows.iter().map(|(a, b, c)| (a.as_str(), *b, *c)).collect();
        let text = csv(&rows);
        let mut record = Record::new(text.as_bytes(), Shape::Csv, None);
        let mut error = None;
        loop {
            match record.next_call() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        let error = error.expect("a gap of two days is named");
        assert!(error.contains("a gap in the record"), "{error}");
    }

    #[test]
    fn an_access_call_longer_than_the_reorder_window_is_replayed_at_the_last_start() {
        // A 5-minute call ends after calls that started after it: its start is before calls
        // already handed on.
        let line = |at: &str, duration: &str| {
            format!(
                "2026-12-04T10:{at}Z  INFO request request_id=r method=GET path=/a cluster=a \
                 host=h status=200 duration={duration} decision=admitted outcome=ok\n"
            )
        };
        let text = line("00:00.000000", "1ms")
            + &line("03:00.000000", "1ms")
            + &line("06:00.000000", "1ms")
            + &line("06:30.000000", "5m")
            + &line("06:31.000000", "1ms");
        let (calls, warnings, tally) = calls(&text, Shape::Access);
        assert_eq!(calls.len(), 5, "{warnings:?}");
        assert_eq!(tally.reordered, 1);
        assert!(calls.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(
            warnings
                .iter()
                .any(|w| w.line == 4 && w.message.contains("went backwards")),
            "{warnings:?}"
        );
    }
}
