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

/// An HTTP/1.1 upstream whose every answer takes 1 s; counts the requests (so the
/// connections: HTTP/1.1 has one request at a time per connection) it holds at once.
fn slow(gauge: &Arc<Gauge>) -> Router {
    let gauge = Arc::clone(gauge);
    Router::new().fallback(any(move || {
        let gauge = Arc::clone(&gauge);
        async move {
            let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.max.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            gauge.now.fetch_sub(1, Ordering::SeqCst);
            "ok"
        }
    }))
}

/// `max-connections = 2` on an h2c listener, every other key shipped. One HTTP/2 client
/// (hyper's, one connection) sends 150 GETs at once. The upstream connections the gateway
/// holds should stay within the README's per-connection budget (2 × max-connections +
/// max-detached-attempts = 68); it opens one per stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_h2_connection_cannot_hold_more_upstream_connections_than_the_descriptor_budget() {
    let (stop, _) = watch::channel(false);
    let gauge = Arc::new(Gauge::default());
    let upstream = common::serve_router(slow(&gauge), &stop).await;
    let text = format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
access-log = false
h2c = true
max-connections = 2

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
        if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_secs(15), call)
            .await
            .map(|j| j.unwrap())
            && status == http::StatusCode::OK
        {
            ok += 1;
        }
    }
    let budget = 2 * 2 + 64;
    let held = gauge.max.load(Ordering::SeqCst);
    assert!(
        held <= budget,
        "one HTTP/2 client connection (max-connections = 2) held {held} upstream connections at \
         once ({ok}/150 answered 200); the README's budget per listener is {budget}"
    );
    let _ = stop.send(true);
}
