//! Fleet signals at scale (issue #34): what one round of one breaker costs Redis at 10, 1,000
//! and 10,000 pods, on a `redis-server` of its own.
//!
//! ```text
//! cargo run --release -p cutout-bench --bin fleet_scale -- [--pods 10,1000,10000]
//!     [--sweeps N] [--interval-ms N] [--old-script FILE]
//! ```
//!
//! The pods are simulated, in this one process: each is a real breaker (with a few calls in
//! its window) and cutout-fleet's own side of a pod (`cutout_fleet::sim::Publisher`: the
//! report, the ledger), and its rounds are the task's own script calls and reads, sent
//! through the task's own pipeline (`cutout_fleet::sim::Connection`, 100 pods' calls a round
//! trip). A *sweep* is one round of every pod; a sweep starts at least one interval after the
//! last one began, and the pods' staleness bound is 4 intervals, so that the ring's bucket is
//! the interval, as at the defaults (250 ms, 1 s): each pod's round moves its share to a new
//! bucket, as a real pod's does, and the first round of each bucket resets it. The interval
//! is 10 ms unless `--interval-ms` says otherwise: the script does the same steps whatever
//! the bucket's length, and at 10 pods a 250 ms interval would leave Redis idle between 40
//! rounds a second (its figures then are those of a cold server: caches, and on this VM the
//! host's scheduling). Before each size, one untimed sweep creates the key and every pod's
//! ledger; some 20,000 rounds are then measured (at least 5 sweeps).
//!
//! Redis's own accounting says what a round costs: `INFO commandstats` (the microseconds of
//! `EVALSHA`, nested commands included, and of the `GET` after it, per call), the server's
//! CPU time (`INFO cpu`, user + system: everything it did, reading and parsing the commands
//! and writing the replies included) per round, and the median `EVALSHA` duration in the
//! slow log (a second pass of 3 sweeps with `slowlog-log-slower-than 0`). The share of a core
//! at 4 rounds a second per pod is rounds per second × time per round. An empty script
//! (`return 1`) is timed in the same run: the floor of any script call on the machine.
//!
//! `--old-script FILE` also times the layout before issue #34 (a hash per breaker, a field
//! per pod, `HGETALL` in every round) with that layout's script taken from git:
//!
//! ```text
//! git show 81ac079:crates/cutout-fleet/src/store.rs \
//!   | sed -n '/^pub(crate) const SCRIPT: &str = r"$/,/^";$/p' | sed '1d;$d' > /tmp/old.lua
//! ```
//!
//! Its hash is filled with a fresh report per pod on Redis's clock, and each round is that
//! layout's call (`EVALSHA sha 1 <key> <pod> "<calls failures slow open>" <ttl>`) for the
//! next pod in turn.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cutout::{Breaker, Settings};
use cutout_fleet::FleetRule;
use cutout_fleet::sim::{Connection, Publisher, Request, key};
use redis::Commands;

/// Pods' calls per round trip.
const BATCH: usize = 100;
/// The most rounds measured of the layout before issue #34 at one size, and the most pods ×
/// rounds (at 10,000 pods a round costs Redis some 10 ms: 2,000 of them).
const OLD_ROUNDS: usize = 20_000;
const OLD_POD_ROUNDS: usize = 20_000_000;

/// A `redis-server` child, stopped when dropped.
struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Options {
    pods: Vec<usize>,
    sweeps: Option<usize>,
    interval: Duration,
    old_script: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: fleet_scale [--pods 10,1000,10000] [--sweeps N] [--interval-ms N] \
         [--old-script FILE]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut options = Options {
        pods: vec![10, 1_000, 10_000],
        sweeps: None,
        interval: Duration::from_millis(10),
        old_script: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--pods" => {
                options.pods = value
                    .split(',')
                    .map(|n| n.trim().parse().unwrap_or_else(|_| usage()))
                    .collect();
            }
            "--sweeps" => options.sweeps = Some(value.parse().unwrap_or_else(|_| usage())),
            "--interval-ms" => {
                options.interval = Duration::from_millis(value.parse().unwrap_or_else(|_| usage()));
            }
            "--old-script" => options.old_script = Some(value),
            _ => usage(),
        }
    }
    options
}

/// Sweeps at `pods` pods: enough for some 20,000 rounds, at least 5.
fn sweeps_for(pods: usize, options: &Options) -> usize {
    options.sweeps.unwrap_or((20_000 / pods).clamp(5, 2_000))
}

fn start_redis() -> (Redis, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let redis = Redis(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on the PATH (apt-get install -y redis-server)"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
        .is_err()
    {
        assert!(Instant::now() < deadline, "redis-server did not answer");
        std::thread::sleep(Duration::from_millis(20));
    }
    (redis, port)
}

/// What Redis accounted for over a measurement.
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    rounds: u64,
    /// `EVALSHA`'s µs per call (nested commands included).
    script_us: f64,
    /// The read's µs per call (`GET`; 0 for the old layout, which reads in the script).
    read_us: f64,
    /// Server CPU (user + system) µs per round.
    cpu_us: f64,
    /// Median `EVALSHA` µs in the slow log.
    median_us: f64,
    /// Rounds per second achieved.
    rate: f64,
}

fn stat(info: &str, command: &str, field: &str) -> f64 {
    info.lines()
        .find(|line| line.starts_with(&format!("cmdstat_{command}:")))
        .and_then(|line| {
            line.split([':', ','])
                .find_map(|part| part.strip_prefix(&format!("{field}=")))
        })
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

fn cpu_seconds(admin: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(admin).unwrap();
    ["used_cpu_user:", "used_cpu_sys:"]
        .iter()
        .map(|name| {
            info.lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        })
        .sum()
}

fn configure(admin: &mut redis::Connection, slowlog: bool) {
    let (slower, len) = if slowlog {
        ("0", "1000000")
    } else {
        ("10000", "128")
    };
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(slower)
        .query(admin)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-max-len")
        .arg(len)
        .query(admin)
        .unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(admin).unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(admin).unwrap();
}

/// The median duration (µs) of the slow log's `EVALSHA` entries.
fn slowlog_median(admin: &mut redis::Connection) -> f64 {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1_000_000)
        .query(admin)
        .unwrap();
    let mut durations: Vec<i64> = entries
        .iter()
        .filter_map(|entry| match entry {
            redis::Value::Array(parts) => match (parts.get(2), parts.get(3)) {
                (Some(redis::Value::Int(us)), Some(redis::Value::Array(args)))
                    if matches!(args.first(), Some(redis::Value::BulkString(name))
                        if name.eq_ignore_ascii_case(b"evalsha")) =>
                {
                    Some(*us)
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    durations.sort_unstable();
    durations
        .get(durations.len() / 2)
        .map_or(0.0, |&us| us as f64)
}

/// `pods` simulated pods of the new layout: `sweeps` paced sweeps, measured.
async fn new_layout(
    url: &str,
    admin: &mut redis::Connection,
    pods: usize,
    sweeps: usize,
    interval: Duration,
) -> (Cost, u32) {
    let mut conn = Connection::connect(url, Duration::from_secs(5))
        .await
        .expect("connect");
    let settings = Settings::default();
    let rule = FleetRule::new().resolve(&settings).expect("rule");
    let breaker_key = key("bench", &format!("payments-{pods}"));
    let mut fleet: Vec<(Breaker, Publisher)> = (0..pods)
        .map(|pod| {
            let breaker = Breaker::new("payments", settings.clone());
            for n in 0..(5 + pod % 20) {
                let _ = breaker.call(|| if n % 7 == 0 { Err(()) } else { Ok(()) });
            }
            // The staleness bound of a fleet of this interval: 4 buckets of one interval.
            let publisher = Publisher::new(interval * 4, Duration::from_secs(60), rule);
            (breaker, publisher)
        })
        .collect();
    let mut seen = 0;
    let mut sweep = async |fleet: &mut Vec<(Breaker, Publisher)>, conn: &mut Connection| {
        for chunk in fleet.chunks_mut(BATCH) {
            let requests: Vec<Request> = chunk
                .iter()
                .map(|(breaker, publisher)| publisher.request(&breaker.snapshot(), false))
                .collect();
            let calls: Vec<(&str, &Request)> = requests
                .iter()
                .map(|request| (breaker_key.as_str(), request))
                .collect();
            let replies = conn.rounds(&calls).await.expect("a round");
            for (((_, publisher), request), reply) in chunk.iter_mut().zip(&requests).zip(&replies)
            {
                if let Some((view, _)) = publisher.absorb(request, reply) {
                    seen = view.pods;
                }
            }
        }
    };
    sweep(&mut fleet, &mut conn).await;
    tokio::time::sleep(interval).await;
    let mut cost = Cost::default();
    for slowlog in [false, true] {
        configure(admin, slowlog);
        let cpu = cpu_seconds(admin);
        let start = Instant::now();
        let n = if slowlog { sweeps.min(3) } else { sweeps };
        for _ in 0..n {
            let began = Instant::now();
            sweep(&mut fleet, &mut conn).await;
            tokio::time::sleep(interval.saturating_sub(began.elapsed())).await;
        }
        let elapsed = start.elapsed();
        if slowlog {
            cost.median_us = slowlog_median(admin);
        } else {
            let cpu = cpu_seconds(admin) - cpu;
            let info: String = redis::cmd("INFO").arg("commandstats").query(admin).unwrap();
            cost.rounds = stat(&info, "evalsha", "calls") as u64;
            cost.script_us = stat(&info, "evalsha", "usec_per_call");
            cost.read_us = stat(&info, "get", "usec_per_call");
            cost.cpu_us = cpu * 1e6 / cost.rounds.max(1) as f64;
            cost.rate = cost.rounds as f64 / elapsed.as_secs_f64();
        }
    }
    configure(admin, false);
    (cost, seen)
}

/// `pods` pods of the layout before issue #34, through its own script: sweeps paced as the
/// new layout's, at most [`OLD_ROUNDS`] rounds (and [`OLD_POD_ROUNDS`] / `pods`).
fn old_layout(
    admin: &mut redis::Connection,
    script: &str,
    pods: usize,
    sweeps: usize,
    interval: Duration,
) -> Cost {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(admin)
        .unwrap();
    let hash = format!("bench-old:payments-{pods}");
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(admin).unwrap();
    let now = secs * 1000 + micros / 1000;
    for chunk in (0..pods).collect::<Vec<_>>().chunks(1000) {
        let fields: Vec<(String, String)> = chunk
            .iter()
            .map(|pod| {
                (
                    format!("pod-{pod:05}"),
                    format!("{} 1 0 0 {now}", 5 + pod % 20),
                )
            })
            .collect();
        let _: () = admin.hset_multiple(&hash, &fields).unwrap();
    }
    let rounds = (sweeps * pods).min(OLD_ROUNDS).min(OLD_POD_ROUNDS / pods);
    let mut cost = Cost::default();
    for slowlog in [false, true] {
        configure(admin, slowlog);
        let cpu = cpu_seconds(admin);
        let start = Instant::now();
        let n = if slowlog {
            rounds.min(3 * pods).min(300)
        } else {
            rounds
        };
        for sweep in (0..n).collect::<Vec<_>>().chunks(pods) {
            let began = Instant::now();
            for chunk in sweep.chunks(BATCH) {
                let mut pipe = redis::pipe();
                for round in chunk {
                    let pod = round % pods;
                    pipe.cmd("EVALSHA")
                        .arg(&sha)
                        .arg(1)
                        .arg(&hash)
                        .arg(format!("pod-{pod:05}"))
                        .arg(format!("{} 1 0 0", 5 + pod % 20))
                        .arg(60_000);
                }
                let _: Vec<redis::Value> = pipe.query(admin).unwrap();
            }
            std::thread::sleep(interval.saturating_sub(began.elapsed()));
        }
        let elapsed = start.elapsed();
        if slowlog {
            cost.median_us = slowlog_median(admin);
        } else {
            let cpu = cpu_seconds(admin) - cpu;
            let info: String = redis::cmd("INFO").arg("commandstats").query(admin).unwrap();
            cost.rounds = stat(&info, "evalsha", "calls") as u64;
            cost.script_us = stat(&info, "evalsha", "usec_per_call");
            cost.cpu_us = cpu * 1e6 / cost.rounds.max(1) as f64;
            cost.rate = cost.rounds as f64 / elapsed.as_secs_f64();
        }
    }
    configure(admin, false);
    cost
}

/// An empty script's µs per call: the floor of a script call here, now.
fn empty_script(admin: &mut redis::Connection) -> f64 {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(admin)
        .unwrap();
    configure(admin, false);
    for _ in 0..50 {
        let mut pipe = redis::pipe();
        for _ in 0..BATCH {
            pipe.cmd("EVALSHA").arg(&sha).arg(1).arg("{bench}:empty");
        }
        let _: Vec<redis::Value> = pipe.query(admin).unwrap();
    }
    let info: String = redis::cmd("INFO").arg("commandstats").query(admin).unwrap();
    stat(&info, "evalsha", "usec_per_call")
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split(' ').next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn row(label: &str, pods: usize, cost: &Cost, extra: &str) {
    let per_round = cost.script_us + cost.read_us;
    // 10,000 pods × 4 rounds a second: 40,000 rounds a second, so µs per round × 4 is the
    // percentage of one core.
    println!(
        "| {label} | {pods} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.2} | {:.0}% | \
         {:.0}% |{extra}",
        cost.rounds,
        cost.rate,
        cost.script_us,
        cost.read_us,
        per_round,
        cost.median_us,
        cost.cpu_us,
        per_round * 4.0,
        cost.cpu_us * 4.0,
    );
}

fn main() {
    let options = options();
    let (_redis, port) = start_redis();
    let url = format!("redis://127.0.0.1:{port}");
    let mut admin = redis::Client::open(url.as_str())
        .and_then(|client| client.get_connection())
        .expect("admin connection");
    let version: String = redis::cmd("INFO").arg("server").query(&mut admin).unwrap();
    let version = version
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "redis-server {version}; sweeps every {:?} (the ring's bucket); load average at start {}",
        options.interval,
        load()
    );
    println!(
        "empty script (`return 1`): {:.2} µs per EVALSHA",
        empty_script(&mut admin)
    );
    println!();
    println!(
        "| layout | pods | rounds | rounds/s | EVALSHA µs/call | GET µs/call | Redis µs/round \
         (commandstats) | EVALSHA median µs (slow log) | server CPU µs/round | a core at 10,000 \
         pods × 4/s (commandstats) | a core at 10,000 pods × 4/s (server CPU) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &pods in &options.pods {
        let sweeps = sweeps_for(pods, &options);
        let (cost, seen) =
            runtime.block_on(new_layout(&url, &mut admin, pods, sweeps, options.interval));
        row("ring (#34)", pods, &cost, &format!(" view: {seen} pods"));
    }
    if let Some(path) = &options.old_script {
        let script = std::fs::read_to_string(path).expect("the old layout's script");
        for &pods in &options.pods {
            let sweeps = sweeps_for(pods, &options);
            let cost = old_layout(&mut admin, &script, pods, sweeps, options.interval);
            row("hash (before #34)", pods, &cost, "");
        }
    }
    println!();
    println!(
        "empty script (`return 1`) again: {:.2} µs per EVALSHA; load average at end {}",
        empty_script(&mut admin),
        load()
    );
}
