//! Hostile review of the declarative layer (issue #31): generated wrappers at run time.
// Some traits here exist for the ids and conflicts they declare, not to be called.
#![allow(
    dead_code,
    missing_docs,
    clippy::new_ret_no_self,
    clippy::manual_async_fn
)]
#![cfg(all(feature = "macros", feature = "tokio"))]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use cutout::clock::ManualClock;
use cutout::declarative::Cause;
use cutout::{Registry, Rejected, Settings, State};

#[derive(Debug, PartialEq)]
enum E {
    Down,
    Refused,
}

impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E::Refused
    }
}

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

// ---------------------------------------------------------------------------------------
// An `impl Future` method: a refused call must not call the delegate.

#[cutout::resilient]
trait Sender: Sync {
    #[breaker(name = "eager-plain")]
    fn send(&self, n: u32) -> impl Future<Output = Result<u32, E>> + Send;

    #[breaker(name = "eager-fallback", fallback = answer)]
    fn send_or_else(&self, n: u32) -> impl Future<Output = Result<u32, E>> + Send;
}

impl<D: Sender> SenderResilient<D> {
    fn answer(&self, cause: Cause<E>) -> Result<u32, E> {
        // `Cause::Refused`: "The breaker refused the call; the delegate was not called."
        assert!(cause.is_refused());
        Ok(0)
    }
}

/// A client whose method starts the request when called (a spawned task, a message sent on
/// a channel, a `tower::Service::call` that does its work before returning its future):
/// `started` counts the requests that went out.
#[derive(Default)]
struct Eager {
    started: AtomicUsize,
}

impl Sender for Eager {
    fn send(&self, n: u32) -> impl Future<Output = Result<u32, E>> + Send {
        self.started.fetch_add(1, Ordering::SeqCst);
        async move { Ok(n) }
    }
    fn send_or_else(&self, n: u32) -> impl Future<Output = Result<u32, E>> + Send {
        self.started.fetch_add(1, Ordering::SeqCst);
        async move { Ok(n) }
    }
}

#[test]
fn a_refused_impl_future_call_does_not_call_the_delegate() {
    let registry = Registry::new();
    let wrapper = SenderResilient::new(Eager::default(), &registry).unwrap();
    registry.isolate("eager-plain").unwrap();
    let future = pin!(wrapper.send(1));
    assert!(matches!(poll_once(future), Poll::Ready(Err(E::Refused))));
    assert_eq!(
        SenderResilient::delegate(&wrapper)
            .started
            .load(Ordering::SeqCst),
        0,
        "the breaker refused the call, yet the delegate's method ran (its request went out)"
    );
}

#[test]
fn a_fallback_told_refused_means_the_delegate_was_not_called() {
    let registry = Registry::new();
    let wrapper = SenderResilient::new(Eager::default(), &registry).unwrap();
    registry.isolate("eager-fallback").unwrap();
    let future = pin!(wrapper.send_or_else(1));
    assert!(matches!(poll_once(future), Poll::Ready(Ok(0))));
    assert_eq!(
        SenderResilient::delegate(&wrapper)
            .started
            .load(Ordering::SeqCst),
        0,
        "Cause::Refused says the delegate was not called; it was"
    );
}

// ---------------------------------------------------------------------------------------
// Ids: `<Trait>#<method>(<parameter types>)`, "the types as written in the trait".

#[cutout::resilient]
trait Hashes {
    #[breaker]
    fn digest(&self, bytes: [u8; 4]) -> Result<u8, E>;

    #[breaker]
    fn map(&self, f: fn(u8) -> u8) -> Result<u8, E>;
}

struct H;
impl Hashes for H {
    fn digest(&self, bytes: [u8; 4]) -> Result<u8, E> {
        Ok(bytes[0])
    }
    fn map(&self, f: fn(u8) -> u8) -> Result<u8, E> {
        Ok(f(1))
    }
}

#[test]
fn an_array_parameter_id_reads_as_written() {
    let registry = Registry::new();
    let _w = HashesResilient::new(H, &registry).unwrap();
    let ids: Vec<String> = registry.ids().iter().map(|i| i.to_string()).collect();
    assert!(
        registry.contains("Hashes#digest([u8; 4])"),
        "no breaker `Hashes#digest([u8; 4])`; the ids are {ids:?}"
    );
}

#[test]
fn a_fn_pointer_parameter_id_reads_as_written() {
    let registry = Registry::new();
    let _w = HashesResilient::new(H, &registry).unwrap();
    let ids: Vec<String> = registry.ids().iter().map(|i| i.to_string()).collect();
    assert!(
        registry.contains("Hashes#map(fn(u8) -> u8)"),
        "no breaker `Hashes#map(fn(u8) -> u8)`; the ids are {ids:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Conflicts name both methods: after `Registry::remove`, the declarer is forgotten too.

#[cutout::resilient]
trait First {
    #[breaker(name = "reused", window_size = 10)]
    fn first(&self) -> Result<u8, E>;
}

#[cutout::resilient]
trait Second {
    #[breaker(name = "reused", window_size = 20)]
    fn second(&self) -> Result<u8, E>;
}

struct Both;
impl First for Both {
    fn first(&self) -> Result<u8, E> {
        Ok(1)
    }
}
impl Second for Both {
    fn second(&self) -> Result<u8, E> {
        Ok(2)
    }
}

#[test]
fn a_conflict_after_remove_does_not_name_a_method_that_no_longer_declares_it() {
    let registry = Registry::new();
    let first = FirstResilient::new(Both, &registry).unwrap();
    drop(first);
    registry.remove("reused").unwrap();
    // Made in code now, with the default settings.
    registry.breaker("reused", Settings::default()).unwrap();
    let error = SecondResilient::new(Both, &registry)
        .err()
        .expect("a conflict");
    assert!(error.is_conflict());
    assert_eq!(
        error.methods(),
        Some((None, "Second#second()")),
        "the existing breaker was made in code; the error says: {error}"
    );
}

// ---------------------------------------------------------------------------------------
// Holding checks: a panicking delegate gives its probe slot back and records nothing.

#[cutout::resilient]
trait Flaky {
    #[breaker(
        name = "flaky",
        consecutive_failures = 1,
        break_duration = "10s",
        jitter = "none",
        half_open_probes = 1,
        probe_successes = 1
    )]
    fn call(&self, mode: u8) -> Result<u8, E>;

    #[breaker(
        name = "flaky-async",
        consecutive_failures = 1,
        break_duration = "10s",
        jitter = "none",
        half_open_probes = 1,
        probe_successes = 1
    )]
    async fn call_async(&self, mode: u8) -> Result<u8, E>;
}

struct Modes;
impl Flaky for Modes {
    fn call(&self, mode: u8) -> Result<u8, E> {
        match mode {
            0 => Ok(0),
            1 => Err(E::Down),
            _ => panic!("delegate panics"),
        }
    }
    async fn call_async(&self, mode: u8) -> Result<u8, E> {
        match mode {
            0 => Ok(0),
            1 => Err(E::Down),
            _ => panic!("delegate panics"),
        }
    }
}

#[test]
fn a_panicking_probe_gives_its_slot_back_sync() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let w = FlakyResilient::new(Modes, &registry).unwrap();
    let breaker = registry.get("flaky").unwrap();
    assert_eq!(w.call(1), Err(E::Down));
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.call(2)));
    assert!(caught.is_err());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(w.call(0), Ok(0), "the panicking probe kept its slot");
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_panicking_probe_gives_its_slot_back_async() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let w = FlakyResilient::new(Modes, &registry).unwrap();
    let breaker = registry.get("flaky-async").unwrap();
    let ready = |f: std::pin::Pin<&mut _>| poll_once(f);
    assert!(matches!(
        ready(pin!(w.call_async(1))),
        Poll::Ready(Err(E::Down))
    ));
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = poll_once(pin!(w.call_async(2)));
    }));
    assert!(caught.is_err());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(matches!(
        poll_once(pin!(w.call_async(0))),
        Poll::Ready(Ok(0))
    ));
    assert_eq!(breaker.state(), State::Closed);
}

// ---------------------------------------------------------------------------------------
// Holding check: a cancelled `impl Future` call (the eager path) gives its probe slot back.

#[cutout::resilient]
trait Hang {
    #[breaker(
        name = "hang",
        consecutive_failures = 1,
        break_duration = "10s",
        jitter = "none",
        half_open_probes = 1,
        probe_successes = 1
    )]
    fn call(&self, mode: u8) -> impl Future<Output = Result<u8, E>> + Send;
}

struct Hanging;
impl Hang for Hanging {
    fn call(&self, mode: u8) -> impl Future<Output = Result<u8, E>> + Send {
        async move {
            match mode {
                0 => Ok(0),
                1 => Err(E::Down),
                _ => std::future::pending().await,
            }
        }
    }
}

#[test]
fn a_cancelled_impl_future_probe_gives_its_slot_back() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let w = HangResilient::new(Hanging, &registry).unwrap();
    let breaker = registry.get("hang").unwrap();
    assert!(matches!(
        poll_once(pin!(w.call(1))),
        Poll::Ready(Err(E::Down))
    ));
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);
    {
        let hung = pin!(w.call(2));
        assert!(poll_once(hung).is_pending());
    } // cancelled
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(matches!(poll_once(pin!(w.call(0))), Poll::Ready(Ok(0))));
    assert_eq!(breaker.state(), State::Closed);
}

// ---------------------------------------------------------------------------------------
// Ids of raw identifiers: the method is `match`; `r#` is only how Rust spells it.

#[cutout::resilient]
trait Words {
    #[breaker]
    fn r#match(&self, word: &str) -> Result<u8, E>;
}

struct W;
impl Words for W {
    fn r#match(&self, _: &str) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn a_raw_identifier_method_id_is_its_name() {
    let registry = Registry::new();
    let w = WordsResilient::new(W, &registry).unwrap();
    assert_eq!(w.r#match("x"), Ok(1));
    let ids: Vec<String> = registry.ids().iter().map(|i| i.to_string()).collect();
    assert!(
        registry.contains("Words#match(&str)"),
        "the ids are {ids:?}"
    );
}
