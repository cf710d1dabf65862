//! Active health checks of keyed breakers: only open keys are checked, a pass ends the break
//! (half-open, the probes decide), a failure or a timeout changes nothing, a check that began
//! before the breaker opened is stale, and the loop runs every interval.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Jitter, Settings, State};
use cutout_tower::keyed::{HealthChecks, KeyedBreakers};

fn settings() -> Settings {
    Settings::builder()
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

fn keyed(clock: &ManualClock) -> KeyedBreakers<String> {
    KeyedBreakers::builder(settings())
        .clock(clock.clone())
        .build()
}

#[tokio::test(start_paused = true)]
async fn only_open_keys_are_checked_and_only_a_timely_pass_ends_a_break() {
    let clock = ManualClock::new();
    let hosts = keyed(&clock);
    let key = |k: &str| k.to_string();
    for k in ["passes", "fails", "hangs", "closed", "isolated"] {
        hosts.breaker(&key(k)).unwrap();
    }
    for k in ["passes", "fails", "hangs"] {
        assert!(hosts.get(&key(k)).unwrap().trip_on_signal());
    }
    hosts.isolate(&key("isolated"));
    clock.advance(Duration::from_secs(1));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let round = hosts
        .check_open_keys(Duration::from_secs(1), move |k: &String| {
            seen.lock().unwrap().push(k.clone());
            let k = k.clone();
            async move {
                match k.as_str() {
                    "passes" => true,
                    "hangs" => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        true
                    }
                    _ => false,
                }
            }
        })
        .await;
    let mut asked = asked.lock().unwrap().clone();
    asked.sort();
    assert_eq!(asked, ["fails", "hangs", "passes"], "only the open keys");
    assert_eq!((round.checked, round.passed, round.ended), (3, 1, 1));
    let state = |k: &str| hosts.get(&key(k)).unwrap().state();
    assert_eq!(state("passes"), State::HalfOpen);
    assert_eq!(state("fails"), State::Open, "a failed check ends nothing");
    assert_eq!(
        state("hangs"),
        State::Open,
        "a check past its timeout failed"
    );
    assert_eq!(
        state("closed"),
        State::Closed,
        "a check never opens anything"
    );
    assert_eq!(state("isolated"), State::Isolated);
    // The half-open key's next call is its probe: it decides.
    let breaker = hosts.get(&key("passes")).unwrap();
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.failure();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().consecutive_opens, 2, "the break grew");
}

#[tokio::test(start_paused = true)]
async fn a_check_that_began_before_the_breaker_opened_is_stale() {
    let clock = ManualClock::new();
    let hosts = keyed(&clock);
    let key = "inventory".to_string();
    let breaker = hosts.breaker(&key).unwrap();
    assert!(breaker.trip_on_signal());
    clock.advance(Duration::from_secs(10));
    // The check takes 1 s; while it runs, the breaker closes and opens anew.
    let reopen = breaker.clone();
    let round = hosts
        .check_open_keys(Duration::from_secs(5), move |_| {
            reopen.reset();
            assert!(reopen.trip_on_signal());
            async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                true
            }
        })
        .await;
    assert_eq!((round.checked, round.passed, round.ended), (1, 1, 0));
    assert_eq!(
        breaker.state(),
        State::Open,
        "the pass predates this opening"
    );
    // A check that starts after the opening ends it.
    clock.advance(Duration::from_secs(2));
    let round = hosts
        .check_open_keys(Duration::from_secs(5), |_| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            true
        })
        .await;
    assert_eq!(round.ended, 1);
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[tokio::test(start_paused = true)]
async fn the_loop_checks_every_interval_until_dropped() {
    let clock = ManualClock::new();
    let hosts = keyed(&clock);
    let key = "search".to_string();
    let breaker = hosts.breaker(&key).unwrap();
    assert!(breaker.trip_on_signal());
    clock.advance(Duration::from_secs(1));
    let checks = Arc::new(Mutex::new(0u32));
    let counted = Arc::clone(&checks);
    let every = HealthChecks {
        interval: Duration::from_secs(5),
        timeout: Duration::from_secs(1),
        jitter: Duration::ZERO,
    };
    let task = tokio::spawn(hosts.health_checks(every, move |_| {
        *counted.lock().unwrap() += 1;
        async { false }
    }));
    tokio::time::sleep(Duration::from_millis(4_900)).await;
    assert_eq!(
        *checks.lock().unwrap(),
        0,
        "nothing before the first interval"
    );
    tokio::time::sleep(Duration::from_millis(10_200)).await;
    assert_eq!(*checks.lock().unwrap(), 3, "one round every 5 s");
    assert_eq!(breaker.state(), State::Open);
    task.abort();
    let _ = task.await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(*checks.lock().unwrap(), 3, "stopped");
    assert_eq!(HealthChecks::default().interval, Duration::from_secs(5));
}
