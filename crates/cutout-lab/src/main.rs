//! `cutout-lab SCENARIO.toml [--svg OUT.svg] [--seed N] [--seeds N] [--sweep KEY=V1,V2,...]`:
//! runs a scenario, prints the report and writes the SVG timeline. `--help` says it all.
//!
//! A scenario path that does not exist relative to the working directory is also looked up
//! relative to this crate's directory, so `cutout-lab scenarios/brownout.toml` works from the
//! repository root as well as from the crate. The SVG goes to `--svg`, or by default to
//! `target/cutout-lab/<scenario>.svg` under the working directory.
//!
//! stdout carries only the report, the same for the same command line; the progress bar (on
//! a terminal, once a run has taken 2 s) and the time taken go to stderr.

#![forbid(unsafe_code)]

mod cli;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cutout_lab::load_sweep::LoadSweep;
use cutout_lab::seeds::Seeds;
use cutout_lab::sweep::{Spec, Sweep};
use cutout_lab::{Progress, Scenario, seeds};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const USAGE: &str = "usage: cutout-lab SCENARIO.toml [--svg OUT.svg] [--json OUT.json] [--seed N] \
                     [--seeds N [--per-seed]] [--sweep KEY=V1,V2,...] [--set KEY=V]...\n       \
                     cutout-lab \
                     replay LOG [--format F] [--config FILE] [--sweep ...] (replay --help)\n       \
                     cutout-lab fit LOG [--out SCENARIO.toml] (fit --help)\n       \
                     cutout-lab --help | --version";

const HELP: &str = "\
Runs a scenario: a fleet of pods calling a dependency through cutout breakers while the
dependency fails as the scenario's incidents say, once per breaker setting the scenario
compares, all on the same seed. Prints a table with one row per figure and one column per
setting, between a column with no breaker and one for the oracle (an admission that refuses
exactly the attempts that would fail: each setting's regret is read against it), and writes
an SVG timeline.

`cutout-lab replay LOG` replays settings against a service's own recorded calls instead
(`cutout-lab replay --help`), and `cutout-lab fit LOG` writes a scenario fitted to them
(`cutout-lab fit --help`).

arguments:
  SCENARIO.toml          the scenario file; a relative path not found from here is also
                         looked up in the cutout-lab crate (scenarios/brownout.toml)

options:
  --svg OUT.svg          write the SVG timeline to OUT.svg
                         (default: target/cutout-lab/<scenario>.svg)
  --json OUT.json        also write every seed's value of every figure of every setting,
                         and each pair of settings compared seed by seed (in how many
                         seeds each was better, the least and greatest difference and
                         ratio), to OUT.json: what checks a claim \"in every seed\"
  --seed N               run on seed N instead of the scenario's own seed
  --seeds N              run N seeds (at most 10000): the scenario's seed (or --seed),
                         then one more each time, up to N-1 more; each cell reads mean
                         (min-max) over the seeds, and \"n of N\" where only n seeds had
                         the figure (no trip, no recovery in the others); the SVG shows
                         the first seed only
  --per-seed             with --seeds: after the table over the seeds, each seed's own
                         report, as --seed would print it
  --sweep KEY=V1,V2,...  compare one breaker key across values, such as
                         break-duration=5s,30s,60s or failure-ratio=20%,50%: KEY is a
                         cutout configuration key as scenario files write it; each value
                         (read as TOML when it can be: numbers, true/false, \"quoted\";
                         else as a string) becomes the setting KEY=VALUE, a copy of the
                         first compared setting with KEY set; they replace the compared
                         settings. Prints the table (over --seeds when given) and a
                         recommendation: the most requests that succeeded among the values
                         with no trips while no incident was in force, ties broken by the
                         fewest calls that reached the failing dependency. The SVG shows
                         the first seed only
  --set SECTION.KEY=V    run the scenario with one key of its [fleet], [dependency],
                         [connections] or [saturation] section set to V (read as a
                         --sweep value is), as if the file said so; may be given more
                         than once, for different keys. The JSON names the keys set
                         (\"set\"). For a claim's variant: --set
                         dependency.max-queue-wait=500ms is the same scenario against a
                         dependency that sheds
  -h, --help             print this help and exit
  -V, --version          print the version and exit

Options may come before or after the scenario, as --flag VALUE or --flag=VALUE.

output:
  stdout                 the report (the same for the same command line) and where the
                         timeline went
  stderr                 a progress bar, on a terminal only and once the run has taken
                         2 s (elsewhere one line then, with the time left); then how long
                         the simulation took

exit status:
  0                      the report was printed
  1                      the scenario could not be read or run, or the SVG not written
                         (a scenario's mistake is named with its line and column, or
                         cutout's CUT-CFG code and the nearest known key)
  2                      a bad command line: an unknown flag, a missing or bad value, a
                         bad --sweep spec, a --sweep key or value cutout rejects, or a
                         --set key or value the lab refuses";

/// Why the run stopped.
enum Failure {
    /// The command line is wrong: exit 2, with the usage.
    Usage(String),
    /// cutout rejected a `--sweep` key or value: exit 2, cutout's message alone.
    Rejected(String),
    /// The scenario or the output is: exit 1.
    Run(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Run(message)
    }
}

/// Writes `text` to stdout. A reader that has closed it (`cutout-lab … | head`) is not an
/// error: the rest of the report is not written, the files still are, and the run ends
/// well (where `print!` would panic).
fn out(text: std::fmt::Arguments<'_>) -> Result<(), Failure> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::Run(format!("cannot write the report: {e}")))
        }
        _ => Ok(()),
    }
}

/// `path` with `suffix` put before its extension (`out.svg`, `-2` → `out-2.svg`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    if suffix.is_empty() {
        return path.to_path_buf();
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}{suffix}"),
    };
    path.with_file_name(name)
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Run(message)) => {
            eprintln!("cutout-lab: {message}");
            ExitCode::FAILURE
        }
        Err(Failure::Usage(message)) => {
            eprintln!("cutout-lab: {message}\n{USAGE}\n(cutout-lab --help says more)");
            ExitCode::from(2)
        }
        Err(Failure::Rejected(message)) => {
            eprintln!("cutout-lab: {message}");
            ExitCode::from(2)
        }
    }
}

fn resolve(path: &str) -> PathBuf {
    let given = PathBuf::from(path);
    if given.exists() || given.is_absolute() {
        return given;
    }
    let in_crate = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if in_crate.exists() { in_crate } else { given }
}

/// What the command line asks for.
enum Command {
    Help,
    Version,
    Run(Options),
}

/// A run's options.
struct Options {
    scenario: PathBuf,
    svg: Option<PathBuf>,
    json: Option<PathBuf>,
    seed: Option<u64>,
    seeds: u64,
    per_seed: bool,
    sweep: Option<Spec>,
    /// `--set`: each load key and its value, in the order given.
    sets: Vec<(String, String)>,
}

fn parse(args: Vec<String>) -> Result<Command, Failure> {
    let usage = |message: String| Failure::Usage(message);
    let mut scenario = None;
    let mut svg = None;
    let mut json = None;
    let mut seed = None;
    let mut seeds = None;
    let mut per_seed = false;
    let mut sweep = None;
    let mut sets: Vec<(String, String)> = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value)),
            _ => (arg.clone(), None),
        };
        // A flag's value: after '=', else the next argument unless that is another flag.
        let mut value = |what: &str| match inline {
            Some(v) => Ok(v.to_owned()),
            None => args
                .next()
                .filter(|next| !next.starts_with("--"))
                .ok_or_else(|| usage(format!("{flag} needs {what}"))),
        };
        let number = |flag: &str, text: String| {
            text.parse::<u64>()
                .map_err(|_| usage(format!("{flag} {text:?}: expected a whole number")))
        };
        let once = |given: bool, flag: &str| {
            if given {
                Err(usage(format!("{flag} is given twice")))
            } else {
                Ok(())
            }
        };
        match flag.as_str() {
            "-h" | "--help" if inline.is_none() => return Ok(Command::Help),
            "-V" | "--version" if inline.is_none() => return Ok(Command::Version),
            "--svg" => {
                once(svg.is_some(), "--svg")?;
                svg = Some(PathBuf::from(value("a path")?));
            }
            "--json" => {
                once(json.is_some(), "--json")?;
                json = Some(PathBuf::from(value("a path")?));
            }
            "--seed" => {
                once(seed.is_some(), "--seed")?;
                seed = Some(number("--seed", value("a seed")?)?);
            }
            "--seeds" => {
                once(seeds.is_some(), "--seeds")?;
                let n = number("--seeds", value("a number of seeds")?)?;
                if n == 0 {
                    return Err(usage("--seeds 0: run at least 1 seed".into()));
                }
                seeds = Some(n);
            }
            "--per-seed" if inline.is_none() => {
                once(per_seed, "--per-seed")?;
                per_seed = true;
            }
            "--sweep" => {
                once(sweep.is_some(), "--sweep")?;
                sweep = Some(value("KEY=V1,V2,...")?.parse::<Spec>().map_err(usage)?);
            }
            "--set" => {
                let text = value("SECTION.KEY=VALUE")?;
                let Some((key, v)) = text.split_once('=') else {
                    return Err(usage(format!(
                        "--set {text}: expected SECTION.KEY=VALUE (dependency.max-queue-wait=500ms)"
                    )));
                };
                let (key, v) = (key.trim(), v.trim());
                if sets.iter().any(|(k, _)| k == key) {
                    return Err(usage(format!("--set {key} is given twice")));
                }
                sets.push((key.to_owned(), v.to_owned()));
            }
            _ if arg.starts_with('-') && arg != "-" => {
                return Err(usage(format!("unknown flag {arg}")));
            }
            _ => match &scenario {
                None => scenario = Some(resolve(&arg)),
                Some(first) => {
                    return Err(usage(format!(
                        "one scenario at a time: {} and then {arg}",
                        first.display()
                    )));
                }
            },
        }
    }
    let scenario = scenario.ok_or_else(|| usage("no scenario file given".into()))?;
    if per_seed && seeds.is_none() {
        return Err(usage(
            "--per-seed needs --seeds N (one seed's report is the report)".into(),
        ));
    }
    Ok(Command::Run(Options {
        scenario,
        svg,
        json,
        seed,
        seeds: seeds.unwrap_or(1),
        per_seed,
        sweep,
        sets,
    }))
}

/// The progress bar: on stderr, drawn only on a terminal and once the run has taken
/// [`Bar::AFTER`]; one bar over every seed and setting.
struct Bar {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: AtomicBool,
}

impl Bar {
    /// How long a run goes without a bar.
    const AFTER: Duration = Duration::from_secs(2);

    fn new() -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template(
                "simulating [{bar:40}] {percent:>3}% of the simulated time, {elapsed} \
                 so far, about {eta} to go",
            )
            .map_or_else(
                |_| ProgressStyle::default_bar(),
                |s| s.progress_chars("=> "),
            );
            ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()).with_style(style)
        });
        Bar {
            bar,
            started: Instant::now(),
            shown: AtomicBool::new(false),
        }
    }

    fn update(&self, p: Progress) {
        let Some(bar) = &self.bar else {
            // Not a terminal: no bar, but one estimate of the time left, once the run has
            // gone on for as long as a bar waits.
            let elapsed = self.started.elapsed();
            if elapsed >= Bar::AFTER
                && p.done > 0
                && p.done < p.total
                && !self.shown.swap(true, Ordering::Relaxed)
            {
                let left = elapsed.as_secs_f64() * (p.total - p.done) as f64 / p.done as f64;
                eprintln!(
                    "cutout-lab: {:.0}% simulated in {:.0} s: about {:.0} s to go",
                    100.0 * p.done as f64 / p.total as f64,
                    elapsed.as_secs_f64(),
                    left.ceil()
                );
            }
            return;
        };
        bar.set_length(p.total);
        bar.set_position(p.done);
        if !self.shown.load(Ordering::Relaxed)
            && self.started.elapsed() >= Bar::AFTER
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn run(args: Vec<String>) -> Result<(), Failure> {
    match args.first().map(String::as_str) {
        Some("replay") => return cli::replay::run(args[1..].to_vec()),
        Some("fit") => return cli::fit::run(args[1..].to_vec()),
        _ => {}
    }
    let options = match parse(args)? {
        Command::Help => {
            out(format_args!(
                "cutout-lab {}\n\n{USAGE}\n\n{HELP}\n",
                env!("CARGO_PKG_VERSION")
            ))?;
            return Ok(());
        }
        Command::Version => {
            out(format_args!("cutout-lab {}\n", env!("CARGO_PKG_VERSION")))?;
            return Ok(());
        }
        Command::Run(options) => options,
    };
    // The file's own mistakes first, as without --set (exit 1); then a value --set gives
    // that the lab refuses is the command line's (exit 2).
    let mut scenario = Scenario::load(&options.scenario)?;
    let path = &options.scenario;
    let mut text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    for (key, v) in &options.sets {
        text = cutout_lab::load_sweep::with_key(&text, key, v)
            .map_err(|e| Failure::Usage(format!("--set {key}={v}: {e}")))?;
    }
    if !options.sets.is_empty() {
        scenario = Scenario::from_toml(&text, &scenario.name)
            .map_err(|e| Failure::Rejected(format!("{} with --set: {e}", path.display())))?;
    }
    if let Some(spec) = options.sweep.as_ref().filter(|s| LoadSweep::is_load(s)) {
        return run_load(&options, &text, &scenario, spec.clone());
    }
    let sweep = match options.sweep {
        None => None,
        Some(spec) => {
            let sweep = Sweep::build(&text, spec)
                .map_err(|e| Failure::Rejected(format!("{}: --sweep: {e}", path.display())))?;
            scenario = sweep
                .scenario(&scenario.name)
                .map_err(|e| Failure::Rejected(format!("{}: {e}", path.display())))?;
            Some(sweep)
        }
    };
    if let Some(seed) = options.seed {
        scenario.seed = seed;
    }
    // Checked before anything runs: the seeds must not run past u64::MAX.
    seeds::seeds(scenario.seed, options.seeds).map_err(Failure::Usage)?;
    let bar = Bar::new();
    let started = Instant::now();
    let runs = seeds::run(&scenario, options.seeds, &|p| bar.update(p));
    bar.finish();
    let runs = runs?;
    let elapsed = started.elapsed();
    let many = runs.seeds.len() > 1 || sweep.is_some();
    match &sweep {
        Some(sweep) => out(format_args!("{}", sweep.table(&runs)))?,
        None if many => out(format_args!("{}", runs.table()))?,
        None => out(format_args!("{}", runs.first.table()))?,
    }
    if options.per_seed {
        for (seed, metrics) in runs.seeds.iter().zip(&runs.metrics) {
            let mut this = scenario.clone();
            this.seed = *seed;
            out(format_args!(
                "\n{}",
                cutout_lab::report::table(&this, metrics)
            ))?;
        }
    }
    if let Some(path) = &options.json {
        let mut value = cutout_lab::json::figures(&scenario.name, &runs.seeds, &runs.metrics);
        if !options.sets.is_empty() {
            let set: serde_json::Map<String, serde_json::Value> = options
                .sets
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            value["set"] = serde_json::Value::Object(set);
        }
        let text =
            serde_json::to_string_pretty(&value).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    timelines(&runs, options.svg.as_deref(), &scenario)?;
    if let Some(path) = &options.json {
        out(format_args!("every seed's figures: {}\n", path.display()))?;
    }
    eprintln!("simulated in {:.1} s", elapsed.as_secs_f64());
    Ok(())
}

/// Writes the first seed's SVG timelines of `runs` (to `svg`, or by default
/// `target/cutout-lab/<scenario>.svg`) and says where they went.
fn timelines(runs: &Seeds, svg: Option<&Path>, scenario: &Scenario) -> Result<(), Failure> {
    let svg_path = svg.map_or_else(
        || Path::new("target/cutout-lab").join(format!("{}.svg", scenario.name)),
        Path::to_path_buf,
    );
    if let Some(dir) = svg_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // Past four columns the timeline is split into files of at most 1,600 px: the first at
    // the given path, the others beside it with -2, -3… before the extension.
    let mut written = Vec::new();
    for (suffix, svg) in runs.first.svgs()? {
        let path = with_suffix(&svg_path, &suffix);
        std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    let which = if runs.seeds.len() > 1 {
        format!("timeline of seed {} only", scenario.seed)
    } else {
        "timeline".to_owned()
    };
    out(format_args!("\n{which}: {}\n", written.join(", ")))
}

/// A sweep over a load key ([`LoadSweep`]): one run of every setting per value, each
/// value's table and the headline figures side by side; the first value's timeline.
fn run_load(options: &Options, text: &str, scenario: &Scenario, spec: Spec) -> Result<(), Failure> {
    if options.json.is_some() || options.per_seed {
        return Err(Failure::Usage(
            "--json and --per-seed are not given with a load key's --sweep: run each value \
             on its own for them"
                .into(),
        ));
    }
    let path = &options.scenario;
    let sweep = LoadSweep::build(text, spec)
        .map_err(|e| Failure::Rejected(format!("{}: --sweep: {e}", path.display())))?;
    let mut scenarios = sweep
        .scenarios(&scenario.name)
        .map_err(|e| Failure::Rejected(format!("{}: {e}", path.display())))?;
    for s in &mut scenarios {
        if let Some(seed) = options.seed {
            s.seed = seed;
        }
        seeds::seeds(s.seed, options.seeds).map_err(Failure::Usage)?;
    }
    let bar = Bar::new();
    let started = Instant::now();
    let mut runs = Vec::with_capacity(scenarios.len());
    for s in &scenarios {
        let run = seeds::run(s, options.seeds, &|p| bar.update(p));
        runs.push(run.inspect_err(|_| bar.finish())?);
    }
    bar.finish();
    let elapsed = started.elapsed();
    out(format_args!("{}", sweep.table(&runs)))?;
    timelines(&runs[0], options.svg.as_deref(), &scenarios[0])?;
    eprintln!("simulated in {:.1} s", elapsed.as_secs_f64());
    Ok(())
}
