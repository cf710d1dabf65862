//! [reqwest-middleware] for [cutout] circuit breakers: a client whose requests to a failing
//! server are refused at once, without being sent, until the server has had a break.
//!
//! - [`BreakerMiddleware::new`]: one [`Breaker`](cutout::Breaker) for every request of the
//!   client; [`BreakerMiddleware::per_host`]: one per destination (`scheme://host:port`),
//!   from cutout-tower's [`KeyedBreakers`] (bounded, idle keys evicted, an optional cap on
//!   how many hosts may be open at once), so one failing host opens only its own breaker.
//! - Classification by cutout-tower's [`HttpClassifier`] (or a function of yours first):
//!   5xx, connection errors and timeouts fail; 429 and 503 with `Retry-After` are throttling
//!   and other 4xx the caller's fault (both ignored); 1xx–3xx succeed, a good response at its
//!   body's end (a body cut midway or a timeout during it fails). Redirects are followed by
//!   the middleware, each hop through its own host's breaker, the chain bounded by the
//!   request's own timeout or the middleware's
//!   [`total_timeout`](BreakerMiddleware::total_timeout) (it cannot read the client's). With
//!   [`honor_retry_after`](BreakerMiddleware::honor_retry_after), a throttled response's
//!   `Retry-After` (delta-seconds) opens the breaker for that long
//!   ([`Verdict::OpenFor`](cutout::Verdict::OpenFor)).
//! - A refusal is an error, never a request: `reqwest_middleware::Error::Middleware` holding
//!   a [`Refused`], whose [`cutout::Rejected`] (reason, retry-after, breaker id) [`rejected`]
//!   finds.
//! - A request future dropped before it finishes records nothing and gives its permit (a
//!   half-open probe slot) back.
//!
//! ```
//! use std::time::Duration;
//! use cutout::Settings;
//! use cutout_reqwest::{BreakerMiddleware, KeyedBreakers, rejected};
//! use reqwest_middleware::ClientBuilder;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let settings = Settings::builder().consecutive_failures(Some(5)).build()?;
//! let hosts = KeyedBreakers::builder(settings).max_open(8).build();
//! let total = Duration::from_secs(2);
//! let client = reqwest::Client::builder()
//!     .timeout(total)
//!     .redirect(reqwest::redirect::Policy::none()) // the middleware follows redirects
//!     .build()?;
//! let client = ClientBuilder::new(client)
//!     .with(
//!         BreakerMiddleware::per_host(hosts.clone())
//!             .honor_retry_after(true)
//!             .total_timeout(total), // it cannot read the client's (one bound per chain)
//!     )
//!     .build();
//!
//! match client.get("http://127.0.0.1:9/orders").send().await {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(error) => match rejected(&error) {
//!         Some(refusal) => println!("not sent: {refusal}"),
//!         None => println!("failed: {error}"), // counted against 127.0.0.1:9
//!     },
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Per host, [`health_check`] makes an active check (`GET <host><path>` with a plain client,
//! 2xx passes) for [`KeyedBreakers::health_checks`]: a passing check ends an open host's break
//! early, and its own probes decide.
//!
//! TLS is the client's business: this crate builds reqwest without default features, and
//! the features of your own `reqwest` dependency (`rustls`, ...) apply to the client you pass
//! in. reqwest 0.13 and reqwest-middleware 0.5.
//!
//! [reqwest-middleware]: reqwest_middleware

#![forbid(unsafe_code)]

mod classify;
mod error;
mod health;
mod key;
mod middleware;

pub use classify::{IntoClassifier, ReqwestClassifier, ResponseHead};
pub use error::{Refused, rejected};
pub use health::{HealthCheckFuture, health_check};
pub use key::host_key;
pub use middleware::BreakerMiddleware;

pub use cutout_tower::HttpClassifier;
pub use cutout_tower::keyed::{CheckRound, HealthChecks, HostKey, KeyedBreakers};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
