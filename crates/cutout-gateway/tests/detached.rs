//! Detached attempts: when the gateway finds a client gone before its answer ended, the attempt
//! runs on detached and its own outcome is judged, within a budget per cluster
//! (`max-detached-attempts`) and a byte cap on the drained body (`max-detached-body`); past
//! either it is cancelled and counts nothing. A flood of give-ups beyond the budget leaks no
//! task, descriptor or memory. All on loopback against the demo upstream.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    Custom, eventually, get, lines_with, log, metric_value, serve_upstream, start_config,
};
use cutout::State;
use cutout_gateway::upstream::Upstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A healthy stream: 40 chunks, 25 ms apart (a second in all).
const STREAM: &str = "/accounts/1?chunks=40&every=25ms";

struct Setup {
    g: Custom,
    up: Arc<Upstream>,
    cluster: &'static str,
    _stop: watch::Sender<bool>,
}

/// The shipped breaker defaults in front of one demo upstream, as cluster `cluster` (metrics are
/// process-wide, so each test names its own).
async fn setup(cluster: &'static str, gateway_extra: &str) -> Setup {
    let (stop, _) = watch::channel(false);
    let up = Upstream::new(cluster);
    let addr = serve_upstream(&up, &stop).await;
    let g = start_config(&format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "5s"
{gateway_extra}

[[routes]]
prefix = "/accounts"
cluster = "{cluster}"

[clusters.{cluster}]
upstreams = ["http://127.0.0.1:{port}"]
"#,
        port = addr.port()
    ))
    .await;
    Setup {
        g,
        up,
        cluster,
        _stop: stop,
    }
}

impl Setup {
    fn snapshot(&self) -> cutout::Snapshot {
        self.g.gateway.registry().snapshot(self.cluster).unwrap()
    }

    fn metric(&self, series: &str) -> f64 {
        let text = self.g.gateway.metrics().expect("a recorder").render();
        metric_value(&text, series).unwrap_or(0.0)
    }

    fn give_ups(&self, counted: &str) -> f64 {
        self.metric(&format!(
            "cutout_gateway_give_ups_total{{cluster=\"{}\",counted=\"{counted}\"}}",
            self.cluster
        ))
    }

    fn detached(&self) -> f64 {
        self.metric(&format!(
            "cutout_gateway_detached_attempts{{cluster=\"{}\"}}",
            self.cluster
        ))
    }
}

/// Asks `path`, reads the answer's head, waits `after` and leaves: the bytes it did not read
/// make its close a reset, so the gateway's next write fails.
async fn leave_mid_body(proxy: SocketAddr, path: &str, after: Duration) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("the head within 5 s")
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "the head came");
    tokio::time::sleep(after).await;
}

async fn flood(proxy: SocketAddr, n: usize, path: &'static str) {
    let clients: Vec<_> = (0..n)
        .map(|_| tokio::spawn(leave_mid_body(proxy, path, Duration::from_millis(100))))
        .collect();
    for client in clients {
        client.await.unwrap();
    }
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_give_ups_beyond_the_bound_leaks_nothing_and_counts_nothing_beyond_it() {
    let _ = log();
    let s = setup(
        "flood",
        "max-detached-attempts = 2\npool-idle-timeout = \"300ms\"",
    )
    .await;
    // One answer first, so that the upstream pool's reaper task runs; its connection is
    // reaped after pool-idle-timeout.
    assert_eq!(
        get(&format!("http://{}/accounts/1", s.g.proxy))
            .await
            .status,
        200
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (tasks, descriptors) = (alive_tasks(), open_descriptors());
    // The bound holds at every moment: a sampler reads the gauge while the floods run.
    let peak = Arc::new(Mutex::new(0.0f64));
    let sampler = {
        let peak = Arc::clone(&peak);
        let handle = s.g.gateway.metrics().expect("a recorder").clone();
        tokio::spawn(async move {
            loop {
                let now = metric_value(
                    &handle.render(),
                    "cutout_gateway_detached_attempts{cluster=\"flood\"}",
                )
                .unwrap_or(0.0);
                {
                    let mut peak = peak.lock().unwrap();
                    *peak = peak.max(now);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut rss = Vec::new();
    let (mut detached, mut dropped) = (0.0, 0.0);
    let started = std::time::Instant::now();
    for round in 1..=4 {
        let before = s.snapshot().calls;
        let failures = s.snapshot().failures;
        let (finished, cancelled) = (s.up.finished(), s.up.cancelled());
        flood(s.g.proxy, 50, STREAM).await;
        assert!(
            eventually(Duration::from_secs(7), || s.up.started()
                == s.up.finished() + s.up.cancelled())
            .await,
            "round {round}: every stream ended one way or the other"
        );
        assert!(
            eventually(Duration::from_secs(3), || s.detached() == 0.0).await,
            "round {round}: the detached count returns to 0"
        );
        // The give-ups are counted as the requests' records end, after their attempts.
        eventually(Duration::from_secs(2), || {
            s.give_ups("detached") + s.give_ups("dropped") == detached + dropped + 50.0
        })
        .await;
        let (now_detached, now_dropped) = (s.give_ups("detached"), s.give_ups("dropped"));
        let (round_detached, round_dropped) = (now_detached - detached, now_dropped - dropped);
        (detached, dropped) = (now_detached, now_dropped);
        assert_eq!(round_detached + round_dropped, 50.0, "round {round}");
        assert!(round_detached >= 1.0, "round {round}: some were detached");
        assert!(
            round_dropped >= 40.0,
            "round {round}: {round_dropped} dropped"
        );
        let snap = s.snapshot();
        assert_eq!(
            (snap.calls - before, snap.failures - failures, snap.state),
            (round_detached as u64, 0, State::Closed),
            "round {round}: the detached ones count their own success, the dropped ones nothing"
        );
        assert_eq!(
            (s.up.finished() - finished, s.up.cancelled() - cancelled),
            (round_detached as u64, round_dropped as u64),
            "round {round}: the dropped ones were cancelled at the upstream"
        );
        rss.push(rss_kib());
    }
    sampler.abort();
    let peak = *peak.lock().unwrap();
    assert!(peak <= 2.0, "at most 2 detached at once; saw {peak}");
    assert!(peak >= 1.0, "the sampler saw them");
    assert!(
        eventually(Duration::from_secs(5), || alive_tasks() <= tasks).await,
        "tasks: {} before the floods, {} after",
        tasks,
        alive_tasks()
    );
    assert!(
        eventually(Duration::from_secs(5), || open_descriptors() <= descriptors).await,
        "descriptors: {} before the floods, {} after",
        descriptors,
        open_descriptors()
    );
    println!("RSS after each round (KiB): {rss:?}");
    assert!(
        rss[3].saturating_sub(rss[1]) < 4096,
        "memory grew by {} KiB from round 2 to round 4: {rss:?}",
        rss[3].saturating_sub(rss[1])
    );
    // The access log says what happened to each, the bound's warning is rate-limited.
    let lines = lines_with(&["cluster=flood", "outcome=gave_up"]);
    let detached_lines = lines
        .iter()
        .filter(|l| l.contains("counted=detached"))
        .count();
    let dropped_lines = lines
        .iter()
        .filter(|l| l.contains("counted=dropped"))
        .count();
    assert_eq!(
        (detached_lines as f64, dropped_lines as f64),
        (detached, dropped)
    );
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("counted=detached"))
            .all(|l| l.contains("upstream=ok")),
        "{lines:#?}"
    );
    let warnings = lines_with(&["max_detached_attempts", "cluster flood left"]);
    let seconds = started.elapsed().as_secs() as usize + 1;
    assert!(
        (1..=seconds).contains(&warnings.len()),
        "one warning a second at most ({seconds} s): {warnings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_detached_budget_a_give_up_is_cancelled_and_counts_nothing() {
    let s = setup("no-budget", "max-detached-attempts = 0").await;
    flood(s.g.proxy, 5, STREAM).await;
    assert!(
        eventually(Duration::from_secs(3), || s.up.cancelled() == 5).await,
        "the upstream saw its streams cancelled (cancelled {})",
        s.up.cancelled()
    );
    let snap = s.snapshot();
    assert_eq!((snap.calls, snap.failures), (0, 0), "{snap:?}");
    // Each give-up is counted when its request's record ends, not ordered with the
    // upstream seeing its stream cancelled.
    assert!(eventually(Duration::from_secs(2), || s.give_ups("dropped") == 5.0).await);
    assert_eq!(s.give_ups("detached"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_body_past_max_detached_body_is_cancelled_and_counts_nothing() {
    let _ = log();
    // "chunk\n" is 6 bytes: the 36 or so chunks left after the client leaves pass 64 bytes.
    let s = setup("capped", "max-detached-body = 64").await;
    flood(s.g.proxy, 5, STREAM).await;
    assert!(eventually(Duration::from_secs(3), || s.up.cancelled() == 5).await);
    let snap = s.snapshot();
    assert_eq!((snap.calls, snap.failures), (0, 0), "{snap:?}");
    assert!(eventually(Duration::from_secs(2), || s.give_ups("detached") == 5.0).await);
    assert!(eventually(Duration::from_secs(2), || s.detached() == 0.0).await);
    let lines = lines_with(&["cluster=capped", "counted=detached"]);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(
        lines.iter().all(|l| l.contains("upstream=capped")),
        "{lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cut_by_the_gateway_s_shutdown_is_judged_by_its_upstream_s_own_outcome() {
    let s = setup("cut", "shutdown-timeout = \"100ms\"").await;
    let url = format!("http://{}/accounts/1?delay=400ms", s.g.proxy);
    let client = tokio::spawn(async move {
        let client: hyper_util::client::legacy::Client<_, http_body_util::Empty<bytes::Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        client.get(url.parse().unwrap()).await.map(|r| r.status())
    });
    assert!(eventually(Duration::from_secs(2), || s.up.started() == 1).await);
    // Shut the gateway down: its shutdown-timeout (100 ms) cuts the request's connection
    // before the upstream's answer (400 ms).
    let Setup {
        g,
        up,
        cluster,
        _stop,
    } = s;
    let gateway = Arc::clone(&g.gateway);
    drop(g);
    let answer = client.await.unwrap();
    assert!(answer.is_err(), "the client got no answer: {answer:?}");
    assert!(eventually(Duration::from_secs(2), || up.finished() == 1).await);
    assert!(
        eventually(Duration::from_secs(2), || gateway
            .registry()
            .snapshot(cluster)
            .unwrap()
            .calls
            == 1)
        .await
    );
    let snap = gateway.registry().snapshot(cluster).unwrap();
    assert_eq!((snap.calls, snap.failures), (1, 0), "{snap:?}");
    assert_eq!(up.cancelled(), 0);
    // The give-up is counted when the request's record ends, after the attempt's permit
    // counted its call: the two are not ordered, so the metric is waited for.
    let give_ups = || {
        metric_value(
            &gateway.metrics().unwrap().render(),
            "cutout_gateway_give_ups_total{cluster=\"cut\",counted=\"detached\"}",
        )
    };
    assert!(
        eventually(Duration::from_secs(2), || give_ups() == Some(1.0)).await,
        "{:?}",
        give_ups()
    );
}
