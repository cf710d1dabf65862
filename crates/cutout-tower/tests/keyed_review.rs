//! Keyed breakers under review (issue 29): stale tripped keys, eviction that keeps what the
//! map is for, the open cap and the openings it does not decide.

use std::time::Duration;

use cutout::classify::Verdict;
use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Settings, State};
use cutout_tower::keyed::KeyedBreakers;

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(30))
        .max_break_duration(Duration::from_secs(600))
        .max_wait_in_half_open(Some(Duration::from_secs(60)))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap()
}

/// A failing call through `breaker`; whether it ran (was not refused).
fn fail(breaker: &Breaker) -> bool {
    !breaker
        .call(|| Err::<(), _>("down"))
        .is_err_and(|e| e.is_rejected())
}

/// Opens (or tries to open) a closed `breaker` with three failures.
fn trip(breaker: &Breaker) {
    for _ in 0..3 {
        assert!(fail(breaker), "a closed breaker lets calls through");
    }
}

fn open_count(breakers: &[&Breaker]) -> usize {
    breakers
        .iter()
        .filter(|b| matches!(b.peek().0, State::Open | State::HalfOpen))
        .count()
}

#[test]
fn a_tripped_key_never_called_again_gives_its_slot_back_once_its_half_open_wait_lapses() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&k.to_owned()).unwrap());
    trip(&a);
    assert_eq!(a.state(), State::Open);

    // The break lapses: a reads half-open (its next call would probe) and keeps its slot.
    clock.advance(Duration::from_secs(30));
    assert_eq!(a.state(), State::HalfOpen);
    assert_eq!(hosts.stats().open_slots, 1);
    trip(&b);
    assert_eq!(b.state(), State::Closed, "a still holds the one slot");

    // Nobody probes it for the whole half-open wait: the slot comes back, b trips.
    clock.advance(Duration::from_secs(60));
    assert_eq!(hosts.stats().open_slots, 0, "a ghost holds no slot");
    assert!(fail(&b));
    assert_eq!(b.state(), State::Open);

    // a called again: a key without a slot may not be half-open beyond the cap, so it is
    // closed (as a capped key stays closed) and its calls go through.
    assert!(fail(&a));
    assert_eq!(a.state(), State::Closed);
    assert!(open_count(&[&a, &b]) <= 1);
}

#[test]
fn a_stale_tripped_key_is_evicted_when_idle_and_keeps_its_break_growth() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .idle_after(Duration::from_secs(600))
        .max_open(1)
        .build();
    let name = "a".to_owned();
    let a = hosts.breaker(&name).unwrap();
    trip(&a);
    // Its probe fails: the break grows to 60 s.
    clock.advance(Duration::from_secs(30));
    assert!(fail(&a));
    assert_eq!(a.snapshot().current_break, Some(Duration::from_secs(60)));
    assert_eq!(a.snapshot().consecutive_opens, 2);

    // A day of silence: the key is a ghost, the sweep takes it, and a day later another
    // failing host can still trip.
    clock.advance(Duration::from_secs(86_400));
    assert_eq!(hosts.evict_idle(), 1, "a stale tripped key can be evicted");
    assert!(!hosts.contains(&name));
    let b = hosts.breaker(&"b".to_owned()).unwrap();
    trip(&b);
    assert_eq!(b.state(), State::Open, "the cap is not full of ghosts");

    // a comes back failing: its growth was remembered, the next break is the third.
    b.reset();
    let a = hosts.breaker(&name).unwrap();
    trip(&a);
    assert_eq!(a.state(), State::Open);
    assert_eq!(a.snapshot().current_break, Some(Duration::from_secs(120)));
}

#[test]
fn new_hosts_are_guarded_when_the_map_is_full_of_keys_that_cannot_be_evicted() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_keys(2)
        .build();
    hosts.isolate(&"a".to_owned());
    hosts.isolate(&"b".to_owned());
    let disabled = hosts.breaker(&"b".to_owned()).unwrap();
    disabled.disable();
    // Neither an isolated nor a disabled key is evicted, and a new host still gets a breaker.
    let c = hosts
        .breaker(&"c".to_owned())
        .expect("a new host is never left unguarded");
    trip(&c);
    assert_eq!(c.state(), State::Open);
    assert!(hosts.contains(&"a".to_owned()) && hosts.contains(&"b".to_owned()));
    assert_eq!(hosts.get(&"b".to_owned()).unwrap().state(), State::Disabled);
    let stats = hosts.stats();
    assert_eq!(stats.over_capacity, 1);
    assert_eq!(stats.keys, 3, "over max_keys by the keys that could not go");
}

#[test]
fn a_key_opened_by_hand_and_reopened_by_its_failed_probe_holds_a_slot() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&k.to_owned()).unwrap());
    // An operator's open holds no slot: b may trip.
    assert!(a.open_for(Duration::from_secs(10)));
    trip(&b);
    assert_eq!(b.state(), State::Open);
    // a's own probe fails: that opening is the breaker's, and the cap is full.
    clock.advance(Duration::from_secs(10));
    assert!(fail(&a), "a probe");
    assert_eq!(
        open_count(&[&a, &b]),
        1,
        "never 2 keys open with max_open(1)"
    );
    assert_eq!(a.state(), State::Closed, "kept closed, as a capped trip is");
    assert!(hosts.stats().open_slots <= 1);

    // With the slot free, a probe's failure opens the key within a slot.
    b.reset();
    assert!(a.open_for(Duration::from_secs(10)));
    clock.advance(Duration::from_secs(10));
    assert!(fail(&a), "a probe");
    assert_eq!(a.state(), State::Open);
    assert_eq!(hosts.stats().open_slots, 1);
    trip(&b);
    assert_eq!(b.state(), State::Closed, "a holds the slot");
}

fn open_as_asked(breaker: &Breaker, secs: u64) {
    breaker
        .try_acquire_owned()
        .unwrap()
        .record_verdict(Verdict::OpenFor(Duration::from_secs(secs)));
}

#[test]
fn retry_after_openings_take_no_open_slot_unless_asked() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&k.to_owned()).unwrap());
    open_as_asked(&a, 20);
    assert_eq!(a.state(), State::Open);
    assert_eq!(
        hosts.stats().open_slots,
        0,
        "a host defending itself is no outage"
    );
    trip(&b);
    assert_eq!(b.state(), State::Open, "a rate-limiting host fills no slot");

    // Asked for: a Retry-After opening counts like any other.
    let counted = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .retry_after_takes_slot(true)
        .build();
    let [a, b] = ["a", "b"].map(|k| counted.breaker(&k.to_owned()).unwrap());
    open_as_asked(&a, 20);
    assert_eq!(counted.stats().open_slots, 1);
    trip(&b);
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_through_the_service_opens_a_key_even_when_the_cap_is_full() {
    use cutout_tower::keyed::{HostKey, KeyedLayer};
    use cutout_tower::{HttpClassifier, TokioClock};
    use tower::{Layer, Service, ServiceExt};

    let hosts = KeyedBreakers::<HostKey>::builder(settings())
        .clock(TokioClock::new())
        .max_open(1)
        .build();
    let upstream = tower::service_fn(|request: http::Request<()>| async move {
        let mut response = http::Response::new(());
        match request.uri().host() {
            Some("limited.example") => {
                *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
                response
                    .headers_mut()
                    .insert(http::header::RETRY_AFTER, "5".parse().unwrap());
            }
            _ => *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR,
        }
        Ok::<_, std::io::Error>(response)
    });
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new().honor_retry_after(true))
        .layer(upstream);
    for url in ["http://down.example/"; 3] {
        let request = http::Request::get(url).body(()).unwrap();
        let _ = service.ready().await.unwrap().call(request).await;
    }
    assert_eq!(hosts.stats().open_slots, 1, "down holds the one slot");
    let request = http::Request::get("http://limited.example/")
        .body(())
        .unwrap();
    let _ = service.ready().await.unwrap().call(request).await;
    let limited = HostKey::new("http", "limited.example", None);
    assert_eq!(
        hosts.get(&limited).unwrap().state(),
        State::Open,
        "the host asked for 5 s: honoured although the cap is full"
    );
    assert_eq!(hosts.stats().suppressed_opens, 0);
}

#[cfg(all(feature = "config", feature = "tracing"))]
#[test]
fn a_config_instance_no_host_key_can_match_is_warned_about_at_load() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use cutout::config::Config;
    use cutout_tower::keyed::{HostKey, unmatched_host_instances};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    let config = Config::from_toml(
        r#"
        [instances."https://a.example:443"]
        consecutive-failures = 1
        [instances."b.example"]
        consecutive-failures = 2
        "#,
    )
    .unwrap();
    assert_eq!(
        unmatched_host_instances(&config),
        vec![("b.example".to_owned(), None)]
    );
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .finish();
    let hosts = tracing::subscriber::with_default(subscriber, || {
        KeyedBreakers::<HostKey>::builder_from_config(&config).build()
    });
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("WARN"), "{log}");
    assert!(
        log.contains("matches no host key") && log.contains("b.example"),
        "{log}"
    );
    assert!(
        !log.contains("a.example"),
        "a matching instance is not warned about: {log}"
    );
    // The document still loads and its matching instance applies.
    let a = hosts
        .breaker(&HostKey::new("https", "a.example", None))
        .unwrap();
    assert_eq!(a.settings().consecutive_failures(), Some(1));
}
