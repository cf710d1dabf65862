//! The recovery ramp on the manual clock (DESIGN §2 "Recovering"; seed 000 "Hand the traffic
//! back over a ramp").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, CloseReason, Health, Jitter, OpenReason, Outcome, Recovery, RejectReason, Settings,
    State, Transition,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

struct Sim {
    clock: ManualClock,
    breaker: Breaker,
    events: Arc<Mutex<Vec<Transition>>>,
}

/// A breaker that opens on 2 consecutive failures for 16 s (no jitter), closes after 2 probe
/// successes, ramps back over a quarter of the break (4 s) from 10%, and counts calls over
/// 100 ms as slow.
fn sim(recovery: Recovery) -> Sim {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(16 * SEC)
        .max_break_duration(64 * SEC)
        .jitter(Jitter::None)
        .slow_call_threshold(Some(100 * MS))
        .recovery(Some(recovery))
        .build()
        .unwrap();
    let breaker = Breaker::builder("dep")
        .settings(settings)
        .clock(clock.clone())
        .build();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    breaker.subscribe(move |e| sink.lock().unwrap().push(e.transition));
    Sim {
        clock,
        breaker,
        events,
    }
}

impl Sim {
    /// A call of `latency` with `outcome`; whether it was admitted.
    fn call(&self, latency: Duration, outcome: Outcome) -> Result<(), RejectReason> {
        let permit = self.breaker.try_acquire().map_err(|r| r.reason())?;
        self.clock.advance(latency);
        permit.record(outcome);
        Ok(())
    }

    /// Opens, waits out the break, passes two probes: the ramp starts.
    fn enter_ramp(&self) {
        self.call(MS, Outcome::Failure).unwrap();
        self.call(MS, Outcome::Failure).unwrap();
        self.clock.elapse_break(&self.breaker);
        self.call(MS, Outcome::Success).unwrap();
        self.call(MS, Outcome::Success).unwrap();
        assert_eq!(self.breaker.state(), State::Recovering);
    }
}

#[test]
fn the_ramp_starts_with_a_closed_event_and_ends_in_silence() {
    let s = sim(Recovery::over(0.25));
    s.enter_ramp();
    let snapshot = s.breaker.snapshot();
    assert_eq!(snapshot.current_break, Some(16 * SEC));
    assert!((snapshot.ramp_fraction.unwrap() - 0.1).abs() < 1e-3);
    assert_eq!(s.breaker.health(), Health::Degraded);
    let before = s.events.lock().unwrap().len();
    assert!(matches!(
        s.events.lock().unwrap()[before - 1],
        Transition::Closed {
            from: State::HalfOpen,
            reason: CloseReason::ProbesSucceeded,
        }
    ));
    // Healthy, fast calls every 10 ms for the ramp's 4 s and a little more.
    let start = s.clock.elapsed();
    while s.clock.elapsed() - start < 4_100 * MS {
        let _ = s.call(Duration::ZERO, Outcome::Success);
        s.clock.advance(10 * MS);
    }
    assert_eq!(s.breaker.state(), State::Closed);
    assert_eq!(s.breaker.health(), Health::Healthy);
    assert_eq!(
        s.events.lock().unwrap().len(),
        before,
        "the end of the ramp raises nothing"
    );
    assert_eq!(s.breaker.snapshot().ramp_fraction, None);
    assert_eq!(
        s.breaker.snapshot().consecutive_opens,
        0,
        "a full close resets growth"
    );
}

#[test]
fn the_ramp_lasts_a_fraction_of_the_break_within_its_clamps() {
    for (recovery, length) in [
        (Recovery::over(0.25), 4 * SEC),
        (Recovery::over(0.01), SEC),
        (Recovery::over(0.5).max_duration(3 * SEC), 3 * SEC),
    ] {
        let s = sim(recovery);
        s.enter_ramp();
        let started = s.clock.elapsed();
        // Healthy calls every millisecond earn the whole fraction early; the clock alone
        // then decides when the ramp ends.
        while s.clock.elapsed() - started < length - 2 * MS {
            let _ = s.call(Duration::ZERO, Outcome::Success);
            s.clock.advance(MS);
        }
        assert_eq!(s.breaker.snapshot().state, State::Recovering);
        s.clock.advance(length - (s.clock.elapsed() - started) - MS);
        assert_eq!(s.breaker.state(), State::Recovering, "{length:?}: not yet");
        s.clock.advance(MS);
        assert_eq!(s.breaker.state(), State::Closed, "{length:?}: done");
    }
}

#[test]
fn admissions_never_exceed_the_clock_bound() {
    let s = sim(Recovery::over(0.25));
    s.enter_ramp();
    let start = s.clock.elapsed();
    let (mut offered, mut admitted, mut bound_sum) = (0u32, 0u32, 0.0f64);
    while s.breaker.state() == State::Recovering {
        let elapsed = (s.clock.elapsed() - start).as_secs_f64();
        let bound = (0.1 + 0.9 * elapsed / 4.0).min(1.0);
        offered += 1;
        bound_sum += bound;
        match s.call(Duration::ZERO, Outcome::Success) {
            Ok(()) => admitted += 1,
            Err(reason) => assert_eq!(reason, RejectReason::Ramp),
        }
        assert!(
            f64::from(admitted) <= bound_sum + 1e-9,
            "{admitted} > {bound_sum}"
        );
        s.clock.advance(MS);
    }
    assert!(admitted < offered, "the ramp refused some calls");
    assert!(
        f64::from(admitted) > 0.9 * bound_sum,
        "and admitted close to its bound"
    );
}

#[test]
fn slow_calls_halve_and_fast_streaks_double_the_fraction() {
    let s = sim(Recovery::over(4.0).max_duration(64 * SEC));
    s.enter_ramp();
    let fraction = |s: &Sim| s.breaker.snapshot().ramp_fraction.unwrap();
    s.clock.advance(32 * SEC); // the clock bound is well above what is earned now
    let mut admitted_fast = 0;
    while admitted_fast < 4 {
        if s.call(Duration::ZERO, Outcome::Success).is_ok() {
            admitted_fast += 1;
        }
    }
    assert!(
        (fraction(&s) - 0.4).abs() < 1e-9,
        "two streaks of 2: 0.1 → 0.2 → 0.4"
    );
    while s.call(200 * MS, Outcome::Success).is_err() {}
    assert!((fraction(&s) - 0.2).abs() < 1e-9, "a slow call halves it");
    assert_eq!(s.breaker.state(), State::Recovering);
}

#[test]
fn a_failure_during_the_ramp_reopens_with_a_grown_break() {
    let s = sim(Recovery::over(0.25));
    s.enter_ramp();
    while s.call(MS, Outcome::Failure).is_err() {}
    assert_eq!(s.breaker.state(), State::Open);
    assert_eq!(s.breaker.break_remaining(), Some(32 * SEC));
    let last = *s.events.lock().unwrap().last().unwrap();
    assert_eq!(
        last,
        Transition::Opened {
            from: State::Recovering,
            reason: OpenReason::RampFailed,
            break_for: 32 * SEC
        }
    );
}

#[test]
fn a_dependency_that_stays_slow_keeps_the_breaker_recovering_and_degraded() {
    let s = sim(Recovery::over(0.25));
    s.enter_ramp();
    for _ in 0..20_000 {
        let _ = s.call(150 * MS, Outcome::Success);
        s.clock.advance(10 * MS);
    }
    let snapshot = s.breaker.snapshot();
    assert_eq!(snapshot.state, State::Recovering);
    assert_eq!(s.breaker.health(), Health::Degraded);
    assert!(
        (snapshot.ramp_fraction.unwrap() - 0.1).abs() < 1e-9,
        "stuck at the initial fraction"
    );
    let recovering = snapshot.recovering_for.unwrap();
    assert!(
        recovering > snapshot.current_break.unwrap(),
        "{recovering:?}: longer than the break"
    );
}

#[test]
fn a_refusal_during_the_ramp_carries_a_short_retry_after() {
    let s = sim(Recovery::over(0.25));
    s.enter_ramp();
    let refusal = loop {
        match s.breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(refusal) => break refusal,
        }
    };
    assert_eq!(refusal.reason(), RejectReason::Ramp);
    assert_eq!(
        refusal.retry_after(),
        Some(400 * MS),
        "a tenth of the 4 s ramp"
    );
}
