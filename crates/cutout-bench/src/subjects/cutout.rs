//! cutout's breaker, driven through `Breaker::call` as a user would.

use cutout::{Breaker, Jitter, Settings, TripWindow};

use super::{LONG_BREAK, WARM_UP_CALLS, feed, trip};
use crate::{Call, Outcome, Subject};

/// A cutout breaker; each thread's handle is a clone (clones share one state).
pub struct Cutout(Breaker);

impl Subject for Cutout {
    type Handle = Breaker;
    fn handle(&self) -> Breaker {
        self.0.clone()
    }
}

impl Call for Breaker {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        match Breaker::call(self, || if fail { Err(()) } else { Ok(()) }) {
            Ok(()) => Outcome::Ok,
            Err(error) if error.is_rejected() => Outcome::Rejected,
            Err(_) => Outcome::Failed,
        }
    }
}

/// Count window of 100, 5 consecutive failures, failure ratio 0.5, no latency timing (not
/// adaptive, no slow-call threshold): 10% failures never trip it. Warmed up so the window is
/// full.
pub fn count_window() -> Cutout {
    let settings = Settings::builder()
        .consecutive_failures(Some(5))
        .failure_ratio(Some(0.5))
        .adaptive(false)
        .window(TripWindow::Count(100))
        .build()
        .expect("valid settings");
    warmed(Breaker::builder("bench-count").settings(settings).build())
}

/// `Settings::default()`: a 30 s time window, 5 consecutive failures, adaptive (one call in
/// eight per thread timed, its latency sampled into the baseline).
pub fn default_settings() -> Cutout {
    warmed(Breaker::builder("bench-default").build())
}

/// Opened by 5 consecutive failures, with a one-hour break.
pub fn open() -> Cutout {
    let settings = Settings::builder()
        .consecutive_failures(Some(5))
        .break_duration(LONG_BREAK)
        .max_break_duration(LONG_BREAK)
        .jitter(Jitter::None)
        .build()
        .expect("valid settings");
    let subject = Cutout(Breaker::builder("bench-open").settings(settings).build());
    trip(&subject, 5);
    subject
}

fn warmed(breaker: Breaker) -> Cutout {
    let subject = Cutout(breaker);
    assert_eq!(feed(&subject, WARM_UP_CALLS, false), Outcome::Ok);
    subject
}
