//! The fleet-wide open cap: a gate from `Fleet::open_gate` answers from the task's cached
//! view. When the whole fleet sees an outage at once, the ranked fleet trip opens only as many
//! pods as the cap allows; a trip past the cap is kept closed by the gate; without a fresh
//! view (Redis gone) the gate lets every trip pass.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{RedisServer, eventually, sparse_settings};
use cutout::{Breaker, State, Transition};
use cutout_fleet::Fleet;

const PODS: usize = 10;
const CAP: u32 = 3;
const WINDOW: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_the_cap_of_pods_open_and_the_gate_steps_aside_without_redis() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let opened = Arc::new(Mutex::new(Vec::new()));
    let mut fleets = Vec::new();
    let mut breakers = Vec::new();
    for pod in 0..PODS {
        let fleet = Fleet::builder(redis.url())
            .pod(format!("cap-{pod}"))
            .prefix("cap")
            .build()
            .unwrap();
        let breaker = Breaker::builder("inventory")
            .settings(sparse_settings(WINDOW, 30))
            .open_gate(fleet.open_gate("inventory", CAP))
            .build();
        let seen = Arc::clone(&opened);
        breaker.subscribe(move |event| {
            if let Transition::Opened { .. } = event.transition {
                seen.lock().unwrap().push(pod);
            }
        });
        fleet.watch(&breaker).unwrap();
        fleets.push(fleet);
        breakers.push(breaker);
    }
    for fleet in &fleets {
        assert!(fleet.wait_connected(Duration::from_secs(5)).await);
    }

    // Healthy for a window, then an outage for 2 windows, 10 calls a second per pod.
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    let outage = Instant::now() + WINDOW + Duration::from_millis(500);
    let end = outage + WINDOW * 2;
    while Instant::now() < end {
        ticker.tick().await;
        let fail = Instant::now() >= outage;
        for breaker in &breakers {
            let _ = breaker.call(|| if fail { Err("down") } else { Ok(()) });
        }
    }
    let opened = opened.lock().unwrap().clone();
    println!(
        "outage over {PODS} pods with a cap of {CAP}: {} opened ({opened:?})",
        opened.len()
    );
    assert!(
        !opened.is_empty() && opened.len() <= CAP as usize,
        "{opened:?}"
    );

    // A closed pod sees the others open and its gate keeps a trip closed.
    let closed = (0..PODS).find(|pod| !opened.contains(pod)).unwrap();
    let (fleet, breaker) = (&fleets[closed], &breakers[closed]);
    assert_eq!(fleet.open_elsewhere("inventory"), Some(opened.len() as u32));
    let view = fleet.view("inventory").unwrap();
    assert!(
        view.failure_rate().unwrap() >= 0.5,
        "the fleet rule would fire: {view:?}"
    );
    if opened.len() == CAP as usize {
        let suppressed = breaker.snapshot().suppressed_opens;
        assert!(!breaker.trip_on_signal(), "the cap is reached");
        assert_eq!(breaker.state(), State::Closed);
        assert!(breaker.snapshot().suppressed_opens > suppressed);
    }

    // Redis gone: no fresh view, the gate lets the trip pass (local decisions).
    redis.kill();
    assert!(eventually(Duration::from_secs(2), || fleet.health().is_degraded()).await);
    assert_eq!(fleet.open_elsewhere("inventory"), None);
    assert!(breaker.trip_on_signal(), "no view: the gate steps aside");
    assert_eq!(breaker.state(), State::Open);
}

/// Issue #34, defect 5: a disabled breaker published the same report as a closed one, so the
/// ranked fleet trip under an open cap gave it a slot it could never use, and the one pod able
/// to open stayed closed. (Under the ranking by a hash of (breaker, pod) that the old layout
/// used, `disabled` came before `able` for the breaker `inventory`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_breaker_takes_no_open_slot_from_a_pod_that_can_open() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut pods = Vec::new();
    for pod in ["able", "disabled"] {
        let fleet = Fleet::builder(redis.url())
            .pod(pod)
            .prefix("cap-disabled")
            .build()
            .unwrap();
        // 40 calls before the breaker judges its own window; the fleet rule needs 20.
        let breaker = Breaker::builder("inventory")
            .settings(sparse_settings(Duration::from_secs(10), 40))
            .open_gate(fleet.open_gate("inventory", 1))
            .build();
        fleet
            .watch_with(&breaker, cutout_fleet::FleetRule::new().minimum_calls(20))
            .unwrap();
        pods.push((fleet, breaker));
    }
    for (fleet, _) in &pods {
        assert!(fleet.wait_connected(Duration::from_secs(5)).await);
    }
    let (able_fleet, able) = &pods[0];
    let (_, disabled) = &pods[1];
    disabled.disable();
    for _ in 0..30 {
        let _ = able.call(|| Err::<(), _>("down"));
    }
    let opened = eventually(Duration::from_secs(3), || able.state() == State::Open).await;
    println!(
        "able: {:?}, disabled: {:?}, able's view: {:?}",
        able.state(),
        disabled.state(),
        able_fleet.view("inventory")
    );
    assert!(opened, "the only pod able to open stayed closed");
    assert_eq!(disabled.state(), State::Disabled);
}
