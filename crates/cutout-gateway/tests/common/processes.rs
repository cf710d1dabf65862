//! Processes a test starts beside itself: `cutout-gateway upstream`, busy loops, and whether
//! `wrk` is there to load the gateway (a test skips with one line without it, DESIGN §7).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process of ours, killed (by its id) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cutout-gateway upstream` (the built-in test upstream) on `port` as a process of its own,
/// once it accepts; its stderr goes to `stderr` when given.
pub fn upstream_process(port: u16, stderr: Option<&Path>) -> Proc {
    let err = match stderr {
        Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
        None => Stdio::null(),
    };
    let child = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .args(["upstream", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the upstream on {port} listens");
        std::thread::sleep(Duration::from_millis(20));
    }
    proc
}

/// Whether `wrk` runs; when it does not, the test is skipped with one line (or fails when
/// `CUTOUT_REQUIRE_SERVICES=1`, as CI sets).
pub fn wrk_or_skip(test: &str) -> bool {
    if Command::new("wrk")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
    {
        return true;
    }
    assert!(
        std::env::var("CUTOUT_REQUIRE_SERVICES").as_deref() != Ok("1"),
        "{test}: wrk is not on the PATH and CUTOUT_REQUIRE_SERVICES=1: install wrk \
         (apt-get install -y wrk)"
    );
    eprintln!("SKIPPED {test}: install wrk (apt-get install -y wrk) to run it");
    false
}

/// What one `wrk` run reported: its requests, non-2xx answers, requests per second, and the
/// report itself.
#[derive(Debug)]
pub struct WrkReport {
    pub requests: u64,
    pub non_2xx: u64,
    pub rps: f64,
    pub report: String,
}

impl WrkReport {
    /// Reads a finished `wrk`'s output (panics, naming the report, if it failed or printed no
    /// request count).
    pub fn of(out: &std::process::Output) -> WrkReport {
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "wrk: {report}");
        let line = |prefix: &str| -> Option<String> {
            report
                .lines()
                .find_map(|l| Some(l.trim().strip_prefix(prefix)?.trim().to_owned()))
        };
        let requests = report
            .lines()
            .find_map(|l| l.trim().split_once(" requests in ")?.0.parse().ok())
            .unwrap_or_else(|| panic!("a request count in {report}"));
        let non_2xx = line("Non-2xx or 3xx responses:")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let rps = line("Requests/sec:")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        WrkReport {
            requests,
            non_2xx,
            rps,
            report,
        }
    }
}

/// A shell busy loop of ours under `timeout 60` (so that it ends even if the test is killed),
/// stopped on drop: SIGTERM to `timeout` (by its id), which passes it on to the loop.
pub struct BusyLoop(Child);

impl BusyLoop {
    pub fn start() -> BusyLoop {
        BusyLoop(
            Command::new("timeout")
                .args(["60", "sh", "-c", "while :; do :; done"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// A `wrk` run in the background, killed if dropped before it ends.
pub struct Wrk(Option<Child>);

impl Wrk {
    /// Starts `wrk <args> <url>`.
    pub fn start(args: &[&str], url: &str) -> Wrk {
        Wrk(Some(
            Command::new("wrk")
                .args(args)
                .arg(url)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ))
    }

    /// Waits for it to end and reads its report.
    pub async fn finish(mut self) -> WrkReport {
        let child = self.0.take().unwrap();
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        WrkReport::of(&out)
    }
}

impl Drop for Wrk {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Business requests a `cutout-gateway upstream` process on `port` has received so far.
pub async fn served(port: u16) -> u64 {
    let body = super::get(&format!("http://127.0.0.1:{port}/chaos"))
        .await
        .body;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["started"].as_u64().unwrap()
}
