//! SRE review 32b: HTTP/2 on the proxy listener against the descriptor budget. README
//! (Operations → Limits, `GW-WARN-002`): "Each proxied connection can hold an upstream
//! connection too, and each detached attempt one more, so keep `ulimit -n` above about
//! 2 × `max-connections` + the clusters' `max-detached-attempts` + `admin-max-connections` +
//! 64". On HTTP/2 a single client connection carries up to 200 concurrent streams (hyper's
//! server default; the gateway sets no `max_concurrent_streams`), each forwarded on an
//! upstream connection of its own to an HTTP/1.1 upstream, so `max-connections` does not
//! bound the upstream sockets: one connection opens ~200, the shipped 1024 connections
//! ~204,800, far past the budget the warning computes (the listener then fails `accept` with
//! EMFILE for every client).
//!
//! Fixed: a listener's requests in flight are bounded by its `max-connections` however many
//! streams carry them (`crate::budget`: a stream past the budget waits for a slot), and the
//! gateway's own EMFILE is never counted against a cluster (`crate::exhaustion`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::any;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

/// An HTTP/1.1 upstream whose every answer takes `delay`; counts the requests (so the
/// connections: HTTP/1.1 has one request at a time per connection) it holds at once.
fn slow(gauge: &Arc<Gauge>, delay: Duration) -> Router {
    let gauge = Arc::clone(gauge);
    Router::new().fallback(any(move || {
        let gauge = Arc::clone(&gauge);
        async move {
            let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.max.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            gauge.now.fetch_sub(1, Ordering::SeqCst);
            "ok"
        }
    }))
}

/// `max-connections = 20` on an h2c listener, every other key shipped. One HTTP/2 client
/// (hyper's, one connection) sends 150 GETs of 1 s each at once. The upstream connections
/// the gateway holds stay within the listener's request budget (`max-connections`, so
/// within the README's descriptor budget), and every stream is answered 200: the ones past
/// the budget wait for a slot. Before the fix it opened one upstream connection per stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_h2_connection_cannot_hold_more_upstream_connections_than_the_descriptor_budget() {
    let (stop, _) = watch::channel(false);
    let gauge = Arc::new(Gauge::default());
    let upstream = common::serve_router(slow(&gauge, Duration::from_secs(1)), &stop).await;
    let text = format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
access-log = false
h2c = true
max-connections = 20

[[routes]]
prefix = "/"
cluster = "up"

[clusters.up]
upstreams = ["http://{upstream}"]
"#
    );
    let gateway = common::start_gateway(&text, None).await;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let url: http::Uri = format!("http://{}/x", gateway.proxy).parse().unwrap();
    let calls: Vec<_> = (0..150)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let response = client.get(url).await.map_err(|e| format!("{e:?}"))?;
                let status = response.status();
                let _ = response.into_body().collect().await;
                Ok::<_, String>(status)
            })
        })
        .collect();
    let mut ok = 0;
    for call in calls {
        if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_secs(25), call)
            .await
            .map(|j| j.unwrap())
            && status == http::StatusCode::OK
        {
            ok += 1;
        }
    }
    let budget = 20;
    let held = gauge.max.load(Ordering::SeqCst);
    assert!(
        held <= budget && ok == 150,
        "one HTTP/2 client connection (max-connections = 20) held {held} upstream connections at \
         once ({ok}/150 answered 200); the listener's request budget is {budget}"
    );
    let _ = stop.send(true);
}

/// What it cost. The binary under `ulimit -n 1024` with `max-connections = 100` (so
/// `GW-WARN-002` stays silent: about 2 × 100 + 64 + 32 + 64 = 360 descriptors), `h2c = true`,
/// every other key shipped, in front of a healthy upstream whose answers take 0.5 s: ten
/// HTTP/2 connections (a tenth of `max-connections`) with 200 streams each make the gateway
/// open ~2000 upstream sockets, it runs out of descriptors, its own failed connects count as
/// the upstream's failures and the healthy cluster's breaker opens: every other client gets
/// 503. Measured by hand the same way (h2load -c10 -m200): 3256 of 4000 answers 5xx, 2995 of
/// them the open breaker's, `accept` failing with EMFILE. Control: `SRE32B_NOFILE=20000` runs
/// the same load under a higher limit, and it passes (2000 × 200, the breaker closed). Now
/// the streams wait for the listener's 100 request slots (2000 × 0.5 s / 100 = about 10 s).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_h2_connections_do_not_open_a_healthy_cluster_within_the_warned_descriptor_budget() {
    let (stop, _) = watch::channel(false);
    let gauge = Arc::new(Gauge::default());
    // An upstream that takes every connection (the test helpers' listeners stop at 1024).
    let upstream = common::wide_upstream(slow(&gauge, Duration::from_millis(500)), &stop).await;
    let gateway = common::Limited::start("sre32b-fd", "${SRE32B_NOFILE:-1024}", |proxy, admin| {
        format!(
            r#"
[gateway]
listen = "127.0.0.1:{proxy}"
admin = "127.0.0.1:{admin}"
access-log = false
h2c = true
max-connections = 100

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
    let health = format!("http://127.0.0.1:{admin}/healthz");
    let text = gateway.log_text();
    assert!(
        !text.contains("GW-WARN-002"),
        "no descriptor warning: {text}"
    );
    let url: http::Uri = format!("http://127.0.0.1:{proxy}/x").parse().unwrap();
    let mut calls = Vec::new();
    for _ in 0..10 {
        // One client, one HTTP/2 connection each.
        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http();
        for _ in 0..200 {
            let (client, url) = (client.clone(), url.clone());
            calls.push(tokio::spawn(async move {
                match client.get(url).await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let _ = response.into_body().collect().await;
                        status
                    }
                    Err(_) => 0,
                }
            }));
        }
    }
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for call in calls {
        let status = tokio::time::timeout(Duration::from_secs(40), call)
            .await
            .map_or(1, |j| j.unwrap_or(2));
        *statuses.entry(status).or_default() += 1;
    }
    let after = common::get(&health).await;
    assert!(
        after.body.contains("\"state\":\"closed\"") && statuses.keys().all(|s| *s == 200),
        "10 HTTP/2 connections × 200 streams (max-connections = 100, ulimit -n 1024, healthy \
         upstream, {} upstream connections at once): statuses {statuses:?}; /healthz after: {}; \
         the log: {}",
        gauge.max.load(Ordering::SeqCst),
        after.body,
        gateway
            .log_text()
            .lines()
            .filter(|l| l.contains("Too many open files") || l.contains("breaker opened"))
            .take(4)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = stop.send(true);
}
