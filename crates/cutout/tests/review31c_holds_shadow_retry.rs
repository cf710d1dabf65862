//! Hostile review (rev31c): held: an isolated breaker in shadow mode lets each retry through
//! with its backoff; a breaker switched out of shadow mid-retry (after the attempt that
//! opened it) refuses the next attempt at once, without the backoff.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cutout::clock::{Clock, ManualClock};
use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub enum E {
    Down,
    Refused,
}
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E::Refused
    }
}

#[cutout::resilient]
pub trait Api {
    #[breaker(
        shadow = true,
        consecutive_failures = 1,
        retry(attempts = 3, backoff = "1s")
    )]
    fn get(&self) -> Result<u8, E>;
}

#[derive(Default)]
struct Down {
    calls: AtomicUsize,
    enforce_in: OnceLock<Registry>,
}
impl Api for Down {
    fn get(&self) -> Result<u8, E> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(registry) = self.enforce_in.get() {
            registry.get("Api#get()").unwrap().enforce();
        }
        Err(E::Down)
    }
}

#[test]
fn an_isolated_shadow_breaker_keeps_the_backoff() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let api = ApiResilient::new(Down::default(), &registry).unwrap();
    registry.isolate("Api#get()").unwrap();
    let before = clock.now();
    assert_eq!(api.get(), Err(E::Down));
    assert_eq!(
        ApiResilient::delegate(&api).calls.load(Ordering::Relaxed),
        3
    );
    assert_eq!(
        Duration::from_nanos(clock.now() - before),
        Duration::from_secs(2)
    );
}

#[test]
fn enforcing_mid_retry_refuses_at_once() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let api = ApiResilient::new(Down::default(), &registry).unwrap();
    let _ = ApiResilient::delegate(&api)
        .enforce_in
        .set(registry.clone());
    let before = clock.now();
    assert_eq!(api.get(), Err(E::Refused));
    assert_eq!(
        ApiResilient::delegate(&api).calls.load(Ordering::Relaxed),
        1
    );
    assert_eq!(clock.now() - before, 0);
}
