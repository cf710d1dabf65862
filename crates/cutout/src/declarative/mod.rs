//! The declarative layer (feature `macros`): `#[cutout::resilient]` on a trait generates its
//! circuit-broken wrapper.
//!
//! Writing the wrapper by hand means, for every method of every client trait, asking a
//! breaker for a permit, timing the call, recording its outcome and turning a refusal into
//! the method's error. The attribute writes it: each `#[breaker(...)]` method of the trait
//! runs through a breaker taken from a [`Registry`](crate::Registry), with the settings the
//! attribute gives in the configuration file's keys.
//!
//! # Minimal example
//!
//! ```
//! use cutout::{Registry, Rejected};
//!
//! #[derive(Debug)]
//! pub enum PayError {
//!     Declined,
//!     Refused(Rejected),
//! }
//!
//! // A refusal is returned as the method's error: it needs `From<Rejected>`.
//! impl From<Rejected> for PayError {
//!     fn from(rejected: Rejected) -> Self {
//!         PayError::Refused(rejected)
//!     }
//! }
//!
//! #[cutout::resilient]
//! pub trait PaymentGateway {
//!     #[breaker(name = "payments", window_size = 10, minimum_calls = 10,
//!               failure_ratio = "50%", break_duration = "30s", half_open_probes = 2)]
//!     fn charge(&self, order: &str) -> Result<String, PayError>;
//! }
//!
//! struct Backend;
//! impl PaymentGateway for Backend {
//!     fn charge(&self, order: &str) -> Result<String, PayError> {
//!         Ok(format!("receipt for {order}"))
//!     }
//! }
//!
//! let registry = Registry::new();
//! let payments = PaymentGatewayResilient::new(Backend, &registry)?;
//! assert_eq!(payments.charge("order-1").unwrap(), "receipt for order-1");
//! assert_eq!(registry.snapshot("payments")?.calls, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `PaymentGatewayResilient<D: PaymentGateway>` implements `PaymentGateway`. Its `charge`
//! asks the breaker `"payments"` for a permit (a refusal returns `PayError::from(rejected)`
//! without calling the delegate), calls the delegate, and records `Ok` as a success and
//! `Err` as a failure, through the core's own [`Breaker::call_with`](crate::Breaker::call_with):
//! a healthy call costs what a hand-written one does. This breaker looks at the last 10 calls;
//! once it has seen 10, it opens when half or more failed, refuses every call for 30 s, then
//! lets 2 probes through.
//!
//! Methods without `#[breaker]` are passed to the delegate as they are (associated functions
//! without `self` too). `#[cfg_attr(pred, breaker(...))]` (nested ones too) puts the breaker
//! on the method where `pred` holds; elsewhere the method is passed through. A trait's where
//! clause may name `Self` as the bounded type or in a path (`Self: Sized`, `Self::Reply:
//! Debug`): on the wrapper it reads as the delegate; `Self` as a type argument there
//! (`Id: From<&'a Self>`) is a compile error, a requirement on the wrapper no delegate can
//! meet. A `#[breaker]` method
//! takes `&self` and returns `Result<T, E>` written out (not an alias): the compiler says so
//! otherwise, and says when `E` has no `From<cutout::Rejected>` (give `rejected = path` to a
//! `fn(Rejected) -> E` instead, or a `fallback` that answers refusals). Traits may be generic
//! (the wrapper is `<Trait>Resilient<D, ...the trait's parameters>`) and have associated
//! types and consts (the delegate's). Besides the trait, the wrapper has `new` and two
//! associated functions, `Wrapper::delegate(&w)` (the wrapped value, for tests and
//! inspection) and `Wrapper::into_inner(w)`, which hide no trait method; the generated code
//! names the crate `::cutout`, so depend on it under that name.
//!
//! # The attribute's keys
//!
//! The settings keys are the configuration file's ([`config`](crate::config)), in
//! snake_case: `window-size` is `window_size`, `break-duration = "30s"` is
//! `break_duration = "30s"`, `failure-ratio = "50%"` is `failure_ratio = "50%"` (or `0.5`),
//! `consecutive-failures = "off"` is `consecutive_failures = "off"`. They are checked when the
//! trait compiles, by the same readers' rules (the key table, the value kinds, the single-key
//! ranges and the did-you-mean live in the `cutout-keys` crate, which the configuration reads
//! too) and fail with the same codes, spanning the key:
//!
//! ```text
//! error: CUT-CFG-008: unknown key window_sise = 10 in #[breaker]: did you mean window_size?
//! error: CUT-CFG-010: invalid break_duration = "30 seconds and a bit" in #[breaker]: ...
//! error: CUT-CFG-001: invalid failure_ratio = "150%" in #[breaker]: allowed a ratio in (0, 1]
//! ```
//!
//! Checks across keys (`max_break_duration` at least `break_duration`, the baseline windows
//! against the trip window) need the merged settings; they run in the wrapper's `new`, with
//! the same codes, as a [`DeclareError`].
//!
//! The attribute's own keys:
//!
//! | key | value | |
//! |---|---|---|
//! | `name` | a string | the breaker's id, shared by every method (and trait) that gives it |
//! | `classifier` | a path to a [`Classify`](crate::classify::Classify) value or a `fn(&Result<T, E>) -> Outcome` | decides what a result counts as |
//! | `ignore` | a path to a `fn(&E) -> bool` | errors that count neither way (wins over `record`) |
//! | `record` | a path to a `fn(&E) -> bool` | errors that count as failures (others count as successes) |
//! | `fallback` | a method name | the wrapper's own method `fn(&self, Cause<E>) -> Result<T, E>` that answers instead of the error |
//! | `fallback_on` | `"both"` (default), `"refused"` or `"failed"` | which answers the fallback gives |
//! | `timeout` | a duration | async methods only (feature `tokio`): a call that runs out of time is cancelled and its error, `E::from(TimedOut)`, judged like any other: a failure, unless `ignore` (or the classifier) says otherwise; `E: From<TimedOut>` |
//! | `retry(attempts = 3, backoff = "100ms")` | | retries failures outside the breaker; never a refusal |
//! | `rejected` | a path to a `fn(Rejected) -> E` | builds the error of a refusal, instead of `From<Rejected>` |
//!
//! # Sharing and instance ids
//!
//! A breaker has state, so sharing matters. Without `name`, each method has its own breaker,
//! with the id `<Trait>#<method>(<parameter types>)`, the types as written in the trait:
//! `PaymentGateway#charge(&str)` (spaced as rustfmt writes types: `[u8; 4]`,
//! `fn(u8) -> u8`, `&(dyn Debug + Sync)`, `impl Iterator<Item = u8>`, `for<'a> fn(&'a u8)`;
//! a reference's `'_` is written as nothing, `&str` for `&'_ str`, the same type). The id holds the trait's name, not its module: two traits of one name in
//! two modules, wrapped with one registry, would share their methods' breakers (and conflict
//! if their settings differ), so give one of them `name`s or a registry of its own. With the
//! same `name` on several methods (or on several
//! traits wrapped with the same registry), they share one breaker: failures of one method
//! open it for all. They must ask for the same settings, or `new` fails with the registry's
//! `CUT-REG-001`, naming the keys that differ and both methods
//! ([`DeclareError::methods`]). A breaker made in code with
//! [`Registry::breaker`](crate::Registry::breaker) under that id and the same settings is
//! shared too.
//!
//! A registry built with a configuration ([`RegistryBuilder::config`](crate::RegistryBuilder::config))
//! overrides the attributes: the settings of a declared breaker are the built-in defaults,
//! then `[defaults]`, then the attribute's keys, then the `base-config` and keys of
//! `[instances.<id>]`, later winning key by key (`instances."PaymentGateway#charge(&str)"`
//! for an unnamed breaker, `instances.payments` for a named one).
//!
//! ```
//! use cutout::{Registry, Rejected, TripWindow};
//! use cutout::config::Config;
//!
//! #[derive(Debug)]
//! pub struct Down;
//! impl From<Rejected> for Down {
//!     fn from(_: Rejected) -> Self { Down }
//! }
//!
//! #[cutout::resilient]
//! pub trait Ledger {
//!     #[breaker(window_size = 10, break_duration = "30s")]
//!     fn balance(&self, account: &str) -> Result<u64, Down>;
//! }
//!
//! struct Books;
//! impl Ledger for Books {
//!     fn balance(&self, _: &str) -> Result<u64, Down> { Ok(7) }
//! }
//!
//! let config = Config::from_toml(r#"
//!     [instances."Ledger#balance(&str)"]
//!     window-size = 50
//! "#)?;
//! let registry = Registry::builder().config(config).build();
//! let ledger = LedgerResilient::new(Books, &registry)?;
//! let breaker = registry.get("Ledger#balance(&str)")?;
//! assert_eq!(breaker.settings().window(), TripWindow::Count(50)); // the file's
//! assert_eq!(breaker.settings().break_duration().as_secs(), 30);  // the attribute's
//! # let _ = ledger;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # With other policies
//!
//! The breaker sits inside the retry and around the timeout:
//!
//! - It stops retries. Every attempt of `retry(...)` goes through the breaker and is
//!   recorded. Every `Err` the delegate returns is retried, up to `attempts` calls in all
//!   (the first included), `backoff` apart. A refusal is never retried: once the breaker
//!   opens, the next attempt is made at once (no backoff) and refused, and the retry returns
//!   the refusal (a breaker in shadow mode refuses nothing, so its retries keep their
//!   backoff). Arguments are
//!   cloned for each attempt, so a retried method's parameters must be `Clone` (shared
//!   references are; a sync method's `&mut` parameter is reborrowed for each attempt instead,
//!   an async one's cannot be, since each attempt's future holds it; write it `&mut T`, as a
//!   macro cannot see through a type alias). A sync retry's backoff waits on the breaker's clock (`Clock::sleep`: a
//!   `ManualClock` advances instead of blocking); an async retry needs feature `tokio` (its
//!   backoff waits on tokio's timer).
//! - It records the timeout. `timeout = "2s"` on an async method cancels a call that runs
//!   out of time, inside the breaker, and judges its error (`E::from(TimedOut)`) as any
//!   other: a failure by default, so calls that hang open it, or neither way where `ignore`
//!   names it (seed 001's `ignoreOn` for timeouts). On a sync method it is a compile error:
//!   a sync call cannot be stopped.
//! - What counts: by default `Ok` is a success and `Err` a failure. `ignore = path` names
//!   errors that count neither way (the caller's fault, such as bad input; an ignored probe
//!   gives its slot back) and `record = path` the errors that count as failures (any other
//!   counts as a success); `ignore` wins. `classifier = path` decides instead, and may see
//!   `Ok` values (an HTTP 500 inside `Ok`); it does not go with `ignore` or `record`
//!   (`CUT-CFG-006`).
//! - A `fallback` sees the refusal and the failure as a [`Cause`], after the retry: a
//!   method of the wrapper's own, written in an `impl` block of the generated type.
//!
//! ```
//! use cutout::{Registry, Rejected};
//! use cutout::declarative::Cause;
//!
//! #[derive(Debug, PartialEq)]
//! pub enum QuoteError { BadInput, Unavailable }
//! impl From<Rejected> for QuoteError {
//!     fn from(_: Rejected) -> Self { QuoteError::Unavailable }
//! }
//! fn bad_input(e: &QuoteError) -> bool { *e == QuoteError::BadInput }
//!
//! #[cutout::resilient]
//! pub trait Quotes {
//!     #[breaker(consecutive_failures = 3, ignore = bad_input,
//!               retry(attempts = 3), fallback = cached, fallback_on = "refused")]
//!     fn quote(&self, symbol: &str) -> Result<u64, QuoteError>;
//! }
//!
//! impl<D: Quotes> QuotesResilient<D> {
//!     /// While the breaker is open: the last known quote.
//!     fn cached(&self, cause: Cause<QuoteError>) -> Result<u64, QuoteError> {
//!         assert!(cause.is_refused());
//!         Ok(100)
//!     }
//! }
//!
//! struct Down;
//! impl Quotes for Down {
//!     fn quote(&self, _: &str) -> Result<u64, QuoteError> { Err(QuoteError::Unavailable) }
//! }
//!
//! let quotes = QuotesResilient::new(Down, &Registry::new())?;
//! // Three attempts, three failures: the breaker opens; the retry has no attempt left.
//! assert_eq!(quotes.quote("ACME"), Err(QuoteError::Unavailable));
//! // Refused now: the fallback answers.
//! assert_eq!(quotes.quote("ACME"), Ok(100));
//! # Ok::<(), cutout::declarative::DeclareError>(())
//! ```
//!
//! # Async
//!
//! `async fn` methods and methods returning `impl Future<Output = Result<T, E>>` (with any
//! `+ Send` the trait asks for) ask for a permit when the returned future is first polled,
//! before the delegate is called, and record the outcome when the delegate's future
//! completes ([`Breaker::call_async_with`](crate::Breaker::call_async_with)); a refusal is the
//! future's `Err`. Calls are timed until completion. A future the caller drops before it
//! completes (a `select!`, an outer timeout) records nothing, like an ignored call, and gives
//! a half-open probe slot back. They work on any runtime; `timeout` and an async `retry`
//! need feature `tokio`.
//!
//! An `impl Future` method calls the delegate's method when it is called (it returns the
//! delegate's future, which runs only once the breaker admits the call), so its future holds
//! the delegate's future and the breaker, and is `Send` when the delegate's is, whether or not
//! the delegate is `Sync`. With a `retry` or a `fallback` it holds `&self` instead: for a
//! `+ Send` future the wrapper then implements the trait for `Sync` delegates (`D: Sync`).
//!
//! ```
//! use cutout::{Registry, Rejected};
//!
//! #[derive(Debug)]
//! pub struct Unavailable;
//! impl From<Rejected> for Unavailable {
//!     fn from(_: Rejected) -> Self { Unavailable }
//! }
//!
//! #[cutout::resilient]
//! pub trait Inventory {
//!     #[breaker(name = "inventory", window_size = 4, minimum_calls = 4)]
//!     async fn stock(&self, sku: &str) -> Result<u32, Unavailable>;
//!
//!     #[breaker(name = "inventory", window_size = 4, minimum_calls = 4)]
//!     fn reserve(&self, sku: &str) -> impl Future<Output = Result<(), Unavailable>> + Send;
//! }
//! ```
//!
//! ## With `#[async_trait]`
//!
//! A trait that must be a `dyn` object (`Arc<dyn PaymentGateway>`) is often written with
//! the `async-trait` crate. Put the two attributes in either order: `#[async_trait]` rewrites
//! the trait first (placed below it, `#[cutout::resilient]` hands the trait to it and wraps
//! what it wrote), so the wrapper's methods have the signatures the trait ends up with, each
//! returning `Pin<Box<dyn Future<Output = Result<T, E>> + Send>>`. Such a method behaves as an
//! `impl Future` one: the permit is asked for when it is called, the outcome recorded when the
//! future completes, a dropped future records nothing; without `retry` or `fallback` the
//! future holds no `&self`. Ids are the methods' as written (`Gateway#charge(&str)`, not the
//! `&'life1 str` the rewrite puts there). `#[async_trait(?Send)]` works the same way. The
//! wrapper is itself an implementation of the trait, so it goes behind the same `dyn`.
//! Above `#[async_trait]`, the attribute must be spelled so that its path ends in
//! `async_trait` (`#[async_trait]`, `#[async_trait::async_trait]`): a macro sees names, not
//! imports, so a renamed one (`use async_trait::async_trait as boxed`) is not recognised
//! there; below it any name works.
//!
//! When a method's future must be `Send` and holds `&self` (a `+ Send` future with a
//! `retry` or `fallback`, or a default body under `#[async_trait]`, which asks `Self: Sync`),
//! the wrapper implements the trait for `Sync` delegates only: it asks `D: Sync`, which a
//! trait with a `Sync` supertrait (`trait Gateway: Send + Sync`, as `dyn` use wants) gives
//! every delegate anyway (for a `cfg_attr` breaker, in the builds where it is on). A `Send`
//! inside the output (`Result<T, Box<dyn Error + Send>>`) or a `?Send` future asks nothing.
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use cutout::{Registry, Rejected};
//!
//! #[derive(Debug)]
//! pub struct Unavailable;
//! impl From<Rejected> for Unavailable {
//!     fn from(_: Rejected) -> Self { Unavailable }
//! }
//!
//! #[cutout::resilient]
//! #[async_trait]
//! pub trait Gateway: Send + Sync {
//!     #[breaker(consecutive_failures = 3)]
//!     async fn charge(&self, order: &str) -> Result<String, Unavailable>;
//! }
//!
//! struct Backend;
//! #[async_trait]
//! impl Gateway for Backend {
//!     async fn charge(&self, order: &str) -> Result<String, Unavailable> {
//!         Ok(format!("receipt {order}"))
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new();
//! let gateway: Arc<dyn Gateway> = Arc::new(GatewayResilient::new(Backend, &registry)?);
//! assert_eq!(gateway.charge("42").await.unwrap(), "receipt 42");
//! assert_eq!(registry.get("Gateway#charge(&str)")?.snapshot().calls, 1);
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(run()).unwrap();
//! ```
//!
//! # Testing it with ManualClock
//!
//! The generated breakers run on the registry's clock: give the registry a
//! [`ManualClock`](crate::clock::ManualClock) and the test decides when a break ends.
//!
//! ```
//! use std::cell::Cell;
//! use cutout::{Registry, Rejected, State};
//! use cutout::clock::ManualClock;
//!
//! #[derive(Debug)]
//! pub enum PayError { Down, Refused(Rejected) }
//! impl From<Rejected> for PayError {
//!     fn from(r: Rejected) -> Self { PayError::Refused(r) }
//! }
//!
//! #[cutout::resilient]
//! pub trait PaymentGateway {
//!     #[breaker(name = "payments", window_size = 10, minimum_calls = 10,
//!               failure_ratio = "50%", consecutive_failures = "off",
//!               break_duration = "30s", jitter = "none",
//!               half_open_probes = 2, probe_successes = 2)]
//!     fn charge(&self, order: &str) -> Result<String, PayError>;
//! }
//!
//! struct Backend { down: Cell<bool> }
//! impl PaymentGateway for Backend {
//!     fn charge(&self, order: &str) -> Result<String, PayError> {
//!         if self.down.get() { Err(PayError::Down) } else { Ok(format!("receipt {order}")) }
//!     }
//! }
//!
//! let clock = ManualClock::new();
//! let registry = Registry::with_clock(clock.clone());
//! let payments = PaymentGatewayResilient::new(Backend { down: Cell::new(false) }, &registry)?;
//! let breaker = registry.get("payments")?;
//!
//! for i in 0..5 {
//!     payments.charge(&format!("ok-{i}")).unwrap();          // 5 successes
//! }
//! PaymentGatewayResilient::delegate(&payments).down.set(true);
//! for _ in 0..5 {
//!     assert!(matches!(payments.charge("ko"), Err(PayError::Down)));
//! }
//! assert_eq!(breaker.state(), State::Open);                   // 10 calls, 50% failed
//! assert!(matches!(payments.charge("refused"), Err(PayError::Refused(_))));
//!
//! PaymentGatewayResilient::delegate(&payments).down.set(false);
//! clock.elapse_break(&breaker);                               // 30 s later, on the test's clock
//! payments.charge("probe-1").unwrap();                        // half-open: 2 probes
//! payments.charge("probe-2").unwrap();
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`ManualClock::elapse_break`](crate::clock::ManualClock::elapse_break) advances the clock
//! by the breaker's current break. To put a breaker in a state directly, use `isolate`,
//! `disable` and `reset` on it (or on the registry, by id).

#[doc(hidden)]
pub mod __private;
mod cause;
mod error;

pub use cause::{Cause, TimedOut};
pub use error::DeclareError;

/// The attribute: see the [module docs](self).
pub use cutout_macros::resilient;
