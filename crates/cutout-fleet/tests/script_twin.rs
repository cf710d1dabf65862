//! The script and its Rust twin (the lab's model of Redis) do the same to a ring.
//!
//! Random rounds of a few pods (publishes, claims under a cap, replies forgotten, breakers
//! closed, open, isolated, disabled, and now and then a bucket emptied behind the pods' backs,
//! as a failover to a replica that missed writes would, so that a pod's ledger names more than
//! the bucket holds) go to a real `redis-server` through the task's own pipeline; after each,
//! what Redis holds is compared byte for byte with what the twin makes of the same request,
//! on the state Redis held before it, at the time the script read on Redis's clock. Short
//! buckets (10 ms, a ring of 80 ms) make the rounds cross buckets, skip some, and wrap the
//! ring.

mod common;

use std::time::Duration;

use common::RedisServer;
use cutout::{Breaker, Settings};
use cutout_fleet::FleetRule;
use cutout_fleet::sim::{Connection, Publisher, Store, key};
use redis::Commands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_and_its_twin_leave_the_same_bytes() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut admin = redis.client();
    let mut conn = Connection::connect(&redis.url(), Duration::from_secs(2))
        .await
        .unwrap();
    let key = key("twin", "orders");
    let settings = Settings::default();
    let rule = FleetRule::new().resolve(&settings).unwrap();
    let mut pods: Vec<(Breaker, Publisher)> = (0..5)
        .map(|_| {
            (
                Breaker::new("orders", settings.clone()),
                Publisher::new(Duration::from_millis(40), Duration::from_secs(60), rule),
            )
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(34);
    let mut store = Store::new();
    let (mut compared, mut claims, mut refused, mut forgotten, mut emptied) = (0, 0, 0, 0, 0);
    for _ in 0..800 {
        let (breaker, publisher) = &mut pods[rng.usize(..5)];
        match rng.u8(..40) {
            0 => breaker.isolate(),
            1 => breaker.disable(),
            2 | 3 => breaker.reset(),
            4 => {
                breaker.trip_on_signal();
            }
            _ => {
                for _ in 0..rng.usize(..4) {
                    let fail = rng.bool();
                    let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) });
                }
            }
        }
        if rng.u8(..15) == 0 {
            publisher.forget();
            forgotten += 1;
        }
        let mut request = publisher.request(&breaker.snapshot(), rng.bool());
        if rng.u8(..6) == 0 {
            request = publisher.claim(&request, rng.u32(1..3));
            claims += 1;
        }
        let exists: bool = admin.exists(&key).unwrap();
        if exists && rng.u8(..25) == 0 {
            // The counts of one bucket (not its epoch) gone.
            let at = 32 + 48 * rng.isize(0..8) + 8;
            let _: i64 = admin.setrange(&key, at, vec![0u8; 40]).unwrap();
            emptied += 1;
        }
        let before: Option<Vec<u8>> = admin.get(&key).unwrap();
        let reply = conn.rounds(&[(&key, &request)]).await.unwrap().remove(0);
        let after: Option<Vec<u8>> = admin.get(&key).unwrap();
        let now = Duration::from_millis(reply.now_ms().expect("a ring"));
        // The key's birth is Redis's clock in µs: only a key the script created differs.
        if let Some(before) = before {
            store.insert(&key, before, u64::MAX);
            let twin = store.round(&key, &request, now);
            assert_eq!(store.value(&key, now), after.as_deref(), "{request:?}");
            assert_eq!(twin.wrote(), reply.wrote(), "{request:?}");
            compared += 1;
        }
        refused += usize::from(!reply.wrote());
        publisher.absorb(&request, &reply);
        tokio::time::sleep(Duration::from_micros(rng.u64(..6_000))).await;
    }
    println!(
        "{compared} rounds compared byte for byte ({claims} claims, {refused} refused; \
         {forgotten} replies forgotten; {emptied} buckets emptied)"
    );
    assert!(compared >= 799 && refused > 0 && refused < claims);
}
