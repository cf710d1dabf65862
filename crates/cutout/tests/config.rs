//! Configuration files: merging, every error code from a file, hostile input never panics.
#![cfg(feature = "serde")]

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::config::{Config, LoadError};
use cutout::{
    ErrorCode, Failures, HalfOpenRule, Jitter, Recovery, Registry, Settings, SlowCalls, State,
    TripWindow,
};
use proptest::prelude::*;

const SEC: Duration = Duration::from_secs(1);

const DOCUMENT: &str = r#"
[defaults]
break-duration = "30s"
max-break-duration = "5m"
jitter = "none"
minimum-calls = 10

[configs.strict]
failure-ratio = "50%"
window-size = 20
consecutive-failures = false
half-open-rule = "rates"
half-open-probes = 3

[configs.slow-backend]
slow-call-threshold = "2s"
slow-call-ratio = 0.8
window-duration = "1m"
max-wait-in-half-open = "off"

[instances.payments]
base-config = "strict"
minimum-calls = 20
break-duration = "1m"

[instances.reports]
base-config = "slow-backend"
window-type = "count"
window-size = 50
shadow = true

[instances.ledger]
probe-successes = 3
enabled = false
"#;

fn defaults() -> Settings {
    Settings::builder()
        .break_duration(30 * SEC)
        .max_break_duration(300 * SEC)
        .jitter(Jitter::None)
        .minimum_calls(10)
        .build()
        .unwrap()
}

#[test]
fn each_instance_gets_exactly_the_merged_settings() {
    let config = Config::from_toml(DOCUMENT).unwrap();

    assert_eq!(config.defaults(), &defaults());

    let strict = defaults()
        .to_builder()
        .failure_ratio(Some(0.5))
        .window(TripWindow::Count(20))
        .consecutive_failures(None)
        .half_open_rule(HalfOpenRule::Rates)
        .half_open_probes(3)
        .build()
        .unwrap();
    assert_eq!(config.config("strict"), Some(&strict));
    let slow_backend = defaults()
        .to_builder()
        .slow_call_threshold(Some(2 * SEC))
        .slow_call_ratio(0.8)
        .window(TripWindow::Time(60 * SEC))
        .max_wait_in_half_open(None)
        .build()
        .unwrap();
    assert_eq!(config.config("slow-backend"), Some(&slow_backend));
    assert_eq!(
        config.config_names().collect::<Vec<_>>(),
        ["slow-backend", "strict"]
    );

    // built-in ← defaults ← strict ← own keys (minimum-calls beats defaults, break beats both)
    let payments = strict
        .to_builder()
        .minimum_calls(20)
        .break_duration(60 * SEC)
        .build()
        .unwrap();
    // the instance's count window replaces the config's time window
    let reports = slow_backend
        .to_builder()
        .window(TripWindow::Count(50))
        .shadow(true)
        .build()
        .unwrap();
    // no base config: built-in ← defaults ← own keys
    let ledger = defaults()
        .to_builder()
        .probe_successes(3)
        .enabled(false)
        .build()
        .unwrap();

    assert_eq!(config.instance("payments"), Some(&payments));
    assert_eq!(config.instance("reports"), Some(&reports));
    assert_eq!(config.instance("ledger"), Some(&ledger));
    assert_eq!(config.base_config("payments"), Some("strict"));
    assert_eq!(config.base_config("ledger"), None);
    let ids: Vec<&str> = config.instances().map(|(id, _)| id).collect();
    assert_eq!(ids, ["ledger", "payments", "reports"]);
    assert_eq!(config.settings_for("unlisted"), &defaults());
    assert_eq!(config.settings_for("payments"), &payments);

    // The same document through `FromStr`.
    assert_eq!(DOCUMENT.parse::<Config>().unwrap(), config);
}

#[test]
fn a_config_populates_a_registry_on_one_clock() {
    let config = Config::from_toml(DOCUMENT).unwrap();
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let created = config.register(&registry).unwrap();
    assert_eq!(created.len(), 3);
    let ids: Vec<String> = registry.list().iter().map(|b| b.id().to_string()).collect();
    assert_eq!(ids, ["ledger", "payments", "reports"]);
    for (id, settings) in config.instances() {
        assert_eq!(registry.get(id).unwrap().settings(), settings);
    }
    assert_eq!(registry.state("ledger").unwrap(), State::Disabled);

    // Registering again finds the same breakers.
    config.register(&registry).unwrap();
    assert_eq!(registry.len(), 3);

    // The registry's clock drives the configured break: 1 minute, no jitter.
    let payments = registry.get("payments").unwrap();
    for _ in 0..20 {
        let _ = payments.call(|| Err::<(), _>("down"));
    }
    assert_eq!(payments.state(), State::Open);
    clock.advance(59 * SEC);
    assert_eq!(payments.state(), State::Open);
    clock.advance(SEC);
    assert_eq!(payments.state(), State::HalfOpen);
}

fn load_err(doc: &str) -> LoadError {
    match Config::from_toml(doc) {
        Ok(config) => panic!("accepted {doc:?}: {config:?}"),
        Err(error) => error,
    }
}

/// Every `CUT-CFG-*` code from a file: the code, the key, the value as written and the section
/// are in the message and in the accessors.
#[test]
fn every_config_error_code_from_a_file() {
    let cases: &[(&str, ErrorCode, &str, &str, &str)] = &[
        (
            "[instances.payments]\nfailure-ratio = \"150%\"",
            ErrorCode::RatioOutOfRange,
            "instances.payments",
            "failure-ratio",
            "\"150%\"",
        ),
        (
            "[instances.payments]\nfailure-ratio = 1.5",
            ErrorCode::RatioOutOfRange,
            "instances.payments",
            "failure-ratio",
            "1.5",
        ),
        (
            "[defaults]\nslow-call-ratio = -0.5",
            ErrorCode::RatioOutOfRange,
            "defaults",
            "slow-call-ratio",
            "-0.5",
        ),
        (
            "[defaults]\nminimum-calls = 0",
            ErrorCode::CountTooSmall,
            "defaults",
            "minimum-calls",
            "0",
        ),
        (
            "[defaults]\nminimum-calls = -3",
            ErrorCode::CountTooSmall,
            "defaults",
            "minimum-calls",
            "-3",
        ),
        (
            "[configs.fast]\nbreak-duration = \"0s\"",
            ErrorCode::ZeroDuration,
            "configs.fast",
            "break-duration",
            "\"0s\"",
        ),
        (
            "[instances.ledger]\nbreak-duration = \"30s\"\nmax-break-duration = \"10s\"",
            ErrorCode::MaxBreakBelowBreak,
            "instances.ledger",
            "max-break-duration",
            "\"10s\"",
        ),
        (
            "[defaults]\nwindow-size = 2000000",
            ErrorCode::WindowTooLarge,
            "defaults",
            "window-size",
            "2000000",
        ),
        (
            "[defaults]\nwindow-size = 99999999999",
            ErrorCode::WindowTooLarge,
            "defaults",
            "window-size",
            "99999999999",
        ),
        (
            "[defaults]\nwindow-type = \"count\"\nwindow-duration = \"1m\"",
            ErrorCode::Contradiction,
            "defaults",
            "window-duration",
            "\"1m\"",
        ),
        (
            "[defaults]\nwindow-type = \"time\"\nwindow-size = 10",
            ErrorCode::Contradiction,
            "defaults",
            "window-size",
            "10",
        ),
        (
            "[defaults]\nwindow-size = 10\nwindow-duration = \"1m\"",
            ErrorCode::Contradiction,
            "defaults",
            "window-duration",
            "\"1m\"",
        ),
        (
            "[defaults]\nhalf-open-probes = 70000",
            ErrorCode::Contradiction,
            "defaults",
            "half-open-probes",
            "70000",
        ),
        (
            "[defaults]\nfailure_ratio = 0.5",
            ErrorCode::UnknownKey,
            "defaults",
            "failure_ratio",
            "0.5",
        ),
        (
            "[default]\nfailure-ratio = 0.5",
            ErrorCode::UnknownKey,
            "",
            "default",
            "a table",
        ),
        (
            "[defaults]\nbase-config = \"strict\"",
            ErrorCode::UnknownKey,
            "defaults",
            "base-config",
            "\"strict\"",
        ),
        (
            "[defaults]\nminimum-calls = \"ten\"",
            ErrorCode::WrongType,
            "defaults",
            "minimum-calls",
            "\"ten\"",
        ),
        (
            "[defaults]\nbreak-duration = 30",
            ErrorCode::WrongType,
            "defaults",
            "break-duration",
            "30",
        ),
        (
            "[defaults]\nenabled = \"yes\"",
            ErrorCode::WrongType,
            "defaults",
            "enabled",
            "\"yes\"",
        ),
        (
            "[defaults]\nminimum-calls = 2.5",
            ErrorCode::WrongType,
            "defaults",
            "minimum-calls",
            "2.5",
        ),
        (
            "[instances]\npayments = 1",
            ErrorCode::WrongType,
            "instances",
            "payments",
            "1",
        ),
        (
            "[defaults]\nbreak-duration = \"-5s\"",
            ErrorCode::InvalidValue,
            "defaults",
            "break-duration",
            "\"-5s\"",
        ),
        (
            "[defaults]\nbreak-duration = \"5 parsecs\"",
            ErrorCode::InvalidValue,
            "defaults",
            "break-duration",
            "\"5 parsecs\"",
        ),
        (
            "[defaults]\njitter = \"equl\"",
            ErrorCode::InvalidValue,
            "defaults",
            "jitter",
            "\"equl\"",
        ),
        (
            "[defaults]\nfailure-ratio = \"half\"",
            ErrorCode::InvalidValue,
            "defaults",
            "failure-ratio",
            "\"half\"",
        ),
        (
            "[defaults]\nconsecutive-failures = true",
            ErrorCode::InvalidValue,
            "defaults",
            "consecutive-failures",
            "true",
        ),
        (
            "[configs.strict]\n[instances.payments]\nbase-config = \"stric\"",
            ErrorCode::UnknownBaseConfig,
            "instances.payments",
            "base-config",
            "\"stric\"",
        ),
        // The relative rules' keys.
        (
            "[instances.payments]\nslow-calls-quantile = 0.9",
            ErrorCode::RatioOutOfRange,
            "instances.payments",
            "slow-calls-quantile",
            "0.9",
        ),
        (
            "[defaults]\nslow-calls-quantile = \"75%\"",
            ErrorCode::RatioOutOfRange,
            "defaults",
            "slow-calls-quantile",
            "\"75%\"",
        ),
        (
            "[defaults]\nfailures-floor = 0",
            ErrorCode::RatioOutOfRange,
            "defaults",
            "failures-floor",
            "0",
        ),
        (
            "[configs.fast]\nfailures-floor = \"150%\"",
            ErrorCode::RatioOutOfRange,
            "configs.fast",
            "failures-floor",
            "\"150%\"",
        ),
        (
            "[defaults]\nlatency-baseline-window = \"0s\"",
            ErrorCode::ZeroDuration,
            "defaults",
            "latency-baseline-window",
            "\"0s\"",
        ),
        (
            "[configs.fast]\nfailure-baseline-window = \"0ms\"",
            ErrorCode::ZeroDuration,
            "configs.fast",
            "failure-baseline-window",
            "\"0ms\"",
        ),
        (
            "[defaults]\nlatency-baseline-window = \"1m\"",
            ErrorCode::BaselineTooShort,
            "defaults",
            "latency-baseline-window",
            "\"1m\"",
        ),
        (
            "[instances.payments]\nfailure-baseline-window = \"2m\"",
            ErrorCode::BaselineTooShort,
            "instances.payments",
            "failure-baseline-window",
            "\"2m\"",
        ),
        (
            "[instances.payments]\nfailures-multiple = 1",
            ErrorCode::MultipleTooSmall,
            "instances.payments",
            "failures-multiple",
            "1",
        ),
        (
            "[defaults]\nslow-calls-multiple = 0.5",
            ErrorCode::MultipleTooSmall,
            "defaults",
            "slow-calls-multiple",
            "0.5",
        ),
        (
            "[defaults]\nslow-calls = \"off\"\nslow-calls-multiple = 4",
            ErrorCode::Contradiction,
            "defaults",
            "slow-calls-multiple",
            "4",
        ),
        (
            "[defaults]\nfailures = false\nfailures-floor = \"10%\"",
            ErrorCode::Contradiction,
            "defaults",
            "failures-floor",
            "\"10%\"",
        ),
        (
            "[defaults]\nslow_calls_multiple = 4",
            ErrorCode::UnknownKey,
            "defaults",
            "slow_calls_multiple",
            "4",
        ),
        (
            "[defaults]\nslow-calls-multiple = \"3x\"",
            ErrorCode::WrongType,
            "defaults",
            "slow-calls-multiple",
            "\"3x\"",
        ),
        (
            "[defaults]\nadaptive = \"yes\"",
            ErrorCode::WrongType,
            "defaults",
            "adaptive",
            "\"yes\"",
        ),
        (
            "[defaults]\nfailures = 0",
            ErrorCode::WrongType,
            "defaults",
            "failures",
            "0",
        ),
        (
            "[defaults]\nslow-calls = true",
            ErrorCode::InvalidValue,
            "defaults",
            "slow-calls",
            "true",
        ),
        (
            "[defaults]\nfailures = \"on\"",
            ErrorCode::InvalidValue,
            "defaults",
            "failures",
            "\"on\"",
        ),
        (
            "[defaults]\nlatency-baseline-window = 600",
            ErrorCode::WrongType,
            "defaults",
            "latency-baseline-window",
            "600",
        ),
        // The recovery ramp's keys.
        (
            "[instances.payments]\nrecovery-fraction = 12",
            ErrorCode::RatioOutOfRange,
            "instances.payments",
            "recovery-fraction",
            "12",
        ),
        (
            "[defaults]\nrecovery-fraction = \"0%\"",
            ErrorCode::RatioOutOfRange,
            "defaults",
            "recovery-fraction",
            "\"0%\"",
        ),
        (
            "[configs.fast]\nrecovery-fraction = 0.5\nrecovery-initial-fraction = \"100%\"",
            ErrorCode::RatioOutOfRange,
            "configs.fast",
            "recovery-initial-fraction",
            "\"100%\"",
        ),
        (
            "[defaults]\nrecovery-fraction = 0.5\nrecovery-initial-fraction = 0",
            ErrorCode::RatioOutOfRange,
            "defaults",
            "recovery-initial-fraction",
            "0",
        ),
        (
            "[configs.fast]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"0s\"",
            ErrorCode::ZeroDuration,
            "configs.fast",
            "recovery-min-duration",
            "\"0s\"",
        ),
        (
            "[instances.ledger]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"10s\"\n\
             recovery-max-duration = \"5s\"",
            ErrorCode::MaxBelowMin,
            "instances.ledger",
            "recovery-max-duration",
            "\"5s\"",
        ),
        (
            "[defaults]\nrecovery = \"off\"\nrecovery-fraction = 0.5",
            ErrorCode::Contradiction,
            "defaults",
            "recovery-fraction",
            "0.5",
        ),
        (
            "[defaults]\nrecovery = true",
            ErrorCode::InvalidValue,
            "defaults",
            "recovery",
            "true",
        ),
        (
            "[defaults]\nrecovery = \"on\"",
            ErrorCode::InvalidValue,
            "defaults",
            "recovery",
            "\"on\"",
        ),
        (
            "[defaults]\nrecovery-fraction = \"0.5\"",
            ErrorCode::InvalidValue,
            "defaults",
            "recovery-fraction",
            "\"0.5\"",
        ),
        (
            "[defaults]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"-1s\"",
            ErrorCode::InvalidValue,
            "defaults",
            "recovery-min-duration",
            "\"-1s\"",
        ),
        (
            "[defaults]\nrecovery-fraction = 0.5\nrecovery-max-duration = 60",
            ErrorCode::WrongType,
            "defaults",
            "recovery-max-duration",
            "60",
        ),
        (
            "[defaults]\nrecovery_fraction = 0.5",
            ErrorCode::UnknownKey,
            "defaults",
            "recovery_fraction",
            "0.5",
        ),
        (
            "[configs.steady]\nbreak-multiplier = 0.8",
            ErrorCode::BreakMultiplierOutOfRange,
            "configs.steady",
            "break-multiplier",
            "0.8",
        ),
        (
            "[defaults]\nhalf-open-timeout = \"wait\"",
            ErrorCode::InvalidValue,
            "defaults",
            "half-open-timeout",
            "\"wait\"",
        ),
        (
            "[defaults]\ninitial-state = \"open\"",
            ErrorCode::InvalidValue,
            "defaults",
            "initial-state",
            "\"open\"",
        ),
        (
            "[instances.x]\nenabled = false\ninitial-state = \"closed\"",
            ErrorCode::Contradiction,
            "instances.x",
            "initial-state",
            "\"closed\"",
        ),
    ];
    let mut seen = std::collections::HashSet::new();
    for &(doc, code, section, key, value) in cases {
        let error = load_err(doc);
        let message = error.to_string();
        assert_eq!(error.code(), code, "{doc:?}: {message}");
        assert_eq!(error.key(), key, "{message}");
        assert_eq!(error.value(), Some(value), "{message}");
        assert_eq!(error.section(), section, "{message}");
        assert!(message.starts_with(code.as_str()), "{message}");
        assert!(message.contains(&format!("{key} = {value}")), "{message}");
        if !section.is_empty() {
            assert!(message.contains(&format!("[{section}]")), "{message}");
        }
        // Every message says what is allowed or what was meant.
        assert!(
            error.allowed_values().is_some() || error.suggestion().is_some(),
            "{message}"
        );
        seen.insert(code);
    }

    // Malformed documents name the position instead of a key.
    let syntax = load_err("[defaults]\nminimum-calls = ");
    assert_eq!(syntax.code(), ErrorCode::Syntax);
    let message = syntax.to_string();
    assert!(
        message.starts_with("CUT-CFG-007: malformed document at line 2, column 17:"),
        "{message}"
    );
    seen.insert(ErrorCode::Syntax);

    // A count window with no size anywhere.
    let missing = load_err("[defaults]\nwindow-type = \"count\"");
    assert_eq!(missing.code(), ErrorCode::Contradiction);
    assert_eq!(missing.key(), "window-size");
    assert_eq!(missing.value(), None);
    assert_eq!(
        missing.to_string(),
        "CUT-CFG-006: invalid window-size (not set) in [defaults]: window-type = \"count\" \
         needs a window-size; allowed 1 to 1000000 calls"
    );

    for code in [
        ErrorCode::RatioOutOfRange,
        ErrorCode::CountTooSmall,
        ErrorCode::ZeroDuration,
        ErrorCode::MaxBreakBelowBreak,
        ErrorCode::WindowTooLarge,
        ErrorCode::Contradiction,
        ErrorCode::Syntax,
        ErrorCode::UnknownKey,
        ErrorCode::WrongType,
        ErrorCode::InvalidValue,
        ErrorCode::UnknownBaseConfig,
        ErrorCode::BaselineTooShort,
        ErrorCode::MultipleTooSmall,
        ErrorCode::MaxBelowMin,
        ErrorCode::BreakMultiplierOutOfRange,
    ] {
        assert!(seen.contains(&code), "no case for {code}");
    }
}

/// The messages in the module docs' table, verbatim.
#[test]
fn documented_example_messages() {
    let cases = [
        (
            "[instances.payments]\nfailure-ratio = \"150%\"",
            "CUT-CFG-001: invalid failure-ratio = \"150%\" in [instances.payments]: allowed a ratio in (0, 1]",
        ),
        (
            "[defaults]\nminimum-calls = -3",
            "CUT-CFG-002: invalid minimum-calls = -3 in [defaults]: allowed a whole number of at least 1",
        ),
        (
            "[configs.fast]\nbreak-duration = \"0s\"",
            "CUT-CFG-003: invalid break-duration = \"0s\" in [configs.fast]: allowed a duration above zero",
        ),
        (
            "[instances.ledger]\nbreak-duration = \"30s\"\nmax-break-duration = \"10s\"",
            "CUT-CFG-004: invalid max-break-duration = \"10s\" in [instances.ledger]: break-duration = \"30s\"; allowed a duration at least break-duration",
        ),
        (
            "[defaults]\nwindow-size = 2000000",
            "CUT-CFG-005: invalid window-size = 2000000 in [defaults]: allowed 1 to 1000000 calls",
        ),
        (
            "[defaults]\nwindow-type = \"count\"\nwindow-duration = \"1m\"",
            "CUT-CFG-006: invalid window-duration = \"1m\" in [defaults]: window-type = \"count\" takes a window-size, not a window-duration; allowed window keys of one kind per section",
        ),
        (
            "[defaults]\nfailure_ratio = 0.5",
            "CUT-CFG-008: unknown key failure_ratio = 0.5 in [defaults]: did you mean failure-ratio?",
        ),
        (
            "[defaults]\nminimum-calls = \"ten\"",
            "CUT-CFG-009: wrong type for minimum-calls = \"ten\" in [defaults]: found a string; allowed a whole number of at least 1",
        ),
        (
            "[defaults]\nbreak-duration = \"-5s\"",
            "CUT-CFG-010: invalid break-duration = \"-5s\" in [defaults]: a duration cannot be negative; allowed a duration such as \"30s\" or \"2m\"",
        ),
        (
            "[configs.strict]\n[instances.payments]\nbase-config = \"stric\"",
            "CUT-CFG-011: unknown base-config = \"stric\" in [instances.payments]: there is no [configs.stric]; did you mean \"strict\"?",
        ),
        (
            "[defaults]\nlatency-baseline-window = \"1m\"",
            "CUT-CFG-012: invalid latency-baseline-window = \"1m\" in [defaults]: needs more than 60s: window-duration = 30s (built-in default) / slow-calls-quantile = 0.5 (built-in default); allowed a duration above trip window / slow-calls-quantile",
        ),
        (
            "[instances.payments]\nfailures-multiple = 1",
            "CUT-CFG-013: invalid failures-multiple = 1 in [instances.payments]: allowed a finite number above 1",
        ),
        (
            "[defaults]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"10s\"\nrecovery-max-duration = \"5s\"",
            "CUT-CFG-014: invalid recovery-max-duration = \"5s\" in [defaults]: recovery-min-duration = \"10s\"; allowed a duration at least recovery-min-duration",
        ),
        (
            "[defaults]\nbreak-multiplier = 0.5",
            "CUT-CFG-015: invalid break-multiplier = 0.5 in [defaults]: allowed a finite number of at least 1 (1 keeps the break constant)",
        ),
    ];
    for (doc, message) in cases {
        assert_eq!(load_err(doc).to_string(), message);
    }
}

#[test]
fn registry_codes_from_a_config() {
    let config = Config::from_toml(DOCUMENT).unwrap();
    let registry = Registry::new();
    registry.breaker("payments", Settings::default()).unwrap();
    let conflict = config.register(&registry).unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::SettingsConflict);
    let message = conflict.to_string();
    assert!(
        message.starts_with("CUT-REG-001: breaker \"payments\""),
        "{message}"
    );
    assert!(
        message.contains("failure-ratio = off (existing), 0.5 (requested)"),
        "{message}"
    );
    assert!(
        message.contains("break-duration = 15s (existing), 60s (requested)"),
        "{message}"
    );

    let registry = Registry::new();
    config.register(&registry).unwrap();
    let unknown = registry.get("report").unwrap_err();
    assert_eq!(unknown.code(), ErrorCode::UnknownId);
    assert_eq!(
        unknown.to_string(),
        "CUT-REG-002: no breaker with id \"report\": did you mean \"reports\"?"
    );
}

#[test]
fn values_merged_from_elsewhere_say_so() {
    // A valid [defaults] whose value only fails against an instance's key.
    let error = load_err(
        "[defaults]\nmax-break-duration = \"20s\"\n[instances.a]\nbreak-duration = \"30s\"",
    );
    assert_eq!(error.code(), ErrorCode::MaxBreakBelowBreak);
    assert_eq!(error.section(), "defaults");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-004: invalid max-break-duration = \"20s\" in [defaults] (merged into \
         [instances.a]): break-duration = \"30s\" (from [instances.a]); allowed a duration at \
         least break-duration"
    );
    assert_eq!(
        error.settings_error().unwrap().code(),
        ErrorCode::MaxBreakBelowBreak
    );
    assert!(std::error::Error::source(&error).is_some());

    // A built-in default at fault.
    let error = load_err("[instances.a]\nbreak-duration = \"5m\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-004: invalid max-break-duration = 120s in [instances.a] (built-in default): \
         break-duration = \"5m\"; allowed a duration at least break-duration"
    );
}

#[test]
fn rules_switch_off_with_false_or_off() {
    let config = Config::from_toml(
        r#"
        [instances.a]
        consecutive-failures = false
        failure-ratio = 0.25
        slow-call-threshold = "off"
        max-wait-in-half-open = false
        [instances.b]
        consecutive-failures = "OFF"
        failure-ratio = 1
        "#,
    )
    .unwrap();
    let a = config.instance("a").unwrap();
    assert_eq!(a.consecutive_failures(), None);
    assert_eq!(a.failure_ratio(), Some(0.25));
    assert_eq!(a.slow_call_threshold(), None);
    assert_eq!(a.max_wait_in_half_open(), None);
    let b = config.instance("b").unwrap();
    assert_eq!(b.consecutive_failures(), None);
    assert_eq!(b.failure_ratio(), Some(1.0));
    // false is not accepted where nothing can be switched off
    let error = load_err("[defaults]\nminimum-calls = false");
    assert_eq!(error.code(), ErrorCode::WrongType);
}

#[test]
fn durations_ratios_and_choices_are_read_as_documented() {
    let config = Config::from_toml(
        r#"
        [defaults]
        break-duration = "1m 30s"
        max-break-duration = "2h"
        window-duration = "250ms"
        slow-call-threshold = "1500ms"
        slow-call-ratio = "12.5%"
        jitter = "Full"
        half-open-rule = "RATES"
        "#,
    )
    .unwrap();
    let d = config.defaults();
    assert_eq!(d.break_duration(), 90 * SEC);
    assert_eq!(d.max_break_duration(), 7200 * SEC);
    assert_eq!(d.window(), TripWindow::Time(Duration::from_millis(250)));
    assert_eq!(d.slow_call_threshold(), Some(Duration::from_millis(1500)));
    assert_eq!(d.slow_call_ratio(), 0.125);
    assert_eq!(d.jitter(), Jitter::Full);
    assert_eq!(d.half_open_rule(), HalfOpenRule::Rates);
}

#[test]
fn a_later_section_switches_the_window_kind() {
    let config = Config::from_toml(
        r#"
        [defaults]
        window-size = 100
        [configs.timed]
        window-duration = "1m"
        [instances.a]
        base-config = "timed"
        [instances.b]
        base-config = "timed"
        window-type = "count"
        "#,
    )
    .unwrap();
    assert_eq!(config.defaults().window(), TripWindow::Count(100));
    assert_eq!(
        config.instance("a").unwrap().window(),
        TripWindow::Time(60 * SEC)
    );
    // Back to count: the size from [defaults] still applies.
    assert_eq!(
        config.instance("b").unwrap().window(),
        TripWindow::Count(100)
    );
}

#[test]
fn hostile_documents_fail_clearly() {
    let cases: &[(&str, ErrorCode)] = &[
        ("[defaults", ErrorCode::Syntax),
        ("= 1", ErrorCode::Syntax),
        ("[defaults]\na = 1\na = 2", ErrorCode::Syntax),
        ("\u{0}", ErrorCode::Syntax),
        ("defaults = 3", ErrorCode::WrongType),
        ("configs = [1, 2]", ErrorCode::WrongType),
        ("[configs]\nstrict = \"x\"", ErrorCode::WrongType),
        (
            "[defaults]\nbreak-duration = 1979-05-27",
            ErrorCode::WrongType,
        ),
        (
            "[defaults]\nbreak-duration = [\"30s\"]",
            ErrorCode::WrongType,
        ),
        (
            "[defaults]\nbreak-duration = { s = 30 }",
            ErrorCode::WrongType,
        ),
        (
            "[defaults]\nbreak-duration = \"-0s\"",
            ErrorCode::InvalidValue,
        ),
        (
            "[defaults]\nbreak-duration = \"  -5 s\"",
            ErrorCode::InvalidValue,
        ),
        ("[defaults]\nbreak-duration = \"\"", ErrorCode::InvalidValue),
        (
            "[defaults]\nbreak-duration = \"99999999999999999999999y\"",
            ErrorCode::InvalidValue,
        ),
        ("[defaults]\nfailure-ratio = 2", ErrorCode::RatioOutOfRange),
        (
            "[defaults]\nfailure-ratio = \"100.1%\"",
            ErrorCode::RatioOutOfRange,
        ),
        (
            "[defaults]\nfailure-ratio = nan",
            ErrorCode::RatioOutOfRange,
        ),
        (
            "[defaults]\nfailure-ratio = inf",
            ErrorCode::RatioOutOfRange,
        ),
        (
            "[defaults]\nfailure-ratio = \"0%\"",
            ErrorCode::RatioOutOfRange,
        ),
        ("[defaults]\nfailure-ratio = \"%\"", ErrorCode::InvalidValue),
        (
            "[defaults]\nfailure-ratio = \"0.5\"",
            ErrorCode::InvalidValue,
        ),
        (
            "[defaults]\nminimum-calls = 9223372036854775807",
            ErrorCode::InvalidValue,
        ),
        (
            "[defaults]\nminimum-calls = -9223372036854775808",
            ErrorCode::CountTooSmall,
        ),
        ("[instances.x]\nbase-config = 3", ErrorCode::WrongType),
        (
            "[instances.x]\nbase-config = \"nope\"",
            ErrorCode::UnknownBaseConfig,
        ),
        (
            "[instances.x.nested]\nfailure-ratio = 0.5",
            ErrorCode::UnknownKey,
        ),
        ("[[instances]]\nx = 1", ErrorCode::WrongType),
        ("[settings]", ErrorCode::UnknownKey),
    ];
    for &(doc, code) in cases {
        let error = load_err(doc);
        let message = error.to_string();
        assert_eq!(error.code(), code, "{doc:?}: {message}");
        assert!(message.starts_with(code.as_str()), "{message}");
    }
    // A key with a suggestion in an instance can also be base-config.
    assert_eq!(
        load_err("[instances.x]\nbase_config = \"a\"").suggestion(),
        Some("base-config")
    );
}

#[test]
fn any_serde_format_reads_the_same_document() {
    let json = r#"{
        "defaults": { "break-duration": "30s", "max-break-duration": "5m",
                      "jitter": "none", "minimum-calls": 10 },
        "instances": { "ledger": { "probe-successes": 3, "enabled": false } }
    }"#;
    let from_json =
        Config::from_deserializer(&mut serde_json::Deserializer::from_str(json)).unwrap();
    let from_toml = Config::from_toml(DOCUMENT).unwrap();
    assert_eq!(from_json.defaults(), from_toml.defaults());
    assert_eq!(from_json.instance("ledger"), from_toml.instance("ledger"));

    // Embedded through `Deserialize`: the message keeps its code.
    let embedded: Config = serde_json::from_str(json).unwrap();
    assert_eq!(embedded, from_json);
    let bad = serde_json::from_str::<Config>(r#"{"defaults": {"jiter": "none"}}"#).unwrap_err();
    assert!(bad.to_string().contains("CUT-CFG-008"), "{bad}");
    assert!(bad.to_string().contains("did you mean jitter?"), "{bad}");

    // JSON-only shapes: null, huge integers, malformed input.
    let null = Config::from_deserializer(&mut serde_json::Deserializer::from_str(
        r#"{"defaults": {"failure-ratio": null}}"#,
    ))
    .unwrap_err();
    assert_eq!(null.code(), ErrorCode::WrongType);
    assert!(null.to_string().contains("failure-ratio = null"), "{null}");
    let huge = Config::from_deserializer(&mut serde_json::Deserializer::from_str(
        r#"{"defaults": {"window-size": 18446744073709551615}}"#,
    ))
    .unwrap_err();
    assert_eq!(huge.code(), ErrorCode::WindowTooLarge);
    let malformed =
        Config::from_deserializer(&mut serde_json::Deserializer::from_str("{\"defaults\": "))
            .unwrap_err();
    assert_eq!(malformed.code(), ErrorCode::Syntax);
}

// ---------------------------------------------------------------------------------------------
// The relative rules' keys.

const ADAPTIVE_DOCUMENT: &str = r#"
[defaults]
adaptive = true
slow-calls-multiple = 4
failures-floor = "10%"

[configs.steady]
slow-calls-quantile = 0.25
failures-multiple = 8.5
failure-baseline-window = "20m"

[instances.payments]
base-config = "steady"
latency-baseline-window = "10m"

[instances.reports]
adaptive = false
slow-calls = "off"
failures = false
"#;

#[test]
fn every_adaptive_key_loads_into_exactly_the_expected_settings() {
    let config = Config::from_toml(ADAPTIVE_DOCUMENT).unwrap();

    // [defaults] sets one key of each rule; the others keep their built-in values.
    let defaults = Settings::builder()
        .adaptive(true)
        .slow_calls(Some(SlowCalls::above(4.0)))
        .failures(Some(Failures::above(5.0).floor(0.1)))
        .build()
        .unwrap();
    assert_eq!(config.defaults(), &defaults);

    let steady = Settings::builder()
        .adaptive(true)
        .slow_calls(Some(SlowCalls::above(4.0).quantile(0.25)))
        .failures(Some(
            Failures::above(8.5)
                .floor(0.1)
                .window(Duration::from_secs(1200)),
        ))
        .build()
        .unwrap();
    assert_eq!(config.config("steady"), Some(&steady));

    // Keys from three sections make one rule: multiple from [defaults], quantile from the
    // config, window from the instance.
    let payments = Settings::builder()
        .adaptive(true)
        .slow_calls(Some(
            SlowCalls::above(4.0)
                .quantile(0.25)
                .window(Duration::from_secs(600)),
        ))
        .failures(Some(
            Failures::above(8.5)
                .floor(0.1)
                .window(Duration::from_secs(1200)),
        ))
        .build()
        .unwrap();
    assert_eq!(config.instance("payments"), Some(&payments));

    let reports = Settings::builder()
        .adaptive(false)
        .slow_calls(None)
        .failures(None)
        .build()
        .unwrap();
    assert_eq!(config.instance("reports"), Some(&reports));

    // The same document as JSON reads the same.
    let json = r#"{
        "defaults": { "adaptive": true, "slow-calls-multiple": 4, "failures-floor": 0.1 },
        "configs": { "steady": { "slow-calls-quantile": "25%", "failures-multiple": 8.5,
                                 "failure-baseline-window": "20m" } },
        "instances": {
            "payments": { "base-config": "steady", "latency-baseline-window": "10m" },
            "reports": { "adaptive": false, "slow-calls": "off", "failures": false }
        }
    }"#;
    let from_json =
        Config::from_deserializer(&mut serde_json::Deserializer::from_str(json)).unwrap();
    assert_eq!(from_json, config);
}

#[test]
fn relative_rules_switch_off_and_back_on_key_by_key() {
    let config = Config::from_toml(
        r#"
        [defaults]
        adaptive = true
        slow-calls-multiple = 4
        failures-multiple = 6
        [configs.quiet]
        slow-calls = "OFF"
        failures = false
        [instances.off]
        base-config = "quiet"
        [instances.slow-back-on]
        base-config = "quiet"
        slow-calls-quantile = "25%"
        [instances.failures-back-on]
        base-config = "quiet"
        failure-baseline-window = "1h"
        [instances.untouched]
        "#,
    )
    .unwrap();
    let settings = |slow: Option<SlowCalls>, failures: Option<Failures>| {
        Settings::builder()
            .adaptive(true)
            .slow_calls(slow)
            .failures(failures)
            .build()
            .unwrap()
    };
    assert_eq!(config.config("quiet"), Some(&settings(None, None)));
    assert_eq!(config.instance("off"), Some(&settings(None, None)));
    // Switched back on, with the multiple [defaults] gave before the config switched it off.
    assert_eq!(
        config.instance("slow-back-on"),
        Some(&settings(Some(SlowCalls::above(4.0).quantile(0.25)), None))
    );
    assert_eq!(
        config.instance("failures-back-on"),
        Some(&settings(
            None,
            Some(Failures::above(6.0).window(Duration::from_secs(3600)))
        ))
    );
    assert_eq!(
        config.instance("untouched"),
        Some(&settings(
            Some(SlowCalls::above(4.0)),
            Some(Failures::above(6.0))
        ))
    );

    // A later section switching a rule off does not excuse an invalid key of it in
    // [defaults], which must be valid on its own.
    let error =
        load_err("[defaults]\nslow-calls-multiple = 1\n[instances.a]\nslow-calls = \"off\"");
    assert_eq!(error.code(), ErrorCode::MultipleTooSmall);
    assert_eq!(error.section(), "defaults");

    // The switch takes only false / "off".
    let error = load_err("[defaults]\nslow-calls = true");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-010: invalid slow-calls = true in [defaults]: the rule is switched on by \
         setting one of slow-calls-multiple, slow-calls-quantile, slow-calls-floor, slow-calls-margin, \
         latency-baseline-window; \
         allowed false or \"off\" to switch the rule off"
    );
    let error = load_err("[defaults]\nfailures = \"off\"\nfailure-baseline-window = \"1h\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-006: invalid failure-baseline-window = \"1h\" in [defaults]: failures = \"off\" \
         switches the rule off, so failure-baseline-window would not apply; allowed either \
         failures = \"off\" or the rule's keys in one section"
    );
}

#[test]
fn baseline_errors_name_the_keys_of_the_bound_and_where_they_came_from() {
    // Valid in [defaults] (30 s window needs > 60 s), too short once an instance widens the
    // trip window to 1 min (needs > 120 s).
    let error = load_err(
        "[defaults]\nlatency-baseline-window = \"2m\"\n[instances.a]\nwindow-duration = \"1m\"",
    );
    assert_eq!(error.code(), ErrorCode::BaselineTooShort);
    assert_eq!(error.section(), "defaults");
    assert_eq!(error.value(), Some("\"2m\""));
    assert_eq!(
        error.to_string(),
        "CUT-CFG-012: invalid latency-baseline-window = \"2m\" in [defaults] (merged into \
         [instances.a]): needs more than 120s: window-duration = \"1m\" (from [instances.a]) / \
         slow-calls-quantile = 0.5 (built-in default); allowed a duration above trip window / \
         slow-calls-quantile"
    );
    assert_eq!(
        error.settings_error().unwrap().code(),
        ErrorCode::BaselineTooShort
    );

    // A count window counts as 30 s; the multiple from [defaults], the window from the instance.
    let error = load_err(
        "[defaults]\nfailures-multiple = 10\nwindow-size = 50\n\
         [instances.a]\nfailure-baseline-window = \"4m\"",
    );
    assert_eq!(error.code(), ErrorCode::BaselineTooShort);
    assert_eq!(error.key(), "failure-baseline-window");
    assert_eq!(error.section(), "instances.a");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-012: invalid failure-baseline-window = \"4m\" in [instances.a]: needs at least \
         300s: failures-multiple = 10 (from [defaults]) × window-size = 50 (from [defaults]) (a \
         count window counts as 30s); allowed a duration of at least failures-multiple × trip \
         window"
    );

    // Percentages are reported as written, through merging too.
    let error =
        load_err("[configs.c]\nslow-calls-quantile = \"60%\"\n[instances.a]\nbase-config = \"c\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-001: invalid slow-calls-quantile = \"60%\" in [configs.c]: allowed a quantile \
         in (0, 0.5]"
    );
}

#[test]
fn unknown_keys_suggest_the_adaptive_keys() {
    for (typo, key) in [
        ("adaptiv", "adaptive"),
        ("slow_calls", "slow-calls"),
        ("slow-call-multiple", "slow-calls-multiple"),
        ("slow-calls-quantil", "slow-calls-quantile"),
        ("latency-baseline-windw", "latency-baseline-window"),
        ("failure", "failures"),
        ("failure-multiple", "failures-multiple"),
        ("failure-floor", "failures-floor"),
        ("failures-baseline-window", "failure-baseline-window"),
    ] {
        let error = load_err(&format!("[defaults]\n{typo} = 1"));
        assert_eq!(error.code(), ErrorCode::UnknownKey, "{error}");
        assert_eq!(error.suggestion(), Some(key), "{error}");
    }
    // Without a close match, the list of keys names them too.
    let error = load_err("[defaults]\nbaseline = 1");
    let allowed = error.allowed_values().unwrap();
    for key in [
        "adaptive",
        "slow-calls",
        "slow-calls-multiple",
        "slow-calls-quantile",
        "latency-baseline-window",
        "failures",
        "failures-multiple",
        "failures-floor",
        "failure-baseline-window",
    ] {
        assert!(allowed.contains(key), "{allowed}");
    }
}

#[test]
fn a_registry_conflict_in_an_adaptive_key_names_it() {
    let config = Config::from_toml(ADAPTIVE_DOCUMENT).unwrap();
    let registry = Registry::new();
    let registered = config
        .instance("payments")
        .unwrap()
        .to_builder()
        .failures(Some(
            Failures::above(8.5)
                .floor(0.2)
                .window(Duration::from_secs(1200)),
        ))
        .build()
        .unwrap();
    registry.breaker("payments", registered).unwrap();
    let conflict = config.register(&registry).unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::SettingsConflict);
    assert_eq!(
        conflict.conflicting_keys().collect::<Vec<_>>(),
        ["failures-floor"]
    );
    assert_eq!(
        conflict.to_string(),
        "CUT-REG-001: breaker \"payments\" already exists with different settings: \
         failures-floor = 0.2 (existing), 0.1 (requested)"
    );
}

// ---------------------------------------------------------------------------------------------
// The recovery ramp's keys.

const RECOVERY_DOCUMENT: &str = r#"
[defaults]
recovery-fraction = 0.25

[configs.gentle]
recovery-initial-fraction = "5%"
recovery-max-duration = "5m"

[configs.quiet]
recovery = "off"

[instances.payments]
base-config = "gentle"
recovery-min-duration = "2s"

[instances.reports]
base-config = "quiet"

[instances.ledger]
base-config = "quiet"
recovery-max-duration = "30s"

[instances.batch]
recovery = false

[instances.long]
recovery = "OFF"

[instances.long-again]
base-config = "quiet"
recovery-fraction = "200%"
"#;

fn with_recovery(recovery: Option<Recovery>) -> Settings {
    Settings::builder().recovery(recovery).build().unwrap()
}

#[test]
fn every_recovery_key_loads_into_exactly_the_expected_settings() {
    let config = Config::from_toml(RECOVERY_DOCUMENT).unwrap();

    // The built-in default is off.
    assert_eq!(Settings::default().recovery(), None);
    assert_eq!(Config::from_toml("").unwrap().defaults().recovery(), None);

    // recovery-fraction alone switches the ramp on; the other keys are Recovery::over's.
    assert_eq!(
        config.defaults(),
        &with_recovery(Some(Recovery::over(0.25)))
    );
    let defaults = config.defaults().recovery().unwrap();
    assert_eq!(defaults.initial(), 0.1);
    assert_eq!(defaults.min(), SEC);
    assert_eq!(defaults.max(), 120 * SEC);

    let gentle = Recovery::over(0.25)
        .initial_fraction(0.05)
        .max_duration(300 * SEC);
    assert_eq!(config.config("gentle"), Some(&with_recovery(Some(gentle))));
    assert_eq!(config.config("quiet"), Some(&with_recovery(None)));

    // Keys from three sections make one ramp: fraction from [defaults], initial fraction and
    // maximum from the config, minimum from the instance.
    assert_eq!(
        config.instance("payments"),
        Some(&with_recovery(Some(gentle.min_duration(2 * SEC))))
    );
    assert_eq!(config.instance("reports"), Some(&with_recovery(None)));
    // Switched back on by one key, with the fraction [defaults] gave before the config
    // switched it off.
    assert_eq!(
        config.instance("ledger"),
        Some(&with_recovery(Some(
            Recovery::over(0.25).max_duration(30 * SEC)
        )))
    );
    assert_eq!(config.instance("batch"), Some(&with_recovery(None)));
    assert_eq!(config.instance("long"), Some(&with_recovery(None)));
    // A percentage above 100% is a fraction above 1: twice the break served.
    assert_eq!(
        config.instance("long-again"),
        Some(&with_recovery(Some(Recovery::over(2.0))))
    );

    // The same keys as JSON read the same.
    let json = r#"{
        "defaults": { "recovery-fraction": 0.25 },
        "configs": {
            "gentle": { "recovery-initial-fraction": "5%", "recovery-max-duration": "5m" },
            "quiet": { "recovery": "off" }
        },
        "instances": {
            "payments": { "base-config": "gentle", "recovery-min-duration": "2s" },
            "reports": { "base-config": "quiet" },
            "ledger": { "base-config": "quiet", "recovery-max-duration": "30s" },
            "batch": { "recovery": false },
            "long": { "recovery": "OFF" },
            "long-again": { "base-config": "quiet", "recovery-fraction": "200%" }
        }
    }"#;
    let from_json =
        Config::from_deserializer(&mut serde_json::Deserializer::from_str(json)).unwrap();
    assert_eq!(from_json, config);
}

#[test]
fn a_recovery_ramp_needs_a_recovery_fraction() {
    // Any other recovery key switches the ramp on; with no recovery-fraction anywhere it is
    // incomplete.
    let error = load_err("[defaults]\nrecovery-min-duration = \"5s\"");
    assert_eq!(error.code(), ErrorCode::Contradiction);
    assert_eq!(error.key(), "recovery-fraction");
    assert_eq!(error.value(), None);
    assert_eq!(error.section(), "defaults");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-006: invalid recovery-fraction (not set) in [defaults]: recovery-min-duration \
         = \"5s\" switches the recovery ramp on, which needs a recovery-fraction; allowed a \
         number in (0, 10] or a percentage such as \"25%\""
    );

    // In an instance; the first of the section's recovery keys is named.
    let error = load_err(
        "[configs.c]\nrecovery-fraction = 0.5\n\
         [instances.a]\nrecovery-max-duration = \"1m\"\nrecovery-initial-fraction = \"20%\"",
    );
    assert_eq!(error.code(), ErrorCode::Contradiction);
    assert_eq!(error.key(), "recovery-fraction");
    assert_eq!(error.section(), "instances.a");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-006: invalid recovery-fraction (not set) in [instances.a]: \
         recovery-initial-fraction = \"20%\" switches the recovery ramp on, which needs a \
         recovery-fraction; allowed a number in (0, 10] or a percentage such as \"25%\""
    );

    // A fraction from any earlier section completes it, even across an off switch.
    let config = Config::from_toml("[defaults]\nrecovery-fraction = 0.5\nrecovery = false\n");
    assert_eq!(
        config.unwrap_err().code(),
        ErrorCode::Contradiction,
        "off and a key in one section"
    );
    let config = Config::from_toml(
        "[defaults]\nrecovery-fraction = 0.5\n[configs.off]\nrecovery = false\n\
         [instances.a]\nbase-config = \"off\"\nrecovery-min-duration = \"3s\"",
    )
    .unwrap();
    assert_eq!(
        config.instance("a"),
        Some(&with_recovery(Some(
            Recovery::over(0.5).min_duration(3 * SEC)
        )))
    );
}

#[test]
fn recovery_errors_name_the_other_bound_and_where_it_came_from() {
    // The minimum from [defaults], the maximum from the instance.
    let error = load_err(
        "[defaults]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"10s\"\n\
         [instances.a]\nrecovery-max-duration = \"5s\"",
    );
    assert_eq!(error.code(), ErrorCode::MaxBelowMin);
    assert_eq!(error.code().as_str(), "CUT-CFG-014");
    assert_eq!(error.key(), "recovery-max-duration");
    assert_eq!(error.value(), Some("\"5s\""));
    assert_eq!(error.section(), "instances.a");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-014: invalid recovery-max-duration = \"5s\" in [instances.a]: \
         recovery-min-duration = \"10s\" (from [defaults]); allowed a duration at least \
         recovery-min-duration"
    );
    assert_eq!(
        error.settings_error().unwrap().code(),
        ErrorCode::MaxBelowMin
    );

    // A minimum above the built-in maximum: the built-in default is at fault.
    let error = load_err("[defaults]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"5m\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-014: invalid recovery-max-duration = 120s in [defaults] (built-in default): \
         recovery-min-duration = \"5m\"; allowed a duration at least recovery-min-duration"
    );

    // A maximum below the built-in minimum.
    let error = load_err("[defaults]\nrecovery-fraction = 0.5\nrecovery-max-duration = \"500ms\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-014: invalid recovery-max-duration = \"500ms\" in [defaults]: \
         recovery-min-duration = 1s (built-in default); allowed a duration at least \
         recovery-min-duration"
    );

    // The fractions' ranges, as written.
    let error = load_err("[instances.a]\nrecovery-fraction = 12");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-001: invalid recovery-fraction = 12 in [instances.a]: allowed a fraction of \
         the break in (0, 10]"
    );
    let error = load_err(
        "[defaults]\nrecovery-fraction = 0.5\n[instances.a]\nrecovery-initial-fraction = \"100%\"",
    );
    assert_eq!(
        error.to_string(),
        "CUT-CFG-001: invalid recovery-initial-fraction = \"100%\" in [instances.a]: allowed a \
         fraction in [0.001, 1)"
    );
    let error = load_err("[defaults]\nrecovery-fraction = 0.5\nrecovery-min-duration = \"0s\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-003: invalid recovery-min-duration = \"0s\" in [defaults]: allowed a duration \
         above zero"
    );
}

#[test]
fn the_recovery_ramp_switches_off_with_false_or_off() {
    for off in ["false", "\"off\"", "\"Off\""] {
        let config = Config::from_toml(&format!(
            "[defaults]\nrecovery-fraction = 0.5\n[instances.a]\nrecovery = {off}"
        ))
        .unwrap();
        assert_eq!(config.instance("a"), Some(&with_recovery(None)), "{off}");
        assert_eq!(config.defaults(), &with_recovery(Some(Recovery::over(0.5))));
    }
    // Off alone is the built-in default, and fine in every section.
    let config = Config::from_toml("[defaults]\nrecovery = false").unwrap();
    assert_eq!(config.defaults(), &Settings::default());

    // The switch takes only false / "off".
    let error = load_err("[defaults]\nrecovery = true");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-010: invalid recovery = true in [defaults]: the ramp is switched on by setting \
         one of recovery-fraction, recovery-initial-fraction, recovery-min-duration, \
         recovery-max-duration; allowed false or \"off\" to switch the ramp off"
    );
    let error = load_err("[defaults]\nrecovery = 0.5");
    assert_eq!(error.code(), ErrorCode::WrongType);
    assert_eq!(error.key(), "recovery");
    // Not both in one section.
    let error = load_err("[instances.a]\nrecovery = false\nrecovery-min-duration = \"5s\"");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-006: invalid recovery-min-duration = \"5s\" in [instances.a]: recovery = false \
         switches the ramp off, so recovery-min-duration would not apply; allowed either \
         recovery = \"off\" or the ramp's keys in one section"
    );
    // A recovery key cannot itself be switched off: only the ramp can.
    let error = load_err("[defaults]\nrecovery-fraction = false");
    assert_eq!(error.code(), ErrorCode::WrongType);
    assert_eq!(error.key(), "recovery-fraction");
}

#[test]
fn unknown_keys_suggest_the_recovery_keys() {
    for (typo, key) in [
        ("recovry", "recovery"),
        ("recovery-fracton", "recovery-fraction"),
        ("recovery_initial_fraction", "recovery-initial-fraction"),
        ("recovery-min-durations", "recovery-min-duration"),
        ("recovery-max-duraton", "recovery-max-duration"),
    ] {
        let error = load_err(&format!("[defaults]\n{typo} = 1"));
        assert_eq!(error.code(), ErrorCode::UnknownKey, "{error}");
        assert_eq!(error.suggestion(), Some(key), "{error}");
    }
    let error = load_err("[defaults]\nramp = 1");
    let allowed = error.allowed_values().unwrap();
    for key in [
        "recovery",
        "recovery-fraction",
        "recovery-initial-fraction",
        "recovery-min-duration",
        "recovery-max-duration",
    ] {
        assert!(allowed.contains(key), "{allowed}");
    }
}

#[test]
fn a_registry_conflict_in_a_recovery_key_names_it() {
    let config = Config::from_toml(RECOVERY_DOCUMENT).unwrap();
    let registry = Registry::new();
    let registered = config
        .instance("payments")
        .unwrap()
        .to_builder()
        .recovery(Some(
            Recovery::over(0.25)
                .initial_fraction(0.05)
                .max_duration(300 * SEC)
                .min_duration(3 * SEC),
        ))
        .build()
        .unwrap();
    registry.breaker("payments", registered).unwrap();
    let conflict = config.register(&registry).unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::SettingsConflict);
    assert_eq!(
        conflict.conflicting_keys().collect::<Vec<_>>(),
        ["recovery-min-duration"]
    );
    assert_eq!(
        conflict.to_string(),
        "CUT-REG-001: breaker \"payments\" already exists with different settings: \
         recovery-min-duration = 3s (existing), 2s (requested)"
    );

    // Off in the registry, on in the file.
    let registry = Registry::new();
    registry.breaker("ledger", Settings::default()).unwrap();
    let conflict = config.register(&registry).unwrap_err();
    assert_eq!(
        conflict.to_string(),
        "CUT-REG-001: breaker \"ledger\" already exists with different settings: \
         recovery = off (existing), on (requested)"
    );
}

// ---------------------------------------------------------------------------------------------
// No document makes loading panic.

const SECTION_HEADERS: &[&str] = &[
    "[defaults]",
    "[configs.a]",
    "[configs.b]",
    "[instances.x]",
    "[instances.y]",
    "[instances.\"h://p:1\"]",
    "[instances]",
    "[configs]",
    "[other]",
    "",
];

/// The real keys, `base-config`, then keys that are not (a misspelling and a stranger).
fn keys() -> Vec<&'static str> {
    let mut keys = cutout::config::SETTINGS_KEYS.to_vec();
    keys.extend(["base-config", "failure_ratio", "x"]);
    keys
}

const VALUES: &[&str] = &[
    "\"30s\"",
    "\"2m\"",
    "\"0s\"",
    "\"-5s\"",
    "\"1h 2m 3s\"",
    "\"50%\"",
    "\"150%\"",
    "\"-1%\"",
    "\"off\"",
    "\"count\"",
    "\"time\"",
    "\"equal\"",
    "\"none\"",
    "\"rates\"",
    "\"25%\"",
    "\"10m\"",
    "4",
    "\"a\"",
    "\"b\"",
    "true",
    "false",
    "0",
    "1",
    "-1",
    "0.5",
    "1.5",
    "nan",
    "-inf",
    "9223372036854775807",
    "[1, \"2\"]",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(VALUES).prop_map(str::to_owned),
        1 => any::<i64>().prop_map(|i| i.to_string()),
        1 => any::<f64>().prop_map(|f| format!("{f:?}")),
        1 => "[a-z0-9%. -]{0,12}".prop_map(|s| format!("{s:?}")),
        1 => ".{0,12}".prop_map(|s| format!("{s:?}")),
    ]
}

fn document() -> impl Strategy<Value = String> {
    let line = (prop::sample::select(keys()), value()).prop_map(|(k, v)| format!("{k} = {v}"));
    let section = (
        prop::sample::select(SECTION_HEADERS),
        prop::collection::vec(line, 0..6),
    )
        .prop_map(|(header, lines)| format!("{header}\n{}\n", lines.join("\n")));
    prop::collection::vec(section, 0..5).prop_map(|sections| sections.concat())
}

/// Values a key of this kind plausibly takes: mostly valid, some at or past the edges.
fn plausible(key: &'static str) -> BoxedStrategy<String> {
    let durations = prop_oneof![
        (0u64..400).prop_map(|n| format!("\"{n}s\"")),
        (1u64..5).prop_map(|n| format!("\"{n}m\"")),
        Just("\"off\"".to_owned()),
        Just("\"-5s\"".to_owned()),
    ];
    let ratios = prop_oneof![
        (0.0f64..1.2).prop_map(|f| format!("{f:?}")),
        (0u32..120).prop_map(|n| format!("\"{n}%\"")),
        Just("false".to_owned()),
    ];
    let counts = prop_oneof![
        (0i64..40).prop_map(|n| n.to_string()),
        Just("false".to_owned()),
        Just("2000000".to_owned()),
    ];
    let multiples = prop_oneof![
        (0.0f64..12.0).prop_map(|f| format!("{f:?}")),
        (0i64..12).prop_map(|n| n.to_string()),
        Just("1e300".to_owned()),
    ];
    let fractions = prop_oneof![
        (0.0f64..12.0).prop_map(|f| format!("{f:?}")),
        (0u32..1200).prop_map(|n| format!("\"{n}%\"")),
        Just("false".to_owned()),
    ];
    match key {
        "failure-ratio"
        | "slow-call-ratio"
        | "slow-calls-quantile"
        | "failures-floor"
        | "recovery-initial-fraction" => ratios.boxed(),
        "recovery-fraction" => fractions.boxed(),
        "window-duration"
        | "slow-call-threshold"
        | "break-duration"
        | "max-break-duration"
        | "max-wait-in-half-open"
        | "latency-baseline-window"
        | "failure-baseline-window"
        | "recovery-min-duration"
        | "recovery-max-duration" => durations.boxed(),
        "slow-calls-multiple" | "failures-multiple" | "break-multiplier" => multiples.boxed(),
        "half-open-timeout" => prop::sample::select(&["\"open\"", "\"close\"", "\"clsoe\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        "initial-state" => {
            prop::sample::select(&["\"closed\"", "\"disabled\"", "\"isolated\"", "\"open\""][..])
                .prop_map(str::to_owned)
                .boxed()
        }
        "slow-calls" | "failures" | "recovery" => {
            prop::sample::select(&["false", "\"off\"", "true"][..])
                .prop_map(str::to_owned)
                .boxed()
        }
        "window-type" => prop::sample::select(&["\"count\"", "\"time\"", "\"sliding\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        "jitter" => prop::sample::select(&["\"equal\"", "\"full\"", "\"none\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        "half-open-rule" => prop::sample::select(&["\"consecutive\"", "\"rates\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        "shadow" | "enabled" | "adaptive" => prop::sample::select(&["true", "false"][..])
            .prop_map(str::to_owned)
            .boxed(),
        "base-config" => prop::sample::select(&["\"a\"", "\"b\"", "\"c\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        _ => counts.boxed(),
    }
}

/// Unique sections and keys (no TOML duplicates), so documents get past the parser.
fn plausible_document() -> impl Strategy<Value = String> {
    let all = keys();
    let keys = &all[..=all.iter().position(|k| *k == "base-config").unwrap()]; // the real keys and base-config
    let section = prop::collection::btree_map(prop::sample::select(keys.to_vec()), Just(()), 0..8)
        .prop_flat_map(|keys| {
            keys.into_keys()
                .map(|k| plausible(k).prop_map(move |v| format!("{k} = {v}")))
                .collect::<Vec<_>>()
        });
    let headers = &[
        "defaults",
        "configs.a",
        "configs.b",
        "instances.x",
        "instances.y",
        "instances.z",
    ][..];
    prop::collection::btree_map(prop::sample::select(headers), section, 0..6).prop_map(|sections| {
        sections
            .into_iter()
            .map(|(header, lines)| format!("[{header}]\n{}\n", lines.join("\n")))
            .collect()
    })
}

fn check(doc: &str) {
    match Config::from_toml(doc) {
        Ok(config) => {
            config.defaults().validate().unwrap();
            for (_, settings) in config.instances() {
                settings.validate().unwrap();
            }
            for name in config.config_names() {
                config.config(name).unwrap().validate().unwrap();
            }
        }
        Err(error) => {
            let message = error.to_string();
            assert!(message.starts_with("CUT-CFG-0"), "{message}");
            assert!(message.len() < 2_000, "{message}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_strings_never_panic(doc in ".{0,200}") {
        check(&doc);
    }

    #[test]
    fn random_documents_never_panic(doc in document()) {
        check(&doc);
    }

    #[test]
    fn plausible_documents_never_panic(doc in plausible_document()) {
        check(&doc);
    }
}

#[test]
fn the_slow_call_floor_is_read_and_merged() {
    let config = Config::from_toml(
        "[defaults]\nslow-calls-multiple = 4\n[instances.a]\nslow-calls-floor = \"250us\"\n[instances.b]\nslow-calls-floor = \"0s\"",
    )
    .unwrap();
    let a = config.instance("a").unwrap().slow_calls().unwrap();
    assert_eq!(
        (a.multiple(), a.floor_duration()),
        (4.0, std::time::Duration::from_micros(250))
    );
    let b = config.instance("b").unwrap().slow_calls().unwrap();
    assert_eq!(b.floor_duration(), std::time::Duration::ZERO);
    let error = load_err("[defaults]\nslow-calls-floor = 5");
    assert_eq!(
        (error.code(), error.key()),
        (ErrorCode::WrongType, "slow-calls-floor")
    );
}

// ---------------------------------------------------------------------------------------------
// The break multiplier, what running out of the maximum wait in half-open does, and the
// initial state.

const CONTROL_DOCUMENT: &str = r#"
[defaults]
break-multiplier = 1.5
half-open-timeout = "close"
initial-state = "isolated"

[configs.off]
enabled = false

[instances.a]
enabled = true

[instances.b]
enabled = false

[instances.c]
initial-state = "CLOSED"
break-multiplier = 1
half-open-timeout = "Open"

[instances.d]
base-config = "off"
initial-state = "closed"

[instances.e]
base-config = "off"
enabled = true
"#;

#[test]
fn the_multiplier_half_open_timeout_and_initial_state_keys_are_read_and_merged() {
    use cutout::{HalfOpenTimeout, InitialState};
    let config = Config::from_toml(CONTROL_DOCUMENT).unwrap();
    let defaults = Settings::builder()
        .break_multiplier(1.5)
        .half_open_timeout(HalfOpenTimeout::Close)
        .initial_state(InitialState::Isolated)
        .build()
        .unwrap();
    assert_eq!(config.defaults(), &defaults);
    let with = |state: InitialState| defaults.to_builder().initial_state(state).build().unwrap();
    assert_eq!(config.config("off"), Some(&with(InitialState::Disabled)));
    // `enabled = true` keeps an isolated start; `false` disables it.
    assert_eq!(config.instance("a"), Some(&with(InitialState::Isolated)));
    assert_eq!(config.instance("b"), Some(&with(InitialState::Disabled)));
    let c = defaults
        .to_builder()
        .break_multiplier(1.0)
        .half_open_timeout(HalfOpenTimeout::Open)
        .initial_state(InitialState::Closed)
        .build()
        .unwrap();
    assert_eq!(config.instance("c"), Some(&c));
    // A later section overrides the earlier one's `enabled = false` either way.
    assert_eq!(config.instance("d"), Some(&with(InitialState::Closed)));
    assert_eq!(config.instance("e"), Some(&with(InitialState::Closed)));
    for key in ["break-multiplier", "half-open-timeout", "initial-state"] {
        assert!(cutout::config::SETTINGS_KEYS.contains(&key), "{key}");
    }
    // Loaded breakers start where their settings say.
    let registry = Registry::new();
    config.register(&registry).unwrap();
    let states: Vec<State> = ["a", "b", "c"]
        .iter()
        .map(|id| registry.get(id).unwrap().state())
        .collect();
    assert_eq!(states, [State::Isolated, State::Disabled, State::Closed]);
}

#[test]
fn the_multiplier_half_open_timeout_and_initial_state_keys_fail_with_their_codes() {
    let error = load_err("[defaults]\nbreak-multiplier = 0.5\n");
    assert_eq!(error.code(), ErrorCode::BreakMultiplierOutOfRange);
    assert_eq!(
        error.to_string(),
        "CUT-CFG-015: invalid break-multiplier = 0.5 in [defaults]: allowed a finite number of \
         at least 1 (1 keeps the break constant)"
    );
    assert_eq!(
        error.settings_error().map(|e| e.key()),
        Some("break-multiplier")
    );
    for bad in ["0", "-2", "nan", "inf", "0.999"] {
        let error = load_err(&format!("[instances.x]\nbreak-multiplier = {bad}\n"));
        assert_eq!(
            (error.code(), error.key(), error.section()),
            (
                ErrorCode::BreakMultiplierOutOfRange,
                "break-multiplier",
                "instances.x"
            ),
            "{bad}"
        );
    }
    let error = load_err("[defaults]\nbreak-multiplier = \"fast\"\n");
    assert_eq!(
        (error.code(), error.key()),
        (ErrorCode::WrongType, "break-multiplier")
    );

    let error = load_err("[defaults]\nhalf-open-timeout = \"closed\"\n");
    assert_eq!(
        (error.code(), error.key(), error.suggestion()),
        (ErrorCode::InvalidValue, "half-open-timeout", Some("close"))
    );
    assert_eq!(
        error.to_string(),
        "CUT-CFG-010: invalid half-open-timeout = \"closed\" in [defaults]: not one of the \
         choices; allowed \"open\" or \"close\"; did you mean \"close\"?"
    );
    let error = load_err("[defaults]\nhalf-open-timeout = false\n");
    assert_eq!(
        (error.code(), error.key()),
        (ErrorCode::WrongType, "half-open-timeout")
    );

    let error = load_err("[configs.new]\ninitial-state = \"half-open\"\n");
    assert_eq!(
        (error.code(), error.key(), error.section()),
        (ErrorCode::InvalidValue, "initial-state", "configs.new")
    );
    assert!(
        error
            .to_string()
            .contains("allowed \"closed\", \"disabled\" or \"isolated\""),
        "{error}"
    );
    let error = load_err("[defaults]\ninitial-state = 1\n");
    assert_eq!(
        (error.code(), error.key()),
        (ErrorCode::WrongType, "initial-state")
    );

    // One section giving both must have them agree.
    let error = load_err("[instances.x]\nenabled = false\ninitial-state = \"isolated\"\n");
    assert_eq!(
        error.to_string(),
        "CUT-CFG-006: invalid initial-state = \"isolated\" in [instances.x]: enabled = false \
         starts the breaker disabled; allowed enabled or initial-state in one section, or both \
         saying the same"
    );
    let error = load_err("[defaults]\nenabled = true\ninitial-state = \"disabled\"\n");
    assert_eq!(
        (error.code(), error.key()),
        (ErrorCode::Contradiction, "initial-state")
    );
    for agreeing in [
        "enabled = false\ninitial-state = \"disabled\"",
        "enabled = true\ninitial-state = \"isolated\"",
        "enabled = true\ninitial-state = \"closed\"",
    ] {
        Config::from_toml(&format!("[defaults]\n{agreeing}\n")).unwrap();
    }
}
