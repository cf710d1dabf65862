//! The status page in headless Chromium. (1) The demo's account-service is made to fail and its breaker
//! trips while the page is open; the page shows it open without a reload. (2) An operator's view at a
//! glance: per cluster and per host the state with its reason and countdown, rates, latency sparklines,
//! transitions and manual actions from the server; a button clicked in the page isolates a cluster, with
//! the admin token; screenshots are written to `target/tmp/` (`CARGO_TARGET_TMPDIR`).
//!
//! Needs Chromium (`apt-get install -y chromium`), so it is ignored by default:
//! `cargo test -p cutout-gateway --test browser -- --ignored`. `CHROMIUM=/path` picks the binary.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use cutout_gateway::{admin, demo, proxy, server};

mod common;

#[derive(Clone)]
struct Steer {
    proxy: std::net::SocketAddr,
    account: std::net::SocketAddr,
    polls: Arc<AtomicUsize>,
    pages: Arc<AtomicUsize>,
}

/// Counts page loads and polls; before answering the page's second poll, trips account-service
/// through the demo upstream (chaos `fail`, then five calls through the proxy).
async fn steer(State(s): State<Steer>, request: Request, next: Next) -> Response {
    match request.uri().path() {
        "/" => {
            s.pages.fetch_add(1, Ordering::SeqCst);
        }
        "/breakers" if s.polls.fetch_add(1, Ordering::SeqCst) == 1 => {
            let fail = common::post(&format!("http://{}/chaos/fail", s.account)).await;
            assert_eq!(fail.status, 200);
            for _ in 0..5 {
                let r = common::get(&format!("http://{}/accounts/1", s.proxy)).await;
                assert_eq!(r.status, 500);
            }
        }
        _ => {}
    }
    next.run(request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium; run with --ignored (see the module docs)"]
async fn status_page_shows_a_trip_without_reload() {
    let (stop, rx) = tokio::sync::watch::channel(false);
    let demo = demo::start_upstreams([0, 0, 0, 0], rx.clone())
        .await
        .unwrap();
    let serve = |router: axum::Router| async {
        let listener = server::bind("test", "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let mut rx = rx.clone();
        tokio::spawn(server::serve(listener, router, async move {
            let _ = rx.wait_for(|s| *s).await;
        }));
        addr
    };
    let proxy_addr = serve(proxy::app(Arc::clone(&demo.gateway))).await;
    let steering = Steer {
        proxy: proxy_addr,
        account: demo.account.1,
        polls: Arc::default(),
        pages: Arc::default(),
    };
    let admin_app =
        admin::app(Arc::clone(&demo.gateway)).layer(from_fn_with_state(steering.clone(), steer));
    let admin_addr = serve(admin_app).await;

    let profile = std::env::temp_dir().join(format!("cutout-chromium-{}", std::process::id()));
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let mut command = tokio::process::Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("http://{admin_addr}/"))
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("Chromium finishes within 60 s")
        .expect("Chromium runs (apt-get install -y chromium)");
    let _ = std::fs::remove_dir_all(&profile);
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    assert_eq!(
        steering.pages.load(Ordering::SeqCst),
        1,
        "loaded once, never reloaded"
    );
    assert!(steering.polls.load(Ordering::SeqCst) >= 2, "{dom}");
    assert!(
        dom.contains(r#"id="state-account-service" class="state open">open<"#)
            || dom.contains(r#"class="state open" id="state-account-service">open<"#),
        "the page shows account-service open: {dom}"
    );
    assert!(
        dom.contains("account-service: closed → open"),
        "the page saw the change between two polls: {dom}"
    );
    assert!(dom.contains(r#"id="state-transfer-service""#), "{dom}");
    let _ = stop.send(true);
}

/// Runs headless Chromium on `url` with `extra` arguments (at most 60 s); returns stdout.
async fn chromium(url: &str, extra: &[String]) -> String {
    let profile = std::env::temp_dir().join(format!(
        "cutout-chromium-{}-{}",
        std::process::id(),
        extra.len()
    ));
    let binary = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let mut command = tokio::process::Command::new(binary);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .args(extra)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("Chromium finishes within 60 s")
        .expect("Chromium runs (apt-get install -y chromium)");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A page of the test's own, served beside the admin API (same origin): it opens the status
/// page in a frame, waits until it shows the ejected host, clicks the isolate button of
/// `ledger`, waits until the server's list of manual actions shows it, and copies the frame's
/// DOM into its own (Chromium's --dump-dom dumps the top document only).
const HARNESS: &str = r#"<!doctype html><html><body>
<iframe id="f" src="/#token=s3cret" width="1200" height="900"></iframe>
<div id="result">waiting</div><div id="copy"></div>
<script>
const f = document.getElementById("f");
let clicked = false, rounds = 0;
const timer = setInterval(() => {
  rounds += 1;
  const doc = f.contentDocument;
  if (!doc) return;
  const ejected = doc.querySelector('[id^="host-pool/"][data-state="open"]');
  const button = doc.querySelector('button[data-action="isolate"][data-target="ledger"]');
  if (!clicked && ejected && button) { button.click(); clicked = true; return; }
  const actions = doc.getElementById("actions");
  const done = clicked && actions && actions.textContent.includes("isolate ledger");
  if (done || rounds > 120) {
    clearInterval(timer);
    document.getElementById("copy").innerHTML = doc.body.innerHTML;
    document.getElementById("result").textContent = done ? "clicked and seen" : "gave up after " + rounds;
  }
}, 100);
</script></body></html>"#;

async fn harness(request: Request, next: Next) -> Response {
    if request.uri().path() == "/harness" {
        use axum::response::IntoResponse;
        return axum::response::Html(HARNESS).into_response();
    }
    next.run(request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium; run with --ignored (see the module docs)"]
async fn status_page_shows_clusters_and_hosts_at_a_glance_and_its_buttons_act() {
    use cutout_gateway::upstream::{Mode, Upstream};
    use cutout_gateway::{Gateway, GatewayConfig};

    let (stop, _) = tokio::sync::watch::channel(false);
    let up = |name: &str, mode: Mode| {
        let u = Upstream::new(name);
        u.set_mode(mode);
        u
    };
    let (a, b, ledger, search) = (
        up("pool-a", Mode::Ok),
        up("pool-b", Mode::Fail),
        up("ledger", Mode::Ok),
        up("search", Mode::Fail),
    );
    let mut ports = Vec::new();
    for u in [&a, &b, &ledger, &search] {
        ports.push(common::serve_upstream(u, &stop).await.port());
    }
    let config = format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
admin-token = "s3cret"
attempt-timeout = "500ms"
[[routes]]
prefix = "/pool"
cluster = "pool"
[[routes]]
prefix = "/ledger"
cluster = "ledger"
[[routes]]
prefix = "/search"
cluster = "search"
[clusters.pool]
upstreams = ["http://127.0.0.1:{}", "http://127.0.0.1:{}"]
[clusters.ledger]
upstreams = ["http://127.0.0.1:{}"]
[clusters.search]
upstreams = ["http://127.0.0.1:{}"]
[breakers.defaults]
minimum-calls = 5
failure-ratio = 0.5
window-duration = "10s"
break-duration = "60s"
consecutive-failures = "off"
adaptive = false
"#,
        ports[0], ports[1], ports[2], ports[3]
    );
    let gateway = Gateway::new(GatewayConfig::from_toml(&config).unwrap());
    let serve = |router: axum::Router| {
        let stop = stop.clone();
        async move { common::serve_router(router, &stop).await }
    };
    let proxy = serve(cutout_gateway::proxy::app(Arc::clone(&gateway))).await;
    let admin_addr =
        serve(admin::app(Arc::clone(&gateway)).layer(axum::middleware::from_fn(harness))).await;
    // Traffic: pool's failing host is ejected while the healthy one serves; search opens;
    // ledger is healthy.
    for n in 0..60 {
        let path = match n % 4 {
            0 | 1 => format!("/pool/{n}"),
            2 => format!("/ledger/{n}"),
            _ => format!("/search/{n}"),
        };
        common::get(&format!("http://{proxy}{path}")).await;
    }
    let pool = &gateway.clusters()["pool"];
    assert_eq!(pool.hosts().unwrap().ejected(), 1);
    assert_eq!(
        gateway.registry().state("search").unwrap(),
        cutout::State::Open
    );

    // The buttons, with the token: the harness clicks "isolate" on ledger.
    let dom = chromium(
        &format!("http://{admin_addr}/harness"),
        &[
            "--virtual-time-budget=15000".to_owned(),
            "--dump-dom".to_owned(),
        ],
    )
    .await;
    assert!(
        dom.contains(r#"<div id="result">clicked and seen</div>"#),
        "{dom}"
    );
    assert_eq!(
        gateway.registry().state("ledger").unwrap(),
        cutout::State::Isolated,
        "the page's button isolated it"
    );
    let host_b = format!("pool/127.0.0.1:{}", ports[1]);
    for needle in [
        // The ejected host, with its reason and countdown.
        format!(r#"id="state-{host_b}" class="state open">open<"#),
        "failure ratio".to_owned(),
        "half-open in ".to_owned(),
        // Both clusters' states from the server.
        r#"id="state-search" class="state open">open<"#.to_owned(),
        "ejected 1 of at most 1".to_owned(),
        // Sparklines and figures.
        "<svg".to_owned(),
        "p99".to_owned(),
        // Transitions and manual actions from the server.
        format!("{host_b}: closed → open (failure ratio)"),
        "search: closed → open (failure ratio)".to_owned(),
        "isolate ledger by 127.0.0.1:".to_owned(),
    ] {
        assert!(dom.contains(&needle), "{needle} in {dom}");
    }

    // Without the token, the page says it needs one and its buttons are off.
    let denied = chromium(
        &format!("http://{admin_addr}/"),
        &[
            "--virtual-time-budget=3000".to_owned(),
            "--dump-dom".to_owned(),
        ],
    )
    .await;
    assert!(denied.contains("needs a token"), "{denied}");

    // Screenshots, for people to look at.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, size) in [
        ("status-page.png", "1280,1400"),
        ("status-page-narrow.png", "800,1600"),
    ] {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        chromium(
            &format!("http://{admin_addr}/#token=s3cret"),
            &[
                "--virtual-time-budget=5000".to_owned(),
                format!("--window-size={size}"),
                format!("--screenshot={}", path.display()),
            ],
        )
        .await;
        let bytes = std::fs::read(&path).expect("a screenshot");
        assert!(bytes.starts_with(b"\x89PNG"), "{}", path.display());
        eprintln!("screenshot: {}", path.display());
    }
    let _ = stop.send(true);
}
