//! HTTP/2 without TLS: a listener with `h2c = true` serves HTTP/2 prior knowledge beside HTTP/1.1, a cluster with `protocol = "h2c"` speaks HTTP/2 to its upstream, and a listener without `h2c` stays HTTP/1.1 only. On loopback.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common::tls::serve_speaking;
use cutout_gateway::server::Protocols;
use http::{StatusCode, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

/// An upstream that records each request's HTTP version and answers with its path.
fn versions(seen: &Arc<Mutex<Vec<Version>>>) -> Router {
    let seen = Arc::clone(seen);
    Router::new().fallback(any(move |request: Request| {
        let seen = Arc::clone(&seen);
        async move {
            seen.lock().unwrap().push(request.version());
            request.uri().path().to_owned()
        }
    }))
}

fn config(gateway_extra: &str, upstream: &str, cluster_extra: &str) -> String {
    format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
access-log = false
{gateway_extra}

[[routes]]
prefix = "/"
cluster = "up"

[clusters.up]
upstreams = ["{upstream}"]
{cluster_extra}
"#
    )
}

/// GETs `url` over HTTP/2 with prior knowledge (`h2`) or HTTP/1.1; the status, version and
/// body, or the error's text.
async fn get(url: &str, h2: bool) -> Result<(StatusCode, Version, String), String> {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build_http();
    let call = async {
        let response = client
            .get(url.parse().unwrap())
            .await
            .map_err(|e| format!("{e:?}"))?;
        let (status, version) = (response.status(), response.version());
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, version, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| Err("timed out".to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_listener_serves_both_versions_and_an_h2c_cluster_speaks_http2_upstream() {
    let (stop, _) = watch::channel(false);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let h2c = Protocols {
        tls: None,
        h2c: true,
    };
    let upstream = serve_speaking(versions(&seen), h2c, &stop).await;
    let text = config(
        "h2c = true",
        &format!("http://{upstream}"),
        "protocol = \"h2c\"",
    );
    let gateway = common::start_gateway(&text, None).await;
    let url = format!("http://{}/a/b?c=1", gateway.proxy);
    for n in 0..20 {
        let h2 = n % 2 == 0;
        let (status, version, body) = get(&url, h2).await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, "/a/b");
        let expected = if h2 {
            Version::HTTP_2
        } else {
            Version::HTTP_11
        };
        assert_eq!(version, expected, "the client's own version back");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 20);
    assert!(
        seen.iter().all(|v| *v == Version::HTTP_2),
        "every request went upstream over HTTP/2: {seen:?}"
    );
    assert_eq!(
        gateway.gateway.clusters()["up"]
            .breaker()
            .snapshot()
            .failures,
        0
    );
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_without_h2c_stays_http1_only_and_clusters_stay_http1_by_default() {
    let (stop, _) = watch::channel(false);
    let seen = Arc::new(Mutex::new(Vec::new()));
    // An upstream that would take HTTP/2: the default cluster still speaks HTTP/1.1 to it.
    let both = Protocols {
        tls: None,
        h2c: true,
    };
    let upstream = serve_speaking(versions(&seen), both, &stop).await;
    let text = config("", &format!("http://{upstream}"), "");
    let gateway = common::start_gateway(&text, None).await;
    let url = format!("http://{}/plain", gateway.proxy);
    let (status, version, _) = get(&url, false).await.unwrap();
    assert_eq!((status, version), (StatusCode::OK, Version::HTTP_11));
    assert!(
        get(&url, true).await.is_err(),
        "HTTP/2 prior knowledge is not spoken without h2c"
    );
    assert_eq!(*seen.lock().unwrap(), [Version::HTTP_11]);
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_cluster_whose_upstream_speaks_only_http1_fails_and_is_counted() {
    let (stop, _) = watch::channel(false);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream = common::serve_router(versions(&seen), &stop).await;
    let text = config("", &format!("http://{upstream}"), "protocol = \"h2\"");
    let gateway = common::start_gateway(&text, None).await;
    let (status, _, _) = get(&format!("http://{}/x", gateway.proxy), false)
        .await
        .unwrap();
    assert_eq!(
        status, 502,
        "an HTTP/1.1-only upstream cannot answer HTTP/2"
    );
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        gateway.gateway.clusters()["up"]
            .breaker()
            .snapshot()
            .failures,
        1
    );
    let _ = stop.send(true);
}
