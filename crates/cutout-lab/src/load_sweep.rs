//! Sweeps over a load key (`fleet.rate=10,20,40`, `dependency.capacity=200,400`,
//! `fleet.pods=10,100`): the whole scenario, every compared setting, once per value, so the
//! report shows whether a setting that wins at one load still wins at another.
//!
//! A breaker key's sweep ([`crate::sweep`]) makes the values columns of one run: the callers
//! and the dependency are the same for each. A load key changes the callers or the dependency
//! themselves, so each value is a run of its own, on the same seeds, and the sweep prints each
//! value's table and then the headline figures side by side: one row per value, one column per
//! setting. There is no recommendation: the load is not a choice, and a setting is the one to
//! keep when it holds across the loads it will meet.
//!
//! The key is `section.key` as the scenario file writes it (`[fleet] rate = 20` is
//! `fleet.rate`), for the sections that describe the load and the dependency (`fleet`,
//! `dependency`, `connections`, `saturation`); each variant is read as any scenario is, so a
//! bad value fails with the lab's own error for that key.

use std::fmt::Write as _;

use toml::{Table, Value};

use crate::scenario::Scenario;
use crate::seeds::{self, Seeds};
use crate::sweep::{FALSE_TRIPS, GOODPUT, REACHED_FAILING, Spec, value};

/// The sections a load key may be in.
pub const SECTIONS: [&str; 4] = ["fleet", "dependency", "connections", "saturation"];

/// The figures shown side by side.
const HEADLINES: [&str; 4] = [
    GOODPUT,
    FALSE_TRIPS,
    REACHED_FAILING,
    "refused calls that would have succeeded",
];

/// A load key's variants of a scenario file.
#[derive(Debug, Clone)]
pub struct LoadSweep {
    /// The spec (its key is `section.key`).
    pub spec: Spec,
    /// Each value's scenario file, in the values' order.
    pub texts: Vec<String>,
}

/// The scenario file `text` with the load key `section.key` set to `v` (read as a sweep's
/// value is): what `--set dependency.max-queue-wait=500ms` runs. The variant is checked when
/// it is read as a scenario, as a sweep's are.
pub fn with_key(text: &str, section_key: &str, v: &str) -> Result<String, String> {
    let (section, key) = load_key(section_key)?;
    let doc: Table = toml::from_str(text).map_err(|e| e.to_string())?;
    set_in(doc, section, key, v)
}

/// `section.key` split, if it names a key of one of the [`SECTIONS`].
fn load_key(section_key: &str) -> Result<(&str, &str), String> {
    let Some((section, key)) = section_key.split_once('.') else {
        return Err(format!(
            "{section_key}: a load key is section.key (fleet.rate)"
        ));
    };
    if section == "breakers" {
        return Err(format!(
            "{section_key}: a breaker key is swept without its section (--sweep {key}=…)"
        ));
    }
    if !SECTIONS.contains(&section) || key.contains('.') {
        return Err(format!(
            "{section_key}: a load key is one of [{}]'s, as section.key (fleet.rate, \
             dependency.capacity)",
            SECTIONS.join("], [")
        ));
    }
    Ok((section, key))
}

/// `doc` with `[section] key = v`, as TOML text.
fn set_in(mut doc: Table, section: &str, key: &str, v: &str) -> Result<String, String> {
    let table = doc
        .entry(section)
        .or_insert_with(|| Value::Table(Table::new()));
    let Value::Table(table) = table else {
        return Err(format!("[{section}] is not a table"));
    };
    table.insert(key.to_owned(), value(v));
    toml::to_string(&doc).map_err(|e| e.to_string())
}

impl LoadSweep {
    /// Whether `spec` sweeps a load key (`section.key`) rather than a breaker key.
    pub fn is_load(spec: &Spec) -> bool {
        spec.key.contains('.')
    }

    /// Builds the variants of the scenario file `text`.
    pub fn build(text: &str, spec: Spec) -> Result<LoadSweep, String> {
        let (section, key) = load_key(&spec.key)?;
        let doc: Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let texts = spec
            .values
            .iter()
            .map(|v| set_in(doc.clone(), section, key, v))
            .collect::<Result<_, _>>()?;
        Ok(LoadSweep { spec, texts })
    }

    /// Each value's scenario, named `default_name` unless the file names it; a value the
    /// lab refuses fails with its error, naming the value.
    pub fn scenarios(&self, default_name: &str) -> Result<Vec<Scenario>, String> {
        self.texts
            .iter()
            .zip(&self.spec.values)
            .map(|(text, v)| {
                Scenario::from_toml(text, default_name)
                    .map_err(|e| format!("--sweep {}={v}: {e}", self.spec.key))
            })
            .collect()
    }

    /// The report of `runs` (one per value, in order): each value's table, then the headline
    /// figures with one row per value and one column per setting.
    pub fn table(&self, runs: &[Seeds]) -> String {
        let mut out = String::new();
        for (v, run) in self.spec.values.iter().zip(runs) {
            let _ = writeln!(out, "## {} = {v}\n", self.spec.key);
            out.push_str(&run.table());
            out.push('\n');
        }
        let Some(first) = runs.first() else {
            return out;
        };
        let columns = first.summary().columns;
        let _ = writeln!(
            out,
            "## {} across {}: the headline figures (mean (min-max) over the seeds)\n",
            self.spec.key,
            self.spec.values.join(", ")
        );
        for figure in HEADLINES {
            let _ = writeln!(
                out,
                "{figure}\n| {} | {} |\n|---|{}",
                self.spec.key,
                columns.join(" | "),
                "---|".repeat(columns.len())
            );
            for (v, run) in self.spec.values.iter().zip(runs) {
                let summary = run.summary();
                let cells: Vec<String> = columns
                    .iter()
                    .map(|c| match (summary.row(figure), summary.column(c)) {
                        (Some(row), Some(i)) => row
                            .cells
                            .get(i)
                            .map_or("-".into(), |cell| seeds::format_cell(cell, row.unit)),
                        _ => "-".into(),
                    })
                    .collect();
                let _ = writeln!(out, "| {v} | {} |", cells.join(" | "));
            }
            out.push('\n');
        }
        out
    }
}
