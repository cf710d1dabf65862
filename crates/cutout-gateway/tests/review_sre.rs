//! A review of issue #27's gateway work as an SRE would load it: the shipped defaults (no `[breakers]` section) on real loopback sockets, against `cutout-gateway upstream` and the built-in test upstream, each test a promise that does not hold today.
//!
//! Every test here runs what an operator gets: no `[breakers]` section, the shipped
//! `attempt-timeout` (2 s) and limits, unless a test says which key it sets and why. Each is
//! named after the behaviour it expects and fails on the code it was written against (the
//! report of the review says how each failed).
//!
//! - A client that uploads its body slowly (15 KB in 1.4 s, never stalled) to a healthy
//!   endpoint that answers 700 ms after the body: the attempt timeout counts the client's
//!   upload as time spent waiting for the upstream, so the answer is a 504 counted as the
//!   upstream's failure, and five such clients open the cluster.
//! - 1,000 keep-alive clients (`wrk -t2 -c1000`) through the gateway in front of one
//!   `cutout-gateway upstream` (a healthy 100 ms endpoint), which serves the same 1,000
//!   clients directly without a single non-2xx: the gateway holds more upstream connections
//!   than it has clients, past the upstream's own connection limit, and answers 502 (up to
//!   four bursts of 3 s, until one shows it). Needs `wrk` (skipped with one line otherwise,
//!   unless `CUTOUT_REQUIRE_SERVICES=1`).
//! - A single-upstream cluster (its cluster breaker is its host's) killed for minutes under
//!   20 req/s and restarted: its break grew toward cutout's 2 min while it was down, so it is
//!   still refused long after it came back; the 15 s cap is for host breakers only.
//! - A flood of clients that close their connection before the answer of a slow healthy
//!   endpoint: a half-close and a close look the same to the listener, so each request runs
//!   on in its connection and the upstream works for 300 clients that are gone at once, where
//!   the docs say `max-detached-attempts` (64) bounds that work.
//! - One host of three dead and ejected: round-robin gives its share to the host after it
//!   (2/3 of the traffic to one healthy host, 1/3 to the other), where DESIGN §8 spreads it
//!   evenly over the healthy hosts.
//!
//! Run: `cargo test -p cutout-gateway --test review_sre -- --nocapture` (under a minute in
//! debug; every loop is bounded in count and time, all traffic goes to 127.0.0.1).

mod common;

use common::{
    Proc, Warp, WrkReport, client, opens, shipped, start_gateway, status, upstream_process,
    wrk_or_skip,
};

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cutout::State;
use cutout_gateway::upstream::Upstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A directory of this test's own under the system's temporary directory, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("cutout-sre-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How many TCP connections accepted on `port` of 127.0.0.1 are established now (the
/// server's side of each, from `/proc/net/tcp`; 0 where it cannot be read).
fn established_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace().skip(1);
            fields.next() == Some(local.as_str()) && fields.nth(1) == Some("01")
        })
        .count()
}

/// Samples [`established_on`] `port` every 50 ms until the returned flag is set; the peak.
fn peak_connections(
    port: u16,
) -> (
    Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<usize>,
) {
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        // Bounded: at most 60 s of samples.
        for _ in 0..1200 {
            // SeqCst: a test flag, set once.
            if flag.load(Ordering::SeqCst) {
                break;
            }
            peak = peak.max(established_on(port));
            std::thread::sleep(Duration::from_millis(50));
        }
        peak
    });
    (done, sampler)
}

/// The non-2xx answers to `path_part` in an access log, by `status outcome`.
fn non_2xx_in(log: &std::path::Path, path_part: &str) -> std::collections::BTreeMap<String, usize> {
    let access = std::fs::read_to_string(log).unwrap_or_default();
    let mut non_2xx = std::collections::BTreeMap::new();
    for line in access.lines().filter(|l| l.contains(path_part)) {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .unwrap_or("-")
                .to_owned()
        };
        let status = field("status=");
        if !status.starts_with('2') {
            *non_2xx
                .entry(format!("{status} {}", field("outcome=")))
                .or_default() += 1;
        }
    }
    non_2xx
}

/// Runs `wrk` with `args` against `url`.
fn wrk(args: &[&str], url: &str) -> WrkReport {
    WrkReport::of(&Command::new("wrk").args(args).arg(url).output().unwrap())
}

/// Sends `POST path` with a body of `chunks` × 1,000 bytes, one chunk every `every` (the
/// first with the head), then reads the answer's head (at most 10 s); its status line.
async fn slow_upload(proxy: SocketAddr, path: &str, chunks: usize, every: Duration) -> String {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
        chunks * 1000
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = [b'x'; 1000];
    for n in 0..chunks {
        if n > 0 {
            tokio::time::sleep(every).await;
        }
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    // The answer's head (the connection stays open: keep-alive).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    head.lines().next().unwrap_or("(no answer)").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_to_a_healthy_endpoint_is_not_the_upstream_s_timeout() {
    let (stop, _) = watch::channel(false);
    let up = Upstream::new("upload");
    let addr = common::serve_upstream(&up, &stop).await;
    let gw = start_gateway(&shipped("upload", &[addr.port()], ""), None).await;
    let client = client();
    for n in 0..30 {
        assert_eq!(
            status(&client, &format!("http://{}/warm/{n}", gw.proxy)).await,
            200
        );
    }
    // The control: the same body sent at once gets its answer 700 ms later.
    let fast = slow_upload(gw.proxy, "/upload/fast?delay=700ms", 15, Duration::ZERO).await;
    assert!(fast.starts_with("HTTP/1.1 200"), "control: {fast}");
    // Five clients on a slow link: 15 KB in 1.4 s, never stalled (a chunk every 100 ms), to
    // an endpoint that answers 700 ms after it has the whole body. Each client waits 2.1 s
    // in all; the upstream takes 700 ms of it, well inside the 2 s attempt timeout.
    let uploads: Vec<_> = (0..5)
        .map(|n| {
            let proxy = gw.proxy;
            tokio::spawn(async move {
                slow_upload(
                    proxy,
                    &format!("/upload/{n}?delay=700ms"),
                    15,
                    Duration::from_millis(100),
                )
                .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for upload in uploads {
        answers.push(upload.await.unwrap());
    }
    let breaker = gw.gateway.registry().get("upload").unwrap();
    let snapshot = breaker.snapshot();
    let next = status(&client, &format!("http://{}/next", gw.proxy)).await;
    eprintln!(
        "answers {answers:?}; cluster {:?}, {} failures; the next request: {next}; opens {:?}",
        snapshot.state,
        snapshot.failures,
        opens(&gw.gateway)
    );
    assert!(
        snapshot.failures == 0 && snapshot.state == State::Closed,
        "the clients' slow uploads were counted as the upstream's failures: {} failures, \
         cluster {:?}, opens {:?}; the answers: {answers:?}; the next request got {next}",
        snapshot.failures,
        snapshot.state,
        opens(&gw.gateway)
    );
    assert!(
        answers.iter().all(|a| a.starts_with("HTTP/1.1 200")),
        "the endpoint answers 700 ms after the body, inside the 2 s attempt timeout, but the \
         clients got {answers:?}"
    );
    let _ = stop.send(true);
}

#[test]
#[ignore = "known defect, left for a later issue: no per-upstream connection cap, so 1,000 clients \
            can make the gateway open more connections than the upstream accepts (1,024 here), \
            and the refused connects count as the upstream's"]
fn a_thousand_keep_alive_clients_open_nothing_and_get_no_5xx_from_a_healthy_upstream() {
    let test = "a_thousand_keep_alive_clients_open_nothing_and_get_no_5xx_from_a_healthy_upstream";
    if !wrk_or_skip(test) {
        return;
    }
    let scratch = Scratch::new("c1000");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (up, listen, admin) = (
        common::dead_port(),
        common::dead_port(),
        common::dead_port(),
    );
    let upstream_log = scratch.0.join("upstream.log");
    let _upstream = upstream_process(up, Some(&upstream_log));
    // The control: the upstream alone serves the same 1,000 keep-alive clients.
    let direct = wrk(
        &["-t2", "-c1000", "-d5s"],
        &format!("http://127.0.0.1:{up}/direct?delay=100ms"),
    );
    eprintln!(
        "direct: {} requests, {} non-2xx",
        direct.requests, direct.non_2xx
    );
    assert_eq!(
        direct.non_2xx, 0,
        "control: the upstream alone answered non-2xx, so this machine cannot run the test: {}",
        direct.report
    );
    let file = scratch.0.join("gw.toml");
    // The shipped defaults: no [breakers] section, access log on.
    std::fs::write(
        &file,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:{listen}\"\nadmin = \"127.0.0.1:{admin}\"\n\
             [[routes]]\nprefix = \"/\"\ncluster = \"svc\"\n\
             [clusters.svc]\nupstreams = [\"http://127.0.0.1:{up}\"]\n"
        ),
    )
    .unwrap();
    let gateway_log = scratch.0.join("gateway.log");
    let _gateway = Proc(
        Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg("--config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&gateway_log).unwrap()))
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(Instant::now() < deadline, "the gateway listens");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The control's connections are gone before the gateway's are counted.
    let deadline = Instant::now() + Duration::from_secs(10);
    while established_on(up) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let sequential = runtime.block_on(async {
        let client = client();
        let mut statuses = Vec::new();
        for n in 0..300 {
            statuses.push(status(&client, &format!("http://127.0.0.1:{listen}/seq/{n}")).await);
        }
        statuses
    });
    assert!(sequential.iter().all(|s| *s == 200), "{sequential:?}");
    // Up to four bursts, each a fresh ramp-up of 1,000 connections (the excess upstream
    // connections are made while a ramp-up's requests wait for theirs); the first after which
    // the gateway's access log holds a non-2xx ends the run (answers written after wrk's
    // run ended count too: the breaker counted them, only wrk did not see them).
    let (mut through, mut peak, mut bursts) = (None, 0, 0);
    for _ in 0..4 {
        bursts += 1;
        let (done, sampler) = peak_connections(up);
        let run = wrk(
            &["-t2", "-c1000", "-d3s"],
            &format!("http://127.0.0.1:{listen}/burst?delay=100ms"),
        );
        done.store(true, Ordering::SeqCst);
        let burst_peak = sampler.join().unwrap();
        peak = peak.max(burst_peak);
        let bad = run.non_2xx > 0 || !non_2xx_in(&gateway_log, "path=/burst").is_empty();
        through = Some(run);
        if bad {
            break;
        }
    }
    let through = through.expect("a burst ran");
    let view: serde_json::Value = runtime.block_on(async {
        let body = common::get(&format!("http://127.0.0.1:{admin}/breakers"))
            .await
            .body;
        serde_json::from_str(&body).unwrap()
    });
    let opened: Vec<String> = view["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["to"] == "open")
        .map(|t| format!("{} ({})", t["breaker"], t["reason"]))
        .collect();
    let non_2xx = non_2xx_in(&gateway_log, "path=/burst");
    let upstream_said = std::fs::read_to_string(&upstream_log).unwrap_or_default();
    let limit_lines = upstream_said
        .lines()
        .filter(|l| l.contains("limit=\"max_connections\""))
        .count();
    eprintln!(
        "through the gateway, burst {bursts} of at most 4: {} requests, {} non-2xx \
         ({non_2xx:?} in all), opens {opened:?}; peak upstream connections {peak} for 1,000 \
         clients; the upstream logged its max-connections limit {limit_lines} times",
        through.requests, through.non_2xx
    );
    assert!(
        non_2xx.is_empty() && opened.is_empty(),
        "the upstream served 1,000 keep-alive clients directly with 0 non-2xx ({} requests); \
         through the gateway, on its shipped defaults, the access log holds non-2xx answers \
         {non_2xx:?} after {bursts} bursts (wrk saw {} of the last one's {}), opens \
         {opened:?}; the \
         gateway held up to {peak} upstream connections for its 1,000 clients, and the \
         upstream logged its own max-connections limit (1,024) {limit_lines} times\n{}",
        direct.requests,
        through.non_2xx,
        through.requests,
        through.report
    );
}

/// GETs `/r/<n>` at 20 req/s on tasks of their own until `stop`; the statuses when it ends.
fn light_load(proxy: SocketAddr, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<Vec<u16>> {
    tokio::spawn(async move {
        let client = client();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut answers = Vec::new();
        // Bounded: at most 10 minutes of ticks.
        for n in 0..12_000u64 {
            if *stop.borrow() {
                break;
            }
            tick.tick().await;
            let client = client.clone();
            answers.push(tokio::spawn(async move {
                status(&client, &format!("http://{proxy}/r/{n}")).await
            }));
        }
        let mut statuses = Vec::new();
        for a in answers {
            statuses.push(a.await.unwrap_or(0));
        }
        statuses
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_upstream_cluster_restarted_after_minutes_is_readmitted_within_20_s() {
    let port = common::dead_port();
    let mut host = Some(upstream_process(port, None));
    let clock = Warp::new();
    let gw = start_gateway(&shipped("single", &[port], ""), Some(clock.clone())).await;
    // One upstream: no host breakers, the cluster breaker is its host's.
    let breaker = gw.gateway.registry().get("single").unwrap();
    let (stop, rx) = watch::channel(false);
    let load = light_load(gw.proxy, rx);
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(host.take());
    assert!(
        common::eventually(Duration::from_secs(10), || breaker.state() == State::Open).await,
        "the killed host's cluster opens"
    );
    // Minutes of downtime on the breakers' clock: each break runs out at once and the probe
    // of the dead host fails, until six opens in a row.
    common::skip_breaks_until_grown(&clock, &breaker).await;
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Open);
    host = Some(upstream_process(port, None));
    let back = Instant::now();
    let closed =
        common::eventually(Duration::from_secs(20), || breaker.state() == State::Closed).await;
    let took = back.elapsed();
    let _ = stop.send(true);
    let statuses = load.await.unwrap();
    eprintln!(
        "readmitted: {closed} after {took:?} (the break being served when it came back: {:?}, \
         {} opens in a row); {} requests, {} not 200",
        snapshot.current_break,
        snapshot.consecutive_opens,
        statuses.len(),
        statuses.iter().filter(|s| **s != 200).count()
    );
    assert!(
        closed,
        "the restarted host of a single-upstream cluster is still refused {took:?} after it \
         came back: the break being served was {:?} ({} opens in a row), {:?} of it left; \
         {} of {} requests were not 200",
        snapshot.current_break,
        snapshot.consecutive_opens,
        breaker.break_remaining(),
        statuses.iter().filter(|s| **s != 200).count(),
        statuses.len()
    );
    drop(host);
}

/// Sends `GET path` on a fresh connection and closes it (a FIN: nothing was left unread)
/// after `after`.
async fn ask_and_close(proxy: SocketAddr, path: String, after: Duration) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(after).await;
    let _ = stream.shutdown().await;
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the docs now say what holds: max-detached-attempts bounds attempts detached \
            mid-answer; clients that close before their answer's head are not seen leaving \
            (half-close), and max-connections bounds their requests; a bound for them is left \
            for a later issue"]
async fn a_flood_of_clients_that_close_before_their_answer_costs_the_upstream_at_most_max_detached_attempts()
 {
    let (stop, _) = watch::channel(false);
    let up = Upstream::new("leavers");
    let addr = common::serve_upstream(&up, &stop).await;
    let gw = start_gateway(&shipped("leavers", &[addr.port()], ""), None).await;
    let client = client();
    for n in 0..10 {
        assert_eq!(
            status(&client, &format!("http://{}/warm/{n}", gw.proxy)).await,
            200
        );
    }
    let (started, finished, cancelled) = (up.started(), up.finished(), up.cancelled());
    // 300 clients ask a healthy endpoint that answers in 1.5 s, and close their connection
    // after 100 ms, without reading: none of them will read an answer.
    let leavers: Vec<_> = (0..300)
        .map(|n| {
            tokio::spawn(ask_and_close(
                gw.proxy,
                format!("/leave/{n}?delay=1500ms"),
                Duration::from_millis(100),
            ))
        })
        .collect();
    for leaver in leavers {
        leaver.await.unwrap();
    }
    // How many requests the upstream works on at once for clients that are gone, sampled
    // until the first answers are due (1.5 s after the first client asked).
    let mut peak = 0;
    for _ in 0..10 {
        let working =
            (up.started() - started) - (up.finished() - finished) - (up.cancelled() - cancelled);
        peak = peak.max(working);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        common::eventually(Duration::from_secs(5), || up.started()
            == up.finished() + up.cancelled())
        .await,
        "every request ends one way or the other"
    );
    eprintln!(
        "the upstream worked on {peak} requests at once for 300 clients that had closed their \
         connections (max-detached-attempts = 64); finished {}, cancelled {}",
        up.finished() - finished,
        up.cancelled() - cancelled
    );
    assert!(
        peak <= 64,
        "the upstream worked on {peak} requests at once for clients that had all closed their \
         connections; max-detached-attempts (64) is documented to bound that work (\"a flood \
         of clients that leave cannot make a struggling upstream do more than 64 such \
         requests at once\")"
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_host_s_share_is_spread_evenly_over_the_healthy_hosts() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        common::serve_upstream(&a, &stop).await,
        common::serve_upstream(&b, &stop).await,
    );
    let dead = common::dead_port();
    let gw = start_gateway(
        &shipped("spread", &[dead, a_addr.port(), b_addr.port()], ""),
        None,
    )
    .await;
    let (_, dead_host) = gw
        .gateway
        .find_breaker(&format!("spread/127.0.0.1:{dead}"))
        .unwrap();
    let client = client();
    for n in 0..60 {
        if dead_host.state() == State::Open {
            break;
        }
        status(&client, &format!("http://{}/eject/{n}", gw.proxy)).await;
    }
    assert_eq!(dead_host.state(), State::Open, "the dead host is ejected");
    let (a0, b0) = (a.started(), b.started());
    let mut statuses = Vec::new();
    for n in 0..300 {
        statuses.push(status(&client, &format!("http://{}/spread/{n}", gw.proxy)).await);
    }
    let (to_a, to_b) = (a.started() - a0, b.started() - b0);
    eprintln!("300 requests with one host of three ejected: {to_a} to a, {to_b} to b");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(dead_host.state(), State::Open, "still ejected throughout");
    assert!(
        to_a.abs_diff(to_b) <= 30,
        "the ejected host's share went to the host after it: {to_a} requests to a, {to_b} to \
         b (DESIGN 8: an ejected host's share spread evenly over the healthy hosts)"
    );
    let _ = stop.send(true);
}
