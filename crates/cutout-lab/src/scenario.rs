//! Scenario files: the dependency, the incident script, the fleet and the breaker settings to
//! compare, read from TOML.
//!
//! ```toml
//! name = "brownout"
//! seed = 1
//! duration = "30m"
//!
//! [dependency]
//! latency-median = "20ms"
//! latency-p99 = "80ms"
//! error-rate = 0.001
//! capacity = 5000          # calls per second it serves before it saturates
//!
//! [fleet]
//! pods = 20
//! rate = 20                # requests per second per pod
//! timeout = "2s"
//! retries = 1
//!
//! [[incidents]]
//! kind = "brownout"
//! start = "10m"
//! duration = "10m"
//! latency-factor = 30
//!
//! # A cutout configuration document (see `cutout::config`): each instance is one setting
//! # to compare; `[breakers.defaults]` and `[breakers.configs.*]` work as in production.
//! [breakers.instances.consecutive-only]
//! adaptive = false
//!
//! [breakers.instances.adaptive]
//! ```
//!
//! Settings run in the order of `compare = ["a", "b"]` when given, else sorted by name.

use std::path::Path;
use std::time::Duration;

use cutout::Settings;
use cutout::config::Config;
use serde::Deserialize;

use crate::dependency::{Dependency, DependencySpec};
use crate::duration::parse;
use crate::fleet::{FleetSpec, Traffic};
use crate::incident::{IncidentSpec, Script};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    seed: u64,
    duration: String,
    dependency: DependencySpec,
    fleet: FleetSpec,
    #[serde(default)]
    incidents: Vec<IncidentSpec>,
    breakers: toml::Table,
    compare: Option<Vec<String>>,
}

/// A scenario, checked and ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name (the file's stem when the file gives none).
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The seed every random stream derives from.
    pub seed: u64,
    /// How long requests keep arriving; calls in flight at the end still finish.
    pub duration: Duration,
    /// The dependency model, healthy.
    pub dependency: Dependency,
    /// The fleet's traffic.
    pub traffic: Traffic,
    /// What goes wrong, when.
    pub script: Script,
    /// The breaker settings to compare, by name, in run order.
    pub settings: Vec<(String, Settings)>,
}

impl Scenario {
    /// Reads a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenario".into());
        Scenario::from_toml(&text, &stem).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads a scenario from TOML text; `default_name` names it when the text does not.
    pub fn from_toml(text: &str, default_name: &str) -> Result<Scenario, String> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| e.to_string())?;
        let config = Config::from_deserializer(toml::Value::Table(raw.breakers))
            .map_err(|e| format!("[breakers]: {e}"))?;
        let names: Vec<String> = match raw.compare {
            Some(names) => names,
            None => config.instances().map(|(id, _)| id.to_owned()).collect(),
        };
        if names.is_empty() {
            return Err("no breaker settings to compare: add [breakers.instances.<name>]".into());
        }
        let settings = names
            .into_iter()
            .map(|name| match config.instance(&name) {
                Some(settings) => Ok((name, settings.clone())),
                None => Err(format!(
                    "compare names {name:?}, which has no [breakers.instances.{name}]"
                )),
            })
            .collect::<Result<Vec<_>, String>>()?;
        let incidents = raw
            .incidents
            .iter()
            .map(IncidentSpec::build)
            .collect::<Result<Vec<_>, String>>()?;
        let duration = parse(&raw.duration)?;
        if duration.is_zero() {
            return Err("duration must be above 0".into());
        }
        let dependency = raw
            .dependency
            .build()
            .map_err(|e| format!("[dependency]: {e}"))?;
        let script = Script::new(incidents);
        script.check_replicas(dependency.replicas())?;
        Ok(Scenario {
            name: raw.name.unwrap_or_else(|| default_name.to_owned()),
            description: raw.description.unwrap_or_default(),
            seed: raw.seed,
            duration,
            dependency,
            traffic: raw.fleet.build()?,
            script,
            settings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
        seed = 5
        compare = ["b", "a"]
        duration = "2m"
        [dependency]
        latency-median = "10ms"
        latency-p99 = "40ms"
        error-rate = 0.01
        capacity = 1000
        [fleet]
        pods = 3
        rate = 5
        timeout = "1s"
        [[incidents]]
        kind = "outage"
        start = "30s"
        duration = "20s"
    "#;

    #[test]
    fn breaker_settings_use_cutouts_keys() {
        let text = format!(
            "{BASE}\n[breakers.defaults]\nbreak-duration = \"30s\"\n\
             [breakers.instances.a]\njitter = \"none\"\n[breakers.instances.b]\n\
             failure-ratio = \"20%\"\n"
        );
        let s = Scenario::from_toml(&text, "x").unwrap();
        assert_eq!(s.name, "x");
        let names: Vec<&str> = s.settings.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(s.settings[0].1.failure_ratio(), Some(0.2));
        assert_eq!(s.settings[1].1.jitter(), cutout::Jitter::None);
        assert_eq!(s.settings[1].1.break_duration(), Duration::from_secs(30));
        assert_eq!(s.script.recovery(), Some(Duration::from_secs(50)));
    }

    #[test]
    fn mistakes_are_named() {
        let base = BASE.replace("compare = [\"b\", \"a\"]", "");
        let bad_key = format!("{base}\n[breakers.instances.a]\nfailure_ratio = 0.2\n");
        let error = Scenario::from_toml(&bad_key, "x").unwrap_err();
        assert!(error.contains("CUT-CFG-008"), "{error}");
        let none = format!("{base}\n[breakers]\n");
        assert!(
            Scenario::from_toml(&none, "x")
                .unwrap_err()
                .contains("no breaker")
        );
        let unknown = format!("{BASE}\n[breakers.instances.a]\n");
        assert!(
            Scenario::from_toml(&unknown, "x")
                .unwrap_err()
                .contains("\"b\"")
        );
    }
}
