//! The incident script: what goes wrong with the dependency, when, for how long, and on
//! which replicas (an incident hits the first `replicas` of them, or all).

use std::time::Duration;

use serde::Deserialize;

use crate::duration::{nanos, parse};

/// One kind of trouble the dependency can be in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IncidentKind {
    /// Every call fails fast (connection refused).
    Outage,
    /// Calls still succeed (200 OK) but take `factor` × their normal latency.
    Brownout {
        /// The latency multiple.
        factor: f64,
    },
    /// This share of calls fails, on top of the base error rate.
    ErrorSpike {
        /// The extra error rate, in [0, 1].
        rate: f64,
    },
    /// Calls never answer: every one runs into the caller's timeout.
    Hang,
    /// The dependency is up but cold: its capacity starts at `from` × normal and grows
    /// linearly back to normal over the incident.
    CapacityLimited {
        /// The capacity at the start, as a share of normal, in (0, 1].
        from: f64,
    },
    /// An outage that comes and goes: down for the first `down` share of every `period`.
    Flapping {
        /// The length of one down-and-up cycle.
        period: Duration,
        /// The share of each period spent down, in (0, 1).
        down: f64,
    },
}

impl IncidentKind {
    /// Whether the dependency is failing (as opposed to merely short of capacity) while this
    /// incident runs.
    pub fn is_failing(&self) -> bool {
        !matches!(self, IncidentKind::CapacityLimited { .. })
    }
}

/// An incident: a kind, when it starts, how long it lasts and how many replicas it hits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Incident {
    /// What goes wrong.
    pub kind: IncidentKind,
    /// When it starts, from the start of the run.
    pub start: Duration,
    /// How long it lasts.
    pub duration: Duration,
    /// How many replicas it hits: replicas `0..k`; `None`: every replica.
    pub replicas: Option<u32>,
}

impl Incident {
    /// Whether it hits `replica` (whenever it is in force).
    pub fn hits(&self, replica: u32) -> bool {
        self.replicas.is_none_or(|k| replica < k)
    }

    /// When it ends (saturating: a spec's start + duration is checked not to overflow).
    pub fn end(&self) -> Duration {
        self.start.saturating_add(self.duration)
    }

    /// Whether it is in force at `t` (start inclusive, end exclusive).
    pub fn active_at(&self, t: Duration) -> bool {
        t >= self.start && t < self.end()
    }
}

/// One replica's condition at one moment: every incident in force on it folded together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    /// Every call fails fast.
    pub down: bool,
    /// Calls never answer.
    pub hung: bool,
    /// The multiple applied to normal latency.
    pub latency_factor: f64,
    /// The error rate added on top of the base rate (combined as independent causes).
    pub extra_error_rate: f64,
    /// The share of normal capacity available.
    pub capacity_factor: f64,
}

impl Condition {
    /// A healthy dependency.
    pub const HEALTHY: Condition = Condition {
        down: false,
        hung: false,
        latency_factor: 1.0,
        extra_error_rate: 0.0,
        capacity_factor: 1.0,
    };
}

/// The incidents of a scenario, in the order they were written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    incidents: Vec<Incident>,
}

impl Script {
    /// A script of these incidents (they may overlap: their effects compose).
    pub fn new(incidents: Vec<Incident>) -> Script {
        Script { incidents }
    }

    /// The incidents.
    pub fn incidents(&self) -> &[Incident] {
        &self.incidents
    }

    /// The condition of replica 0 at `t` (replica 0 is hit by every incident): see
    /// [`Script::condition_on`].
    pub fn condition(&self, t: Duration) -> Condition {
        self.condition_on(t, 0)
    }

    /// The condition of `replica` at `t`: every incident in force at `t` that hits it.
    pub fn condition_on(&self, t: Duration, replica: u32) -> Condition {
        let mut c = Condition::HEALTHY;
        for incident in self
            .incidents
            .iter()
            .filter(|i| i.active_at(t) && i.hits(replica))
        {
            match incident.kind {
                IncidentKind::Outage => c.down = true,
                IncidentKind::Hang => c.hung = true,
                IncidentKind::Brownout { factor } => c.latency_factor *= factor,
                IncidentKind::ErrorSpike { rate } => {
                    c.extra_error_rate = 1.0 - (1.0 - c.extra_error_rate) * (1.0 - rate);
                }
                IncidentKind::CapacityLimited { from } => {
                    let progress = (t - incident.start).as_secs_f64()
                        / incident.duration.as_secs_f64().max(f64::MIN_POSITIVE);
                    c.capacity_factor *= from + (1.0 - from) * progress.min(1.0);
                }
                IncidentKind::Flapping { period, down } => {
                    let into = nanos(t - incident.start) % nanos(period).max(1);
                    if (into as f64) < nanos(period) as f64 * down {
                        c.down = true;
                    }
                }
            }
        }
        c
    }

    /// Whether a failing incident (anything but a capacity limit) is in force at `t`, on any
    /// replica.
    pub fn is_failing(&self, t: Duration) -> bool {
        self.incidents
            .iter()
            .any(|i| i.kind.is_failing() && i.active_at(t))
    }

    /// Whether a failing incident (anything but a capacity limit) is in force at `t` on
    /// `replica`.
    pub fn is_failing_on(&self, t: Duration, replica: u32) -> bool {
        self.incidents
            .iter()
            .any(|i| i.kind.is_failing() && i.active_at(t) && i.hits(replica))
    }

    /// Checks that no incident hits more replicas than the dependency's `replicas`.
    pub fn check_replicas(&self, replicas: u32) -> Result<(), String> {
        for (n, incident) in self.incidents.iter().enumerate() {
            if let Some(k) = incident.replicas.filter(|&k| k > replicas) {
                let start = humantime::format_duration(incident.start);
                return Err(format!(
                    "incident {} (from {start}): replicas = {k}, but the dependency has {replicas}",
                    n + 1
                ));
            }
        }
        Ok(())
    }

    /// Whether any incident is in force at `t`.
    pub fn any_active(&self, t: Duration) -> bool {
        self.incidents.iter().any(|i| i.active_at(t))
    }

    /// When the first incident starts.
    pub fn start(&self) -> Option<Duration> {
        self.incidents.iter().map(|i| i.start).min()
    }

    /// When the dependency recovers: the end of the last failing incident, or, for a script
    /// of capacity limits only, the start of the first.
    pub fn recovery(&self) -> Option<Duration> {
        let failing = self
            .incidents
            .iter()
            .filter(|i| i.kind.is_failing())
            .map(Incident::end)
            .max();
        failing.or_else(|| self.start())
    }
}

/// An incident as written in a scenario file (`[[incidents]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IncidentSpec {
    /// `outage`, `brownout`, `error-spike`, `hang`, `capacity-limited` or `flapping`.
    pub kind: String,
    /// When it starts (`"10m"`); a scenario refuses one at or after the run's end.
    pub start: String,
    /// How long it lasts (`"5m"`); it may outlast the run.
    pub duration: String,
    /// Brownout only: the latency multiple. Each kind's own keys are refused on another kind.
    pub latency_factor: Option<f64>,
    /// Error spike only: the extra error rate.
    pub error_rate: Option<f64>,
    /// Capacity-limited only: the capacity share at the start.
    pub capacity_from: Option<f64>,
    /// Flapping only: the cycle length.
    pub period: Option<String>,
    /// Flapping only: the share of each cycle spent down (default 0.5).
    pub down_share: Option<f64>,
    /// How many replicas it hits, the first ones (default: all), at least 1.
    pub replicas: Option<u32>,
}

impl IncidentSpec {
    /// Checks the spec and builds the incident. A key of another kind (`latency-factor` on
    /// an outage) is refused, naming the key and the kinds it belongs to: it would be ignored.
    pub fn build(&self) -> Result<Incident, String> {
        let kind_name = self.kind.as_str();
        let need = |v: Option<f64>, key: &str| {
            v.ok_or_else(|| format!("incident `{kind_name}` needs `{key}`"))
        };
        let kind = match kind_name {
            "outage" => IncidentKind::Outage,
            "hang" => IncidentKind::Hang,
            "brownout" => {
                let factor = need(self.latency_factor, "latency-factor")?;
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(format!(
                        "incident `brownout`: latency-factor = {factor}: needs a number above 0"
                    ));
                }
                IncidentKind::Brownout { factor }
            }
            "error-spike" => {
                let rate = need(self.error_rate, "error-rate")?;
                if !(0.0..=1.0).contains(&rate) {
                    return Err(format!(
                        "incident `error-spike`: error-rate = {rate}: needs a ratio in [0, 1]"
                    ));
                }
                IncidentKind::ErrorSpike { rate }
            }
            "capacity-limited" => {
                let from = need(self.capacity_from, "capacity-from")?;
                if !(from > 0.0 && from <= 1.0) {
                    return Err(format!(
                        "incident `capacity-limited`: capacity-from = {from}: needs a ratio in \
                         (0, 1]"
                    ));
                }
                IncidentKind::CapacityLimited { from }
            }
            "flapping" => {
                let period = parse(
                    "incident `flapping`: period",
                    self.period
                        .as_deref()
                        .ok_or("incident `flapping` needs `period`")?,
                )?;
                let down = self.down_share.unwrap_or(0.5);
                if period.is_zero() || !(down > 0.0 && down < 1.0) {
                    return Err(
                        "incident `flapping` needs a period above 0 and a down-share in (0, 1)"
                            .into(),
                    );
                }
                IncidentKind::Flapping { period, down }
            }
            other => {
                return Err(format!(
                    "unknown incident kind `{other}`: expected outage, brownout, error-spike, \
                     hang, capacity-limited or flapping"
                ));
            }
        };
        // The keys of one kind only, with the kind they belong to.
        let given = [
            ("latency-factor", self.latency_factor.is_some(), "brownout"),
            ("error-rate", self.error_rate.is_some(), "error-spike"),
            (
                "capacity-from",
                self.capacity_from.is_some(),
                "capacity-limited",
            ),
            ("period", self.period.is_some(), "flapping"),
            ("down-share", self.down_share.is_some(), "flapping"),
        ];
        if let Some((key, _, owner)) = given
            .iter()
            .find(|&&(_, set, owner)| set && owner != kind_name)
        {
            return Err(format!(
                "incident `{kind_name}` takes no `{key}`: it is a key of `{owner}` incidents \
                 (for both, write two incidents: their effects compose)"
            ));
        }
        if self.replicas == Some(0) {
            return Err(format!(
                "incident `{kind_name}`: replicas = 0: an incident hits at least 1 replica"
            ));
        }
        let start = parse(&format!("incident `{kind_name}`: start"), &self.start)?;
        let duration = parse(&format!("incident `{kind_name}`: duration"), &self.duration)?;
        if start.checked_add(duration).is_none() {
            return Err(format!(
                "incident `{kind_name}`: start = {:?} + duration = {:?} is past the longest \
                 time there is",
                self.start, self.duration
            ));
        }
        Ok(Incident {
            kind,
            start,
            duration,
            replicas: self.replicas,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn at(kind: IncidentKind, start: u32, duration: u32) -> Incident {
        Incident {
            kind,
            start: start * S,
            duration: duration * S,
            replicas: None,
        }
    }

    #[test]
    fn incidents_hold_from_start_to_end_exclusive() {
        let script = Script::new(vec![at(IncidentKind::Outage, 10, 5)]);
        assert!(!script.condition(9 * S).down);
        assert!(script.condition(10 * S).down);
        assert!(script.condition(14 * S).down);
        assert!(!script.condition(15 * S).down);
        assert_eq!(script.start(), Some(10 * S));
        assert_eq!(script.recovery(), Some(15 * S));
    }

    #[test]
    fn effects_compose() {
        let script = Script::new(vec![
            at(IncidentKind::Brownout { factor: 30.0 }, 0, 100),
            at(IncidentKind::Brownout { factor: 2.0 }, 50, 100),
            at(IncidentKind::ErrorSpike { rate: 0.5 }, 50, 10),
            at(IncidentKind::ErrorSpike { rate: 0.5 }, 50, 10),
        ]);
        let c = script.condition(55 * S);
        assert_eq!(c.latency_factor, 60.0);
        assert_eq!(c.extra_error_rate, 0.75);
        assert_eq!(script.condition(120 * S).latency_factor, 2.0);
    }

    #[test]
    fn capacity_grows_linearly_and_is_not_failing() {
        let script = Script::new(vec![
            at(IncidentKind::Outage, 0, 60),
            at(IncidentKind::CapacityLimited { from: 0.2 }, 60, 100),
        ]);
        assert!((script.condition(60 * S).capacity_factor - 0.2).abs() < 1e-9);
        assert!((script.condition(110 * S).capacity_factor - 0.6).abs() < 1e-9);
        assert_eq!(script.condition(160 * S).capacity_factor, 1.0);
        assert!(!script.is_failing(100 * S));
        assert!(script.any_active(100 * S));
        assert_eq!(
            script.recovery(),
            Some(60 * S),
            "recovery: the outage's end"
        );
    }

    #[test]
    fn flapping_is_down_for_its_share_of_each_period() {
        let flapping = IncidentKind::Flapping {
            period: 20 * S,
            down: 0.25,
        };
        let script = Script::new(vec![at(flapping, 100, 60)]);
        let down: Vec<bool> = (100..160)
            .step_by(5)
            .map(|t: u32| script.condition(t * S).down)
            .collect();
        assert_eq!(
            down,
            [
                true, false, false, false, true, false, false, false, true, false, false, false
            ]
        );
    }

    #[test]
    fn specs_are_checked() {
        let spec = |kind: &str| IncidentSpec {
            kind: kind.into(),
            start: "1m".into(),
            duration: "30s".into(),
            latency_factor: None,
            error_rate: None,
            capacity_from: None,
            period: None,
            down_share: None,
            replicas: None,
        };
        assert_eq!(spec("outage").build().unwrap().end(), 90 * S);
        assert!(
            spec("brownout")
                .build()
                .unwrap_err()
                .contains("latency-factor")
        );
        assert!(spec("meltdown").build().unwrap_err().contains("unknown"));
        let mut flap = spec("flapping");
        flap.period = Some("10s".into());
        assert!(matches!(
            flap.build().unwrap().kind,
            IncidentKind::Flapping { down, .. } if down == 0.5
        ));
    }

    #[test]
    fn incidents_hit_the_first_replicas() {
        let mut outage = at(IncidentKind::Outage, 10, 10);
        outage.replicas = Some(2);
        let mut slow = at(IncidentKind::Brownout { factor: 30.0 }, 0, 100);
        slow.replicas = Some(1);
        let limit = at(IncidentKind::CapacityLimited { from: 0.5 }, 0, 100);
        let script = Script::new(vec![outage, slow, limit]);
        let on = |r| script.condition_on(15 * S, r);
        assert!(on(0).down && on(1).down && !on(2).down);
        assert_eq!((on(0).latency_factor, on(1).latency_factor), (30.0, 1.0));
        assert!(
            (on(2).capacity_factor - 0.575).abs() < 1e-9,
            "every replica"
        );
        assert_eq!(script.condition(15 * S), on(0));
        assert!(script.is_failing_on(15 * S, 1) && !script.is_failing_on(15 * S, 2));
        assert!(script.is_failing(15 * S));
        assert!(!script.is_failing_on(50 * S, 1) && script.is_failing_on(50 * S, 0));
        assert_eq!(script.check_replicas(2), Ok(()));
        let error = script.check_replicas(1).unwrap_err();
        assert!(
            error.contains("replicas = 2") && error.contains("10s"),
            "{error}"
        );
        assert_eq!(Script::new(vec![limit]).check_replicas(1), Ok(()));
    }

    #[test]
    fn replicas_are_read_and_checked() {
        let spec: IncidentSpec =
            toml::from_str("kind = \"outage\"\nstart = \"1m\"\nduration = \"30s\"\nreplicas = 2")
                .unwrap();
        assert_eq!(spec.build().unwrap().replicas, Some(2));
        let none = IncidentSpec {
            replicas: None,
            ..spec.clone()
        };
        assert_eq!(none.build().unwrap().replicas, None);
        let zero = IncidentSpec {
            replicas: Some(0),
            ..spec
        };
        assert!(zero.build().unwrap_err().contains("replicas = 0"));
    }
}
