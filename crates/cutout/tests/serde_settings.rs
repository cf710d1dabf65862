//! `Settings` and `config::duration` inside a configuration of the user's own: the keys,
//! codes and messages of configuration files (feature `serde`).
#![cfg(feature = "serde")]

use std::time::Duration;

use cutout::config::Config;
use cutout::{
    HalfOpenRule, HalfOpenTimeout, InitialState, Jitter, Recovery, Settings, SlowCalls, TripWindow,
};
use serde::{Deserialize, Serialize};

const SEC: Duration = Duration::from_secs(1);

/// A user's configuration: fields of its own beside a breaker table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Upstream {
    url: String,
    #[serde(with = "cutout::config::duration")]
    timeout: Duration,
    breaker: Settings,
}

/// Every key of a settings table but `base-config`, set away from its default.
const TABLE: &str = r#"
consecutive-failures = 3
failure-ratio = "40%"
minimum-calls = 8
window-size = 50
slow-call-threshold = "2s"
slow-call-ratio = 0.8
break-duration = "20s"
max-break-duration = "10m"
break-multiplier = 1.5
jitter = "full"
half-open-probes = 3
probe-successes = 2
half-open-rule = "rates"
max-wait-in-half-open = "off"
half-open-timeout = "close"
shadow = true
initial-state = "isolated"
adaptive = true
slow-calls-multiple = 4
slow-calls-quantile = 0.25
slow-calls-floor = "5ms"
latency-baseline-window = "10m"
failures = "off"
recovery-fraction = "50%"
recovery-initial-fraction = 0.2
recovery-min-duration = "2s"
recovery-max-duration = "1m"
"#;

fn expected() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(3))
        .failure_ratio(Some(0.4))
        .minimum_calls(8)
        .window(TripWindow::Count(50))
        .slow_call_threshold(Some(2 * SEC))
        .slow_call_ratio(0.8)
        .break_duration(20 * SEC)
        .max_break_duration(600 * SEC)
        .break_multiplier(1.5)
        .jitter(Jitter::Full)
        .half_open_probes(3)
        .probe_successes(2)
        .half_open_rule(HalfOpenRule::Rates)
        .max_wait_in_half_open(None)
        .half_open_timeout(HalfOpenTimeout::Close)
        .shadow(true)
        .initial_state(InitialState::Isolated)
        .adaptive(true)
        .slow_calls(Some(
            SlowCalls::above(4.0)
                .quantile(0.25)
                .floor(Duration::from_millis(5))
                .window(600 * SEC),
        ))
        .failures(None)
        .recovery(Some(
            Recovery::over(0.5)
                .initial_fraction(0.2)
                .min_duration(2 * SEC)
                .max_duration(60 * SEC),
        ))
        .build()
        .unwrap()
}

fn upstream(breaker: &str) -> String {
    format!("url = \"http://inventory:8080\"\ntimeout = \"2s\"\n\n[breaker]\n{breaker}")
}

/// The message of a user's TOML document, and of the same table as a config file's
/// `[defaults]`.
fn both_errors(breaker: &str) -> (String, String) {
    let user = toml::from_str::<Upstream>(&upstream(breaker))
        .expect_err("the user's document must be refused")
        .to_string();
    let file = Config::from_toml(&format!("[defaults]\n{breaker}"))
        .expect_err("the configuration file must be refused")
        .to_string();
    (user, file)
}

/// The message a config file gives, without its section: what a breaker table says.
fn without_section(file: &str) -> String {
    file.replacen(" in [defaults]", "", 1)
}

#[test]
fn a_breaker_table_reads_every_key_as_a_config_file_does() {
    let upstream: Upstream = toml::from_str(&upstream(TABLE)).unwrap();
    assert_eq!(upstream.url, "http://inventory:8080");
    assert_eq!(upstream.timeout, 2 * SEC);
    assert_eq!(upstream.breaker, expected());

    let file = Config::from_toml(&format!("[defaults]\n{TABLE}")).unwrap();
    assert_eq!(&upstream.breaker, file.defaults());
}

#[test]
fn a_breaker_table_reads_from_json_too() {
    let json = r#"{
        "url": "http://inventory:8080",
        "timeout": "2s",
        "breaker": {"failure-ratio": 0.5, "window-duration": "1m", "jitter": "none"}
    }"#;
    let upstream: Upstream = serde_json::from_str(json).unwrap();
    let settings = Settings::builder()
        .failure_ratio(Some(0.5))
        .window(TripWindow::Time(60 * SEC))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    assert_eq!(upstream.breaker, settings);
}

#[test]
fn an_empty_breaker_table_is_the_built_in_defaults() {
    let upstream: Upstream = toml::from_str(&upstream("")).unwrap();
    assert_eq!(upstream.breaker, Settings::default());
}

#[test]
fn an_unknown_key_has_the_config_files_code_and_suggestion() {
    let (user, file) = both_errors("failure_ratio = 0.5\n");
    assert_eq!(
        file,
        "CUT-CFG-008: unknown key failure_ratio = 0.5 in [defaults]: did you mean failure-ratio?"
    );
    assert!(
        user.contains("CUT-CFG-008: unknown key failure_ratio = 0.5: did you mean failure-ratio?"),
        "{user}"
    );
    assert!(user.contains(&without_section(&file)), "{user}");
    // The format says where: the line of the breaker table in the user's document.
    assert!(user.contains("line 4"), "{user}");
}

#[test]
fn a_bad_value_has_the_config_files_code_naming_the_key() {
    let cases = [
        ("failure-ratio = \"150%\"\n", "CUT-CFG-001", "failure-ratio"),
        ("minimum-calls = -3\n", "CUT-CFG-002", "minimum-calls"),
        ("break-duration = \"0s\"\n", "CUT-CFG-003", "break-duration"),
        (
            "break-duration = \"5m\"\nmax-break-duration = \"1m\"\n",
            "CUT-CFG-004",
            "max-break-duration",
        ),
        ("window-size = 2000000\n", "CUT-CFG-005", "window-size"),
        (
            "window-type = \"count\"\nwindow-duration = \"1m\"\n",
            "CUT-CFG-006",
            "window-duration",
        ),
        ("minimum-calls = \"ten\"\n", "CUT-CFG-009", "minimum-calls"),
        (
            "break-duration = \"-5s\"\n",
            "CUT-CFG-010",
            "break-duration",
        ),
        ("jitter = \"ful\"\n", "CUT-CFG-010", "jitter"),
        (
            "latency-baseline-window = \"1m\"\n",
            "CUT-CFG-012",
            "latency-baseline-window",
        ),
        (
            "failures-multiple = 1\n",
            "CUT-CFG-013",
            "failures-multiple",
        ),
        (
            "recovery-fraction = 0.5\nrecovery-min-duration = \"10s\"\nrecovery-max-duration = \"5s\"\n",
            "CUT-CFG-014",
            "recovery-max-duration",
        ),
        (
            "break-multiplier = 0.5\n",
            "CUT-CFG-015",
            "break-multiplier",
        ),
    ];
    for (table, code, key) in cases {
        let (user, file) = both_errors(table);
        assert!(file.starts_with(&format!("{code}: ")), "{file}");
        assert!(user.contains(&format!("{code}: ")), "{table}: {user}");
        assert!(user.contains(&format!(" {key} ")), "{table}: {user}");
        assert!(
            user.contains(&without_section(&file)),
            "{table}:\n{user}\n{file}"
        );
        assert!(!user.contains("[defaults]"), "{user}");
    }
}

#[test]
fn a_bad_value_reads_as_documented() {
    let (user, _) = both_errors("failure-ratio = \"150%\"\n");
    assert!(
        user.contains("CUT-CFG-001: invalid failure-ratio = \"150%\": allowed a ratio in (0, 1]"),
        "{user}"
    );
    let (user, _) = both_errors("jitter = \"ful\"\n");
    assert!(user.contains("did you mean \"full\"?"), "{user}");
}

#[test]
fn a_breaker_table_takes_no_base_config_and_must_be_a_table() {
    let (user, _) = both_errors("base-config = \"strict\"\n");
    assert!(
        user.contains("CUT-CFG-008: unknown key base-config = \"strict\""),
        "{user}"
    );
    let not_a_table =
        serde_json::from_str::<Upstream>(r#"{"url": "u", "timeout": "1s", "breaker": 3}"#)
            .unwrap_err()
            .to_string();
    assert!(
        not_a_table.starts_with(
            "CUT-CFG-009: wrong type for settings = 3: found an integer; allowed a table of settings keys"
        ),
        "{not_a_table}"
    );
}

#[test]
fn a_missing_key_needed_by_another_is_named() {
    let (user, _) = both_errors("window-type = \"count\"\n");
    assert!(
        user.contains(
            "CUT-CFG-006: invalid window-size (not set): window-type = \"count\" needs a window-size"
        ),
        "{user}"
    );
}

#[derive(Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
struct Timeouts {
    #[serde(with = "cutout::config::duration")]
    request: Duration,
    #[serde(default, with = "cutout::config::duration::option")]
    idle: Option<Duration>,
}

#[test]
fn the_duration_helper_reads_humantime() {
    let t: Timeouts = toml::from_str("request = \"30s\"\nidle = \"1m 30s\"").unwrap();
    assert_eq!(
        t,
        Timeouts {
            request: 30 * SEC,
            idle: Some(90 * SEC)
        }
    );
    let t: Timeouts = toml::from_str("request = \"250ms\"").unwrap();
    assert_eq!(t.request, Duration::from_millis(250));
    assert_eq!(t.idle, None);
    for off in ["idle = false", "idle = \"off\""] {
        let t: Timeouts = toml::from_str(&format!("request = \"1s\"\n{off}")).unwrap();
        assert_eq!(t.idle, None, "{off}");
    }
    let t: Timeouts = serde_json::from_str(r#"{"request": "2m", "idle": null}"#).unwrap();
    assert_eq!((t.request, t.idle), (120 * SEC, None));
}

#[test]
fn the_duration_helper_refuses_what_is_not_a_duration_clearly() {
    let soon = toml::from_str::<Timeouts>("request = \"soon\"")
        .unwrap_err()
        .to_string();
    assert!(
        soon.contains(
            "CUT-CFG-010: invalid duration \"soon\": expected number at 0; allowed a duration such as \"30s\" or \"2m\""
        ),
        "{soon}"
    );
    let json = serde_json::from_str::<Timeouts>(r#"{"request": "soon"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        json.starts_with("CUT-CFG-010: invalid duration \"soon\""),
        "{json}"
    );
    assert!(json.contains("line 1"), "the format says where: {json}");

    let bare = toml::from_str::<Timeouts>("request = 30")
        .unwrap_err()
        .to_string();
    assert!(
        bare.contains("CUT-CFG-009: wrong type for duration 30: a bare number has no unit"),
        "{bare}"
    );
    let negative = toml::from_str::<Timeouts>("request = \"-5s\"")
        .unwrap_err()
        .to_string();
    assert!(
        negative.contains("CUT-CFG-010: invalid duration \"-5s\": a duration cannot be negative"),
        "{negative}"
    );
    let on = toml::from_str::<Timeouts>("request = \"1s\"\nidle = true")
        .unwrap_err()
        .to_string();
    assert!(on.contains("CUT-CFG-010: invalid duration true"), "{on}");
}

#[test]
fn durations_are_written_back_in_the_syntax_they_are_read_in() {
    let t = Timeouts {
        request: Duration::from_millis(90_250),
        idle: None,
    };
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(json, r#"{"request":"1m 30s 250ms","idle":null}"#);
    assert_eq!(serde_json::from_str::<Timeouts>(&json).unwrap(), t);
    let some = Timeouts {
        request: Duration::ZERO,
        idle: Some(SEC),
    };
    let json = serde_json::to_string(&some).unwrap();
    assert_eq!(json, r#"{"request":"0s","idle":"1s"}"#);
    assert_eq!(serde_json::from_str::<Timeouts>(&json).unwrap(), some);
}
