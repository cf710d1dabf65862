//! Per-key settings: a function of the key, or a `cutout::config::Config` whose
//! `[instances.<id>]` override its `[defaults]` for one key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Settings, State};
use cutout_tower::keyed::KeyedBreakers;

/// A failing call through `breaker`; whether it ran (was not refused).
fn fail(breaker: &Breaker) -> bool {
    !breaker
        .call(|| Err::<(), _>("down"))
        .is_err_and(|e| e.is_rejected())
}

/// How many failing calls `breaker` lets through before it refuses one (at most 10).
fn failures_until_open(breaker: &Breaker) -> usize {
    let ran = (0..10).take_while(|_| fail(breaker)).count();
    assert_eq!(breaker.state(), State::Open, "open after {ran} failures");
    ran
}

fn after(failures: u32) -> Settings {
    Settings::builder()
        .consecutive_failures(Some(failures))
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap()
}

#[test]
fn a_key_function_gives_each_key_its_own_settings_once_per_creation() {
    let clock = ManualClock::new();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let (fragile, normal) = (after(1), after(3));
    let hosts = KeyedBreakers::<String>::builder_per_key(move |host: &String| {
        counter.fetch_add(1, Ordering::Relaxed);
        if host.starts_with("fragile") {
            fragile.clone()
        } else {
            normal.clone()
        }
    })
    .clock(clock.clone())
    .idle_after(Duration::from_secs(60))
    .build();

    let fragile_key = "fragile.example".to_owned();
    let sturdy_key = "sturdy.example".to_owned();
    assert_eq!(
        failures_until_open(&hosts.breaker(&fragile_key).unwrap()),
        1
    );
    assert_eq!(failures_until_open(&hosts.breaker(&sturdy_key).unwrap()), 3);
    assert_eq!(hosts.breaker(&sturdy_key).unwrap().settings(), &after(3));
    // Once per key created, not per call.
    assert_eq!(asked.load(Ordering::Relaxed), 2);

    // An evicted key is created again, and asks again.
    hosts.reset(&fragile_key);
    clock.advance(Duration::from_secs(61));
    assert_eq!(hosts.evict_idle(), 1, "the reset key is closed and idle");
    assert!(!hosts.contains(&fragile_key));
    assert_eq!(
        failures_until_open(&hosts.breaker(&fragile_key).unwrap()),
        1
    );
    assert_eq!(asked.load(Ordering::Relaxed), 3);
}

#[test]
fn a_key_function_runs_with_no_lock_of_the_map_held() {
    // The function reads the map it belongs to: under the map's write lock this would
    // deadlock (or panic).
    let map: Arc<std::sync::OnceLock<KeyedBreakers<String>>> = Arc::default();
    let seen = Arc::clone(&map);
    let hosts = KeyedBreakers::<String>::builder_per_key(move |_: &String| {
        let held = seen.get().map_or(0, KeyedBreakers::len);
        after(u32::try_from(held).unwrap() + 1)
    })
    .build();
    map.set(hosts.clone()).unwrap();
    let first = hosts.breaker(&"first.example".to_owned()).unwrap();
    let second = hosts.breaker(&"second.example".to_owned()).unwrap();
    assert_eq!(first.settings().consecutive_failures(), Some(1));
    assert_eq!(second.settings().consecutive_failures(), Some(2));
}

#[test]
fn the_fixed_template_still_applies_to_every_key() {
    let hosts = KeyedBreakers::<String>::builder(after(2)).build();
    for host in ["a.example", "b.example"] {
        let breaker = hosts.breaker(&host.to_owned()).unwrap();
        assert_eq!(breaker.settings(), &after(2));
        assert_eq!(failures_until_open(&breaker), 2);
    }
}

#[cfg(feature = "config")]
mod config {
    use super::*;

    use cutout::ErrorCode;
    use cutout::config::Config;
    use cutout_tower::keyed::{HostKey, KeyedLayer};
    use cutout_tower::{HttpClassifier, TokioClock};
    use http::{Request, Response, StatusCode};
    use tower::{Layer, Service, ServiceExt};

    /// The hosts' document: three failures by default, one for `b.example`.
    const HOSTS_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/per_key/hosts.toml");

    fn hosts_toml() -> String {
        std::fs::read_to_string(HOSTS_FILE).unwrap()
    }

    fn request(url: &str) -> Request<String> {
        Request::builder().uri(url).body(String::new()).unwrap()
    }

    /// Fails `url` ten times through `service`; how many of them reached the upstream.
    async fn calls_before_refusal<S>(service: &mut S, url: &str) -> usize
    where
        S: Service<Request<String>, Response = Response<String>, Error = cutout_tower::Error>,
    {
        let mut ran = 0;
        for _ in 0..10 {
            match service.ready().await.unwrap().call(request(url)).await {
                Ok(response) => {
                    assert_eq!(response.status(), 500);
                    ran += 1;
                }
                Err(error) => assert!(error.is_rejected(), "{error}"),
            }
        }
        ran
    }

    /// An upstream where every host answers 500.
    fn failing() -> impl Service<
        Request<String>,
        Response = Response<String>,
        Error = std::io::Error,
        Future = impl Future<Output = Result<Response<String>, std::io::Error>> + Send,
    > + Clone {
        tower::service_fn(|_: Request<String>| async {
            let mut response = Response::new(String::new());
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            Ok(response)
        })
    }

    #[test]
    fn an_instance_overrides_the_defaults_for_its_key_only() {
        let config = Config::from_toml(&hosts_toml()).unwrap();

        let clock = ManualClock::new();
        let hosts = KeyedBreakers::<String>::builder_from_config(&config)
            .clock(clock.clone())
            .build();
        let a = hosts.breaker(&"a.example".to_owned()).unwrap();
        let b = hosts.breaker(&"b.example".to_owned()).unwrap();
        assert_eq!(failures_until_open(&b), 1, "b.example has its own settings");
        assert_eq!(failures_until_open(&a), 3, "a.example has the defaults");
        assert_eq!(b.settings(), config.instance("b.example").unwrap());
        assert_eq!(a.settings(), config.defaults());

        // The instance inherits the defaults' other keys.
        assert_eq!(b.settings().break_duration(), Duration::from_secs(30));
        clock.advance(Duration::from_secs(30));
        assert_eq!(b.state(), State::HalfOpen);
    }

    #[test]
    fn an_instance_inherits_its_base_config() {
        let config = Config::from_toml(
            r#"
            [defaults]
            consecutive-failures = 3
            adaptive = false

            [configs.fragile]
            consecutive-failures = 1
            break-duration = "5s"

            [instances."b.example"]
            base-config = "fragile"
            half-open-probes = 2
            "#,
        )
        .unwrap();
        let hosts = KeyedBreakers::<String>::builder_from_config(&config).build();
        let b = hosts.breaker(&"b.example".to_owned()).unwrap();
        assert_eq!(b.settings().consecutive_failures(), Some(1));
        assert_eq!(b.settings().break_duration(), Duration::from_secs(5));
        assert_eq!(b.settings().half_open_probes(), 2);
        assert!(!b.settings().adaptive());
        let a = hosts.breaker(&"a.example".to_owned()).unwrap();
        assert_eq!(a.settings(), config.defaults());
        assert_eq!(failures_until_open(&b), 1);
        assert_eq!(failures_until_open(&a), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn through_the_tower_service_one_host_opens_after_its_own_count() {
        let config = Config::from_toml(&hosts_toml()).unwrap();
        // Keyed on the host alone, so the document's ids are bare host names.
        let hosts = KeyedBreakers::<String>::builder_from_config(&config)
            .clock(TokioClock::new())
            .build();
        let mut service = KeyedLayer::new(hosts.clone(), |request: &Request<String>| {
            request.uri().host().unwrap_or_default().to_owned()
        })
        .classifier(HttpClassifier::new())
        .layer(failing());

        assert_eq!(
            calls_before_refusal(&mut service, "http://b.example/").await,
            1
        );
        assert_eq!(
            calls_before_refusal(&mut service, "http://a.example/").await,
            3
        );
        assert_eq!(hosts.get(&"b.example".into()).unwrap().state(), State::Open);

        // Its break is the defaults' 30 s: then one probe, which fails and re-opens it.
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(
            calls_before_refusal(&mut service, "http://b.example/").await,
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn host_keys_match_instances_by_breaker_id_or_by_a_key_function() {
        // By breaker id, as `HostKey` displays it: scheme://host:port.
        let config =
            Config::from_toml(&hosts_toml().replace("\"b.example\"", "\"https://b.example:443\""))
                .unwrap();
        let hosts = KeyedBreakers::<HostKey>::builder_from_config(&config)
            .clock(TokioClock::new())
            .build();
        let mut service = KeyedLayer::per_host(hosts.clone())
            .classifier(HttpClassifier::new())
            .layer(failing());
        assert_eq!(
            calls_before_refusal(&mut service, "https://b.example/").await,
            1
        );
        assert_eq!(
            calls_before_refusal(&mut service, "http://b.example/").await,
            3,
            "port 80: another key"
        );
        assert_eq!(
            calls_before_refusal(&mut service, "https://a.example/").await,
            3
        );

        // By host alone, with the issue's `[instances."b.example"]`: a key function.
        let config = Config::from_toml(&hosts_toml()).unwrap();
        let hosts = KeyedBreakers::<HostKey>::builder_per_key(move |key: &HostKey| {
            config.settings_for(&key.host).clone()
        })
        .clock(TokioClock::new())
        .build();
        let mut service = KeyedLayer::per_host(hosts.clone())
            .classifier(HttpClassifier::new())
            .layer(failing());
        assert_eq!(
            calls_before_refusal(&mut service, "https://b.example/").await,
            1
        );
        assert_eq!(
            calls_before_refusal(&mut service, "http://b.example:8080/").await,
            1
        );
        assert_eq!(
            calls_before_refusal(&mut service, "https://a.example/").await,
            3
        );
        assert_eq!(hosts.len(), 3);
    }

    #[test]
    fn an_unknown_key_in_an_instance_fails_at_load_with_its_code() {
        let error = Config::from_toml(
            r#"
            [defaults]
            consecutive-failures = 3

            [instances."b.example"]
            consecutive_failures = 1
            "#,
        )
        .unwrap_err();
        assert_eq!(error.code(), ErrorCode::UnknownKey);
        assert_eq!(error.section(), "instances.\"b.example\"");
        assert_eq!(error.key(), "consecutive_failures");
        assert_eq!(error.suggestion(), Some("consecutive-failures"));
        let message = error.to_string();
        assert!(message.starts_with("CUT-CFG-008: "), "{message}");
        assert!(message.contains("consecutive-failures"), "{message}");
    }

    #[test]
    fn a_bad_value_in_an_instance_fails_at_load_not_at_the_hosts_first_call() {
        let error = Config::from_toml(
            r#"
            [instances."b.example"]
            consecutive-failures = 0
            "#,
        )
        .unwrap_err();
        assert_eq!(error.code(), ErrorCode::CountTooSmall);
        assert!(error.to_string().starts_with("CUT-CFG-002: "), "{error}");
    }
}
