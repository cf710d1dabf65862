//! A review of issue #28's gateway work as an SRE would load it: the shipped defaults (no `[breakers]` section) plus, where a test says so, a `health-check` table, on real loopback sockets against `cutout-gateway upstream` processes and the built-in test upstream; the default run holds the promises that do not hold today, the ignored tests the attacks that held.
//!
//! Every test runs what an operator gets: no `[breakers]` section, the shipped
//! `attempt-timeout` (2 s), retry budget (20 %, at least 3), ejection cap (50 %) and panic
//! threshold (50 %), unless it says which key it sets and why. All traffic goes to 127.0.0.1;
//! every loop is bounded in count and time.
//!
//! Failing today (the default run, about 20 s in debug):
//! - Four hosts, two neighbours in the upstream list dead and ejected (the default cap allows
//!   two of four): their shares are not spread evenly over the two healthy hosts. The host
//!   after the dead pair takes 7/12 of the traffic and the other 5/12 (280 against 200 of 480
//!   requests), where DESIGN §8 spreads an ejected host's share evenly.
//! - Every host of a three-host cluster killed (the cluster opens, rightly) and restarted, with
//!   health checks every second: all three pass their checks within about a second, but the
//!   cluster breaker's break (7.5–15 s, growing to 2 min) is served whole. A passing check ends
//!   only the host breakers' breaks, so clients are refused for the rest of the cluster's break
//!   after every host is back and passing (DESIGN §2 "Giving traffic back", acceptance 3's
//!   readmission within two check intervals).
//!
//! The attacks that held, each an ignored test asserting the promise it attacks (run them with
//! `cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1`,
//! about 3 minutes in debug; the `wrk` ones skip with one line without `wrk`, unless
//! `CUTOUT_REQUIRE_SERVICES=1`): one dead host of three beside two busy loops; SIGKILL
//! mid-request for GET, PUT, POST and DELETE; a host that accepts and hangs; a host whose
//! connects never complete; a host flapping every 2 s, with and without checks; a retry storm
//! at `wrk -c200` with two of three dead (upstream attempts counted); all three dead under load;
//! checks against a host that answers 200 past the timeout, 500, or closes; the check load; a
//! host back on its port while a retry is in flight; empty-bodied GETs after a reset; POST load
//! with one host dead; graceful rolling restarts; descriptors and memory across floods.

mod common;

use common::{
    BusyLoop, Proc, Wrk, WrkReport, access_lines_under, client, dead_port, field, five_xx,
    log_mark, opens, served, shipped, start_gateway, status, upstream_process, wrk_or_skip,
};

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cutout::State;
use cutout_gateway::upstream::Upstream;
use http::Method;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// `text` (a whole configuration) with a `health-check` table for `cluster`.
fn checked(text: &str, cluster: &str, keys: &str) -> String {
    format!("{text}\n[clusters.{cluster}.health-check]\n{keys}\n")
}

/// [`shipped`] with the access log on, as it ships (the helper turns it off).
fn logged(cluster: &str, ports: &[u16], gateway_extra: &str) -> String {
    shipped(cluster, ports, gateway_extra).replace("access-log = false", "access-log = true")
}

/// `N` different free ports.
fn distinct_ports<const N: usize>() -> [u16; N] {
    // Bounded: each try draws N ports the system had free; a clash is rare.
    for _ in 0..100 {
        let ports: [u16; N] = std::array::from_fn(|_| dead_port());
        let mut sorted = ports.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() == N {
            return ports;
        }
    }
    panic!("no {N} distinct free ports in 100 tries");
}

/// `cutout-gateway upstream` processes on `ports`.
fn upstreams(ports: &[u16]) -> Vec<Option<Proc>> {
    ports
        .iter()
        .map(|p| Some(upstream_process(*p, None)))
        .collect()
}

/// Held by each load test for its whole run: they share the machine's two cores with wrk.
static LOAD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How many of `lines` were retried on another host.
fn retried(lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| field(l, "retried_from=") != "-")
        .count()
}

/// wrk's latency line (`Latency avg stdev max +/-`) and socket errors, as it wrote them.
fn wrk_detail(report: &WrkReport) -> String {
    report
        .report
        .lines()
        .filter(|l| l.contains("Latency  ") || l.contains("Socket errors"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A wrk script for `method` (a 1,000-byte body unless it is a GET) in a scratch directory,
/// removed on drop.
struct Script(std::path::PathBuf);

impl Script {
    fn new(name: &str, method: &str) -> Script {
        let dir = std::env::temp_dir().join(format!("cutout-sre28-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = if method == "GET" {
            "wrk.method = \"GET\"\n".to_owned()
        } else {
            format!(
                "wrk.method = \"{method}\"\nwrk.body = string.rep(\"p\", 1000)\n\
                 wrk.headers[\"Content-Type\"] = \"text/plain\"\n"
            )
        };
        std::fs::write(dir.join("run.lua"), text).unwrap();
        Script(dir)
    }

    fn path(&self) -> String {
        self.0.join("run.lua").to_string_lossy().into_owned()
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The Prometheus exposition of the admin listener at `admin`.
async fn exposition(admin: SocketAddr) -> String {
    common::get(&format!("http://{admin}/metrics")).await.body
}

/// The sum of every series of `name` whose labels hold `cluster="<cluster>"` (and `extra`).
fn sum_of(text: &str, name: &str, cluster: &str, extra: &str) -> f64 {
    let label = format!("cluster=\"{cluster}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&label) && l.contains(extra))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// GETs `url/<n>` every 20 ms until `stop` (at most 3,000), recording when each answer came
/// and its status.
fn light_traffic(
    url: String,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Vec<(Instant, u16)>> {
    tokio::spawn(async move {
        let client = client();
        let mut out = Vec::new();
        for n in 0..3000 {
            if *stop.borrow() {
                break;
            }
            let s = status(&client, &format!("{url}/{n}")).await;
            out.push((Instant::now(), s));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        out
    })
}

/// Drives sequential GETs through `proxy` until every breaker of `hosts` is open (at most
/// `limit`); whether they all are.
async fn eject_all(proxy: SocketAddr, hosts: &[cutout::Breaker], limit: usize) -> bool {
    let client = client();
    for n in 0..limit {
        if hosts.iter().all(|h| h.state() == State::Open) {
            return true;
        }
        status(&client, &format!("http://{proxy}/eject/{n}")).await;
    }
    hosts.iter().all(|h| h.state() == State::Open)
}

// ---- failing today ----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ejected_neighbours_of_four_hosts_spread_their_shares_evenly_over_the_healthy_two() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        common::serve_upstream(&a, &stop).await,
        common::serve_upstream(&b, &stop).await,
    );
    // The two dead hosts are neighbours in the list; the default cap (50 % of 4) ejects both.
    let dead = distinct_ports::<2>();
    let gw = start_gateway(
        &shipped(
            "four",
            &[dead[0], dead[1], a_addr.port(), b_addr.port()],
            "",
        ),
        None,
    )
    .await;
    let hosts: Vec<cutout::Breaker> = dead
        .iter()
        .map(|p| {
            gw.gateway
                .find_breaker(&format!("four/127.0.0.1:{p}"))
                .unwrap()
                .1
        })
        .collect();
    assert!(
        eject_all(gw.proxy, &hosts, 100).await,
        "both dead hosts are ejected: {:?}",
        opens(&gw.gateway)
    );
    let (a0, b0) = (a.started(), b.started());
    let client = client();
    let mut statuses = Vec::new();
    for n in 0..480 {
        statuses.push(status(&client, &format!("http://{}/spread/{n}", gw.proxy)).await);
    }
    let (to_a, to_b) = (a.started() - a0, b.started() - b0);
    let spread = to_a.abs_diff(to_b) as f64 / to_a.max(to_b).max(1) as f64;
    eprintln!(
        "480 requests with two neighbouring hosts of four ejected: {to_a} to a (after the dead \
         pair), {to_b} to b ({:.1} % apart); non-200 {}; dead hosts {:?}",
        spread * 100.0,
        statuses.iter().filter(|s| **s != 200).count(),
        hosts.iter().map(|h| h.state()).collect::<Vec<_>>()
    );
    assert!(
        statuses.iter().all(|s| *s == 200),
        "the dead hosts' probes are retried: {statuses:?}"
    );
    assert!(
        spread <= 0.10,
        "two ejected hosts' shares went mostly to the host after them: {to_a} requests to a, \
         {to_b} to b ({:.1} % apart; DESIGN 8: an ejected host's share spread evenly over the \
         healthy hosts)",
        spread * 100.0
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_every_host_died_and_came_back_passing_health_checks_give_traffic_back_within_two_intervals()
 {
    let interval = Duration::from_secs(1);
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let text = checked(
        &shipped("whole", &ports, ""),
        "whole",
        "path = \"/healthz\"\ninterval = \"1s\"",
    );
    let gw = start_gateway(&text, None).await;
    let cluster = gw.gateway.registry().get("whole").unwrap();
    let health = gw.gateway.clusters()["whole"].shared().health.clone();
    let (stop, rx) = watch::channel(false);
    let traffic = light_traffic(format!("http://{}/w", gw.proxy), rx);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Every host dies: the cluster opens (rightly: no host serves).
    for p in procs.iter_mut() {
        *p = None;
    }
    assert!(
        common::eventually(Duration::from_secs(10), || cluster.state() == State::Open).await,
        "every host dead: the cluster opens: {:?}",
        opens(&gw.gateway)
    );
    let remaining = cluster.break_remaining().unwrap_or_default();
    for (n, port) in ports.iter().enumerate() {
        procs[n] = Some(upstream_process(*port, None));
    }
    let back = Instant::now();
    let mut all_passed: Option<Duration> = None;
    // Bounded: at most 20 s.
    while (cluster.state() != State::Closed || all_passed.is_none())
        && back.elapsed() < Duration::from_secs(20)
    {
        if all_passed.is_none()
            && health.iter().all(|h| {
                h.last()
                    .is_some_and(|r| r.passed && r.at_unix_ms > unix_ms_at(back) && r.in_a_row >= 1)
            })
        {
            all_passed = Some(back.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(true);
    let answers = traffic.await.unwrap();
    let first_ok = answers
        .iter()
        .find(|(at, s)| *at > back && *s == 200)
        .map(|(at, _)| *at - back);
    let refused = answers
        .iter()
        .filter(|(at, s)| *at > back && *s == 503)
        .count();
    let half_open: Vec<_> = gw
        .gateway
        .transitions()
        .into_iter()
        .filter(|t| t.to == "half_open")
        .map(|t| format!("{} ({})", t.breaker, t.reason.unwrap_or("-")))
        .collect();
    eprintln!(
        "every host restarted with {remaining:?} of the cluster's break left: all three passed \
         their checks {all_passed:?} later, the first 200 came {first_ok:?} later, {refused} \
         answers 503 meanwhile; half-openings {half_open:?}; opens {:?}",
        opens(&gw.gateway)
    );
    assert!(
        all_passed.is_some_and(|t| t <= 2 * interval),
        "every restarted host passes its check within two intervals: {all_passed:?}"
    );
    assert!(
        first_ok.is_some_and(|t| t <= 2 * interval + Duration::from_millis(500)),
        "every host back and passing its health check within {all_passed:?}, yet the cluster \
         refused for {first_ok:?} ({refused} answers 503, {remaining:?} of its break left at the \
         restart): a passing check ends only the host breakers' breaks, never the cluster's \
         (DESIGN 2: a passing active health check ends an open breaker's break early)"
    );
}

/// `at` in milliseconds since the Unix epoch (for a check's `at_unix_ms`).
fn unix_ms_at(at: Instant) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now.saturating_sub(at.elapsed())).as_millis() as u64
}

// ---- attacks that held ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 20 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn one_dead_host_of_three_beside_two_busy_loops_costs_no_5xx_after_its_first_second() {
    if !wrk_or_skip(
        "one_dead_host_of_three_beside_two_busy_loops_costs_no_5xx_after_its_first_second",
    ) {
        return;
    }
    let _one = LOAD.lock().await;
    common::log();
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let gw = start_gateway(&logged("busy", &ports, ""), None).await;
    let c = client();
    for n in 0..30 {
        assert_eq!(
            status(&c, &format!("http://{}/warm/{n}", gw.proxy)).await,
            200
        );
    }
    let _busy = [BusyLoop::start(), BusyLoop::start()];
    // 18 s: the dead host's break (7.5-15 s) runs out during the run, so its probe is in it.
    let wrk = Wrk::start(&["-t1", "-c4", "-d18s"], &format!("http://{}/a", gw.proxy));
    tokio::time::sleep(Duration::from_secs(1)).await;
    procs[0] = None;
    let killed = log_mark();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first_second = log_mark();
    let (b0, c0) = (served(ports[1]).await, served(ports[2]).await);
    let report = wrk.finish().await;
    let (b1, c1) = (served(ports[1]).await, served(ports[2]).await);
    let early = five_xx(&access_lines_under("/a", killed, Some(first_second)));
    let after = access_lines_under("/a", first_second, None);
    let bad = five_xx(&after);
    let (to_b, to_c) = (b1 - b0, c1 - c0);
    let spread = to_b.abs_diff(to_c) as f64 / to_b.max(to_c).max(1) as f64;
    eprintln!(
        "one dead of three beside two busy loops: wrk {} requests, {} non-2xx, {:.0} req/s ({}); \
         5xx in the first second {early:?}; after it {bad:?} of {} answers ({} retried); \
         survivors {to_b} and {to_c} ({:.1} % apart); opens {:?}",
        report.requests,
        report.non_2xx,
        report.rps,
        wrk_detail(&report),
        after.len(),
        retried(&after),
        spread * 100.0,
        opens(&gw.gateway)
    );
    assert!(bad.is_empty(), "5xx after the first second: {bad:?}");
    assert!(spread <= 0.10, "survivors {to_b} and {to_c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (5 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_host_killed_mid_request_has_its_bodiless_get_retried_and_no_sent_body_sent_twice() {
    let _one = LOAD.lock().await;
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let gw = start_gateway(&shipped("kill", &ports, ""), None).await;
    let body = "b".repeat(4000);
    for method in [Method::GET, Method::PUT, Method::POST, Method::DELETE] {
        let with_body = method != Method::GET;
        let before = served(ports[1]).await + served(ports[2]).await;
        // Three at once, 20 ms apart: one to each host first (round-robin); each takes 600 ms.
        let mut tasks = Vec::new();
        for n in 0..3 {
            let url = format!("http://{}/k/{n}?delay=600ms", gw.proxy);
            let (m, b) = (
                method.clone(),
                if with_body {
                    body.clone()
                } else {
                    String::new()
                },
            );
            tasks.push(tokio::spawn(async move {
                let reply = common::send(m, &url, &[], &b).await;
                let whole = reply.body.contains(&format!("\"body_bytes\":{}", b.len()));
                (reply.status.as_u16(), whole)
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        // SIGKILL while its request is in flight (the body already sent).
        procs[0] = None;
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.unwrap());
        }
        answers.sort_unstable();
        let others = served(ports[1]).await + served(ports[2]).await - before;
        eprintln!(
            "{method} (body {with_body}) in flight at a SIGKILL: answers {answers:?}; the other two hosts received {others}"
        );
        if with_body {
            assert_eq!(
                answers,
                [(200, true), (200, true), (502, false)],
                "{method}: a request whose body was sent is never sent again"
            );
            assert_eq!(others, 2, "{method}: no request reached two hosts");
        } else {
            assert_eq!(
                answers,
                [(200, true), (200, true), (200, true)],
                "a bodiless GET reset mid-request is retried"
            );
            assert_eq!(others, 3, "the killed host's GET went to another host once");
        }
        procs[0] = Some(upstream_process(ports[0], None));
        let c = client();
        for n in 0..6 {
            status(&c, &format!("http://{}/again/{n}", gw.proxy)).await;
        }
    }
}

/// A raw host on 127.0.0.1 that accepts, reads whatever comes and never answers; counts the
/// connections it accepted and those still open (at most 2,000, each held at most 60 s).
struct Hanger {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hanger {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hanger {
    async fn start() -> Hanger {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let (acc, op) = (Arc::clone(&accepted), Arc::clone(&open));
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            for _ in 0..2000 {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                // SeqCst: test counters.
                acc.fetch_add(1, Ordering::SeqCst);
                op.fetch_add(1, Ordering::SeqCst);
                let op = Arc::clone(&op);
                conns.spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = tokio::time::timeout(Duration::from_secs(60), async {
                        while let Ok(n) = conn.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                        }
                    })
                    .await;
                    op.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Hanger {
            addr,
            accepted,
            open,
            task,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 26 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_host_that_accepts_and_hangs_is_ejected_its_504s_are_timeouts_and_no_connection_is_left_open()
 {
    if !wrk_or_skip(
        "a_host_that_accepts_and_hangs_is_ejected_its_504s_are_timeouts_and_no_connection_is_left_open",
    ) {
        return;
    }
    let _one = LOAD.lock().await;
    common::log();
    let hang = Hanger::start().await;
    let ports = distinct_ports::<2>();
    let _procs = upstreams(&ports);
    // With checks: they fail on the hanging host (timeout) and so never end its break.
    let text = checked(
        &logged("hang", &[hang.addr.port(), ports[0], ports[1]], ""),
        "hang",
        "path = \"/healthz\"\ninterval = \"1s\"",
    );
    let gw = start_gateway(&text, None).await;
    let mark = log_mark();
    // 24 s: at least one of its 7.5-15 s breaks runs out, and its probe is a client's request.
    let report = Wrk::start(&["-t1", "-c4", "-d24s"], &format!("http://{}/h", gw.proxy))
        .finish()
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lines = access_lines_under("/h", mark, None);
    let bad = five_xx(&lines);
    let (_, host) = gw
        .gateway
        .find_breaker(&format!("hang/{}", hang.addr))
        .unwrap();
    let check = gw.gateway.clusters()["hang"].shared().health[0].last();
    eprintln!(
        "a hanging host of three, checks every 1 s: wrk {} requests, {} non-2xx, {:.0} req/s \
         ({}); 5xx {bad:?}; the hanging host accepted {} connections, {} still open; its breaker \
         {:?}, opens {:?}; its last check {check:?}",
        report.requests,
        report.non_2xx,
        report.rps,
        wrk_detail(&report),
        hang.accepted.load(Ordering::SeqCst),
        hang.open.load(Ordering::SeqCst),
        host.state(),
        opens(&gw.gateway)
    );
    assert!(
        bad.keys().all(|k| k == "504 timeout"),
        "a timeout is never retried, its answer a 504: {bad:?}"
    );
    assert!(
        opens(&gw.gateway)
            .iter()
            .all(|o| o.starts_with(&format!("hang/{}", hang.addr))),
        "only the hanging host opened: {:?}",
        opens(&gw.gateway)
    );
    // A check (timeout 1 s, every 1 s) is nearly always in flight: at most its connection.
    assert!(
        hang.open.load(Ordering::SeqCst) <= 1,
        "every timed-out attempt's connection was closed: {} of {} still open",
        hang.open.load(Ordering::SeqCst),
        hang.accepted.load(Ordering::SeqCst)
    );
}

/// A listener on 127.0.0.1 that never accepts, its accept queue filled, so the kernel drops
/// further SYNs and a connect to it never completes (an overloaded or partitioned host); with
/// the connections that fill it.
async fn blackhole() -> (
    tokio::net::TcpListener,
    Vec<std::net::TcpStream>,
    SocketAddr,
) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fill = Vec::new();
    for _ in 0..8 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(stream) => fill.push(stream),
            Err(_) => return (listener, fill, addr),
        }
    }
    panic!("the accept queue of a listen(0) socket did not fill with 8 connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (10 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_get_whose_connect_never_completes_is_retried_on_another_host() {
    let (stop, _) = watch::channel(false);
    let (_listener, _fill, hole) = blackhole().await;
    let good = Upstream::new("good");
    let good_addr = common::serve_upstream(&good, &stop).await;
    let gw = start_gateway(&shipped("hole", &[hole.port(), good_addr.port()], ""), None).await;
    let mut answers = Vec::new();
    for n in 0..10 {
        let started = Instant::now();
        let reply = common::get(&format!("http://{}/g/{n}", gw.proxy)).await;
        answers.push((reply.status.as_u16(), started.elapsed()));
    }
    let (_, host) = gw.gateway.find_breaker(&format!("hole/{hole}")).unwrap();
    eprintln!(
        "ten GETs, round-robin over a host whose connects never complete and a good one: \
         {answers:?}; the good host served {}; the other host {:?}",
        good.started(),
        host.state()
    );
    assert!(
        answers.iter().all(|(s, _)| *s == 200),
        "no byte reached the host whose connect never completed: retried: {answers:?}"
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 36 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_host_flapping_every_two_seconds_costs_no_client_a_5xx() {
    if !wrk_or_skip("a_host_flapping_every_two_seconds_costs_no_client_a_5xx") {
        return;
    }
    let _one = LOAD.lock().await;
    common::log();
    for checks in [false, true] {
        let name = if checks { "flapchecked" } else { "flap" };
        let ports = distinct_ports::<3>();
        let mut procs = upstreams(&ports);
        let mut text = logged(name, &ports, "");
        if checks {
            text = checked(&text, name, "path = \"/healthz\"\ninterval = \"1s\"");
        }
        let gw = start_gateway(&text, None).await;
        let path = format!("/{name}");
        let wrk = Wrk::start(
            &["-t1", "-c4", "-d17s"],
            &format!("http://{}{path}", gw.proxy),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mark = log_mark();
        // Down 2 s, up 2 s, four times (SIGKILL, then a new process on the same port).
        for _ in 0..4 {
            procs[0] = None;
            tokio::time::sleep(Duration::from_secs(2)).await;
            procs[0] = Some(upstream_process(ports[0], None));
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let report = wrk.finish().await;
        let lines = access_lines_under(&path, mark, None);
        let flapper = format!("127.0.0.1:{}", ports[0]);
        let by_flapper = lines
            .iter()
            .filter(|l| field(l, "host=") == flapper)
            .count();
        let bad = five_xx(&lines);
        eprintln!(
            "a host flapping every 2 s (checks {checks}): wrk {} requests, {} non-2xx ({}); the \
             log {} answers, 5xx {bad:?}, {} retried, {by_flapper} served by the flapping host; \
             opens {:?}",
            report.requests,
            report.non_2xx,
            wrk_detail(&report),
            lines.len(),
            retried(&lines),
            opens(&gw.gateway)
        );
        assert!(bad.is_empty(), "checks {checks}: {bad:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 10 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_retry_storm_at_c200_with_two_of_three_dead_stays_within_the_budget() {
    if !wrk_or_skip("a_retry_storm_at_c200_with_two_of_three_dead_stays_within_the_budget") {
        return;
    }
    let _one = LOAD.lock().await;
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let gw = start_gateway(&shipped("storm", &ports, ""), None).await;
    let c = client();
    for n in 0..30 {
        assert_eq!(
            status(&c, &format!("http://{}/warm/{n}", gw.proxy)).await,
            200
        );
    }
    procs[1] = None;
    procs[2] = None;
    for n in 0..30 {
        status(&c, &format!("http://{}/eject/{n}", gw.proxy)).await;
    }
    let budget = Arc::clone(
        gw.gateway.clusters()["storm"]
            .shared()
            .retry
            .as_ref()
            .unwrap(),
    );
    let read = |text: &str| {
        (
            sum_of(text, "cutout_gateway_requests_total", "storm", ""),
            sum_of(text, "cutout_gateway_retries_total", "storm", "\"retried\""),
            sum_of(
                text,
                "cutout_gateway_retries_total",
                "storm",
                "\"over_budget\"",
            ),
            ports.map(|p| {
                sum_of(
                    text,
                    "cutout_gateway_upstream_requests_total",
                    "storm",
                    &format!("host=\"127.0.0.1:{p}\""),
                )
            }),
        )
    };
    let before = read(&exposition(gw.admin).await);
    let healthy0 = served(ports[0]).await;
    let (done, mut rx) = watch::channel(false);
    let sampler = {
        let budget = Arc::clone(&budget);
        tokio::spawn(async move {
            // (peak in flight, peak over the limit the budget gives at that active count),
            // while wrk runs at full concurrency (not its last second, when its connections
            // close and the active count falls under the retries still in flight).
            let (mut peak, mut over, mut samples) = (0usize, 0isize, 0u64);
            let window = Instant::now() + Duration::from_secs(7);
            while !*rx.borrow_and_update() && samples < 100_000 && Instant::now() < window {
                let (retrying, active) = (budget.retrying(), budget.active());
                peak = peak.max(retrying);
                over = over.max(retrying as isize - (active * 20 / 100).max(3) as isize);
                samples += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (peak, over, samples)
        })
    };
    let report = Wrk::start(&["-t2", "-c200", "-d8s"], &format!("http://{}/s", gw.proxy))
        .finish()
        .await;
    let _ = done.send(true);
    let (peak, over, samples) = sampler.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = read(&exposition(gw.admin).await);
    let healthy = served(ports[0]).await - healthy0;
    let requests = after.0 - before.0;
    let (retries, over_budget) = (after.1 - before.1, after.2 - before.2);
    let per_host: Vec<f64> = (0..3).map(|n| after.3[n] - before.3[n]).collect();
    let attempts: f64 = per_host.iter().sum();
    let cluster = gw.gateway.registry().get("storm").unwrap();
    eprintln!(
        "wrk -t2 -c200 -d8s, two of three dead: wrk {} requests, {} non-2xx, {:.0} req/s ({}); \
         the gateway counted {requests} requests, {attempts} upstream attempts ({:.2} per \
         request: {per_host:?} by host, healthy first), {retries} retries ({:.1} % of the \
         requests), {over_budget} over budget; the healthy host received {healthy}; retries in \
         flight at most {peak}, at most {over} above the limit of the moment ({samples} \
         samples over its first 7 s); cluster {:?}, opens {:?}",
        report.requests,
        report.non_2xx,
        report.rps,
        wrk_detail(&report),
        attempts / requests.max(1.0),
        100.0 * retries / requests.max(1.0),
        cluster.state(),
        opens(&gw.gateway)
    );
    assert_eq!(cluster.state(), State::Closed, "{:?}", opens(&gw.gateway));
    assert!(
        attempts <= 1.25 * requests,
        "{attempts} upstream attempts for {requests} requests"
    );
    assert!(
        retries <= 0.25 * requests,
        "{retries} retries of {requests}"
    );
    assert!(
        peak <= 200 * 20 / 100 + 3,
        "{peak} retries in flight at c200"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 8 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn all_three_hosts_dead_open_the_cluster_and_clients_get_quick_503s() {
    if !wrk_or_skip("all_three_hosts_dead_open_the_cluster_and_clients_get_quick_503s") {
        return;
    }
    let _one = LOAD.lock().await;
    common::log();
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let gw = start_gateway(&logged("dead", &ports, ""), None).await;
    let wrk = Wrk::start(&["-t1", "-c4", "-d8s"], &format!("http://{}/d", gw.proxy));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mark = log_mark();
    let killed = Instant::now();
    for p in procs.iter_mut() {
        *p = None;
    }
    let cluster = gw.gateway.registry().get("dead").unwrap();
    let opened =
        common::eventually(Duration::from_secs(5), || cluster.state() == State::Open).await;
    let took = killed.elapsed();
    let report = wrk.finish().await;
    let lines = access_lines_under("/d", mark, None);
    let slow: Vec<&String> = lines
        .iter()
        .filter(|l| {
            let d = field(l, "duration=");
            d.ends_with('s') && !d.ends_with("ms") && !d.ends_with("µs")
        })
        .collect();
    eprintln!(
        "all three dead: the cluster open {opened} {took:?} after the kill; wrk {} requests, {} \
         non-2xx ({}); after the kill {} answers, 5xx {:?}, {} of a second or more; opens {:?}",
        report.requests,
        report.non_2xx,
        wrk_detail(&report),
        lines.len(),
        five_xx(&lines),
        slow.len(),
        opens(&gw.gateway)
    );
    assert!(opened, "the cluster opened");
    assert!(slow.is_empty(), "answers that waited: {slow:?}");
    assert!(
        report.report.contains("timeout 0") || !report.report.contains("Socket errors"),
        "{}",
        report.report
    );
}

/// A host whose `/healthz` answers after `delay` (500 when made with `fail`, else 200) and
/// whose business answers 500 while `failing`; counts its checks and the most in flight at once.
struct CheckedHost {
    addr: SocketAddr,
    failing: Arc<AtomicBool>,
    checks: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// Decrements a count when dropped (a check's handler that ended, answered or cancelled).
struct Leaving(Arc<AtomicUsize>);

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn checked_host(stop: &watch::Sender<bool>, delay: Duration, fail: bool) -> CheckedHost {
    let failing = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    let (c, p, f) = (Arc::clone(&checks), Arc::clone(&peak), Arc::clone(&failing));
    let router = axum::Router::new()
        .route(
            "/healthz",
            axum::routing::get(move || {
                let (c, p, now) = (Arc::clone(&c), Arc::clone(&p), Arc::clone(&now));
                async move {
                    // SeqCst: test counters.
                    c.fetch_add(1, Ordering::SeqCst);
                    p.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    let _leaving = Leaving(now);
                    tokio::time::sleep(delay).await;
                    if fail {
                        http::StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        http::StatusCode::OK
                    }
                }
            }),
        )
        .fallback(move || {
            let f = Arc::clone(&f);
            async move {
                if f.load(Ordering::SeqCst) {
                    http::StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    http::StatusCode::OK
                }
            }
        });
    CheckedHost {
        addr: common::serve_router(router, stop).await,
        failing,
        checks,
        peak,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (7 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_check_answered_200_past_its_timeout_500_or_a_close_fails_and_ends_no_break() {
    let (stop, _) = watch::channel(false);
    let good = Upstream::new("good");
    let good_addr = common::serve_upstream(&good, &stop).await;
    let slow = checked_host(&stop, Duration::from_millis(700), false).await;
    let five = checked_host(&stop, Duration::ZERO, true).await;
    // Reads a head and closes, for business and checks alike.
    let close = common::raw_upstream(1000, |conn| async move { drop(conn) }).await;
    for (what, addr, failing, detail) in [
        (
            "200 after 700 ms",
            slow.addr,
            Some(&slow.failing),
            "timeout",
        ),
        ("500", five.addr, Some(&five.failing), "500"),
        (
            "close",
            close.addr,
            None,
            "connection closed before an answer",
        ),
    ] {
        let name = format!("check{}", addr.port());
        let text = checked(
            &shipped(&name, &[addr.port(), good_addr.port()], ""),
            &name,
            "path = \"/healthz\"\ninterval = \"400ms\"\ntimeout = \"300ms\"",
        );
        let gw = start_gateway(&text, None).await;
        let (_, host) = gw.gateway.find_breaker(&format!("{name}/{addr}")).unwrap();
        if let Some(f) = failing {
            f.store(true, Ordering::SeqCst);
        }
        assert!(eject_all(gw.proxy, std::slice::from_ref(&host), 40).await);
        // Its business is back; its check still fails.
        if let Some(f) = failing {
            f.store(false, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let last = gw.gateway.clusters()[&name].shared().health[0].last();
        let ended: Vec<_> = gw
            .gateway
            .transitions()
            .into_iter()
            .filter(|t| t.to == "half_open")
            .collect();
        eprintln!(
            "a check that gets {what}: after 2 s (5 checks) the ejected host is {:?}, {} \
             half-openings; its last check {last:?}",
            host.state(),
            ended.len()
        );
        let last = last.expect("a check ended");
        assert!(!last.passed && last.detail == detail, "{what}: {last:?}");
        assert!(last.took <= Duration::from_millis(400), "{what}: {last:?}");
        assert_eq!(
            host.state(),
            State::Open,
            "{what}: a failing check ends no break"
        );
        assert!(ended.is_empty(), "{what}");
    }
    eprintln!(
        "checks received: slow {} (at most {} at once), 500 {} (at most {} at once)",
        slow.checks.load(Ordering::SeqCst),
        slow.peak.load(Ordering::SeqCst),
        five.checks.load(Ordering::SeqCst),
        five.peak.load(Ordering::SeqCst)
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (4 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_host_gets_at_most_one_check_per_interval_and_one_at_a_time() {
    let (stop, _) = watch::channel(false);
    // Answers in 150 ms (passes), and after 400 ms (every check times out at 180 ms).
    let a = checked_host(&stop, Duration::from_millis(150), false).await;
    let b = checked_host(&stop, Duration::from_millis(400), false).await;
    let hang = Hanger::start().await;
    let text = checked(
        &shipped(
            "checkload",
            &[a.addr.port(), b.addr.port(), hang.addr.port()],
            "",
        ),
        "checkload",
        "path = \"/healthz\"\ninterval = \"200ms\"\ntimeout = \"180ms\"\njitter = \"0s\"",
    );
    let gw = start_gateway(&text, None).await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let secs = started.elapsed().as_secs_f64();
    let most = (secs / 0.2).ceil() as usize + 1;
    let (open, accepted) = (
        hang.open.load(Ordering::SeqCst),
        hang.accepted.load(Ordering::SeqCst),
    );
    drop(gw);
    let counts = [
        a.checks.load(Ordering::SeqCst),
        b.checks.load(Ordering::SeqCst),
        accepted,
    ];
    let peaks = [a.peak.load(Ordering::SeqCst), b.peak.load(Ordering::SeqCst)];
    eprintln!(
        "{secs:.2} s at a 200 ms interval: checks {counts:?} (a passes, b past its timeout, a \
         hanging host), at most {peaks:?} at once; the hanging host holds {open} connections"
    );
    assert!(counts.iter().all(|n| *n <= most), "{counts:?} > {most}");
    assert_eq!(peaks, [1, 1]);
    assert!(
        open <= 1,
        "{open} check connections left open of {accepted}"
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (2 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_host_back_on_its_port_while_a_retry_is_in_flight_gets_nothing_twice() {
    let (stop, _) = watch::channel(false);
    let port = dead_port();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&seen);
    // The other host answers in 800 ms.
    let slow = common::serve_router(
        axum::Router::new().fallback(move || {
            let s = Arc::clone(&s);
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(800)).await;
                "slow ok\n"
            }
        }),
        &stop,
    )
    .await;
    let gw = start_gateway(&shipped("back", &[port, slow.port()], ""), None).await;
    let url = format!("http://{}/r/0", gw.proxy);
    // The first request's first attempt goes to the dead host (round-robin from host 0).
    let request = tokio::spawn(async move {
        let started = Instant::now();
        let reply = common::get(&url).await;
        (reply.status.as_u16(), reply.body, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _back = upstream_process(port, None);
    let (code, body, took) = request.await.unwrap();
    let on_back = served(port).await;
    eprintln!(
        "the dead host came back 200 ms into a retry: answer {code} {body:?} after {took:?}; the \
         slow host received {}, the one back on its port {on_back}",
        seen.load(Ordering::SeqCst)
    );
    assert_eq!((code, body.as_str()), (200, "slow ok\n"));
    assert_eq!((seen.load(Ordering::SeqCst), on_back), (1, 0));
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (1 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn a_get_with_an_empty_body_of_any_framing_is_retried_after_a_reset() {
    let (stop, _) = watch::channel(false);
    let closer = common::raw_upstream(1000, |conn| async move { drop(conn) }).await;
    let good = Upstream::new("good");
    let good_addr = common::serve_upstream(&good, &stop).await;
    let gw = start_gateway(
        &shipped("framing", &[closer.addr.port(), good_addr.port()], ""),
        None,
    )
    .await;
    for (what, extra, body) in [
        ("no body", "", ""),
        ("Content-Length: 0", "Content-Length: 0\r\n", ""),
        (
            "an empty chunked body",
            "Transfer-Encoding: chunked\r\n",
            "0\r\n\r\n",
        ),
    ] {
        let mut answers = Vec::new();
        // Two in a row: one goes first to the host that closes.
        for n in 0..2 {
            let raw = format!(
                "GET /z/{n} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}\r\n{body}"
            );
            let out = common::raw(gw.proxy, raw.as_bytes()).await;
            answers.push(out.lines().next().unwrap_or("").to_owned());
        }
        eprintln!(
            "GET with {what}: {answers:?}; the closing host has seen {} connections",
            closer.accepted.load(Ordering::SeqCst)
        );
        assert!(
            answers.iter().all(|a| a == "HTTP/1.1 200 OK"),
            "{what}: {answers:?}"
        );
    }
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 9 s; METHOD=PUT for PUT): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn one_dead_host_of_three_under_post_load_costs_only_its_in_flight_posts() {
    if !wrk_or_skip("one_dead_host_of_three_under_post_load_costs_only_its_in_flight_posts") {
        return;
    }
    let _one = LOAD.lock().await;
    common::log();
    let method = std::env::var("METHOD").unwrap_or_else(|_| "POST".to_owned());
    let script = Script::new("post", &method);
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let gw = start_gateway(&logged("post", &ports, ""), None).await;
    let wrk = Wrk::start(
        &["-t1", "-c4", "-d9s", "-s", &script.path()],
        &format!("http://{}/p", gw.proxy),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = log_mark();
    let received0 = served(ports[1]).await + served(ports[2]).await;
    procs[0] = None;
    let killed = log_mark();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first_second = log_mark();
    let report = wrk.finish().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let received = served(ports[1]).await + served(ports[2]).await - received0;
    let early = five_xx(&access_lines_under("/p", killed, Some(first_second)));
    let after = access_lines_under("/p", first_second, None);
    let survivors = [
        format!("127.0.0.1:{}", ports[1]),
        format!("127.0.0.1:{}", ports[2]),
    ];
    let answered = access_lines_under("/p", before, None)
        .iter()
        .filter(|l| survivors.iter().any(|s| field(l, "host=") == s))
        .count() as u64;
    eprintln!(
        "{method} (1,000-byte bodies), one host of three killed: wrk {} requests, {} non-2xx \
         ({}); 5xx in the first second {early:?}, after it {:?} of {} answers ({} retried); the \
         survivors received {received} requests and answered {answered} (from just before the \
         kill); opens {:?}",
        report.requests,
        report.non_2xx,
        wrk_detail(&report),
        five_xx(&after),
        after.len(),
        retried(&after),
        opens(&gw.gateway)
    );
    assert!(five_xx(&after).is_empty(), "{:?}", five_xx(&after));
    assert!(
        early.values().sum::<usize>() <= 4,
        "at most the 4 in flight: {early:?}"
    );
    assert!(
        received <= answered + 4,
        "{received} received against {answered} answered: a body sent twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 16 s; METHOD=POST for POST): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn graceful_rolling_restarts_of_every_host_cost_no_bodiless_get_a_5xx() {
    if !wrk_or_skip("graceful_rolling_restarts_of_every_host_cost_no_bodiless_get_a_5xx") {
        return;
    }
    let _one = LOAD.lock().await;
    common::log();
    let method = std::env::var("METHOD").unwrap_or_else(|_| "GET".to_owned());
    let script = Script::new("roll", &method);
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let text = checked(
        &logged("roll", &ports, ""),
        "roll",
        "path = \"/healthz\"\ninterval = \"1s\"",
    );
    let gw = start_gateway(&text, None).await;
    let wrk = Wrk::start(
        &["-t1", "-c4", "-d16s", "-s", &script.path()],
        &format!("http://{}/p", gw.proxy),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mark = log_mark();
    // Six restarts, 2 s apart, each host twice: SIGTERM (in-flight requests finish), then a
    // new process on the same port.
    for round in 0..6 {
        let n = round % 3;
        let mut proc = procs[n].take().unwrap();
        let pid = proc.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc.0.try_wait().unwrap().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(proc);
        procs[n] = Some(upstream_process(ports[n], None));
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let report = wrk.finish().await;
    let lines = access_lines_under("/p", mark, None);
    let bad = five_xx(&lines);
    eprintln!(
        "{method}, six graceful rolling restarts: wrk {} requests, {} non-2xx ({}); the log {} \
         answers, 5xx {bad:?}, {} retried; opens {:?}",
        report.requests,
        report.non_2xx,
        wrk_detail(&report),
        lines.len(),
        retried(&lines),
        opens(&gw.gateway)
    );
    if method == "GET" {
        assert!(bad.is_empty(), "{bad:?}");
    } else {
        // A body sent on a connection the host closed is never sent again: at most the
        // requests in flight at each restart fail.
        assert!(bad.values().sum::<usize>() <= 6 * 4, "{bad:?}");
    }
}

/// The open descriptors and resident memory (kB) of process `pid`.
fn fds_and_rss(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    (fds, rss)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an attack that held (wrk, 30 s): cargo test -p cutout-gateway --test review_sre28 -- --ignored --nocapture --test-threads 1"]
async fn the_gateway_s_descriptors_and_memory_stay_flat_across_floods() {
    if !wrk_or_skip("the_gateway_s_descriptors_and_memory_stay_flat_across_floods") {
        return;
    }
    let _one = LOAD.lock().await;
    let ports = distinct_ports::<3>();
    let mut procs = upstreams(&ports);
    let [listen, admin] = distinct_ports::<2>();
    let dir = std::env::temp_dir().join(format!("cutout-sre28-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    let text = checked(
        &shipped("flood", &ports, "")
            .replace(
                "listen = \"127.0.0.1:0\"",
                &format!("listen = \"127.0.0.1:{listen}\""),
            )
            .replace(
                "admin = \"127.0.0.1:0\"",
                &format!("admin = \"127.0.0.1:{admin}\""),
            ),
        "flood",
        "path = \"/healthz\"\ninterval = \"1s\"",
    );
    std::fs::write(&file, text).unwrap();
    // The binary, as an operator runs it.
    let gateway = Proc(
        Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg("--config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = gateway.0.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(Instant::now() < deadline, "the gateway listens");
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = fds_and_rss(pid);
    // Two of three dead: every flood is a retry storm.
    procs[1] = None;
    procs[2] = None;
    let mut rounds = Vec::new();
    for round in 0..8 {
        let path = if round % 2 == 0 {
            "/f"
        } else {
            "/f?delay=50ms"
        };
        let run = Wrk::start(
            &["-t2", "-c200", "-d3s"],
            &format!("http://127.0.0.1:{listen}{path}"),
        )
        .finish()
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        rounds.push((run.requests, run.non_2xx, fds_and_rss(pid)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "the binary at rest: {} descriptors, {} kB resident; after each of 8 floods (wrk -t2 \
         -c200 -d3s, two of three hosts dead) and 1 s: (requests, non-2xx, (descriptors, kB)) \
         {rounds:?}",
        start.0, start.1
    );
    // Each client connection can hold one pooled upstream connection (200 here).
    let fds_bound = start.0 + 200 + 64;
    assert!(
        rounds.iter().all(|(_, _, (fds, _))| *fds <= fds_bound),
        "descriptors past {fds_bound}: {rounds:?}"
    );
    let (rss4, rss8) = (rounds[3].2.1, rounds[7].2.1);
    assert!(
        rss8 <= rss4 + 4096,
        "resident memory grew from {rss4} kB to {rss8} kB over the last four floods"
    );
}
