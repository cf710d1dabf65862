//! [`FleetBuilder`]: the URL, the pod's id, the prefix and the timings, checked at build.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{FleetError, Kind};
use crate::fleet::{Fleet, Shared};

/// The timings and names a fleet runs with, once validated.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) pod: String,
    pub(crate) prefix: String,
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) staleness: Duration,
    pub(crate) retention: Duration,
    pub(crate) max_backoff: Duration,
    /// Where Redis is, for logs: `host:port` or a socket path, never the password.
    pub(crate) addr: String,
}

/// Builds a [`Fleet`]. Every setting has a default; [`FleetBuilder::build`] validates them and
/// the URL, and starts the background task. It does no I/O: an unreachable Redis or one that
/// refuses the password is not an error of the build (the task logs a warning and reports it
/// in [`Fleet::health`], and the breakers keep deciding locally).
///
/// ```
/// use std::time::Duration;
/// use cutout_fleet::Fleet;
///
/// // Not a URL: a clear error at build.
/// let error = Fleet::builder("localhost:6379").build().unwrap_err();
/// assert!(error.is_url(), "{error}");
///
/// // A setting out of range: named, with the range.
/// let error = Fleet::builder("redis://127.0.0.1:6379")
///     .interval(Duration::ZERO)
///     .build()
///     .unwrap_err();
/// assert!(error.is_invalid() && error.to_string().contains("interval"), "{error}");
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct FleetBuilder {
    url: String,
    pod: Option<String>,
    prefix: String,
    interval: Duration,
    timeout: Duration,
    connect_timeout: Duration,
    staleness: Option<Duration>,
    retention: Duration,
    max_backoff: Duration,
    runtime: Option<tokio::runtime::Handle>,
}

const MIN_INTERVAL: Duration = Duration::from_millis(10);
const MAX_INTERVAL: Duration = Duration::from_secs(60);
const MAX_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_STALENESS: Duration = Duration::from_secs(3600);
const MAX_RETENTION: Duration = Duration::from_secs(86_400);
const MAX_BACKOFF: Duration = Duration::from_secs(600);
const MAX_NAME: usize = 256;

impl FleetBuilder {
    pub(crate) fn new(url: String) -> FleetBuilder {
        FleetBuilder {
            url,
            pod: None,
            prefix: "cutout:fleet".to_owned(),
            interval: Duration::from_millis(250),
            timeout: Duration::from_millis(200),
            connect_timeout: Duration::from_millis(200),
            staleness: None,
            retention: Duration::from_secs(60),
            max_backoff: Duration::from_secs(5),
            runtime: None,
        }
    }

    /// This pod's id: the `pod` of its logs and the `pod` label of the metrics (1 to 256
    /// bytes, no whitespace or control characters; Redis never sees it: each pod's report is
    /// a share of the breaker's ring, and two pods of one id count as two). Default: the
    /// `HOSTNAME` environment variable (a Kubernetes pod's name) when it is a valid id, else
    /// `pod-` followed by 16 random hex digits.
    pub fn pod(mut self, pod: impl Into<String>) -> Self {
        self.pod = Some(pod.into());
        self
    }

    /// The prefix of the keys: a breaker's ring is `{<prefix>:<breaker id>}`, escaped so that
    /// no two (prefix, id) pairs meet ([`Fleet::key`]; default `cutout:fleet`; 1 to 256
    /// bytes, no whitespace or control characters). Services sharing a Redis with breakers
    /// of the same ids but different dependencies need different prefixes.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How often the task publishes and reads (default 250 ms; 10 ms to 60 s). One round
    /// trip per tick for all watched breakers.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The longest a round may take before it counts as failed and the connection is
    /// replaced (default 200 ms; 1 ms to 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a connect may take, the handshake (`AUTH`) included (default 200 ms; 1 ms
    /// to 60 s). Loading the script after it is bounded by [`timeout`](Self::timeout).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How old another pod's report may be, on Redis's clock, and still count (default
    /// 3 × the interval + 250 ms: 1 s for the default interval; from one interval to 1 h):
    /// the ring's window, 4 buckets of a quarter of it, so that a report counts for between ¾
    /// of the bound and all of it after its pod's last round (keep the interval under ¾ of it
    /// for a live pod to count all along). Also how long a view stays usable by the open
    /// gate after the round that read it.
    pub fn staleness(mut self, staleness: Duration) -> Self {
        self.staleness = Some(staleness);
        self
    }

    /// How long a breaker's ring outlives the last round of its last pod (its `PEXPIRE`;
    /// default 60 s; from the staleness bound to one day).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The longest wait between two connect attempts while Redis is unreachable (default
    /// 5 s; from one interval to 10 min). The wait starts at one interval and doubles after
    /// each failed attempt, with equal jitter.
    pub fn max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }

    /// The runtime the task is spawned on (default: the current one, as
    /// `tokio::runtime::Handle::current` finds it).
    pub fn runtime(mut self, handle: tokio::runtime::Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Validates the URL and the settings and starts the task. Does no I/O.
    ///
    /// Errors: a malformed URL or one this build cannot use ([`FleetError::is_url`]: only
    /// `redis://` and `unix://` / `redis+unix://`, TLS is not compiled in), a setting out of
    /// range ([`FleetError::is_invalid`]), no runtime ([`FleetError::is_no_runtime`]).
    pub fn build(self) -> Result<Fleet, FleetError> {
        let client = redis::Client::open(self.url.as_str()).map_err(|error| {
            FleetError::new(Kind::Url, format!("{}: {error}", redact(&self.url)))
        })?;
        let addr = client.get_connection_info().addr().to_string();
        let pod = match self.pod {
            Some(pod) => {
                check_name("pod", &pod)?;
                pod
            }
            None => default_pod(),
        };
        check_name("prefix", &self.prefix)?;
        check_range("interval", self.interval, MIN_INTERVAL, MAX_INTERVAL)?;
        check_range(
            "timeout",
            self.timeout,
            Duration::from_millis(1),
            MAX_TIMEOUT,
        )?;
        check_range(
            "connect_timeout",
            self.connect_timeout,
            Duration::from_millis(1),
            MAX_TIMEOUT,
        )?;
        let staleness = self.staleness.unwrap_or(
            self.interval
                .saturating_mul(3)
                .saturating_add(Duration::from_millis(250)),
        );
        check_range("staleness", staleness, self.interval, MAX_STALENESS)?;
        check_range("retention", self.retention, staleness, MAX_RETENTION)?;
        check_range("max_backoff", self.max_backoff, self.interval, MAX_BACKOFF)?;
        let runtime = match self.runtime {
            Some(handle) => handle,
            None => tokio::runtime::Handle::try_current().map_err(|_| {
                FleetError::new(
                    Kind::NoRuntime,
                    "Fleet::build needs a tokio runtime: call it inside one, or pass \
                     FleetBuilder::runtime(handle)",
                )
            })?,
        };
        let config = Config {
            pod,
            prefix: self.prefix,
            interval: self.interval,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            staleness,
            retention: self.retention,
            max_backoff: self.max_backoff,
            addr,
        };
        let shared = Arc::new(Shared::new(config));
        let task = runtime.spawn(crate::task::run(Arc::clone(&shared), client));
        Ok(Fleet::new(shared, task))
    }
}

/// The URL without its password, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

fn check_name(name: &str, value: &str) -> Result<(), FleetError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_NAME
        && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(FleetError::new(
            Kind::Invalid,
            format!(
                "{name} = {value:?}, allowed 1 to {MAX_NAME} bytes without whitespace or \
                 control characters"
            ),
        ))
    }
}

fn check_range(
    name: &str,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), FleetError> {
    if value >= min && value <= max {
        Ok(())
    } else {
        Err(FleetError::new(
            Kind::Invalid,
            format!("{name} = {value:?}, allowed {min:?}..={max:?}"),
        ))
    }
}

fn default_pod() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|host| check_name("pod", host).is_ok())
        .unwrap_or_else(|| format!("pod-{:016x}", fastrand::u64(..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("pod", "web-7f9c-abcde").is_ok());
        for bad in ["", "a b", "tab\there", "new\nline", &"x".repeat(257)] {
            assert!(check_name("pod", bad).unwrap_err().is_invalid());
        }
    }
}
