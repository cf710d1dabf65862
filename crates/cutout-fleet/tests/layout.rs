//! The layout in Redis: a hash per breaker, a field per pod holding `calls failures slow open
//! unix_ms` on Redis's clock, the key's expiry refreshed, stale reports ignored, dead ones
//! deleted, and the task gone with the last handle.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{RedisServer, eventually};
use cutout::{Breaker, Settings};
use cutout_fleet::Fleet;
use redis::Commands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_per_breaker_and_a_field_per_pod() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut admin = redis.client();
    let now = redis.now_ms(&mut admin);
    // A pod that lost Redis 5 s ago (stale: not counted, kept) and one gone 2 min ago
    // (older than the 60 s retention: deleted).
    let stale = format!("9 9 0 0 {}", now - 5_000);
    let dead = format!("9 9 0 0 {}", now - 120_000);
    let _: () = admin.hset("layout:payments", "pod-stale", &stale).unwrap();
    let _: () = admin.hset("layout:payments", "pod-dead", &dead).unwrap();

    let fleet = Fleet::builder(redis.url())
        .pod("pod-a")
        .prefix("layout")
        .build()
        .unwrap();
    assert_eq!(fleet.key("payments"), "layout:payments");
    let breaker = Breaker::new("payments", Settings::default());
    fleet.watch(&breaker).unwrap();
    for _ in 0..7 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    let _ = breaker.call(|| Err::<(), _>(()));
    assert!(fleet.wait_connected(Duration::from_secs(3)).await);

    // The dead report is deleted in the round after the one that saw it.
    assert!(
        eventually(Duration::from_secs(2), || {
            let fields: HashMap<String, String> = admin.hgetall("layout:payments").unwrap();
            !fields.contains_key("pod-dead")
        })
        .await
    );
    let fields: HashMap<String, String> = admin.hgetall("layout:payments").unwrap();
    println!("HGETALL layout:payments = {fields:?}");
    assert_eq!(fields.get("pod-stale"), Some(&stale), "stale, but kept");
    let mine: Vec<&str> = fields["pod-a"].split(' ').collect();
    assert_eq!(mine[..4], ["8", "1", "0", "0"], "calls failures slow open");
    let written: u64 = mine[4].parse().unwrap();
    let now = redis.now_ms(&mut admin);
    assert!(
        now >= written && now - written < 1_000,
        "Redis's clock: {written} vs {now}"
    );
    let ttl: i64 = admin.pttl("layout:payments").unwrap();
    assert!(
        ttl > 55_000 && ttl <= 60_000,
        "PEXPIRE refreshed to the retention: {ttl}"
    );

    let view = fleet.view("payments").unwrap();
    assert_eq!((view.pods, view.stale_pods), (1, 1));
    assert_eq!((view.calls, view.failures), (8, 1));

    // The last handle gone, the task stops: the report is no longer refreshed.
    drop(fleet);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before: String = admin.hget("layout:payments", "pod-a").unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after: String = admin.hget("layout:payments", "pod-a").unwrap();
    assert_eq!(before, after);
}
