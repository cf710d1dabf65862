//! A break schedule given the trip window's counts, as Polly's break-duration generator is
//! given its failure count and rate: [`BreakSchedule::with_context`] and [`BreakContext`]. On the
//! manual clock, with no jitter, so every break is exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{BreakContext, BreakSchedule, Breaker, Jitter, Settings, State, TripWindow};

const SEC: Duration = Duration::from_secs(1);

/// Opens when 5 of the last 10 calls failed; no consecutive-failure rule, not adaptive.
fn breaker(schedule: BreakSchedule) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(None)
        .window(TripWindow::Count(10))
        .minimum_calls(10)
        .failure_ratio(Some(0.5))
        .break_duration(10 * SEC)
        .max_break_duration(300 * SEC)
        .jitter(Jitter::None)
        .probe_successes(1)
        .adaptive(false)
        .break_schedule(Some(schedule))
        .build()
        .unwrap();
    let breaker = Breaker::builder("dep")
        .settings(settings)
        .clock(clock.clone())
        .build();
    (breaker, clock)
}

/// Ten calls, the first `failures` of them failing (the trip comes on the tenth).
fn trip(breaker: &Breaker, failures: usize) {
    for i in 0..10 {
        let _ = breaker.call(|| if i < failures { Err(()) } else { Ok(()) });
    }
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_schedule_given_the_failure_rate_breaks_longer_at_a_higher_rate() {
    // 10 s plus 100 s per unit of failure rate.
    let by_rate = BreakSchedule::with_context(|c: &BreakContext| {
        Duration::from_secs_f64(10.0 + 100.0 * c.failure_rate)
    });
    let (half, _) = breaker(by_rate.clone());
    trip(&half, 5);
    let (most, _) = breaker(by_rate);
    trip(&most, 9);
    assert_eq!(
        half.snapshot().current_break,
        Some(60 * SEC),
        "5 of 10 failed"
    );
    assert_eq!(
        most.snapshot().current_break,
        Some(100 * SEC),
        "9 of 10 failed"
    );
}

#[test]
fn the_context_holds_the_opens_and_the_counts_that_decided() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let schedule = BreakSchedule::with_context(move |c: &BreakContext| {
        sink.lock().unwrap().push(*c);
        10 * SEC * c.consecutive_opens
    });
    let (b, clock) = breaker(schedule);
    // Validation asked about the first 16 opens, with no calls.
    let asked = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(asked.len(), 16);
    assert!(
        asked
            .iter()
            .all(|c| c.calls == 0 && c.failures == 0 && c.failure_rate == 0.0)
    );

    trip(&b, 6);
    // From half-open, the probes' counts: one call, failed.
    clock.advance(10 * SEC);
    let _ = b.call(|| Err::<(), _>(()));
    assert_eq!(b.snapshot().current_break, Some(20 * SEC));
    let seen = seen.lock().unwrap().clone();
    let summary: Vec<_> = seen
        .iter()
        .map(|c| (c.consecutive_opens, c.calls, c.failures, c.failure_rate))
        .collect();
    assert_eq!(summary, [(1, 10, 6, 0.6), (2, 1, 1, 1.0)]);
}

#[test]
fn a_panicking_context_schedule_falls_back_to_the_multiplier() {
    let schedule = BreakSchedule::with_context(|c: &BreakContext| {
        assert!(
            c.failure_rate < 0.8,
            "no break for a rate of {}",
            c.failure_rate
        );
        42 * SEC
    });
    let (calm, _) = breaker(schedule.clone());
    trip(&calm, 5);
    assert_eq!(calm.snapshot().current_break, Some(42 * SEC));
    let (panicked, _) = breaker(schedule);
    trip(&panicked, 9);
    assert_eq!(
        panicked.snapshot().current_break,
        Some(10 * SEC),
        "the first break, as the multiplier gives it"
    );
}

#[test]
fn a_schedule_can_be_asked_outside_a_breaker_and_the_old_constructor_still_counts_opens() {
    let by_rate = BreakSchedule::with_context(|c: &BreakContext| {
        if c.failure_rate >= 0.5 {
            60 * SEC
        } else {
            10 * SEC
        }
    });
    let context = BreakContext::new(1, 10, 7);
    assert_eq!(context.failure_rate, 0.7);
    assert_eq!(by_rate.break_at(&context), 60 * SEC);
    assert_eq!(by_rate.break_at(&BreakContext::new(1, 10, 2)), 10 * SEC);
    assert_eq!(
        BreakContext::new(3, 0, 0).failure_rate,
        0.0,
        "no calls: no rate"
    );
    // `break_for` asks with the opens alone (no calls).
    assert_eq!(by_rate.break_for(4), 10 * SEC);

    let opens = BreakSchedule::new(|n| SEC * n);
    assert_eq!(opens.break_at(&BreakContext::new(3, 10, 9)), 3 * SEC);
    assert_eq!(opens.break_for(5), 5 * SEC);
}
