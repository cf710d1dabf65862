//! `Retry-After` as RFC 9110 §10.2.3 writes it, and refusals as clients read them (issue 29,
//! item 7).

use std::time::{Duration, SystemTime};

use cutout::classify::Verdict;
use cutout::{Breaker, ErrorClass, Jitter, Settings};
use cutout_tower::keyed::{HostKey, KeyedBreakers, KeyedLayer};
use cutout_tower::{HttpClassifier, respond};
use http::{HeaderMap, HeaderValue, StatusCode, header::RETRY_AFTER};
use tower::{Layer, Service, ServiceExt};

fn headers(retry_after: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(RETRY_AFTER, HeaderValue::from_str(retry_after).unwrap());
    headers
}

#[test]
fn an_http_date_retry_after_is_read() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 07:28:00 GMT
    for date in [
        "Wed, 21 Oct 2015 07:30:00 GMT",     // IMF-fixdate
        "Wednesday, 21-Oct-15 07:30:00 GMT", // obsolete RFC 850
        "Wed Oct 21 07:30:00 2015",          // obsolete asctime
    ] {
        assert_eq!(
            HttpClassifier::retry_after_at(&headers(date), now),
            Some(Duration::from_secs(120)),
            "{date}"
        );
    }
    // A date already past asks for no wait; delta-seconds still read as before.
    let past = headers("Wed, 21 Oct 2015 07:00:00 GMT");
    assert_eq!(
        HttpClassifier::retry_after_at(&past, now),
        Some(Duration::ZERO)
    );
    assert_eq!(
        HttpClassifier::retry_after_at(&headers(" 7 "), now),
        Some(Duration::from_secs(7))
    );
    // Honoured against the wall clock: a date two minutes ahead opens for about that long.
    let ahead = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let verdict = HttpClassifier::new()
        .honor_retry_after(true)
        .verdict_of(StatusCode::TOO_MANY_REQUESTS, &headers(&ahead));
    let Verdict::OpenFor(asked) = verdict else {
        panic!("{verdict:?}")
    };
    assert!(
        asked > Duration::from_secs(117) && asked <= Duration::from_secs(120),
        "{asked:?}"
    );
}

#[test]
fn an_unreadable_retry_after_on_a_503_is_an_outage_not_throttling() {
    let classifier = HttpClassifier::new();
    for garbage in ["soon", "1.5", "-1", "", "Wed, 99 Foo 2015 07:28:00 GMT"] {
        assert_eq!(
            classifier.class_of(StatusCode::SERVICE_UNAVAILABLE, &headers(garbage)),
            Some(ErrorClass::Transient),
            "{garbage:?}"
        );
    }
    let date = "Wed, 21 Oct 2015 07:28:00 GMT";
    assert_eq!(
        classifier.class_of(StatusCode::SERVICE_UNAVAILABLE, &headers(date)),
        Some(ErrorClass::Throttled)
    );
    // A 429 is the client's rate limit whatever its Retry-After says.
    assert_eq!(
        classifier.class_of(StatusCode::TOO_MANY_REQUESTS, &headers("soon")),
        Some(ErrorClass::Throttled)
    );
    // So an outage page with a garbage Retry-After trips by failures.
    let breaker = Breaker::new(
        "pages",
        Settings::builder()
            .consecutive_failures(Some(3))
            .build()
            .unwrap(),
    );
    for _ in 0..3 {
        let response = http::Response::builder()
            .status(503)
            .header(RETRY_AFTER, "whenever")
            .body(())
            .unwrap();
        let _ = breaker.call_with(&classifier, || Ok::<_, ()>(response));
    }
    assert_eq!(breaker.state(), cutout::State::Open);
}

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(1))
        .jitter(Jitter::None)
        .break_duration(Duration::from_millis(2500))
        .build()
        .unwrap()
}

#[test]
fn refusals_read_the_same_in_bodies_and_errors() {
    let breaker = Breaker::new("ledger", settings());
    let _ = breaker.call(|| Err::<(), _>("down"));
    let refused = breaker.try_acquire().unwrap_err();
    let expected = "breaker 'ledger' is refusing calls (open); retry after 2.5s";
    let response = respond::refusal_response(&refused);
    assert_eq!(response.body(), &format!("{expected}\n"));
    assert_eq!(
        response.headers()["retry-after"],
        "3",
        "whole seconds, rounded up"
    );
    assert_eq!(cutout_tower::Error::rejected(refused).to_string(), expected);
}

#[tokio::test]
async fn a_per_host_refusal_body_names_the_public_label_never_the_upstream_url() {
    let upstream = tower::service_fn(|_: http::Request<()>| async {
        let mut response = http::Response::new(());
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        Ok::<_, std::io::Error>(response)
    });
    let hosts = KeyedBreakers::<HostKey>::builder(settings()).build();
    let request = || {
        http::Request::get("http://10.0.0.5:8080/stock")
            .body(())
            .unwrap()
    };
    let body_of = async |service: &mut _| {
        let service: &mut cutout_tower::keyed::KeyedService<_, _, _, _> = service;
        let _ = service.ready().await.unwrap().call(request()).await;
        let error = service
            .ready()
            .await
            .unwrap()
            .call(request())
            .await
            .unwrap_err();
        assert!(error.is_rejected());
        let logged = error.to_string();
        (respond::error_response(&error).into_body(), logged)
    };

    let mut unlabelled = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream);
    let (body, logged) = body_of(&mut unlabelled).await;
    assert!(!body.contains("10.0.0.5"), "{body}");
    assert_eq!(
        body,
        "the upstream is refusing calls (open); retry after 2.5s\n"
    );
    assert!(
        logged.contains("10.0.0.5:8080"),
        "the log names the key: {logged}"
    );

    hosts.reset(&HostKey::new("http", "10.0.0.5", Some(8080)));
    let mut labelled = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .label("inventory")
        .layer(upstream);
    let (body, _) = body_of(&mut labelled).await;
    assert_eq!(
        body,
        "inventory is refusing calls (open); retry after 2.5s\n"
    );
}
