//! `HttpClassifier::honor_retry_after` through the tower service, on tokio's paused clock: a
//! 429 or 503 with `Retry-After` opens the breaker for that long, then a probe goes through.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::{Breaker, OpenReason, RejectReason, Settings, State, Transition};
use cutout_tower::keyed::{KeyedBreakers, KeyedLayer};
use cutout_tower::{Error, HttpClassifier, ServiceBuilderExt, TokioClock, respond};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// A status, and the `Retry-After` it carries if any.
type Answer = (u16, Option<&'static str>);

/// A dependency that answers the statuses of `script` in turn (with `Retry-After` where
/// given), then 200; it counts the calls it received.
#[derive(Clone)]
struct Dependency {
    script: Arc<Mutex<Vec<Answer>>>,
    calls: Arc<AtomicUsize>,
}

impl Dependency {
    fn new(script: &[Answer]) -> Dependency {
        let mut script = script.to_vec();
        script.reverse();
        Dependency {
            script: Arc::new(Mutex::new(script)),
            calls: Arc::default(),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn service(
        &self,
    ) -> impl Service<
        Request<()>,
        Response = Response<()>,
        Error = std::io::Error,
        Future = impl Future<Output = Result<Response<()>, std::io::Error>> + Send + use<>,
    > + Clone
    + use<> {
        let this = self.clone();
        tower::service_fn(move |_: Request<()>| {
            this.calls.fetch_add(1, Ordering::SeqCst);
            let (status, retry_after) = this.script.lock().unwrap().pop().unwrap_or((200, None));
            async move {
                let mut response = Response::builder().status(status);
                if let Some(after) = retry_after {
                    response = response.header(http::header::RETRY_AFTER, after);
                }
                Ok(response.body(()).unwrap())
            }
        })
    }
}

/// A breaker with the default settings (equal jitter, 15 s first break, 2 min at most, two
/// probe successes) on tokio's clock, and the events it raises.
fn breaker() -> (Breaker, Arc<Mutex<Vec<Transition>>>) {
    let breaker = Breaker::builder("api")
        .settings(Settings::default())
        .clock(TokioClock::new())
        .build();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
    (breaker, events)
}

async fn send<S>(service: &mut S) -> Result<Response<()>, Error>
where
    S: Service<Request<()>, Response = Response<()>, Error = Error>,
{
    service.ready().await?.call(Request::new(())).await
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_7_opens_the_breaker_for_7_s_then_a_probe_goes_through() {
    let dependency = Dependency::new(&[(429, Some("7"))]);
    let (breaker, events) = breaker();
    let mut service = ServiceBuilder::new()
        .breaker_with(
            breaker.clone(),
            HttpClassifier::new().honor_retry_after(true),
        )
        .service(dependency.service());

    let throttled = send(&mut service).await.unwrap();
    assert_eq!(
        throttled.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "passed on"
    );
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        events.lock().unwrap()[..],
        [Transition::Opened {
            from: State::Closed,
            reason: OpenReason::RetryAfter,
            break_for: 7 * SEC,
        }],
        "exactly 7 s: the default jitter does not apply"
    );
    assert_eq!(breaker.snapshot().calls, 0, "counted as nothing");

    // Refused for 7 s, each refusal saying how long is left; the dependency is not called.
    let mut waited = Duration::ZERO;
    for step in [MS, 2 * SEC, 3 * SEC, SEC, SEC - 2 * MS] {
        tokio::time::advance(step).await;
        waited += step;
        let refused = send(&mut service).await.unwrap_err();
        let rejection = refused.rejection().expect("refused");
        assert_eq!(rejection.reason(), RejectReason::Open);
        assert_eq!(
            rejection.retry_after(),
            Some(7 * SEC - waited),
            "{waited:?}"
        );
        let response = respond::refusal_response(rejection);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let left = respond::retry_after_secs(7 * SEC - waited).to_string();
        assert_eq!(
            response.headers()["retry-after"],
            left.as_str(),
            "rounded up"
        );
    }
    assert_eq!(waited, 7 * SEC - MS);
    assert_eq!(dependency.calls(), 1);

    // At 7 s: a probe goes through.
    tokio::time::advance(MS).await;
    assert_eq!(breaker.state(), State::HalfOpen);
    let probe = send(&mut service).await.unwrap();
    assert_eq!(probe.status(), StatusCode::OK);
    assert_eq!(dependency.calls(), 2);
    send(&mut service).await.unwrap(); // the second probe success closes it
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_time_asked_is_capped_by_the_maximum_break_and_a_503_counts_too() {
    let dependency = Dependency::new(&[(503, Some("3600"))]);
    let (breaker, _) = breaker();
    let mut service = ServiceBuilder::new()
        .breaker_with(
            breaker.clone(),
            HttpClassifier::new().honor_retry_after(true),
        )
        .service(dependency.service());
    send(&mut service).await.unwrap();
    let refused = send(&mut service).await.unwrap_err();
    assert_eq!(
        refused.rejection().unwrap().retry_after(),
        Some(Duration::from_secs(120)),
        "the default maximum break"
    );
}

#[tokio::test(start_paused = true)]
async fn without_the_option_a_429_with_retry_after_is_only_ignored() {
    let dependency = Dependency::new(&[(429, Some("7")), (503, Some("7"))]);
    let (breaker, events) = breaker();
    let mut service = ServiceBuilder::new()
        .breaker_with(breaker.clone(), HttpClassifier::new())
        .service(dependency.service());
    for status in [429, 503, 200] {
        assert_eq!(send(&mut service).await.unwrap().status(), status);
    }
    assert_eq!(breaker.state(), State::Closed);
    assert!(events.lock().unwrap().is_empty());
    assert_eq!(breaker.snapshot().calls, 1, "only the 200 counted");
}

#[tokio::test(start_paused = true)]
async fn a_probe_told_to_back_off_reopens_for_the_time_asked() {
    // Two 500s then a 429: the breaker trips on failures, the probe is told to wait 40 s.
    let dependency = Dependency::new(&[(500, None), (500, None), (429, Some("40"))]);
    let breaker = Breaker::builder("api")
        .settings(
            Settings::builder()
                .consecutive_failures(Some(2))
                .jitter(cutout::Jitter::None)
                .build()
                .unwrap(),
        )
        .clock(TokioClock::new())
        .build();
    let mut service = ServiceBuilder::new()
        .breaker_with(
            breaker.clone(),
            HttpClassifier::new().honor_retry_after(true),
        )
        .service(dependency.service());
    for _ in 0..2 {
        assert_eq!(send(&mut service).await.unwrap().status(), 500);
    }
    assert_eq!(breaker.break_remaining(), Some(15 * SEC));
    tokio::time::advance(15 * SEC).await;
    assert_eq!(send(&mut service).await.unwrap().status(), 429);
    assert_eq!(breaker.break_remaining(), Some(40 * SEC));
    assert_eq!(breaker.snapshot().consecutive_opens, 1, "no growth");
}

#[tokio::test(start_paused = true)]
async fn per_host_breakers_honor_it_per_host() {
    let hosts = KeyedBreakers::builder(Settings::default())
        .clock(TokioClock::new())
        .build();
    let busy = Dependency::new(&[(429, Some("5"))]);
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new().honor_retry_after(true))
        .layer(busy.service());
    let call = |url: &str| Request::builder().uri(url).body(()).unwrap();
    let first = service
        .ready()
        .await
        .unwrap()
        .call(call("http://busy.example/"))
        .await;
    assert_eq!(first.unwrap().status(), 429);
    let refused = service
        .ready()
        .await
        .unwrap()
        .call(call("http://busy.example/"))
        .await
        .unwrap_err();
    assert_eq!(refused.rejection().unwrap().retry_after(), Some(5 * SEC));
    let other = service
        .ready()
        .await
        .unwrap()
        .call(call("http://calm.example/"))
        .await;
    assert_eq!(
        other.unwrap().status(),
        200,
        "another host's breaker is closed"
    );
}

#[test]
fn retry_after_secs_rounds_up_and_saturates_instead_of_overflowing() {
    assert_eq!(respond::retry_after_secs(Duration::from_millis(1)), 1);
    assert_eq!(respond::retry_after_secs(Duration::from_secs(7)), 7);
    assert_eq!(respond::retry_after_secs(Duration::MAX), u64::MAX);
}
