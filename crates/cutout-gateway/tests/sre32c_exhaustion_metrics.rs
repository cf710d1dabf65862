//! SRE review 32c: the gateway's own exhaustion is still booked as the upstream host's 5xx in
//! `cutout_gateway_upstream_requests_total` (README: "attempts per host", `code` "1xx…5xx,
//! error: no answer or a broken one"), which the shipped dashboard's "Host error rate" panel
//! (`code=~"5xx|error"`) plots. The binary under `ulimit -n 40` in front of a healthy upstream
//! that never answers 5xx: every 503 "out of resources" the gateway makes up itself (the
//! connect never happened: EMFILE) is counted as a `code="5xx"` answer of the host, so the
//! dashboard blames a healthy host for the gateway's own limit. Measured by hand under
//! `ulimit -n 1024`, shipped defaults, h2load -n20000 -c10 -m100: the 4616 `exhausted`
//! refusals appear as 1834 + 2782 host 5xx of two healthy hosts. Shipped keys but the log.
//!
//! Fixed: an exhausted request reached no host, and nothing of a host's is counted for it.

#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Router;
use axum::routing::any;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

/// One GET on a fresh connection: its status and body (status 0: no answer within 30 s).
async fn fetch(url: http::Uri) -> (u16, String) {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let answer = async {
        let response = client.get(url).await.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(30), answer)
        .await
        .ok()
        .flatten()
        .unwrap_or((0, String::new()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_s_own_exhaustion_is_not_booked_as_the_host_s_5xx() {
    let (stop, _) = watch::channel(false);
    // Healthy (never a 5xx) and slow enough that the connections of a round are open at once.
    let upstream = common::serve_router(
        Router::new().fallback(any(|| async {
            tokio::time::sleep(Duration::from_millis(700)).await;
            "ok"
        })),
        &stop,
    )
    .await;
    let (proxy, admin) = (common::dead_port(), common::dead_port());
    let dir = std::env::temp_dir().join(format!("sre32c-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[gateway]
listen = "127.0.0.1:{proxy}"
admin = "127.0.0.1:{admin}"
access-log = false

[[routes]]
prefix = "/"
cluster = "up"

[clusters.up]
upstreams = ["http://{upstream}"]
"#
        ),
    )
    .unwrap();
    let log = dir.join("gateway.log");
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 40 && exec \"$0\" --config \"$1\" 2> \"$2\"")
        .arg(env!("CARGO_BIN_EXE_cutout-gateway"))
        .arg(&file)
        .arg(&log)
        .spawn()
        .unwrap();
    let _gateway = common::Proc(child);
    assert!(
        common::eventually(Duration::from_secs(10), || std::net::TcpStream::connect((
            "127.0.0.1",
            proxy
        ))
        .is_ok())
        .await,
        "the gateway starts under ulimit -n 40"
    );
    let url: http::Uri = format!("http://127.0.0.1:{proxy}/x").parse().unwrap();
    let mut statuses = BTreeMap::<u16, usize>::new();
    for _round in 0..3 {
        let calls: Vec<_> = (0..40).map(|_| tokio::spawn(fetch(url.clone()))).collect();
        for call in calls {
            let (status, body) = call.await.unwrap();
            *statuses.entry(status).or_default() += 1;
            if status == 503 {
                assert!(
                    body.contains("out of resources"),
                    "the gateway's own 503: {body}"
                );
            }
        }
    }
    let metrics = common::get(&format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .body;
    let _ = stop.send(true);
    let _ = std::fs::remove_dir_all(&dir);
    let host_lines: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("cutout_gateway_upstream_requests_total{"))
        .collect();
    let refusals: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("cutout_gateway_refusals_total{") && l.contains("exhausted"))
        .collect();
    assert!(
        statuses.get(&503).copied().unwrap_or(0) > 0,
        "the test ran the gateway out of descriptors: {statuses:?}"
    );
    assert!(
        !host_lines.iter().any(|l| l.contains("code=\"5xx\"")),
        "a healthy host that never answered 5xx; the gateway answered {statuses:?} ({refusals:?}), \
         and booked its own exhaustion as the host's 5xx: {host_lines:#?}"
    );
}
