//! Durations: reading `"30s"` / `"5m"` strings and converting to the simulator's nanoseconds.

use std::time::Duration;

/// Reads a humantime duration (`"250ms"`, `"30s"`, `"5m"`), the syntax cutout's keys use,
/// given for `key`: an error names the key and the text (`timeout = "soon": invalid
/// duration: ...`), so that a scenario with several durations says which one is wrong.
pub fn parse(key: &str, text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{key} = {text:?}: invalid duration: {e}"))
}

/// Reads the duration given for `key` (see [`parse`]) and refuses one longer than `most`,
/// naming the key, the value and the bound: `why` says what the bound keeps in check.
pub fn parse_at_most(key: &str, text: &str, most: Duration, why: &str) -> Result<Duration, String> {
    let d = parse(key, text)?;
    if d > most {
        return Err(format!(
            "{key} = {text:?}: at most {}, {why}",
            humantime::format_duration(most)
        ));
    }
    Ok(d)
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
        assert_eq!(parse("t", "1m 30s").unwrap(), Duration::from_secs(90));
        assert!(parse("t", "30").is_err());
        assert_eq!(nanos(Duration::from_millis(2)), 2_000_000);
        assert_eq!(nanos(Duration::MAX), u64::MAX);
    }

    #[test]
    fn errors_name_the_key() {
        let error = parse("fleet.timeout", "soon").unwrap_err();
        assert!(
            error.starts_with("fleet.timeout = \"soon\": invalid duration"),
            "{error}"
        );
        let hour = Duration::from_secs(3600);
        assert_eq!(parse_at_most("t", "1h", hour, "why").unwrap(), hour);
        let error = parse_at_most("fleet.timeout", "2h", hour, "so").unwrap_err();
        assert_eq!(error, "fleet.timeout = \"2h\": at most 1h, so");
    }
}
