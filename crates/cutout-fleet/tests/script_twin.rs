//! The script and its Rust twin (the lab's model of Redis) do the same to a ring and to its
//! recovery key.
//!
//! Random rounds of a few pods (publishes, claims under a cap, replies forgotten, breakers
//! closed, open, isolated, disabled, reset, closed by their own probes, and now and then a
//! bucket emptied behind the pods' backs, as a failover to a replica that missed writes would,
//! so that a pod's ledger names more than the bucket holds) go to a real `redis-server`
//! through the task's own pipeline; after each, what Redis holds under both keys is compared
//! byte for byte with what the twin makes of the same request, on the state Redis held
//! before it, at the time the script read on Redis's clock (µs), and so are the answers.
//! Short buckets (10 ms, a ring of 80 ms) make the rounds cross buckets, skip some, and wrap
//! the ring. The breakers run on a manual clock with 1 s breaks, so that their breaks end,
//! their probes close them (fleet recovery publishes), and open ones ask for release slots,
//! some granted, some refused (a stale recovery, a slot after the pod's own break).

mod common;

use std::time::Duration;

use common::RedisServer;
use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Settings};
use cutout_fleet::FleetRule;
use cutout_fleet::sim::{Connection, Publisher, Store, key, recovery_key};
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
    let rkey = recovery_key(&key);
    let settings = Settings::builder()
        .break_duration(Duration::from_secs(1))
        .max_break_duration(Duration::from_secs(1))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let rule = FleetRule::new().resolve(&settings).unwrap();
    let clock = ManualClock::new();
    let mut pods: Vec<(Breaker, Publisher)> = (0..5)
        .map(|_| {
            (
                Breaker::builder("orders")
                    .settings(settings.clone())
                    .clock(clock.clone())
                    .build(),
                Publisher::new(Duration::from_millis(40), Duration::from_secs(60), rule)
                    .with_recovery(25, &settings),
            )
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(34);
    let mut store = Store::new();
    let (mut compared, mut claims, mut refused, mut forgotten, mut emptied) = (0, 0, 0, 0, 0);
    let (mut recoveries, mut granted) = (0, 0);
    for _ in 0..1_200 {
        clock.advance(Duration::from_millis(rng.u64(..120)));
        let (breaker, publisher) = &mut pods[rng.usize(..5)];
        match rng.u8(..40) {
            0 => breaker.isolate(),
            1 => breaker.disable(),
            2 | 3 => breaker.reset(),
            4 | 5 => {
                breaker.trip_on_signal();
            }
            _ => {
                for _ in 0..rng.usize(..4) {
                    let fail = rng.u8(..4) == 0;
                    let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) });
                }
            }
        }
        if rng.u8(..15) == 0 {
            publisher.forget();
            forgotten += 1;
        }
        let mut request = publisher.round(breaker, rng.bool(), clock.elapsed());
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
        let before_recovery: Option<Vec<u8>> = admin.get(&rkey).unwrap();
        let sent = clock.elapsed();
        let reply = conn.rounds(&[(&key, &request)]).await.unwrap().remove(0);
        let after: Option<Vec<u8>> = admin.get(&key).unwrap();
        let after_recovery: Option<Vec<u8>> = admin.get(&rkey).unwrap();
        let answer = reply.recovery().expect("a ring");
        let now = Duration::from_micros(answer.0);
        match before {
            Some(before) => store.insert(&key, before, u64::MAX),
            None => store.remove(&key),
        }
        match before_recovery {
            Some(before) => store.insert(&rkey, before, u64::MAX),
            None => store.remove(&rkey),
        }
        let twin = store.round(&key, &request, now);
        assert_eq!(store.value(&key, now), after.as_deref(), "{request:?}");
        assert_eq!(
            store.value(&rkey, now),
            after_recovery.as_deref(),
            "{request:?}"
        );
        assert_eq!(twin.wrote(), reply.wrote(), "{request:?}");
        assert_eq!(twin.recovery(), reply.recovery(), "{request:?}");
        compared += 1;
        refused += usize::from(!reply.wrote());
        granted += usize::from(answer.2 > 0);
        let dated = answer.1;
        publisher.absorb_at(&request, &reply, sent, clock.elapsed());
        tokio::time::sleep(Duration::from_micros(rng.u64(..6_000))).await;
        let later: Option<Vec<u8>> = admin.get(&rkey).unwrap();
        recoveries += usize::from(dated > 0 && later.is_some());
        // Some releases, as the task's timer makes them.
        let _ = publisher.release(breaker, clock.elapsed() + Duration::from_secs(1));
    }
    println!(
        "{compared} rounds compared byte for byte ({claims} claims, {refused} refused; \
         {forgotten} replies forgotten; {emptied} buckets emptied; {recoveries} answers with a \
         recovery, {granted} release slots granted)"
    );
    assert!(compared == 1_200 && refused > 0 && refused < claims);
    assert!(recoveries > 0 && granted > 0, "{recoveries} {granted}");
}
