//! Issue #34, defect 1 and acceptance 3: a failover behind one address. Two real
//! `redis-server` processes (B a replica of A) behind a TCP proxy that stands for a
//! Kubernetes Service, a DNS name or a TCP load balancer; pods publish through the proxy to
//! A. Then B is promoted, the proxy sends *new* connections to B, and A is demoted while the
//! pods' connections to it stay open: A answers every write `READONLY` (or, as a replica
//! that lost its own primary with `replica-serve-stale-data no`, `MASTERDOWN`). Every pod
//! must drop that connection, reconnect through the same address and report to B within
//! two rounds and its reconnect backoff, and no breaker call may slow down meanwhile.
//!
//! With the feature `sentinel`, the same through a real Redis Sentinel (`redis-server
//! --sentinel`): pods on `redis+sentinel://`, a `SENTINEL FAILOVER`, and every pod on the
//! new primary once the old one is demoted.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use common::{RedisServer, eventually, free_port};
use cutout::{Breaker, Settings};
use cutout_fleet::Fleet;

/// The fleet's default interval (the pods run on the defaults).
const INTERVAL: Duration = Duration::from_millis(250);
/// Each chunk through the proxy waits this long, each way: a call that waited on a Redis
/// round trip would take at least twice this.
const DELAY: Duration = Duration::from_millis(25);
const PODS: usize = 3;
const PREFIX: &str = "failover";
const BREAKER: &str = "payments";

/// The failovers run one at a time: each asserts a bound in time, which two at once on a
/// 2-core machine would stretch with their own load.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The key of pod `i`'s breaker. Each pod watches a breaker of its own (`payments-<i>`), so
/// that a pod's reports can be told apart on the server: the layout keeps no pod ids, only
/// sums in one ring per breaker (`{<prefix>:<id>}`). The one place in this file that knows
/// the layout's keys: adapt it when they change.
fn key_of(i: usize) -> String {
    format!("{{{PREFIX}:{BREAKER}-{i}}}")
}

/// Whether pod `i` has reported to the server behind `conn` since its key was last deleted
/// there.
fn reported(conn: &mut redis::Connection, i: usize) -> bool {
    redis::cmd("EXISTS")
        .arg(key_of(i))
        .query::<u64>(conn)
        .is_ok_and(|n| n == 1)
}

/// The bound on a pod's move to the new primary, from the moment the old one stops taking
/// its writes: two rounds (the one that meets the demoted primary, the one on the new), the
/// first reconnect backoff (at most one interval), the ticks' granularity (the attempt
/// waits for the tick after the backoff: one interval more), a connect, a script load and a
/// round through the proxy (a few of its round trips), and a margin for a busy machine.
fn bound() -> Duration {
    INTERVAL * 2 + INTERVAL + INTERVAL + DELAY * 2 * 4 + Duration::from_millis(250)
}

/// Two servers, B replicating A.
async fn primary_and_replica() -> Option<(RedisServer, RedisServer)> {
    let (Some(a), Some(b)) = (RedisServer::start(), RedisServer::start()) else {
        return None;
    };
    b.replicaof(Some(a.port()));
    assert!(
        eventually(Duration::from_secs(10), || b
            .info("replication", "master_link_status")
            .as_deref()
            == Some("up"))
        .await,
        "B replicates A"
    );
    Some((a, b))
}

/// `PODS` fleets on `url`, each watching its own `payments` breaker, connected and
/// reporting to `primary`.
async fn pods(url: &str, primary: &RedisServer) -> (Vec<Fleet>, Vec<Breaker>) {
    let mut fleets = Vec::new();
    let mut breakers = Vec::new();
    for i in 0..PODS {
        let fleet = Fleet::builder(url)
            .pod(format!("fo-{i}"))
            .prefix(PREFIX)
            .build()
            .expect("fleet");
        let breaker = Breaker::new(format!("{BREAKER}-{i}"), Settings::default());
        fleet.watch(&breaker).unwrap();
        fleets.push(fleet);
        breakers.push(breaker);
    }
    for fleet in &fleets {
        assert!(
            fleet.wait_connected(Duration::from_secs(5)).await,
            "{:?}",
            fleet.health()
        );
    }
    let mut conn = primary.client();
    assert!(
        eventually(Duration::from_secs(3), || (0..fleets.len())
            .all(|i| reported(&mut conn, i)))
        .await,
        "every pod reports to the first primary"
    );
    (fleets, breakers)
}

/// Calls on every pod's breaker, timed, from a thread of their own (as a request handler
/// would make them), before the failover (phase 0) and from it on (phase 1).
struct Calls {
    phase: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    latencies: Arc<Mutex<[Vec<Duration>; 2]>>,
    thread: JoinHandle<()>,
}

/// How many, the median, the 99.9th percentile and the maximum.
type Summary = (usize, Duration, Duration, Duration);

fn summary(latencies: &[Duration]) -> Summary {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    (sorted.len(), at(0.5), at(0.999), sorted[sorted.len() - 1])
}

impl Calls {
    fn start(breakers: &[Breaker]) -> Calls {
        // Relaxed: the flags are single values; a call timed just as the phase changes may
        // land in either.
        let phase = Arc::new(AtomicU8::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let latencies = Arc::new(Mutex::new([Vec::new(), Vec::new()]));
        let (p, s, l) = (
            Arc::clone(&phase),
            Arc::clone(&stop),
            Arc::clone(&latencies),
        );
        let breakers = breakers.to_vec();
        let thread = std::thread::spawn(move || {
            // Bounded: the test stops it, and it ends by itself after 60 s regardless.
            let deadline = Instant::now() + Duration::from_secs(60);
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                for breaker in &breakers {
                    let start = Instant::now();
                    let result = breaker.call(|| Ok::<_, ()>(()));
                    let took = start.elapsed();
                    assert!(result.is_ok());
                    let phase = usize::from(p.load(Ordering::Relaxed));
                    l.lock().unwrap()[phase].push(took);
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        });
        Calls {
            phase,
            stop,
            latencies,
            thread,
        }
    }

    fn failover_begins(&self) {
        self.phase.store(1, Ordering::Relaxed);
    }

    /// Stops the calls; the summaries before and through the failover.
    fn finish(self) -> (Summary, Summary) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the calls never failed");
        let latencies = self.latencies.lock().unwrap();
        (summary(&latencies[0]), summary(&latencies[1]))
    }
}

/// A call that waited on Redis would wait for at least one round trip through the proxy
/// (2 × 25 ms): none takes even half of it (which leaves room for a thread preempted on a
/// busy machine), and the median does not move.
fn assert_calls_unchanged(what: &str, before: Summary, through: Summary) {
    let (n0, median0, p999_0, max0) = before;
    let (n1, median1, p999_1, max1) = through;
    println!(
        "{what}: calls before: {n0}, median {median0:?}, p99.9 {p999_0:?}, max {max0:?}; \
         through the failover: {n1}, median {median1:?}, p99.9 {p999_1:?}, max {max1:?}"
    );
    assert!(
        max1 < DELAY,
        "{what}: a call took {max1:?} through the failover"
    );
    assert!(
        median1 <= median0 * 3 + Duration::from_micros(20),
        "{what}: median {median0:?} → {median1:?}"
    );
}

/// Deletes every pod's key on `primary` (what replication brought there from the old one),
/// then waits (up to `limit`) until each pod's report makes it again; returns how long each
/// took after `from`.
async fn reports_reach(
    primary: &RedisServer,
    fleets: &[Fleet],
    from: Instant,
    limit: Duration,
) -> Vec<Option<Duration>> {
    let mut conn = primary.client();
    for i in 0..fleets.len() {
        let _: u64 = redis::cmd("DEL").arg(key_of(i)).query(&mut conn).unwrap();
    }
    let mut reached: Vec<Option<Duration>> = vec![None; fleets.len()];
    let deadline = from + limit;
    while Instant::now() < deadline && reached.iter().any(Option::is_none) {
        for (i, at) in reached.iter_mut().enumerate() {
            if at.is_none() && reported(&mut conn, i) {
                *at = Some(from.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    reached
}

/// Every pod reached the new primary within the bound, and is connected.
fn assert_moved(what: &str, fleets: &[Fleet], reached: &[Option<Duration>]) {
    let healths: Vec<_> = fleets.iter().map(Fleet::health).collect();
    println!("{what}: reports on the new primary after {reached:?}");
    for health in &healths {
        println!(
            "{what}: {} rounds, {} failed, last error {:?}",
            health.rounds,
            health.failed_rounds,
            health.last_error.as_ref().map(ToString::to_string)
        );
    }
    let bound = bound();
    for (i, at) in reached.iter().enumerate() {
        let at = at.unwrap_or_else(|| {
            panic!(
                "{what}: pod fo-{i} never reported to the new primary: {:?}",
                healths[i]
            )
        });
        assert!(at <= bound, "{what}: pod fo-{i}: {at:?} > {bound:?}");
    }
    for (fleet, health) in fleets.iter().zip(&healths) {
        assert!(health.is_connected(), "{}: {health:?}", fleet.pod());
    }
}

/// How the old primary is taken out.
#[derive(Clone, Copy, Debug)]
enum Demotion {
    /// `REPLICAOF <new primary>`: a replica, answering writes `READONLY`.
    Readonly,
    /// `replica-serve-stale-data no`, then `REPLICAOF` a port where nothing listens: a
    /// replica without its primary, answering `MASTERDOWN` to every data command.
    Masterdown,
}

async fn behind_a_proxy(demotion: Demotion) {
    let Some((a, b)) = primary_and_replica().await else {
        return;
    };
    let proxy = Proxy::start(a.port(), DELAY).await;
    let (fleets, breakers) = pods(&proxy.url(), &a).await;
    let calls = Calls::start(&breakers);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The failover: B promoted, the address moved to B for new connections, A demoted while
    // the pods' connections to it stay open.
    b.replicaof(None);
    proxy.switch(b.port());
    let accepted_before = proxy.accepted();
    match demotion {
        Demotion::Readonly => a.replicaof(Some(b.port())),
        Demotion::Masterdown => {
            let mut admin = a.client();
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("replica-serve-stale-data")
                .arg("no")
                .query(&mut admin)
                .unwrap();
            a.replicaof(Some(free_port()));
        }
    }
    let demoted = Instant::now();
    calls.failover_begins();
    println!("{demotion:?}: A demoted, B promoted, the proxy now sends new connections to B");

    let reached = reports_reach(&b, &fleets, demoted, Duration::from_secs(5)).await;
    // Calls go on for a while after the last pod moved.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (before, through) = calls.finish();
    println!(
        "{demotion:?}: proxy connections after the switch: {}",
        proxy.accepted() - accepted_before
    );
    let what = format!("{demotion:?}");
    assert_moved(&what, &fleets, &reached);
    assert_calls_unchanged(&what, before, through);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_primary_answering_readonly_is_left_for_the_new_one() {
    let _one = ONE_AT_A_TIME.lock().await;
    behind_a_proxy(Demotion::Readonly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_without_its_primary_answering_masterdown_is_left_for_the_new_one() {
    let _one = ONE_AT_A_TIME.lock().await;
    behind_a_proxy(Demotion::Masterdown).await;
}

/// A `redis-server --sentinel` of the test's own, monitoring one primary with a quorum of
/// one; killed on drop.
#[cfg(feature = "sentinel")]
struct Sentinel {
    port: u16,
    child: std::process::Child,
    dir: std::path::PathBuf,
}

#[cfg(feature = "sentinel")]
impl Sentinel {
    /// Monitors `127.0.0.1:<primary>` as `name` (Debian's `redis-server` binary runs as a
    /// sentinel with `--sentinel`; the configuration file must be writable: it rewrites it).
    fn start(primary: u16, name: &str) -> Sentinel {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "cutout-fleet-sentinel-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {name} 127.0.0.1 {primary} 1\n\
                 sentinel down-after-milliseconds {name} 1000\n\
                 sentinel failover-timeout {name} 10000\n",
                dir.display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server --sentinel");
        let sentinel = Sentinel { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while sentinel.conn().is_none() {
            assert!(Instant::now() < deadline, "the sentinel did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        sentinel
    }

    fn conn(&self) -> Option<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()
    }

    /// `SENTINEL <args>` answered as `T`.
    fn ask<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut conn = self
            .conn()
            .ok_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "no sentinel")))?;
        redis::cmd("SENTINEL").arg(args).query(&mut conn)
    }
}

#[cfg(feature = "sentinel")]
impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The first word of `ROLE`: `master` or `slave`.
#[cfg(feature = "sentinel")]
fn role(server: &RedisServer) -> Option<String> {
    // A server in the middle of a failover may close the connection: no answer yet.
    let mut conn = redis::Client::open(server.url())
        .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(2)))
        .ok()?;
    let value: redis::Value = redis::cmd("ROLE").query(&mut conn).ok()?;
    match value {
        redis::Value::Array(parts) => match parts.first() {
            Some(redis::Value::BulkString(role)) => String::from_utf8(role.clone()).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// A failover through a real Sentinel: pods on `redis+sentinel://`, `SENTINEL FAILOVER`,
/// the sentinel promotes B and, once it sees A still claiming to be a primary, demotes it
/// (`REPLICAOF`, and `CLIENT KILL TYPE normal`: the pods' connections are closed). Every pod
/// asks the sentinel again on its reconnect and reports to B.
#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_through_sentinel_is_followed_to_the_new_primary() {
    let _one = ONE_AT_A_TIME.lock().await;
    use std::collections::HashMap;
    let Some((a, b)) = primary_and_replica().await else {
        return;
    };
    let name = "fleet";
    let sentinel = Sentinel::start(a.port(), name);
    // The sentinel knows the replica (from A's INFO) before it is asked to fail over.
    assert!(
        eventually(Duration::from_secs(15), || {
            sentinel
                .ask::<Vec<HashMap<String, String>>>(&["REPLICAS", name])
                .is_ok_and(|replicas| {
                    replicas.iter().any(|r| {
                        r.get("port") == Some(&b.port().to_string())
                            && r.get("flags").is_some_and(|f| f == "slave")
                    })
                })
        })
        .await,
        "the sentinel sees B"
    );
    let url = format!("redis+sentinel://127.0.0.1:{}/{name}", sentinel.port);
    let (fleets, breakers) = pods(&url, &a).await;
    println!(
        "sentinel: pods on {url} report to A ({})",
        fleets[0].health().status
    );
    let calls = Calls::start(&breakers);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let asked = Instant::now();
    let _: () = sentinel.ask(&["FAILOVER", name]).unwrap();
    calls.failover_begins();
    // The sentinel promotes B at once, and demotes A when it next sees it claiming to be a
    // primary (its INFO period: about 10 s). Until then A takes the pods' writes.
    assert!(
        eventually(Duration::from_secs(30), || role(&b).as_deref()
            == Some("master"))
        .await,
        "B promoted"
    );
    let promoted = asked.elapsed();
    assert!(
        eventually(Duration::from_secs(30), || role(&a).as_deref()
            == Some("slave"))
        .await,
        "A demoted"
    );
    let demoted = Instant::now();
    println!(
        "sentinel: B promoted {promoted:?} after SENTINEL FAILOVER, A demoted {:?} after it",
        asked.elapsed()
    );
    let reached = reports_reach(&b, &fleets, demoted, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (before, through) = calls.finish();
    assert_moved("sentinel", &fleets, &reached);
    assert_calls_unchanged("sentinel", before, through);
    let addr: (String, u16) = sentinel.ask(&["GET-MASTER-ADDR-BY-NAME", name]).unwrap();
    assert_eq!(addr.1, b.port());
}

/// A name no sentinel knows is FLEET-RUN-008 in the health (not a hang, not a panic), and
/// no sentinel listening is FLEET-RUN-001; both name the sentinels.
#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_without_the_primary_is_a_precise_error() {
    let Some(a) = RedisServer::start() else {
        return;
    };
    let sentinel = Sentinel::start(a.port(), "fleet");
    let nobody = free_port();
    for (pod, url, code) in [
        (
            "sentinel-unknown",
            format!("redis+sentinel://127.0.0.1:{}/elsewhere", sentinel.port),
            "FLEET-RUN-008",
        ),
        (
            "sentinel-none",
            format!("redis+sentinel://127.0.0.1:{nobody}/fleet"),
            "FLEET-RUN-001",
        ),
    ] {
        let fleet = Fleet::builder(&url).pod(pod).build().unwrap();
        fleet
            .watch(&Breaker::new(BREAKER, Settings::default()))
            .unwrap();
        assert!(eventually(Duration::from_secs(3), || fleet.health().is_degraded()).await);
        let health = fleet.health();
        let error = health.error().unwrap();
        println!("{pod}: {error}");
        assert_eq!(error.code(), code, "{pod}: {error}");
        assert!(error.is_unreachable(), "{pod}: {error}");
        let sentinels = url.split(['/']).nth(2).unwrap();
        assert!(error.to_string().contains(sentinels), "{pod}: {error}");
    }
}
