//! Per-host outlier ejection inside a cluster: one dead upstream of two is ejected by its own
//! breaker while the healthy host keeps serving and the cluster's breaker stays closed; the
//! ejection cap (`max-ejection-percent`) keeps the cluster breaker for whole-cluster failure; a
//! cluster with every host ejected answers 503; an ejected host comes back through a probe;
//! an operator can isolate one host.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{dead_port, get, post, serve_upstream, start_config};
use cutout::State;
use cutout_gateway::upstream::{Mode, Upstream};
use tokio::sync::watch;

const CONFIG: &str = r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "300ms"

[[routes]]
prefix = "/"
cluster = "pool"

[clusters.pool]
upstreams = ["http://127.0.0.1:{a}", "http://127.0.0.1:{b}"]
{cluster_extra}

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

fn config(a: u16, b: u16, cluster_extra: &str) -> String {
    CONFIG
        .replace("{a}", &a.to_string())
        .replace("{b}", &b.to_string())
        .replace("{cluster_extra}", cluster_extra)
}

fn cluster_state(h: &common::Custom) -> State {
    h.gateway.registry().state("pool").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_dead_host_of_two_is_ejected_and_the_healthy_host_keeps_serving() {
    let (stop, _) = watch::channel(false);
    let healthy = Upstream::new("healthy");
    let healthy_addr = serve_upstream(&healthy, &stop).await;
    let h = start_config(&config(dead_port(), healthy_addr.port(), "")).await;
    let mut statuses = Vec::new();
    for n in 0..40 {
        statuses.push(
            get(&format!("http://{}/x/{n}", h.proxy))
                .await
                .status
                .as_u16(),
        );
    }
    let failed = statuses.iter().filter(|s| **s != 200).count();
    assert!(
        failed <= 5,
        "only the calls that ejected the dead host fail: {statuses:?}"
    );
    assert!(
        statuses[10..].iter().all(|s| *s == 200),
        "the healthy host serves everything once the dead one is ejected: {statuses:?}"
    );
    assert_eq!(cluster_state(&h), State::Closed, "{statuses:?}");
    assert!(healthy.started() >= 35, "{}", healthy.started());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_spreads_over_healthy_hosts() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        serve_upstream(&a, &stop).await,
        serve_upstream(&b, &stop).await,
    );
    let h = start_config(&config(a_addr.port(), b_addr.port(), "")).await;
    for n in 0..10 {
        assert_eq!(get(&format!("http://{}/x/{n}", h.proxy)).await.status, 200);
    }
    assert_eq!((a.started(), b.started()), (5, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_host_fails_the_cap_leaves_it_to_the_cluster_breaker() {
    // Default max-ejection-percent (50): one host of two may be ejected; the other's failures
    // are the cluster's.
    let h = start_config(&config(dead_port(), dead_port(), "")).await;
    let mut statuses = Vec::new();
    for n in 0..20 {
        statuses.push(
            get(&format!("http://{}/x/{n}", h.proxy))
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(cluster_state(&h), State::Open, "{statuses:?}");
    let refused = get(&format!("http://{}/x", h.proxy)).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["retry-after"], "30");
    assert!(refused.body.contains("pool"), "{}", refused.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_every_host_ejected_answers_503() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    a.set_mode(Mode::Fail);
    b.set_mode(Mode::Fail);
    let (a_addr, b_addr) = (
        serve_upstream(&a, &stop).await,
        serve_upstream(&b, &stop).await,
    );
    // No panic threshold: with it (the default) a cluster with no healthy host spreads over
    // every host rather than refuse (tests/routing.rs).
    let h = start_config(&config(
        a_addr.port(),
        b_addr.port(),
        "max-ejection-percent = 100\npanic-threshold = 0",
    ))
    .await;
    for n in 0..10 {
        assert_eq!(get(&format!("http://{}/x/{n}", h.proxy)).await.status, 500);
    }
    let before = (a.started(), b.started());
    assert_eq!(before, (5, 5));
    let reply = get(&format!("http://{}/x", h.proxy)).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(reply.headers["retry-after"], "30");
    assert!(
        reply.body.contains("pool") && reply.body.contains("ejected"),
        "{}",
        reply.body
    );
    assert_eq!((a.started(), b.started()), before, "no host is called");
    assert_eq!(
        cluster_state(&h),
        State::Closed,
        "the hosts were ejected, not the cluster"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_host_comes_back_through_a_probe_after_its_break() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    a.set_mode(Mode::Fail);
    let (a_addr, b_addr) = (
        serve_upstream(&a, &stop).await,
        serve_upstream(&b, &stop).await,
    );
    let h = start_config(&config(a_addr.port(), b_addr.port(), "")).await;
    for n in 0..20 {
        get(&format!("http://{}/x/{n}", h.proxy)).await;
    }
    assert_eq!(a.started(), 5, "ejected after its five failures");
    a.set_mode(Mode::Ok);
    for n in 0..4 {
        assert_eq!(get(&format!("http://{}/y/{n}", h.proxy)).await.status, 200);
    }
    assert_eq!(a.started(), 5, "still ejected during its break");
    h.clock.advance(Duration::from_secs(30));
    for n in 0..10 {
        assert_eq!(get(&format!("http://{}/z/{n}", h.proxy)).await.status, 200);
    }
    assert!(
        a.started() >= 9,
        "the probe closed it, round-robin includes it again: {}",
        a.started()
    );
    assert_eq!(cluster_state(&h), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_can_isolate_one_host() {
    let (stop, _) = watch::channel(false);
    let (a, b) = (Upstream::new("a"), Upstream::new("b"));
    let (a_addr, b_addr) = (
        serve_upstream(&a, &stop).await,
        serve_upstream(&b, &stop).await,
    );
    let h = start_config(&config(a_addr.port(), b_addr.port(), "")).await;
    // Host breakers are named `<cluster>/<host:port>`; the slash is written %2F in the path.
    let id = format!("pool%2F127.0.0.1%3A{}", a_addr.port());
    let reply = post(&format!("http://{}/breakers/{id}/isolate", h.admin)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply.body.contains("\"state\":\"isolated\""),
        "{}",
        reply.body
    );
    for n in 0..6 {
        assert_eq!(get(&format!("http://{}/x/{n}", h.proxy)).await.status, 200);
    }
    assert_eq!((a.started(), b.started()), (0, 6));
    let reply = post(&format!("http://{}/breakers/{id}/reset", h.admin)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    for n in 0..4 {
        assert_eq!(get(&format!("http://{}/y/{n}", h.proxy)).await.status, 200);
    }
    assert_eq!(a.started(), 2);
    let _ = Arc::clone(&h.gateway);
}
