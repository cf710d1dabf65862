//! The gateway's shipped defaults (no `[breakers]` section) in front of healthy upstreams, on real loopback sockets: nothing opens on what the caller does to latency, and a restarted host comes back quickly.
//!
//! - A saturating burst (`wrk -t2 -c50 -d6s` beside two busy loops, after 300 sequential
//!   requests) through the gateway binary: 0 non-2xx, the breaker closed. Skipped with one line
//!   saying "install wrk" when `wrk` is not on the PATH, unless `CUTOUT_REQUIRE_SERVICES=1`.
//! - Light serial traffic on fresh upstream connections after busy pooled load: nothing opens.
//! - A probe on a fresh connection to a host that came back closes its breaker (it is judged on
//!   its outcome, not on its connection's setup).
//! - A host killed, ejected and restarted under 20 req/s is readmitted within 20 s of coming
//!   back, whatever its downtime (the breakers' clock skips the downtime; an ignored variant
//!   waits it out in real time).
//! - The status page's error share counts the upstream's errors, not the gateway's refusals.
//!
//! Hosts with a connection setup cost are the built-in test upstream ([`Upstream`]) served
//! behind a listener that delays each connection's first request by [`SETUP`], as a TCP and
//! TLS handshake to a remote host would. The breakers read a [`Warp`] clock: real time, plus
//! jumps the test makes to skip a break or a quiet period.

mod common;

use common::{
    BusyLoop, Proc, Warp, WrkReport, client, opens, shipped, start_gateway, status,
    upstream_process, wrk_or_skip,
};

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cutout::State;
use cutout_gateway::upstream::{Mode, Upstream};
use hyper_util::rt::TokioIo;
use tokio::sync::watch;
use tower::ServiceExt;

/// What a fresh connection's first request waits before it is served (a handshake).
const SETUP: Duration = Duration::from_millis(50);

/// The built-in test upstream behind a listener whose connections each pay [`SETUP`] on their
/// first request; [`SetupHost::restart`] closes every open connection (a restarted process),
/// the listener stays.
struct SetupHost {
    addr: SocketAddr,
    upstream: Arc<Upstream>,
    connections: Arc<AtomicUsize>,
    cut: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SetupHost {
    fn drop(&mut self) {
        self.task.abort();
        self.cut.send_modify(|n| *n += 1);
    }
}

impl SetupHost {
    async fn start(name: &str) -> SetupHost {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = Upstream::new(name);
        let router = upstream.app();
        let connections = Arc::new(AtomicUsize::new(0));
        let (cut, _) = watch::channel(0u64);
        let task = {
            let (connections, cut) = (Arc::clone(&connections), cut.clone());
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    // SeqCst: a test counter, read after the traffic that made it.
                    connections.fetch_add(1, Ordering::SeqCst);
                    let mut cut = cut.subscribe();
                    let router = router.clone();
                    tokio::spawn(async move {
                        let first = Arc::new(AtomicBool::new(true));
                        let service = hyper::service::service_fn(
                            move |request: http::Request<hyper::body::Incoming>| {
                                let (router, first) = (router.clone(), Arc::clone(&first));
                                async move {
                                    if first.swap(false, Ordering::SeqCst) {
                                        tokio::time::sleep(SETUP).await;
                                    }
                                    router.oneshot(request).await
                                }
                            },
                        );
                        let connection = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service);
                        tokio::select! {
                            _ = connection => {}
                            _ = cut.changed() => {}
                        }
                    });
                }
            })
        };
        SetupHost {
            addr,
            upstream,
            connections,
            cut,
            task,
        }
    }

    /// Closes every open connection.
    fn restart(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// `clients` keep-alive clients, each sending `each` requests back to back: pooled, busy.
async fn busy(proxy: SocketAddr, clients: usize, each: usize) -> Vec<u16> {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..clients {
        tasks.spawn(async move {
            let client = client();
            let mut statuses = Vec::with_capacity(each);
            for n in 0..each {
                statuses.push(status(&client, &format!("http://{proxy}/busy/{c}/{n}")).await);
            }
            statuses
        });
    }
    let mut all = Vec::new();
    while let Some(statuses) = tasks.join_next().await {
        all.extend(statuses.unwrap());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_serial_traffic_on_fresh_connections_after_busy_load_opens_nothing() {
    let (a, b) = (SetupHost::start("a").await, SetupHost::start("b").await);
    let clock = Warp::new();
    // Idle pooled connections go after 20 ms, so each light request opens a fresh one.
    let gw = start_gateway(
        &shipped(
            "pool",
            &[a.addr.port(), b.addr.port()],
            "pool-idle-timeout = \"20ms\"",
        ),
        Some(clock.clone()),
    )
    .await;
    let statuses = busy(gw.proxy, 8, 60).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    // A quiet half-minute: the busy calls leave the trip window, the baselines keep them.
    clock.skip(Duration::from_secs(31));
    let before = a.connections() + b.connections();
    let client = client();
    let mut light = Vec::new();
    for n in 0..50 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        light.push(status(&client, &format!("http://{}/light/{n}", gw.proxy)).await);
    }
    let fresh = a.connections() + b.connections() - before;
    assert_eq!(
        opens(&gw.gateway),
        Vec::<String>::new(),
        "nothing opened ({fresh} fresh connections); answers {light:?}"
    );
    assert!(light.iter().all(|s| *s == 200), "{light:?}");
    assert!(
        fresh >= 40,
        "the light requests ran on fresh upstream connections: {fresh} of 50"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_on_a_fresh_connection_is_judged_on_its_outcome() {
    let hosts = [
        SetupHost::start("a").await,
        SetupHost::start("b").await,
        SetupHost::start("c").await,
    ];
    let clock = Warp::new();
    let ports: Vec<u16> = hosts.iter().map(|h| h.addr.port()).collect();
    let gw = start_gateway(&shipped("pool", &ports, ""), Some(clock.clone())).await;
    let statuses = busy(gw.proxy, 8, 60).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let id = format!("pool/{}", hosts[0].addr);
    let (_, host) = gw.gateway.find_breaker(&id).unwrap();
    assert!(host.normal_latency().is_none_or(|d| d < SETUP / 3));

    // Host a fails until it is ejected, then comes back as a new process would: healthy, its
    // old connections gone.
    hosts[0].upstream.set_mode(Mode::Fail);
    let client = client();
    for n in 0..60 {
        if host.state() == State::Open {
            break;
        }
        status(&client, &format!("http://{}/fail/{n}", gw.proxy)).await;
    }
    assert_eq!(host.state(), State::Open, "{:?}", opens(&gw.gateway));
    hosts[0].upstream.set_mode(Mode::Ok);
    hosts[0].restart();
    // Let the gateway's pool see its connections closed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let served = hosts[0].upstream.started();
    clock.skip(host.break_remaining().unwrap_or_default() + Duration::from_millis(1));
    for n in 0..60 {
        if host.state() == State::Closed {
            break;
        }
        status(&client, &format!("http://{}/back/{n}", gw.proxy)).await;
    }
    assert_eq!(
        host.state(),
        State::Closed,
        "its probes succeeded on a fresh connection; opens: {:?}",
        opens(&gw.gateway)
    );
    assert!(hosts[0].upstream.started() >= served + 2, "the probes ran");
    assert!(
        !opens(&gw.gateway).iter().any(|o| o.contains("probe_slow")),
        "{:?}",
        opens(&gw.gateway)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_error_share_counts_upstream_errors_only() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        common::serve_upstream(&a, &stop).await,
        common::serve_upstream(&b, &stop).await,
    );
    let gw = start_gateway(
        &shipped("pool", &[a_addr.port(), b_addr.port()], ""),
        Some(Warp::new()),
    )
    .await;
    let client = client();
    // Start at the beginning of a statistics second, so that the requests fall in one or two
    // complete seconds before the page reads them.
    for n in 0..10 {
        assert_eq!(
            status(&client, &format!("http://{}/ok/{n}", gw.proxy)).await,
            200
        );
    }
    let reply = common::post(&format!("http://{}/breakers/pool/isolate", gw.admin)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    for n in 0..10 {
        assert_eq!(
            status(&client, &format!("http://{}/refused/{n}", gw.proxy)).await,
            503
        );
    }
    // The statistics read complete seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let view: serde_json::Value = serde_json::from_str(
        &common::get(&format!("http://{}/breakers", gw.admin))
            .await
            .body,
    )
    .unwrap();
    let pool = &view["breakers"][0];
    let stats = &pool["stats"];
    assert_eq!(
        stats["error_rate"], 0.0,
        "no upstream failed; the refusals are not upstream errors: {stats}"
    );
    assert_eq!(stats["refused_rate"], 0.5, "half were refused: {stats}");
    for host in pool["hosts"].as_array().unwrap() {
        assert_eq!(host["stats"]["error_rate"], 0.0, "{host}");
    }
    let _ = stop.send(true);
}

/// Kills and restarts one host of three under 20 req/s; the seconds from the moment it listens
/// again until its breaker is closed. `downtime`: `None` skips the downtime on the breakers'
/// clock until the host's break has stopped growing; `Some(d)` waits `d` in real time.
async fn readmission(downtime: Option<Duration>) -> Duration {
    let ports = [
        common::dead_port(),
        common::dead_port(),
        common::dead_port(),
    ];
    let mut procs: Vec<Proc> = ports.iter().map(|p| upstream_process(*p, None)).collect();
    let clock = Warp::new();
    let gw = start_gateway(&shipped("pool", &ports, ""), Some(clock.clone())).await;
    let id = format!("pool/127.0.0.1:{}", ports[0]);
    let (_, host) = gw.gateway.find_breaker(&id).unwrap();
    let cluster = gw.gateway.registry().get("pool").unwrap();

    // 20 req/s, each request on its own task so that a slow one does not slow the rate.
    let (stop, rx) = watch::channel(false);
    let proxy = gw.proxy;
    let load = tokio::spawn(async move {
        let client = client();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut n = 0u64;
        let mut answers = Vec::new();
        while !*rx.borrow() {
            tick.tick().await;
            n += 1;
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
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(procs.remove(0));
    assert!(
        common::eventually(Duration::from_secs(10), || host.state() == State::Open).await,
        "the killed host is ejected"
    );
    match downtime {
        None => {
            common::skip_breaks_until_grown(&clock, &host).await;
        }
        Some(downtime) => {
            tokio::time::sleep(downtime).await;
            // Come back just after a failed probe: the worst moment.
            let opened = host.snapshot().consecutive_opens;
            assert!(
                common::eventually(Duration::from_secs(300), || host
                    .snapshot()
                    .consecutive_opens
                    > opened)
                .await
            );
        }
    }
    let snapshot = host.snapshot();
    assert_eq!(snapshot.state, State::Open);
    let served_break = snapshot.current_break;
    procs.insert(0, upstream_process(ports[0], None));
    let back = Instant::now();
    let closed =
        common::eventually(Duration::from_secs(20), || host.state() == State::Closed).await;
    let took = back.elapsed();
    let _ = stop.send(true);
    let statuses = load.await.unwrap();
    eprintln!(
        "readmitted: {closed} after {took:?} (the break being served when it came back: \
         {served_break:?}, {} opens in a row); {} requests, {} not 200",
        snapshot.consecutive_opens,
        statuses.len(),
        statuses.iter().filter(|s| **s != 200).count()
    );
    assert!(
        closed,
        "the restarted host is still ejected {took:?} after it came back (its break: \
         {served_break:?}); opens: {:?}",
        opens(&gw.gateway)
    );
    assert_eq!(cluster.state(), State::Closed, "{:?}", opens(&gw.gateway));
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_host_is_readmitted_within_20_s_whatever_its_downtime() {
    readmission(None).await;
}

/// The same with a real downtime (`READMIT_DOWNTIME_SECS`, default 180 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes of real downtime: cargo test -p cutout-gateway --test shipped_defaults -- --ignored --nocapture"]
async fn a_host_down_for_minutes_is_readmitted_within_20_s() {
    let secs = std::env::var("READMIT_DOWNTIME_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180);
    readmission(Some(Duration::from_secs(secs))).await;
}

#[test]
fn shipped_defaults_keep_a_healthy_cluster_closed_through_a_saturating_burst() {
    if !wrk_or_skip("shipped_defaults_keep_a_healthy_cluster_closed_through_a_saturating_burst") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (up, listen, admin) = (
        common::dead_port(),
        common::dead_port(),
        common::dead_port(),
    );
    let _upstream = upstream_process(up, None);
    let dir = std::env::temp_dir().join(format!("cutout-burst-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
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
    let _gateway = Proc(
        Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg("--config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(Instant::now() < deadline, "the gateway listens");
        std::thread::sleep(Duration::from_millis(20));
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

    let loops = [BusyLoop::start(), BusyLoop::start()];
    let wrk = Command::new("wrk")
        .args(["-t2", "-c50", "-d6s"])
        .arg(format!("http://127.0.0.1:{listen}/burst"))
        .output()
        .unwrap();
    drop(loops);
    let WrkReport {
        requests,
        non_2xx,
        report,
        ..
    } = WrkReport::of(&wrk);
    eprintln!("{report}");
    let view: serde_json::Value = runtime.block_on(async {
        let body = common::get(&format!("http://127.0.0.1:{admin}/breakers"))
            .await
            .body;
        serde_json::from_str(&body).unwrap()
    });
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = &view["breakers"][0];
    let opened: Vec<&serde_json::Value> = view["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["to"] == "open")
        .collect();
    eprintln!(
        "{requests} requests, {non_2xx} non-2xx; state {}; opens {opened:?}",
        cluster["state"]
    );
    assert!(requests > 0);
    assert_eq!(non_2xx, 0, "every answer of a healthy upstream is a 2xx");
    assert_eq!(cluster["state"], "closed", "{cluster}");
    assert!(opened.is_empty(), "{opened:?}");
}
