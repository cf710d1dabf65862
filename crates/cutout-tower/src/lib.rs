//! tower middleware for [cutout] circuit breakers.
//!
//! - [`BreakerLayer`] / [`BreakerService`]: a service guarded by one breaker. An open breaker
//!   answers `Ready` in `poll_ready` and fails the call's future with a refusal, without calling
//!   the inner service ([`Readiness::FailInCall`], the default), or answers `Pending` until its
//!   break ends ([`Readiness::WaitForBreak`], for a breaker per endpoint under tower's p2c
//!   `Balance`, which then routes around it); its [`Load`](tower::load::Load)
//!   ([`BreakerLoad`]) makes p2c avoid it either way. The response future holds the permit and records the outcome through a
//!   classifier; dropping it records nothing and frees a half-open probe slot.
//! - [`WholeResponseLayer`] / [`WholeResponseService`] ([`body`]): the same, for HTTP responses
//!   whose verdict may wait for the end of the body: the permit moves into the response's
//!   [`BreakerBody`](body::BreakerBody) and records when the trailers arrive, the body ends or
//!   breaks (a failure); a body dropped before its end records nothing. For gRPC (a status in
//!   the trailers) and for bodies that break after good headers.
//! - `grpc::GrpcClassifier` (feature `grpc`): `grpc-status` from a trailers-only response's
//!   headers or from the trailers; `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNKNOWN`,
//!   `DATA_LOSS` and transport errors fail, `RESOURCE_EXHAUSTED` is throttling, the caller's
//!   codes are ignored. No tonic dependency: it wraps a `tonic::transport::Channel` as any
//!   tower service of HTTP requests.
//! - [`keyed`]: one breaker per key (per destination host by default), bounded, observable and
//!   with a cap on how many keys may be open at once. A key's settings are the same for every
//!   key, a function of the key, or (feature `config`) its `[instances.<id>]` of a
//!   `cutout::config::Config`, else the document's `[defaults]`.
//! - [`HttpClassifier`]: 5xx and errors fail, 429 and 503 with `Retry-After` are throttling,
//!   other 4xx the caller's fault. With
//!   [`honor_retry_after`](HttpClassifier::honor_retry_after), a throttled response's
//!   `Retry-After` (delta-seconds) opens the breaker for that long, capped by its maximum
//!   break.
//! - [`respond`]: a refusal as 503 with `Retry-After`, a timeout as 504, for axum or hyper.
//! - [`retry::BreakerRetry`]: a tower retry policy that never retries a refusal, stops when
//!   the breaker opens, draws on a retry budget, backs off with jitter and keeps deadlines.
//! - [`TokioClock`]: breakers on tokio's clock, so `tokio::time::pause()` drives them.
//!
//! # Order
//! **retry → breaker → attempt timeout → service**, outermost first. The retry sits outside so
//! that every attempt passes the breaker (failed attempts bring the opening closer, and a
//! refusal ends the retries); the timeout sits inside so that a hung attempt becomes a failure
//! the breaker counts, within a bounded time. A timeout outside the breaker would cancel the
//! call's future instead: the permit is dropped unrecorded and the breaker never learns that
//! the dependency hangs.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use cutout::{Breaker, Settings};
//! use cutout_tower::retry::{BreakerRetry, Deadline};
//! use cutout_tower::{HttpClassifier, ServiceBuilderExt};
//! use tower::retry::budget::TpsBudget;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let breaker = Breaker::new("inventory", Settings::default());
//! let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 5, 0.2));
//! let mut client = ServiceBuilder::new()
//!     .retry(BreakerRetry::new(breaker.clone(), budget).classifier(HttpClassifier::new()))
//!     .breaker_with(breaker, HttpClassifier::new())
//!     .timeout(Duration::from_secs(2))
//!     .service_fn(|_req: http::Request<String>| async {
//!         Ok::<_, std::io::Error>(http::Response::new("42".to_owned()))
//!     });
//!
//! let mut request = http::Request::new(String::new());
//! request.extensions_mut().insert(Deadline::after(Duration::from_secs(5)));
//! let response = client.ready().await?.call(request).await?;
//! assert_eq!(response.body(), "42");
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod body;
mod classify;
mod clock;
mod error;
mod future;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod keyed;
mod layer;
pub mod respond;
pub mod retry;
mod service;

pub use body::{WholeResponseLayer, WholeResponseService};
pub use classify::HttpClassifier;
pub use clock::TokioClock;
pub use error::{BoxError, Error, RetryStop};
pub use future::ResponseFuture;
pub use layer::{BreakerLayer, ServiceBuilderExt};
pub use service::{BreakerLoad, BreakerService, Readiness};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
