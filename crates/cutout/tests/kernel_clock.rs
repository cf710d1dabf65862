//! Refusals while open on the default (system) clock, decided on the kernel's coarse clock
//! (`clock/kernel.rs`): none outlives its break, the first call after the break is let through,
//! and each retry-after is the break's remainder, read on the precise clock when asked.

use std::time::{Duration, Instant};

use cutout::{Breaker, Error, Settings};

/// What two clocks measuring one interval may disagree by: the breaker's TSC clock and std's
/// `Instant`, read one after the other.
const SKEW: Duration = Duration::from_millis(1);

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
                        before < ends_by + SKEW,
                        "refused {:?} after the break ended",
                        before - ends_by
                    );
                    let retry = rejected.retry_after().expect("an open breaker says when");
                    let asked = Instant::now();
                    // Never shorter than the time left: a caller who waits it out finds the
                    // break over ...
                    assert!(
                        asked + retry + SKEW >= ends_from,
                        "retry-after {retry:?} ends {:?} before the break",
                        ends_from - (asked + retry)
                    );
                    // ... and never past it: read when asked, it is what is left.
                    assert!(
                        after + retry <= ends_by + SKEW,
                        "retry-after {retry:?} runs {:?} past the break",
                        (after + retry) - ends_by
                    );
                    // Asked again later, the same refusal says less (the first refusal comes
                    // with most of the break left).
                    if refusals == 1 {
                        std::thread::sleep(Duration::from_millis(2));
                        let again = rejected.retry_after().unwrap();
                        assert!(again < retry, "{again:?} then {retry:?}");
                    }
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
