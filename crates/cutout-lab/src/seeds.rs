//! Many seeds of one scenario: every setting run on the scenario's seed, the next one, and so
//! on, and a table of each figure's mean and range over the seeds.
//!
//! ```no_run
//! use std::path::Path;
//!
//! let scenario = cutout_lab::Scenario::load(Path::new("scenarios/brownout.toml"))?;
//! let seeds = cutout_lab::seeds::run(&scenario, 5, &|_| {})?;
//! print!("{}", seeds.table());
//! # Ok::<(), String>(())
//! ```
//!
//! The table is generic over [`Metrics::figures`]: one row per figure (in the order the
//! figures come), one column per setting (in the order the runs give them). A cell reads
//! `mean (min-max)`, one number where every seed gave the same, and `, n of N` after it where
//! only `n` of the `N` seeds had the figure (no trip, no recovery in the others); `-` where
//! none had it.
//!
//! Seeds run one after another: each seed's [`Lab::run_with`] already spreads its settings
//! over the cores, and only the first seed's runs are kept (for the SVG), the others' metrics.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::report::{Metrics, Unit, unsigned_zero};
use crate::scenario::Scenario;
use crate::{Lab, Progress};

/// Every seed of a scenario run: the first seed's lab whole (for the SVG), and every seed's
/// metrics.
#[derive(Debug, Clone)]
pub struct Seeds<'a> {
    /// The run of the scenario's own seed, with its runs.
    pub first: Lab<'a>,
    /// The seeds, in run order: the scenario's seed, then each one more.
    pub seeds: Vec<u64>,
    /// The metrics of each seed (the first seed's included), one per setting.
    pub metrics: Vec<Vec<Metrics>>,
}

/// The most seeds one run takes (`--seeds`): every seed's metrics are kept for the table.
pub const MAX_SEEDS: u64 = 10_000;

/// The seeds `first`, `first + 1`, ..., `count` of them; an error when there are none, when
/// they run past `u64::MAX`, or when there are more than [`MAX_SEEDS`]. Checked before the
/// list is built.
pub fn seeds(first: u64, count: u64) -> Result<Vec<u64>, String> {
    if count == 0 {
        return Err("the number of seeds must be at least 1".into());
    }
    let Some(last) = first.checked_add(count - 1) else {
        return Err(format!(
            "{count} seeds from seed {first} run past the largest seed, {}",
            u64::MAX
        ));
    };
    if count > MAX_SEEDS {
        return Err(format!(
            "{count} seeds: at most {MAX_SEEDS} (every seed runs every setting, and its \
             figures are kept for the table)"
        ));
    }
    Ok((first..=last).collect())
}

/// Runs every setting of `scenario` on `count` seeds from `scenario.seed` on, telling
/// `progress` how far it has come over all of them (simulated nanoseconds done and in all,
/// summed over every seed's runs).
pub fn run<'a>(
    scenario: &'a Scenario,
    count: u64,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Seeds<'a>, String> {
    let seeds = seeds(scenario.seed, count)?;
    // One seed's total is only known from its first report; every seed has the same.
    let each = AtomicU64::new(0);
    let report = |index: u64, p: Progress| {
        each.store(p.total, Ordering::Relaxed);
        progress(Progress {
            done: p.total.saturating_mul(index).saturating_add(p.done),
            total: p.total.saturating_mul(count),
        });
    };
    let first = Lab::run_with(scenario, &|p| report(0, p));
    let mut metrics = vec![first.metrics.clone()];
    for (index, &seed) in seeds.iter().enumerate().skip(1) {
        let mut this = scenario.clone();
        this.seed = seed;
        let lab = Lab::run_with(&this, &|p| report(index as u64, p));
        metrics.push(lab.metrics);
    }
    let each = each.load(Ordering::Relaxed);
    progress(Progress {
        done: each.saturating_mul(count),
        total: each.saturating_mul(count),
    });
    Ok(Seeds {
        first,
        seeds,
        metrics,
    })
}

impl Seeds<'_> {
    /// The figures over the seeds.
    pub fn summary(&self) -> Summary {
        summarize(&self.metrics)
    }

    /// The table: the scenario's header, then one row per figure and one column per setting
    /// (see [`table`]).
    pub fn table(&self) -> String {
        table(&self.first.table(), &self.seeds, &self.metrics)
    }
}

/// One figure of one setting over the seeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// The mean, least and largest value over the seeds that had the figure; `None` when
    /// none had it.
    pub stats: Option<Stats>,
    /// How many seeds had the figure.
    pub had: usize,
    /// How many seeds ran the setting.
    pub of: usize,
}

/// The mean and range of a figure's values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// The mean.
    pub mean: f64,
    /// The least value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

/// One figure over every setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The figure's name ([`Figure::name`](crate::Figure::name)).
    pub name: &'static str,
    /// Whether larger is better ([`Figure::better`](crate::Figure::better)).
    pub better: Option<bool>,
    /// How its numbers read ([`Figure::unit`](crate::Figure::unit)).
    pub unit: Unit,
    /// One cell per column.
    pub cells: Vec<Cell>,
}

/// Every figure of every setting over the seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The settings, in the order the runs gave them.
    pub columns: Vec<String>,
    /// The figures, in the order [`Metrics::figures`] gave them.
    pub rows: Vec<Row>,
}

impl Summary {
    /// The row of the figure named `name`.
    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The index of the column of setting `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

/// Sums `metrics` (one list of settings per seed) up per setting and figure. Settings and
/// figures are matched by name, so a seed that lacks one (it cannot, today) counts as not
/// having it.
pub fn summarize(metrics: &[Vec<Metrics>]) -> Summary {
    let Values {
        columns,
        names,
        values,
    } = values(metrics);
    let rows = names
        .into_iter()
        .zip(values)
        .map(|((name, better, unit), row)| Row {
            name,
            better,
            unit,
            cells: row.iter().map(|v| cell(v)).collect(),
        })
        .collect();
    Summary { columns, rows }
}

/// Every seed's value of every figure of every setting, matched by name as [`summarize`]
/// matches them.
#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    /// The settings, in the order the runs gave them.
    pub columns: Vec<String>,
    /// The figures' names, whether larger is better, and their units, in table order.
    pub names: Vec<(&'static str, Option<bool>, Unit)>,
    /// `values[figure][setting][seed]`: `None` where that seed lacked the figure (or it was
    /// not finite).
    pub values: Vec<Vec<Vec<Option<f64>>>>,
}

/// The values of `metrics` (one list of settings per seed), per figure, setting and seed.
pub fn values(metrics: &[Vec<Metrics>]) -> Values {
    let mut columns: Vec<String> = Vec::new();
    let mut names: Vec<(&'static str, Option<bool>, Unit)> = Vec::new();
    // values[row][column]: each seed's value, `None` where that seed lacked the figure.
    let mut values: Vec<Vec<Vec<Option<f64>>>> = Vec::new();
    for seed in metrics {
        for m in seed {
            let c = match columns.iter().position(|c| *c == m.setting) {
                Some(c) => c,
                None => {
                    columns.push(m.setting.clone());
                    values.iter_mut().for_each(|row| row.push(Vec::new()));
                    columns.len() - 1
                }
            };
            for f in m.figures() {
                let r = match names.iter().position(|(n, _, _)| *n == f.name) {
                    Some(r) => r,
                    None => {
                        names.push((f.name, f.better, f.unit));
                        values.push(vec![Vec::new(); columns.len()]);
                        names.len() - 1
                    }
                };
                values[r][c].push(f.value.filter(|v| v.is_finite()));
            }
        }
    }
    Values {
        columns,
        names,
        values,
    }
}

fn cell(values: &[Option<f64>]) -> Cell {
    let had: Vec<f64> = values.iter().flatten().copied().collect();
    let stats = (!had.is_empty()).then(|| Stats {
        mean: had.iter().sum::<f64>() / had.len() as f64,
        min: had.iter().copied().fold(f64::INFINITY, f64::min),
        max: had.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    });
    Cell {
        stats,
        had: had.len(),
        of: values.len(),
    }
}

/// The decimals of a cell's mean and of its range: shares with two (of a percent), seconds
/// and rates with one, milliseconds with none (two below 10), counts with none (the mean
/// with one when it is not whole, two below 1), small rates (per 100 pod-hours) with one, or
/// three where every value is below 1.
fn decimals(s: &Stats, unit: Unit) -> (usize, usize) {
    let whole = |v: f64| v.fract() == 0.0;
    match unit {
        Unit::Share => (2, 2),
        Unit::Seconds | Unit::PerSecond => (1, 1),
        Unit::Millis if s.max < 10.0 => (2, 2),
        Unit::Millis => (0, 0),
        Unit::Count if whole(s.min) && whole(s.max) => (usize::from(!whole(s.mean)), 0),
        Unit::Count if s.min.abs().max(s.max.abs()) >= 1.0 => (1, 1),
        Unit::Count => (2, 2),
        Unit::Rate if whole(s.min) && whole(s.max) && whole(s.mean) => (0, 0),
        Unit::Rate if s.min.abs().max(s.max.abs()) >= 1.0 => (1, 1),
        Unit::Rate => (3, 3),
    }
}

/// A cell as the table prints it: `mean (min-max)`, one number when the range is a point,
/// then `, n of N` when only some seeds had the figure; `-` when none did.
pub fn format_cell(cell: &Cell, unit: Unit) -> String {
    let Some(s) = cell.stats else {
        return "-".into();
    };
    let (percent, scale) = if unit == Unit::Share {
        ("%", 100.0)
    } else {
        ("", 1.0)
    };
    let (mean, range) = decimals(&s, unit);
    let (min, max) = (
        unsigned_zero(format!("{:.range$}", scale * s.min)),
        unsigned_zero(format!("{:.range$}", scale * s.max)),
    );
    let mut out = unsigned_zero(format!("{:.mean$}{percent}", scale * s.mean));
    if min != max {
        // A range that starts below 0 (a regret a setting beat the oracle by) reads
        // `(-3.1 to 2.0)`: `-3.1-2.0` would not.
        let to = if min.starts_with('-') { " to " } else { "-" };
        let _ = write!(out, " ({min}{to}{max}{percent})");
    }
    if cell.had < cell.of {
        let _ = write!(out, ", {} of {}", cell.had, cell.of);
    }
    out
}

/// The seeds as the header says them.
fn seed_list(seeds: &[u64]) -> String {
    match seeds {
        [] => "no seed".into(),
        [one] => format!("seed {one}"),
        [first, .., last] => format!("seeds {first} to {last} ({} seeds)", seeds.len()),
    }
}

/// The scenario's header from `report`, the first seed's single-seed table ([`Lab::table`]):
/// its lines up to the first blank one, with `seed <first seed>` in the first line replaced by
/// all of `seeds`, and a legend when there are several.
pub fn header(report: &str, seeds: &[u64]) -> String {
    let list = seed_list(seeds);
    let own = format!("seed {}", seeds.first().copied().unwrap_or_default());
    let mut out = String::new();
    let mut said = false;
    for (i, line) in report.lines().take_while(|l| !l.is_empty()).enumerate() {
        if i == 0 && line.contains(&own) {
            out.push_str(&line.replacen(&own, &list, 1));
            said = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if !said {
        let _ = writeln!(out, "  {list}");
    }
    if seeds.len() > 1 {
        let _ = writeln!(
            out,
            "  each cell: mean (min-max) over the {n} seeds; one number where all agree; \
             \"k of {n}\" where only k had the figure",
            n = seeds.len()
        );
    }
    out
}

/// The rows of `summary` as a table, each figure printed in its unit.
pub fn grid(summary: &Summary) -> String {
    let cells: Vec<Vec<String>> = summary
        .rows
        .iter()
        .map(|row| row.cells.iter().map(|c| format_cell(c, row.unit)).collect())
        .collect();
    let label_width = summary.rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let widths: Vec<usize> = summary
        .columns
        .iter()
        .enumerate()
        .map(|(c, name)| {
            cells
                .iter()
                .filter_map(|row| row.get(c).map(String::len))
                .max()
                .unwrap_or(0)
                .max(name.len())
        })
        .collect();
    let mut out = format!("{:label_width$}", "");
    for (name, w) in summary.columns.iter().zip(&widths) {
        let _ = write!(out, "  {name:>w$}");
    }
    out.push('\n');
    for (row, line) in summary.rows.iter().zip(&cells) {
        let _ = write!(out, "{:label_width$}", row.name);
        for (cell, w) in line.iter().zip(&widths) {
            let _ = write!(out, "  {cell:>w$}");
        }
        out.push('\n');
    }
    out
}

/// The table of `metrics` (one list of settings per seed of `seeds`): the header (see
/// [`header`]), a blank line, then one row per figure and one column per setting. `report` is
/// the first seed's single-seed table ([`Lab::table`]): it gives the header.
pub fn table(report: &str, seeds: &[u64], metrics: &[Vec<Metrics>]) -> String {
    format!("{}\n{}", header(report, seeds), grid(&summarize(metrics)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The world of the lab's small unit-test scenarios, for `concat!` after a scenario's
    /// top-level keys: three pods against a small dependency, an outage from 20 s to 35 s.
    macro_rules! tiny_world {
        () => {
            r#"
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
        start = "20s"
        duration = "15s"
"#
        };
    }
    pub(crate) use tiny_world;

    /// A tiny scenario: three pods for a minute, an outage in the middle.
    pub(crate) const TINY: &str = concat!(
        "seed = 3\nduration = \"60s\"\ncompare = [\"b\", \"a\"]\n",
        tiny_world!(),
        r#"
        [breakers.instances.a]
        jitter = "none"
        [breakers.instances.b]
        break-duration = "5s"
    "#
    );

    #[test]
    fn seeds_count_up_and_stop_at_the_largest() {
        assert_eq!(seeds(7, 3).unwrap(), [7, 8, 9]);
        assert!(seeds(7, 0).is_err());
        assert!(seeds(u64::MAX - 1, 3).unwrap_err().contains("past"));
        assert_eq!(seeds(u64::MAX - 1, 2).unwrap(), [u64::MAX - 1, u64::MAX]);
        assert!(seeds(2, u64::MAX).unwrap_err().contains("past"));
        assert!(
            seeds(1, u64::MAX).unwrap_err().contains("at most"),
            "they fit: too many"
        );
        assert_eq!(seeds(1, MAX_SEEDS).unwrap().len() as u64, MAX_SEEDS);
        assert!(
            seeds(1, MAX_SEEDS + 1)
                .unwrap_err()
                .contains("at most 10000")
        );
    }

    #[test]
    fn cells_give_mean_range_and_how_many_had_it() {
        let c = cell(&[Some(10.0), None, Some(15.1), Some(11.8)]);
        let s = c.stats.unwrap();
        assert!((s.mean - 12.3).abs() < 1e-9, "{s:?}");
        assert_eq!((s.min, s.max, c.had, c.of), (10.0, 15.1, 3, 4));
        assert_eq!(format_cell(&c, Unit::Count), "12.3 (10.0-15.1), 3 of 4");
        let counts = cell(&[Some(10.0), Some(15.0), Some(12.0)]);
        assert_eq!(format_cell(&counts, Unit::Count), "12.3 (10-15)");
        let whole = cell(&[Some(10.0), Some(14.0)]);
        assert_eq!(format_cell(&whole, Unit::Count), "12 (10-14)");
        assert_eq!(format_cell(&c, Unit::Seconds), "12.3 (10.0-15.1), 3 of 4");
        let same = cell(&[Some(4.0), Some(4.0)]);
        assert_eq!(format_cell(&same, Unit::Count), "4");
        let none = cell(&[None, None]);
        assert_eq!(none.stats, None);
        assert_eq!(format_cell(&none, Unit::Count), "-");
        let shares = cell(&[Some(0.99), Some(0.995)]);
        assert_eq!(format_cell(&shares, Unit::Share), "99.25% (99.00-99.50%)");
        let small = cell(&[Some(0.25)]);
        assert_eq!(format_cell(&small, Unit::Count), "0.25");
        // A negative range reads apart from its dash; a value that rounds to zero loses its
        // sign.
        let below = cell(&[Some(-3.12), Some(2.0)]);
        assert_eq!(format_cell(&below, Unit::PerSecond), "-0.6 (-3.1 to 2.0)");
        let noise = cell(&[Some(-0.0004), Some(0.0002)]);
        assert_eq!(format_cell(&noise, Unit::PerSecond), "0.0");
        assert_eq!(format_cell(&cell(&[Some(-0.00001)]), Unit::Share), "0.00%");
        assert_eq!(Unit::PerSecond.show(-0.04), "0.0");
        assert_eq!(Unit::PerSecond.show(-0.06), "-0.1");
    }

    #[test]
    fn the_summary_matches_settings_and_figures_by_name() {
        let scenario = Scenario::from_toml(TINY, "tiny").unwrap();
        let lab = Lab::run(&scenario);
        let mut swapped = lab.metrics.clone();
        swapped.reverse();
        let summary = summarize(&[lab.metrics.clone(), swapped]);
        let columns: Vec<&str> = lab.metrics.iter().map(|m| m.setting.as_str()).collect();
        assert_eq!(summary.columns, columns);
        let figures = lab.metrics[0].figures();
        assert_eq!(summary.rows.len(), figures.len());
        for (row, f) in summary.rows.iter().zip(&figures) {
            assert_eq!(row.name, f.name);
            assert_eq!(row.cells[0].of, 2);
            // Both seeds gave the same numbers to the same setting.
            if let Some(s) = row.cells[0].stats {
                assert_eq!(s.min, s.max, "{}", row.name);
                assert_eq!(Some(s.mean), f.value, "{}", row.name);
            }
        }
    }

    #[test]
    fn many_seeds_report_over_all_of_them_and_repeat() {
        let scenario = Scenario::from_toml(TINY, "tiny").unwrap();
        let last = std::sync::Mutex::new(None);
        let runs = run(&scenario, 3, &|p| *last.lock().unwrap() = Some(p)).unwrap();
        assert_eq!(runs.seeds, [3, 4, 5]);
        assert_eq!(runs.metrics.len(), 3);
        assert_eq!(runs.metrics[0], runs.first.metrics);
        let last = last.into_inner().unwrap().unwrap();
        assert_eq!(last.done, last.total);
        assert!(last.total > 0);
        // Seed 4 of the three is seed 4 run alone.
        let mut four = scenario.clone();
        four.seed = 4;
        assert_eq!(runs.metrics[1], Lab::run(&four).metrics);
        let table = runs.table();
        assert!(table.contains("seeds 3 to 5 (3 seeds)"), "{table}");
        assert!(table.contains("mean (min-max)"), "{table}");
        assert_eq!(table, run(&scenario, 3, &|_| {}).unwrap().table());
        for f in runs.first.metrics[0].figures() {
            assert!(table.contains(f.name), "{} missing from\n{table}", f.name);
        }
    }
}
