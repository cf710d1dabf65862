//! cutout-gateway: a reverse proxy with a cutout circuit breaker per cluster, an admin API and a live status page.
//!
//! Each cluster's stack is **breaker → attempt timeout → forward** (seed 002's Polly pipeline
//! per YARP cluster): a 5xx, a forwarding error or a timeout is a failure; an open breaker
//! answers 503 with `Retry-After` without touching the upstream; a timeout answers 504 and
//! cancels the forward (the upstream's connection is closed).
//!
//! - [`config`]: the TOML file (`[gateway]`, `[[routes]]`, `[clusters.*]`, `[breakers]` in
//!   cutout's format).
//! - [`proxy::app`] and [`admin::app`]: the two listeners' routers, testable without a socket.
//! - [`demo`]: the embedded demo with two chaos-switchable [`upstream`]s.
//! - [`server`]: binding with clear errors and graceful shutdown on SIGTERM / Ctrl-C.

#![forbid(unsafe_code)]

pub mod admin;
pub mod bare;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod error;
pub mod gateway;
pub mod metrics;
pub mod proxy;
pub mod server;
pub mod status_page;
pub mod upstream;

pub use config::GatewayConfig;
pub use error::{ConfigError, ProxyError, StartError};
pub use gateway::Gateway;
