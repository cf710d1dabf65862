//! Test helpers: a real `redis-server` per test on a free loopback port (killed on drop,
//! restartable on the same port), a capture of the `tracing` warnings, and breaker settings
//! for sparse traffic.

#![allow(dead_code, missing_docs)]

pub mod certs;
pub mod proxy;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cutout::{Jitter, Settings, TripWindow};

/// A `redis-server` of the test's own: `--port <p> --bind 127.0.0.1 --save "" --appendonly
/// no --dir <a temporary directory of its own>`, plus any extra arguments (`--requirepass`).
pub struct RedisServer {
    port: u16,
    extra: Vec<String>,
    child: Option<Child>,
    /// Its working directory, of its own: a replica writes the primary's dump there.
    dir: std::path::PathBuf,
}

/// A loopback port nothing listens on now, not handed out before in this process.
pub fn free_port() -> u16 {
    static GIVEN: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let given = GIVEN.get_or_init(|| Mutex::new(HashSet::new()));
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("bind an ephemeral loopback port");
        if given.lock().unwrap().insert(port) {
            return port;
        }
    }
    panic!("no free loopback port after 100 tries");
}

impl RedisServer {
    /// A server of the test's own, or `None` (the test then skips, saying so in one line)
    /// when `redis-server` is not on the PATH and `CUTOUT_REQUIRE_SERVICES` is not `1`
    /// (DESIGN §7; `.ci/run` sets it, and installs the server).
    pub fn start() -> Option<RedisServer> {
        RedisServer::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Option<RedisServer> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found && std::env::var("CUTOUT_REQUIRE_SERVICES").as_deref() != Ok("1") {
            // Straight to the process's stderr: the test harness captures `eprintln!`.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: redis-server is not on the PATH: install it with \
                 `apt-get install -y redis-server` to run this test"
            );
            return None;
        }
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("cutout-fleet-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for redis-server");
        let mut server = RedisServer {
            port,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
            dir,
        };
        server.restart();
        Some(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server again, on the same port (after [`RedisServer::kill`]).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start redis-server ({error}): install it with \
                     `apt-get install -y redis-server` (.ci/run does)"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        );
    }

    /// Whether something on the port answers `PING` like a Redis (`+PONG`, or `-NOAUTH`
    /// with a password set).
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 16];
        matches!(stream.read(&mut reply), Ok(n) if n > 0 && (reply[0] == b'+' || reply[0] == b'-'))
    }

    /// Kills the server (SIGKILL) and waits for it: its data is gone (nothing is saved).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Stops the process (SIGSTOP): connections stay open and the kernel still accepts new
    /// ones, but nothing answers, as behind a partition.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Resumes a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// A plain connection of the test's own.
    pub fn client(&self) -> redis::Connection {
        self.client_with(&self.url())
    }

    pub fn client_with(&self, url: &str) -> redis::Connection {
        redis::Client::open(url)
            .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("test connection to redis")
    }

    /// `REPLICAOF 127.0.0.1 <port>`, or `REPLICAOF NO ONE` for `None` (a promotion).
    pub fn replicaof(&self, primary: Option<u16>) {
        let mut conn = self.client();
        let mut command = redis::cmd("REPLICAOF");
        match primary {
            Some(port) => command.arg("127.0.0.1").arg(port),
            None => command.arg("NO").arg("ONE"),
        };
        let _: () = command.query(&mut conn).expect("REPLICAOF");
    }

    /// One field of `INFO <section>` (`role`, `master_link_status`, ...).
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let mut conn = self.client();
        let info: String = redis::cmd("INFO").arg(section).query(&mut conn).ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .map(|value| value.trim().to_owned())
    }

    /// Redis's clock, in milliseconds since the Unix epoch (what the reports carry).
    pub fn now_ms(&self, conn: &mut redis::Connection) -> u64 {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
        secs * 1000 + micros / 1000
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL ends a frozen (stopped) server too.
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `tracing` output of this test binary (INFO and up), captured from every thread.
pub struct Logs(Arc<Mutex<Vec<u8>>>);

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capture (once per test binary) and returns it.
pub fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Capture(Arc::clone(&writer)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        Logs(buffer)
    })
}

impl Logs {
    /// The captured lines that contain every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        text.lines()
            .filter(|line| needles.iter().all(|needle| line.contains(needle)))
            .map(str::to_owned)
            .collect()
    }
}

/// Settings for pods that see little traffic: a time window, a ratio rule, and neither a
/// consecutive-failures rule nor the adaptive (relative) rules, so that a breaker can only
/// trip on its window's ratio once the window holds `minimum_calls`. A long break (30 s
/// with equal jitter: 15 to 30 s) keeps an opened breaker open for the rest of a test.
pub fn sparse_settings(window: Duration, minimum_calls: u32) -> Settings {
    Settings::builder()
        .window(TripWindow::Time(window))
        .minimum_calls(minimum_calls)
        .failure_ratio(Some(0.5))
        .consecutive_failures(None)
        .adaptive(false)
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::Equal)
        .build()
        .expect("valid settings")
}

/// Polls `condition` every 10 ms until it holds or `limit` passes; returns whether it held.
pub async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
