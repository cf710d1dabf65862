//! `cutout-lab replay LOG`: reads the command line, streams the record through
//! [`cutout_lab::replay::run`], prints the report and the warnings.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cutout_lab::record::{Record, Shape, Tally};
use cutout_lab::replay::{self, Candidate, Options};
use cutout_lab::sweep::Spec;

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
  --format FORMAT        access (the gateway's access log), csv (a header naming
                         timestamp, duration, outcome and optionally host) or jsonl (one
                         object a line with those keys); default: csv for *.csv, jsonl
                         for *.jsonl or *.json, else access. The crate's README, \"Your own
                         traffic\", says each shape
  --cluster NAME         with the access log: only this cluster's requests
  --config FILE          replay the settings of FILE: a cutout config (each [instances.*],
                         else each [configs.*], else its [defaults]) or a file with one
                         under [breakers] (the gateway's config, a lab scenario). Default:
                         cutout's defaults, or for the access log the gateway's shipped
                         cluster defaults
  --sweep KEY=V1,V2,...  replay the first setting with KEY set to each value instead
                         (failure-ratio=20%,50%, break-duration=5s,30s); KEY is a cutout
                         configuration key
  --bin DURATION         the width of the bins incidents are found in (default 10s)
  --incident-errors P    a bin is failing when at least P of its calls failed
                         (default 20%; 0.2 is the same)
  --incident-slowdown X  a bin is slow when its calls took more than X times the usual
                         duration (geometric means; default 5)
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
struct Asked {
    log: String,
    format: Option<Shape>,
    cluster: Option<String>,
    config: Option<PathBuf>,
    sweep: Option<Spec>,
    options: Options,
    json: Option<PathBuf>,
}

/// `cutout-lab replay ARGS`.
pub fn run(args: Vec<String>) -> Result<(), Failure> {
    let Some(asked) = parse(args)? else {
        out(format_args!(
            "cutout-lab {}\n\n{USAGE}\n\n{HELP}\n",
            env!("CARGO_PKG_VERSION")
        ))?;
        return Ok(());
    };
    let shape = asked.format.unwrap_or_else(|| Shape::guess(&asked.log));
    if asked.cluster.is_some() && shape != Shape::Access {
        return Err(Failure::Usage(format!(
            "--cluster is for the gateway's access log, not {}",
            shape.name()
        )));
    }
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
    let input: Box<dyn BufRead> = if asked.log == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(&asked.log)
            .map_err(|e| format!("cannot read {}: {e}", asked.log))?;
        let mut file = std::io::BufReader::with_capacity(1 << 20, file);
        // gzip's magic bytes, whatever the name: a rotated log is read as zcat reads it.
        let gzip = file
            .fill_buf()
            .map_err(|e| format!("cannot read {}: {e}", asked.log))?
            .starts_with(&[0x1f, 0x8b]);
        if gzip {
            let inflated = flate2::bufread::MultiGzDecoder::new(file);
            Box::new(std::io::BufReader::with_capacity(1 << 20, inflated))
        } else {
            Box::new(file)
        }
    };
    let mut record = Record::new(input, shape, asked.cluster.clone());
    let started = Instant::now();
    let replayed = replay::run(&mut record, &candidates, &asked.options);
    warn(
        &record,
        &asked.log,
        replayed.as_ref().ok().map(|r| r.calls.iter().sum()),
    );
    let replayed = replayed.map_err(|e| format!("{}: {e}", asked.log))?;
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

/// What the record held (the calls replayed, when the replay ran to its end), and its first
/// warnings, on stderr.
fn warn<R: BufRead>(record: &Record<R>, log: &str, replayed: Option<u64>) {
    let Tally {
        lines,
        skipped,
        bad,
        reordered,
    } = record.tally();
    let calls = match replayed {
        Some(n) => format!("{n} calls replayed"),
        None => "the replay stopped".to_owned(),
    };
    eprintln!(
        "{log}: {lines} lines: {calls}, {skipped} skipped (no call to the dependency), {bad} \
         unreadable or misplaced, {reordered} replayed out of start order"
    );
    let warnings = record.warnings();
    for w in warnings.iter().take(20) {
        eprintln!("{log}:{}: {}", w.line, w.message);
    }
    let more = (bad + reordered).saturating_sub(20);
    if more > 0 {
        eprintln!("{log}: … and {more} more lines warned of");
    }
}

/// A share: `20%` or `0.2`, in [0, 1].
fn share(flag: &str, text: &str) -> Result<f64, Failure> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (text, 1.0),
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|v| v / scale)
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| {
            Failure::Usage(format!(
                "{flag} {text:?}: expected a share such as 20% or 0.2"
            ))
        })
}

/// The command line, or `None` for `--help`.
fn parse(args: Vec<String>) -> Result<Option<Asked>, Failure> {
    let usage = |message: String| Failure::Usage(message);
    let mut log = None;
    let mut format = None;
    let mut cluster = None;
    let mut config = None;
    let mut sweep = None;
    let mut json = None;
    let mut options = Options::default();
    let mut seen: Vec<String> = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value)),
            _ => (arg.clone(), None),
        };
        if flag.starts_with("--") && flag != "--help" {
            if seen.contains(&flag) {
                return Err(usage(format!("{flag} is given twice")));
            }
            seen.push(flag.clone());
        }
        let mut value = |what: &str| match inline {
            Some(v) => Ok(v.to_owned()),
            None => args
                .next()
                .filter(|next| !next.starts_with("--"))
                .ok_or_else(|| usage(format!("{flag} needs {what}"))),
        };
        match flag.as_str() {
            "-h" | "--help" if inline.is_none() => return Ok(None),
            "--format" => {
                format = Some(Shape::named(&value("access, csv or jsonl")?).map_err(usage)?)
            }
            "--cluster" => cluster = Some(value("a cluster's name")?),
            "--config" => config = Some(PathBuf::from(value("a path")?)),
            "--sweep" => sweep = Some(value("KEY=V1,V2,...")?.parse::<Spec>().map_err(usage)?),
            "--json" => json = Some(PathBuf::from(value("a path")?)),
            "--bin" => {
                let text = value("a duration such as 10s")?;
                let bin = humantime::parse_duration(&text)
                    .ok()
                    .filter(|d| *d >= Duration::from_millis(1) && *d <= Duration::from_secs(86_400))
                    .ok_or_else(|| {
                        usage(format!(
                            "--bin {text:?}: expected a duration from 1ms to 24h, such as 10s"
                        ))
                    })?;
                options.bin = u64::try_from(bin.as_nanos()).unwrap_or(u64::MAX);
            }
            "--incident-errors" => {
                let text = value("a share such as 20%")?;
                let p = share("--incident-errors", &text)?;
                if p == 0.0 {
                    return Err(usage(
                        "--incident-errors 0: every bin would be failing".into(),
                    ));
                }
                options.incident_errors = p;
            }
            "--incident-slowdown" => {
                let text = value("a factor such as 5")?;
                options.incident_slowdown = text
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 1.0)
                    .ok_or_else(|| {
                        usage(format!(
                            "--incident-slowdown {text:?}: expected a factor above 1, such as 5"
                        ))
                    })?;
            }
            "--latency-budget" => {
                let text = value("a duration such as 2s")?;
                let budget = humantime::parse_duration(&text)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| {
                        usage(format!(
                            "--latency-budget {text:?}: expected a duration such as 2s"
                        ))
                    })?;
                options.latency_budget = Some(u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX));
            }
            "--seed" => {
                let text = value("a seed")?;
                options.seed = text
                    .parse()
                    .map_err(|_| usage(format!("--seed {text:?}: expected a whole number")))?;
            }
            _ if arg.starts_with('-') && arg != "-" => {
                return Err(usage(format!("unknown flag {arg}")));
            }
            _ => match &log {
                None => log = Some(arg),
                Some(first) => {
                    return Err(usage(format!(
                        "one record at a time: {first} and then {arg}"
                    )));
                }
            },
        }
    }
    let log = log.ok_or_else(|| usage("no record given (a file, or - for stdin)".into()))?;
    Ok(Some(Asked {
        log,
        format,
        cluster,
        config,
        sweep,
        options,
        json,
    }))
}
