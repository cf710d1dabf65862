//! The gateway's own exhaustion is never the upstream's failure: the binary run out of
//! descriptors (`ulimit -n` far below what `max-connections` needs) in front of a healthy
//! upstream answers the connects it cannot make 503 "out of resources", and the cluster's
//! breaker stays closed (it used to count each EMFILE as the upstream's failure and open), as
//! do the health checks (a check that cannot open its socket is neither a pass nor a fail).

#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Router;
use axum::routing::any;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_descriptors_answers_503_and_opens_no_healthy_cluster() {
    let (stop, _) = watch::channel(false);
    // Healthy and slow enough that the connections of a round are all open at once.
    let upstream = common::serve_router(
        Router::new()
            .route("/health", any(|| async { "ok" }))
            .fallback(any(|| async {
                tokio::time::sleep(Duration::from_millis(700)).await;
                "ok"
            })),
        &stop,
    )
    .await;
    // Shipped keys but the log, and health checks that eject the host on one failure (a
    // check that cannot open its socket must count as neither); `ulimit -n 40` leaves about
    // 25 descriptors for connections.
    let gateway = common::Limited::start("exhaustion", "40", |proxy, admin| {
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

[clusters.up.health-check]
path = "/health"
interval = "50ms"
unhealthy-threshold = 1
"#
        )
    })
    .await;
    let proxy = gateway.proxy;
    let admin = gateway.admin;
    let url: http::Uri = format!("http://127.0.0.1:{proxy}/x").parse().unwrap();
    let mut statuses = BTreeMap::<u16, usize>::new();
    let mut exhausted = 0;
    for _round in 0..4 {
        let calls: Vec<_> = (0..40)
            .map(|_| tokio::spawn(common::fetch(url.clone())))
            .collect();
        for call in calls {
            let (status, body) = call.await.unwrap();
            *statuses.entry(status).or_default() += 1;
            if status == 503 {
                assert!(
                    body.contains("out of resources") && body.contains("not the upstream"),
                    "a 503 is the gateway's own exhaustion, not an open breaker: {body}"
                );
                exhausted += 1;
            }
        }
    }
    let health = common::get(&format!("http://127.0.0.1:{admin}/healthz")).await;
    let after = common::fetch(url.clone()).await;
    let text = gateway.log_text();
    assert!(
        exhausted > 0,
        "the test ran the gateway out of descriptors (statuses {statuses:?}); the log: {text}"
    );
    assert!(
        health.body.contains("\"state\":\"closed\"")
            && after.0 == 200
            && !text.contains("breaker opened")
            && !text.contains("health checks failed"),
        "{exhausted} connects failed for want of descriptors (statuses {statuses:?}); the \
         cluster's breaker must stay closed: /healthz {}; a request after: {after:?}",
        health.body
    );
    assert!(
        text.contains("exhausted") && text.contains("ulimit -n"),
        "the refusal is logged, naming the limit: {text}"
    );
    let _ = stop.send(true);
}
