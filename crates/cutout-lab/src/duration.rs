//! Durations: reading `"30s"` / `"5m"` strings and converting to the simulator's nanoseconds.

use std::time::Duration;

/// Reads a humantime duration (`"250ms"`, `"30s"`, `"5m"`), the syntax cutout's keys use.
pub fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

/// Whole nanoseconds, saturating at `u64::MAX`.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_human_durations() {
        assert_eq!(parse("1m 30s").unwrap(), Duration::from_secs(90));
        assert!(parse("30").is_err());
        assert_eq!(nanos(Duration::from_millis(2)), 2_000_000);
        assert_eq!(nanos(Duration::MAX), u64::MAX);
    }
}
