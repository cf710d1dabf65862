//! Acceptance 2: headless Chromium loads the status page; the demo's account-service is made to fail and its
//! breaker trips while the page is open; the page shows it open without a reload.
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
