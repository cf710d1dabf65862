//! `honor-retry-after` end to end on loopback sockets: an upstream's 429 with `Retry-After: 7`
//! is passed to the client and opens the cluster's breaker for 7 s on the gateway's manual
//! clock; then a probe is forwarded. Without the key, the same 429 is only ignored.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use common::get;
use cutout::clock::ManualClock;
use cutout::{OpenReason, State, Transition};
use cutout_gateway::{Gateway, GatewayConfig, proxy, server};
use http::StatusCode;
use tokio::sync::watch;

const CONFIG: &str = r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "2s"
{gateway_extra}

[[routes]]
prefix = "/quotes"
cluster = "quote-service"

[clusters.quote-service]
upstreams = ["http://127.0.0.1:{port}"]
{cluster_extra}

[breakers.defaults]
break-duration = "30s"
max-break-duration = "60s"
probe-successes = 1
adaptive = false
"#;

struct Harness {
    gateway: Arc<Gateway>,
    clock: ManualClock,
    proxy: SocketAddr,
    /// Requests the upstream received.
    received: Arc<AtomicUsize>,
    stop: watch::Sender<bool>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn serve(router: Router, stop: &watch::Sender<bool>) -> SocketAddr {
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

/// A gateway in front of an upstream whose first answer is 429 with `Retry-After: {after}`
/// and every later one 200.
async fn start(gateway_extra: &str, cluster_extra: &str, after: &'static str) -> Harness {
    let (stop, _) = watch::channel(false);
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    let upstream = Router::new().fallback(move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", after)],
                    "slow down\n",
                )
                    .into_response()
            } else {
                "quote\n".into_response()
            }
        }
    });
    let port = serve(upstream, &stop).await.port();
    let text = CONFIG
        .replace("{gateway_extra}", gateway_extra)
        .replace("{cluster_extra}", cluster_extra)
        .replace("{port}", &port.to_string());
    let config = GatewayConfig::from_toml(&text).unwrap();
    let clock = ManualClock::new();
    let gateway = Gateway::with_clock(config, clock.clone());
    let proxy = serve(proxy::app(Arc::clone(&gateway)), &stop).await;
    Harness {
        gateway,
        clock,
        proxy,
        received,
        stop,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_opens_the_cluster_s_breaker_for_that_long() {
    let h = start("", "honor-retry-after = true", "7").await;
    let url = format!("http://{}/quotes/eur", h.proxy);
    let breaker = h.gateway.registry().get("quote-service").unwrap();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));

    let throttled = get(&url).await;
    assert_eq!(throttled.status, 429, "the upstream's answer is passed on");
    assert_eq!(throttled.headers["retry-after"], "7");
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        events.lock().unwrap()[..],
        [Transition::Opened {
            from: State::Closed,
            reason: OpenReason::RetryAfter,
            break_for: Duration::from_secs(7),
        }]
    );
    // The status page's log names the reason.
    let log = h.gateway.transitions();
    assert_eq!(log.last().unwrap().reason, Some("retry_after"));

    // Refused by the gateway itself for 7 s, with what is left.
    let refused = get(&url).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["retry-after"], "7");
    h.clock.advance(Duration::from_millis(6_500));
    let refused = get(&url).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(
        h.received.load(Ordering::SeqCst),
        1,
        "the upstream was left alone"
    );

    // Then a probe is forwarded, and closes the breaker.
    h.clock.advance(Duration::from_millis(500));
    let probe = get(&url).await;
    assert_eq!(probe.status, 200);
    assert_eq!(h.received.load(Ordering::SeqCst), 2);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_key_turns_it_on_and_the_maximum_break_caps_it() {
    let h = start("honor-retry-after = true", "", "3600").await;
    let url = format!("http://{}/quotes/eur", h.proxy);
    assert_eq!(get(&url).await.status, 429);
    let refused = get(&url).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["retry-after"], "60", "max-break-duration");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_a_429_is_only_ignored() {
    let h = start("", "", "7").await;
    let url = format!("http://{}/quotes/eur", h.proxy);
    assert_eq!(get(&url).await.status, 429);
    assert_eq!(
        get(&url).await.status,
        200,
        "forwarded: the breaker stayed closed"
    );
    let breaker = h.gateway.registry().get("quote-service").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(h.received.load(Ordering::SeqCst), 2);
}
