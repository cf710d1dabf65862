//! Hostile review of the hot path's last round (issue #30): a break opened while a `CoarseClock` ran keeps no converted
//! end after the clock stops (`publish` keeps the conversion while `until` is unchanged), so
//! every refusal of that break goes to the slow path, whose retry-after is frozen.
//!
//! Its own binary: the coarse clock is process-wide.

use std::time::Duration;

use cutout::clock::CoarseClock;
use cutout::{Breaker, Jitter, RejectReason, Settings};

/// `Rejected::retry_after`'s doc: "On the default SystemClock it is what is left
/// when you ask, to the nanosecond of that clock: asked again later, the same refusal says
/// less". A 60 s break opened while a CoarseClock ran, refused after the clock stopped: the
/// refusal's retry-after, asked 50 ms later, says the same.
#[test]
fn a_refusal_after_the_coarse_clock_stopped_says_less_when_asked_later() {
    let breaker = Breaker::builder("review-coarse")
        .settings(Settings::builder().jitter(Jitter::None).build().unwrap())
        .build();
    let coarse = CoarseClock::start(Duration::from_millis(1)).expect("a coarse clock");
    assert!(breaker.open_for(Duration::from_secs(60)));
    drop(coarse);
    let refused = breaker.try_acquire().expect_err("open for a minute");
    assert_eq!(refused.reason(), RejectReason::Open);
    let first = refused.retry_after().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let later = refused.retry_after().unwrap();
    assert!(
        later + Duration::from_millis(40) <= first,
        "asked 50 ms later it says {later:?}, first {first:?}"
    );
}
