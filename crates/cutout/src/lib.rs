//! A circuit breaker.
//!
//! A [`Breaker`] stops calling a dependency that keeps failing, refuses calls at once for a
//! break that grows and carries jitter, then lets a bounded number of probes through to see
//! whether the dependency has recovered.
//!
//! ```
//! use std::time::Duration;
//! use cutout::{Breaker, Jitter, Settings, State};
//! use cutout::clock::ManualClock;
//!
//! let clock = ManualClock::new();
//! let settings = Settings::builder()
//!     .consecutive_failures(Some(3))
//!     .break_duration(Duration::from_secs(30))
//!     .jitter(Jitter::None)
//!     .probe_successes(1)
//!     .build()?;
//! let breaker = Breaker::builder("rates").settings(settings).clock(clock.clone()).build();
//!
//! for _ in 0..3 {
//!     let _ = breaker.call(|| Err::<(), _>("timeout"));
//! }
//! assert_eq!(breaker.state(), State::Open);
//! let refused = breaker.call(|| Ok::<_, &str>(1)).unwrap_err();
//! assert_eq!(refused.rejection().unwrap().retry_after(), Some(Duration::from_secs(30)));
//!
//! clock.advance(Duration::from_secs(30));
//! assert_eq!(breaker.call(|| Ok::<_, &str>(1)).unwrap(), 1); // the probe closes it
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), cutout::ConfigError>(())
//! ```
//!
//! The hot path: a healthy call on a closed breaker that a success cannot change (a count
//! window full of successes, nothing timed or measured) does one atomic load before the call
//! and one after, and writes nothing shared. Other healthy calls add one to a counter on their
//! core's own line (no lock, no contended line), which the next locked operation folds into
//! every consumer before it evaluates the trip rules (`cells.rs`). An adaptive breaker times
//! every call below 8,192 calls a trip window and one in eight, at random, above it, each
//! sampled call standing for eight in the slow-call estimate (`machine/sampling.rs`).
//! Everything that changes state runs a sequential machine under a lock (see `breaker.rs`,
//! `# Orderings`). Refusing a call while open reads the clock once: start a
//! [`clock::CoarseClock`] where refusals are hot, and a refusal is three loads, made where the
//! call is.
//!
//! # Features
//! - `macros`: `#[cutout::resilient]` on a trait generates its circuit-broken wrapper, with
//!   `#[breaker(...)]` on its methods: the chapter is the [`declarative`] module (implies
//!   `serde`).
//! - `serde`: configuration files (the `config` module); [`Settings`] as a `Deserialize`
//!   breaker table inside a configuration of your own, and `config::duration` for its
//!   `"30s"`-style fields.
//! - `tracing`: one `tracing` event per transition (and per threshold exceeded), and one per
//!   manual action (`reset`, `isolate`, `disable`, `open_for`, `open_until`, `shadow`,
//!   `enforce`), which raise no transition event.
//! - `tokio`: `Breaker::call_async_timeout` (an attempt timeout the breaker counts as a
//!   failure; see the `timeout` module) and `clock::TokioClock` (breakers on tokio's paused
//!   time in tests).
//! - `metrics`: counters per outcome, refusal reason and transition, slow calls, a state gauge,
//!   failure-rate, slow-rate and normal-latency gauges and a duration histogram of timed
//!   calls, all described, through the `metrics` facade ([`metrics`] lists every name, type
//!   and label). A breaker registers its handles when it is built, with the recorder installed
//!   then: install the exporter's recorder before building breakers. The calls are counted by
//!   a [call observer](observer), so the feature makes every breaker an observed one.

#![forbid(unsafe_code)]

mod breaker;
pub mod classify;
pub mod clock;
#[cfg(feature = "serde")]
pub mod config;
mod contained;
mod control;
#[cfg(feature = "macros")]
pub mod declarative;
mod error;
mod event;
mod evidence;
mod front;
mod human;
mod id;
mod locked;
mod loom;
mod machine;
pub mod metrics;
mod observe;
pub mod observer;
mod permit;
mod registry;
mod relative;
mod settings;
mod signal;
mod snapshot;
mod state;
mod suggest;
#[cfg(feature = "tokio")]
pub mod timeout;

pub use breaker::{Breaker, BreakerBuilder};
pub use classify::{ErrorClass, Outcome, Verdict};
/// `#[cutout::resilient]` on a trait (feature `macros`): see [`declarative`].
#[cfg(feature = "macros")]
pub use cutout_macros::resilient;
pub use error::{ConfigError, Error, ErrorCode, RejectReason, Rejected};
pub use event::{BreakEndReason, CloseReason, Event, OpenReason, Transition};
pub use evidence::TripEvidence;
pub use human::HumanDuration;
pub use id::BreakerId;
pub use machine::ramp::Recovery;
pub use permit::{OwnedPermit, Permit};
pub use registry::{Registry, RegistryBuilder, RegistryError};
pub use relative::{Failures, SlowCalls};
pub use settings::{
    BreakContext, BreakSchedule, HalfOpenRule, HalfOpenTimeout, InitialState, Jitter,
    MAX_COUNT_WINDOW, Settings, SettingsBuilder, TripWindow,
};
pub use snapshot::{ManualAction, Snapshot};
pub use state::{Health, State};

/// The README's examples, compiled and run as doctests (with the `tokio` feature, which its
/// async example needs: the README's test command enables every feature).
#[doc = include_str!("../../../README.md")]
#[cfg(all(doctest, feature = "tokio"))]
pub struct ReadmeDoctests;
