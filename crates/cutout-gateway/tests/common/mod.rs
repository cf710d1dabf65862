//! Shared test harness: two demo upstreams, a gateway on a manual clock, and an HTTP client, all on loopback.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cutout::clock::ManualClock;
use cutout_gateway::upstream::Upstream;
use cutout_gateway::{Gateway, GatewayConfig, admin, proxy, server};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

/// The config of the tests: seed 002's breaker (5 calls, ratio 0.5, 30 s break, one probe).
pub const CONFIG: &str = r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "300ms"
{gateway_extra}

[[routes]]
prefix = "/accounts"
cluster = "account-service"

[[routes]]
prefix = "/transfers"
cluster = "transfer-service"
strip-prefix = true

[clusters.account-service]
upstreams = ["http://127.0.0.1:{account}"]

[clusters.transfer-service]
upstreams = ["http://127.0.0.1:{transfer}"]

[breakers.defaults]
minimum-calls = 5
failure-ratio = 0.5
window-duration = "10s"
break-duration = "30s"
max-break-duration = "30s"
jitter = "none"
half-open-probes = 1
probe-successes = 1
consecutive-failures = "off"
adaptive = false
"#;

pub struct Harness {
    pub gateway: Arc<Gateway>,
    pub clock: ManualClock,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub account: Arc<Upstream>,
    pub account_addr: SocketAddr,
    pub transfer: Arc<Upstream>,
    pub transfer_addr: SocketAddr,
    stop: watch::Sender<bool>,
}

async fn serve(router: axum::Router, stop: &watch::Sender<bool>) -> SocketAddr {
    let listener = server::bind("test", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = stop.subscribe();
    tokio::spawn(server::serve(listener, router, async move {
        let _ = rx.wait_for(|s| *s).await;
    }));
    addr
}

pub async fn start(gateway_extra: &str) -> Harness {
    let (stop, _) = watch::channel(false);
    let account = Upstream::new("account-service");
    let transfer = Upstream::new("transfer-service");
    let account_addr = serve(account.app(), &stop).await;
    let transfer_addr = serve(transfer.app(), &stop).await;
    let text = CONFIG
        .replace("{gateway_extra}", gateway_extra)
        .replace("{account}", &account_addr.port().to_string())
        .replace("{transfer}", &transfer_addr.port().to_string());
    let config = GatewayConfig::from_toml(&text).unwrap();
    let clock = ManualClock::new();
    let gateway = Gateway::with_clock(config, clock.clone());
    let proxy = serve(proxy::app(Arc::clone(&gateway)), &stop).await;
    let admin = serve(admin::app(Arc::clone(&gateway)), &stop).await;
    Harness {
        gateway,
        clock,
        proxy,
        admin,
        account,
        account_addr,
        transfer,
        transfer_addr,
        stop,
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// Sends one request (bounded by 10 s) and reads the whole answer.
pub async fn send(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut builder = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let request = builder
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .expect("an answer within 10 s")
        .expect("a response");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(url: &str) -> Reply {
    send(Method::GET, url, &[], "").await
}

pub async fn post(url: &str) -> Reply {
    send(Method::POST, url, &[], "").await
}

/// Waits (at most `limit`) until `check` holds.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}
