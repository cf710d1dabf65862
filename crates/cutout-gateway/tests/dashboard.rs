//! The Grafana dashboard in `dashboards/cutout-gateway.json`: every query (panel targets and template
//! variables) names only series that a running gateway exports. A gateway with a two-host cluster (one
//! host failing, so ejected), a single-host cluster that opens, an impatient client and timed breaker
//! calls is scraped after that traffic, and every metric name of every query must be in the scrape.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{get, give_up_after, serve_upstream, start_config};
use cutout_gateway::upstream::{Mode, Upstream};
use serde_json::Value;
use tokio::sync::watch;

const DASHBOARD: &str = include_str!("../dashboards/cutout-gateway.json");

/// Every PromQL expression of the dashboard, with where it is.
fn queries(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let here = format!("{at}.{key}");
                match (key.as_str(), v) {
                    ("expr" | "definition", Value::String(q)) => out.push((here, q.clone())),
                    ("query", Value::String(q)) => out.push((here, q.clone())),
                    _ => queries(v, &here, out),
                }
            }
        }
        Value::Array(list) => {
            for (n, v) in list.iter().enumerate() {
                queries(v, &format!("{at}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// The metric names in a PromQL expression: identifiers outside label matchers and strings
/// that start with `cutout_`.
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let (mut in_braces, mut in_string) = (false, false);
    let bytes = query.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'"' => in_string = !in_string,
            b'{' if !in_string => in_braces = true,
            b'}' if !in_string => in_braces = false,
            _ => {}
        }
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if !in_braces && !in_string && starts_word && query[i..].starts_with("cutout_") {
            let end = query[i..]
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == ':'))
                .map_or(query.len(), |n| i + n);
            names.push(query[i..end].to_owned());
            i = end;
            continue;
        }
        i += 1;
    }
    names
}

/// The series names of a Prometheus text exposition.
fn exported(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn promql_names_are_found() {
    assert_eq!(
        metric_names(
            r#"sum by (cluster) (rate(cutout_gateway_requests_total{cluster=~"cutout_x",code="5xx"}[1m])) / cutout_state"#
        ),
        ["cutout_gateway_requests_total", "cutout_state"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_query_of_the_dashboard_names_a_series_the_gateway_exports() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("valid JSON");
    assert_eq!(dashboard["uid"], "cutout-gateway");
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let targets = panel["targets"].as_array().map_or(0, Vec::len);
        assert!(targets > 0, "panel {} has no query", panel["title"]);
    }
    let mut all = Vec::new();
    queries(&dashboard, "", &mut all);
    assert!(all.len() >= 15, "{all:#?}");

    let (stop, _) = watch::channel(false);
    let (a, b, single) = (
        Upstream::new("a"),
        Upstream::new("b"),
        Upstream::new("single"),
    );
    b.set_mode(Mode::Fail);
    single.set_mode(Mode::Fail);
    let ports = [
        serve_upstream(&a, &stop).await.port(),
        serve_upstream(&b, &stop).await.port(),
        serve_upstream(&single, &stop).await.port(),
    ];
    let h = start_config(&format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "2s"
[[routes]]
prefix = "/pool"
cluster = "pool"
[[routes]]
prefix = "/single"
cluster = "single"
[clusters.pool]
upstreams = ["http://127.0.0.1:{}", "http://127.0.0.1:{}"]
[clusters.single]
upstreams = ["http://127.0.0.1:{}"]
[breakers.defaults]
minimum-calls = 5
failure-ratio = 0.5
consecutive-failures = "off"
slow-call-threshold = "1s"
jitter = "none"
"#,
        ports[0], ports[1], ports[2]
    ))
    .await;
    for n in 0..30 {
        get(&format!("http://{}/pool/{n}", h.proxy)).await;
        get(&format!("http://{}/single/{n}", h.proxy)).await;
    }
    get(&format!("http://{}/nowhere", h.proxy)).await;
    a.set_mode(Mode::Hang);
    give_up_after(h.proxy, "/pool/slow", Duration::from_millis(300)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let scrape = get(&format!("http://{}/metrics", h.admin)).await;
    assert_eq!(scrape.status, 200);
    let names = exported(&scrape.body);

    let mut missing = Vec::new();
    for (at, query) in &all {
        let found = metric_names(query);
        assert!(
            !found.is_empty() || query.trim().is_empty(),
            "{at}: no cutout metric in {query:?}"
        );
        for name in found {
            if !names.contains(&name) {
                missing.push(format!("{at}: {name} (in {query})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "queries name series the gateway does not export:\n{}\n\nexported: {names:#?}",
        missing.join("\n")
    );
}
