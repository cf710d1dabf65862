//! The compile-time checks of `#[breaker(...)]` (cutout-keys' `check`) and the configuration
//! file's readers give every single value the same verdict and code: a value the macro
//! refuses is refused by a file with the same code, and a value a file refuses for itself
//! (not against another key) is refused by the macro with the same code.
#![cfg(feature = "serde")]

use cutout::config::{Config, SETTINGS_KEYS};
use cutout_keys::Value;

/// Codes that judge a value against another key's: a single value cannot show them.
const ACROSS_KEYS: &[&str] = &["CUT-CFG-004", "CUT-CFG-006", "CUT-CFG-012", "CUT-CFG-014"];

fn toml(value: Value<'_>) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Str(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
    }
}

#[test]
fn the_macros_checks_and_the_files_readers_agree_on_every_key() {
    let values = [
        Value::Int(-1),
        Value::Int(0),
        Value::Int(1),
        Value::Int(10),
        Value::Int(70_000),
        Value::Int(2_000_000),
        Value::Float(0.5),
        Value::Float(1.5),
        Value::Float(0.0001),
        Value::Str("50%"),
        Value::Str("150%"),
        Value::Str("0.5"),
        Value::Str("30s"),
        Value::Str("0s"),
        Value::Str("-5s"),
        Value::Str("30x"),
        Value::Str("off"),
        Value::Str("full"),
        Value::Str("ful"),
        Value::Str("count"),
        Value::Str("rates"),
        Value::Str("close"),
        Value::Str("isolated"),
        Value::Bool(true),
        Value::Bool(false),
        // Past 32 bits and the edges of floats (from the declarative review).
        Value::Int(2),
        Value::Int(3),
        Value::Int(100),
        Value::Int(65_535),
        Value::Int(65_536),
        Value::Int(1_000_000),
        Value::Int(1 << 31),
        Value::Int(1 << 32),
        Value::Int(i64::MAX as i128),
        Value::Int(i64::MIN as i128),
        Value::Float(-0.5),
        Value::Float(-0.0),
        Value::Float(1.0),
        Value::Float(2.0),
        Value::Float(10.0),
        Value::Float(1e300),
        Value::Float(0.999),
        Value::Float(f64::INFINITY),
        Value::Float(f64::NAN),
        Value::Str(""),
        Value::Str(" "),
        Value::Str("0%"),
        Value::Str("100%"),
        Value::Str("100.5%"),
        Value::Str("-5%"),
        Value::Str("50 %"),
        Value::Str("1"),
        Value::Str("10"),
        Value::Str("1.5"),
        Value::Str("0"),
        Value::Str("0ms"),
        Value::Str("1ns"),
        Value::Str("1us"),
        Value::Str("1µs"),
        Value::Str("250ms"),
        Value::Str("1m"),
        Value::Str("1h"),
        Value::Str("1d"),
        Value::Str("1m30s"),
        Value::Str("1.5s"),
        Value::Str("30 s"),
        Value::Str("18446744073709551616s"),
        Value::Str("99999999999h"),
        Value::Str("on"),
        Value::Str("none"),
        Value::Str("OFF"),
        Value::Str("Full"),
        Value::Str("time"),
        Value::Str("time 30s"),
        Value::Str("count 10"),
        Value::Str("equal"),
        Value::Str("decorrelated"),
        Value::Str("closed"),
        Value::Str("open"),
        Value::Str("disabled"),
        Value::Str("true"),
        Value::Str("p99"),
        Value::Str("3x"),
        Value::Str("2"),
    ];
    let mut compared = 0;
    for key in SETTINGS_KEYS {
        for value in values {
            // `throttle` needs a time window, `recovery-*` a fraction: give what the key needs
            // from others, so that only the value itself is judged.
            let context = match *key {
                "throttle" => "window-type = \"time\"\n",
                "recovery-initial-fraction" | "recovery-min-duration" | "recovery-max-duration" => {
                    "recovery-fraction = 0.5\n"
                }
                _ => "",
            };
            // TOML spells NaN and infinity its own way.
            let rendered = match value {
                Value::Float(f) if f.is_nan() => "nan".to_owned(),
                Value::Float(f) if f.is_infinite() && f < 0.0 => "-inf".to_owned(),
                Value::Float(f) if f.is_infinite() => "inf".to_owned(),
                _ => toml(value),
            };
            let document = format!("[defaults]\n{context}{key} = {rendered}\n");
            let file = Config::from_toml(&document)
                .err()
                .map(|e| e.code().as_str());
            let macro_ = cutout_keys::check(key, value).err().map(|p| p.code);
            match (macro_, file) {
                (Some(m), f) => assert_eq!(f, Some(m), "{key} = {value:?}: the macro refuses it"),
                (None, Some(f)) => assert!(
                    ACROSS_KEYS.contains(&f),
                    "{key} = {value:?}: the file refuses it with {f}, the macro accepts it"
                ),
                (None, None) => {}
            }
            compared += 1;
        }
    }
    assert_eq!(compared, SETTINGS_KEYS.len() * values.len());
}
