//! The lab's own checked keys: the caller-side sections (`[saturation]`, `[connections]`,
//! `[[phases]]`) read key by key, each mistake refused with a stable `LAB-CFG` code, the key,
//! its line and column, and a did-you-mean for an unknown key. One more code, `LAB-CFG-005`,
//! refuses a compared setting that takes a reference column's label (checked after the file
//! is read, with no place: the name is in the message).
//!
//! | code | what is wrong | example |
//! |---|---|---|
//! | `LAB-CFG-001` | an unknown key in one of these sections | `LAB-CFG-001: unknown key idle-timout in [connections]: did you mean idle-timeout?` |
//! | `LAB-CFG-002` | a value of the wrong type, or one that cannot be read (a duration) | `LAB-CFG-002: connections.setup-median = "3 soon": invalid duration: ...` |
//! | `LAB-CFG-003` | a value out of its range, or two values that contradict each other | `LAB-CFG-003: saturation.delay-p99 = "5ms" is below saturation.delay-median = "10ms"` |
//! | `LAB-CFG-004` | a required key is missing | `LAB-CFG-004: [[phases]] 2 has no duration` |
//! | `LAB-CFG-005` | a compared setting takes the label of a reference column (`no breaker`, `oracle`) | `LAB-CFG-005: [breakers.instances."oracle"]: "oracle" is the label of the oracle, ...` |
//!
//! The error is raised while the TOML is read, so the file's line and column come with it:
//! the key's for an unknown key; the value's for a value of the wrong type, a duration that
//! cannot be read or one past its bound; the section's for the other range checks, for
//! keys that contradict each other and for a missing key. The checks that need the rest of
//! the scenario (`saturation.pods` against `fleet.pods`, the episodes or phase changes a run
//! would hold) come after the file is read, with the code and no place. The other sections keep their own errors
//! (serde's for `[fleet]`, `[dependency]` and `[[incidents]]`, cutout's `CUT-CFG` codes for
//! `[breakers]`).

use std::fmt;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

/// `LAB-CFG-001`: an unknown key.
pub const UNKNOWN_KEY: &str = "LAB-CFG-001";
/// `LAB-CFG-002`: a value of the wrong type or that cannot be read.
pub const BAD_VALUE: &str = "LAB-CFG-002";
/// `LAB-CFG-003`: a value out of range, or values that contradict each other.
pub const OUT_OF_RANGE: &str = "LAB-CFG-003";
/// `LAB-CFG-004`: a required key is missing.
pub const MISSING_KEY: &str = "LAB-CFG-004";
/// `LAB-CFG-005`: a compared setting is named after a reference column: `no breaker` (the
/// fleet without breakers) or `oracle` ([`crate::oracle`]).
pub const RESERVED_NAME: &str = "LAB-CFG-005";

/// The edit distance between `a` and `b` (characters; `_` and `-` count as the same, as a
/// key written with underscores is the commonest slip).
fn levenshtein(a: &str, b: &str) -> usize {
    let norm = |c: char| if c == '_' { '-' } else { c };
    let a: Vec<char> = a.chars().map(norm).collect();
    let b: Vec<char> = b.chars().map(norm).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The known key nearest to `key`, when one is within a third of its length (at least 1).
pub fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let most = (key.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (levenshtein(key, k), *k))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// An error of code `code`: `"<code>: <message>"`.
pub fn error<E: de::Error>(code: &str, message: impl fmt::Display) -> E {
    E::custom(format_args!("{code}: {message}"))
}

/// Reads one key of `section` (`"[connections]"`): one of `known`, or an `LAB-CFG-001` error
/// naming the nearest known key (or listing them all when none is near).
pub struct Key<'a> {
    /// The section, as the file writes it (`"[connections]"`, `"[[phases]] 2"`).
    pub section: &'a str,
    /// Its keys.
    pub known: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = &'static str;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<&'static str, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for Key<'_> {
    type Value = &'static str;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a key of {}", self.section)
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<&'static str, E> {
        if let Some(known) = self.known.iter().find(|k| **k == key) {
            return Ok(known);
        }
        let hint = match nearest(key, self.known) {
            Some(near) => format!("did you mean {near}?"),
            None => format!("the keys are {}", self.known.join(", ")),
        };
        Err(error(
            UNKNOWN_KEY,
            format_args!("unknown key {key} in {}: {hint}", self.section),
        ))
    }
}

/// A value read as `T`, or an `LAB-CFG-002` error naming `key` (its full name,
/// `connections.setup-median`) and the type it needs.
pub struct Typed<'a, T> {
    /// The key's full name.
    pub key: &'a str,
    /// What the key takes, for the error (`"a duration such as \"3ms\""`).
    pub takes: &'a str,
    marker: std::marker::PhantomData<T>,
}

impl<'a, T> Typed<'a, T> {
    /// Reads `key`'s value as `T`; `takes` says what it takes.
    pub fn new(key: &'a str, takes: &'a str) -> Typed<'a, T> {
        Typed {
            key,
            takes,
            marker: std::marker::PhantomData,
        }
    }
}

impl<'de, T: TryFrom<TomlValue>> DeserializeSeed<'de> for Typed<'_, T> {
    type Value = T;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        let value: toml::Value = de::Deserialize::deserialize(deserializer)?;
        let shown = value.to_string();
        T::try_from(TomlValue(value)).map_err(|_| {
            error(
                BAD_VALUE,
                format_args!("{} = {shown}: needs {}", self.key, self.takes),
            )
        })
    }
}

/// A TOML value on its way to a key's type (see [`Typed`]).
#[derive(Debug)]
pub struct TomlValue(toml::Value);

impl TryFrom<TomlValue> for f64 {
    type Error = ();
    fn try_from(v: TomlValue) -> Result<f64, ()> {
        match v.0 {
            toml::Value::Float(x) => Ok(x),
            toml::Value::Integer(n) => Ok(n as f64),
            _ => Err(()),
        }
    }
}

impl TryFrom<TomlValue> for u32 {
    type Error = ();
    fn try_from(v: TomlValue) -> Result<u32, ()> {
        match v.0 {
            toml::Value::Integer(n) => u32::try_from(n).map_err(|_| ()),
            _ => Err(()),
        }
    }
}

impl TryFrom<TomlValue> for String {
    type Error = ();
    fn try_from(v: TomlValue) -> Result<String, ()> {
        match v.0 {
            toml::Value::String(s) => Ok(s),
            _ => Err(()),
        }
    }
}

/// Reads `key`'s value as a duration string (`"3ms"`), refused with `LAB-CFG-002` when it is
/// not one, or with `LAB-CFG-003` when it is longer than `most`, at the value's line and
/// column.
pub fn duration<'de, A: MapAccess<'de>>(
    map: &mut A,
    key: &str,
    most: Duration,
) -> Result<Duration, A::Error> {
    map.next_value_seed(DurationSeed { key, most })
}

/// See [`duration`]: the checks run inside the value's deserialization, so that the error
/// carries the value's place in the file.
struct DurationSeed<'a> {
    key: &'a str,
    most: Duration,
}

impl<'de> DeserializeSeed<'de> for DurationSeed<'_> {
    type Value = Duration;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Duration, D::Error> {
        let key = self.key;
        let text: String =
            Typed::new(key, "a duration such as \"3ms\"").deserialize(deserializer)?;
        let d = humantime::parse_duration(&text).map_err(|e| {
            error(
                BAD_VALUE,
                format_args!("{key} = {text:?}: invalid duration: {e}"),
            )
        })?;
        if d > self.most {
            return Err(error(
                OUT_OF_RANGE,
                format_args!(
                    "{key} = {text:?}: at most {}",
                    humantime::format_duration(self.most)
                ),
            ));
        }
        Ok(d)
    }
}

/// A log-normal distribution of durations given by its median and 99th percentile, as
/// `[dependency]`'s latency is: the two keys' values, checked (the median above 0, the p99
/// not below it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogNormal {
    /// The median.
    pub median: Duration,
    /// σ of the underlying normal: ln(p99 / median) / z₀.₉₉ (0 when they are equal: every draw
    /// is the median).
    pub sigma: f64,
}

impl LogNormal {
    /// The z-score of a standard normal's 99th percentile.
    const Z99: f64 = 2.326_347_874;

    /// The distribution of this median and p99, or an error naming the keys (`LAB-CFG-003`).
    pub fn new<E: de::Error>(
        median: (&str, Duration),
        p99: (&str, Duration),
    ) -> Result<LogNormal, E> {
        if median.1.is_zero() {
            return Err(error(
                OUT_OF_RANGE,
                format_args!("{} must be above 0", median.0),
            ));
        }
        if p99.1 < median.1 {
            return Err(error(
                OUT_OF_RANGE,
                format_args!(
                    "{} = {:?} is below {} = {:?}: a 99th percentile is at least the median",
                    p99.0, p99.1, median.0, median.1
                ),
            ));
        }
        Ok(LogNormal {
            median: median.1,
            sigma: (p99.1.as_secs_f64() / median.1.as_secs_f64()).ln() / Self::Z99,
        })
    }

    /// One draw, in nanoseconds, from two uniforms of `rng` (Box–Muller; always two, so
    /// the stream's later draws do not depend on the value).
    pub fn draw(&self, rng: &mut fastrand::Rng) -> u64 {
        let u1 = 1.0 - rng.f64(); // (0, 1]
        let u2 = rng.f64();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let nanos = self.median.as_nanos() as f64 * (self.sigma * z).exp();
        nanos.round().min(u64::MAX as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_key_is_suggested() {
        let known = ["idle-timeout", "setup-median", "setup-p99"];
        assert_eq!(nearest("idle-timout", &known), Some("idle-timeout"));
        assert_eq!(nearest("idle_timeout", &known), Some("idle-timeout"));
        assert_eq!(nearest("colour", &known), None);
    }

    #[test]
    fn log_normal_draws_keep_their_median_and_p99() {
        let d = LogNormal::new::<toml::de::Error>(
            ("m", Duration::from_millis(10)),
            ("p", Duration::from_millis(40)),
        )
        .unwrap();
        let mut rng = fastrand::Rng::with_seed(9);
        let mut v: Vec<u64> = (0..200_000).map(|_| d.draw(&mut rng)).collect();
        v.sort_unstable();
        let median = v[100_000] as f64 / 1e6;
        let p99 = v[198_000] as f64 / 1e6;
        assert!((median / 10.0 - 1.0).abs() < 0.02, "{median}");
        assert!((p99 / 40.0 - 1.0).abs() < 0.03, "{p99}");
        let fixed = LogNormal::new::<toml::de::Error>(
            ("m", Duration::from_millis(3)),
            ("p", Duration::from_millis(3)),
        )
        .unwrap();
        assert_eq!(fixed.draw(&mut rng), 3_000_000);
    }
}
