//! `"30s"`-style [`Duration`] fields in a configuration of your own, read exactly as
//! configuration files read theirs: `#[serde(with = "cutout::config::duration")]`, and
//! `#[serde(default, with = "cutout::config::duration::option")]` for an `Option<Duration>`.
//!
//! ```
//! use std::time::Duration;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! #[serde(rename_all = "kebab-case")]
//! struct Client {
//!     #[serde(with = "cutout::config::duration")]
//!     request_timeout: Duration,
//!     // `default`: a missing key is `None` (serde asks for it with any `with` helper).
//!     #[serde(default, with = "cutout::config::duration::option")]
//!     idle_timeout: Option<Duration>,
//!     #[serde(default, with = "cutout::config::duration::option")]
//!     keep_alive: Option<Duration>,
//! }
//!
//! let client: Client = toml::from_str(r#"
//!     request-timeout = "1m 30s"
//!     idle-timeout = "off"
//! "#)?;
//! assert_eq!(client.request_timeout, Duration::from_secs(90));
//! assert_eq!(client.idle_timeout, None);
//! assert_eq!(client.keep_alive, None);
//!
//! let error = toml::from_str::<Client>(r#"request-timeout = "soon""#).err().unwrap();
//! assert!(error.to_string().contains(
//!     r#"CUT-CFG-010: invalid duration "soon": expected number at 0; allowed a duration such as "30s" or "2m""#
//! ));
//! # Ok::<(), toml::de::Error>(())
//! ```
//!
//! What is read, as for the duration keys of a configuration file (the [module
//! docs](super)): a [humantime](https://docs.rs/humantime) string (`"30s"`, `"2m"`,
//! `"1m 30s"`, `"250ms"`; `m` is minutes, `M` months). A bare number is refused
//! (`CUT-CFG-009`: its unit would be a guess), and so is a negative duration (`CUT-CFG-010`).
//! [`option`] also reads `false` or `"off"` as `None` (and a format's null, such as JSON's);
//! `true` is refused. Errors carry their code in the format's error (through
//! [`serde::de::Error::custom`]) and the format says which field.
//!
//! Durations are written back in the same syntax (`"1m 30s"`), which reads back to the same
//! value. Like the rest of `cutout::config`, reading needs a self-describing format (TOML,
//! JSON, YAML).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::Serializer;

use super::error::Alone;
use super::raw::Raw;
use super::value::{At, DURATION};

/// The value as the kind of value it is, for errors: `invalid duration "soon"`.
fn at(value: &Raw) -> At<'_> {
    At {
        section: "",
        key: "duration",
        value,
    }
}

/// Reads a duration: `#[serde(deserialize_with = "cutout::config::duration::deserialize")]`.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let raw = Raw::deserialize(deserializer)?;
    super::value::duration(at(&raw), DURATION)
        .map_err(|error| de::Error::custom(error.alone(Alone::Value)))
}

/// Writes a duration as humantime does (`"1m 30s"`): `#[serde(serialize_with =
/// "cutout::config::duration::serialize")]`.
pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&Humantime(*duration))
}

/// A duration shown as humantime writes it.
struct Humantime(Duration);

impl fmt::Display for Humantime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&humantime::format_duration(self.0), f)
    }
}

impl serde::Serialize for Humantime {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// `Option<Duration>` fields: `#[serde(default, with = "cutout::config::duration::option")]`.
/// `false`, `"off"` and null are `None`; `default` makes a missing key `None` too.
pub mod option {
    use super::{Alone, Deserialize, Deserializer, Duration, Humantime, Raw, Serializer, at, de};

    /// Reads an optional duration.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        if let Raw::Other("null") = raw {
            return Ok(None);
        }
        crate::config::value::optional_duration(at(&raw))
            .map_err(|error| de::Error::custom(error.alone(Alone::Value)))
    }

    /// Writes an optional duration: `None` as the format's none (a TOML field is left out).
    pub fn serialize<S: Serializer>(
        duration: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match duration {
            Some(duration) => serializer.serialize_some(&Humantime(*duration)),
            None => serializer.serialize_none(),
        }
    }
}
