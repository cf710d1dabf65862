//! Active health checks per upstream host on real loopback sockets (issue #28, "Active health checks" and acceptance 3): a passing check ends a host's break early and its probes still decide; a check that began before the break is stale; a failing check ejects a host only when `unhealthy-threshold` asks; checks are not traffic; they show on the admin API and in the metrics, and stop with the gateway.
//!
//! Acceptance 3's readmission test runs what an operator gets (no `[breakers]` section) plus
//! the health-check keys, in front of three `cutout-gateway upstream` processes loaded by
//! `wrk -t1 -c4` (skipped with one line without `wrk`, unless `CUTOUT_REQUIRE_SERVICES=1`).
//!
//! Run: `cargo test -p cutout-gateway --test health_checks -- --nocapture`.

mod common;

use common::{Proc, client, dead_port, opens, shipped, start_gateway, status, upstream_process};

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cutout::State;
use cutout_gateway::upstream::{Mode, Upstream};
use tokio::sync::{mpsc, watch};

/// `text` (a whole configuration) with a `health-check` table for `cluster`.
fn checked(text: &str, cluster: &str, keys: &str) -> String {
    format!("{text}\n[clusters.{cluster}.health-check]\n{keys}\n")
}

fn three_ports() -> [u16; 3] {
    loop {
        let ports = [dead_port(), dead_port(), dead_port()];
        if ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2] {
            return ports;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_host_restarted_is_readmitted_by_its_health_check_within_two_intervals() {
    let test = "a_dead_host_restarted_is_readmitted_by_its_health_check_within_two_intervals";
    if !common::wrk_or_skip(test) {
        return;
    }
    let interval = Duration::from_secs(1);
    let ports = three_ports();
    let mut procs: Vec<Option<Proc>> = ports
        .iter()
        .map(|p| Some(upstream_process(*p, None)))
        .collect();
    let text = checked(
        &shipped("svc", &ports, ""),
        "svc",
        "path = \"/healthz\"\ninterval = \"1s\"",
    );
    let gw = start_gateway(&text, None).await;
    let id = format!("svc/127.0.0.1:{}", ports[0]);
    let (_, host) = gw.gateway.find_breaker(&id).unwrap();
    let mut wrk = Command::new("wrk")
        .args(["-t1", "-c4", "-d12s"])
        .arg(format!("http://{}/c", gw.proxy))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    procs[0] = None;
    assert!(
        common::eventually(Duration::from_secs(5), || host.state() == State::Open).await,
        "the killed host is ejected"
    );
    // Dead for two seconds: its checks fail meanwhile.
    tokio::time::sleep(2 * interval).await;
    let remaining = host.break_remaining().unwrap_or_default();
    assert!(
        remaining > 2 * interval + Duration::from_millis(500),
        "its break has more than two intervals left: {remaining:?}"
    );
    procs[0] = Some(upstream_process(ports[0], None));
    let back = Instant::now();
    let closed = common::eventually(4 * interval, || host.state() == State::Closed).await;
    let took = back.elapsed();
    let _ = wrk.kill();
    let _ = wrk.wait();
    let ended: Vec<_> = gw
        .gateway
        .transitions()
        .into_iter()
        .filter(|t| t.breaker == id && t.from == "open" && t.to == "half_open")
        .map(|t| t.reason)
        .collect();
    eprintln!(
        "restarted with {remaining:?} of its break left; closed: {closed} after {took:?}; its \
         half-openings {ended:?}; opens {:?}",
        opens(&gw.gateway)
    );
    assert!(
        closed && took <= 2 * interval,
        "the restarted host was not readmitted within two check intervals ({:?}): closed \
         {closed} after {took:?}, with {remaining:?} of its break left",
        2 * interval
    );
    assert!(
        ended.contains(&Some("health_check")),
        "its break was ended by its health check: {ended:?}"
    );
}

/// Drives requests through `proxy` until `breaker` has opened (at most `limit`). It stops at
/// the first state other than closed: a check may end the break before this loop looks, and
/// one more request would then be a probe that opens it a second time.
async fn eject(proxy: SocketAddr, breaker: &cutout::Breaker, limit: usize) {
    let client = client();
    for n in 0..limit {
        if breaker.state() != State::Closed {
            return;
        }
        status(&client, &format!("http://{proxy}/eject/{n}")).await;
    }
    assert_ne!(breaker.state(), State::Closed, "ejected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_check_ends_an_ejected_host_s_break_and_its_probes_still_decide() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        common::serve_upstream(&a, &stop).await,
        common::serve_upstream(&b, &stop).await,
    );
    // The demo upstream's /chaos answers 200 whatever its mode: a check that passes while the
    // host's business fails.
    let text = checked(
        &shipped("pool", &[a_addr.port(), b_addr.port()], ""),
        "pool",
        "path = \"/chaos\"\ninterval = \"300ms\"",
    );
    let gw = start_gateway(&text, None).await;
    let (_, host) = gw.gateway.find_breaker(&format!("pool/{a_addr}")).unwrap();
    a.set_mode(Mode::Fail);
    eject(gw.proxy, &host, 40).await;
    assert_eq!(host.snapshot().consecutive_opens, 1);
    // The next check passes and ends the break: half-open, no traffic needed.
    assert!(
        common::eventually(Duration::from_secs(2), || host.state() == State::HalfOpen).await,
        "a passing check ended the break: {:?}",
        host.state()
    );
    assert!(
        host.break_remaining().is_none(),
        "its 7.5-15 s break did not run out by itself"
    );
    // Its probe is a request, and it fails: the probes decide, the break grows.
    let client = client();
    for n in 0..4 {
        if host.snapshot().consecutive_opens >= 2 {
            break;
        }
        status(&client, &format!("http://{}/probe/{n}", gw.proxy)).await;
    }
    // The next check may already have ended the grown break: the log, not the state, says
    // the probe re-opened it.
    assert_eq!(
        host.snapshot().consecutive_opens,
        2,
        "the failed probe re-opened it with a grown break"
    );
    let reopened = gw
        .gateway
        .transitions()
        .into_iter()
        .filter(|t| t.breaker == format!("pool/{a_addr}"))
        .filter(|t| t.from == "half_open" && t.to == "open")
        .count();
    assert_eq!(reopened, 1, "{:?}", opens(&gw.gateway));
    // Back for real: the next check ends the break, two probes close it.
    a.set_mode(Mode::Ok);
    assert!(
        common::eventually(Duration::from_secs(2), || host.state() == State::HalfOpen).await,
        "{:?}",
        host.state()
    );
    for n in 0..10 {
        if host.state() == State::Closed {
            break;
        }
        assert_eq!(
            status(&client, &format!("http://{}/back/{n}", gw.proxy)).await,
            200
        );
    }
    assert_eq!(host.state(), State::Closed, "{:?}", opens(&gw.gateway));
    let reasons: Vec<_> = gw
        .gateway
        .transitions()
        .into_iter()
        .filter(|t| t.to == "half_open")
        .map(|t| t.reason)
        .collect();
    assert_eq!(reasons, [Some("health_check"), Some("health_check")]);
    let _ = stop.send(true);
}

/// A host whose `/slowhealth` answers 200 after `delay` (telling `started` when a check
/// begins and `done` when it was answered) and whose business answers 500 while `failing`.
async fn slow_health_host(
    stop: &watch::Sender<bool>,
    delay: Duration,
) -> (
    SocketAddr,
    Arc<AtomicBool>,
    mpsc::UnboundedReceiver<&'static str>,
) {
    let failing = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::unbounded_channel();
    let fail = Arc::clone(&failing);
    let router = axum::Router::new()
        .route(
            "/slowhealth",
            axum::routing::get(move || {
                let tx = tx.clone();
                async move {
                    let _ = tx.send("started");
                    tokio::time::sleep(delay).await;
                    let _ = tx.send("done");
                    "ok\n"
                }
            }),
        )
        .fallback(move || {
            let fail = Arc::clone(&fail);
            async move {
                // SeqCst: a test switch.
                if fail.load(Ordering::SeqCst) {
                    http::StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    http::StatusCode::OK
                }
            }
        });
    (common::serve_router(router, stop).await, failing, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_began_before_the_break_is_stale() {
    let (stop, _) = watch::channel(false);
    let (slow, failing, mut checks) = slow_health_host(&stop, Duration::from_millis(800)).await;
    let good = Upstream::new("good");
    let good_addr = common::serve_upstream(&good, &stop).await;
    let text = checked(
        &shipped("pool", &[slow.port(), good_addr.port()], ""),
        "pool",
        "path = \"/slowhealth\"\ninterval = \"10s\"\ntimeout = \"2s\"\njitter = \"0s\"",
    );
    let gw = start_gateway(&text, None).await;
    let (_, host) = gw.gateway.find_breaker(&format!("pool/{slow}")).unwrap();
    // A check is under way; the host fails and is ejected before it is answered.
    let first = tokio::time::timeout(Duration::from_secs(3), checks.recv()).await;
    assert_eq!(first, Ok(Some("started")), "the first check began");
    failing.store(true, Ordering::SeqCst);
    eject(gw.proxy, &host, 40).await;
    failing.store(false, Ordering::SeqCst);
    let done = tokio::time::timeout(Duration::from_secs(3), checks.recv()).await;
    assert_eq!(done, Ok(Some("done")), "the check was answered 200");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let view: serde_json::Value = serde_json::from_str(
        &common::get(&format!("http://{}/breakers", gw.admin))
            .await
            .body,
    )
    .unwrap();
    let check = &view["breakers"][0]["hosts"][0]["health_check"];
    eprintln!("the check: {check}; the host {:?}", host.state());
    assert_eq!(check["result"], "pass", "{check}");
    assert_eq!(
        host.state(),
        State::Open,
        "a check that began before the host's break says nothing about what opened it"
    );
    let _ = stop.send(true);
}

/// A host whose `/healthz` answers 503 and whose business answers 200.
async fn sick_health_host(stop: &watch::Sender<bool>) -> (SocketAddr, Arc<AtomicUsize>) {
    let checks = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&checks);
    let router = axum::Router::new()
        .route(
            "/healthz",
            axum::routing::get(move || {
                let seen = Arc::clone(&seen);
                async move {
                    // SeqCst: a test counter.
                    seen.fetch_add(1, Ordering::SeqCst);
                    http::StatusCode::SERVICE_UNAVAILABLE
                }
            }),
        )
        .fallback(|| async { "ok\n" });
    (common::serve_router(router, stop).await, checks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_ejects_a_host_only_when_unhealthy_threshold_asks() {
    let (stop, _) = watch::channel(false);
    let (sick, checks) = sick_health_host(&stop).await;
    let good = Upstream::new("good");
    let good_addr = common::serve_upstream(&good, &stop).await;
    let ports = [sick.port(), good_addr.port()];
    let plain = start_gateway(
        &checked(
            &shipped("pool", &ports, ""),
            "pool",
            "path = \"/healthz\"\ninterval = \"100ms\"",
        ),
        None,
    )
    .await;
    let asked = start_gateway(
        &checked(
            &shipped("pool", &ports, ""),
            "pool",
            "path = \"/healthz\"\ninterval = \"100ms\"\nunhealthy-threshold = 3",
        ),
        None,
    )
    .await;
    let id = format!("pool/{sick}");
    let (_, left) = plain.gateway.find_breaker(&id).unwrap();
    let (_, ejected) = asked.gateway.find_breaker(&id).unwrap();
    assert!(
        common::eventually(Duration::from_secs(3), || ejected.state() == State::Open).await,
        "three failed checks in a row eject the host when unhealthy-threshold = 3"
    );
    assert_eq!(asked.gateway.open_reason(&id), Some("signal"));
    assert!(
        common::eventually(Duration::from_secs(3), || checks.load(Ordering::SeqCst)
            >= 12)
        .await
    );
    eprintln!(
        "{} checks answered 503; without unhealthy-threshold the host is {:?}",
        checks.load(Ordering::SeqCst),
        left.state()
    );
    assert_eq!(
        left.state(),
        State::Closed,
        "a failing check never opens a breaker by itself"
    );
    let client = client();
    for n in 0..4 {
        assert_eq!(
            status(&client, &format!("http://{}/x/{n}", plain.proxy)).await,
            200
        );
    }
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_are_not_traffic_show_on_the_admin_api_and_metrics_and_stop_with_the_gateway() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        common::serve_upstream(&a, &stop).await,
        common::serve_upstream(&b, &stop).await,
    );
    let text = checked(
        &shipped("watched", &[a_addr.port(), b_addr.port()], ""),
        "watched",
        "path = \"/healthz\"\ninterval = \"100ms\"",
    );
    let gw = start_gateway(&text, None).await;
    assert!(
        common::eventually(Duration::from_secs(3), || a.started() >= 5
            && b.started() >= 5)
        .await,
        "both hosts are checked"
    );
    let cluster = std::sync::Arc::clone(&gw.gateway.clusters()["watched"]);
    for breaker in gw.gateway.breakers() {
        assert_eq!(
            breaker.snapshot().calls,
            0,
            "{}: a check is not traffic",
            breaker.id()
        );
    }
    let stats = cluster.shared().stats.json();
    assert_eq!(stats["rps"], 0.0, "{stats}");
    let view: serde_json::Value = serde_json::from_str(
        &common::get(&format!("http://{}/breakers", gw.admin))
            .await
            .body,
    )
    .unwrap();
    let now = view["now_unix_ms"].as_u64().unwrap();
    for host in view["breakers"][0]["hosts"].as_array().unwrap() {
        let check = &host["health_check"];
        assert_eq!(check["result"], "pass", "{host}");
        let at = check["at_unix_ms"].as_u64().unwrap();
        assert!(now.saturating_sub(at) < 2_000, "{check}");
    }
    let metrics = common::get(&format!("http://{}/metrics", gw.admin))
        .await
        .body;
    let series = format!(
        "cutout_gateway_health_checks_total{{cluster=\"watched\",host=\"{a_addr}\",result=\"pass\"}}"
    );
    let passed = common::metric_value(&metrics, &series);
    assert!(passed.is_some_and(|n| n >= 5.0), "{series} = {passed:?}");
    drop(gw);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let checked_then = a.started() + b.started();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        a.started() + b.started(),
        checked_then,
        "the checks stopped with the gateway"
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_upstream_cluster_s_break_is_ended_by_its_host_s_check() {
    let (stop, _) = watch::channel(false);
    let up = Upstream::new("single");
    let addr = common::serve_upstream(&up, &stop).await;
    let text = checked(
        &shipped("single", &[addr.port()], ""),
        "single",
        "path = \"/chaos\"\ninterval = \"200ms\"",
    );
    let gw = start_gateway(&text, None).await;
    let breaker = gw.gateway.registry().get("single").unwrap();
    up.set_mode(Mode::Fail);
    eject(gw.proxy, &breaker, 20).await;
    up.set_mode(Mode::Ok);
    assert!(
        common::eventually(Duration::from_secs(2), || breaker.state()
            == State::HalfOpen)
        .await,
        "the cluster breaker is its host's: a passing check ends its break"
    );
    let client = client();
    for n in 0..4 {
        assert_eq!(
            status(&client, &format!("http://{}/back/{n}", gw.proxy)).await,
            200
        );
    }
    assert_eq!(breaker.state(), State::Closed);
    let _ = stop.send(true);
}
