//! What `tracing` writes in a test binary, captured into one buffer to be searched.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Everything `tracing` wrote in this test binary (the subscriber is installed on first call).
pub fn log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&buffer);
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(Arc::clone(&sink)))
            .init();
        buffer
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The lines logged so far that hold every one of `needles`.
pub fn lines_with(needles: &[&str]) -> Vec<String> {
    let text = String::from_utf8_lossy(&log().lock().unwrap()).into_owned();
    text.lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .map(str::to_owned)
        .collect()
}

/// The end of the last whole line of the captured log, now.
pub fn log_mark() -> usize {
    let log = log();
    let bytes = log.lock().unwrap();
    bytes.iter().rposition(|b| *b == b'\n').map_or(0, |n| n + 1)
}

/// The access-log lines of requests for exactly `path` the captured log holds from byte
/// `from` (a [`log_mark`]) to `to` (the tests of one binary may run at once and share the log).
pub fn access_lines(path: &str, from: usize, to: Option<usize>) -> Vec<String> {
    access_lines_with(&format!(" path={path} "), from, to)
}

/// As [`access_lines`], for every path starting with `path`.
pub fn access_lines_under(path: &str, from: usize, to: Option<usize>) -> Vec<String> {
    access_lines_with(&format!(" path={path}"), from, to)
}

fn access_lines_with(fragment: &str, from: usize, to: Option<usize>) -> Vec<String> {
    let log = log();
    let bytes = log.lock().unwrap();
    let end = to.unwrap_or(bytes.len()).min(bytes.len());
    String::from_utf8_lossy(&bytes[from.min(end)..end])
        .lines()
        .filter(|l| l.contains("cutout_gateway::access") && l.contains(fragment))
        .map(str::to_owned)
        .collect()
}

/// The value of `name` (with its `=`) in an access-log line.
pub fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name))
        .unwrap_or("-")
}

/// The 5xx answers among `lines`, by `status outcome`.
pub fn five_xx(lines: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for line in lines {
        let status = field(line, "status=");
        if status.starts_with('5') {
            *out.entry(format!("{status} {}", field(line, "outcome=")))
                .or_default() += 1;
        }
    }
    out
}
