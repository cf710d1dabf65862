//! Refusals while open on the system clock with a `CoarseClock` running, which are decided on
//! the inlined quick path (the coarse time and the break's end); in a binary of its own, since
//! the coarse clock is process-wide.

use std::thread;
use std::time::{Duration, Instant};

use cutout::clock::CoarseClock;
use cutout::{Breaker, Jitter, RejectReason, Settings, State};

const BREAK: Duration = Duration::from_millis(300);
/// A generous bound on how far the coarse time lags on a loaded machine.
const LAG: Duration = Duration::from_millis(50);

fn tripped(id: &str, shadow: bool) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .break_duration(BREAK)
        .max_break_duration(BREAK)
        .jitter(Jitter::None)
        .shadow(shadow)
        .build()
        .expect("valid settings");
    let breaker = Breaker::new(id, settings);
    let _ = breaker.call(|| Err::<(), _>("down"));
    assert_eq!(breaker.peek().0, State::Open);
    breaker
}

#[test]
fn a_coarse_clock_refuses_with_the_break_left_and_admits_the_probe_after_it() {
    let _coarse = CoarseClock::start(Duration::from_millis(1)).expect("none runs");
    let opened = Instant::now();
    let breaker = tripped("coarse-open", false);
    let shadow = tripped("coarse-shadow", true);

    let mut refusals = 0;
    while opened.elapsed() < BREAK / 2 {
        let error = breaker
            .call(|| Ok::<(), ()>(()))
            .expect_err("refused while open");
        let rejected = error.rejection().expect("a refusal, not the call's error");
        assert_eq!(rejected.reason(), RejectReason::Open);
        assert_eq!(rejected.breaker().as_str(), "coarse-open");
        let left = rejected
            .retry_after()
            .expect("an open breaker knows its break");
        // The coarse time lags by up to its resolution (and the thread's wake-up), so the
        // break left may read that much long.
        assert!(left <= BREAK + LAG, "{left:?} left of a {BREAK:?} break");
        assert!(left + opened.elapsed() >= BREAK - LAG);
        refusals += 1;
        // A shadow breaker lets every call through while it would refuse.
        assert_eq!(shadow.call(|| Ok::<_, ()>(7)).ok(), Some(7));
    }
    assert!(refusals > 0);

    // Once the break and a coarse tick have passed, the next call is a probe (the quick path
    // leaves an ended break to the slow path), and its success does not re-open.
    thread::sleep(BREAK.saturating_sub(opened.elapsed()) + LAG);
    let permit = breaker.try_acquire().expect("the break has ended");
    assert!(permit.is_probe());
    permit.success();
    assert_ne!(breaker.peek().0, State::Open);
}
