//! Hostile review (rev31b): a retry on a `shadow = true` breaker. A shadow breaker "never
//! refuses a call", but it still goes open; the retry skips its backoff whenever the breaker
//! reads open ("a refusal is coming"), so in shadow mode every retry after the opening
//! failure hits the delegate at once, with no backoff, though nothing is refused.
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

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

    #[breaker(
        shadow = true,
        consecutive_failures = 1,
        retry(attempts = 3, backoff = "1s")
    )]
    async fn get_async(&self) -> Result<u8, E>;
}

#[derive(Default)]
struct Down(AtomicUsize);
impl Api for Down {
    fn get(&self) -> Result<u8, E> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Err(E::Down)
    }
    async fn get_async(&self) -> Result<u8, E> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Err(E::Down)
    }
}

#[test]
fn a_shadow_breaker_does_not_skip_the_sync_backoff() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let api = ApiResilient::new(Down::default(), &registry).unwrap();
    let before = clock.now();
    assert_eq!(api.get(), Err(E::Down), "shadow: never refused");
    assert_eq!(ApiResilient::delegate(&api).0.load(Ordering::Relaxed), 3);
    assert_eq!(
        Duration::from_nanos(clock.now() - before),
        Duration::from_secs(2),
        "two backoffs between three attempts that were all made"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shadow_breaker_does_not_skip_the_async_backoff() {
    let api = ApiResilient::new(Down::default(), &Registry::new()).unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(api.get_async().await, Err(E::Down), "shadow: never refused");
    assert_eq!(ApiResilient::delegate(&api).0.load(Ordering::Relaxed), 3);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}
