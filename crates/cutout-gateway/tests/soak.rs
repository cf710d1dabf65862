//! The soak: the gateway binary on its shipped breaker defaults (no `[breakers]` section) for 10 minutes (`SOAK_SECS`) under a flapping upstream, clients that give up, slowloris connections and malformed requests, beside a healthy cluster under mixed light and heavy traffic.
//!
//! For the long lane only (it is `#[ignore]`d, so CI's default `cargo test` does not run it):
//!
//! ```sh
//! cargo test -p cutout-gateway --release --test soak -- --ignored --nocapture
//! SOAK_SECS=300 cargo test -p cutout-gateway --release --test soak -- --ignored --nocapture
//! ```
//!
//! The healthy cluster (two healthy hosts) gets light traffic all the time (a keep-alive client
//! every 50 ms, a client on a fresh connection every 200 ms) and, for 20 s of every minute, a
//! heavy burst beside it (16 keep-alive clients back to back), so the gateway's own latency
//! swings between idle and saturated while its upstreams stay healthy. Idle pooled upstream
//! connections are closed after 2 s, so every burst starts on fresh ones.
//!
//! It passes when: every answer is one its traffic may get (0 undefined responses), the healthy
//! cluster answered every request 200 (0 answers 503: none of its breakers opened), and after
//! the warm-up (the first sixth, at least 20 s) the gateway's open descriptors and resident
//! memory stay flat (the last third's peak within 32 descriptors and 8 MiB of the first
//! third's after warm-up). It prints the figures.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cutout_gateway::upstream::{Mode, Upstream};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Answers seen, by traffic class and status (`conn-error`, `bad-response` for no status).
#[derive(Default)]
struct Tally(Mutex<BTreeMap<(&'static str, String), u64>>);

impl Tally {
    fn add(&self, class: &'static str, what: impl Into<String>) {
        *self
            .0
            .lock()
            .unwrap()
            .entry((class, what.into()))
            .or_default() += 1;
    }
}

/// What each class may get; anything else is an undefined response.
fn allowed(class: &str, what: &str) -> bool {
    match class {
        "steady-heavy" | "steady-light" | "steady-fresh" => what == "200",
        "pool" => ["200", "500", "502", "503", "504"].contains(&what),
        "flaky" => ["200", "500", "503", "504"].contains(&what),
        // Clients that gave up, and slowloris connections: any end is theirs.
        "abandon" | "slowloris" => true,
        // Malformed input: a 4xx, or a closed connection.
        "malformed" => what.starts_with('4') || what == "closed",
        _ => false,
    }
}

fn free_port() -> u16 {
    common::dead_port()
}

struct Gateway {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// When a client loop sends: always, or during the first `on` of every `period` since
/// `start` (a burst).
#[derive(Clone, Copy)]
enum Gate {
    Always,
    Bursts {
        start: Instant,
        on: Duration,
        period: Duration,
    },
}

impl Gate {
    fn open(self) -> bool {
        match self {
            Gate::Always => true,
            Gate::Bursts { start, on, period } => {
                start.elapsed().as_millis() % period.as_millis() < on.as_millis()
            }
        }
    }
}

/// GETs `path` in a loop until `stop`, tallying answers under `class`, pausing `pause`, while
/// `gate` is open; `fresh`: each request on a new connection.
#[allow(clippy::too_many_arguments)]
async fn client_loop(
    class: &'static str,
    proxy: SocketAddr,
    path: &'static str,
    pause: Duration,
    gate: Gate,
    fresh: bool,
    tally: Arc<Tally>,
    stop: watch::Receiver<bool>,
) {
    let mut client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut n = 0u64;
    while !*stop.borrow() {
        if !gate.open() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if fresh {
            client = Client::builder(TokioExecutor::new()).build_http();
        }
        n += 1;
        let uri = format!("http://{proxy}{path}/{n}");
        let request = http::Request::get(uri).body(Empty::new()).unwrap();
        match tokio::time::timeout(Duration::from_secs(10), client.request(request)).await {
            Ok(Ok(response)) => {
                let status = response.status().as_u16().to_string();
                match response.into_body().collect().await {
                    Ok(_) => tally.add(class, status),
                    Err(_) => tally.add(class, format!("{status}-cut")),
                }
            }
            Ok(Err(_)) => tally.add(class, "conn-error"),
            Err(_) => tally.add(class, "no-answer-10s"),
        }
        tokio::time::sleep(pause).await;
    }
}

async fn abandon_loop(proxy: SocketAddr, tally: Arc<Tally>, stop: watch::Receiver<bool>) {
    let mut n = 0u64;
    while !*stop.borrow() {
        n += 1;
        if let Ok(mut stream) = TcpStream::connect(proxy).await {
            let _ = stream
                .write_all(
                    format!("GET /pool/abandoned/{n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                        .as_bytes(),
                )
                .await;
            // Give up after 20–400 ms unless answered by then.
            let wait = Duration::from_millis(20 + (n * 37) % 380);
            let mut buf = [0u8; 64];
            let answered = matches!(
                tokio::time::timeout(wait, stream.read(&mut buf)).await,
                Ok(Ok(k)) if k > 0
            );
            tally.add("abandon", if answered { "answered" } else { "gave-up" });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn slowloris_loop(proxy: SocketAddr, tally: Arc<Tally>, stop: watch::Receiver<bool>) {
    // 20 connections, each sending a header line a second until the gateway closes it.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let tally = Arc::clone(&tally);
        let stop = stop.clone();
        tasks.spawn(async move {
            while !*stop.borrow() {
                let Ok(mut stream) = TcpStream::connect(proxy).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let _ = stream
                    .write_all(b"GET /steady/slow HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    .await;
                let mut closed = false;
                for n in 0..30 {
                    if *stop.borrow() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if stream
                        .write_all(format!("X-Drip-{n}: 1\r\n").as_bytes())
                        .await
                        .is_err()
                    {
                        closed = true;
                        break;
                    }
                }
                tally.add("slowloris", if closed { "closed" } else { "held" });
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

const MALFORMED: [&[u8]; 6] = [
    b"GARBAGE\r\n\r\n",
    b"GET /steady/1 HTTP/1.1\r\n\r\n",
    b"GET /steady/1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"POST /steady/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n",
];

async fn malformed_loop(proxy: SocketAddr, tally: Arc<Tally>, stop: watch::Receiver<bool>) {
    let mut n = 0usize;
    while !*stop.borrow() {
        n += 1;
        let Ok(mut stream) = TcpStream::connect(proxy).await else {
            continue;
        };
        let _ = stream.write_all(MALFORMED[n % MALFORMED.len()]).await;
        let (answer, _, _) = common::read_until_closed(&mut stream, Duration::from_secs(5)).await;
        let what = answer
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .map_or_else(|| "closed".to_owned(), str::to_owned);
        tally.add("malformed", what);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
#[ignore = "soak: 10 minutes (SOAK_SECS); long lane: cargo test -p cutout-gateway --release --test soak -- --ignored --nocapture"]
fn a_ten_minute_soak_leaves_nothing_undefined_and_resources_flat() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(soak(Duration::from_secs(secs)));
}

async fn soak(length: Duration) {
    let (stop_upstreams, _) = watch::channel(false);
    let (flapping, healthy, flaky, steady, steady_b) = (
        Upstream::new("pool-flapping"),
        Upstream::new("pool-healthy"),
        Upstream::new("flaky"),
        Upstream::new("steady"),
        Upstream::new("steady-b"),
    );
    let mut ports = Vec::new();
    for u in [&flapping, &healthy, &flaky, &steady, &steady_b] {
        ports.push(common::serve_upstream(u, &stop_upstreams).await.port());
    }
    let (proxy_port, admin_port) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("cutout-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[gateway]
listen = "127.0.0.1:{proxy_port}"
admin = "127.0.0.1:{admin_port}"
attempt-timeout = "300ms"
header-read-timeout = "2s"
idle-timeout = "10s"
request-timeout = "5s"
max-connections = 512
pool-idle-timeout = "2s"
access-log = false
[[routes]]
prefix = "/pool"
cluster = "pool"
[[routes]]
prefix = "/flaky"
cluster = "flaky"
[[routes]]
prefix = "/steady"
cluster = "steady"
[clusters.pool]
upstreams = ["http://127.0.0.1:{}", "http://127.0.0.1:{}"]
[clusters.flaky]
upstreams = ["http://127.0.0.1:{}"]
[clusters.steady]
upstreams = ["http://127.0.0.1:{}", "http://127.0.0.1:{}"]
"#,
            ports[0], ports[1], ports[2], ports[3], ports[4]
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .arg("--config")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut gateway = Gateway { child, dir };
    let pid = gateway.child.id();
    let proxy: SocketAddr = format!("127.0.0.1:{proxy_port}").parse().unwrap();
    let admin = format!("http://127.0.0.1:{admin_port}");
    assert!(
        common::eventually(Duration::from_secs(10), || std::net::TcpStream::connect(
            proxy
        )
        .is_ok())
        .await,
        "the gateway listens"
    );

    let tally = Arc::new(Tally::default());
    let (stop, rx) = watch::channel(false);
    let mut load = tokio::task::JoinSet::new();
    // The healthy cluster: light traffic always, a heavy burst 20 s of every minute.
    let bursts = Gate::Bursts {
        start: Instant::now(),
        on: Duration::from_secs(20),
        period: Duration::from_secs(60),
    };
    for _ in 0..16 {
        load.spawn(client_loop(
            "steady-heavy",
            proxy,
            "/steady",
            Duration::ZERO,
            bursts,
            false,
            Arc::clone(&tally),
            rx.clone(),
        ));
    }
    load.spawn(client_loop(
        "steady-light",
        proxy,
        "/steady",
        Duration::from_millis(50),
        Gate::Always,
        false,
        Arc::clone(&tally),
        rx.clone(),
    ));
    load.spawn(client_loop(
        "steady-fresh",
        proxy,
        "/steady",
        Duration::from_millis(200),
        Gate::Always,
        true,
        Arc::clone(&tally),
        rx.clone(),
    ));
    for _ in 0..4 {
        load.spawn(client_loop(
            "pool",
            proxy,
            "/pool",
            Duration::from_millis(2),
            Gate::Always,
            false,
            Arc::clone(&tally),
            rx.clone(),
        ));
    }
    for _ in 0..2 {
        load.spawn(client_loop(
            "flaky",
            proxy,
            "/flaky",
            Duration::from_millis(5),
            Gate::Always,
            false,
            Arc::clone(&tally),
            rx.clone(),
        ));
        load.spawn(abandon_loop(proxy, Arc::clone(&tally), rx.clone()));
    }
    load.spawn(slowloris_loop(proxy, Arc::clone(&tally), rx.clone()));
    for _ in 0..2 {
        load.spawn(malformed_loop(proxy, Arc::clone(&tally), rx.clone()));
    }

    // The flapping host: 10 s each of ok, fail, ok, hang; the flaky cluster: 7 s fail, 7 s ok.
    let chaos = {
        let (flapping, flaky) = (Arc::clone(&flapping), Arc::clone(&flaky));
        let rx = rx.clone();
        tokio::spawn(async move {
            let mut t = 0u64;
            while !*rx.borrow() {
                flapping
                    .set_mode([Mode::Ok, Mode::Fail, Mode::Ok, Mode::Hang][(t / 10 % 4) as usize]);
                flaky.set_mode(if (t / 7).is_multiple_of(2) {
                    Mode::Fail
                } else {
                    Mode::Ok
                });
                tokio::time::sleep(Duration::from_secs(1)).await;
                t += 1;
            }
        })
    };

    // Scrapes, as Prometheus and the status page would, and the resource samples.
    let started = Instant::now();
    let scrapes = Arc::new(AtomicU64::new(0));
    let mut samples: Vec<(u64, u64, u64)> = Vec::new();
    let scraper: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_secs(5)).await;
        for path in ["/metrics", "/breakers"] {
            let request = http::Request::get(format!("{admin}{path}"))
                .body(Empty::new())
                .unwrap();
            if let Ok(Ok(r)) =
                tokio::time::timeout(Duration::from_secs(5), scraper.request(request)).await
                && r.status() == 200
                && r.into_body().collect().await.is_ok()
            {
                scrapes.fetch_add(1, Ordering::Relaxed);
            }
        }
        samples.push((started.elapsed().as_secs(), rss_kb(pid), fds(pid)));
    }
    let _ = stop.send(true);
    chaos.abort();
    let drain = tokio::time::timeout(Duration::from_secs(60), async {
        while load.join_next().await.is_some() {}
    })
    .await;
    let final_metrics = {
        let request = http::Request::get(format!("{admin}/metrics"))
            .body(Empty::new())
            .unwrap();
        let r = scraper.request(request).await.unwrap();
        String::from_utf8_lossy(&r.into_body().collect().await.unwrap().to_bytes()).into_owned()
    };
    let still_running = matches!(gateway.child.try_wait(), Ok(None));
    drop(gateway);
    let _ = stop_upstreams.send(true);

    // The figures.
    let tally = tally.0.lock().unwrap().clone();
    println!(
        "soak: {} s, {} scrapes of /metrics and /breakers",
        length.as_secs(),
        scrapes.load(Ordering::Relaxed)
    );
    let mut undefined = Vec::new();
    for ((class, what), n) in &tally {
        println!("  {class:<10} {what:<14} {n}");
        if !allowed(class, what) {
            undefined.push(format!("{class} {what}: {n}"));
        }
    }
    for line in final_metrics.lines().filter(|l| {
        (l.starts_with("cutout_transitions_total") && !l.ends_with(" 0"))
            || l.starts_with("cutout_gateway_give_ups_total")
    }) {
        println!("  {line}");
    }
    println!("  samples (s, RSS kB, fds): {samples:?}");
    let warm = (length.as_secs() / 6).max(20);
    let after: Vec<&(u64, u64, u64)> = samples.iter().filter(|s| s.0 >= warm).collect();
    let third = (after.len() / 3).max(1);
    let peak = |part: &[&(u64, u64, u64)], f: fn(&(u64, u64, u64)) -> u64| {
        part.iter().map(|s| f(s)).max().unwrap_or(0)
    };
    let (first, last) = (
        &after[..third.min(after.len())],
        &after[after.len().saturating_sub(third)..],
    );
    let (rss_first, rss_last) = (peak(first, |s| s.1), peak(last, |s| s.1));
    let (fd_first, fd_last) = (peak(first, |s| s.2), peak(last, |s| s.2));
    println!(
        "  after warm-up ({warm} s): RSS peak {rss_first} kB (first third) -> {rss_last} kB (last third); \
         fds peak {fd_first} -> {fd_last}"
    );

    assert!(still_running, "the gateway died during the soak");
    assert!(drain.is_ok(), "the load did not stop within 60 s");
    assert!(undefined.is_empty(), "undefined responses: {undefined:#?}");
    let healthy_503: u64 = tally
        .iter()
        .filter(|((class, what), _)| class.starts_with("steady") && what == "503")
        .map(|(_, n)| n)
        .sum();
    println!("  healthy cluster: {healthy_503} answers 503");
    assert_eq!(healthy_503, 0, "the healthy cluster answered 503");
    for class in ["steady-heavy", "steady-light", "steady-fresh"] {
        let ok = tally.get(&(class, "200".to_owned())).copied().unwrap_or(0);
        assert!(
            ok > 100,
            "the healthy cluster's {class} traffic was served: {ok}"
        );
    }
    assert!(
        rss_last <= rss_first + 8 * 1024,
        "RSS grew after warm-up: {rss_first} -> {rss_last} kB"
    );
    assert!(
        fd_last <= fd_first + 32,
        "descriptors grew after warm-up: {fd_first} -> {fd_last}"
    );
}
