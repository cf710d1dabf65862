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
//! An optional `[fleet-signals]` section runs every setting also with fleet signals through
//! a simulated store (see [`crate::signals`]).
//!
//! Three optional sections model the caller's side of latency, all off by default (so a
//! scenario without them runs as it always did): `[saturation]` (a pod's CPU saturation
//! adds one delay to all its calls, [`crate::saturation`]), `[connections]` (pools whose new
//! connections pay setup, [`crate::connections`]) and `[[phases]]` (traffic that changes
//! rate and burstiness, [`crate::phases`]). Their keys are checked one by one, and a mistake
//! is refused with a `LAB-CFG` code, its line and column, and a did-you-mean for an unknown
//! key (see [`crate::keys`]).
//!
//! Settings run in the order of `compare = ["a", "b"]` when given, else sorted by name; a name
//! given twice, or the label of a reference column ([`NO_BREAKER`], [`ORACLE`]), is refused.
//!
//! Every key is checked and bounded, so that a run's memory and time stay bounded; an error
//! names the key (`fleet.timeout = "soon": invalid duration: ...`). `duration` is at most
//! [`Scenario::MAX_DURATION`] (7 days), `pods` × `rate` × `duration` at most
//! [`Scenario::MAX_REQUESTS`] (10⁹ requests), and with a breaker per replica `pods` ×
//! `replicas` at most [`Scenario::MAX_BREAKERS`] (20,000); `[fleet]`'s bounds are
//! [`FleetSpec`]'s, `[dependency]`'s [`DependencySpec`]'s. An incident must start before the
//! run ends.

use std::path::Path;
use std::time::Duration;

use cutout::Settings;
use cutout::config::Config;
use serde::Deserialize;

use crate::connections::ConnectionsSpec;
use crate::dependency::{Dependency, DependencySpec};
use crate::duration::parse_at_most;
use crate::fleet::{BreakerPer, FleetSpec, Traffic};
use crate::incident::{IncidentSpec, Script};
use crate::oracle::ORACLE;
use crate::phases::{PhaseSpec, Phases};
use crate::saturation::SaturationSpec;
use crate::signals::{FleetSignals, FleetSignalsSpec};
use crate::{NO_BREAKER, keys};

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
    fleet_signals: Option<FleetSignalsSpec>,
    saturation: Option<SaturationSpec>,
    connections: Option<ConnectionsSpec>,
    #[serde(default)]
    phases: Vec<PhaseSpec>,
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
    /// `[fleet-signals]` when in force: every setting also runs with them (see
    /// [`crate::signals`]).
    pub fleet_signals: Option<FleetSignals>,
    /// `[saturation]` when in force: the pods' CPU saturation episodes (see
    /// [`crate::saturation`]).
    pub saturation: Option<SaturationSpec>,
    /// `[connections]` when in force: the pods' connection pools (see
    /// [`crate::connections`]).
    pub connections: Option<ConnectionsSpec>,
}

impl Scenario {
    /// The longest run: the run keeps a record of every simulated second (its timeline).
    pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
    /// The most breakers of one run with a breaker per replica: `pods` × `replicas` (each
    /// breaker takes about 4 KB, and every run builds its own).
    pub const MAX_BREAKERS: u64 = 20_000;
    /// The most requests one run is expected to simulate: `pods` × `rate` × `duration` (the
    /// lab simulates about a million requests a second per core).
    pub const MAX_REQUESTS: f64 = 1e9;
    /// The most reports the fleet signals' reads may sum in one run: `pods` × `pods` ×
    /// breakers per pod × `duration` / `fleet-signals.interval` (every read sums every pod's
    /// report).
    pub const MAX_REPORT_READS: f64 = 2e9;

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
    /// Every key is checked and bounded (see [`Scenario::MAX_DURATION`], [`FleetSpec`] and
    /// [`DependencySpec`]); an error names the key.
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
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(format!(
                    "compare names {name:?} twice: each setting is one column"
                ));
            }
            if name == ORACLE {
                return Err(format!(
                    "{}: [breakers.instances.{name:?}]: {ORACLE:?} is the label of the oracle, \
                     the last column of every report: name the setting otherwise",
                    keys::RESERVED_NAME
                ));
            }
            if name == NO_BREAKER {
                return Err(format!(
                    "{}: [breakers.instances.{name:?}]: {NO_BREAKER:?} is the label of the fleet \
                     without breakers, the first column of every report: name the setting \
                     otherwise",
                    keys::RESERVED_NAME
                ));
            }
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
            .enumerate()
            .map(|(n, spec)| {
                spec.build()
                    .map_err(|e| format!("[[incidents]] {}: {e}", n + 1))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let duration = parse_at_most(
            "duration",
            &raw.duration,
            Self::MAX_DURATION,
            "as the run keeps a record of every simulated second",
        )?;
        if duration.is_zero() {
            return Err("duration must be above 0".into());
        }
        for (n, incident) in incidents.iter().enumerate() {
            if incident.start >= duration {
                return Err(format!(
                    "[[incidents]] {}: start = {:?} is at or after the end of the run \
                     (duration = {:?}): the incident would never happen",
                    n + 1,
                    raw.incidents[n].start,
                    raw.duration
                ));
            }
        }
        let dependency = raw
            .dependency
            .build()
            .map_err(|e| format!("[dependency]: {e}"))?;
        let script = Script::new(incidents);
        script.check_replicas(dependency.replicas())?;
        let mut traffic = raw.fleet.build()?;
        traffic.phases = Phases::new(&raw.phases, traffic.rate, traffic.pods)?;
        if let Some(phases) = &traffic.phases {
            let changes = f64::from(traffic.pods) * phases.changes(duration);
            if changes > Self::MAX_REQUESTS {
                return Err(format!(
                    "{}: fleet.pods × duration / the shortest phase = {changes:.0} phase \
                     changes a run: at most {}",
                    crate::keys::OUT_OF_RANGE,
                    Self::MAX_REQUESTS
                ));
            }
        }
        if let Some(saturation) = &raw.saturation {
            saturation.check(traffic.pods, duration)?;
        }
        if traffic.breaker_per.contains(&BreakerPer::Host) {
            let breakers = u64::from(traffic.pods) * u64::from(dependency.replicas());
            if breakers > Self::MAX_BREAKERS {
                return Err(format!(
                    "fleet.pods × dependency.replicas = {} × {} = {breakers} breakers a run \
                     with fleet.breaker-per = \"host\": at most {}",
                    traffic.pods,
                    dependency.replicas(),
                    Self::MAX_BREAKERS
                ));
            }
        }
        let requests = f64::from(traffic.pods) * traffic.mean_rate() * duration.as_secs_f64();
        if requests > Self::MAX_REQUESTS {
            return Err(format!(
                "fleet.pods × fleet.rate × duration = {} × {} × {:?} = {requests:.0} requests \
                 a run: at most {}",
                traffic.pods,
                traffic.mean_rate(),
                raw.duration,
                Self::MAX_REQUESTS
            ));
        }
        let fleet_signals = match &raw.fleet_signals {
            Some(spec) => spec.build()?,
            None => None,
        };
        if let Some(signals) = &fleet_signals {
            for (name, settings) in &settings {
                if name.ends_with(" + fleet signals") {
                    return Err(format!(
                        "[breakers.instances.{name:?}]: with [fleet-signals], \" + fleet \
                         signals\" ends the label of a setting's column with fleet signals: \
                         name the setting otherwise"
                    ));
                }
                crate::signals::rule(settings).map_err(|e| {
                    format!("[fleet-signals]: the fleet rule of [breakers.instances.{name}]: {e}")
                })?;
            }
            let per = if traffic.breaker_per.contains(&BreakerPer::Host) {
                f64::from(dependency.replicas())
            } else {
                1.0
            };
            let pods = f64::from(traffic.pods);
            let reads = pods * pods * per * duration.as_secs_f64() / signals.interval.as_secs_f64();
            if reads > Self::MAX_REPORT_READS {
                return Err(format!(
                    "fleet.pods² × breakers per pod × duration / fleet-signals.interval = \
                     {reads:.0} reports read a run: at most {} (a longer interval or fewer \
                     pods)",
                    Self::MAX_REPORT_READS
                ));
            }
        }
        Ok(Scenario {
            fleet_signals,
            saturation: raw.saturation,
            connections: raw.connections,
            name: raw.name.unwrap_or_else(|| default_name.to_owned()),
            description: raw.description.unwrap_or_default(),
            seed: raw.seed,
            duration,
            dependency,
            traffic,
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
    fn bounds_and_names_twice_are_refused() {
        let base = format!("{BASE}\n[breakers.instances.a]\n[breakers.instances.b]\n");
        let error = |text: &str| Scenario::from_toml(text, "x").unwrap_err();
        let twice = base.replace("compare = [\"b\", \"a\"]", "compare = [\"b\", \"b\"]");
        assert!(error(&twice).contains("compare names \"b\" twice"));
        let baseline =
            base.replace("compare = [\"b\", \"a\"]", "") + "[breakers.instances.\"no breaker\"]\n";
        assert!(error(&baseline).contains("\"no breaker\" is the label"));
        let late = base.replace("start = \"30s\"", "start = \"2m\"");
        let e = error(&late);
        assert!(
            e.contains("[[incidents]] 1: start = \"2m\"") && e.contains("end"),
            "{e}"
        );
        let long = base.replace("duration = \"2m\"", "duration = \"8days\"");
        assert!(error(&long).starts_with("duration = \"8days\": at most 7days"));
        let many = base
            .replace("duration = \"2m\"", "duration = \"7days\"")
            .replace("rate = 5", "rate = 1000");
        assert!(error(&many).contains("fleet.pods × fleet.rate × duration"));
        let hosts = base
            .replace("capacity = 1000", "capacity = 100000\nreplicas = 10")
            .replace("pods = 3", "pods = 2001\nbreaker-per = [\"host\"]");
        assert!(error(&hosts).contains("fleet.pods × dependency.replicas = 2001 × 10"));
        assert!(Scenario::from_toml(&hosts.replace("2001", "2000"), "x").is_ok());
        let kind = base.replace("duration = \"20s\"", "duration = \"20s\"\nperiod = \"1s\"");
        let e = error(&kind);
        assert!(
            e.contains("`outage` takes no `period`") && e.contains("flapping"),
            "{e}"
        );
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
