//! Hostile review of the declarative layer (issue #31): the macro's single-value checks (cutout-keys' `check`) and the file's
//! readers, on more values than `config_keys_agree` tries: every disagreement is listed.
#![cfg(feature = "serde")]

use cutout::config::{Config, SETTINGS_KEYS};
use cutout_keys::Value;

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
fn the_macro_and_the_file_agree_on_more_values() {
    let values = [
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
    let mut disagreements = Vec::new();
    for key in SETTINGS_KEYS {
        for value in values {
            let context = match *key {
                "throttle" => "window-type = \"time\"\n",
                "recovery-initial-fraction" | "recovery-min-duration" | "recovery-max-duration" => {
                    "recovery-fraction = 0.5\n"
                }
                _ => "",
            };
            let rendered = toml(value);
            // TOML has no NaN/inf spelled as Rust's Debug, nor integers past i64.
            let rendered = match value {
                Value::Float(f) if f.is_nan() => "nan".to_owned(),
                Value::Float(f) if f.is_infinite() => "inf".to_owned(),
                _ => rendered,
            };
            let document = format!("[defaults]\n{context}{key} = {rendered}\n");
            let file = Config::from_toml(&document)
                .err()
                .map(|e| e.code().as_str());
            let macro_ = cutout_keys::check(key, value).err().map(|p| p.code);
            let agree = match (macro_, file) {
                (Some(m), f) => f == Some(m),
                (None, Some(f)) => ACROSS_KEYS.contains(&f),
                (None, None) => true,
            };
            if !agree {
                disagreements.push(format!(
                    "{key} = {rendered}: macro {macro_:?}, file {file:?}"
                ));
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
