//! A call observer given to keyed breakers reports every key's calls, named by the key's id.

use std::sync::{Arc, Mutex};

use cutout::Settings;
use cutout::observer::{Call, CallKind};
use cutout_tower::keyed::{HostKey, KeyedBreakers};

#[test]
fn a_keyed_observer_sees_every_key_by_its_id() {
    let seen: Arc<Mutex<Vec<(String, CallKind)>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let breakers: KeyedBreakers<HostKey> = KeyedBreakers::builder(
        Settings::builder()
            .consecutive_failures(Some(1))
            .build()
            .unwrap(),
    )
    .observer(move |call: &Call<'_>| {
        sink.lock()
            .unwrap()
            .push((call.breaker.to_string(), call.kind));
    })
    .build();
    let key = |uri: &str| HostKey::of(&http::Request::get(uri).body(()).unwrap());
    let (a, b) = (key("http://a.test/x"), key("http://b.test:8080/y"));
    breakers
        .breaker(&a)
        .unwrap()
        .call(|| Ok::<_, ()>(()))
        .unwrap();
    let _ = breakers.breaker(&b).unwrap().call(|| Err::<(), _>(()));
    let _ = breakers.breaker(&b).unwrap().call(|| Ok::<_, ()>(()));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            ("http://a.test:80".to_owned(), CallKind::Success),
            ("http://b.test:8080".to_owned(), CallKind::Failure),
            (
                "http://b.test:8080".to_owned(),
                CallKind::Refused(cutout::RejectReason::Open)
            ),
        ]
    );
}
