//! Whole-response classification against in-process bodies, and a truncated body from a real
//! HTTP server on loopback.

use std::convert::Infallible;
use std::future::poll_fn;
use std::pin::Pin;

use bytes::Bytes;
use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, RejectReason, Settings, State};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use tower::{Service, ServiceExt};

use super::*;
use crate::{BreakerService, HttpClassifier, WholeResponseLayer, WholeResponseService};

type Frames = Vec<Result<http_body::Frame<Bytes>, std::io::Error>>;

fn breaker(clock: &ManualClock) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .jitter(Jitter::None)
        .adaptive(false)
        .half_open_probes(1)
        .probe_successes(1)
        .build()
        .unwrap();
    Breaker::builder("dependency")
        .settings(settings)
        .clock(clock.clone())
        .build()
}

/// A service answering `status` with a body of `frames`.
fn streaming(
    status: u16,
    frames: Frames,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<StreamBody<tokio_stream::Iter<std::vec::IntoIter<Frame>>>>,
    Error = std::io::Error,
> {
    tower::service_fn(move |_: http::Request<()>| {
        let frames = frames.clone_frames();
        async move {
            let body = StreamBody::new(tokio_stream::iter(frames));
            Ok(http::Response::builder().status(status).body(body).unwrap())
        }
    })
}

type Frame = Result<http_body::Frame<Bytes>, std::io::Error>;

/// `Frames` are not `Clone` (an `io::Error` is not): rebuilt for every call.
trait CloneFrames {
    fn clone_frames(&self) -> Frames;
}

impl CloneFrames for Frames {
    fn clone_frames(&self) -> Frames {
        self.iter()
            .map(|frame| match frame {
                Ok(frame) => Ok(match frame.data_ref() {
                    Some(data) => http_body::Frame::data(data.clone()),
                    None => http_body::Frame::trailers(frame.trailers_ref().unwrap().clone()),
                }),
                Err(error) => Err(std::io::Error::new(error.kind(), error.to_string())),
            })
            .collect()
    }
}

fn data(text: &'static str) -> Frame {
    Ok(http_body::Frame::data(Bytes::from_static(text.as_bytes())))
}

fn calls_and_failures(breaker: &Breaker) -> (u64, u64) {
    let snapshot = breaker.snapshot();
    (snapshot.calls, snapshot.failures)
}

#[tokio::test]
async fn a_success_is_recorded_when_the_body_ends_not_when_the_headers_arrive() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let service = WholeResponseService::new(
        streaming(200, vec![data("one"), data("two")]),
        breaker.clone(),
    );
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    let mut body = response.into_body();
    assert!(body.awaits_end());
    assert_eq!(calls_and_failures(&breaker), (0, 0), "headers only so far");
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "one");
    assert!(body.awaits_end(), "a frame is not the end");
    body.frame().await.unwrap().unwrap();
    assert!(body.frame().await.is_none());
    assert!(!body.awaits_end());
    assert_eq!(
        calls_and_failures(&breaker),
        (1, 0),
        "one success, at the end"
    );
}

#[tokio::test]
async fn a_body_error_after_good_headers_is_a_failure_with_http_classifier() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let frames = vec![data("half"), Err(std::io::Error::other("connection reset"))];
    let service = tower::ServiceBuilder::new()
        .layer(WholeResponseLayer::new(breaker.clone()))
        .service(streaming(200, frames));
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 200);
    let error = response.into_body().collect().await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "connection reset",
        "the body's error, untouched"
    );
    assert_eq!(calls_and_failures(&breaker), (1, 1));
    assert_eq!(breaker.state(), State::Open, "consecutive_failures(1)");

    // The class of errors decides: a caller may count broken bodies as nothing.
    let breaker = self::breaker(&clock);
    let frames = vec![data("half"), Err(std::io::Error::other("connection reset"))];
    let classifier = HttpClassifier::new().errors(cutout::classify::ErrorClass::Permanent);
    let service =
        WholeResponseService::with_classifier(streaming(200, frames), breaker.clone(), classifier);
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    assert!(response.into_body().collect().await.is_err());
    assert_eq!(calls_and_failures(&breaker), (0, 0), "ignored");
}

#[tokio::test]
async fn a_body_dropped_before_its_end_records_nothing_and_gives_the_probe_slot_back() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);

    let mut service = WholeResponseService::new(
        streaming(200, vec![data("one"), data("two")]),
        breaker.clone(),
    );
    let response = service
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    let mut body = response.into_body();
    body.frame().await.unwrap().unwrap();
    // The probe is in flight until its body ends: the only probe slot is taken.
    let refused = breaker.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::HalfOpenFull);
    drop(body);
    assert_eq!(calls_and_failures(&breaker), (0, 0), "nothing recorded");
    let probe = breaker.try_acquire().expect("the slot was given back");
    assert!(probe.is_probe());
}

#[tokio::test]
async fn an_ended_body_is_decided_when_the_response_arrives() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let service = WholeResponseService::new(
        tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
        }),
        breaker.clone(),
    );
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    // hyper would send such a body without polling it: it must not wait for a poll.
    assert!(!response.body().awaits_end());
    assert!(response.body().is_end_stream());
    assert_eq!(calls_and_failures(&breaker), (1, 0));
}

#[tokio::test]
async fn a_body_that_reports_its_end_after_a_frame_is_decided_then() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let service = WholeResponseService::new(
        tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from("all of it"))))
        }),
        breaker.clone(),
    );
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    let mut body = response.into_body();
    assert!(body.awaits_end());
    let frame = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
    assert_eq!(frame.unwrap().unwrap().into_data().unwrap(), "all of it");
    // `Full` reports its end now; a consumer may stop here without polling `None`.
    assert!(body.is_end_stream());
    assert!(!body.awaits_end());
    assert_eq!(calls_and_failures(&breaker), (1, 0));
}

#[tokio::test]
async fn statuses_that_are_not_successes_are_decided_on_the_headers() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let mut service = WholeResponseService::new(streaming(404, vec![data("no")]), breaker.clone());
    let response = service
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await;
    let response = response.unwrap();
    assert!(!response.body().awaits_end());
    assert_eq!(
        calls_and_failures(&breaker),
        (0, 0),
        "a 404 is ignored, at once"
    );
    drop(response);

    let mut service =
        WholeResponseService::new(streaming(502, vec![data("down")]), breaker.clone());
    let response = service
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await;
    let body = response.unwrap().into_body();
    assert!(!body.awaits_end());
    assert_eq!(calls_and_failures(&breaker), (1, 1), "a 502 fails at once");
    let text = body.collect().await.unwrap().to_bytes();
    assert_eq!(text, "down", "and its body passes through");
}

#[tokio::test]
async fn an_inner_error_is_a_failure_and_a_refusal_never_calls_the_inner_service() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let mut service = WholeResponseService::new(
        tower::service_fn(move |_: http::Request<()>| {
            // Orderings: a plain counter read after the calls finished; Relaxed suffices.
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async { Err::<http::Response<Empty<Bytes>>, _>(std::io::Error::other("refused")) }
        }),
        breaker.clone(),
    );
    let error = service
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap_err();
    assert_eq!(error.get_inner().unwrap().to_string(), "refused");
    assert_eq!(breaker.state(), State::Open);
    let error = service
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap_err();
    assert_eq!(error.rejection().unwrap().reason(), RejectReason::Open);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// Fails when a trailer says so.
#[derive(Clone)]
struct TrailerSays;

struct TrailerSaysAtEnd;

impl<E> ClassifyEnd<E> for TrailerSaysAtEnd {
    fn end(self, trailers: Option<&HeaderMap>) -> Verdict {
        match trailers.and_then(|t| t.get("x-outcome")) {
            Some(value) if value == "failed" => Verdict::Failure,
            Some(_) => Verdict::Success,
            None => Verdict::Ignored,
        }
    }
}

impl<B: Body, E> ClassifyResponse<B, E> for TrailerSays {
    type AtEnd = TrailerSaysAtEnd;
    fn classify_response(&self, _: &Result<http::Response<B>, E>) -> Classified<TrailerSaysAtEnd> {
        Classified::AtEnd(TrailerSaysAtEnd)
    }
}

#[tokio::test]
async fn the_trailers_reach_the_classifier() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let mut trailers = HeaderMap::new();
    trailers.insert("x-outcome", http::HeaderValue::from_static("failed"));
    let frames = vec![data("rows"), Ok(http_body::Frame::trailers(trailers))];
    let service =
        WholeResponseService::with_classifier(streaming(200, frames), breaker.clone(), TrailerSays);
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    let collected = response.into_body().collect().await.unwrap();
    assert_eq!(collected.trailers().unwrap()["x-outcome"], "failed");
    assert_eq!(calls_and_failures(&breaker), (1, 1));

    // Without trailers the classifier's own answer for an end without any: ignored here.
    let breaker = self::breaker(&clock);
    let service = WholeResponseService::with_classifier(
        streaming(200, vec![data("rows")]),
        breaker.clone(),
        TrailerSays,
    );
    let response = service.oneshot(http::Request::new(())).await.unwrap();
    response.into_body().collect().await.unwrap();
    assert_eq!(calls_and_failures(&breaker), (0, 0));
    assert_eq!(breaker.state(), State::Closed);
}

/// A real HTTP/1.1 server on loopback that promises 100 bytes, sends 5 and closes: hyper's
/// client body fails. Header-time classification counts it a success; the whole response a
/// failure.
#[tokio::test]
async fn a_truncated_body_from_a_real_server_is_a_failure_only_for_the_whole_response() {
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        for _ in 0..2 {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 4096];
            let _ = socket.read(&mut request).await.unwrap();
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhello")
                .await
                .unwrap();
            socket.shutdown().await.unwrap();
        }
    });
    let client: Client<_, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = || {
        http::Request::get(format!("http://{addr}/"))
            .body(Empty::<Bytes>::new())
            .unwrap()
    };
    let clock = ManualClock::new();

    let at_headers = breaker(&clock);
    let service =
        BreakerService::with_classifier(client.clone(), at_headers.clone(), HttpClassifier::new());
    let response = service.oneshot(request()).await.unwrap();
    assert!(response.into_body().collect().await.is_err(), "truncated");
    assert_eq!(calls_and_failures(&at_headers), (1, 0), "counted a success");

    let whole = breaker(&clock);
    let service = WholeResponseService::new(client, whole.clone());
    let response = service.oneshot(request()).await.unwrap();
    assert_eq!(response.status(), 200);
    let error = response.into_body().collect().await.unwrap_err();
    assert_eq!(error.to_string(), "error reading a body from connection");
    assert_eq!(calls_and_failures(&whole), (1, 1), "counted a failure");
    server.await.unwrap();
}
