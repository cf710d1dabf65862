//! Refusals while open on the default (system) clock, decided on the kernel's coarse clock
//! (`clock/kernel.rs`): none outlives its break, the first call after the break is let through,
//! and each retry-after is the break's remainder, short by no more than the stated margin.

use std::time::{Duration, Instant};

use cutout::{Breaker, Error, Settings};

/// The margin the docs state for a retry-after decided on the kernel's clock: two ticks, the
/// tick the coarse reading trails by, and 1/1024 of the break; ticks taken at 10 ms, the
/// slowest usual kernel rate, so that the test holds on any kernel.
fn margin(break_length: Duration) -> Duration {
    Duration::from_millis(30) + break_length / 1024
}

#[test]
fn no_refusal_outlives_its_break_and_each_retry_after_is_its_remainder() {
    let length = Duration::from_millis(150);
    for _ in 0..5 {
        let breaker = Breaker::new("kernel-clock", Settings::default());
        let opening = Instant::now();
        assert!(breaker.open_for(length));
        let opened = Instant::now();
        // `open_for` read the clock between the two: the break ends between these.
        let ends_from = opening + length;
        let ends_by = opened + length;
        let mut refusals = 0u64;
        let admitted = loop {
            let before = Instant::now();
            match breaker.call(|| Ok::<(), ()>(())) {
                Err(Error::Rejected(rejected)) => {
                    let after = Instant::now();
                    refusals += 1;
                    assert!(
                        before < ends_by,
                        "refused {:?} after the break ended",
                        before - ends_by
                    );
                    let retry = rejected.retry_after().expect("an open breaker says when");
                    // Never past the break's end, as read after the call ...
                    assert!(
                        after + retry <= ends_by + Duration::from_millis(2),
                        "retry-after {retry:?} runs {:?} past the break",
                        (after + retry) - ends_by
                    );
                    // ... and short of it by no more than the margin.
                    let remainder = ends_from.saturating_duration_since(after);
                    assert!(
                        retry + margin(length) >= remainder,
                        "retry-after {retry:?} against a remainder of {remainder:?}"
                    );
                }
                Ok(()) => break Instant::now(),
                Err(other) => panic!("{other:?}"),
            }
            if refusals.is_multiple_of(1024) {
                std::thread::yield_now();
            }
            assert!(
                opened.elapsed() < Duration::from_secs(5),
                "never let through"
            );
        };
        assert!(refusals > 100, "{refusals} refusals in a 150 ms break");
        // The first probe comes promptly once the break is over (a loaded VM may deschedule
        // the thread for a while, hence the generous bound).
        assert!(
            admitted < ends_by + Duration::from_millis(250),
            "let through {:?} after the break",
            admitted - ends_by
        );
    }
}
