//! Observability: one access log line per request (request id, cluster, host, status,
//! duration, breaker decision) through `tracing`; request counts and a latency histogram per
//! cluster, histogram buckets for cutout's call durations; one state everywhere (the state gauge
//! says what `/breakers` says); durations shown to people in humantime style.

mod common;

use std::time::Duration;

use common::{get, lines_with, log, metric_value, send, start, start_config};
use cutout::State;
use cutout_gateway::upstream::{Mode, Upstream};
use http::Method;
use tokio::sync::watch;

/// The metrics recorder is the process's: every gateway these tests start exports its
/// `account-service` breaker's state gauge under one name, so a test that opens or isolates
/// it would change what another reads. They run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_leaves_one_access_log_line() {
    let _one = ONE_AT_A_TIME.lock().await;
    let _ = log();
    let h = start("").await;
    let reply = send(
        Method::GET,
        &format!("http://{}/accounts/7", h.proxy),
        &[("x-request-id", "req-ok-1")],
        "",
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-request-id"], "req-ok-1", "echoed back");
    let lines = lines_with(&["request_id=req-ok-1"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    for part in [
        "cluster=account-service",
        &format!("host={}", h.account_addr),
        "status=200",
        "decision=admitted",
        "method=GET",
        "path=/accounts/7",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    let duration = line
        .split("duration=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a duration");
    assert!(
        duration.ends_with("ms") || duration.ends_with("µs") || duration.ends_with('s'),
        "humantime style: {duration}"
    );

    // A request without an id gets one, in the answer and in the log.
    let reply = get(&format!("http://{}/transfers/1", h.proxy)).await;
    let id = reply.headers["x-request-id"].to_str().unwrap().to_owned();
    assert!(!id.is_empty());
    assert_eq!(lines_with(&[&format!("request_id={id}")]).len(), 1);

    // A refusal says so.
    h.gateway.registry().isolate("account-service").unwrap();
    send(
        Method::GET,
        &format!("http://{}/accounts/7", h.proxy),
        &[("x-request-id", "req-refused-1")],
        "",
    )
    .await;
    let lines = lines_with(&["request_id=req-refused-1"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("status=503"), "{}", lines[0]);
    assert!(lines[0].contains("decision=refused"), "{}", lines[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_latency_are_exported_per_cluster_with_histogram_buckets() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (stop, _) = watch::channel(false);
    let up = Upstream::new("svc");
    let addr = common::serve_upstream(&up, &stop).await;
    // Default breaker settings (adaptive): calls are timed, so cutout's duration histogram
    // has samples.
    let h = start_config(&format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [[routes]]\nprefix = \"/\"\ncluster = \"metered\"\n\
         [clusters.metered]\nupstreams = [\"http://127.0.0.1:{}\"]\n",
        addr.port()
    ))
    .await;
    for n in 0..30 {
        assert_eq!(get(&format!("http://{}/m/{n}", h.proxy)).await.status, 200);
    }
    let text = get(&format!("http://{}/metrics", h.admin)).await.body;
    let requests: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with("cutout_gateway_requests_total{")
                && l.contains("cluster=\"metered\"")
                && l.contains("code=\"2xx\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(requests, 30.0, "{text}");
    assert!(
        text.contains(
            "cutout_gateway_request_duration_seconds_bucket{cluster=\"metered\",le=\"0.005\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains("cutout_call_duration_seconds_bucket{breaker=\"metered\",le=\"0.005\"}"),
        "a histogram with buckets, not a summary: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_gauge_says_what_breakers_says() {
    let _one = ONE_AT_A_TIME.lock().await;
    let h = start("").await;
    h.account.set_mode(Mode::Fail);
    for _ in 0..5 {
        get(&format!("http://{}/accounts/1", h.proxy)).await;
    }
    h.clock.advance(Duration::from_secs(30));
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert_eq!(breaker.state(), State::HalfOpen);
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("http://{}/breakers", h.admin)).await.body).unwrap();
    assert_eq!(json["breakers"][0]["state"], "half_open");
    let text = get(&format!("http://{}/metrics", h.admin)).await.body;
    let gauge = |state: &str| {
        metric_value(
            &text,
            &format!("cutout_state{{breaker=\"account-service\",state=\"{state}\"}}"),
        )
    };
    assert_eq!(
        (gauge("half_open"), gauge("open")),
        (Some(1.0), Some(0.0)),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_in_messages_read_as_people_write_them() {
    let _one = ONE_AT_A_TIME.lock().await;
    let h = start("").await;
    h.account.set_mode(Mode::Fail);
    for _ in 0..5 {
        get(&format!("http://{}/accounts/1", h.proxy)).await;
    }
    let refused = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(refused.status, 503);
    assert!(refused.body.contains("retry after 30s"), "{}", refused.body);
    h.transfer.set_mode(Mode::Hang);
    let timed_out = get(&format!("http://{}/transfers/1", h.proxy)).await;
    assert_eq!(timed_out.status, 504);
    assert!(timed_out.body.contains("300ms"), "{}", timed_out.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_s_refusals_are_logged_one_in_access_log_refused() {
    let _one = ONE_AT_A_TIME.lock().await;
    let _ = log();
    for (extra, lines_expected, sampled) in
        [("", 3, Some(100)), ("access-log-refused = 1", 250, None)]
    {
        let h = start(extra).await;
        h.gateway.registry().isolate("account-service").unwrap();
        let path = format!("/accounts/sampled-{}", lines_expected);
        let mark = common::log_mark();
        for _ in 0..250 {
            assert_eq!(get(&format!("http://{}{path}", h.proxy)).await.status, 503);
        }
        let lines = common::access_lines(&path, mark, None);
        assert_eq!(lines.len(), lines_expected, "{extra:?}");
        assert!(lines.iter().all(|l| l.contains("decision=refused")));
        match sampled {
            Some(n) => assert!(lines.iter().all(|l| l.contains(&format!("sampled={n}")))),
            None => assert!(lines.iter().all(|l| !l.contains("sampled="))),
        }
        // The metrics count every one.
        let metrics = get(&format!("http://{}/metrics", h.admin)).await.body;
        let refused = metrics
            .lines()
            .filter(|l| {
                l.starts_with("cutout_gateway_requests_total")
                    && l.contains("account-service")
                    && l.contains("refused")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        assert!(refused >= 250.0, "{refused}: {metrics}");
    }
}
