//! Acceptance 2: 20 pods at sparse traffic. An outage opens every pod within 2 trip windows
//! on the fleet's counts, where breakers with the same settings and the same calls but no
//! fleet never open within 10 trip windows; and a healthy fleet with 1% failures never trips.
//!
//! Time compressed: a 2 s trip window and 10 calls a second per pod, so a pod's window holds
//! at most 20 calls (10 buckets of 200 ms; one may be partial) while its breaker needs 30
//! before its ratio rule judges anything. The settings leave the local breakers no other
//! way to trip: consecutive failures off, adaptive (relative) rules off, ratio 0.5 once 30
//! calls are in. That is the case (at 1 request a second a pod needs 20 s of calls
//! to reach its minimum) made stricter: a pod alone can never reach it. The fleet's window
//! holds about 400 calls.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{RedisServer, sparse_settings};
use cutout::{Breaker, OpenReason, State, Transition};
use cutout_fleet::Fleet;

const PODS: usize = 20;
const WINDOW: Duration = Duration::from_secs(2);
const MINIMUM_CALLS: u32 = 30;
/// 10 calls a second per pod.
const CALL_EVERY: Duration = Duration::from_millis(100);

/// When each fleet pod's breaker opened, and why.
type Openings = Arc<Mutex<Vec<Option<(Instant, OpenReason)>>>>;

struct Pods {
    fleets: Vec<Fleet>,
    with_fleet: Vec<Breaker>,
    local_only: Vec<Breaker>,
    opened: Openings,
    /// Any opening of a local-only breaker.
    local_opened: Arc<Mutex<Vec<usize>>>,
}

async fn pods(redis: &RedisServer, prefix: &str) -> Pods {
    let settings = sparse_settings(WINDOW, MINIMUM_CALLS);
    let opened: Openings = Arc::new(Mutex::new(vec![None; PODS]));
    let local_opened = Arc::new(Mutex::new(Vec::new()));
    let mut fleets = Vec::new();
    let mut with_fleet = Vec::new();
    let mut local_only = Vec::new();
    for pod in 0..PODS {
        let fleet = Fleet::builder(redis.url())
            .pod(format!("pod-{pod:02}"))
            .prefix(prefix)
            .build()
            .expect("fleet");
        let breaker = Breaker::new("payments", settings.clone());
        let seen = Arc::clone(&opened);
        breaker.subscribe(move |event| {
            if let Transition::Opened { reason, .. } = event.transition {
                seen.lock().unwrap()[pod].get_or_insert((Instant::now(), reason));
            }
        });
        fleet.watch(&breaker).expect("watch");
        let alone = Breaker::new("payments", settings.clone());
        let seen = Arc::clone(&local_opened);
        alone.subscribe(move |event| {
            if let Transition::Opened { .. } = event.transition {
                seen.lock().unwrap().push(pod);
            }
        });
        fleets.push(fleet);
        with_fleet.push(breaker);
        local_only.push(alone);
    }
    for fleet in &fleets {
        assert!(
            fleet.wait_connected(Duration::from_secs(5)).await,
            "{:?}",
            fleet.health()
        );
    }
    Pods {
        fleets,
        with_fleet,
        local_only,
        opened,
        local_opened,
    }
}

/// One call per pod per tick on both breakers of each pod; `fails(pod, n)` says whether
/// the n-th call of that pod fails. Runs for `length`, or until `stop` says so.
async fn traffic(
    pods: &Pods,
    length: Duration,
    mut fails: impl FnMut(usize, u64) -> bool,
    mut stop: impl FnMut() -> bool,
) {
    let mut ticker = tokio::time::interval(CALL_EVERY);
    let end = Instant::now() + length;
    let mut n = 0u64;
    while Instant::now() < end && !stop() {
        ticker.tick().await;
        for pod in 0..PODS {
            let fail = fails(pod, n);
            let outcome = || if fail { Err("upstream 503") } else { Ok(()) };
            let _ = pods.with_fleet[pod].call(outcome);
            let _ = pods.local_only[pod].call(outcome);
        }
        n += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_opens_every_pod_within_two_windows_where_local_breakers_never_open() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let pods = pods(&redis, "outage").await;

    // Healthy for a window and a bit: every window full of successes.
    traffic(
        &pods,
        WINDOW + Duration::from_millis(500),
        |_, _| false,
        || false,
    )
    .await;
    assert!(pods.opened.lock().unwrap().iter().all(Option::is_none));
    let view = pods.fleets[0].view("payments").expect("a fresh view");
    println!(
        "healthy fleet view: pods={} calls={} failures={}",
        view.pods, view.calls, view.failures
    );
    assert_eq!(view.pods, PODS as u32);
    assert!(view.calls >= 300, "{view:?}");
    for breaker in &pods.local_only {
        let calls = breaker.snapshot().calls;
        assert!(
            calls < u64::from(MINIMUM_CALLS),
            "a pod alone sees {calls} calls"
        );
    }

    // The outage: every call fails, for 10 trip windows.
    let outage = Instant::now();
    traffic(&pods, WINDOW * 10, |_, _| true, || false).await;

    let opened = pods.opened.lock().unwrap().clone();
    let mut after: Vec<Duration> = Vec::new();
    for (pod, opened) in opened.iter().enumerate() {
        let (at, reason) = opened.unwrap_or_else(|| panic!("pod-{pod:02} never opened"));
        assert_eq!(reason, OpenReason::Signal, "pod-{pod:02}");
        after.push(at.duration_since(outage));
    }
    after.sort();
    println!(
        "fleet: every pod opened on the fleet's window; after the outage began: first {:?}, \
         median {:?}, last {:?} (trip window {:?})",
        after[0],
        after[PODS / 2],
        after[PODS - 1],
        WINDOW
    );
    assert!(
        after[PODS - 1] <= WINDOW * 2,
        "the last pod opened {:?} after the outage began",
        after[PODS - 1]
    );
    for breaker in &pods.with_fleet {
        assert_ne!(breaker.state(), State::Closed);
    }

    // The same pods without a fleet: 10 windows of failures, never a trip.
    assert_eq!(*pods.local_opened.lock().unwrap(), Vec::<usize>::new());
    let mut most = 0;
    for breaker in &pods.local_only {
        assert_eq!(breaker.state(), State::Closed);
        let snapshot = breaker.snapshot();
        assert_eq!(snapshot.failures, snapshot.calls, "all failing");
        most = most.max(snapshot.calls);
    }
    println!(
        "local only: no pod opened in {:?} of outage (10 windows); at most {most} calls in a \
         pod's window, below its minimum of {MINIMUM_CALLS}",
        WINDOW * 10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_fleet_with_one_percent_failures_never_trips() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let pods = pods(&redis, "healthy").await;
    let mut rngs: Vec<fastrand::Rng> = (0..PODS as u64)
        .map(|pod| fastrand::Rng::with_seed(0x5eed + pod))
        .collect();
    let failed = Arc::new(Mutex::new((0u64, 0u64)));
    let counted = Arc::clone(&failed);
    let mut highest_rate: f64 = 0.0;
    let mut judged = 0;
    let fleet = pods.fleets[7].clone();
    // 10 trip windows of healthy traffic, 1% of calls failing at random.
    traffic(
        &pods,
        WINDOW * 10,
        move |pod, _| {
            let fail = rngs[pod].f64() < 0.01;
            let mut counted = counted.lock().unwrap();
            counted.0 += 1;
            counted.1 += u64::from(fail);
            fail
        },
        || {
            if let Some(view) = fleet.view("payments")
                && view.calls >= u64::from(MINIMUM_CALLS)
            {
                judged += 1;
                highest_rate = highest_rate.max(view.failure_rate().unwrap_or(0.0));
            }
            false
        },
    )
    .await;
    let (calls, failures) = *failed.lock().unwrap();
    println!(
        "healthy: {calls} calls per breaker kind, {failures} failed ({:.2}%); the fleet's \
         window was judged at {judged} ticks (above the minimum), highest fleet failure rate \
         {highest_rate:.3}",
        100.0 * failures as f64 / calls as f64
    );
    assert!(failures > 0, "the 1% happened");
    assert!(judged > 100, "the fleet rule had a full window to judge");
    assert!(pods.opened.lock().unwrap().iter().all(Option::is_none));
    for breaker in pods.with_fleet.iter().chain(&pods.local_only) {
        assert_eq!(breaker.state(), State::Closed);
    }
}
