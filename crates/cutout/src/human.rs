//! [`HumanDuration`]: durations as people read them (`1.2s`, `250ms`, `2m 30s`), for messages.

use std::fmt;
use std::time::Duration;

/// Shows a duration the way a person reads it, rounded to the nearest unit that matters:
/// `0s`, `850ns`, `120µs`, `250ms`, `1.2s`, `15s`, `2m 30s`, `1h 5m`. Used by every `Display`
/// of this crate that shows a duration (a refusal's "retry after 1.2s") and by the gateway.
///
/// ```
/// use std::time::Duration;
/// use cutout::HumanDuration;
///
/// assert_eq!(HumanDuration(Duration::from_millis(1_234)).to_string(), "1.2s");
/// assert_eq!(HumanDuration(Duration::from_millis(250)).to_string(), "250ms");
/// assert_eq!(HumanDuration(Duration::from_secs(150)).to_string(), "2m 30s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanDuration(pub Duration);

const MICRO: u128 = 1_000;
const MILLI: u128 = 1_000_000;
const SECOND: u128 = 1_000_000_000;

/// `n / unit`, rounded half up.
fn rounded(n: u128, unit: u128) -> u128 {
    (n + unit / 2) / unit
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.as_nanos();
        match n {
            0 => f.write_str("0s"),
            _ if n < MICRO => write!(f, "{n}ns"),
            _ if rounded(n, MICRO) < 1_000 => write!(f, "{}µs", rounded(n, MICRO)),
            _ if rounded(n, MILLI) < 1_000 => write!(f, "{}ms", rounded(n, MILLI)),
            _ if rounded(n, SECOND / 10) < 600 => {
                let tenths = rounded(n, SECOND / 10);
                match tenths % 10 {
                    0 => write!(f, "{}s", tenths / 10),
                    t => write!(f, "{}.{t}s", tenths / 10),
                }
            }
            _ => {
                let secs = rounded(n, SECOND);
                let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
                let mut parts = Vec::with_capacity(3);
                if h > 0 {
                    parts.push(format!("{h}h"));
                }
                if m > 0 {
                    parts.push(format!("{m}m"));
                }
                if s > 0 {
                    parts.push(format!("{s}s"));
                }
                f.write_str(&parts.join(" "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(nanos: u64) -> String {
        HumanDuration(Duration::from_nanos(nanos)).to_string()
    }

    #[test]
    fn each_range_reads_in_its_unit_and_rounds_at_the_edges() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (999, "999ns"),
            (1_000, "1µs"),
            (999_499, "999µs"),
            (999_500, "1ms"),
            (250_000_000, "250ms"),
            (999_499_999, "999ms"),
            (999_500_000, "1s"),
            (1_234_000_000, "1.2s"),
            (1_250_000_000, "1.3s"),
            (15_000_000_000, "15s"),
            (59_949_999_999, "59.9s"),
            (59_950_000_000, "1m"),
            (150_000_000_000, "2m 30s"),
            (3_900_000_000_000, "1h 5m"),
            (3_601_000_000_000, "1h 1s"),
            (u64::MAX, "5124095h 34m 34s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(show(nanos), text, "{nanos} ns");
        }
    }
}
