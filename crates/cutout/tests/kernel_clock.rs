//! Refusals while open on the default (system) clock, decided on the kernel's coarse clock
//! (`clock/kernel.rs`): none outlives its break, the first call after the break is let through,
//! and each retry-after covers the break's remainder, long by no more than the stated margin.

use std::time::{Duration, Instant};

use cutout::{Breaker, Error, Settings};

/// The most the docs let a retry-after decided on the kernel's clock run past the break: three
/// ticks and 1/512 of the break; ticks taken at 10 ms, the slowest usual kernel rate, so that
/// the test holds on any kernel.
fn margin(break_length: Duration) -> Duration {
    Duration::from_millis(30) + break_length / 512
}

#[test]
fn no_refusal_outlives_its_break_and_each_retry_after_covers_its_remainder() {
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
                    // Never shorter than the time left: a caller who waits it out finds the
                    // break over (a millisecond allowed for the two clocks measuring it: the
                    // breaker's TSC clock and std's `Instant`) ...
                    assert!(
                        after + retry + Duration::from_millis(1) >= ends_from,
                        "retry-after {retry:?} ends {:?} before the break",
                        ends_from - (after + retry)
                    );
                    // ... and long by no more than the margin.
                    assert!(
                        before + retry <= ends_by + margin(length),
                        "retry-after {retry:?} runs {:?} past the break",
                        (before + retry) - ends_by
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

/// The contract a queue consumer or a client relies on: refused, it waits out the retry-after
/// and is let through. (A first version read the retry-after from the safe bound, short of the
/// break by its margin, and the caller was refused a second time: cutout-reqwest's README
/// example failed so.)
#[test]
fn a_caller_who_waits_out_the_retry_after_is_let_through() {
    for millis in [30, 120, 400] {
        let breaker = Breaker::new("kernel-clock-wait", Settings::default());
        assert!(breaker.open_for(Duration::from_millis(millis)));
        let Err(Error::Rejected(rejected)) = breaker.call(|| Ok::<(), ()>(())) else {
            panic!("an open breaker refuses");
        };
        std::thread::sleep(rejected.retry_after().expect("an open breaker says when"));
        assert!(
            breaker.call(|| Ok::<(), ()>(())).is_ok(),
            "a {millis} ms break: refused again after waiting {:?}",
            rejected.retry_after()
        );
    }
}
