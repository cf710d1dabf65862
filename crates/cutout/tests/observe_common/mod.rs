//! What the observability tests share: a breaker that opens, probes and ramps on a manual
//! clock.

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Recovery, Settings};

/// Opens after 2 consecutive failures for a 10 s break, closes after 1 probe success, then
/// ramps over 20% of calls.
pub fn ramping(clock: &ManualClock) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(Duration::from_secs(10))
        .jitter(Jitter::None)
        .probe_successes(1)
        .recovery(Some(Recovery::over(0.2)))
        .build()
        .unwrap();
    Breaker::builder("payments")
        .settings(settings)
        .clock(clock.clone())
        .build()
}
