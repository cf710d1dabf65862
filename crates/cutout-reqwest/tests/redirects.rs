//! Redirects, each hop judged by its own host's breaker (issue 29, item 6): the middleware
//! follows them, not the client below it.

mod common;

use common::{Server, client, client_not_following};
use cutout::{Jitter, RejectReason, Settings, State};
use cutout_reqwest::{BreakerMiddleware, HostKey, KeyedBreakers, host_key, rejected};
use reqwest::{StatusCode, Url};

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(3))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

fn key(server: &Server) -> HostKey {
    host_key(&Url::parse(&server.url("/")).unwrap())
}

#[tokio::test]
async fn a_redirect_targets_failures_open_the_target_not_the_redirecting_host() {
    let front = Server::start().await;
    let target = Server::start().await;
    let hosts = KeyedBreakers::builder(settings()).build();
    let client =
        client_not_following(BreakerMiddleware::per_host(hosts.clone()).follow_cross_origin(true));
    let url = front.url(&format!("/redirect?to={}", target.url("/fail")));
    for _ in 0..3 {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "followed"
        );
        assert_eq!(response.url().as_str(), target.url("/fail"));
    }
    let front_breaker = hosts.get(&key(&front)).unwrap();
    assert_eq!(front_breaker.state(), State::Closed);
    let snapshot = front_breaker.snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (3, 0),
        "its redirects succeeded"
    );
    assert_eq!(hosts.get(&key(&target)).unwrap().state(), State::Open);

    // The front host still serves; the target is refused, through a redirect too.
    let response = client.get(front.url("/ok")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let error = client.get(&url).send().await.unwrap_err();
    let refusal = rejected(&error).expect("the target's breaker refuses the hop");
    assert_eq!(refusal.reason(), RejectReason::Open);
    assert_eq!(target.hits("/fail"), 3);
}

#[tokio::test]
async fn an_isolated_host_is_never_reached_through_a_redirect() {
    let front = Server::start().await;
    let target = Server::start().await;
    let hosts = KeyedBreakers::builder(settings()).build();
    assert!(hosts.isolate(&key(&target)));
    let client =
        client_not_following(BreakerMiddleware::per_host(hosts.clone()).follow_cross_origin(true));
    for path in ["/redirect", "/see-other"] {
        let url = front.url(&format!("{path}?to={}", target.url("/ok")));
        let error = client.get(&url).send().await.unwrap_err();
        let refusal = rejected(&error).expect("refused");
        assert_eq!(refusal.reason(), RejectReason::Isolated);
    }
    assert_eq!(target.total_hits(), 0);
    assert_eq!(front.hits("/redirect") + front.hits("/see-other"), 2);
}

#[tokio::test]
async fn redirects_stop_at_the_hop_limit() {
    let front = Server::start().await;
    let hosts = KeyedBreakers::builder(settings()).build();
    let client = client_not_following(BreakerMiddleware::per_host(hosts.clone()).max_redirects(2));
    // Three hops: front → front → front → /ok.
    let last = front.url("/ok");
    let second = front.url(&format!("/redirect?to={last}"));
    let first = front.url(&format!("/see-other?to={second}"));
    let url = front.url(&format!("/redirect?to={first}"));
    let error = client.get(&url).send().await.unwrap_err();
    assert!(error.to_string().contains("redirect"), "{error}");
    assert_eq!(front.hits("/ok"), 0);
    // No following at all: the 302 comes back to the caller.
    let hosts = KeyedBreakers::builder(settings()).build();
    let client = client_not_following(BreakerMiddleware::per_host(hosts).max_redirects(0));
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::FOUND);
}

#[tokio::test]
async fn a_client_that_follows_redirects_below_the_middleware_gets_a_clear_error() {
    let front = Server::start().await;
    let target = Server::start().await;
    let hosts = KeyedBreakers::builder(settings()).build();
    // reqwest's default policy follows up to 10 redirects, below the middleware.
    let client = client(BreakerMiddleware::per_host(hosts.clone()));
    let url = front.url(&format!("/redirect?to={}", target.url("/fail")));
    for _ in 0..3 {
        let error = client.get(&url).send().await.unwrap_err();
        assert!(
            error.to_string().contains("Policy::none()"),
            "says what to do: {error}"
        );
    }
    // Nobody is blamed for a hop no breaker judged.
    assert_eq!(hosts.get(&key(&front)).unwrap().state(), State::Closed);
    assert_eq!(hosts.get(&key(&front)).unwrap().snapshot().failures, 0);
}
