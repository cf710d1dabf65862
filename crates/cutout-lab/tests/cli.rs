//! The binary: prints the report, writes the SVG, and prints the same thing twice; its flags
//! (`--seed`, `--seeds`, `--sweep`, `--version`, `--help`) and its errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::TINY_SCENARIO as SCENARIO;

/// A fresh directory with the tiny scenario in it, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("cutout-lab-cli-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tiny.toml"), SCENARIO).unwrap();
        Dir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn lab(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cutout-lab"));
    for a in args {
        command.arg(a);
    }
    command.output().unwrap()
}

/// Runs the tiny scenario with `flags`, writing the SVG to `svg`, and returns stdout.
fn report(dir: &Dir, svg: &str, flags: &[&str]) -> String {
    let (scenario, svg) = (dir.join("tiny.toml"), dir.join(svg));
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&scenario, &"--svg", &svg];
    args.extend(flags.iter().map(|f| f as &dyn AsRef<std::ffi::OsStr>));
    let out = lab(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether `line` has a range cell such as `(10-15)` or `(98.50-99.60%)`.
fn has_range(line: &str) -> bool {
    line.split('(').skip(1).any(|rest| {
        rest.split_once(')').is_some_and(|(inside, _)| {
            inside.split_once('-').is_some_and(|(a, b)| {
                let number =
                    |s: &str| !s.is_empty() && s.trim_end_matches('%').parse::<f64>().is_ok();
                number(a) && number(b)
            })
        })
    })
}

#[test]
fn the_binary_is_deterministic_and_writes_the_svg() {
    let dir = Dir::new("single");
    let first = report(&dir, "a.svg", &[]);
    let second = report(&dir, "b.svg", &[]);
    assert!(
        first.contains("most probes reaching it in any 1 s"),
        "{first}"
    );
    assert_eq!(
        first.replace("a.svg", "b.svg"),
        second,
        "same seed, same output"
    );
    let a = std::fs::read_to_string(dir.join("a.svg")).unwrap();
    assert!(a.starts_with("<svg"), "{}", &a[..40.min(a.len())]);
    assert_eq!(a, std::fs::read_to_string(dir.join("b.svg")).unwrap());
    let missing = lab(&[&dir.join("missing.toml")]);
    assert!(!missing.status.success());
}

/// The plot and the table count the same thing by the same name: each column's "requests that
/// succeeded" in the SVG's legend is the report's row of that name, cell for cell.
#[test]
fn the_plot_and_the_table_count_the_same_requests() {
    let dir = Dir::new("same-count");
    let table = report(&dir, "a.svg", &[]);
    let row = table
        .lines()
        .find(|line| line.starts_with("requests that succeeded "))
        .unwrap_or_else(|| panic!("no row in {table}"));
    let cells: Vec<&str> = row["requests that succeeded".len()..]
        .split_whitespace()
        .collect();
    let requests = table
        .lines()
        .find_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["requests", first, ..] => first.parse::<u64>().ok(),
                _ => None,
            },
        )
        .unwrap_or_else(|| panic!("no requests row in {table}"));
    let svg = std::fs::read_to_string(dir.join("a.svg")).unwrap();
    let legends: Vec<&str> = svg
        .match_indices("requests that succeeded: ")
        .map(|(at, key)| {
            let rest = &svg[at + key.len()..];
            &rest[..rest.find(' ').unwrap()]
        })
        .collect();
    // The no-breaker column, the two settings and the oracle.
    assert_eq!(cells.len(), 4, "{row}");
    assert_eq!(legends, cells, "the SVG's legends against the report's row");
    // Of every request the report counts, not of the attempts that finished.
    let of = format!("% of {}", {
        let digits = requests.to_string();
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        grouped
    });
    assert_eq!(svg.matches(&of).count(), 4, "{of}");
    assert!(
        !svg.contains("finished"),
        "attempts are not what the health row counts"
    );
}

#[test]
fn seed_overrides_the_scenarios_seed() {
    let dir = Dir::new("seed");
    let own = report(&dir, "a.svg", &[]);
    assert!(own.contains(", seed 2,"), "{own}");
    let five = report(&dir, "a.svg", &["--seed", "5"]);
    assert!(five.contains(", seed 5,"), "{five}");
    assert_eq!(five, report(&dir, "a.svg", &["--seed=5"]));
    assert_ne!(
        own.replace("seed 2", "seed 5"),
        five,
        "another seed, other numbers"
    );
}

#[test]
fn many_seeds_give_mean_and_range_and_repeat() {
    let dir = Dir::new("seeds");
    let first = report(&dir, "a.svg", &["--seeds", "3"]);
    assert!(first.contains("seeds 2 to 4 (3 seeds)"), "{first}");
    assert!(first.contains("mean (min-max)"), "{first}");
    assert!(first.lines().any(has_range), "no range in\n{first}");
    assert!(first.contains("timeline of seed 2 only: "), "{first}");
    let svg = std::fs::read_to_string(dir.join("a.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    let second = report(&dir, "a.svg", &["--seeds", "3"]);
    assert_eq!(first, second, "same seeds, same output");
    let later = report(&dir, "a.svg", &["--seeds", "2", "--seed", "10"]);
    assert!(later.contains("seeds 10 to 11 (2 seeds)"), "{later}");
}

#[test]
fn a_sweep_compares_each_value_and_recommends_one() {
    let dir = Dir::new("sweep");
    let out = report(&dir, "a.svg", &["--sweep", "break-duration=5s,30s"]);
    let header = out
        .lines()
        .find(|l| l.contains("break-duration=5s"))
        .unwrap_or_else(|| panic!("no column in\n{out}"));
    assert!(header.contains("break-duration=30s"), "{out}");
    assert!(
        out.contains("sweep of break-duration over 5s, 30s, each on the settings of [breakers.instances.equal]"),
        "{out}"
    );
    let recommended = out
        .lines()
        .find(|l| l.starts_with("recommended: "))
        .unwrap_or_else(|| panic!("no recommendation in\n{out}"));
    assert!(
        recommended.starts_with("recommended: break-duration=5s,")
            || recommended.starts_with("recommended: break-duration=30s,"),
        "{recommended}"
    );
    assert!(recommended.contains("chosen by"), "{recommended}");
    // The compared settings are replaced by the sweep's.
    assert!(!header.split_whitespace().any(|c| c == "none"), "{header}");
    let both = report(
        &dir,
        "a.svg",
        &["--sweep=break-duration=5s,30s", "--seeds=2"],
    );
    assert!(both.contains("seeds 2 to 3 (2 seeds)"), "{both}");
    assert!(both.contains("recommended: break-duration="), "{both}");
    assert_eq!(
        both,
        report(
            &dir,
            "a.svg",
            &["--seeds", "2", "--sweep", "break-duration=5s,30s"]
        )
    );
}

#[test]
fn a_load_key_sweep_runs_the_scenario_once_per_value() {
    let dir = Dir::new("load-sweep");
    let out = report(&dir, "a.svg", &["--sweep", "fleet.rate=5,20"]);
    // Each value's own table, its header saying the load it ran...
    let five = out
        .find("## fleet.rate = 5\n")
        .unwrap_or_else(|| panic!("{out}"));
    let twenty = out
        .find("## fleet.rate = 20\n")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(five < twenty, "{out}");
    assert!(out[five..twenty].contains("5 pods x 5 req/s"), "{out}");
    assert!(out[twenty..].contains("5 pods x 20 req/s"), "{out}");
    // ...then the headline figures with a row per value and the settings as columns.
    let side = &out[out
        .find("## fleet.rate across 5, 20")
        .unwrap_or_else(|| panic!("{out}"))..];
    assert!(
        side.contains("| fleet.rate | no breaker | equal | none | oracle |"),
        "{side}"
    );
    let requests = |rate: &str| -> f64 {
        let line = side
            .lines()
            .skip_while(|l| *l != "requests that succeeded")
            .find(|l| l.starts_with(&format!("| {rate} |")))
            .unwrap_or_else(|| panic!("{side}"));
        line.split('|')
            .nth(2)
            .unwrap()
            .trim()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    assert!(requests("5") > 0.0 && requests("20") > 0.0, "{side}");
    // A value the lab refuses is named; a breaker key with its section is pointed to the
    // breaker sweep; an unknown section is refused.
    for (spec, says) in [
        ("fleet.rate=5,-1", "--sweep fleet.rate=-1"),
        (
            "breakers.break-duration=5s",
            "a breaker key is swept without its section",
        ),
        ("weather.rain=1,2", "a load key is one of [fleet]"),
    ] {
        let out = lab(&[&dir.join("tiny.toml"), &"--sweep", &spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{spec}: {}", stderr(&out));
    }
}

#[test]
fn a_key_cutout_does_not_know_fails_with_cutouts_code() {
    let dir = Dir::new("sweep-key");
    let out = lab(&[&dir.join("tiny.toml"), &"--sweep", &"brake-duration=5s,30s"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("CUT-CFG-008"), "{err}");
    assert!(err.contains("did you mean break-duration"), "{err}");
    assert!(out.stdout.is_empty());
    let bad_value = lab(&[
        &dir.join("tiny.toml"),
        &"--sweep",
        &"failure-ratio=20%,150%",
    ]);
    assert_eq!(bad_value.status.code(), Some(2));
    assert!(
        stderr(&bad_value).contains("CUT-CFG-001"),
        "{}",
        stderr(&bad_value)
    );
}

#[test]
fn a_bad_command_line_exits_with_2() {
    let dir = Dir::new("flags");
    let scenario = dir.join("tiny.toml");
    let cases: [&[&dyn AsRef<std::ffi::OsStr>]; 9] = [
        &[&scenario, &"--frobnicate"],
        &[&scenario, &"--sweep", &"break-duration"],
        &[&scenario, &"--sweep", &"=5s"],
        &[&scenario, &"--sweep", &"break-duration=5s,,30s"],
        &[&scenario, &"--seeds", &"0"],
        &[&scenario, &"--seeds", &"many"],
        &[&scenario, &"--seed"],
        &[&scenario, &scenario],
        &[],
    ];
    for args in cases {
        let out = lab(args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("usage: cutout-lab"),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
    let unknown = stderr(&lab(&[&scenario, &"--frobnicate"]));
    assert!(unknown.contains("unknown flag --frobnicate"), "{unknown}");
}

#[test]
fn version_and_help() {
    let version = lab(&[&"--version"]);
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8(version.stdout).unwrap(),
        format!("cutout-lab {}\n", env!("CARGO_PKG_VERSION"))
    );
    for flag in ["--help", "-h"] {
        let help = lab(&[&flag]);
        assert!(help.status.success());
        let help = String::from_utf8(help.stdout).unwrap();
        for listed in [
            "SCENARIO.toml",
            "--svg OUT.svg",
            "--seed N",
            "--seeds N",
            "--sweep KEY=V1,V2,...",
            "-h, --help",
            "-V, --version",
            "exit status",
        ] {
            assert!(help.contains(listed), "{listed} missing from\n{help}");
        }
    }
}

#[test]
fn a_scenario_mistake_keeps_its_line_and_column() {
    let dir = Dir::new("mistake");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, SCENARIO.replace("pods = 5", "pods = five")).unwrap();
    let out = lab(&[&bad]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("line 10, column 8"), "{err}");
    assert!(err.contains("pods = five"), "{err}");
    let key = dir.join("key.toml");
    std::fs::write(
        &key,
        SCENARIO.replace("jitter = \"none\"", "jiter = \"none\""),
    )
    .unwrap();
    let err = stderr(&lab(&[&key]));
    assert!(err.contains("CUT-CFG-008"), "{err}");
    assert!(err.contains("did you mean jitter?"), "{err}");
    let path = Path::new("scenarios").join("does-not-exist.toml");
    assert_eq!(lab(&[&path]).status.code(), Some(1));
}

/// `--json` keeps the seeds apart: each seed's value is the one that seed's own report prints,
/// and each pair of settings is compared seed by seed from those values.
#[test]
fn json_holds_every_seed_s_figures_and_the_settings_compared_seed_by_seed() {
    let dir = Dir::new("json");
    let path = dir.join("out/figures.json");
    let out = report(
        &dir,
        "a.svg",
        &["--seeds", "3", "--json", path.to_str().unwrap()],
    );
    assert!(out.contains("every seed's figures: "), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([2, 3, 4]));
    let settings: Vec<&str> = json["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        settings.contains(&"none") && settings.contains(&"equal"),
        "{settings:?}"
    );
    let figures = json["figures"].as_array().unwrap();
    let name = "requests that succeeded";
    let figure = figures.iter().find(|f| f["name"] == name).unwrap();
    assert_eq!(figure["unit"], "share");
    assert_eq!(figure["better"], "higher");
    // Each seed's value is what that seed's own report prints, column for column.
    for (i, seed) in ["2", "3", "4"].iter().enumerate() {
        let single = report(&dir, "b.svg", &["--seed", seed]);
        let row = single
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} row in\n{single}"));
        // One seed: each cell is one number, in the order of the settings.
        let cells: Vec<&str> = row[name.len()..].split_whitespace().collect();
        let header = single
            .lines()
            .find(|l| settings.iter().all(|s| l.contains(s)))
            .unwrap();
        let at: Vec<usize> = settings.iter().map(|s| header.find(s).unwrap()).collect();
        assert!(
            at.is_sorted(),
            "the JSON's settings in the table's order: {header}"
        );
        for (c, setting) in settings.iter().enumerate() {
            let value = figure["values"][c][i].as_f64().unwrap();
            assert_eq!(
                cells[c],
                format!("{:.2}%", 100.0 * value),
                "seed {seed}, {setting}: the JSON's value against the report's\n{single}"
            );
        }
    }
    // The pair compares the same values seed by seed.
    let pair = json["paired"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["figure"] == name && p["a"] == "equal" && p["b"] == "no breaker")
        .unwrap();
    let (a, b) = (
        settings.iter().position(|s| *s == "equal").unwrap(),
        settings.iter().position(|s| *s == "no breaker").unwrap(),
    );
    let values = |c: usize| -> Vec<f64> {
        (0..3)
            .map(|i| figure["values"][c][i].as_f64().unwrap())
            .collect()
    };
    let (va, vb) = (values(a), values(b));
    let wins = va.iter().zip(&vb).filter(|(x, y)| x > y).count();
    assert_eq!(pair["seeds"], 3);
    assert_eq!(pair["a_better"], wins);
    let least = va
        .iter()
        .zip(&vb)
        .map(|(x, y)| x - y)
        .fold(f64::INFINITY, f64::min);
    assert!((pair["least_difference"].as_f64().unwrap() - least).abs() < 1e-12);
}

/// `--per-seed` prints each seed's own report after the table over the seeds: the one
/// `--seed` prints; without `--seeds` it is a usage error.
#[test]
fn per_seed_prints_each_seed_s_own_report() {
    let dir = Dir::new("per-seed");
    let out = report(&dir, "a.svg", &["--seeds", "2", "--per-seed"]);
    for seed in ["2", "3"] {
        let single = report(&dir, "a.svg", &["--seed", seed]);
        let table = single.split("\ntimeline").next().unwrap();
        assert!(
            out.contains(table),
            "seed {seed}'s own report is in the --per-seed output:\n{table}\n---\n{out}"
        );
    }
    let alone = lab(&[&dir.join("tiny.toml"), &"--per-seed"]);
    assert_eq!(alone.status.code(), Some(2), "{}", stderr(&alone));
    assert!(stderr(&alone).contains("--per-seed needs --seeds"));
}

/// A reader that closes stdout early (`cutout-lab … | head`) ends nothing badly: no panic, exit
/// status 0, and the SVG is still written.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = Dir::new("closed-stdout");
    let svg = dir.join("a.svg");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .arg(dir.join("tiny.toml"))
        .arg("--svg")
        .arg(&svg)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closes before the report is written: every write then fails with EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}

/// `--set section.key=V` runs the scenario as if its file said so (the JSON names what was
/// set), and a bad `--set` is the command line's mistake.
#[test]
fn set_runs_the_scenario_as_if_its_file_said_so() {
    let dir = Dir::new("set");
    std::fs::write(
        dir.join("shedding.toml"),
        SCENARIO.replace(
            "capacity = 1000",
            "capacity = 1000\nmax-queue-wait = \"300ms\"",
        ),
    )
    .unwrap();
    let json = |file: &str, out: &str, flags: &[&str]| -> serde_json::Value {
        let path = dir.join(out);
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = Vec::new();
        let scenario = dir.join(file);
        let svg = dir.join("x.svg");
        args.extend([
            &scenario as &dyn AsRef<std::ffi::OsStr>,
            &"--svg",
            &svg,
            &"--json",
            &path,
        ]);
        for f in flags {
            args.push(f);
        }
        let run = lab(&args);
        assert!(run.status.success(), "{}", stderr(&run));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    let set = json(
        "tiny.toml",
        "set.json",
        &["--set", "dependency.max-queue-wait=300ms"],
    );
    let file = json("shedding.toml", "file.json", &[]);
    let plain = json("tiny.toml", "plain.json", &[]);
    assert_eq!(set["figures"], file["figures"]);
    // The tiny dependency never queues, so shedding changes nothing; a key that does.
    let noisier = json(
        "tiny.toml",
        "noisier.json",
        &["--set", "dependency.error-rate=0.2"],
    );
    assert_ne!(
        noisier["figures"], plain["figures"],
        "--set changes the run"
    );
    assert_eq!(
        set["set"],
        serde_json::json!({"dependency.max-queue-wait": "300ms"})
    );
    assert!(file.get("set").is_none() && plain.get("set").is_none());

    let scenario = dir.join("tiny.toml");
    for (bad, says) in [
        ("dependency.max-queue-wait", "expected SECTION.KEY=VALUE"),
        ("max-queue-wait=1s", "a load key is section.key"),
        ("breakers.jitter=none", "a breaker key"),
        ("sky.rate=2", "a load key is one of"),
        ("dependency.max-queue-wait=soon", "max-queue-wait"),
        ("fleet.pods=0", "pods"),
    ] {
        let out = lab(&[&scenario, &"--set", &bad]);
        assert_eq!(out.status.code(), Some(2), "--set {bad}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "--set {bad}: {}", stderr(&out));
    }
    let twice = lab(&[
        &scenario,
        &"--set",
        &"fleet.rate=2",
        &"--set",
        &"fleet.rate=3",
    ]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(stderr(&twice).contains("given twice"), "{}", stderr(&twice));
}
