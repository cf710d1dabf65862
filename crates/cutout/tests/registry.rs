//! The registry: shared breakers by id, conflicts, unknown ids, listing, per-id control.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    BreakSchedule, ErrorCode, Failures, HalfOpenTimeout, InitialState, Jitter, Recovery, Registry,
    Settings, SlowCalls, State, TripWindow,
};

fn settings(consecutive: u32) -> Settings {
    Settings::builder()
        .consecutive_failures(Some(consecutive))
        .jitter(Jitter::None)
        .break_duration(Duration::from_secs(10))
        .probe_successes(1)
        .build()
        .unwrap()
}

fn fail(breaker: &cutout::Breaker) {
    let _ = breaker.call(|| Err::<(), _>("down"));
}

#[test]
fn a_shared_id_is_one_breaker() {
    let registry = Registry::with_clock(ManualClock::new());
    let orders = registry.breaker("payments", settings(3)).unwrap();
    let refunds = registry.breaker("payments", settings(3)).unwrap();
    let looked_up = registry.get("payments").unwrap();

    fail(&orders);
    fail(&refunds);
    assert_eq!(looked_up.state(), State::Closed);
    fail(&looked_up);
    // Three failures through three handles: one breaker counted them all.
    assert_eq!(orders.state(), State::Open);
    assert_eq!(refunds.state(), State::Open);
    assert!(refunds.call(|| Ok::<_, ()>(())).unwrap_err().is_rejected());
    assert_eq!(registry.len(), 1);
}

#[test]
fn a_registry_clone_shares_the_map() {
    let registry = Registry::new();
    let clone = registry.clone();
    clone.breaker("a", Settings::default()).unwrap();
    assert!(registry.contains("a"));
    assert_eq!(registry.ids(), vec!["a".into()] as Vec<cutout::BreakerId>);
}

#[test]
fn conflicting_settings_fail_with_their_code_and_name_the_keys() {
    let registry = Registry::new();
    registry.breaker("payments", settings(3)).unwrap();
    let other = settings(4)
        .to_builder()
        .window(TripWindow::Count(10))
        .build()
        .unwrap();
    let error = registry.breaker("payments", other).unwrap_err();
    assert_eq!(error.code(), ErrorCode::SettingsConflict);
    assert_eq!(error.code().as_str(), "CUT-REG-001");
    assert!(error.is_conflict() && !error.is_unknown_id());
    assert_eq!(error.id(), &"payments");
    assert_eq!(
        error.conflicting_keys().collect::<Vec<_>>(),
        ["consecutive-failures", "window-type"]
    );
    let message = error.to_string();
    assert_eq!(
        message,
        "CUT-REG-001: breaker \"payments\" already exists with different settings: \
         consecutive-failures = 3 (existing), 4 (requested); \
         window-type = time 30s (existing), count 10 calls (requested)"
    );
    // The first breaker is untouched.
    assert_eq!(
        registry
            .get("payments")
            .unwrap()
            .settings()
            .consecutive_failures(),
        Some(3)
    );
}

#[test]
fn a_conflict_in_an_adaptive_key_names_that_key() {
    let base = Settings::builder()
        .adaptive(true)
        .slow_calls(Some(SlowCalls::above(3.0)))
        .failures(Some(Failures::above(5.0)))
        .build()
        .unwrap();
    let with = |f: fn(cutout::SettingsBuilder) -> cutout::SettingsBuilder| {
        f(base.to_builder()).build().unwrap()
    };
    let cases: [(Settings, &str, &str); 9] = [
        (
            with(|b| b.adaptive(false)),
            "adaptive",
            "adaptive = true (existing), false (requested)",
        ),
        (
            with(|b| b.slow_calls(Some(SlowCalls::above(4.5)))),
            "slow-calls-multiple",
            "slow-calls-multiple = 3 (existing), 4.5 (requested)",
        ),
        (
            with(|b| b.slow_calls(Some(SlowCalls::above(3.0).quantile(0.25)))),
            "slow-calls-quantile",
            "slow-calls-quantile = 0.5 (existing), 0.25 (requested)",
        ),
        (
            with(|b| b.slow_calls(Some(SlowCalls::above(3.0).window(Duration::from_secs(600))))),
            "latency-baseline-window",
            "latency-baseline-window = default (existing), 600s (requested)",
        ),
        (
            with(|b| b.slow_calls(None)),
            "slow-calls",
            "slow-calls = on (existing), off (requested)",
        ),
        (
            with(|b| b.failures(Some(Failures::above(7.0)))),
            "failures-multiple",
            "failures-multiple = 5 (existing), 7 (requested)",
        ),
        (
            with(|b| b.failures(Some(Failures::above(5.0).floor(0.1)))),
            "failures-floor",
            "failures-floor = 0.05 (existing), 0.1 (requested)",
        ),
        (
            with(|b| b.failures(Some(Failures::above(5.0).window(Duration::from_secs(3600))))),
            "failure-baseline-window",
            "failure-baseline-window = default (existing), 3600s (requested)",
        ),
        (
            with(|b| b.failures(None)),
            "failures",
            "failures = on (existing), off (requested)",
        ),
    ];
    for (requested, key, difference) in cases {
        let registry = Registry::new();
        registry.breaker("payments", base.clone()).unwrap();
        let error = registry.breaker("payments", requested).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SettingsConflict);
        assert_eq!(error.conflicting_keys().collect::<Vec<_>>(), [key]);
        assert_eq!(
            error.to_string(),
            format!(
                "CUT-REG-001: breaker \"payments\" already exists with different settings: \
                 {difference}"
            )
        );
    }
}

#[test]
fn a_conflict_in_a_break_half_open_or_initial_state_key_names_that_key() {
    let schedule = BreakSchedule::new(|opens| Duration::from_secs(u64::from(opens)));
    let base = Settings::default();
    let with = |f: fn(cutout::SettingsBuilder) -> cutout::SettingsBuilder| {
        f(base.to_builder()).build().unwrap()
    };
    let scheduled = base
        .to_builder()
        .break_schedule(Some(schedule.clone()))
        .build()
        .unwrap();
    let cases: [(Settings, Settings, &str, &str); 6] = [
        (
            base.clone(),
            with(|b| b.break_multiplier(1.5)),
            "break-multiplier",
            "break-multiplier = 2 (existing), 1.5 (requested)",
        ),
        (
            base.clone(),
            with(|b| b.half_open_timeout(HalfOpenTimeout::Close)),
            "half-open-timeout",
            "half-open-timeout = open (existing), close (requested)",
        ),
        (
            base.clone(),
            with(|b| b.initial_state(InitialState::Isolated)),
            "initial-state",
            "initial-state = closed (existing), isolated (requested)",
        ),
        (
            base.clone(),
            with(|b| b.enabled(false)),
            "initial-state",
            "initial-state = closed (existing), disabled (requested)",
        ),
        (
            base.clone(),
            scheduled.clone(),
            "break-schedule",
            "break-schedule = off (existing), a function (requested)",
        ),
        (
            scheduled.clone(),
            base.to_builder()
                .break_schedule(Some(BreakSchedule::new(|_| Duration::from_secs(1))))
                .build()
                .unwrap(),
            "break-schedule",
            "break-schedule = a function (existing), another function (requested)",
        ),
    ];
    for (existing, requested, key, difference) in cases {
        let registry = Registry::new();
        registry.breaker("payments", existing).unwrap();
        let error = registry.breaker("payments", requested).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SettingsConflict);
        assert_eq!(error.conflicting_keys().collect::<Vec<_>>(), [key]);
        assert_eq!(
            error.to_string(),
            format!(
                "CUT-REG-001: breaker \"payments\" already exists with different settings: \
                 {difference}"
            )
        );
    }
    // Settings sharing one schedule are the same breaker.
    let registry = Registry::new();
    let first = registry.breaker("payments", scheduled.clone()).unwrap();
    let second = registry.breaker("payments", scheduled).unwrap();
    first.isolate();
    assert_eq!(second.state(), State::Isolated);
}

#[test]
fn a_conflict_in_a_recovery_key_names_that_key() {
    let base = Settings::builder()
        .recovery(Some(Recovery::over(0.25)))
        .build()
        .unwrap();
    let with = |recovery: Option<Recovery>| base.to_builder().recovery(recovery).build().unwrap();
    let ramp = Recovery::over(0.25);
    let cases: [(Settings, &str, &str); 5] = [
        (
            with(Some(Recovery::over(0.5))),
            "recovery-fraction",
            "recovery-fraction = 0.25 (existing), 0.5 (requested)",
        ),
        (
            with(Some(ramp.initial_fraction(0.2))),
            "recovery-initial-fraction",
            "recovery-initial-fraction = 0.1 (existing), 0.2 (requested)",
        ),
        (
            with(Some(ramp.min_duration(Duration::from_millis(500)))),
            "recovery-min-duration",
            "recovery-min-duration = 1s (existing), 500ms (requested)",
        ),
        (
            with(Some(ramp.max_duration(Duration::from_secs(300)))),
            "recovery-max-duration",
            "recovery-max-duration = 120s (existing), 300s (requested)",
        ),
        (
            with(None),
            "recovery",
            "recovery = on (existing), off (requested)",
        ),
    ];
    for (requested, key, difference) in cases {
        let registry = Registry::new();
        registry.breaker("payments", base.clone()).unwrap();
        let error = registry.breaker("payments", requested).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SettingsConflict);
        assert_eq!(error.conflicting_keys().collect::<Vec<_>>(), [key]);
        assert_eq!(
            error.to_string(),
            format!(
                "CUT-REG-001: breaker \"payments\" already exists with different settings: \
                 {difference}"
            )
        );
    }
    // Equal ramps are the same breaker.
    let registry = Registry::new();
    let first = registry.breaker("payments", base.clone()).unwrap();
    let second = registry.breaker("payments", with(Some(ramp))).unwrap();
    assert_eq!(first.settings(), second.settings());
    assert_eq!(registry.len(), 1);
}

#[test]
fn an_unknown_id_suggests_the_nearest() {
    let registry = Registry::new();
    for id in ["payments", "ledger", "exchange-rates"] {
        registry.breaker(id, Settings::default()).unwrap();
    }
    let error = registry.get("paymnts").unwrap_err();
    assert_eq!(error.code(), ErrorCode::UnknownId);
    assert_eq!(error.code().as_str(), "CUT-REG-002");
    assert!(error.is_unknown_id());
    assert_eq!(error.suggestion(), Some("payments"));
    assert_eq!(
        error.to_string(),
        "CUT-REG-002: no breaker with id \"paymnts\": did you mean \"payments\"?"
    );

    assert_eq!(
        registry.get("exchange_rate").unwrap_err().suggestion(),
        Some("exchange-rates")
    );

    // Nothing close: the message lists the ids instead.
    let far = registry.get("inventory").unwrap_err();
    assert_eq!(far.suggestion(), None);
    assert_eq!(
        far.to_string(),
        "CUT-REG-002: no breaker with id \"inventory\": known ids are exchange-rates, ledger, payments"
    );

    let empty = Registry::new().get("payments").unwrap_err();
    assert_eq!(
        empty.to_string(),
        "CUT-REG-002: no breaker with id \"payments\": the registry is empty"
    );
}

#[test]
fn per_id_controls_report_unknown_ids_too() {
    let registry = Registry::new();
    registry.breaker("payments", Settings::default()).unwrap();
    for result in [
        registry.isolate("paymens"),
        registry.disable("paymens"),
        registry.reset("paymens"),
        registry.snapshot("paymens").map(|_| ()),
        registry.state("paymens").map(|_| ()),
    ] {
        let error = result.unwrap_err();
        assert_eq!(error.code(), ErrorCode::UnknownId);
        assert_eq!(error.suggestion(), Some("payments"));
    }
}

#[test]
fn the_listing_is_sorted_by_id() {
    let registry = Registry::new();
    for id in ["zeta", "alpha", "mid", "Alpha", "alpha-2"] {
        registry.breaker(id, Settings::default()).unwrap();
    }
    let ids: Vec<String> = registry.list().iter().map(|b| b.id().to_string()).collect();
    assert_eq!(ids, ["Alpha", "alpha", "alpha-2", "mid", "zeta"]);
    let snapshot_ids: Vec<String> = registry
        .snapshots()
        .into_iter()
        .map(|(id, _)| id.to_string())
        .collect();
    assert_eq!(snapshot_ids, ids);
    assert!(!registry.is_empty());
}

#[test]
fn per_id_isolate_disable_reset_and_snapshot() {
    let registry = Registry::with_clock(ManualClock::new());
    let breaker = registry.breaker("ledger", settings(2)).unwrap();

    registry.isolate("ledger").unwrap();
    assert_eq!(breaker.state(), State::Isolated);
    assert_eq!(registry.state("ledger").unwrap(), State::Isolated);
    assert_eq!(registry.snapshot("ledger").unwrap().state, State::Isolated);

    registry.disable("ledger").unwrap();
    assert_eq!(breaker.state(), State::Disabled);
    fail(&breaker);
    fail(&breaker);
    assert_eq!(breaker.state(), State::Disabled);

    registry.reset("ledger").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    fail(&breaker);
    assert_eq!(registry.snapshot("ledger").unwrap().consecutive_failures, 1);
}

#[test]
fn one_manual_clock_drives_every_breaker() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let a = registry.breaker("a", settings(1)).unwrap();
    let b = registry.breaker("b", settings(1)).unwrap();
    fail(&a);
    fail(&b);
    assert_eq!(a.opened_at(), Some(Duration::ZERO));
    assert_eq!(a.state(), State::Open);
    assert_eq!(b.state(), State::Open);

    clock.advance(Duration::from_secs(10));
    assert_eq!(a.state(), State::HalfOpen);
    assert_eq!(b.state(), State::HalfOpen);
    a.call(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(a.state(), State::Closed);
}

#[test]
fn a_seed_makes_jitter_reproducible_and_per_id() {
    let jittered = Settings::builder()
        .consecutive_failures(Some(1))
        .jitter(Jitter::Full)
        .break_duration(Duration::from_secs(100))
        .max_break_duration(Duration::from_secs(100))
        .build()
        .unwrap();
    let breaks = |seed: u64| {
        let registry = Registry::builder()
            .clock(ManualClock::new())
            .seed(seed)
            .build();
        ["a", "b", "c", "d"].map(|id| {
            let breaker = registry.breaker(id, jittered.clone()).unwrap();
            fail(&breaker);
            breaker.break_remaining().unwrap()
        })
    };
    let first = breaks(7);
    assert_eq!(first, breaks(7));
    // Ids draw differently from one seed (four equal full-jitter draws would be a fluke).
    assert!(first.iter().any(|d| *d != first[0]));
}

#[test]
fn concurrent_get_or_create_makes_one_breaker() {
    let registry = Registry::new();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let registry = registry.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                registry.breaker("shared", settings(8)).unwrap()
            })
        })
        .collect();
    let breakers: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Eight failures, one from each thread's handle, open the one breaker.
    for breaker in &breakers {
        fail(breaker);
    }
    assert!(breakers.iter().all(|b| b.state() == State::Open));
    assert_eq!(registry.len(), 1);
}

#[test]
fn registry_is_send_sync_and_debug_lists_ids() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Registry>();
    let registry = Registry::new();
    registry.breaker("b", Settings::default()).unwrap();
    registry.breaker("a", Settings::default()).unwrap();
    let debug = format!("{registry:?}");
    assert!(debug.contains(r#"ids: ["a", "b"]"#), "{debug}");
}

#[test]
fn a_removed_id_is_created_afresh_and_old_handles_keep_their_state() {
    let registry = Registry::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .build()
        .unwrap();
    let old = registry.breaker("host-a", settings.clone()).unwrap();
    let _ = old.call(|| Err::<(), _>("down"));
    assert_eq!(old.state(), cutout::State::Open);
    let removed = registry.remove("host-a").unwrap();
    assert_eq!(removed.state(), cutout::State::Open, "the same breaker");
    assert!(!registry.contains("host-a"));
    let error = registry.remove("host-a").unwrap_err();
    assert_eq!(error.code(), cutout::ErrorCode::UnknownId);
    let fresh = registry.breaker("host-a", settings).unwrap();
    assert_eq!(fresh.state(), cutout::State::Closed, "a new breaker");
    assert_eq!(
        old.state(),
        cutout::State::Open,
        "old handles keep the old state"
    );
}
