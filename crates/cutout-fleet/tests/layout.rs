//! The layout in Redis: one string per breaker, `{<prefix>:<id>}`, holding a ring of time
//! buckets on Redis's clock that sums every pod's report; the key's expiry refreshed, a
//! departed pod out of the window within the staleness bound, keys that never meet, and the
//! task gone with the last handle.

mod common;

use std::time::Duration;

use common::{RedisServer, eventually};
use cutout::{Breaker, Settings};
use cutout_fleet::Fleet;
use redis::Commands;

/// A ring read by hand: (bucket length ms, window, birth µs) and every bucket's `[epoch, calls,
/// failures, slow, pods, open]`.
fn read_ring(bytes: &[u8]) -> ((i64, i64, i64), Vec<[i64; 6]>) {
    let word = |at: usize| i64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(&bytes[..5], b"CTFL\x01", "the magic word and the version");
    let header = (word(8), word(16), word(24));
    let buckets = (0..(bytes.len() - 32) / 48)
        .map(|i| std::array::from_fn(|w| word(32 + 48 * i + 8 * w)))
        .collect();
    (header, buckets)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ring_per_breaker_that_sums_the_pods_and_forgets_the_departed() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut admin = redis.client();
    let fleet = Fleet::builder(redis.url())
        .pod("pod-a")
        .prefix("layout")
        .build()
        .unwrap();
    let other = Fleet::builder(redis.url())
        .pod("pod-b")
        .prefix("layout")
        .build()
        .unwrap();
    let key = fleet.key("payments");
    assert_eq!(key, "{layout:payments}");
    let breaker = Breaker::new("payments", Settings::default());
    let leaving = Breaker::new("payments", Settings::default());
    fleet.watch(&breaker).unwrap();
    other.watch(&leaving).unwrap();
    for _ in 0..7 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    let _ = breaker.call(|| Err::<(), _>(()));
    for _ in 0..3 {
        let _ = leaving.call(|| Err::<(), _>(()));
    }
    assert!(fleet.wait_connected(Duration::from_secs(3)).await);
    assert!(other.wait_connected(Duration::from_secs(3)).await);
    assert!(
        eventually(Duration::from_secs(2), || fleet
            .view("payments")
            .is_some_and(|view| view.pods == 2))
        .await
    );
    let view = fleet.view("payments").unwrap();
    assert_eq!((view.calls, view.failures, view.stale_pods), (11, 4, 0));

    let kind: String = redis::cmd("TYPE").arg(&key).query(&mut admin).unwrap();
    assert_eq!(kind, "string");
    let bytes: Vec<u8> = admin.get(&key).unwrap();
    let ((bucket_ms, window, born), buckets) = read_ring(&bytes);
    println!(
        "GET {key}: {} bytes, {bucket_ms} ms buckets, a window of {window}, born at {born} µs; \
         buckets {buckets:?}",
        bytes.len()
    );
    // The default staleness bound (1 s) in 4 buckets, a ring of two windows.
    assert_eq!((bucket_ms, window, bytes.len()), (250, 4, 32 + 8 * 48));
    let now_ms = i64::try_from(redis.now_ms(&mut admin)).unwrap();
    assert!(
        born / 1000 <= now_ms && now_ms - born / 1000 < 5_000,
        "Redis's clock"
    );
    // Each pod's share is in the bucket of its last round, of the last 4 epochs.
    let epoch = now_ms / bucket_ms;
    let live: Vec<&[i64; 6]> = buckets
        .iter()
        .filter(|b| b[0] > epoch - 4 && b[0] <= epoch && b[4] > 0)
        .collect();
    let sum = |i: usize| live.iter().map(|b| b[i]).sum::<i64>();
    assert_eq!(
        (sum(1), sum(2), sum(3), sum(4), sum(5)),
        (11, 4, 0, 2, 0),
        "{buckets:?}"
    );
    let ttl: i64 = admin.pttl(&key).unwrap();
    assert!(
        ttl > 55_000 && ttl <= 60_000,
        "PEXPIRE refreshed to the retention: {ttl}"
    );

    // `pod-b` goes: out of the window within the staleness bound (1 s), counted as gone.
    drop(other);
    let gone = std::time::Instant::now();
    assert!(
        eventually(Duration::from_secs(2), || fleet
            .view("payments")
            .is_some_and(|view| view.pods == 1))
        .await
    );
    let after = gone.elapsed();
    let view = fleet.view("payments").unwrap();
    println!("pod-b left the window {after:?} after its fleet was dropped: {view:?}");
    assert!(after <= Duration::from_millis(1_300), "{after:?}");
    assert_eq!((view.calls, view.failures, view.stale_pods), (8, 1, 1));

    // The last handle gone, the task stops: the ring is no longer written.
    drop(fleet);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before: Vec<u8> = admin.get(&key).unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after: Vec<u8> = admin.get(&key).unwrap();
    assert_eq!(before, after);
}

/// Issue #34, defect 4: keys were `<prefix>:<breaker id>` and both may contain `:`, so prefix
/// `shop` with breaker `pay:card` and prefix `shop:pay` with breaker `card` shared a key, and
/// one service's failures opened the other's breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_and_ids_that_contain_colons_never_share_a_key() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let shop = Fleet::builder(redis.url())
        .pod("shop-1")
        .prefix("shop")
        .build()
        .unwrap();
    let shop_pay = Fleet::builder(redis.url())
        .pod("shop-pay-1")
        .prefix("shop:pay")
        .build()
        .unwrap();
    // Neither breaker can trip on its own calls (40 needed); the fleet rule needs 20.
    let failing = Breaker::new(
        "pay:card",
        common::sparse_settings(Duration::from_secs(10), 40),
    );
    let healthy = Breaker::new("card", common::sparse_settings(Duration::from_secs(10), 40));
    let rule = cutout_fleet::FleetRule::new().minimum_calls(20);
    shop.watch_with(&failing, rule).unwrap();
    shop_pay.watch_with(&healthy, rule).unwrap();
    assert!(shop.wait_connected(Duration::from_secs(3)).await);
    assert!(shop_pay.wait_connected(Duration::from_secs(3)).await);
    for _ in 0..30 {
        let _ = failing.call(|| Err::<(), _>("card processor down"));
    }
    // `shop`'s own fleet window holds its 30 failures: it opens on them.
    assert!(
        eventually(Duration::from_secs(3), || failing.state()
            == cutout::State::Open)
        .await,
        "{:?}",
        shop.view("pay:card")
    );
    // Several more rounds of `shop:pay`: its view never holds `shop`'s failures.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let view = shop_pay.view("card").expect("a fresh view");
    println!(
        "shop:pay's view of card: pods={} calls={} failures={}; keys {:?} and {:?}",
        view.pods,
        view.calls,
        view.failures,
        shop.key("pay:card"),
        shop_pay.key("card")
    );
    assert_eq!(
        (view.pods, view.calls, view.failures),
        (1, 0, 0),
        "{view:?}"
    );
    assert_eq!(healthy.state(), cutout::State::Closed);
    assert_ne!(shop.key("pay:card"), shop_pay.key("card"));
}

/// A breaker's part of a round is valid under Redis Cluster's slot rules: its key is its own
/// hash tag (one slot), and a node of a cluster that serves that slot runs the script and the
/// read. (One node serves every slot here; the pipeline of a tick, across slots, is the
/// caller's concern: see the `store` module.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_s_calls_run_on_a_redis_cluster_node() {
    let nodes = std::env::temp_dir().join(format!(
        "cutout-fleet-nodes-{}-{}.conf",
        std::process::id(),
        fastrand::u64(..)
    ));
    let nodes = nodes.to_str().unwrap().to_owned();
    let Some(redis) =
        RedisServer::start_with(&["--cluster-enabled", "yes", "--cluster-config-file", &nodes])
    else {
        return;
    };
    let mut admin = redis.client();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16_383)
        .query(&mut admin)
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut admin).unwrap();
            info.contains("cluster_state:ok")
        })
        .await
    );
    let fleet = Fleet::builder(redis.url())
        .pod("cluster-a")
        .prefix("shop:pay")
        .build()
        .unwrap();
    let breaker = Breaker::new("card", Settings::default());
    fleet.watch(&breaker).unwrap();
    assert!(
        fleet.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        fleet.health()
    );
    let _ = breaker.call(|| Err::<(), _>(()));
    assert!(
        eventually(Duration::from_secs(2), || fleet
            .view("card")
            .is_some_and(|view| view.failures == 1))
        .await,
        "{:?}",
        fleet.health()
    );
    let key = fleet.key("card");
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&key)
        .query(&mut admin)
        .unwrap();
    let tag: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key.trim_start_matches('{').trim_end_matches('}'))
        .query(&mut admin)
        .unwrap();
    println!("{key}: slot {slot}, the slot of its tag");
    assert_eq!(slot, tag);
    let _ = std::fs::remove_file(&nodes);
}
