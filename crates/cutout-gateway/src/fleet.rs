//! `[fleet]`: the gateway's replicas share their cluster breakers' signals through Redis (cutout-fleet), read from the config and started from it.
//!
//! ```toml
//! [fleet]
//! redis = "rediss://gateway:s3cret@redis.internal:6380"   # required
//! pod = "gateway-7f9c"                                   # default: $HOSTNAME
//! interval = "250ms"                                     # 10ms to 10s
//! prefix = "cutout:fleet"
//! tls-ca-file = "/etc/ssl/redis-ca.pem"                  # rediss:// with a private CA
//! ```
//!
//! Every cluster breaker is watched with cutout-fleet's default rule (the breaker's own
//! minimum calls and failure ratio, judged on the fleet's window): a replica's cluster opens
//! on its own calls or on the fleet's, whichever fires first, and probes on its own. Host
//! breakers stay local (each replica's view of a host is its own). Redis is a hint: down, it
//! changes the `fleet` field of `/healthz` and of the status page, and nothing else (every
//! breaker judges its own calls; the warning is logged once, then at most once a minute, by
//! cutout-fleet).
//!
//! [`FleetConfig::parse`] checks the table when the file is read (cutout-fleet's own codes,
//! `FLEET-URL-*` and `FLEET-CFG-*`, naming the key), and [`GatewayFleet::start`] starts the
//! fleet for a set of cluster breakers: the one step a reload repeats for a new
//! configuration.

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use cutout::Breaker;
use cutout_fleet::{Fleet, FleetBuilder, FleetError};
use serde_json::{Value, json};

use crate::error::ConfigError;

/// The shortest `interval` the gateway takes.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest `interval` the gateway takes (a fleet's reports must stay fresh for three of
/// them within cutout-fleet's default retention).
const MAX_INTERVAL: Duration = Duration::from_secs(10);
/// cutout-fleet's default interval.
const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);

/// The `[fleet]` table, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetConfig {
    /// `redis`: the Redis URL (`redis://`, `rediss://`, `redis+unix://`; `user:password@`
    /// for an ACL user).
    pub redis: String,
    /// `pod`: this replica's id in logs and metrics (default: cutout-fleet's, `$HOSTNAME`).
    pub pod: Option<String>,
    /// `interval`: how often the replica publishes and reads (default 250 ms).
    pub interval: Duration,
    /// `prefix`: the prefix of the Redis keys (default cutout-fleet's, `cutout:fleet`).
    pub prefix: Option<String>,
    /// `tls-ca-file`: the CA a `rediss://` server's certificate must be signed by, instead of
    /// the system's roots.
    pub tls_ca_file: Option<PathBuf>,
}

impl FleetConfig {
    /// Reads and checks the `[fleet]` table: unknown keys (`GW-CFG-002`), wrong types
    /// (`GW-CFG-003`), a missing `redis` (`GW-CFG-005`), an interval out of range
    /// (`GW-CFG-009`), and what cutout-fleet refuses with its own code (`FLEET-URL-*` for the
    /// URL, `FLEET-CFG-*` for the pod, the prefix, the CA file), each naming its key. Starts
    /// nothing.
    pub fn parse(value: toml::Value) -> Result<FleetConfig, ConfigError> {
        let toml::Value::Table(table) = value else {
            return Err(crate::config::wrong_type("fleet", &value, "a table"));
        };
        let mut redis = None;
        let mut config = FleetConfig {
            redis: String::new(),
            pod: None,
            interval: DEFAULT_INTERVAL,
            prefix: None,
            tls_ca_file: None,
        };
        for (key, value) in &table {
            let path = format!("fleet.{key}");
            let text = || {
                value
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| crate::config::wrong_type(&path, value, "a string"))
            };
            match key.as_str() {
                "redis" => redis = Some(text()?),
                "pod" => config.pod = Some(text()?),
                "prefix" => config.prefix = Some(text()?),
                "tls-ca-file" => config.tls_ca_file = Some(PathBuf::from(text()?)),
                "interval" => {
                    let interval = crate::config::duration(&path, value)?;
                    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&interval) {
                        return Err(ConfigError::new(
                            "GW-CFG-009",
                            &path,
                            &crate::config::show(value),
                            "out of range; allowed 10ms to 10s",
                        ));
                    }
                    config.interval = interval;
                }
                _ => {
                    return Err(ConfigError::new(
                        "GW-CFG-002",
                        &path,
                        &crate::config::show(value),
                        "unknown key; allowed redis, pod, interval, prefix, tls-ca-file",
                    ));
                }
            }
        }
        let Some(redis) = redis else {
            return Err(ConfigError::new(
                "GW-CFG-005",
                "fleet.redis",
                "",
                "[fleet] needs the Redis URL, such as redis = \"redis://127.0.0.1:6379\"",
            ));
        };
        config.redis = redis;
        config.validate()?;
        Ok(config)
    }

    /// Checks each setting with cutout-fleet, one at a time, so that its error names the key.
    fn validate(&self) -> Result<(), ConfigError> {
        let shown = redact(&self.redis);
        let mut builder = Fleet::builder(self.redis.as_str());
        check(&builder, "fleet.redis", &shown)?;
        if let Some(path) = &self.tls_ca_file {
            builder = builder.tls_ca_file(path);
            check(
                &builder,
                "fleet.tls-ca-file",
                &format!("{:?}", path.display()),
            )?;
        }
        if let Some(pod) = &self.pod {
            builder = builder.pod(pod);
            check(&builder, "fleet.pod", &format!("{pod:?}"))?;
        }
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix);
            check(&builder, "fleet.prefix", &format!("{prefix:?}"))?;
        }
        builder = builder.interval(self.interval);
        check(
            &builder,
            "fleet.interval",
            &cutout::HumanDuration(self.interval).to_string(),
        )
    }

    /// The cutout-fleet builder of this table.
    fn builder(&self) -> FleetBuilder {
        let mut builder = Fleet::builder(self.redis.as_str()).interval(self.interval);
        if let Some(path) = &self.tls_ca_file {
            builder = builder.tls_ca_file(path);
        }
        if let Some(pod) = &self.pod {
            builder = builder.pod(pod);
        }
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix);
        }
        // The reconnect backoff may not be shorter than one interval.
        builder.max_backoff(self.interval.max(Duration::from_secs(5)))
    }
}

/// cutout-fleet's check of `builder`, its error as the gateway's, at `key` (the error's own
/// code: `FLEET-URL-004`, `FLEET-CFG-002`, ...).
fn check(builder: &FleetBuilder, key: &str, shown: &str) -> Result<(), ConfigError> {
    builder
        .validate()
        .map_err(|error| ConfigError::new(error.code(), key, shown, &detail(&error)))
}

/// An error's message without its code (the [`ConfigError`] shows the code itself).
fn detail(error: &FleetError) -> String {
    let text = error.to_string();
    match text.strip_prefix(error.code()) {
        Some(rest) => rest.trim_start_matches(':').trim().to_owned(),
        None => text,
    }
}

/// The URL without its credentials, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// A running fleet: the cluster breakers it watches, and its health for `/healthz` and the
/// status page. Dropped, its task stops (and the breakers judge their own calls).
#[derive(Debug)]
pub struct GatewayFleet {
    fleet: Fleet,
}

impl GatewayFleet {
    /// Starts the fleet of `config` (inside a tokio runtime) and watches each of `breakers`
    /// (the cluster breakers) with cutout-fleet's default rule. Does no I/O: an unreachable
    /// Redis is the health's, not an error. Errors: what [`FleetConfig::parse`] checks (a
    /// table that did not come from it), no tokio runtime (`FLEET-CFG-003`), two breakers of
    /// one id (`FLEET-CFG-004`).
    pub fn start<'a>(
        config: &FleetConfig,
        breakers: impl IntoIterator<Item = &'a Breaker>,
    ) -> Result<GatewayFleet, ConfigError> {
        let error = |error: FleetError| {
            ConfigError::new(
                error.code(),
                "fleet",
                &redact(&config.redis),
                &detail(&error),
            )
        };
        let fleet = config.builder().build().map_err(error)?;
        for breaker in breakers {
            fleet.watch(breaker).map_err(error)?;
        }
        Ok(GatewayFleet { fleet })
    }

    /// The fleet (its health, views, keys).
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Whether the last round with Redis succeeded.
    pub fn is_connected(&self) -> bool {
        self.fleet.health().is_connected()
    }

    /// The fleet's health as `/healthz` and the status page show it: `status`
    /// (`connecting`, `connected`, `degraded`), `connected`, the pod, the breakers watched,
    /// since when (ms since the Unix epoch), the rounds, and while degraded the error (its
    /// code and message, never the password).
    pub fn health_json(&self) -> Value {
        let health = self.fleet.health();
        let ms = |at: std::time::SystemTime| {
            at.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        };
        json!({
            "status": health.status.as_str(),
            "connected": health.is_connected(),
            "pod": self.fleet.pod(),
            "watched": self.fleet.watched().len(),
            "since_unix_ms": ms(health.since),
            "rounds": health.rounds,
            "failed_rounds": health.failed_rounds,
            "error": health.error().map(|e| json!({ "code": e.code(), "message": e.to_string() })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FleetConfig, ConfigError> {
        FleetConfig::parse(toml::from_str::<toml::Value>(text).unwrap())
    }

    #[test]
    fn a_table_reads_with_its_defaults() {
        let config = parse("redis = \"redis://127.0.0.1:6379\"").unwrap();
        assert_eq!(config.interval, DEFAULT_INTERVAL);
        assert_eq!((config.pod, config.prefix), (None, None));
        let config = parse(
            "redis = \"redis://u:p@127.0.0.1:6379\"\npod = \"gw-1\"\ninterval = \"100ms\"\n\
             prefix = \"shop\"",
        )
        .unwrap();
        assert_eq!(config.pod.as_deref(), Some("gw-1"));
        assert_eq!(config.interval, Duration::from_millis(100));
        // TLS, with the system's roots.
        assert!(parse("redis = \"rediss://u:p@127.0.0.1:6380\"").is_ok());
    }

    #[test]
    fn each_bad_value_names_its_key_with_a_code() {
        for (text, code, key) in [
            ("pod = \"a\"", "GW-CFG-005", "fleet.redis"),
            ("redis = 1", "GW-CFG-003", "fleet.redis"),
            ("redis = \"127.0.0.1:6379\"", "FLEET-URL-001", "fleet.redis"),
            ("redis = \"http://h:1\"", "FLEET-URL-002", "fleet.redis"),
            (
                "redis = \"redis://:s3cret@127.0.0.1:99999\"",
                "FLEET-URL-004",
                "fleet.redis",
            ),
            (
                "redis = \"redis://127.0.0.1:6379\"\npod = \"a b\"",
                "FLEET-CFG-002",
                "fleet.pod",
            ),
            (
                "redis = \"redis://127.0.0.1:6379\"\nprefix = \"\"",
                "FLEET-CFG-002",
                "fleet.prefix",
            ),
            (
                "redis = \"redis://127.0.0.1:6379\"\ninterval = \"1m\"",
                "GW-CFG-009",
                "fleet.interval",
            ),
            (
                "redis = \"redis://127.0.0.1:6379\"\ncolor = 1",
                "GW-CFG-002",
                "fleet.color",
            ),
            (
                "redis = \"rediss://127.0.0.1:6380\"\ntls-ca-file = \"/nonexistent/ca.pem\"",
                "FLEET-CFG-005",
                "fleet.tls-ca-file",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!((error.code(), error.key()), (code, key), "{text}: {error}");
            assert!(!error.to_string().contains("s3cret"), "{error}");
        }
    }
}
