//! A run's figures as JSON (`--json OUT.json`): every seed's value of every figure of every setting, and each pair of settings compared seed by seed, so a claim "in every seed" can be checked exactly.
//!
//! The text table prints `mean (min-max)` over the seeds, and where two settings' ranges
//! overlap it cannot say whether one beat the other in every seed, nor by how much at least:
//! two ranges of 7.0–9.1 and 1.0 say "at least 7.0×" although every seed may have given 7.7×.
//! The JSON keeps the seeds apart:
//!
//! ```json
//! {
//!   "scenario": "brownout",
//!   "seeds": [42, 43],
//!   "settings": ["no breaker", "defaults"],
//!   "figures": [
//!     { "name": "requests that succeeded", "unit": "share", "better": "higher",
//!       "values": [[0.71, 0.70], [0.93, 0.94]] }
//!   ],
//!   "paired": [
//!     { "figure": "requests that succeeded", "a": "defaults", "b": "no breaker",
//!       "seeds": 2, "a_better": 2, "b_better": 0, "ties": 0,
//!       "least_difference": 0.22, "greatest_difference": 0.24,
//!       "least_ratio": 1.31, "greatest_ratio": 1.34 }
//!   ]
//! }
//! ```
//!
//! - `values[setting][seed]`, in the order of `settings` and `seeds`; `null` where that seed
//!   lacked the figure (no trip, no recovery).
//! - `unit` is `count`, `share` (in [0, 1]), `seconds`, `millis`, `per_second` or `rate`;
//!   `better` is `higher`, `lower` or `null` (neither).
//! - `paired` holds one entry per figure and unordered pair of settings (`a` the later
//!   setting, `b` the earlier, so the first setting, usually the no-breaker baseline, is a
//!   `b`), over the seeds where both had the figure (`seeds`): in how many `a` was better,
//!   `b` was, or they tied (by `better`; a figure with neither direction counts ties only
//!   where equal, and splits the rest by larger into `a_better`), and the least and greatest
//!   of `a − b` and of `a / b` (the ratios `null` where some `b` is zero).

use serde_json::{Value, json};

use crate::report::{Metrics, Unit};
use crate::seeds::values;

/// The JSON of `metrics` (one list of settings per seed, in the order of `seeds`) of the
/// scenario named `scenario` (see the [module docs](self)).
pub fn figures(scenario: &str, seeds: &[u64], metrics: &[Vec<Metrics>]) -> Value {
    let values = values(metrics);
    let figures: Vec<Value> = values
        .names
        .iter()
        .zip(&values.values)
        .map(|(&(name, better, unit), row)| {
            json!({
                "name": name,
                "unit": unit_name(unit),
                "better": better_name(better),
                "values": row,
            })
        })
        .collect();
    let mut paired = Vec::new();
    for (&(name, better, _), row) in values.names.iter().zip(&values.values) {
        for a in 0..values.columns.len() {
            for b in 0..a {
                paired.push(pair(
                    name,
                    better,
                    (&values.columns[a], &row[a]),
                    (&values.columns[b], &row[b]),
                ));
            }
        }
    }
    json!({
        "scenario": scenario,
        "seeds": seeds,
        "settings": values.columns,
        "figures": figures,
        "paired": paired,
    })
}

/// Settings `a` and `b` compared on one figure, seed by seed.
fn pair(
    figure: &str,
    better: Option<bool>,
    (a_name, a): (&str, &[Option<f64>]),
    (b_name, b): (&str, &[Option<f64>]),
) -> Value {
    let both: Vec<(f64, f64)> = a
        .iter()
        .zip(b)
        .filter_map(|(a, b)| Some(((*a)?, (*b)?)))
        .collect();
    let (mut a_better, mut b_better, mut ties) = (0, 0, 0);
    for &(x, y) in &both {
        let a_wins = match better {
            Some(false) => x < y,
            _ => x > y,
        };
        if x == y {
            ties += 1;
        } else if a_wins {
            a_better += 1;
        } else {
            b_better += 1;
        }
    }
    let differences: Vec<f64> = both.iter().map(|(x, y)| x - y).collect();
    let ratios: Option<Vec<f64>> = both
        .iter()
        .map(|(x, y)| (*y != 0.0).then(|| x / y))
        .collect();
    let least = |v: &[f64]| v.iter().copied().reduce(f64::min);
    let greatest = |v: &[f64]| v.iter().copied().reduce(f64::max);
    let ratios = ratios.unwrap_or_default();
    json!({
        "figure": figure,
        "a": a_name,
        "b": b_name,
        "seeds": both.len(),
        "a_better": a_better,
        "b_better": b_better,
        "ties": ties,
        "least_difference": least(&differences),
        "greatest_difference": greatest(&differences),
        "least_ratio": least(&ratios),
        "greatest_ratio": greatest(&ratios),
    })
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Count => "count",
        Unit::Share => "share",
        Unit::Seconds => "seconds",
        Unit::Millis => "millis",
        Unit::PerSecond => "per_second",
        Unit::Rate => "rate",
    }
}

fn better_name(better: Option<bool>) -> Option<&'static str> {
    better.map(|higher| if higher { "higher" } else { "lower" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_counts_the_seeds_each_setting_won_and_its_least_margin() {
        let a = [Some(0.9), Some(0.8), None, Some(0.5)];
        let b = [Some(0.5), Some(0.8), Some(0.1), Some(0.6)];
        let p = pair("goodput", Some(true), ("defaults", &a), ("none", &b));
        assert_eq!(p["seeds"], 3, "the seed without a's figure is left out");
        assert_eq!(
            (&p["a_better"], &p["b_better"], &p["ties"]),
            (&json!(1), &json!(1), &json!(1))
        );
        let least = p["least_difference"].as_f64().unwrap();
        assert!((least - -0.1).abs() < 1e-9, "{least}");
        let greatest = p["greatest_ratio"].as_f64().unwrap();
        assert!((greatest - 1.8).abs() < 1e-9, "{greatest}");
        // Lower is better: the same numbers, the other way.
        let p = pair("p99", Some(false), ("defaults", &a), ("none", &b));
        assert_eq!((&p["a_better"], &p["b_better"]), (&json!(1), &json!(1)));
        let p = pair(
            "p99",
            Some(false),
            ("defaults", &[Some(1.0)]),
            ("none", &[Some(2.0)]),
        );
        assert_eq!(p["a_better"], 1);
    }

    #[test]
    fn a_ratio_against_zero_is_null_and_no_common_seed_gives_nulls() {
        let p = pair("trips", None, ("a", &[Some(1.0)]), ("b", &[Some(0.0)]));
        assert!(p["least_ratio"].is_null());
        assert_eq!(p["least_difference"], 1.0);
        let p = pair("trips", None, ("a", &[None]), ("b", &[Some(0.0)]));
        assert_eq!(p["seeds"], 0);
        assert!(p["least_difference"].is_null());
    }
}
