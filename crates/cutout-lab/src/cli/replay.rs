//! `cutout-lab replay LOG`: reads the command line, streams the record through
//! [`cutout_lab::replay::run`], prints the report and the warnings.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cutout_lab::replay::{self, Candidate, Options};
use cutout_lab::sweep::Spec;

use super::record::{Source, duration, help, walk, warn};
use crate::{Failure, out};

/// The usage line.
pub const USAGE: &str = "usage: cutout-lab replay LOG [--format access|csv|jsonl] [--cluster NAME] \
                         [--config FILE] [--sweep KEY=V1,V2,...] [--bin 10s] \
                         [--incident-errors 20%] [--incident-slowdown 5] [--latency-budget D] [--seed N] \
                         [--json OUT.json]";

const HELP: &str = "\
Replays breaker settings against a service's own recorded calls to one dependency: each
call at its own start, with its own duration and answer as the dependency gave it. Prints,
beside no breaker and the oracle (which refuses exactly the calls that failed), when each
setting would have opened, whether inside an incident the record shows or on a healthy
dependency, and what it would have refused; then the recommended setting as a block to
paste into a config file.

The replay is open-loop: a refusal changes nothing after it (the record's retries are
calls of their own, and a dependency spared by the breaker cannot recover sooner in it).
Record with the breaker in shadow mode (shadow = true) for a record no breaker cut.

arguments:
  LOG                    the record: a file (gzipped or not), or - for stdin. Read as a
                         stream, any size

options:
{SOURCE_FLAGS}
  --config FILE          replay the settings of FILE: a cutout config (each [instances.*],
                         else each [configs.*], else its [defaults]) or a file with one
                         under [breakers] (the gateway's config, a lab scenario). Default:
                         cutout's defaults, or for the access log the gateway's shipped
                         cluster defaults
  --sweep KEY=V1,V2,...  replay the first setting with KEY set to each value instead
                         (failure-ratio=20%,50%, break-duration=5s,30s); KEY is a cutout
                         configuration key
  --latency-budget D     the longest your callers wait (their timeout): a success
                         that took longer came too late, and counts as a failure for
                         the oracle, the regret and the incidents (default: none, every
                         success counts as one however slow)
  --seed N               the breakers' seed (their jitter; default 1)
  --json OUT.json        also write the figures as JSON to OUT.json
  -h, --help             print this help and exit

output:
  stdout                 the report
  stderr                 what the record held (lines, calls, lines skipped), each
                         unreadable line's number and why (the first 20), and the time
                         taken

exit status:
  0                      the report was printed
  1                      the record or the config could not be read, held no call, or
                         the JSON could not be written
  2                      a bad command line, or a --sweep key or value cutout rejects";

/// What `replay` was asked.
#[derive(Default)]
struct Asked {
    source: Source,
    config: Option<PathBuf>,
    sweep: Option<Spec>,
    latency_budget: Option<u64>,
    seed: Option<u64>,
    json: Option<PathBuf>,
}

/// `cutout-lab replay ARGS`.
pub fn run(args: Vec<String>) -> Result<(), Failure> {
    let Some(asked) = parse(args)? else {
        return help(USAGE, HELP);
    };
    let (log, shape) = asked.source.checked()?;
    let defaults = Options::default();
    let options = Options {
        bin: asked.source.bin.unwrap_or(defaults.bin),
        incident_errors: asked
            .source
            .incident_errors
            .unwrap_or(defaults.incident_errors),
        incident_slowdown: asked
            .source
            .incident_slowdown
            .unwrap_or(defaults.incident_slowdown),
        seed: asked.seed.unwrap_or(defaults.seed),
        latency_budget: asked.latency_budget,
    };
    let mut candidates = match &asked.config {
        None => vec![Candidate::shipped(shape)],
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Candidate::from_document(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    if let Some(spec) = &asked.sweep {
        candidates = candidates[0]
            .swept(spec)
            .map_err(|e| Failure::Rejected(format!("--sweep: {e}")))?;
    }
    let mut record = asked.source.open()?;
    let started = Instant::now();
    let replayed = replay::run(&mut record, &candidates, &options);
    warn(
        &record,
        log,
        "replayed",
        replayed.as_ref().ok().map(|r| r.calls.iter().sum()),
    );
    let replayed = replayed.map_err(|e| format!("{log}: {e}"))?;
    out(format_args!("{}", replayed.report()))?;
    if let Some(path) = &asked.json {
        let text = serde_json::to_string_pretty(&replayed.json())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        out(format_args!("\nthe figures as JSON: {}\n", path.display()))?;
    }
    eprintln!("replayed in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The command line, or `None` for `--help`.
fn parse(args: Vec<String>) -> Result<Option<Asked>, Failure> {
    let usage = Failure::Usage;
    let mut asked = Asked::default();
    let mut source = Source::default();
    let positional = walk(args, &mut |flag, value| {
        if source.take(flag, value)? {
            return Ok(true);
        }
        match flag {
            "--config" => asked.config = Some(PathBuf::from(value("a path")?)),
            "--sweep" => {
                asked.sweep = Some(value("KEY=V1,V2,...")?.parse::<Spec>().map_err(usage)?)
            }
            "--json" => asked.json = Some(PathBuf::from(value("a path")?)),
            "--latency-budget" => {
                let text = value("a duration such as 2s")?;
                asked.latency_budget = Some(duration(
                    "--latency-budget",
                    &text,
                    Duration::from_micros(1),
                    Duration::from_secs(86_400),
                )?);
            }
            "--seed" => {
                let text = value("a seed")?;
                asked.seed = Some(
                    text.parse()
                        .map_err(|_| usage(format!("--seed {text:?}: expected a whole number")))?,
                );
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    let Some(positional) = positional else {
        return Ok(None);
    };
    for arg in positional {
        source.take_log(arg)?;
    }
    asked.source = source;
    asked.source.checked()?;
    Ok(Some(asked))
}
