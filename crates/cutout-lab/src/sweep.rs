//! Sweeps: one breaker key across values (`break-duration=5s,30s,60s`), each value a setting
//! of its own, compared on the same scenario, with a recommendation.
//!
//! The variants are built on the scenario file's TOML: the base setting (the first name in
//! `compare` that has a `[breakers.instances.<name>]`, else the first instance by name) is
//! copied once per value with the key set, under the name `<key>=<value>`; the compared
//! settings are replaced by these and `compare` lists them in the values' order. cutout then
//! reads them as it reads any instance, so an unknown key or a bad value fails with cutout's
//! own error (`CUT-CFG-008: unknown key ... did you mean ...?`).
//!
//! ```no_run
//! let text = std::fs::read_to_string("scenarios/brownout.toml").map_err(|e| e.to_string())?;
//! let sweep = cutout_lab::sweep::Sweep::build(&text, "break-duration=5s,30s".parse()?)?;
//! let scenario = sweep.scenario("brownout")?;
//! let seeds = cutout_lab::seeds::run(&scenario, 1, &|_| {})?;
//! print!("{}", sweep.table(&seeds));
//! # Ok::<(), String>(())
//! ```

use std::fmt::Write as _;
use std::str::FromStr;

use toml::{Table, Value};

use crate::scenario::Scenario;
use crate::seeds::{self, Cell, Seeds, Stats, Summary};

/// The figure the recommendation maximizes ([`Figure::name`](crate::Figure::name)).
pub const GOODPUT: &str = "requests that succeeded";
/// The figure that rules a value out when its mean is above 0: false trips.
pub const FALSE_TRIPS: &str =
    "trips on a healthy dependency (no incident, no queue past the callers' timeout)";
/// The figure that breaks ties: the lower the better.
pub const REACHED_FAILING: &str = "calls that reached the failing dependency";

/// A `--sweep` spec: `key=v1,v2,...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The cutout configuration key, as scenario files write it (`break-duration`).
    pub key: String,
    /// The values as written, in order.
    pub values: Vec<String>,
}

impl FromStr for Spec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Spec, String> {
        let shape = "expected KEY=V1,V2,... such as break-duration=5s,30s,60s";
        let Some((key, values)) = spec.split_once('=') else {
            return Err(format!("--sweep {spec:?}: no '=': {shape}"));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("--sweep {spec:?}: no key before '=': {shape}"));
        }
        if let Some(c) = key
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Err(format!(
                "--sweep {spec:?}: {c:?} in the key {key:?}: keys are kebab-case words \
                 (break-duration), or section.key for a load key (fleet.rate)"
            ));
        }
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_owned()).collect();
        if values.iter().any(String::is_empty) {
            return Err(format!("--sweep {spec:?}: an empty value: {shape}"));
        }
        for (i, v) in values.iter().enumerate() {
            if values[..i].contains(v) {
                return Err(format!("--sweep {spec:?}: {v} is given twice"));
            }
        }
        Ok(Spec {
            key: key.to_owned(),
            values,
        })
    }
}

/// A value as TOML reads it when it can (`10`, `0.2`, `false`, `"none"`), else as a string
/// (`5s`, `20%`, `none`).
pub fn value(text: &str) -> Value {
    let parsed = toml::from_str::<Table>(&format!("v = {text}"))
        .ok()
        .filter(|t| t.len() == 1)
        .and_then(|mut t| t.remove("v"));
    match parsed {
        Some(v @ (Value::Integer(_) | Value::Float(_) | Value::Boolean(_) | Value::String(_))) => v,
        _ => Value::String(text.to_owned()),
    }
}

/// A sweep's variants of a scenario file.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The spec.
    pub spec: Spec,
    /// The instance the variants copy.
    pub base: String,
    /// The variants' names (`<key>=<value>`), in the values' order.
    pub names: Vec<String>,
    /// The scenario file with the variants in place of the compared settings.
    pub text: String,
}

impl Sweep {
    /// Builds the variants of the scenario file `text`.
    pub fn build(text: &str, spec: Spec) -> Result<Sweep, String> {
        let mut doc: Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let compare: Option<Vec<String>> = match doc.get("compare") {
            None => None,
            Some(Value::Array(names)) => Some(
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
            ),
            Some(_) => return Err("compare is not a list of names".into()),
        };
        let Some(instances) = doc
            .get_mut("breakers")
            .and_then(|b| b.get_mut("instances"))
            .and_then(Value::as_table_mut)
        else {
            return Err("no [breakers.instances.<name>] to sweep from".into());
        };
        let base = compare
            .iter()
            .flatten()
            .find(|n| instances.contains_key(n.as_str()))
            .cloned()
            .or_else(|| instances.keys().min().cloned())
            .ok_or("no [breakers.instances.<name>] to sweep from")?;
        let Some(Value::Table(settings)) = instances.get(&base).cloned() else {
            return Err(format!("[breakers.instances.{base}] is not a table"));
        };
        let compared = compare.unwrap_or_else(|| instances.keys().cloned().collect());
        for name in &compared {
            instances.remove(name);
        }
        let mut names = Vec::with_capacity(spec.values.len());
        for v in &spec.values {
            let name = format!("{}={v}", spec.key);
            let mut variant = settings.clone();
            variant.insert(spec.key.clone(), value(v));
            instances.insert(name.clone(), Value::Table(variant));
            names.push(name);
        }
        doc.insert(
            "compare".into(),
            Value::Array(names.iter().cloned().map(Value::String).collect()),
        );
        let text = toml::to_string(&doc).map_err(|e| e.to_string())?;
        Ok(Sweep {
            spec,
            base,
            names,
            text,
        })
    }

    /// The scenario with the variants, named `default_name` unless the file names it.
    /// Fails with cutout's error when it does not know the key or rejects a value.
    pub fn scenario(&self, default_name: &str) -> Result<Scenario, String> {
        Scenario::from_toml(&self.text, default_name)
            .map_err(|e| format!("--sweep {}: {e}", self.spec.key))
    }

    /// What the sweep is, as the table's header says it.
    pub fn describe(&self) -> String {
        format!(
            "sweep of {} over {}, each on the settings of [breakers.instances.{}]",
            self.spec.key,
            self.spec.values.join(", "),
            self.base
        )
    }

    /// The table of `runs` of the sweep's [`Sweep::scenario`]: the header, the sweep, the
    /// figures (as [`seeds::table`]) and the recommendation.
    pub fn table(&self, runs: &Seeds) -> String {
        let report = runs.first.table();
        let summary = runs.summary();
        format!(
            "{}  {}\n\n{}\n{}\n",
            seeds::header(&report, &runs.seeds),
            self.describe(),
            seeds::grid(&summary),
            self.recommend(&summary)
        )
    }

    /// The recommendation line: the value with the most requests that succeeded among those
    /// with no trips while no incident was in force, ties broken by the fewest calls that
    /// reached the failing dependency, then by the values' order.
    pub fn recommend(&self, summary: &Summary) -> String {
        let columns: Vec<(&str, usize)> = self
            .names
            .iter()
            .filter_map(|n| summary.column(n).map(|c| (n.as_str(), c)))
            .collect();
        let mean = |row: Option<&seeds::Row>, c: usize| {
            row.and_then(|r| r.cells.get(c))
                .and_then(|cell| cell.stats)
                .map(|s| s.mean)
        };
        let Some(goodput) = summary.row(GOODPUT) else {
            return format!("no recommendation: the report has no figure {GOODPUT:?} to choose by");
        };
        let mut notes = Vec::new();
        let mut candidates: Vec<(&str, usize)> = columns
            .iter()
            .copied()
            .filter(|&(_, c)| mean(Some(goodput), c).is_some())
            .collect();
        if candidates.is_empty() {
            return format!(
                "no recommendation: no value of {} had {GOODPUT}",
                self.spec.key
            );
        }
        let among = match summary.row(FALSE_TRIPS) {
            None => {
                notes.push(format!("no figure {FALSE_TRIPS:?} to rule values out by"));
                "among all values".to_owned()
            }
            Some(row) => {
                let trips = |c| mean(Some(row), c).unwrap_or(0.0);
                let fewest = candidates
                    .iter()
                    .map(|&(_, c)| trips(c))
                    .fold(f64::INFINITY, f64::min);
                candidates.retain(|&(_, c)| trips(c) == fewest);
                if fewest == 0.0 {
                    format!("among the values with no {FALSE_TRIPS}")
                } else {
                    format!(
                        "among the values with the fewest {FALSE_TRIPS} (mean {fewest:.1}: \
                         every value had some)"
                    )
                }
            }
        };
        let reached = summary.row(REACHED_FAILING);
        if reached.is_none() {
            notes.push(format!(
                "no figure {REACHED_FAILING:?} to break ties by: the first value wins them"
            ));
        }
        let score = |c: usize| {
            (
                mean(Some(goodput), c).unwrap_or(f64::NEG_INFINITY),
                mean(reached, c).unwrap_or(f64::INFINITY),
            )
        };
        let mut best = candidates[0];
        for &(name, c) in &candidates[1..] {
            let (g, r) = score(c);
            let (bg, br) = score(best.1);
            if g > bg || (g == bg && r < br) {
                best = (name, c);
            }
        }
        let (g, _) = score(best.1);
        let shown = seeds::format_cell(
            &Cell {
                stats: Some(Stats {
                    mean: g,
                    min: g,
                    max: g,
                }),
                had: 1,
                of: 1,
            },
            goodput.unit,
        );
        let mut line = format!(
            "recommended: {}, chosen by the most {GOODPUT} ({shown}{}) {among}",
            best.0,
            if goodput.cells.get(best.1).is_some_and(|c| c.of > 1) {
                ", mean over the seeds"
            } else {
                ""
            }
        );
        if reached.is_some() {
            let _ = write!(line, ", ties broken by the fewest {REACHED_FAILING}");
        }
        for note in notes {
            let _ = write!(line, " ({note})");
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Unit;
    use crate::seeds::Row;

    const BASE: &str = concat!(
        "seed = 3\nduration = \"60s\"\n",
        crate::seeds::tests::tiny_world!(),
        r#"
        [breakers.defaults]
        break-duration = "20s"
        [breakers.instances.a]
        jitter = "none"
        [breakers.instances.b]
        failure-ratio = "20%"
        [breakers.instances.c]
        consecutive-failures = 3
    "#
    );

    fn spec(text: &str) -> Spec {
        text.parse().unwrap()
    }

    #[test]
    fn specs_read_a_key_and_its_values() {
        assert_eq!(
            spec("break-duration=5s, 30s,60s"),
            Spec {
                key: "break-duration".into(),
                values: vec!["5s".into(), "30s".into(), "60s".into()],
            }
        );
        assert_eq!(spec("adaptive=false").values, ["false"]);
        for bad in [
            "break-duration",
            "=5s",
            "break-duration=",
            "a=1,,2",
            "a b=1",
            "a=1,1",
        ] {
            assert!(bad.parse::<Spec>().is_err(), "{bad}");
        }
        assert!("a=1,1".parse::<Spec>().unwrap_err().contains("twice"));
    }

    #[test]
    fn values_are_toml_when_they_can_be() {
        assert_eq!(value("10"), Value::Integer(10));
        assert_eq!(value("0.2"), Value::Float(0.2));
        assert_eq!(value("false"), Value::Boolean(false));
        assert_eq!(value("\"none\""), Value::String("none".into()));
        assert_eq!(value("none"), Value::String("none".into()));
        assert_eq!(value("5s"), Value::String("5s".into()));
        assert_eq!(value("20%"), Value::String("20%".into()));
        assert_eq!(value("1 2"), Value::String("1 2".into()));
        assert_eq!(value("1\nx = 2"), Value::String("1\nx = 2".into()));
    }

    #[test]
    fn variants_copy_the_first_compared_setting() {
        let text = format!("compare = [\"b\", \"a\"]\n{BASE}");
        let sweep = Sweep::build(&text, spec("break-duration=5s,60s")).unwrap();
        assert_eq!(sweep.base, "b");
        assert_eq!(sweep.names, ["break-duration=5s", "break-duration=60s"]);
        let doc: Table = toml::from_str(&sweep.text).unwrap();
        let instances = doc["breakers"]["instances"].as_table().unwrap();
        let mut keys: Vec<&str> = instances.keys().map(String::as_str).collect();
        keys.sort();
        // a and b were compared: replaced; c was not: kept.
        assert_eq!(keys, ["break-duration=5s", "break-duration=60s", "c"]);
        assert_eq!(
            instances["break-duration=60s"]["failure-ratio"].as_str(),
            Some("20%")
        );
        let s = sweep.scenario("x").unwrap();
        let names: Vec<&str> = s.settings.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, sweep.names);
        assert_eq!(
            s.settings[0].1.break_duration(),
            std::time::Duration::from_secs(5)
        );
        assert_eq!(
            s.settings[1].1.break_duration(),
            std::time::Duration::from_secs(60)
        );
        assert_eq!(s.settings[1].1.failure_ratio(), Some(0.2));
        assert_eq!(s.seed, 3);
    }

    #[test]
    fn without_compare_the_first_instance_by_name_is_the_base() {
        let sweep = Sweep::build(BASE, spec("consecutive-failures=2,8")).unwrap();
        assert_eq!(sweep.base, "a");
        let s = sweep.scenario("x").unwrap();
        assert_eq!(s.settings.len(), 2);
        assert_eq!(s.settings[0].1.jitter(), cutout::Jitter::None);
        assert_eq!(s.settings[0].1.consecutive_failures(), Some(2));
        assert_eq!(s.settings[1].1.consecutive_failures(), Some(8));
        let typed = Sweep::build(BASE, spec("adaptive=false,true")).unwrap();
        let doc: Table = toml::from_str(&typed.text).unwrap();
        assert_eq!(
            doc["breakers"]["instances"]["adaptive=false"]["adaptive"],
            Value::Boolean(false)
        );
        assert!(Sweep::build("seed = 1\n", spec("a=1")).is_err());
    }

    #[test]
    fn cutout_names_an_unknown_key_or_a_bad_value() {
        let sweep = Sweep::build(BASE, spec("brake-duration=5s,30s")).unwrap();
        let error = sweep.scenario("x").unwrap_err();
        assert!(error.contains("CUT-CFG-008"), "{error}");
        assert!(error.contains("did you mean break-duration"), "{error}");
        let bad = Sweep::build(BASE, spec("failure-ratio=150%")).unwrap();
        let error = bad.scenario("x").unwrap_err();
        assert!(error.contains("CUT-CFG-001"), "{error}");
    }

    fn summary(rows: &[(&'static str, &[f64])]) -> Summary {
        let columns = vec!["k=1".to_owned(), "k=2".to_owned(), "k=3".to_owned()];
        let rows = rows
            .iter()
            .map(|&(name, values)| Row {
                name,
                better: None,
                unit: if name == GOODPUT {
                    Unit::Share
                } else {
                    Unit::Count
                },
                cells: values
                    .iter()
                    .map(|&v| Cell {
                        stats: Some(Stats {
                            mean: v,
                            min: v,
                            max: v,
                        }),
                        had: 1,
                        of: 1,
                    })
                    .collect(),
            })
            .collect();
        Summary { columns, rows }
    }

    fn three() -> Sweep {
        Sweep {
            spec: spec("k=1,2,3"),
            base: "a".into(),
            names: vec!["k=1".into(), "k=2".into(), "k=3".into()],
            text: String::new(),
        }
    }

    #[test]
    fn the_recommendation_rules_out_false_trips_then_breaks_ties() {
        let s = summary(&[
            (REACHED_FAILING, &[50.0, 40.0, 30.0]),
            (FALSE_TRIPS, &[1.0, 0.0, 0.0]),
            (GOODPUT, &[0.99, 0.98, 0.98]),
        ]);
        let line = three().recommend(&s);
        assert!(line.starts_with("recommended: k=3,"), "{line}");
        assert!(line.contains("(98.00%)"), "{line}");
        assert!(line.contains("among the values with no trips"), "{line}");
        assert!(line.contains("ties broken by the fewest calls"), "{line}");
        let all_trip = summary(&[
            (FALSE_TRIPS, &[2.0, 1.0, 1.0]),
            (GOODPUT, &[0.99, 0.5, 0.6]),
        ]);
        let line = three().recommend(&all_trip);
        assert!(line.starts_with("recommended: k=3,"), "{line}");
        assert!(line.contains("every value had some"), "{line}");
        assert!(line.contains("the first value wins"), "{line}");
        let no_goodput = summary(&[(FALSE_TRIPS, &[0.0, 0.0, 0.0])]);
        assert!(
            three()
                .recommend(&no_goodput)
                .starts_with("no recommendation")
        );
        let no_trips = summary(&[(GOODPUT, &[0.5, 0.9, 0.6])]);
        let line = three().recommend(&no_trips);
        assert!(line.starts_with("recommended: k=2,"), "{line}");
        assert!(line.contains("to rule values out by"), "{line}");
    }
}
