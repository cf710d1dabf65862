//! One pod's report for one breaker: `calls failures slow open unix_ms` in a hash field.

use cutout::{Snapshot, State};

/// What this pod publishes for one breaker, taken from its snapshot.
///
/// Counts are published while the breaker is closed (its trip window's), and for a short
/// grace after it trips from closed: open, it still shows the window that tripped it,
/// frozen, and the other pods should see that evidence even if they read the hash only
/// after this pod has opened (otherwise every pod that opens withdraws its failures, and the
/// last pods of a fleet may never reach the fleet's minimum). After the grace, and in every
/// other state (half-open and recovering show the probes' or the ramp's counts), it
/// publishes zeros and the flag: a pod serving a long break must not hold an outage that is
/// over up for everyone, or every pod that closes after its probes would be re-opened by
/// the fleet until the last one had probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Local {
    /// Whether the breaker is closed (the only state a fleet trip opens).
    pub(crate) closed: bool,
    /// Whether the breaker holds an open slot: open, half-open, recovering or isolated (the
    /// states in which it does not serve every call). Closed and disabled do not.
    pub(crate) open: bool,
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
}

impl Local {
    /// `tripped_lately`: the breaker was seen closed and is now open, within the grace.
    pub(crate) fn of(snapshot: &Snapshot, tripped_lately: bool) -> Local {
        let counts = Local {
            closed: false,
            open: false,
            calls: snapshot.calls,
            // A snapshot never shows more failures or slow calls than calls; clamp anyway,
            // so that what we publish always parses back.
            failures: snapshot.failures.min(snapshot.calls),
            slow: snapshot.slow.min(snapshot.calls),
        };
        match snapshot.state {
            State::Closed => Local {
                closed: true,
                ..counts
            },
            State::Disabled => Local::default(),
            State::Open if tripped_lately => Local {
                open: true,
                ..counts
            },
            _ => Local {
                open: true,
                ..Local::default()
            },
        }
    }

    /// The value this pod writes, without the time (the script appends Redis's own).
    pub(crate) fn encode(&self) -> String {
        format!(
            "{} {} {} {}",
            self.calls,
            self.failures,
            self.slow,
            u8::from(self.open)
        )
    }
}

/// A report read back from Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
    pub(crate) open: bool,
    /// When it was written, on Redis's clock (milliseconds since the Unix epoch).
    pub(crate) at_ms: u64,
}

impl Report {
    /// Parses `calls failures slow open unix_ms`: five unsigned decimal numbers separated by
    /// single spaces, `open` 0 or 1, failures and slow calls no more than calls. Anything else
    /// (another format, a value from another program) is `None`.
    pub(crate) fn parse(value: &[u8]) -> Option<Report> {
        let text = std::str::from_utf8(value).ok()?;
        let mut parts = text.split(' ');
        let mut next = || -> Option<u64> {
            let part = parts.next()?;
            // `u64::from_str` accepts a leading '+'; the format does not.
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let calls = next()?;
        let failures = next()?;
        let slow = next()?;
        let open = match next()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let at_ms = next()?;
        if parts.next().is_some() || failures > calls || slow > calls {
            return None;
        }
        Some(Report {
            calls,
            failures,
            slow,
            open,
            at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_parses_back() {
        let local = Local {
            closed: true,
            open: false,
            calls: 40,
            failures: 12,
            slow: 3,
        };
        let value = format!("{} 1700000000123", local.encode());
        assert_eq!(value, "40 12 3 0 1700000000123");
        assert_eq!(
            Report::parse(value.as_bytes()),
            Some(Report {
                calls: 40,
                failures: 12,
                slow: 3,
                open: false,
                at_ms: 1_700_000_000_123
            })
        );
    }

    #[test]
    fn foreign_values_do_not_parse() {
        for value in [
            "",
            "hello",
            "1 2 3",
            "1 0 0 0",
            "1 0 0 0 5 6",
            "1 2 0 0 5",                    // more failures than calls
            "1 0 2 0 5",                    // more slow calls than calls
            "1 0 0 2 5",                    // open is 0 or 1
            "+1 0 0 0 5",                   // no signs
            "-1 0 0 0 5",                   // no negatives
            "1  0 0 0 5",                   // single spaces
            "1 0 0 0 5\n",                  // nothing after
            "18446744073709551616 0 0 0 5", // overflow
            "{\"calls\": 3}",
        ] {
            assert_eq!(Report::parse(value.as_bytes()), None, "{value:?}");
        }
        assert_eq!(Report::parse(&[0xff, 0xfe]), None);
    }
}
