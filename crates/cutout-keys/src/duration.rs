//! Duration syntax: humantime strings (`"30s"`, `"2m"`, `"1m 30s"`), never negative.

use std::time::Duration;

/// What a duration key accepts, as error messages say it.
pub const ALLOWED: &str = "a duration such as \"30s\" or \"2m\"";

/// Reads `"30s"`-style text; the error is the detail a message shows (`CUT-CFG-010`).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err("a duration cannot be negative".to_owned());
    }
    humantime::parse_duration(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_humantime_and_refuses_negatives() {
        assert_eq!(parse("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse(" 250ms "), Ok(Duration::from_millis(250)));
        assert_eq!(parse("-5s").unwrap_err(), "a duration cannot be negative");
        assert!(parse("soon").is_err());
    }
}
