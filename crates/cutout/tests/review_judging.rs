//! Review of the core's latency judgement (the slow-call margin) and of the relative-failure
//! chance test at 10⁻⁷ (issue #27): each test names a behaviour the docs promise and fails on
//! the code that broke it. Manual clock, seeded draws, deterministic.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::Registry;
use cutout::clock::ManualClock;
use cutout::{Breaker, Outcome, Settings, SettingsBuilder, SlowCalls, State, Transition};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn breaker(settings: SettingsBuilder, clock: &ManualClock, seed: u64) -> Breaker {
    Breaker::builder("dep")
        .settings(settings.build().unwrap())
        .clock(clock.clone())
        .seed(seed)
        .build()
}

/// One call taking `latency` with `outcome`, then idle until `gap` has passed since it
/// started. Whether it was admitted.
fn call(
    b: &Breaker,
    clock: &ManualClock,
    latency: Duration,
    outcome: Outcome,
    gap: Duration,
) -> bool {
    match b.try_acquire() {
        Ok(permit) => {
            clock.advance(latency);
            permit.record(outcome);
            clock.advance(gap - latency);
            true
        }
        Err(_) => {
            clock.advance(gap);
            false
        }
    }
}

// ---------------------------------------------------------------------------------------
// The registry names every differing key.
// ---------------------------------------------------------------------------------------

/// CUT-REG-001's docs: "the message names every differing key with both values". A breaker
/// asked for again with only another `slow-calls-margin` must name that key, not the
/// `settings` fallback.
#[test]
fn a_registry_conflict_on_the_margin_alone_names_slow_calls_margin() {
    let registry = Registry::new();
    let with = |margin: Duration| {
        Settings::builder()
            .slow_calls(Some(SlowCalls::above(3.0).margin(margin)))
            .build()
            .unwrap()
    };
    registry.breaker("cache", with(50 * MS)).unwrap();
    let error = registry
        .breaker("cache", with(Duration::ZERO))
        .expect_err("different settings conflict");
    let keys: Vec<_> = error.conflicting_keys().collect();
    assert_eq!(keys, ["slow-calls-margin"], "{error}");
}

// ---------------------------------------------------------------------------------------
// The threshold: the largest of its three terms, and the probes judged against it.
// ---------------------------------------------------------------------------------------

/// `SlowCalls::threshold_for`'s docs: "the largest of `multiple` × normal, normal + margin,
/// and the floor". Whatever it saturates at, it is never below the normal latency itself: a
/// call taking exactly the normal latency is not slow. It caps the normal at `u64::MAX`
/// nanoseconds (584 years) and so answers less than a longer normal it was given.
#[test]
fn the_threshold_is_never_below_the_normal_latency_it_was_given() {
    let slow = SlowCalls::above(3.0);
    for normal in [
        Duration::from_nanos(u64::MAX) + Duration::from_nanos(1),
        Duration::from_secs(1 << 40),
        Duration::MAX,
    ] {
        let threshold = slow.threshold_for(normal);
        assert!(
            threshold >= normal,
            "threshold_for({normal:?}) = {threshold:?}, below the normal latency"
        );
    }
}

/// DESIGN §2 "Judging latency": a probe is judged on "slowness only against a limit a fresh
/// connection cannot cross by itself". relative.rs recommends an absolute
/// `slow_call_threshold` for a fast dependency (its "2 ms cache answering in 40 ms"), and
/// that threshold judges probes as it is: a probe whose fresh connection adds a TLS
/// handshake (30 ms on a 2 ms cache) re-opens the breaker as slow, every time, so the
/// breaker of a recovered dependency never closes while its probes open connections.
#[test]
fn a_probe_on_a_fresh_connection_is_not_slow_under_an_absolute_threshold() {
    // Returns whether the breaker closed within three rounds of two probes taking `probe`,
    // and the reasons it opened for.
    let recover = |probe: Duration| {
        let clock = ManualClock::new();
        let b = breaker(
            Settings::builder()
                .slow_call_threshold(Some(10 * MS))
                .jitter(cutout::Jitter::None),
            &clock,
            3,
        );
        let reasons = Arc::new(Mutex::new(Vec::new()));
        let sink = reasons.clone();
        b.subscribe(move |e| {
            if let Transition::Opened { reason, .. } = e.transition {
                sink.lock().unwrap().push(reason);
            }
        });
        for _ in 0..3_000 {
            assert!(call(&b, &clock, 2 * MS, Outcome::Success, 100 * MS));
        }
        for _ in 0..5 {
            call(&b, &clock, 2 * MS, Outcome::Failure, 100 * MS);
        }
        assert_eq!(b.state(), State::Open);
        let mut closed = false;
        for _ in 0..3 {
            clock.elapse_break(&b);
            for _ in 0..2 {
                call(&b, &clock, probe, Outcome::Success, 100 * MS);
            }
            if b.state() == State::Closed {
                closed = true;
                break;
            }
        }
        let reasons = reasons.lock().unwrap().clone();
        (closed, reasons)
    };
    // Probes on pooled connections (2 ms) close it: the set-up can close.
    assert!(recover(2 * MS).0);
    // Recovered: each probe is 2 ms of the dependency and 30 ms of a fresh connection.
    let (closed, reasons) = recover(32 * MS);
    assert!(
        closed,
        "three rounds of successful probes on fresh connections, still open; opened for \
         {reasons:?}"
    );
}

// ---------------------------------------------------------------------------------------
// The chance test at 10⁻⁷: its false-alarm claims and its cost.
// ---------------------------------------------------------------------------------------

/// Whether a breaker on the defaults, at 1 call a second, opens when the 30 s window holds
/// `k` failures (spread, never two in a row) after 270 s holding `outside` (spread too),
/// all after 600 s of successes. The window's failures land last.
fn relative_trips_at(outside: u64, k: u64) -> bool {
    let clock = ManualClock::new();
    let b = breaker(Settings::builder(), &clock, 7);
    for _ in 0..600 {
        assert!(call(&b, &clock, 5 * MS, Outcome::Success, SEC));
    }
    for i in 0..270u64 {
        // `outside` failures spaced evenly over the last 240 calls of the 270.
        let fail = outside > 0
            && i >= 30
            && (i - 30) % (240 / outside.max(1)) == 0
            && (i - 30) / (240 / outside.max(1)) < outside;
        let outcome = if fail {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        assert!(call(&b, &clock, 5 * MS, outcome, SEC));
    }
    assert_eq!(b.state(), State::Closed, "{outside} outside");
    for i in 0..30u64 {
        // The last 2k calls alternate failure and success, ending with a failure.
        let fail = i >= 30 - 2 * k && (29 - i) % 2 == 0;
        let outcome = if fail {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        call(&b, &clock, 5 * MS, outcome, SEC);
        if b.state() != State::Closed {
            return true;
        }
    }
    false
}

/// The least count of window failures that trips, for `outside` failures in the baseline
/// before the window (`None`: up to 15 do not).
fn least_k(outside: u64) -> Option<u64> {
    (2..=15).find(|&k| relative_trips_at(outside, k))
}

/// P(Bin(n, p) = k), exact (a product of ratios, no factorials).
fn pmf(n: u64, k: u64, p: f64) -> f64 {
    if k > n {
        return 0.0;
    }
    let mut ln = 0.0;
    for i in 0..k {
        ln += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (ln + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp()
}

/// FAILURE_CHANCE's docs: "a healthy dependency at 1-10 calls a second trips at most once per
/// 10,000 pod-hours by the bound itself"; the commit's own check counts 1% errors at 1 call a
/// second as healthy, but only for a baseline that saw exactly its expected failures. A real
/// baseline's count is binomial too, and the rate it is judged at is the *estimate*. Here the
/// least tripping k is measured on a real breaker for each count the 270 s before the window
/// may hold, and the expected false trips are summed exactly: a failure lands (rate p per
/// call) while the 29 calls before it in the window hold k(F) − 1 failures, F ~ Bin(270, p).
#[test]
fn a_healthy_one_percent_dependency_at_one_call_a_second_trips_at_most_once_per_ten_thousand_pod_hours()
 {
    let p = 0.01;
    let ks: Vec<Option<u64>> = (0..=10).map(least_k).collect();
    let calls = 10_000.0 * 3_600.0; // 1 call a second
    let mut expected = 0.0;
    for (f, k) in ks.iter().enumerate() {
        if let Some(k) = k {
            expected += pmf(270, f as u64, p) * pmf(29, k - 1, p);
        }
    }
    // Counts above 10 outside: at most P(F > 10) of the windows, each at most one trip.
    let tail: f64 = 1.0 - (0..=10).map(|f| pmf(270, f, p)).sum::<f64>();
    let trips = calls * p * expected;
    assert!(
        trips <= 1.0,
        "k by failures outside the window {ks:?}: {trips:.2} false trips per 10,000 \
         pod-hours at 1% errors, 1 call a second (P(F > 10) = {tail:.1e} not counted)"
    );
}

/// FAILURE_CHANCE's docs: "k being 7–12 at 1–5 calls a second on the defaults". (The review
/// found the docs of the 10⁻⁷ level saying 5–8 where a baseline that saw a few failures more
/// than none needed 9.)
#[test]
fn the_failures_the_chance_test_needs_at_one_call_a_second_stay_within_seven_to_twelve() {
    // 0.1%..1% errors over 270 calls: 0 to 6 failures outside the window are all ordinary
    // (P(F ≥ 7) at 1% is 0.14).
    let ks: Vec<(u64, Option<u64>)> = (0..=6).map(|f| (f, least_k(f))).collect();
    assert!(
        ks.iter()
            .all(|(_, k)| k.is_some_and(|k| (7..=12).contains(&k))),
        "least tripping k by failures outside the window: {ks:?}"
    );
}

/// FAILURE_CHANCE's docs: "a dependency failing a fifth of its calls is found within the
/// first window about one time in three, and within 5 minutes about two in three" (1 call a
/// second, a 30 s window, a baseline at 0.1%), over 200 seeded runs. (The review found the
/// docs of the 10⁻⁷ level claiming it "still trips within a window": 143 of 200 did.)
#[test]
fn a_dependency_failing_a_fifth_of_its_calls_at_one_call_a_second_is_found_as_often_as_the_docs_say()
 {
    let runs = 200;
    let mut tripped = 0;
    let mut within_five_minutes = 0;
    for seed in 0..runs {
        let clock = ManualClock::new();
        let b = breaker(Settings::builder(), &clock, seed);
        let mut rng = fastrand::Rng::with_seed(1_000 + seed);
        let mut draw = |rate: f64| {
            if rng.f64() < rate {
                Outcome::Failure
            } else {
                Outcome::Success
            }
        };
        for _ in 0..900 {
            call(&b, &clock, 5 * MS, draw(0.001), SEC);
        }
        if b.state() != State::Closed {
            // A healthy run that tripped is another test's business: reset and go on.
            b.reset();
        }
        let mut at = None;
        for i in 0..300 {
            call(&b, &clock, 5 * MS, draw(0.2), SEC);
            if b.state() != State::Closed {
                at = Some(i + 1);
                break;
            }
        }
        if at.is_some_and(|at| at <= 30) {
            tripped += 1;
        }
        if at.is_some() {
            within_five_minutes += 1;
        }
    }
    let share = f64::from(tripped) / runs as f64;
    let later = f64::from(within_five_minutes) / runs as f64;
    assert!(
        (0.2..=0.5).contains(&share) && (0.5..=0.85).contains(&later),
        "tripped within 30 s in {tripped} of {runs} runs ({share:.2}), within 300 s in \
         {within_five_minutes} ({later:.2})"
    );
}

/// The relative failure rule over a count window: a window's rate must exceed `multiple` ×
/// a baseline that holds the window's own failures, which only a window shorter than
/// baseline / multiple can do. For a time window validation enforces it (a
/// `failure-baseline-window` below `failures-multiple` × the trip window is CUT-CFG's
/// BaselineTooShort); a count window is sized as if it spanned 30 s (`COUNT_WINDOW_SPAN`), so
/// at 1 call a second a 100-call window (100 s, against 300 s / 5 = 60 s) is accepted with
/// the rule silently dead: a 0.1% dependency failing 20% of its calls for ten minutes never
/// trips it. A 50-call window on the same traffic trips.
#[test]
#[ignore = "known defect, older than the margin and the 1e-10 level: a count window that spans \
            more than baseline / multiple at the traffic it sees leaves the relative failure \
            rule dead (validation can only check time windows); left for a later issue"]
fn a_count_window_longer_than_its_baseline_still_judges_failures_relatively() {
    let run = |size: u32| {
        let clock = ManualClock::new();
        let b = breaker(
            Settings::builder()
                .window(cutout::TripWindow::Count(size))
                .consecutive_failures(None),
            &clock,
            5,
        );
        let mut rng = fastrand::Rng::with_seed(20);
        for _ in 0..900 {
            let outcome = if rng.f64() < 0.001 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            call(&b, &clock, 5 * MS, outcome, SEC);
        }
        assert_eq!(b.state(), State::Closed, "healthy, window of {size}");
        for i in 0..600 {
            let outcome = if rng.f64() < 0.2 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            call(&b, &clock, 5 * MS, outcome, SEC);
            if b.state() != State::Closed {
                return Some(i + 1);
            }
        }
        None
    };
    assert!(run(50).is_some(), "the control: a 50-call window trips");
    assert!(
        run(100).is_some(),
        "20% failures for 600 s at 1 call a second: a 100-call window never tripped"
    );
}
