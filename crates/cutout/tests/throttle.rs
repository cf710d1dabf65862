//! Adaptive throttling (Google SRE's client-side throttling) as the breaker's admission mode,
//! on the manual clock: the refusal probability is the book's formula over the trip window,
//! refusals count as requests, a healthy or half-failing dependency is never throttled, the
//! breaker never opens from its trip rules, and it lets traffic back as the window slides.

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, ErrorCode, RejectReason, Settings, State, TripWindow};

const SEC: Duration = Duration::from_secs(1);

fn throttling(multiple: f64) -> (Breaker, ManualClock) {
    throttling_seeded(multiple, 3)
}

fn throttling_seeded(multiple: f64, seed: u64) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let breaker = Breaker::builder("ads")
        .settings(
            Settings::builder()
                .window(TripWindow::Time(10 * SEC))
                .throttle(Some(multiple))
                .adaptive(false)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .seed(seed)
        .build();
    (breaker, clock)
}

/// Runs `n` calls of which `failing_in_ten` of every ten fail (when they run), returning how
/// many were throttled.
fn run(breaker: &Breaker, n: usize, failing_in_ten: usize) -> usize {
    (0..n)
        .filter(|i| {
            let fails = i % 10 < failing_in_ten;
            match breaker.call(|| if fails { Err(()) } else { Ok(()) }) {
                Err(e) => e
                    .rejection()
                    .inspect(|r| {
                        assert_eq!(r.reason(), RejectReason::Throttled);
                        assert_eq!(r.retry_after(), None, "a throttled refusal has no wait");
                    })
                    .is_some(),
                Ok(()) => false,
            }
        })
        .count()
}

#[test]
fn a_healthy_or_half_failing_dependency_is_never_throttled_with_k_2() {
    let (breaker, _) = throttling(2.0);
    assert_eq!(run(&breaker, 2_000, 0), 0);
    assert_eq!(
        run(&breaker, 2_000, 5),
        0,
        "50% failures, K = 2: requests = 2 × accepts"
    );
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
}

#[test]
fn a_failing_dependency_is_sent_about_what_the_formula_says() {
    let (breaker, _) = throttling(2.0);
    // Every call fails: the breaker never opens (no trip rule applies to it) and refuses
    // almost everything.
    let mut refused = run(&breaker, 5_000, 10);
    assert_eq!(breaker.state(), State::Closed);
    assert!(refused > 4_900, "{refused} of 5,000");
    // The snapshot reads the probability admission draws against, over the refusals counted
    // as of the last locked operation: an admitted (failing) call brings them all in.
    while breaker.call(|| Err::<(), _>(())).unwrap_err().is_rejected() {
        refused += 1;
    }
    let snapshot = breaker.snapshot();
    let p = snapshot.throttle_probability.unwrap();
    // requests = counted calls + refusals, accepts = 0.
    let requests = (snapshot.calls + refused as u64) as f64;
    assert!(
        (p - requests / (requests + 1.0)).abs() < 1e-9,
        "{p} against {requests} requests"
    );
}

/// The formula has two fixed points for a dependency that accepts a steady share `q` of the
/// calls sent to it: none refused when `K × q` is above 1, almost all refused when below (the
/// refusals themselves count as requests). 80% failing: `q` = 0.2.
#[test]
fn an_eighty_percent_failure_rate_is_throttled_with_k_2_and_not_with_k_10() {
    let (strict, _) = throttling(2.0);
    let n = 20_000;
    let refused = run(&strict, n, 8) as f64 / n as f64;
    let p = strict.snapshot().throttle_probability.unwrap();
    assert!(p > 0.99, "{p}");
    assert!(refused > 0.95, "refused {refused:.3}");
    // K = 10 after a healthy start: requests never exceed 10 × accepts (1,000 + m requests
    // against 1,000 + 0.2 m accepts). (Started on the failures themselves, the first eight
    // calls all fail and the window's few calls can throttle: how much depends on which of the
    // next calls the draw admits, on a clock that does not move.)
    let (lenient, _) = throttling(10.0);
    assert_eq!(run(&lenient, 1_000, 0), 0);
    assert_eq!(run(&lenient, n, 8), 0);
    assert_eq!(lenient.snapshot().throttle_probability, Some(0.0));
}

#[test]
fn traffic_comes_back_as_the_window_slides_past_the_outage() {
    let (breaker, clock) = throttling(2.0);
    run(&breaker, 1_000, 10);
    assert!(breaker.snapshot().throttle_probability.unwrap() > 0.99);
    // The dependency recovers; the failures and refusals slide out of the 10 s window.
    clock.advance(11 * SEC);
    let refused = run(&breaker, 1_000, 0);
    assert!(refused < 5, "{refused}");
    assert_eq!(breaker.snapshot().throttle_probability, Some(0.0));
}

#[test]
fn controls_and_signals_still_open_a_throttling_breaker() {
    let (breaker, clock) = throttling(2.0);
    assert!(breaker.open_for(5 * SEC));
    assert_eq!(breaker.state(), State::Open);
    let refusal = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
    assert_eq!(refusal.rejection().unwrap().reason(), RejectReason::Open);
    clock.advance(5 * SEC);
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    breaker.call(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert!(breaker.trip_on_signal());
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_shadow_breaker_throttles_nothing() {
    let breaker = Breaker::builder("shadow")
        .settings(
            Settings::builder()
                .throttle(Some(2.0))
                .shadow(true)
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .build();
    assert_eq!(run(&breaker, 2_000, 10), 0);
}

#[test]
fn bad_throttling_settings_are_refused_with_codes_naming_the_key() {
    for bad in [0.0, 0.5, -2.0, f64::NAN, f64::INFINITY] {
        let error = Settings::builder().throttle(Some(bad)).build().unwrap_err();
        assert_eq!(
            (error.code(), error.code().as_str(), error.key()),
            (
                ErrorCode::ThrottleMultipleOutOfRange,
                "CUT-CFG-017",
                "throttle"
            ),
            "{bad}"
        );
    }
    let error = Settings::builder().throttle(Some(0.0)).build().unwrap_err();
    assert_eq!(
        error.to_string(),
        "CUT-CFG-017: invalid throttle = 0.0: allowed a finite number of at least 1 (2 is the \
         usual choice)"
    );
    let count = Settings::builder()
        .window(TripWindow::Count(100))
        .throttle(Some(2.0))
        .build()
        .unwrap_err();
    assert_eq!(
        (count.code(), count.key()),
        (ErrorCode::Contradiction, "throttle")
    );
    for good in [1.0, 1.5, 2.0, 10.0] {
        let settings = Settings::builder().throttle(Some(good)).build().unwrap();
        assert_eq!(settings.throttle(), Some(good));
        assert_eq!(
            settings.to_builder().build().unwrap().throttle(),
            Some(good)
        );
    }
    assert_eq!(Settings::default().throttle(), None);
}

#[cfg(feature = "serde")]
#[test]
fn configuration_files_switch_throttling_on_by_its_multiple() {
    let config = cutout::config::Config::from_toml(
        "[defaults]\nthrottle = 2\n[instances.search]\nthrottle = false\n",
    )
    .unwrap();
    assert_eq!(config.defaults().throttle(), Some(2.0));
    assert_eq!(config.instance("search").unwrap().throttle(), None);
    let error = cutout::config::Config::from_toml("[defaults]\nthrottle = 0.5\n").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("CUT-CFG-017: invalid throttle = 0.5 in [defaults]"),
        "{error}"
    );
    let error = cutout::config::Config::from_toml("[defaults]\nthrottle = true\n").unwrap_err();
    assert!(error.to_string().starts_with("CUT-CFG-0"), "{error}");
}

/// Calls hung in flight trip an adaptive breaker before any of them returns; a throttling one
/// throttles instead (no trip rule opens it, this one included).
#[test]
fn calls_hung_in_flight_never_open_a_throttling_breaker() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder("hangs")
        .settings(
            Settings::builder()
                .window(TripWindow::Time(10 * SEC))
                .throttle(Some(2.0))
                .slow_call_threshold(Some(Duration::from_millis(100)))
                .minimum_calls(5)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build();
    for _ in 0..50 {
        let permit = breaker.try_acquire().unwrap();
        clock.advance(Duration::from_millis(10));
        permit.success();
    }
    let hung: Vec<_> = (0..20).map(|_| breaker.try_acquire().unwrap()).collect();
    for _ in 0..20 {
        clock.advance(SEC);
        let _ = breaker.try_acquire();
    }
    assert_eq!(breaker.state(), State::Closed);
    drop(hung);
}

/// Which of `n` calls (8 in 10 failing) were throttled.
fn refused_calls(breaker: &Breaker, n: usize) -> Vec<usize> {
    (0..n)
        .filter(|i| {
            let fails = i % 10 < 8;
            breaker
                .call(|| if fails { Err(()) } else { Ok(()) })
                .is_err_and(|e| e.is_rejected())
        })
        .collect()
}

#[test]
fn two_throttling_breakers_with_different_seeds_refuse_different_calls() {
    let (first, _) = throttling_seeded(2.0, 1);
    let (second, _) = throttling_seeded(2.0, 2);
    let (again, _) = throttling_seeded(2.0, 1);
    let a = refused_calls(&first, 4_000);
    let b = refused_calls(&second, 4_000);
    assert!(
        a.len() > 400 && b.len() > 400,
        "{} and {}",
        a.len(),
        b.len()
    );
    assert!(
        a != b,
        "the seed decides which calls are refused: both refused the same {}",
        a.len()
    );
    assert!(a == refused_calls(&again, 4_000), "one seed, one sequence");
}

#[test]
fn a_forced_opening_starts_its_refused_count_at_zero_after_throttled_refusals() {
    let (breaker, _) = throttling(2.0);
    let throttled = run(&breaker, 2_000, 8);
    assert!(throttled > 100, "{throttled}");
    assert_eq!(breaker.snapshot().refused_calls as usize, throttled);
    assert!(breaker.open_for(30 * SEC));
    assert_eq!(
        breaker.snapshot().refused_calls,
        0,
        "a new state episode counts its own refusals"
    );
    assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
    assert_eq!(breaker.snapshot().refused_calls, 1);
}
