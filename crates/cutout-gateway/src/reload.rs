//! Reloading the configuration file without a restart (SIGHUP, `POST /reload`): validated by [`load`] (what `--check` runs), then only the parts whose settings changed are rebuilt.
//!
//! A reload reads the file the gateway was started from ([`Gateway::source`]) and validates it
//! with [`load`], the function `--check` and the start-up use, so `--check` of a file gives
//! the verdict a reload of it would. A file that does not pass changes nothing: the error,
//! with its code (`GW-CFG-…`, `CUT-CFG-…`, `GW-RUN-001`), is logged and answered, and the
//! gateway routes as before.
//!
//! A file that passes is installed as a new routing table ([`crate::routing`]), swapped whole:
//! requests already routed finish on the table they were routed on (they hold it). What the
//! new file leaves unchanged keeps its state: a cluster whose settings are all equal keeps its
//! stack, its statistics and its breakers; a cluster whose stack settings changed (an attempt
//! timeout, a retry setting, …) gets a new stack but keeps its breaker when the breaker's
//! settings are equal (an open breaker stays open, its break running on) and its hosts' breakers
//! when their part is equal. Each part built anew is named in the log line and in the
//! record ([`ReloadRecord`], shown by `GET /breakers` and the status page): `cluster a`,
//! `breaker a`, `host a/127.0.0.1:7001`, `routes`, `rate limit`, and `section <name>` for a
//! top-level section whose parts are not compared one by one (a section added later is thus
//! "changed, rebuilt" until it says more).
//!
//! # Keys that need a restart
//! [`RESTART_ONLY`]: the listeners' addresses and limits, which the bound sockets and their
//! accept loops hold. A reload that changes one **applies the rest** and warns,
//! `GW-WARN-004`, naming each such key: the running value stays in force (and is what the
//! admin API shows) until the gateway restarts. Refusing the whole file instead would keep a
//! good change to a cluster waiting on a restart that the operator may not want yet.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::GatewayConfig;
use crate::error::StartError;
use crate::gateway::{Gateway, now_unix_ms};

/// The keys a reload does not apply (see the [module docs](self#keys-that-need-a-restart)).
pub const RESTART_ONLY: [&str; 9] = [
    "gateway.listen",
    "gateway.admin",
    "gateway.max-connections",
    "gateway.admin-max-connections",
    "gateway.header-read-timeout",
    "gateway.idle-timeout",
    "gateway.request-timeout",
    "gateway.shutdown-timeout",
    "gateway.h2c",
];

/// The top-level sections whose parts a reload compares one by one (the clusters' and
/// breakers' settings through [`crate::routing::ClusterPlan`], the routes as a whole, the
/// `[gateway]` keys each); any other section that changed is named `section <name>`.
const COMPARED: [&str; 4] = ["gateway", "routes", "clusters", "breakers"];

/// Reads and validates the configuration file at `path`: what the start-up, `--check` and
/// every reload run, so that they agree.
pub fn load(path: &Path) -> Result<GatewayConfig, StartError> {
    let text = read(path)?;
    Ok(GatewayConfig::from_toml(&text)?)
}

fn read(path: &Path) -> Result<String, StartError> {
    std::fs::read_to_string(path).map_err(|source| StartError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// A reload's error: its code, the key it names (empty when none) and the whole message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadError {
    /// The stable code (`GW-CFG-001`, `CUT-CFG-…`, `GW-RUN-001`, `GW-RUN-003`).
    pub code: String,
    /// The key (dotted path), empty when the error names none.
    pub key: String,
    /// The message, as the log writes it.
    pub message: String,
}

impl ReloadError {
    fn of(error: &StartError) -> ReloadError {
        match error {
            StartError::Config(e) => ReloadError {
                code: e.code().to_owned(),
                key: e.key().to_owned(),
                message: error.to_string(),
            },
            StartError::Read { .. } => ReloadError {
                code: "GW-RUN-001".to_owned(),
                key: String::new(),
                message: error.to_string(),
            },
            StartError::Bind { .. } => ReloadError {
                code: "GW-RUN-002".to_owned(),
                key: String::new(),
                message: error.to_string(),
            },
        }
    }
}

/// One reload's outcome, as `GET /breakers` shows it (`reload`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadRecord {
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// What asked for it: `SIGHUP` or `POST /reload`.
    pub trigger: &'static str,
    /// The file read.
    pub path: String,
    /// Why the file was refused (nothing changed); `None`: it was installed.
    pub error: Option<ReloadError>,
    /// The parts built anew (see the [module docs](self)).
    pub rebuilt: Vec<String>,
    /// Clusters the file added.
    pub added: Vec<String>,
    /// Clusters the file removed.
    pub removed: Vec<String>,
    /// `[gateway]` keys whose new values are in force.
    pub changed: Vec<String>,
    /// Keys of [`RESTART_ONLY`] the file changed, not applied (`GW-WARN-004`).
    pub restart_required: Vec<String>,
}

impl ReloadRecord {
    /// The record as JSON (what `POST /reload` answers and `GET /breakers` carries).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "at_unix_ms": self.at_unix_ms,
            "trigger": self.trigger,
            "path": self.path,
            "ok": self.error.is_none(),
            "error": self.error.as_ref().map(|e| e.message.as_str()),
            "code": self.error.as_ref().map(|e| e.code.as_str()),
            "key": self.error.as_ref().map(|e| e.key.as_str()),
            "rebuilt": self.rebuilt,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "restart_required": self.restart_required,
        })
    }
}

/// Reloads `gateway` from its configuration file (see the [module docs](self)), logs the
/// outcome, remembers it for the status page and returns it. `trigger` says what asked
/// (`SIGHUP`, `POST /reload`). A gateway started without a file refuses (`GW-RUN-003`).
pub fn reload(gateway: &Gateway, trigger: &'static str) -> ReloadRecord {
    let mut last = gateway.reload_lock();
    let mut record = ReloadRecord {
        at_unix_ms: now_unix_ms(),
        trigger,
        path: String::new(),
        error: None,
        rebuilt: Vec::new(),
        added: Vec::new(),
        removed: Vec::new(),
        changed: Vec::new(),
        restart_required: Vec::new(),
    };
    match gateway.source() {
        None => {
            record.error = Some(ReloadError {
                code: "GW-RUN-003".to_owned(),
                key: String::new(),
                message: "GW-RUN-003: no configuration file to reload: the gateway was not \
                          started with --config"
                    .to_owned(),
            });
        }
        Some(path) => {
            record.path = path.display().to_string();
            match read(path).and_then(|text| {
                let config = GatewayConfig::from_toml(&text)?;
                Ok((config, text))
            }) {
                Err(error) => record.error = Some(ReloadError::of(&error)),
                Ok((mut config, text)) => {
                    // The warnings `--check` prints and the start-up logs, for the new file.
                    for warning in config.warnings() {
                        tracing::warn!("{warning}");
                    }
                    let old = gateway.config();
                    record.restart_required = keep_restart_only(&old, &mut config);
                    if install_certificate(&old, &mut config) {
                        record.rebuilt.push("listener certificate".to_owned());
                    }
                    let (before, sections) = (gateway.sections(), sections(&text));
                    record.changed = changed_gateway_keys(&before, &sections);
                    record.rebuilt.extend(changed_sections(&before, &sections));
                    gateway.set_sections(sections);
                    let installed = gateway.install(config);
                    record.rebuilt.splice(0..0, installed.rebuilt);
                    record.added = installed.added;
                    record.removed = installed.removed;
                }
            }
        }
    }
    log(&record);
    *last = Some(record.clone());
    record
}

/// The top-level sections of a configuration text (empty when it is not TOML).
pub(crate) fn sections(text: &str) -> BTreeMap<String, toml::Value> {
    toml::from_str::<toml::Table>(text)
        .map(|table| table.into_iter().collect())
        .unwrap_or_default()
}

/// Puts the running value back for every key of [`RESTART_ONLY`] that `new` changes, and
/// names those keys.
fn keep_restart_only(old: &GatewayConfig, new: &mut GatewayConfig) -> Vec<String> {
    let mut kept = Vec::new();
    macro_rules! keep {
        ($key:literal, $($field:ident).+) => {
            if new.$($field).+ != old.$($field).+ {
                new.$($field).+ = old.$($field).+.clone();
                kept.push($key.to_owned());
            }
        };
    }
    keep!("gateway.listen", listen);
    keep!("gateway.admin", admin);
    keep!("gateway.max-connections", limits.max_connections);
    keep!(
        "gateway.admin-max-connections",
        limits.admin_max_connections
    );
    keep!("gateway.header-read-timeout", limits.header_read_timeout);
    keep!("gateway.idle-timeout", limits.idle_timeout);
    keep!("gateway.request-timeout", limits.request_timeout);
    keep!("gateway.shutdown-timeout", limits.shutdown_timeout);
    keep!("gateway.h2c", h2c);
    // The listener serves TLS or not as it was bound; a certificate pair it serves can
    // change (see `install_certificate`).
    if old.tls.is_some() != new.tls.is_some() {
        new.tls = old.tls.clone();
        kept.push("gateway.tls-cert".to_owned());
    }
    kept
}

/// A TLS listener's certificate after a reload: the pair the new file's `tls-cert` and
/// `tls-key` hold (read again, so a rotated certificate under the same paths is taken too)
/// is served by the running listener from its next handshake on, and the new configuration
/// keeps the running listener's certificate object, which the next reload replaces in turn.
/// Whether there was one to replace.
fn install_certificate(old: &GatewayConfig, new: &mut GatewayConfig) -> bool {
    let (Some(running), Some(read)) = (&old.tls, &mut new.tls) else {
        return false;
    };
    running.cert().replace((*read.cert().current()).clone());
    *read = running.clone();
    true
}

/// The `[gateway]` keys written differently (or added, or removed) between two files, but
/// those of [`RESTART_ONLY`].
fn changed_gateway_keys(
    old: &BTreeMap<String, toml::Value>,
    new: &BTreeMap<String, toml::Value>,
) -> Vec<String> {
    let table = |s: &BTreeMap<String, toml::Value>| {
        s.get("gateway")
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let (old, new) = (table(old), table(new));
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| old.get(*key) != new.get(*key))
        .map(|key| format!("gateway.{key}"))
        .filter(|key| !RESTART_ONLY.contains(&key.as_str()))
        .collect()
}

/// `section <name>` for each top-level section outside [`COMPARED`] that changed.
fn changed_sections(
    old: &BTreeMap<String, toml::Value>,
    new: &BTreeMap<String, toml::Value>,
) -> Vec<String> {
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| !COMPARED.contains(&name.as_str()))
        .filter(|name| old.get(*name) != new.get(*name))
        .map(|name| format!("section {name}"))
        .collect()
}

fn log(record: &ReloadRecord) {
    let list = |items: &[String]| format!("[{}]", items.join(", "));
    match &record.error {
        Some(error) => tracing::warn!(
            code = %error.code,
            key = %error.key,
            "configuration reload ({}) refused, nothing changed: {}",
            record.trigger,
            error.message
        ),
        None => {
            for key in &record.restart_required {
                tracing::warn!(
                    "GW-WARN-004: {key} changed in {} but takes effect only at a restart: the \
                     running value stays in force; the rest of the file is applied",
                    record.path
                );
            }
            tracing::info!(
                "configuration reloaded from {} ({}): rebuilt: {}, added: {}, removed: {}, \
                 changed: {}",
                record.path,
                record.trigger,
                list(&record.rebuilt),
                list(&record.added),
                list(&record.removed),
                list(&record.changed)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[gateway]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
                        [clusters.a]\nupstreams = [\"http://127.0.0.1:7001\"]\n";

    #[test]
    fn restart_only_keys_keep_their_running_value_and_are_named() {
        let old = GatewayConfig::from_toml(BASE).unwrap();
        let text = BASE.replace("listen = \"127.0.0.1:0\"", "listen = \"127.0.0.1:7999\"");
        let mut new = GatewayConfig::from_toml(&text).unwrap();
        assert_eq!(keep_restart_only(&old, &mut new), ["gateway.listen"]);
        assert_eq!(new.listen, old.listen);
        let mut same = GatewayConfig::from_toml(BASE).unwrap();
        assert!(keep_restart_only(&old, &mut same).is_empty());
    }

    #[test]
    fn every_restart_only_key_is_kept() {
        let old = GatewayConfig::from_toml(BASE).unwrap();
        let all = BASE.replace(
            "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n",
            "listen = \"127.0.0.1:7998\"\nadmin = \"127.0.0.1:7997\"\nmax-connections = 10\n\
             admin-max-connections = 5\nheader-read-timeout = \"3s\"\nidle-timeout = \"100s\"\n\
             request-timeout = \"50s\"\nshutdown-timeout = \"5s\"\nh2c = true\n",
        );
        let mut new = GatewayConfig::from_toml(&all).unwrap();
        assert_eq!(keep_restart_only(&old, &mut new), RESTART_ONLY);
        assert_eq!(
            (new.listen, new.admin, new.limits, new.h2c),
            (old.listen, old.admin, old.limits, old.h2c)
        );
    }

    #[test]
    fn unknown_sections_that_changed_are_named() {
        let old = sections(&format!("{BASE}[fleet]\nname = \"x\"\n"));
        let new = sections(&format!("{BASE}[fleet]\nname = \"y\"\n"));
        assert_eq!(changed_sections(&old, &new), ["section fleet"]);
        assert!(changed_sections(&old, &old).is_empty());
        let gw = sections(&BASE.replace("[gateway]\n", "[gateway]\ntrusted-hops = 1\n"));
        assert_eq!(
            changed_gateway_keys(&sections(BASE), &gw),
            ["gateway.trusted-hops"]
        );
    }
}
