//! Review of the keyed breakers' active health checks (issue #28): the defects found, each a
//! test named after the behaviour the checks promise (the `keyed::health` module docs: a host
//! that came back gets traffic within a check interval, only where a pass can end a break),
//! each shown failing on the code before its fix (the last two were fixed after the review:
//! a round's checks run at once, and only breaks a pass can end are checked). Tokio's paused
//! time; the breakers on a
//! manual clock that the tests hold still (the checks' ages are on tokio's clock, the
//! breakers' openings on theirs, as in `health.rs`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Jitter, Settings, State};
use cutout_tower::keyed::{HealthChecks, KeyedBreakers};

const SEC: Duration = Duration::from_secs(1);

fn keyed(clock: &ManualClock) -> KeyedBreakers<String> {
    let settings = Settings::builder()
        .break_duration(60 * SEC)
        .max_break_duration(240 * SEC)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    KeyedBreakers::builder(settings)
        .clock(clock.clone())
        .max_keys(4096)
        .build()
}

/// Opens `key`'s breaker (a signal trip: the break is its own, so a pass may end it).
fn open(hosts: &KeyedBreakers<String>, key: &str) {
    assert!(hosts.breaker(&key.to_string()).unwrap().trip_on_signal());
}

fn every_5s() -> HealthChecks {
    HealthChecks {
        interval: 5 * SEC,
        timeout: SEC,
        jitter: Duration::ZERO,
    }
}

/// 1,000 hosts are down (their checks hang until the 1 s timeout) and one is back. The checks
/// of a round ran one after the other, so a round lasted 1,000 timeouts: by 11 s (the first
/// round due at 5 s, the second at 10 s, plus a timeout) the loop had checked 6 of the 1,001
/// open hosts, and the host that came back waited behind the dead ones for up to 17 minutes
/// instead of one interval. However a round is run (all at once, spread over the interval,
/// some at a time), every open host must have been checked by then.
#[tokio::test(start_paused = true)]
async fn every_open_host_is_checked_within_an_interval_however_many_are_down() {
    let clock = ManualClock::new();
    let hosts = keyed(&clock);
    for i in 0..1_000 {
        open(&hosts, &format!("down-{i}"));
    }
    open(&hosts, "back");
    clock.advance(SEC);
    let checked = Arc::new(Mutex::new(HashSet::new()));
    let seen = Arc::clone(&checked);
    let task = tokio::spawn(hosts.health_checks(every_5s(), move |key: &String| {
        seen.lock().unwrap().insert(key.clone());
        let back = key == "back";
        async move {
            if !back {
                std::future::pending::<()>().await;
            }
            true
        }
    }));
    tokio::time::sleep(11 * SEC).await;
    let checked = checked.lock().unwrap().len();
    task.abort();
    assert_eq!(
        checked, 1_001,
        "open hosts checked in the first round, by 11 s"
    );
    assert_eq!(
        hosts.get(&"back".to_string()).unwrap().state(),
        State::HalfOpen,
        "the host that came back is readmitted by its first round"
    );
}

/// A check function that panics for one host (a bug, an unexpected key) took the whole loop
/// down with it: the spawned task ended at the panic, and no open host was ever checked again,
/// silently. User code is contained everywhere else (listeners, gates, recorders); a panicking
/// check should count as a failed check of that host.
#[tokio::test(start_paused = true)]
async fn a_check_that_panics_for_one_host_does_not_stop_the_checks_of_the_others() {
    let clock = ManualClock::new();
    let hosts = keyed(&clock);
    open(&hosts, "panics");
    open(&hosts, "back");
    clock.advance(SEC);
    let task = tokio::spawn(hosts.health_checks(every_5s(), |key: &String| {
        let panics = key == "panics";
        async move {
            assert!(!panics, "a bug in the check of one host");
            true
        }
    }));
    // Round 1 at 5 s (in either order of the two hosts).
    tokio::time::sleep(6 * SEC).await;
    // Whatever round 1 did, "back" is open again now: it must be ended by a later round.
    let back = hosts.get(&"back".to_string()).unwrap();
    if back.state() == State::HalfOpen {
        back.try_acquire().expect("its probe").failure();
    }
    clock.advance(SEC);
    assert_eq!(back.state(), State::Open);
    // Rounds 2 and 3 at 10 s and 15 s.
    tokio::time::sleep(10 * SEC).await;
    let alive = !task.is_finished();
    task.abort();
    assert!(alive, "the health-check loop died with the panic");
    assert_eq!(
        back.state(),
        State::HalfOpen,
        "checked again after the panic"
    );
}

/// A host that answered 503 with `Retry-After: 120` asked not to be called for two minutes,
/// and an operator's `open_for` is served whole: no pass can end either break (the breaker
/// ignores it), yet every round checked both hosts, adding load to a host that asked for
/// none, and counted the useless passes.
#[tokio::test(start_paused = true)]
async fn a_break_no_pass_can_end_is_not_checked() {
    let clock = ManualClock::new();
    let hosts = keyed(&clock);
    let asked = hosts.breaker(&"asked".to_string()).unwrap();
    asked
        .try_acquire()
        .unwrap()
        .open_for(Duration::from_secs(120));
    assert_eq!(asked.state(), State::Open);
    let forced = hosts.breaker(&"forced".to_string()).unwrap();
    forced.open_for(Duration::from_secs(120));
    open(&hosts, "own");
    clock.advance(SEC);
    let called = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&called);
    let round = hosts
        .check_open_keys(SEC, move |key: &String| {
            seen.lock().unwrap().push(key.clone());
            async { true }
        })
        .await;
    assert_eq!(asked.state(), State::Open, "served whole");
    assert_eq!(forced.state(), State::Open, "served whole");
    assert_eq!(
        *called.lock().unwrap(),
        ["own"],
        "only the break a pass can end is checked"
    );
    assert_eq!((round.checked, round.passed, round.ended), (1, 1, 1));
}
