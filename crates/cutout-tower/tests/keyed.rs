//! Keyed breakers: per-host isolation, idle eviction, bounds, the open cap, per-key control.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::{Jitter, RejectReason, Settings, State};
use cutout_tower::keyed::{HostKey, KeyedBreakers, KeyedLayer};
use cutout_tower::{HttpClassifier, TokioClock};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt};

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap()
}

type Calls = Arc<Mutex<HashMap<String, usize>>>;

/// A dependency whose hosts named `fail*` answer 500, `hang*` never answer, others 200; it
/// counts the calls per host.
fn upstream(
    calls: Calls,
) -> impl Service<
    Request<String>,
    Response = Response<String>,
    Error = std::io::Error,
    Future = impl Future<Output = Result<Response<String>, std::io::Error>> + Send,
> + Clone {
    tower::service_fn(move |request: Request<String>| {
        let host = request.uri().host().unwrap_or_default().to_owned();
        *calls.lock().unwrap().entry(host.clone()).or_default() += 1;
        async move {
            if host.starts_with("hang") {
                std::future::pending::<()>().await;
            }
            let status = if host.starts_with("fail") {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::OK
            };
            let mut response = Response::new(String::new());
            *response.status_mut() = status;
            Ok(response)
        }
    })
}

fn request(url: &str) -> Request<String> {
    Request::builder().uri(url).body(String::new()).unwrap()
}

fn key(url: &str) -> HostKey {
    HostKey::of(&request(url))
}

fn count(calls: &Calls, host: &str) -> usize {
    calls.lock().unwrap().get(host).copied().unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn one_hosts_failures_leave_anothers_breaker_closed() {
    let calls = Calls::default();
    let hosts = KeyedBreakers::builder(settings())
        .clock(TokioClock::new())
        .build();
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream(calls.clone()));

    for _ in 0..10 {
        let failed = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail.example/rates"))
            .await;
        let ok = service
            .ready()
            .await
            .unwrap()
            .call(request("https://ok.example/rates"))
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
        if let Err(error) = failed {
            assert_eq!(
                error.rejection().unwrap().breaker().as_str(),
                "http://fail.example:80"
            );
        }
    }
    assert_eq!(count(&calls, "fail.example"), 3, "refused after the third");
    assert_eq!(count(&calls, "ok.example"), 10);
    assert_eq!(
        hosts.get(&key("http://fail.example/")).unwrap().state(),
        State::Open
    );
    assert_eq!(
        hosts.get(&key("https://ok.example/")).unwrap().state(),
        State::Closed
    );
    // Same host, other port: another key.
    assert!(!hosts.contains(&key("http://fail.example:8080/")));
    assert_eq!(
        hosts.keys(),
        vec![key("http://fail.example/"), key("https://ok.example/")]
    );
}

#[tokio::test(start_paused = true)]
async fn idle_keys_are_evicted_but_not_busy_or_open_ones() {
    let calls = Calls::default();
    let hosts = KeyedBreakers::builder(settings())
        .clock(TokioClock::new())
        .idle_after(Duration::from_secs(60))
        .build();
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream(calls.clone()));

    let _ = service
        .ready()
        .await
        .unwrap()
        .call(request("http://idle.example/"))
        .await;
    for _ in 0..3 {
        let _ = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail.example/"))
            .await;
    }
    let hanging = service
        .ready()
        .await
        .unwrap()
        .call(request("http://hang.example/"));
    assert_eq!(hosts.len(), 3);
    assert_eq!(
        hosts
            .snapshot(&key("http://hang.example/"))
            .unwrap()
            .in_flight,
        1
    );

    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(hosts.evict_idle(), 0, "nothing idle for 60 s yet");
    tokio::time::advance(Duration::from_secs(2)).await;

    // The next call sweeps: the idle key goes; the open one and the busy one stay.
    let _ = service
        .ready()
        .await
        .unwrap()
        .call(request("http://new.example/"))
        .await;
    assert!(!hosts.contains(&key("http://idle.example/")));
    assert!(hosts.contains(&key("http://fail.example/")));
    assert!(hosts.contains(&key("http://hang.example/")));
    assert_eq!(hosts.stats().evicted, 1);

    // Once its call is gone (dropped: nothing recorded) the busy key can go too; the open one
    // stays for as long as it is open.
    drop(hanging);
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(hosts.evict_idle(), 2, "hang and new");
    assert_eq!(hosts.keys(), vec![key("http://fail.example/")]);
}

#[tokio::test(start_paused = true)]
async fn a_full_map_evicts_the_least_recently_used_closed_key() {
    let calls = Calls::default();
    let hosts = KeyedBreakers::builder(settings())
        .clock(TokioClock::new())
        .max_keys(2)
        .build();
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream(calls.clone()));
    let mut call = async |url: &str| {
        tokio::time::advance(Duration::from_millis(10)).await;
        service.ready().await.unwrap().call(request(url)).await
    };
    let _ = call("http://a.example/").await;
    let _ = call("http://b.example/").await;
    let _ = call("http://a.example/").await;
    let _ = call("http://c.example/").await;
    assert_eq!(
        hosts.keys(),
        vec![key("http://a.example/"), key("http://c.example/")]
    );

    // Every key open: a new host goes through unguarded, and is counted.
    for _ in 0..3 {
        let _ = call("http://fail1.example/").await;
    }
    for _ in 0..3 {
        let _ = call("http://fail2.example/").await;
    }
    assert_eq!(hosts.stats().open_keys, 2);
    let response = call("http://d.example/").await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(!hosts.contains(&key("http://d.example/")));
    assert_eq!(hosts.stats().unguarded_calls, 1);
}

#[tokio::test(start_paused = true)]
async fn the_open_cap_keeps_extra_keys_closed_and_reports_it() {
    let calls = Calls::default();
    let hosts = KeyedBreakers::builder(settings())
        .clock(TokioClock::new())
        .max_open(1)
        .build();
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream(calls.clone()));

    for _ in 0..6 {
        let _ = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail-a.example/"))
            .await;
    }
    assert_eq!(count(&calls, "fail-a.example"), 3);
    let a = key("http://fail-a.example/");
    let b = key("http://fail-b.example/");
    assert_eq!(hosts.get(&a).unwrap().state(), State::Open);

    // The second failing host would open; the cap keeps it closed and its calls go through.
    for _ in 0..9 {
        let response = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail-b.example/"))
            .await
            .expect("never refused while the cap holds");
        assert_eq!(response.status(), 500);
    }
    assert_eq!(count(&calls, "fail-b.example"), 9);
    assert_eq!(hosts.get(&b).unwrap().state(), State::Closed);
    let stats = hosts.stats();
    assert_eq!(stats.open_keys, 1);
    assert_eq!(stats.suppressed_opens, 3, "tripped every third failure");
    assert_eq!(hosts.snapshot(&b).unwrap().suppressed_opens, 3);
    assert_eq!(hosts.snapshot(&a).unwrap().suppressed_opens, 0);

    // A free slot: the next trip of b opens it.
    assert!(hosts.reset(&a));
    for _ in 0..4 {
        let _ = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail-b.example/"))
            .await;
    }
    assert_eq!(count(&calls, "fail-b.example"), 12);
    assert_eq!(hosts.get(&b).unwrap().state(), State::Open);
    assert_eq!(hosts.stats().suppressed_opens, 3);
}

#[tokio::test(start_paused = true)]
async fn keys_can_be_isolated_reset_and_inspected() {
    let calls = Calls::default();
    let hosts = KeyedBreakers::builder(settings())
        .clock(TokioClock::new())
        .max_open(1)
        .build();
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream(calls.clone()));

    // Isolating a host that has not been called yet creates it; isolated keys do not count
    // against the open cap.
    let db = key("https://db.example/");
    assert!(hosts.isolate(&db));
    let refused = service
        .ready()
        .await
        .unwrap()
        .call(request("https://db.example/query"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.rejection().unwrap().reason(),
        RejectReason::Isolated
    );
    assert_eq!(count(&calls, "db.example"), 0);
    for _ in 0..3 {
        let _ = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail.example/"))
            .await;
    }
    assert_eq!(
        hosts.get(&key("http://fail.example/")).unwrap().state(),
        State::Open
    );

    let snapshots = hosts.snapshots();
    assert_eq!(snapshots.len(), 2);
    assert_eq!(snapshots[0].1.id.as_str(), "http://fail.example:80");
    assert_eq!(snapshots[0].1.breaker.state, State::Open);
    assert_eq!(snapshots[1].1.id.as_str(), "https://db.example:443");
    assert_eq!(snapshots[1].1.breaker.state, State::Isolated);

    assert!(hosts.reset(&db));
    assert!(!hosts.reset(&key("http://unknown.example/")));
    let ok = service
        .ready()
        .await
        .unwrap()
        .call(request("https://db.example/query"))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[test]
fn host_keys_default_ports_and_fall_back_to_the_host_header() {
    assert_eq!(
        key("https://API.example/x").to_string(),
        "https://api.example:443"
    );
    assert_eq!(
        key("http://a.example:8080/").to_string(),
        "http://a.example:8080"
    );
    let origin_form = Request::builder()
        .uri("/path")
        .header("host", "svc.internal:9000")
        .body(())
        .unwrap();
    assert_eq!(
        HostKey::of(&origin_form).to_string(),
        "http://svc.internal:9000"
    );
}

#[test]
fn any_key_function_works() {
    let tenants = KeyedBreakers::<String>::builder(settings()).build();
    let layer = KeyedLayer::new(tenants.clone(), |request: &(String, u32)| request.0.clone());
    let mut service = layer.layer(tower::service_fn(|_: (String, u32)| async {
        Err::<(), _>(std::io::Error::other("down"))
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        for n in 0..5 {
            let _ = service
                .ready()
                .await
                .unwrap()
                .call(("acme".into(), n))
                .await;
        }
    });
    assert_eq!(tenants.keys(), vec!["acme".to_owned()]);
    assert_eq!(tenants.get(&"acme".into()).unwrap().state(), State::Open);
}
