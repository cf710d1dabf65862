//! A demo upstream with chaos switches (ok, fail, hang, slow) and counters of started, finished and cancelled requests.
//!
//! `POST /chaos/{mode}` sets the mode: `ok` (or `recover`) answers 200, `fail` answers 500,
//! `hang` sleeps an hour before answering, `slow` sleeps [`SLOW`] before answering.
//! `GET /chaos` shows the mode and the counters. Every other path is "business": it answers
//! according to the mode, after reading the whole request body (as a real service would, so a
//! broken or stalled upload reaches it). A request whose connection is dropped before it
//! finished, or whose body could not be read whole, counts as cancelled.
//!
//! Two query parameters shape a healthy business answer (tests and demos of slow but healthy
//! endpoints): `delay=400ms` waits that long before answering (after the mode's own wait), and
//! `chunks=50&every=20ms` streams the answer as that many chunks, one each `every` after the
//! head (a request whose stream is dropped before its last chunk counts as cancelled, one that
//! ends counts as finished). Each wait is at most [`MAX_DELAY`]; a value that cannot be read is
//! a 400.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::StatusCode;
use serde_json::json;

/// How long a `slow` upstream takes.
pub const SLOW: Duration = Duration::from_millis(1500);
/// How long a `hang` upstream takes (long enough never to finish in a test or a demo).
pub const HANG: Duration = Duration::from_secs(3600);
/// The largest request body a business request may carry (larger: 413).
pub const MAX_BODY: usize = 16 * 1024 * 1024;
/// The longest `delay` or `every` a business request may ask for.
pub const MAX_DELAY: Duration = Duration::from_secs(60);
/// The most `chunks` a business request may ask for.
pub const MAX_CHUNKS: u32 = 10_000;

/// What a demo upstream does with business requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Answer 200.
    Ok = 0,
    /// Answer 500.
    Fail = 1,
    /// Never answer (an hour).
    Hang = 2,
    /// Answer 200 after [`SLOW`].
    Slow = 3,
}

impl Mode {
    /// Reads `ok`/`recover`, `fail`, `hang`, `slow`.
    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "ok" | "recover" => Some(Mode::Ok),
            "fail" => Some(Mode::Fail),
            "hang" => Some(Mode::Hang),
            "slow" => Some(Mode::Slow),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ok => "ok",
            Mode::Fail => "fail",
            Mode::Hang => "hang",
            Mode::Slow => "slow",
        }
    }

    fn from_u8(n: u8) -> Mode {
        match n {
            1 => Mode::Fail,
            2 => Mode::Hang,
            3 => Mode::Slow,
            _ => Mode::Ok,
        }
    }
}

/// A demo upstream's shared state: its name, mode and counters.
#[derive(Debug)]
pub struct Upstream {
    name: String,
    mode: AtomicU8,
    started: AtomicU64,
    finished: AtomicU64,
    cancelled: AtomicU64,
}

impl Upstream {
    /// A healthy upstream called `name`.
    pub fn new(name: &str) -> Arc<Upstream> {
        Arc::new(Upstream {
            name: name.to_owned(),
            mode: AtomicU8::new(Mode::Ok as u8),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
        })
    }

    /// Sets the mode.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        Mode::from_u8(self.mode.load(Ordering::SeqCst))
    }

    /// Business requests received.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Business requests answered.
    pub fn finished(&self) -> u64 {
        self.finished.load(Ordering::SeqCst)
    }

    /// Business requests dropped before they were answered (the caller went away).
    pub fn cancelled(&self) -> u64 {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The upstream's router.
    pub fn app(self: &Arc<Upstream>) -> Router {
        Router::new()
            .route("/chaos", get(show))
            .route("/chaos/{mode}", post(set))
            .fallback(business)
            .with_state(Arc::clone(self))
    }

    fn status(&self) -> serde_json::Value {
        json!({
            "upstream": self.name,
            "mode": self.mode().as_str(),
            "started": self.started(),
            "finished": self.finished(),
            "cancelled": self.cancelled(),
        })
    }
}

async fn show(State(up): State<Arc<Upstream>>) -> Response {
    up.status().to_string().into_response()
}

async fn set(State(up): State<Arc<Upstream>>, Path(mode): Path<String>) -> Response {
    match Mode::parse(&mode) {
        Some(m) => {
            up.set_mode(m);
            tracing::info!(upstream = %up.name, mode = m.as_str(), "chaos mode set");
            (up.status().to_string() + "\n").into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            format!("unknown mode {mode:?}; allowed ok, recover, fail, hang, slow\n"),
        )
            .into_response(),
    }
}

/// Counts a cancellation when dropped before `done`.
struct Guard(Arc<Upstream>, bool);

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
            tracing::info!(upstream = %self.0.name, "request cancelled by the caller");
        }
    }
}

/// What a business request's query asks of its answer (see the [module docs](self)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Shape {
    delay: Option<Duration>,
    /// `chunks` and `every`.
    stream: Option<(u32, Duration)>,
}

impl Shape {
    /// The shape a query asks for; `Err` names the parameter that cannot be read.
    fn of(query: Option<&str>) -> Result<Shape, &'static str> {
        let (mut delay, mut chunks, mut every) = (None, None, None);
        for pair in query.unwrap_or("").split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let wait = || {
                humantime::parse_duration(value)
                    .ok()
                    .filter(|d| *d <= MAX_DELAY)
            };
            match key {
                "delay" => delay = Some(wait().ok_or("delay")?),
                "every" => every = Some(wait().ok_or("every")?),
                "chunks" => {
                    let n = value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_CHUNKS).contains(n));
                    chunks = Some(n.ok_or("chunks")?);
                }
                _ => {}
            }
        }
        let stream = match (chunks, every) {
            (Some(n), every) => Some((n, every.unwrap_or(Duration::ZERO))),
            (None, Some(_)) => return Err("every"),
            (None, None) => None,
        };
        Ok(Shape { delay, stream })
    }
}

async fn business(State(up): State<Arc<Upstream>>, request: Request) -> Response {
    up.started.fetch_add(1, Ordering::SeqCst);
    let mut guard = Guard(Arc::clone(&up), false);
    let (parts, body) = request.into_parts();
    let shape = match Shape::of(parts.uri.query()) {
        Ok(shape) => shape,
        Err(key) => {
            guard.1 = true;
            return (StatusCode::BAD_REQUEST, format!("cannot read {key}\n")).into_response();
        }
    };
    let body_bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes.len(),
        // The caller never sent its body whole: it gave the request up (the guard counts a
        // cancellation).
        Err(_) => return (StatusCode::BAD_REQUEST, "unreadable request body\n").into_response(),
    };
    let mode = up.mode();
    match mode {
        Mode::Hang => tokio::time::sleep(HANG).await,
        Mode::Slow => tokio::time::sleep(SLOW).await,
        Mode::Ok | Mode::Fail => {}
    }
    if let Some(delay) = shape.delay {
        tokio::time::sleep(delay).await;
    }
    let forwarded_for = parts
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = json!({
        "upstream": up.name,
        "path": parts.uri.path(),
        "x-forwarded-for": forwarded_for,
        "body_bytes": body_bytes,
    })
    .to_string()
        + "\n";
    let status = if mode == Mode::Fail {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    let body = match shape.stream {
        // The stream's end (or its drop) does the accounting.
        Some((chunks, every)) => {
            guard.1 = true;
            axum::body::Body::new(Drip {
                up: Arc::clone(&up),
                last: Bytes::from(body),
                left: chunks,
                every,
                sleep: Box::pin(tokio::time::sleep(every)),
            })
        }
        None => {
            guard.1 = true;
            up.finished.fetch_add(1, Ordering::SeqCst);
            axum::body::Body::from(body)
        }
    };
    (status, body).into_response()
}

/// A streamed answer: `left` chunks, one each `every` (the last one is the JSON answer), then
/// the end. Dropped before its end, it counts a cancellation; at its end, a finished request.
struct Drip {
    up: Arc<Upstream>,
    last: Bytes,
    left: u32,
    every: Duration,
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Drip {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return std::task::Poll::Ready(None);
        }
        std::task::ready!(self.sleep.as_mut().poll(cx));
        let next = tokio::time::Instant::now() + self.every;
        self.sleep.as_mut().reset(next);
        self.left -= 1;
        let chunk = if self.left == 0 {
            self.up.finished.fetch_add(1, Ordering::SeqCst);
            self.last.clone()
        } else {
            Bytes::from_static(b"chunk\n")
        };
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
}

impl Drop for Drip {
    fn drop(&mut self) {
        if self.left > 0 {
            self.up.cancelled.fetch_add(1, Ordering::SeqCst);
            tracing::info!(upstream = %self.up.name, "streamed answer cancelled by the caller");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_shapes_the_answer() {
        assert_eq!(Shape::of(None), Ok(Shape::default()));
        assert_eq!(Shape::of(Some("x=1")), Ok(Shape::default()));
        let s = Shape::of(Some("delay=400ms&chunks=3&every=20ms")).unwrap();
        assert_eq!(s.delay, Some(Duration::from_millis(400)));
        assert_eq!(s.stream, Some((3, Duration::from_millis(20))));
        assert_eq!(
            Shape::of(Some("chunks=2")).unwrap().stream,
            Some((2, Duration::ZERO))
        );
        for (bad, key) in [
            ("delay=soon", "delay"),
            ("delay=2m", "delay"),
            ("chunks=0", "chunks"),
            ("chunks=x", "chunks"),
            ("every=10ms", "every"),
        ] {
            assert_eq!(Shape::of(Some(bad)), Err(key), "{bad}");
        }
    }
}
