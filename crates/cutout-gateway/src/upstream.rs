//! A demo upstream with chaos switches (ok, fail, hang, slow) and counters of started, finished and cancelled requests.
//!
//! `POST /chaos/{mode}` sets the mode: `ok` (or `recover`) answers 200, `fail` answers 500,
//! `hang` sleeps an hour before answering, `slow` sleeps [`SLOW`] before answering.
//! `GET /chaos` shows the mode and the counters. Every other path is "business": it answers
//! according to the mode, after reading the whole request body (as a real service would, so a
//! broken or stalled upload reaches it). A request whose connection is dropped before it
//! finished, or whose body could not be read whole, counts as cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::StatusCode;
use serde_json::json;

/// How long a `slow` upstream takes.
pub const SLOW: Duration = Duration::from_millis(1500);
/// How long a `hang` upstream takes (long enough never to finish in a test or a demo).
pub const HANG: Duration = Duration::from_secs(3600);
/// The largest request body a business request may carry (larger: 413).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

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

async fn business(State(up): State<Arc<Upstream>>, request: Request) -> Response {
    up.started.fetch_add(1, Ordering::SeqCst);
    let mut guard = Guard(Arc::clone(&up), false);
    let (parts, body) = request.into_parts();
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
    guard.1 = true;
    up.finished.fetch_add(1, Ordering::SeqCst);
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
    if mode == Mode::Fail {
        (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
    } else {
        body.into_response()
    }
}
