//! A dependency goes down, comes back with little capacity, then recovers fully: the breaker
//! opens, probes, ramps the traffic back at the pace the dependency can take, and closes.
//! Prints every event, and the state and admitted fraction once a second, on a manual clock.
//!
//! `cargo run -p cutout --example outage_ramp`

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Outcome, Recovery, Settings, Transition};

const MS: Duration = Duration::from_millis(1);

/// The dependency at `at`, having served `served` calls so far this second: healthy at 20 ms;
/// down from 10 s to 30 s; from 30 s to 55 s back, but slow (300 ms) past 15 calls a second.
fn dependency(at: Duration, served: u32) -> (Duration, Outcome) {
    match at.as_secs() {
        10..30 => (5 * MS, Outcome::Failure),
        30..55 if served >= 15 => (300 * MS, Outcome::Success),
        _ => (20 * MS, Outcome::Success),
    }
}

fn main() {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .break_duration(Duration::from_secs(10))
        .jitter(Jitter::None)
        .slow_call_threshold(Some(100 * MS))
        .recovery(Some(Recovery::over(0.5)))
        .build()
        .expect("valid settings");
    let breaker = Breaker::builder("inventory")
        .settings(settings)
        .clock(clock.clone())
        .build();
    breaker.subscribe(|event| {
        let t = &event.transition;
        let detail = match t {
            Transition::Opened {
                reason, break_for, ..
            } => format!(" ({reason}, break {break_for:?})"),
            _ => String::new(),
        };
        println!(
            "  t={:>5.1}s event {} -> {}{detail}",
            event.at.as_secs_f64(),
            t.from(),
            t.to()
        );
    });

    let (mut admitted, mut refused) = (0u32, 0u32);
    while clock.elapsed() < Duration::from_secs(70) {
        // Up to fifty calls a second, one at a time.
        let now = clock.elapsed();
        match breaker.try_acquire() {
            Ok(permit) => {
                let (latency, outcome) = dependency(now, admitted);
                clock.advance(latency);
                permit.record(outcome);
                admitted += 1;
            }
            Err(_) => refused += 1,
        }
        clock.advance((20 * MS).saturating_sub(clock.elapsed() - now));
        if clock.elapsed().as_millis() / 1000 != now.as_millis() / 1000 {
            let snapshot = breaker.snapshot();
            let fraction = snapshot
                .ramp_fraction
                .map(|f| format!(", admitting {:.0}%", f * 100.0))
                .unwrap_or_default();
            println!(
                "t={:>2}s {:<10} health {:<9} admitted {admitted:>3}, refused {refused:>3}{fraction}",
                clock.elapsed().as_secs(),
                snapshot.state.to_string(),
                breaker.health().as_str(),
            );
            (admitted, refused) = (0, 0);
        }
    }
}
