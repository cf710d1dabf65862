//! Acceptance 1: two OS processes' breakers see each other's failures.
//!
//! The test binary runs itself a second time (`current_exe`, with `--exact child_pod` and the
//! Redis URL in an environment variable), which works under `cargo test` on a clean clone:
//! no example binary, no helper crate. Each process has one breaker `orders` that needs 20
//! calls in its window before its ratio rule may judge, and makes 15 failing calls: neither
//! can trip on its own calls. Together the fleet's window holds 30 failures out of 30, and
//! each process's breaker opens on the signal.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{RedisServer, eventually, sparse_settings};
use cutout::{Breaker, OpenReason, State, Transition};
use cutout_fleet::{Fleet, FleetView};

const CHILD_URL: &str = "CUTOUT_FLEET_TEST_CHILD_URL";
const FAILURES_PER_POD: usize = 15;
const MINIMUM_CALLS: u32 = 20;
const WINDOW: Duration = Duration::from_secs(10);

/// One pod: a fleet, a breaker, 15 failures. Returns how long after its failures the breaker
/// opened on the signal, and the fleet's view at that moment.
async fn run_pod(url: &str, pod: &str) -> Option<(Duration, FleetView)> {
    let fleet = Fleet::builder(url)
        .pod(pod)
        .prefix("two-processes")
        .build()
        .expect("fleet");
    let breaker = Breaker::new("orders", sparse_settings(WINDOW, MINIMUM_CALLS));
    // When the breaker opened, and the fleet's view then.
    type Opened = Option<(Instant, Option<FleetView>)>;
    let opened: Arc<Mutex<Opened>> = Arc::default();
    {
        let opened = Arc::clone(&opened);
        let fleet = fleet.clone();
        breaker.subscribe(move |event| {
            if let Transition::Opened { reason, .. } = event.transition {
                assert_eq!(reason, OpenReason::Signal, "only the fleet can open it");
                // The listener runs on the task, right after the view it tripped on.
                *opened.lock().unwrap() = Some((Instant::now(), fleet.view("orders")));
            }
        });
    }
    fleet.watch(&breaker).expect("watch");
    assert!(
        fleet.wait_connected(Duration::from_secs(5)).await,
        "{pod}: {:?}",
        fleet.health()
    );
    for _ in 0..FAILURES_PER_POD {
        let _ = breaker.call(|| Err::<(), _>("upstream 503"));
    }
    let failed_at = Instant::now();
    assert_eq!(
        breaker.state(),
        State::Closed,
        "15 calls < 20: not on its own"
    );
    if !eventually(Duration::from_secs(8), || opened.lock().unwrap().is_some()).await {
        return None;
    }
    let (at, view) = opened.lock().unwrap().clone()?;
    Some((at.duration_since(failed_at), view?))
}

/// The second process. A no-op unless the parent test set the URL.
#[tokio::test]
async fn child_pod() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let (after, view) = run_pod(&url, "child")
        .await
        .expect("the child's breaker opened on the fleet's failures");
    println!(
        "CUTOUT-CHILD opened-by-signal after_ms={} pods={} calls={} failures={}",
        after.as_millis(),
        view.pods,
        view.calls,
        view.failures
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_see_each_others_failures() {
    if std::env::var(CHILD_URL).is_ok() {
        return; // in the child: only `child_pod` runs (`--exact`), but be sure.
    }
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child_pod", "--nocapture", "--test-threads", "1"])
        .env(CHILD_URL, redis.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the second process");

    let parent = run_pod(&redis.url(), "parent").await;

    // The child has at most 15 s more (it bounds itself at 5 s + 8 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().expect("child status") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    let status = status.expect("the child finished within 15 s");
    assert!(status.success(), "child failed:\n{out}\n{err}");
    // The harness may print the test's name on the same line (`test child_pod ... `).
    let line = out
        .lines()
        .find_map(|line| {
            line.find("CUTOUT-CHILD opened-by-signal")
                .map(|at| &line[at..])
        })
        .unwrap_or_else(|| panic!("child did not report:\n{out}\n{err}"));
    println!("{line}");

    let (after, view) = parent.expect("the parent's breaker opened on the fleet's failures");
    println!(
        "parent opened-by-signal after_ms={} pods={} calls={} failures={}",
        after.as_millis(),
        view.pods,
        view.calls,
        view.failures
    );
    // At its trip each pod saw both pods' failures: its own 15 and the other's 15 (or, if
    // the other had opened a moment before, the other as an open pod).
    assert_eq!(view.pods, 2, "{view:?}");
    assert!(
        view.failures == 2 * FAILURES_PER_POD as u64 || view.open_pods == 1,
        "{view:?}"
    );
    assert!(line.contains("pods=2"), "{line}");
}
