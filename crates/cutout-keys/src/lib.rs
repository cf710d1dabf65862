//! cutout's configuration keys, shared by its configuration files (`cutout::config`) and its
//! attribute macros (`cutout-macros`), so both accept the same keys, read values the same way
//! and reject them with the same codes and "did you mean".
//!
//! A separate crate because the macros cannot depend on `cutout` (which re-exports them: cargo
//! forbids the cycle). What lives here is what needs no `Settings`: the key names, each key's
//! kind of value, the single-key ranges, duration syntax, the code strings and the nearest-name
//! search. Checks across keys (`max-break-duration` against `break-duration`, the baseline
//! windows against the trip window) need the merged settings and stay in `cutout`.

#![forbid(unsafe_code)]

pub mod code;
pub mod duration;
pub mod key;
pub mod range;
pub mod suggest;

pub use key::{
    Check, Kind, Problem, Range, SETTINGS_KEYS, SLOW_CALL_KEYS, SLOW_CALL_RULE_KEYS, Value, check,
    kind,
};
