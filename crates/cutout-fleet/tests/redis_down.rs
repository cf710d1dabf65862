//! Acceptance 3: Redis killed mid-test → local decisions, nothing surfaced to callers, health
//! degraded; Redis back on the same port → connected again, and the fleet trips again. Also
//! a slow Redis (`CLIENT PAUSE`) and a partitioned one (the process stopped: connections
//! open, nothing answers) time out without blocking anything.

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, eventually, logs, sparse_settings};
use cutout::{Breaker, OpenReason, Settings, State, Transition, TripWindow};
use cutout_fleet::{Fleet, Status};

const WINDOW: Duration = Duration::from_secs(10);

fn fleet(redis: &RedisServer, pod: &str, prefix: &str) -> Fleet {
    Fleet::builder(redis.url())
        .pod(pod)
        .prefix(prefix)
        // Reconnect attempts at most 500 ms apart, so that the test sees the recovery soon.
        .max_backoff(Duration::from_millis(500))
        .build()
        .expect("fleet")
}

/// Records the reasons a breaker opened for.
fn reasons(breaker: &Breaker) -> std::sync::Arc<std::sync::Mutex<Vec<OpenReason>>> {
    let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&reasons);
    breaker.subscribe(move |event| {
        if let Transition::Opened { reason, .. } = event.transition {
            seen.lock().unwrap().push(reason);
        }
    });
    reasons
}

/// Makes `n` failing calls, each of which must come back at once with the breaker's own
/// answer (the inner error, or a refusal), never anything of Redis's. Returns the slowest.
fn fail(breaker: &Breaker, n: usize) -> Duration {
    let mut slowest = Duration::ZERO;
    for _ in 0..n {
        let start = Instant::now();
        let result = breaker.call(|| Err::<(), _>("upstream 503"));
        slowest = slowest.max(start.elapsed());
        let error = result.unwrap_err();
        assert!(
            matches!(
                error,
                cutout::Error::Rejected(_) | cutout::Error::Inner("upstream 503")
            ),
            "{error:?}"
        );
    }
    slowest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_test_means_local_decisions_then_recovery() {
    let logs = logs();
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let a = fleet(&redis, "down-a", "down");
    let b = fleet(&redis, "down-b", "down");
    // `search`: 20 calls before its ratio judges, no consecutive rule: a fleet breaker.
    let search_a = Breaker::new("search", sparse_settings(WINDOW, 20));
    let search_b = Breaker::new("search", sparse_settings(WINDOW, 20));
    let reasons_a = reasons(&search_a);
    let reasons_b = reasons(&search_b);
    // `ledger`: the default consecutive-failures rule (5), to show local decisions go on.
    let ledger = Breaker::new(
        "ledger",
        Settings::builder()
            .window(TripWindow::Time(WINDOW))
            .build()
            .unwrap(),
    );
    a.watch(&search_a).unwrap();
    a.watch(&ledger).unwrap();
    b.watch(&search_b).unwrap();
    assert!(a.wait_connected(Duration::from_secs(5)).await);
    assert!(b.wait_connected(Duration::from_secs(5)).await);
    let connected_since = a.health().since;

    // Redis dies.
    let killed = Instant::now();
    redis.kill();
    assert!(
        eventually(Duration::from_secs(2), || a.health().is_degraded()
            && b.health().is_degraded())
        .await
    );
    let degraded_after = killed.elapsed();
    let health = a.health();
    let error = health.error().expect("the error that degraded it");
    assert!(error.is_unreachable() || error.is_timeout(), "{error}");
    assert!(health.since >= connected_since);
    assert!(health.failed_rounds >= 1);
    assert_eq!(a.view("search"), None, "no fresh view while down");
    println!("killed: degraded after {degraded_after:?}: {error}");

    // Local decisions: ledger opens on its own 5 consecutive failures, and no call waits.
    let slowest = fail(&ledger, 8);
    assert_eq!(ledger.state(), State::Open);
    // The fleet rule is off: 12 + 12 failures would be 24 ≥ 20 on the fleet's window, but
    // each pod sees only its own 12.
    let slowest = slowest.max(fail(&search_a, 12)).max(fail(&search_b, 12));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(search_a.state(), State::Closed);
    assert_eq!(search_b.state(), State::Closed);
    println!("while down: ledger opened locally, search stayed closed; slowest call {slowest:?}");
    assert!(slowest < Duration::from_millis(100), "{slowest:?}");
    // Each warning once, not once a round.
    let warnings = logs.lines_with(&["down-a", "fleet signals degraded"]);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(a.health().failed_rounds >= 3, "{:?}", a.health());

    // Redis is back, empty, on the same port.
    let restarted = Instant::now();
    redis.restart();
    assert!(
        a.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        a.health()
    );
    assert!(
        b.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        b.health()
    );
    let recovered_after = restarted.elapsed();
    let health = a.health();
    assert_eq!(health.status, Status::Connected);
    assert!(health.error().is_none());
    assert!(health.last_error.is_some(), "the last error stays visible");
    println!("restarted: connected again after {recovered_after:?}");
    // Logged right after the round that recovered.
    assert!(
        eventually(Duration::from_secs(1), || {
            logs.lines_with(&["down-a", "connected again"]).len() == 1
        })
        .await,
        "recovery logged"
    );

    // The fleet trips again: the windows still hold the failures made while Redis was down
    // (12 + 12 within the 10 s window), and now the pods see each other's.
    let recovered = Instant::now();
    assert!(
        eventually(Duration::from_secs(3), || search_a.state() == State::Open
            && search_b.state() == State::Open)
        .await,
        "a: {:?}, b: {:?}, view: {:?}",
        search_a.snapshot(),
        search_b.snapshot(),
        a.view("search")
    );
    println!(
        "after recovery: both search breakers opened on the fleet's window in {:?}",
        recovered.elapsed()
    );
    assert_eq!(*reasons_a.lock().unwrap(), [OpenReason::Signal]);
    assert_eq!(*reasons_b.lock().unwrap(), [OpenReason::Signal]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_times_out_and_nothing_waits_for_it() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let fleet = fleet(&redis, "slow-a", "slow");
    let breaker = Breaker::new("search", sparse_settings(WINDOW, 20));
    fleet.watch(&breaker).unwrap();
    assert!(fleet.wait_connected(Duration::from_secs(5)).await);

    // Every client but this one waits 1.5 s for its answers.
    let mut admin = redis.client();
    let paused = Instant::now();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("ALL")
        .query(&mut admin)
        .unwrap();
    // Calls and health reads go on meanwhile.
    let mut slowest = Duration::ZERO;
    let degraded = eventually(Duration::from_secs(1), || {
        let start = Instant::now();
        let _ = breaker.call(|| Ok::<_, ()>(()));
        let degraded = fleet.health().is_degraded();
        slowest = slowest.max(start.elapsed());
        degraded
    })
    .await;
    assert!(degraded, "{:?}", fleet.health());
    let after = paused.elapsed();
    let health = fleet.health();
    let error = health.error().unwrap();
    assert!(error.is_timeout(), "{error}");
    println!("paused: degraded after {after:?} ({error}); slowest call or health read {slowest:?}");
    // A round is bounded by its timeout (200 ms) and starts within an interval (250 ms).
    assert!(after < Duration::from_millis(1200), "{after:?}");
    assert!(slowest < Duration::from_millis(100), "{slowest:?}");

    assert!(
        fleet.wait_connected(Duration::from_secs(4)).await,
        "{:?}",
        fleet.health()
    );
    println!(
        "pause over: connected again {:?} after the pause began",
        paused.elapsed()
    );
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_redis_never_blocks_a_connect() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let fleet = fleet(&redis, "frozen-a", "frozen");
    let breaker = Breaker::new("search", sparse_settings(WINDOW, 20));
    fleet.watch(&breaker).unwrap();
    assert!(fleet.wait_connected(Duration::from_secs(5)).await);

    // The process stops: the connection stays open, the kernel still accepts new ones,
    // nothing answers. The round times out, the connection is dropped, and every reconnect
    // hangs in its handshake until the connect timeout.
    redis.freeze();
    let frozen = Instant::now();
    assert!(eventually(Duration::from_secs(1), || fleet.health().is_degraded()).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let health = fleet.health();
    assert!(health.is_degraded());
    assert!(health.error().unwrap().is_timeout(), "{:?}", health.error());
    assert!(
        health.failed_rounds >= 2,
        "reconnects were tried: {health:?}"
    );
    let start = Instant::now();
    let _ = breaker.call(|| Ok::<_, ()>(()));
    assert!(start.elapsed() < Duration::from_millis(100));
    println!(
        "frozen: {} failed rounds in {:?}, each bounded: {}",
        health.failed_rounds,
        frozen.elapsed(),
        health.error().unwrap()
    );

    redis.thaw();
    assert!(
        fleet.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        fleet.health()
    );
    println!("thawed: connected again");
}

/// Issue #34, defect 3: a pod whose breaker tripped while Redis was down must not publish
/// that old window as fresh when Redis comes back. The grace that keeps a trip's window
/// published (one staleness bound) runs on the task's ticks whether or not Redis answers,
/// so a trip seen while disconnected has expired by then, and a healthy idle pod stays
/// closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trip_while_redis_is_down_is_not_published_as_fresh_when_it_returns() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let a = fleet(&redis, "grace-a", "grace");
    let b = fleet(&redis, "grace-b", "grace");
    // 20 calls before the ratio judges, on the pod's own window or on the fleet's.
    let search_a = Breaker::new("search", sparse_settings(WINDOW, 20));
    let search_b = Breaker::new("search", sparse_settings(WINDOW, 20));
    let reasons_a = reasons(&search_a);
    let reasons_b = reasons(&search_b);
    a.watch(&search_a).unwrap();
    b.watch(&search_b).unwrap();
    assert!(a.wait_connected(Duration::from_secs(5)).await);
    assert!(b.wait_connected(Duration::from_secs(5)).await);
    let staleness = Duration::from_secs(1); // the default: 3 × 250 ms + 250 ms

    redis.kill();
    assert!(
        eventually(Duration::from_secs(2), || a.health().is_degraded()
            && b.health().is_degraded())
        .await
    );
    // Pod A's own 20 failures open it, on its own window (Redis is down).
    fail(&search_a, 20);
    assert_eq!(search_a.state(), State::Open);
    assert_eq!(*reasons_a.lock().unwrap(), [OpenReason::FailureRatio]);
    // Three seconds later, long past the grace, Redis returns.
    tokio::time::sleep(staleness * 3).await;
    redis.restart();
    assert!(
        a.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        a.health()
    );
    assert!(
        b.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        b.health()
    );

    // For the next two staleness bounds (8 rounds), B, idle, stays closed: A publishes
    // itself open with no counts, not the window that tripped it 3 s ago.
    let watched = Instant::now();
    let opened = eventually(staleness * 2, || search_b.state() != State::Closed).await;
    // For the printout only (the one line here that knows the layout: a hash per breaker,
    // a field per pod); nothing is asserted on it.
    let mut admin = redis.client();
    let report: Option<String> = redis::cmd("HGET")
        .arg("grace:search")
        .arg("grace-a")
        .query(&mut admin)
        .ok()
        .flatten();
    println!(
        "after Redis returned: B {:?} after watching {:?}; A's report {report:?}; B's view {:?}",
        search_b.state(),
        watched.elapsed(),
        b.view("search")
    );
    assert!(
        !opened,
        "B opened on A's 3 s old window: {:?}, reasons {:?}",
        b.view("search"),
        reasons_b.lock().unwrap()
    );
    assert!(reasons_b.lock().unwrap().is_empty());
    // A's fresh report says open, with no counts.
    let view = b.view("search").expect("a fresh view");
    assert_eq!((view.open_pods, view.calls), (1, 0), "{view:?}");
    assert_eq!(search_a.state(), State::Open);
}
