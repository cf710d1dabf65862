//! The README's claims against the lab's own JSON: every claim of `claims/claims.toml` is
//! decided on the committed 20-seed runs of `claims/runs/` (made by `claims/run.sh`, the
//! CLI's `--json`, gzipped), on the scenario as shipped and against a dependency that sheds,
//! and must come out as the claim says it does; the README's table of claims must say the
//! same; and a committed run must be what the lab makes now (its first seed is run again).

mod common;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn claims_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("claims")
}

/// One claim of `claims.toml`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Claim {
    section: String,
    says: String,
    scenario: String,
    figure: String,
    a: String,
    b: Option<String>,
    rule: Rule,
    value: Option<f64>,
    least_ratio: Option<f64>,
    greatest_ratio: Option<f64>,
    plain: bool,
    shedding: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Rule {
    Better,
    AtMost,
    AtLeast,
    Equal,
}

#[derive(serde::Deserialize)]
struct File {
    claim: Vec<Claim>,
}

fn claims() -> Vec<Claim> {
    let text = std::fs::read_to_string(claims_dir().join("claims.toml")).unwrap();
    toml::from_str::<File>(&text).unwrap().claim
}

/// A committed run: `<scenario>.json.gz` or `<scenario>+shedding.json.gz`.
fn run(name: &str) -> Value {
    let path = claims_dir().join("runs").join(format!("{name}.json.gz"));
    let file = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (make it with claims/run.sh)", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Each setting's values of `figure` in `run`, seed by seed.
fn values<'a>(run: &'a Value, figure: &str, setting: &str) -> Result<Vec<Option<f64>>, String> {
    let settings: Vec<&str> = run["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let column = settings
        .iter()
        .position(|s| *s == setting)
        .ok_or_else(|| format!("no setting {setting:?} in {settings:?}"))?;
    let figure: &'a Value = run["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == figure)
        .ok_or_else(|| format!("no figure {figure:?}"))?;
    Ok(figure["values"][column]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::as_f64)
        .collect())
}

/// Whether `figure` is better higher (`Some(true)`), lower, or neither.
fn higher_is_better(run: &Value, figure: &str) -> Option<bool> {
    let figure = run["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == figure)?;
    figure["better"].as_str().map(|b| b == "higher")
}

/// Whether `claim` holds on `run`, with the seed that decided it when it does not; an error
/// for a claim that names what the run does not hold.
fn holds(claim: &Claim, run: &Value) -> Result<(bool, String), String> {
    let seeds: Vec<u64> = run["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    let a = values(run, &claim.figure, &claim.a)?;
    let b = match &claim.b {
        Some(b) => Some(values(run, &claim.figure, b)?),
        None => None,
    };
    for (i, &seed) in seeds.iter().enumerate() {
        let Some(x) = a[i] else {
            // A seed without the figure (no trip, no recovery) decides nothing against it.
            if claim.rule == Rule::AtLeast {
                return Ok((false, format!("seed {seed}: {} has no value", claim.a)));
            }
            continue;
        };
        let y = b.as_ref().map(|b| b[i]);
        let fails = match claim.rule {
            Rule::AtMost => x > claim.value.ok_or("at-most needs a value")?,
            Rule::AtLeast => x < claim.value.ok_or("at-least needs a value")?,
            Rule::Equal => {
                let y = y.ok_or("equal needs b")?;
                y != Some(x)
            }
            Rule::Better => {
                let Some(y) = y.ok_or("better needs b")? else {
                    continue;
                };
                let higher = higher_is_better(run, &claim.figure)
                    .ok_or_else(|| format!("{}: neither direction is better", claim.figure))?;
                let better = if higher { x > y } else { x < y };
                let ratio = x / y;
                !better
                    || claim
                        .least_ratio
                        .is_some_and(|r| ratio.is_nan() || ratio < r)
                    || claim
                        .greatest_ratio
                        .is_some_and(|r| ratio.is_nan() || ratio > r)
            }
        };
        if fails {
            let y = y
                .flatten()
                .map_or(String::new(), |y| format!(" against {y}"));
            return Ok((false, format!("seed {seed}: {x}{y}")));
        }
    }
    Ok((true, String::new()))
}

/// What `claim` says of `variant`, and the run it reads.
fn variants(claim: &Claim) -> [(&'static str, bool, String); 2] {
    [
        ("plain", claim.plain, claim.scenario.clone()),
        (
            "shedding",
            claim.shedding,
            format!("{}+shedding", claim.scenario),
        ),
    ]
}

#[test]
fn every_claim_comes_out_as_it_says_on_the_shipped_and_the_shedding_dependency() {
    let mut runs = BTreeMap::new();
    let mut wrong = Vec::new();
    for claim in claims() {
        for (variant, expected, name) in variants(&claim) {
            let run = runs.entry(name.clone()).or_insert_with(|| run(&name));
            match holds(&claim, run) {
                Err(e) => wrong.push(format!("§{} {}: {e}", claim.section, claim.says)),
                Ok((held, why)) if held != expected => wrong.push(format!(
                    "§{} {} ({variant}): says {expected}, the run {held} {why}",
                    claim.section, claim.says
                )),
                Ok(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A claim that its run could not break proves nothing: each rule must be able to fail.
#[test]
fn a_claim_turned_around_fails() {
    let claim = claims()
        .into_iter()
        .find(|c| c.rule == Rule::Better)
        .unwrap();
    let run = run(&claim.scenario);
    assert_eq!(holds(&claim, &run).unwrap().0, claim.plain);
    let turned = Claim {
        a: claim.b.clone().unwrap(),
        b: Some(claim.a.clone()),
        least_ratio: None,
        greatest_ratio: None,
        ..claim
    };
    assert_eq!(holds(&turned, &run).unwrap().0, !turned.plain);
    let unknown = Claim {
        figure: "no such figure".into(),
        ..turned
    };
    assert!(holds(&unknown, &run).is_err());
}

#[test]
fn every_run_holds_20_seeds_and_the_shedding_runs_shed_at_half_the_callers_timeout() {
    let mut names: Vec<String> = claims().into_iter().map(|c| c.scenario).collect();
    names.dedup();
    for name in names {
        let plain = run(&name);
        let shedding = run(&format!("{name}+shedding"));
        assert_eq!(plain["scenario"], name.as_str());
        assert_eq!(plain["seeds"].as_array().unwrap().len(), 20, "{name}");
        assert_eq!(
            plain["seeds"], shedding["seeds"],
            "{name}: the pairs share seeds"
        );
        assert!(plain.get("set").is_none(), "{name}");
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.toml")),
        )
        .unwrap();
        let timeout = if text.contains("timeout = \"2s\"") {
            "1s"
        } else {
            "500ms"
        };
        assert_eq!(
            shedding["set"]["dependency.max-queue-wait"], timeout,
            "{name}: sheds at half its callers' timeout"
        );
    }
}

/// The README's table of claims (section 15) is this table, row for row: what each claim
/// says of the shipped and the shedding dependency, and its figures from the runs. On a
/// mismatch the whole table as the runs give it is printed, to paste over the README's.
#[test]
fn the_readme_table_of_claims_says_what_claims_toml_says() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let word = |held: bool| if held { "holds" } else { "**does not hold**" };
    let mut runs = BTreeMap::new();
    let mut table = vec![
        "| § | claim | scenario | as shipped | shedding | figures, as shipped | figures, shedding |"
            .to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for claim in claims() {
        let mut cells = Vec::new();
        for (_, _, name) in variants(&claim) {
            let run = runs.entry(name.clone()).or_insert_with(|| run(&name));
            cells.push(figures(&claim, run));
        }
        table.push(format!(
            "| {} | {} | `{}` | {} | {} | {} | {} |",
            claim.section,
            claim.says,
            claim.scenario,
            word(claim.plain),
            word(claim.shedding),
            cells[0],
            cells[1]
        ));
    }
    let table = table.join("\n");
    assert!(
        readme.contains(&table),
        "the README's table of claims is not the runs'; as the runs give it:\n{table}"
    );
}

/// A claim's figures cell: for a comparison, the mean of `a` / the mean of `b` over the seeds
/// where both have the figure, and the least and greatest per-seed ratio; for a bound, the
/// range of `a` (one value when it never moved).
fn figures(claim: &Claim, run: &Value) -> String {
    let share = run["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == claim.figure.as_str())
        .is_some_and(|f| f["unit"] == "share");
    let show = |v: f64| shown(v, share);
    let a = values(run, &claim.figure, &claim.a).unwrap();
    let Some(b) = &claim.b else {
        let a: Vec<f64> = a.into_iter().flatten().collect();
        let (least, most) = a
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, m), &x| (l.min(x), m.max(x)));
        return if least == most {
            show(least)
        } else {
            format!("{}–{}", show(least), show(most))
        };
    };
    let b = values(run, &claim.figure, b).unwrap();
    let pairs: Vec<(f64, f64)> = a
        .iter()
        .zip(&b)
        .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
        .collect();
    let n = pairs.len() as f64;
    let mean_a = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_b = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let means = format!("{} / {}", show(mean_a), show(mean_b));
    if claim.rule == Rule::Equal {
        return means;
    }
    let ratios: Vec<f64> = pairs
        .iter()
        .filter(|p| p.1 != 0.0)
        .map(|p| p.0 / p.1)
        .collect();
    if ratios.is_empty() {
        return means;
    }
    let least = ratios.iter().copied().fold(f64::MAX, f64::min);
    let most = ratios.iter().copied().fold(f64::MIN, f64::max);
    format!("{means} (×{}–{})", significant(least), significant(most))
}

/// A figure as the table writes it: a share in percent to 0.01%; from 100 up, whole, with
/// thousands separated; from 10, one decimal; from 1, two; below, three significant digits.
fn shown(v: f64, share: bool) -> String {
    if share {
        return format!("{:.2}%", 100.0 * v);
    }
    if v.abs() >= 100.0 {
        return common::thousands(v, 0);
    }
    if v.abs() >= 10.0 {
        return format!("{v:.1}");
    }
    if v.abs() >= 1.0 {
        return format!("{v:.2}");
    }
    significant(v)
}

/// Three significant digits, trailing zeros dropped (`0.13`, `404`, `1`); from 1,000 or
/// below 0.0001, in scientific notation (`1.23e+03`).
fn significant(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exponent = v.abs().log10().floor() as i32;
    let trim = |text: String| {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text
        }
    };
    if (-4..3).contains(&exponent) {
        // Rounding may carry into a new digit (9.996 → 10.0): the digits follow the
        // rounded value, as printf's %g does.
        let decimals = (2 - exponent).max(0) as usize;
        let text = format!("{v:.decimals$}");
        let rounded: f64 = text.parse().unwrap();
        let again = rounded.abs().log10().floor() as i32;
        if again != exponent && (-4..3).contains(&again) {
            let decimals = (2 - again).max(0) as usize;
            return trim(format!("{v:.decimals$}"));
        }
        return trim(text);
    }
    let text = format!("{v:.2e}");
    let (mantissa, power) = text.split_once('e').unwrap();
    let power: i32 = power.parse().unwrap();
    format!(
        "{}e{}{:02}",
        trim(mantissa.to_owned()),
        if power < 0 { '-' } else { '+' },
        power.abs()
    )
}

#[test]
fn figures_are_written_as_the_table_writes_them() {
    assert_eq!(shown(360_124.0, false), "360,124");
    assert_eq!(shown(873.4, false), "873");
    assert_eq!(shown(94.71, false), "94.7");
    assert_eq!(shown(8.0, false), "8.00");
    assert_eq!(shown(0.9996, true), "99.96%");
    assert_eq!(significant(0.13), "0.13");
    assert_eq!(significant(0.0973), "0.0973");
    assert_eq!(significant(0.00245), "0.00245");
    assert_eq!(significant(404.2), "404");
    assert_eq!(significant(1.0), "1");
    assert_eq!(significant(1234.0), "1.23e+03");
}

/// The committed runs are the lab's: the first seed of two scenarios, plain and shedding,
/// run again here, gives the committed figures exactly (the lab is deterministic per seed).
#[test]
fn a_committed_run_is_what_the_lab_makes_now() {
    for (name, set) in [
        ("outage-0.1rps", None),
        ("outage-0.1rps", Some("500ms")),
        ("partial-outage", Some("500ms")),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.toml"));
        let mut text = std::fs::read_to_string(&path).unwrap();
        let mut committed = name.to_owned();
        if let Some(wait) = set {
            text =
                cutout_lab::load_sweep::with_key(&text, "dependency.max-queue-wait", wait).unwrap();
            committed.push_str("+shedding");
        }
        let scenario = cutout_lab::Scenario::from_toml(&text, name).unwrap();
        let runs = cutout_lab::seeds::run(&scenario, 1, &|_| {}).unwrap();
        let now = cutout_lab::json::figures(&scenario.name, &runs.seeds, &runs.metrics);
        // Through the text, as the committed run was: serde_json reads a float back to within
        // an ulp, not always to its bits, so both sides are read from their written text.
        let now: Value = serde_json::from_str(&serde_json::to_string(&now).unwrap()).unwrap();
        let then = run(&committed);
        assert_eq!(now["settings"], then["settings"], "{committed}");
        let (now, then) = (
            now["figures"].as_array().unwrap(),
            then["figures"].as_array().unwrap(),
        );
        assert_eq!(now.len(), then.len(), "{committed}");
        for (now, then) in now.iter().zip(then) {
            assert_eq!(now["name"], then["name"]);
            let figure = now["name"].as_str().unwrap();
            for (column, (now, then)) in now["values"]
                .as_array()
                .unwrap()
                .iter()
                .zip(then["values"].as_array().unwrap())
                .enumerate()
            {
                assert_eq!(
                    now[0], then[0],
                    "{committed}: {figure} of column {column}, seed {}: remake claims/runs \
                     with claims/run.sh",
                    runs.seeds[0]
                );
            }
        }
    }
}
