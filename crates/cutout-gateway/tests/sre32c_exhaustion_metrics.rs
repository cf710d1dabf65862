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
use tokio::sync::watch;

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
    let gateway = common::Limited::start("sre32c-metrics", "40", |proxy, admin| {
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
        )
    })
    .await;
    let (proxy, admin) = (gateway.proxy, gateway.admin);
    let url: http::Uri = format!("http://127.0.0.1:{proxy}/x").parse().unwrap();
    let mut statuses = BTreeMap::<u16, usize>::new();
    for _round in 0..3 {
        let calls: Vec<_> = (0..40)
            .map(|_| tokio::spawn(common::fetch(url.clone())))
            .collect();
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
