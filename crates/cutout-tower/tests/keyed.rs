//! Keyed breakers: per-host isolation, idle eviction, bounds, the open cap, per-key control.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Recovery, RejectReason, Settings, State};
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

    // Once its call is gone (dropped: nothing recorded) the busy key can go too. The open one
    // stays while it serves its break and its half-open wait (30 s + 60 s); once nobody has
    // probed it for that long it is a ghost, evicted when idle (its growth kept as a scar).
    drop(hanging);
    tokio::time::advance(Duration::from_secs(20)).await;
    assert_eq!(hosts.evict_idle(), 0);
    tokio::time::advance(Duration::from_secs(41)).await;
    assert_eq!(hosts.evict_idle(), 3, "hang, new and the ghost of fail");
    assert!(hosts.is_empty());
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

    // Every key open: a new host still gets its breaker, beyond max_keys, and is counted.
    for _ in 0..3 {
        let _ = call("http://fail1.example/").await;
    }
    for _ in 0..3 {
        let _ = call("http://fail2.example/").await;
    }
    assert_eq!(hosts.stats().open_keys, 2);
    let response = call("http://d.example/").await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(hosts.contains(&key("http://d.example/")));
    assert_eq!(hosts.stats().over_capacity, 1);
    assert_eq!(hosts.len(), 3);
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
    assert_eq!(stats.open_slots, 1);
    // The window is kept: every failure from the third on trips again and is kept closed.
    assert_eq!(stats.suppressed_opens, 7, "every failure from the third");
    let snapshot = hosts.snapshot(&b).unwrap();
    assert_eq!(snapshot.suppressed_opens, 7);
    assert_eq!(snapshot.breaker.suppressed_opens, 7);
    assert_eq!(snapshot.breaker.failures, 9);
    assert_eq!(snapshot.breaker.consecutive_failures, 9);
    assert_eq!(hosts.snapshot(&a).unwrap().suppressed_opens, 0);

    // A free slot: the very next failure of b opens it.
    assert!(hosts.reset(&a));
    for _ in 0..4 {
        let _ = service
            .ready()
            .await
            .unwrap()
            .call(request("http://fail-b.example/"))
            .await;
    }
    assert_eq!(count(&calls, "fail-b.example"), 10);
    assert_eq!(hosts.get(&b).unwrap().state(), State::Open);
    assert_eq!(hosts.stats().suppressed_opens, 7);
    assert_eq!(hosts.stats().open_slots, 1);
}

/// A failing call through `breaker`; whether it ran (was not refused).
fn fail(breaker: &Breaker) -> bool {
    !breaker
        .call(|| Err::<(), _>("down"))
        .is_err_and(|e| e.is_rejected())
}

/// A successful call through `breaker`; whether it ran.
fn succeed(breaker: &Breaker) -> bool {
    breaker.call(|| Ok::<_, ()>(())).is_ok()
}

/// Opens (or tries to open) a closed `breaker` with three failures.
fn trip(breaker: &Breaker) {
    for _ in 0..3 {
        assert!(fail(breaker), "a closed breaker lets calls through");
    }
}

#[test]
fn a_capped_key_never_refuses_and_keeps_its_window() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(2)
        .build();
    let [a, b, c] = ["a", "b", "c"].map(|k| hosts.breaker(&k.to_owned()).unwrap());
    trip(&a);
    trip(&b);
    assert_eq!((a.state(), b.state()), (State::Open, State::Open));

    // c fails over and over: never refused, never open, every failure recorded.
    for n in 1..=50u64 {
        assert!(fail(&c), "a capped key is never refused");
        assert_eq!(c.peek().0, State::Closed);
        clock.advance(Duration::from_millis(10));
        let snapshot = c.snapshot();
        assert_eq!(snapshot.failures, n);
        assert_eq!(snapshot.consecutive_failures, n as u32);
        assert_eq!(snapshot.suppressed_opens, n.saturating_sub(2));
    }
    // A success in between is recorded too, and the next trip is asked again.
    assert!(succeed(&c));
    assert_eq!(c.snapshot().consecutive_failures, 0);
    trip(&c);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.snapshot().suppressed_opens, 49);
    assert_eq!(
        c.snapshot().consecutive_opens,
        0,
        "no break growth from refused trips"
    );

    let stats = hosts.stats();
    assert_eq!((stats.open_keys, stats.open_slots), (2, 2));
    assert_eq!(stats.suppressed_opens, 49);
    assert_eq!(
        hosts.snapshot(&"c".to_owned()).unwrap().suppressed_opens,
        49
    );
    assert_eq!(hosts.snapshot(&"a".to_owned()).unwrap().suppressed_opens, 0);
}

#[test]
fn a_slot_frees_when_its_key_closes_or_is_reset_through_its_handle() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&k.to_owned()).unwrap());
    trip(&a);
    trip(&b);
    assert_eq!((a.state(), b.state()), (State::Open, State::Closed));

    // Half-open, a still holds its slot; a failed probe re-opens it within that slot.
    clock.advance(Duration::from_secs(31));
    assert!(fail(&a), "a probe");
    assert_eq!(a.state(), State::Open);
    assert!(fail(&b));
    assert_eq!(b.state(), State::Closed);
    clock.advance(Duration::from_secs(61));
    assert!(succeed(&a), "a probe");
    assert_eq!(a.peek().0, State::HalfOpen);
    assert!(fail(&b));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().suppressed_opens, 3);

    // a closes after its second successful probe: b's next failure opens it.
    assert!(succeed(&a), "a probe");
    assert_eq!(a.state(), State::Closed);
    assert_eq!(hosts.stats().open_slots, 0, "a closed key holds no slot");
    assert!(fail(&b));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().suppressed_opens, 3);
    assert_eq!(b.snapshot().consecutive_failures, 6);

    // b holds the slot; reset directly through its handle (no event), it frees it.
    trip(&a);
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.snapshot().suppressed_opens, 1);
    b.reset();
    assert!(fail(&a));
    assert_eq!(a.state(), State::Open);

    // Isolating or disabling the open key frees its slot as well.
    trip(&b);
    assert_eq!(b.state(), State::Closed);
    a.isolate();
    assert!(fail(&b));
    assert_eq!(b.state(), State::Open);
    trip(&hosts.breaker(&"c".to_owned()).unwrap());
    assert_eq!(hosts.get(&"c".to_owned()).unwrap().state(), State::Closed);
    b.disable();
    let c = hosts.get(&"c".to_owned()).unwrap();
    assert!(fail(&c));
    assert_eq!(c.state(), State::Open);

    // A key re-tripping after a reset of its own takes its slot again, counted once.
    c.reset();
    trip(&c);
    assert_eq!(c.state(), State::Open);
    let stats = hosts.stats();
    assert_eq!((stats.open_keys, stats.open_slots), (1, 1));
    assert_eq!(stats.suppressed_opens, 4 + 1 + 1, "b, a, c");
}

#[test]
fn a_recovering_key_keeps_its_slot_until_its_ramp_ends() {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(10))
        .jitter(Jitter::None)
        .adaptive(false)
        .probe_successes(1)
        .recovery(Some(Recovery::over(1.0)))
        .build()
        .unwrap();
    let hosts = KeyedBreakers::<String>::builder(settings)
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&k.to_owned()).unwrap());
    trip(&a);
    clock.advance(Duration::from_secs(11));
    assert!(succeed(&a), "a probe");
    assert_eq!(a.peek().0, State::Recovering);

    // A failed ramp call re-opens a without asking: b must not have taken the slot.
    trip(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(hosts.stats().open_slots, 1);
    for _ in 0..100 {
        if fail(&a) {
            break;
        }
    }
    assert_eq!(a.state(), State::Open);
    assert!(fail(&b));
    assert_eq!(b.state(), State::Closed);

    // Once a's ramp has run its course (time, and successes earning the traffic back) it is
    // closed and b opens.
    clock.advance(Duration::from_secs(21));
    assert!(succeed(&a), "a probe");
    assert_eq!(a.peek().0, State::Recovering);
    for _ in 0..1000 {
        clock.advance(Duration::from_millis(100));
        succeed(&a);
        if a.peek().0 == State::Closed {
            break;
        }
        assert!(fail(&b));
        assert_eq!(b.state(), State::Closed, "a recovering key keeps its slot");
    }
    assert_eq!(a.peek().0, State::Closed);
    assert!(b.snapshot().suppressed_opens > 2);
    assert!(fail(&b));
    assert_eq!(b.state(), State::Open);
}

#[test]
fn concurrent_trips_never_exceed_the_cap() {
    const KEYS: usize = 4;
    const CALLS: usize = 200_000;
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_micros(200))
        .max_break_duration(Duration::from_millis(1))
        .jitter(Jitter::None)
        .adaptive(false)
        .probe_successes(1)
        .build()
        .unwrap();
    let hosts = KeyedBreakers::<String>::builder(settings)
        .max_open(1)
        .build();
    let breakers: Vec<Breaker> = (0..KEYS)
        .map(|k| hosts.breaker(&format!("key-{k}")).unwrap())
        .collect();
    let opened = Arc::new(AtomicU64::new(0));
    for breaker in &breakers {
        let opened = Arc::clone(&opened);
        breaker.subscribe(move |event| {
            if matches!(event.transition, cutout::Transition::Opened { .. }) {
                opened.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let running = AtomicUsize::new(KEYS);
    let (samples, most) = std::thread::scope(|scope| {
        for breaker in &breakers {
            let running = &running;
            scope.spawn(move || {
                for i in 0..CALLS {
                    // Runs of failures, then of successes that let probes close the breaker.
                    let _ = if i % 64 < 16 {
                        fail(breaker)
                    } else {
                        succeed(breaker)
                    };
                }
                running.fetch_sub(1, Ordering::Release);
            });
        }
        let sampler = scope.spawn(|| {
            let (mut samples, mut most) = (0u64, 0usize);
            while running.load(Ordering::Acquire) > 0 {
                // Two passes agreeing on every generation: nothing moved between them, so the
                // first pass is the state of every key at one moment.
                let first: Vec<(State, u32)> = breakers.iter().map(Breaker::peek).collect();
                let second: Vec<(State, u32)> = breakers.iter().map(Breaker::peek).collect();
                if first != second {
                    continue;
                }
                let open = first
                    .iter()
                    .filter(|(state, _)| matches!(state, State::Open | State::HalfOpen))
                    .count();
                assert!(open <= 1, "{open} keys open at once: {first:?}");
                samples += 1;
                most = most.max(open);
            }
            (samples, most)
        });
        sampler.join().unwrap()
    });
    let stats = hosts.stats();
    assert!(samples > 0);
    assert!(stats.open_slots <= 1);
    assert!(
        opened.load(Ordering::Relaxed) > 1,
        "the slot changed hands (opened {} times, {samples} samples, most {most})",
        opened.load(Ordering::Relaxed)
    );
    assert!(stats.suppressed_opens > 0, "{stats:?}");
    let suppressed: u64 = breakers.iter().map(|b| b.snapshot().suppressed_opens).sum();
    assert_eq!(suppressed, stats.suppressed_opens);
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

#[tokio::test(start_paused = true)]
async fn a_disabled_key_stays_disabled_however_long_it_is_idle() {
    let hosts: KeyedBreakers<String> = KeyedBreakers::builder(settings())
        .clock(TokioClock::new())
        .idle_after(Duration::from_secs(60))
        .build();
    let name = "http://off.example:80".to_string();
    hosts.breaker(&name).unwrap();
    assert!(hosts.disable(&name));
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(
        hosts.evict_idle(),
        0,
        "disabled until reset, not until idle"
    );
    assert_eq!(
        hosts.breaker(&name).unwrap().state(),
        cutout::State::Disabled
    );
    // Reset, it is closed and idle: the next sweep may take it.
    assert!(hosts.reset(&name));
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(hosts.evict_idle(), 1);
}
