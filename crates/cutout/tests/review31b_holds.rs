//! Hostile review (rev31b): shapes and behaviours that held (kept as regression tests).
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(dead_code, missing_docs, async_fn_in_trait, clippy::new_ret_no_self)]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    clippy::manual_async_fn,
    clippy::non_minimal_cfg,
    clippy::wrong_self_convention
)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cutout::clock::ManualClock;
use cutout::{Registry, Rejected, State};

#[derive(Debug, PartialEq, Clone)]
pub enum E {
    Down,
    Bad,
    Refused,
}
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E::Refused
    }
}
fn bad(e: &E) -> bool {
    *e == E::Bad
}

// Native shapes, spawned on tokio with a concrete delegate.
#[cutout::resilient]
pub trait Native {
    #[breaker(consecutive_failures = 3)]
    async fn a(&self, k: &str) -> Result<usize, E>;
    #[breaker(consecutive_failures = 3)]
    fn b(&self, k: &str) -> impl Future<Output = Result<usize, E>> + Send;
    #[breaker(consecutive_failures = 3, retry(attempts = 2))]
    async fn c(&self, k: &str) -> Result<usize, E>;
}

#[derive(Default)]
struct Backend {
    calls: AtomicUsize,
}
impl Native for Backend {
    async fn a(&self, k: &str) -> Result<usize, E> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(k.len())
    }
    fn b(&self, k: &str) -> impl Future<Output = Result<usize, E>> + Send {
        let n = k.len();
        async move { Ok(n) }
    }
    async fn c(&self, k: &str) -> Result<usize, E> {
        Ok(k.len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_futures_spawn_with_a_concrete_delegate() {
    let w = Arc::new(NativeResilient::new(Backend::default(), &Registry::new()).unwrap());
    let w2 = w.clone();
    let h = tokio::spawn(async move { w2.a("abc").await.unwrap() + w2.c("ab").await.unwrap() });
    assert_eq!(h.await.unwrap(), 5);
    let h = tokio::spawn(async move { w.b("abcd").await });
    assert_eq!(h.await.unwrap(), Ok(4));
}

// async_trait: generic trait, generic method, &Self, full path, lifetime, pass-throughs.
#[cutout::resilient]
#[::async_trait::async_trait]
pub trait Repo<K: Send + Sync + 'static>: Send + Sync {
    #[breaker(consecutive_failures = 1)]
    async fn get(&self, k: K) -> Result<u8, E>;
    #[breaker]
    async fn generic<T: AsRef<str> + Send + 'static>(&self, t: T) -> Result<usize, E>;
    #[breaker]
    async fn merge(&self, other: &Self) -> Result<u8, E>;
    #[breaker]
    async fn new(&self) -> Result<u8, E>;
    #[breaker]
    fn sync_one(&self, k: &str) -> Result<usize, E>;
    async fn bump(&mut self) -> u8;
    async fn consume(self) -> u8
    where
        Self: Sized;
    async fn defaulted(&self) -> u8 {
        9
    }
}

struct R(u8);
#[async_trait]
impl Repo<String> for R {
    async fn get(&self, k: String) -> Result<u8, E> {
        if k.is_empty() {
            Err(E::Down)
        } else {
            Ok(self.0)
        }
    }
    async fn generic<T: AsRef<str> + Send + 'static>(&self, t: T) -> Result<usize, E> {
        Ok(t.as_ref().len())
    }
    async fn merge(&self, other: &Self) -> Result<u8, E> {
        Ok(self.0 + other.0)
    }
    async fn new(&self) -> Result<u8, E> {
        Ok(42)
    }
    fn sync_one(&self, k: &str) -> Result<usize, E> {
        Ok(k.len())
    }
    async fn bump(&mut self) -> u8 {
        self.0 += 1;
        self.0
    }
    async fn consume(self) -> u8 {
        self.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_trait_shapes_hold() {
    let registry = Registry::new();
    let mut w = RepoResilient::new(R(1), &registry).unwrap();
    let other = RepoResilient::new(R(2), &registry).unwrap();
    assert_eq!(w.get("x".into()).await, Ok(1));
    assert_eq!(w.generic("abc").await, Ok(3));
    assert_eq!(w.merge(&other).await, Ok(3));
    assert_eq!(Repo::new(&w).await, Ok(42));
    assert_eq!(w.sync_one("ab"), Ok(2));
    assert_eq!(w.bump().await, 2);
    assert_eq!(w.defaulted().await, 9);
    let mut ids: Vec<String> = registry
        .ids()
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "Repo#generic(T)",
            "Repo#get(K)",
            "Repo#merge(&Self)",
            "Repo#new()",
            "Repo#sync_one(&str)"
        ]
    );
    let d = Arc::new(w);
    let h = tokio::spawn(async move { d.get(String::new()).await });
    assert_eq!(h.await.unwrap(), Err(E::Down));
    assert_eq!(other.consume().await, 2);
}

// An unpolled async_trait future dropped in half-open gives its probe slot back.
#[cutout::resilient]
#[async_trait]
pub trait Probe: Send + Sync {
    #[breaker(
        consecutive_failures = 1,
        half_open_probes = 1,
        probe_successes = 1,
        jitter = "none"
    )]
    async fn call(&self) -> Result<(), E>;
}
struct P(AtomicUsize);
#[async_trait]
impl Probe for P {
    async fn call(&self) -> Result<(), E> {
        if self.0.fetch_add(1, Ordering::Relaxed) == 0 {
            Err(E::Down)
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn an_unpolled_dropped_future_frees_the_probe_slot() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let w = ProbeResilient::new(P(AtomicUsize::new(0)), &registry).unwrap();
    assert_eq!(w.call().await, Err(E::Down));
    let b = registry.get("Probe#call()").unwrap();
    assert_eq!(b.state(), State::Open);
    clock.elapse_break(&b);
    drop(w.call());
    assert_eq!(w.call().await, Ok(()));
    assert_eq!(b.state(), State::Closed);
}

// Sync retries: attempts = 1 is one call; backoff on the manual clock; ignore over record.
#[cutout::resilient]
pub trait Sync1 {
    #[breaker(consecutive_failures = 10, retry(attempts = 1, backoff = "1s"))]
    fn once(&self) -> Result<(), E>;
    #[breaker(consecutive_failures = 10, retry(attempts = 3, backoff = "1s"))]
    fn thrice(&self) -> Result<(), E>;
    #[breaker(consecutive_failures = 1, ignore = bad, record = bad)]
    fn judged(&self) -> Result<(), E>;
}
struct S(AtomicUsize);
impl Sync1 for S {
    fn once(&self) -> Result<(), E> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Err(E::Down)
    }
    fn thrice(&self) -> Result<(), E> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Err(E::Down)
    }
    fn judged(&self) -> Result<(), E> {
        Err(E::Bad)
    }
}

#[test]
fn sync_retry_counts_and_backoff_on_the_clock() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let w = Sync1Resilient::new(S(AtomicUsize::new(0)), &registry).unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(w.once(), Err(E::Down));
    assert_eq!(Sync1Resilient::delegate(&w).0.load(Ordering::Relaxed), 1);
    let before = cutout::clock::Clock::now(&clock);
    assert_eq!(w.thrice(), Err(E::Down));
    let after = cutout::clock::Clock::now(&clock);
    let (before, after) = (Duration::from_nanos(before), Duration::from_nanos(after));
    assert_eq!(Sync1Resilient::delegate(&w).0.load(Ordering::Relaxed), 4);
    assert_eq!(after - before, Duration::from_secs(2));
    assert!(t0.elapsed() < Duration::from_millis(500));
    assert_eq!(w.judged(), Err(E::Bad));
    assert_eq!(w.judged(), Err(E::Bad));
    assert_eq!(
        registry.get("Sync1#judged()").unwrap().state(),
        State::Closed
    );
}
