//! Issue #34, defect 2: what one round costs Redis must not grow with the fleet.
//!
//! Real pods (a `Fleet` each, its own task and connection, the default 250 ms interval), all
//! watching one breaker, against a `redis-server` of the test's own. Redis's own accounting
//! (`INFO commandstats`: the microseconds `EVALSHA` took per call, nested commands included)
//! says what a round costs; a round of every pod is the same script call, so the figure per
//! call is the figure per round. The layout that read every pod's report in every round
//! (`HGETALL`) cost about 20 times more per round at 200 pods than at 10.

mod common;

use std::time::Duration;

use common::RedisServer;
use cutout::{Breaker, Settings};
use cutout_fleet::Fleet;

/// Starts `pods` pods watching `payments` (each with a few calls in its window) and waits
/// until every one has connected.
async fn fleet_of(redis: &RedisServer, pods: usize) -> Vec<(Fleet, Breaker)> {
    let mut fleet = Vec::with_capacity(pods);
    for pod in 0..pods {
        let handle = Fleet::builder(redis.url())
            .pod(format!("cost-{pod:04}"))
            .prefix("cost")
            // 200 connections and script loads at once on a busy machine: generous bounds,
            // so that every pod is in the fleet (the cost of a round is what is measured).
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let breaker = Breaker::new("payments", Settings::default());
        for n in 0..(pod % 7) {
            let _ = breaker.call(|| if n == 3 { Err(()) } else { Ok(()) });
        }
        handle.watch(&breaker).unwrap();
        fleet.push((handle, breaker));
    }
    for (handle, _) in &fleet {
        assert!(
            handle.wait_connected(Duration::from_secs(10)).await,
            "{}: {:?}",
            handle.pod(),
            handle.health()
        );
    }
    fleet
}

/// Over `period`: `EVALSHA`'s microseconds per call, how many calls that was, and the bytes
/// Redis sent back per call (every reply but the few of `INFO` is a round's).
async fn per_round(admin: &mut redis::Connection, period: Duration) -> (f64, u64, f64) {
    let output = |admin: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(admin).unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("total_net_output_bytes:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no total_net_output_bytes in {info}"))
    };
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(admin).unwrap();
    let before = output(admin);
    tokio::time::sleep(period).await;
    let after = output(admin);
    let info: String = redis::cmd("INFO").arg("commandstats").query(admin).unwrap();
    let line = info
        .lines()
        .find(|line| line.starts_with("cmdstat_evalsha:"))
        .unwrap_or_else(|| panic!("no EVALSHA in {info}"));
    let field = |name: &str| -> f64 {
        line.split([':', ','])
            .find_map(|part| part.strip_prefix(name))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {line}"))
    };
    let calls = field("calls=");
    (
        field("usec_per_call="),
        calls as u64,
        after.saturating_sub(before) as f64 / calls.max(1.0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_costs_redis_the_same_at_10_and_at_200_pods() {
    let Some(small) = RedisServer::start() else {
        return;
    };
    let Some(large) = RedisServer::start() else {
        return;
    };
    let mut small_admin = small.client();
    let mut large_admin = large.client();
    let ten = fleet_of(&small, 10).await;
    let two_hundred = fleet_of(&large, 200).await;
    // Let every pod's first round (the key's creation, the script's load) pass.
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Alternate the two, three times, and keep each one's best: the machine's speed changes
    // from one second to the next, and both fleets run all along.
    let mut best = [f64::MAX; 2];
    let mut calls = [0; 2];
    let mut bytes = [0.0; 2];
    for _ in 0..3 {
        for (i, admin) in [&mut small_admin, &mut large_admin].into_iter().enumerate() {
            let (usec, n, out) = per_round(admin, Duration::from_secs(1)).await;
            best[i] = best[i].min(usec);
            calls[i] += n;
            bytes[i] = out;
        }
    }
    println!(
        "Redis time per round (EVALSHA usec_per_call, best of 3 one-second samples): \
         10 pods {:.2} us ({} rounds), 200 pods {:.2} us ({} rounds), ratio {:.2}; bytes \
         sent back per round: {:.0} and {:.0}",
        best[0],
        calls[0],
        best[1],
        calls[1],
        best[1] / best[0],
        bytes[0],
        bytes[1]
    );
    assert!(calls[0] >= 30 && calls[1] >= 600, "{calls:?}");
    // What a round reads and answers does not depend on the fleet: the same bytes, give or
    // take the few of the last sample's `INFO` reply.
    assert!(
        bytes[1] <= 1.2 * bytes[0],
        "a round at 200 pods answers {:.0} bytes against {:.0} at 10",
        bytes[1],
        bytes[0]
    );
    assert!(
        best[1] <= 2.0 * best[0],
        "a round at 200 pods costs {:.2} us against {:.2} us at 10",
        best[1],
        best[0]
    );
    drop((ten, two_hundred));
}
