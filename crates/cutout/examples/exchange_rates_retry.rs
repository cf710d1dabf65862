//! Two dependencies with a breaker each; retries outside the breaker that stop once it opens;
//! an InvalidRequest that is not counted. Driven on a manual clock.
//!
//! `cargo run -p cutout --example exchange_rates_retry`

use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::classify::{self, ErrorClass};
use cutout::clock::ManualClock;
use cutout::{Breaker, Error, Jitter, Settings, State};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorKind {
    Timeout,
    Unavailable,
    InvalidRequest,
}

/// Only timeouts and unavailability are evidence against the dependency; a bad request shows
/// it is alive.
fn class(kind: &ErrorKind) -> ErrorClass {
    match kind {
        ErrorKind::Timeout | ErrorKind::Unavailable => ErrorClass::Transient,
        ErrorKind::InvalidRequest => ErrorClass::Permanent,
    }
}

/// A fake API answering from a script, one step per call.
struct ScriptedApi {
    script: Vec<&'static str>,
    calls: usize,
}

impl ScriptedApi {
    fn new(script: &[&'static str]) -> Self {
        ScriptedApi {
            script: script.to_vec(),
            calls: 0,
        }
    }

    fn call(&mut self) -> Result<(), ErrorKind> {
        let step = self.script.get(self.calls).copied().unwrap_or("ok");
        self.calls += 1;
        match step {
            "timeout" => Err(ErrorKind::Timeout),
            "unavailable" => Err(ErrorKind::Unavailable),
            "invalid" => Err(ErrorKind::InvalidRequest),
            _ => Ok(()),
        }
    }
}

fn describe(result: &Result<(), Error<ErrorKind>>) -> String {
    match result {
        Ok(()) => "Ok".to_owned(),
        Err(Error::Inner(kind)) => format!("Failed {kind:?}"),
        Err(Error::Rejected(_)) => "Rejected CircuitOpen".to_owned(),
    }
}

/// Runs the scenario and returns what it prints.
pub fn run() -> String {
    let clock = ManualClock::new();
    // Three consecutive counted failures open it for 30 s; a failed trial opens it for another
    // 30 s (the maximum break equals the first, so it does not grow).
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(30))
        .max_break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .probe_successes(1)
        .build()
        .expect("valid settings");
    let out = Arc::new(Mutex::new(String::new()));
    // One breaker per dependency: an exchange-rate outage must not block inventory.
    let new_breaker = |name: &str| {
        let breaker = Breaker::builder(name)
            .settings(settings.clone())
            .clock(clock.clone())
            .build();
        let log = Arc::clone(&out);
        breaker.subscribe(move |event| {
            let t = &event.transition;
            let mut log = log.lock().unwrap();
            let _ = writeln!(
                log,
                "  {}: {} -> {}: {}",
                event.breaker,
                t.from(),
                t.to(),
                t
            );
        });
        breaker
    };
    let rates = new_breaker("rates");
    let stock = new_breaker("stock");
    let classifier = classify::by_error(class);
    let mut rates_api = ScriptedApi::new(&[
        "timeout",
        "timeout",
        "invalid",
        "unavailable",
        "timeout",
        "ok",
    ]);
    let mut stock_api = ScriptedApi::new(&["ok"]);

    let print = |name: &str,
                 request: u32,
                 attempt: u32,
                 result: &Result<(), Error<ErrorKind>>,
                 breaker: &Breaker| {
        let failures = breaker.snapshot().consecutive_failures;
        let seconds = clock.elapsed().as_secs();
        let line = format!(
            "t={seconds}s {name} #{request} try {attempt}: {} [failures {failures}]",
            describe(result)
        );
        let _ = writeln!(out.lock().unwrap(), "{line}");
    };

    // Exchange-rate lookup is read-only, so it may be retried: at most two attempts, outside
    // the breaker, stopping as soon as the breaker is open.
    let mut get_rate = |request: u32| {
        const MAX_ATTEMPTS: u32 = 2;
        for attempt in 1.. {
            let result = rates.call_with(&classifier, || rates_api.call());
            print("rates", request, attempt, &result, &rates);
            let retryable =
                matches!(result, Err(Error::Inner(kind)) if class(&kind) == ErrorClass::Transient);
            if !retryable || attempt == MAX_ATTEMPTS {
                return;
            }
            if rates.state() == State::Open {
                let _ = writeln!(out.lock().unwrap(), "  retry stopped: circuit open");
                return;
            }
            // Production waits for a backoff; here the clock moves one second.
            clock.advance(Duration::from_secs(1));
        }
    };

    get_rate(1);
    get_rate(2);
    get_rate(3);
    get_rate(4);
    let stocked = stock.call_with(&classifier, || stock_api.call());
    print("stock", 1, 1, &stocked, &stock);
    clock.advance(Duration::from_secs(30));
    get_rate(5);
    clock.advance(Duration::from_secs(14));
    get_rate(6);
    clock.advance(Duration::from_secs(16));
    get_rate(7);
    let _ = writeln!(
        out.lock().unwrap(),
        "rates api calls: {}, stock api calls: {}",
        rates_api.calls,
        stock_api.calls
    );
    out.lock().unwrap().clone()
}

fn main() {
    print!("{}", run());
}
