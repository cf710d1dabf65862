//! Issue #34, defect 1 and acceptance 3: a failover behind one address. Two real
//! `redis-server` processes (B a replica of A) behind a TCP proxy that stands for a
//! Kubernetes Service, a DNS name or a TCP load balancer; pods publish through the proxy to
//! A. Then B is promoted, the proxy sends *new* connections to B, and A is demoted while the
//! pods' connections to it stay open: A answers every write `READONLY` (or, as a replica
//! that lost its own primary with `replica-serve-stale-data no`, `MASTERDOWN`). Every pod
//! must drop that connection, reconnect through the same address and report to B within
//! two rounds and its reconnect backoff, and no breaker call may slow down meanwhile.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use common::{RedisServer, eventually, free_port};
use cutout::{Breaker, Settings};
use cutout_fleet::Fleet;

/// The fleet's default interval (the pods run on the defaults).
const INTERVAL: Duration = Duration::from_millis(250);
/// Each chunk through the proxy waits this long, each way: a call that waited on a Redis
/// round trip would take at least twice this.
const DELAY: Duration = Duration::from_millis(15);
const PODS: usize = 3;
const PREFIX: &str = "failover";
const BREAKER: &str = "payments";

/// When `pod`'s report for the breaker was written, on Redis's clock, read on one server
/// directly. The one place in this file that knows the layout (a hash per breaker, a field
/// per pod holding `calls failures slow open unix_ms`): adapt it when the layout changes.
fn reported_at(conn: &mut redis::Connection, pod: &str) -> Option<u64> {
    let value: Option<String> = redis::cmd("HGET")
        .arg(format!("{PREFIX}:{BREAKER}"))
        .arg(pod)
        .query(conn)
        .ok()?;
    value?.split(' ').nth(4)?.parse().ok()
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

/// The calls' latencies, by phase: before the failover (0) and from it on (1).
#[derive(Default)]
struct Latencies {
    phases: [Vec<Duration>; 2],
}

fn summary(latencies: &[Duration]) -> (usize, Duration, Duration, Duration) {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    (sorted.len(), at(0.5), at(0.999), sorted[sorted.len() - 1])
}

async fn failover(demotion: Demotion) {
    let (Some(a), Some(b)) = (RedisServer::start(), RedisServer::start()) else {
        return;
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
    let proxy = Proxy::start(a.port(), DELAY).await;

    let mut fleets = Vec::new();
    let mut breakers = Vec::new();
    for i in 0..PODS {
        let fleet = Fleet::builder(proxy.url())
            .pod(format!("fo-{i}"))
            .prefix(PREFIX)
            .build()
            .expect("fleet");
        let breaker = Breaker::new(BREAKER, Settings::default());
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
    let mut on_a = a.client();
    assert!(
        eventually(Duration::from_secs(3), || fleets
            .iter()
            .all(|f| reported_at(&mut on_a, f.pod()).is_some()))
        .await,
        "every pod reports to A through the proxy"
    );

    // Calls on every pod's breaker, timed, from a thread of their own (as a request handler
    // would make them), before and through the failover.
    let phase = Arc::new(AtomicU8::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let latencies = Arc::new(Mutex::new(Latencies::default()));
    let caller = {
        let (phase, stop, latencies) = (
            Arc::clone(&phase),
            Arc::clone(&stop),
            Arc::clone(&latencies),
        );
        let breakers = breakers.clone();
        std::thread::spawn(move || {
            // Bounded: the test stops it, and it ends by itself after 30 s regardless.
            let deadline = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                for breaker in &breakers {
                    let start = Instant::now();
                    let result = breaker.call(|| Ok::<_, ()>(()));
                    let took = start.elapsed();
                    assert!(result.is_ok());
                    let phase = usize::from(phase.load(Ordering::Relaxed));
                    latencies.lock().unwrap().phases[phase].push(took);
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        })
    };
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
    phase.store(1, Ordering::Relaxed);
    let mut on_b = b.client();
    let b_since = b.now_ms(&mut on_b);
    println!("{demotion:?}: A demoted, B promoted, the proxy now sends new connections to B");

    // Every pod's report reaches B.
    let mut reached: Vec<Option<Duration>> = vec![None; PODS];
    let deadline = demoted + Duration::from_secs(5);
    while Instant::now() < deadline && reached.iter().any(Option::is_none) {
        for (fleet, at) in fleets.iter().zip(&mut reached) {
            if at.is_none()
                && reported_at(&mut on_b, fleet.pod()).is_some_and(|written| written >= b_since)
            {
                *at = Some(demoted.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Calls go on for a while after the last pod moved.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    caller.join().expect("the calls never failed");

    let healths: Vec<_> = fleets.iter().map(Fleet::health).collect();
    println!("{demotion:?}: reports on B after {reached:?}");
    println!(
        "{demotion:?}: proxy connections after the switch: {}",
        proxy.accepted() - accepted_before
    );
    for health in &healths {
        println!(
            "{demotion:?}: {} rounds, {} failed, last error {:?}",
            health.rounds,
            health.failed_rounds,
            health.last_error.as_ref().map(ToString::to_string)
        );
    }
    // Two rounds (the one that meets the demoted primary, the one on the new), the first
    // reconnect backoff (at most one interval), the ticks' granularity (the attempt waits
    // for the tick after the backoff: one interval more), a connect, a script load and a
    // round through the proxy (a few of its round trips), and a margin for a busy machine.
    let bound = INTERVAL * 2 + INTERVAL + INTERVAL + DELAY * 2 * 4 + Duration::from_millis(250);
    for (i, at) in reached.iter().enumerate() {
        let at = at.unwrap_or_else(|| {
            panic!(
                "{demotion:?}: pod fo-{i} never reported to the new primary within 5 s: {:?}",
                healths[i]
            )
        });
        assert!(at <= bound, "{demotion:?}: pod fo-{i}: {at:?} > {bound:?}");
    }
    for (fleet, health) in fleets.iter().zip(&healths) {
        assert!(health.is_connected(), "{}: {health:?}", fleet.pod());
    }

    let latencies = latencies.lock().unwrap();
    let (n0, median0, p999_0, max0) = summary(&latencies.phases[0]);
    let (n1, median1, p999_1, max1) = summary(&latencies.phases[1]);
    println!(
        "{demotion:?}: calls before: {n0}, median {median0:?}, p99.9 {p999_0:?}, max {max0:?}; \
         through the failover: {n1}, median {median1:?}, p99.9 {p999_1:?}, max {max1:?}"
    );
    // A call that waited on Redis would wait for at least one round trip through the
    // proxy (2 × 15 ms); none comes near.
    let waited = DELAY * 2;
    assert!(
        max1 < waited / 2,
        "{demotion:?}: a call took {max1:?} through the failover"
    );
    assert!(
        median1 <= median0 * 3 + Duration::from_micros(20),
        "{demotion:?}: median {median0:?} → {median1:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_primary_answering_readonly_is_left_for_the_new_one() {
    failover(Demotion::Readonly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_without_its_primary_answering_masterdown_is_left_for_the_new_one() {
    failover(Demotion::Masterdown).await;
}
