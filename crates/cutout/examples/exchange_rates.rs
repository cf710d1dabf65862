//! An exchange-rate API that times out three times, behind a breaker that opens after three
//! consecutive failures for 30 s, driven on a manual clock (no real waiting).
//!
//! `cargo run -p cutout --example exchange_rates`

use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Error, Jitter, Settings};

/// A fake exchange-rate API: a timeout for the first `fail_first` calls, then a rate.
struct FakeRatesApi {
    fail_first: u32,
    calls: u32,
}

impl FakeRatesApi {
    fn get_rate(&mut self) -> Result<&'static str, &'static str> {
        self.calls += 1;
        if self.calls <= self.fail_first {
            Err("timeout")
        } else {
            Ok("USD/KRW 1380")
        }
    }
}

/// Runs the scenario and returns what it prints.
pub fn run() -> String {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .probe_successes(1)
        .build()
        .expect("valid settings");
    let breaker = Breaker::builder("rates")
        .settings(settings)
        .clock(clock.clone())
        .build();

    let out = Arc::new(Mutex::new(String::new()));
    let log = Arc::clone(&out);
    breaker.subscribe(move |event| {
        let t = &event.transition;
        let mut log = log.lock().unwrap();
        let _ = writeln!(log, "  state {} -> {}: {}", t.from(), t.to(), t);
    });

    let mut api = FakeRatesApi {
        fail_first: 3,
        calls: 0,
    };
    let mut call = |n: u32| {
        let result = match breaker.call(|| api.get_rate()) {
            Ok(rate) => format!("Ok ({rate})"),
            Err(Error::Inner(detail)) => format!("Failed ({detail})"),
            Err(Error::Rejected(_)) => "Rejected (circuit open)".to_owned(),
        };
        let seconds = clock.elapsed().as_secs();
        let _ = writeln!(out.lock().unwrap(), "t={seconds}s call {n}: {result}");
    };

    call(1);
    call(2);
    call(3);
    call(4);
    clock.advance(Duration::from_secs(10));
    call(5);
    clock.advance(Duration::from_secs(20));
    call(6);
    call(7);
    let _ = writeln!(out.lock().unwrap(), "api calls: {}", api.calls);
    out.lock().unwrap().clone()
}

fn main() {
    print!("{}", run());
}
