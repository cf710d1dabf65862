//! What `replay` and `fit` share on the command line: the record (its path, shape and
//! cluster, opened gzipped or not), the incident flags, the walk over the arguments, and the
//! warnings printed after reading.

use std::io::BufRead;
use std::time::Duration;

use cutout_lab::record::{Record, Shape, Tally};

use crate::{Failure, out};

/// The record a command reads, and how incidents are found in it.
#[derive(Debug, Default)]
pub struct Source {
    /// The path, or `-` for stdin.
    pub log: Option<String>,
    /// `--format`, else guessed from the name.
    pub format: Option<Shape>,
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--bin`, nanoseconds.
    pub bin: Option<u64>,
    /// `--incident-errors`.
    pub incident_errors: Option<f64>,
    /// `--incident-slowdown`.
    pub incident_slowdown: Option<f64>,
}

/// The help lines of [`Source`]'s flags.
pub const FLAGS_HELP: &str = "\
  --format FORMAT        access (the gateway's access log), csv (a header naming
                         timestamp, duration, outcome and optionally host) or jsonl (one
                         object a line with those keys); default: csv for *.csv, jsonl
                         for *.jsonl or *.json (past a .gz or .1), else access. The
                         crate's README, \"Your own traffic\", says each shape
  --cluster NAME         with the access log: only this cluster's requests (a log of
                         several clusters needs it)
  --bin DURATION         the width of the bins incidents are found in (default 10s)
  --incident-errors P    a bin is failing when at least P of its calls failed
                         (default 20%; 0.2 is the same)
  --incident-slowdown X  a bin is slow when its calls took more than X times the usual
                         duration (geometric means; default 5)";

/// Prints a command's `usage` and `text`, with [`FLAGS_HELP`] in place of `{SOURCE_FLAGS}`.
pub fn help(usage: &str, text: &str) -> Result<(), Failure> {
    let text = text.replace("{SOURCE_FLAGS}", FLAGS_HELP);
    out(format_args!(
        "cutout-lab {}\n\n{usage}\n\n{text}\n",
        env!("CARGO_PKG_VERSION")
    ))
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

/// A duration flag's value from `least` to `most`, in nanoseconds.
pub fn duration(flag: &str, text: &str, least: Duration, most: Duration) -> Result<u64, Failure> {
    humantime::parse_duration(text)
        .ok()
        .filter(|d| *d >= least && *d <= most)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .ok_or_else(|| {
            Failure::Usage(format!(
                "{flag} {text:?}: expected a duration from {} to {}",
                humantime::format_duration(least),
                humantime::format_duration(most)
            ))
        })
}

impl Source {
    /// Takes `flag` if it is one of the record's or the incidents', reading its value with
    /// `value`; `Ok(false)` for any other flag.
    pub fn take(&mut self, flag: &str, value: &mut Value<'_>) -> Result<bool, Failure> {
        let usage = Failure::Usage;
        match flag {
            "--format" => {
                self.format = Some(Shape::named(&value("access, csv or jsonl")?).map_err(usage)?)
            }
            "--cluster" => self.cluster = Some(value("a cluster's name")?),
            "--bin" => {
                let text = value("a duration such as 10s")?;
                self.bin = Some(duration(
                    "--bin",
                    &text,
                    Duration::from_millis(1),
                    Duration::from_secs(86_400),
                )?);
            }
            "--incident-errors" => {
                let text = value("a share such as 20%")?;
                let p = share("--incident-errors", &text)?;
                if p == 0.0 {
                    return Err(usage(
                        "--incident-errors 0: every bin would be failing".into(),
                    ));
                }
                self.incident_errors = Some(p);
            }
            "--incident-slowdown" => {
                let text = value("a factor such as 5")?;
                let x = text
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 1.0)
                    .ok_or_else(|| {
                        usage(format!(
                            "--incident-slowdown {text:?}: expected a factor above 1, such as 5"
                        ))
                    })?;
                self.incident_slowdown = Some(x);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Takes a positional argument: the record's path, once.
    pub fn take_log(&mut self, arg: String) -> Result<(), Failure> {
        match &self.log {
            None => {
                self.log = Some(arg);
                Ok(())
            }
            Some(first) => Err(Failure::Usage(format!(
                "one record at a time: {first} and then {arg}"
            ))),
        }
    }

    /// The record's path, and its shape, checked against `--cluster`.
    pub fn checked(&self) -> Result<(&str, Shape), Failure> {
        let log = self
            .log
            .as_deref()
            .ok_or_else(|| Failure::Usage("no record given (a file, or - for stdin)".into()))?;
        let shape = self.format.unwrap_or_else(|| Shape::guess(log));
        if self.cluster.is_some() && shape != Shape::Access {
            return Err(Failure::Usage(format!(
                "--cluster is for the gateway's access log, not {}",
                shape.name()
            )));
        }
        Ok((log, shape))
    }

    /// The record, opened from its start: stdin, or the file (gzipped or not, by its magic
    /// bytes, as zcat reads it).
    pub fn open(&self) -> Result<Record<Box<dyn BufRead>>, String> {
        let (log, shape) = self.checked().map_err(|e| match e {
            Failure::Usage(m) | Failure::Rejected(m) | Failure::Run(m) => m,
        })?;
        let input: Box<dyn BufRead> = if log == "-" {
            Box::new(std::io::stdin().lock())
        } else {
            let file = std::fs::File::open(log).map_err(|e| format!("cannot read {log}: {e}"))?;
            let mut file = std::io::BufReader::with_capacity(1 << 20, file);
            let gzip = file
                .fill_buf()
                .map_err(|e| format!("cannot read {log}: {e}"))?
                .starts_with(&[0x1f, 0x8b]);
            if gzip {
                let inflated = flate2::bufread::MultiGzDecoder::new(file);
                Box::new(std::io::BufReader::with_capacity(1 << 20, inflated))
            } else {
                Box::new(file)
            }
        };
        Ok(Record::new(input, shape, self.cluster.clone()))
    }
}

/// What a flag's handler reads its value with (`what` names the value for an error).
pub type Value<'a> = dyn FnMut(&str) -> Result<String, Failure> + 'a;

/// Walks `args`: each flag (as `--flag VALUE` or `--flag=VALUE`, once each) goes to `flag`
/// with a reader of its value; the other arguments are returned in order, or `None` when
/// `--help` was asked.
pub fn walk(
    args: Vec<String>,
    flag: &mut dyn FnMut(&str, &mut Value<'_>) -> Result<bool, Failure>,
) -> Result<Option<Vec<String>>, Failure> {
    let usage = Failure::Usage;
    let mut seen: Vec<String> = Vec::new();
    let mut positional = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name.to_owned(), Some(value)),
            _ => (arg.clone(), None),
        };
        if matches!(name.as_str(), "-h" | "--help") && inline.is_none() {
            return Ok(None);
        }
        if !name.starts_with('-') || name == "-" {
            positional.push(arg);
            continue;
        }
        if seen.contains(&name) {
            return Err(usage(format!("{name} is given twice")));
        }
        seen.push(name.clone());
        let mut value = |what: &str| match inline {
            Some(v) => Ok(v.to_owned()),
            None => args
                .next()
                .filter(|next| !next.starts_with("--"))
                .ok_or_else(|| usage(format!("{name} needs {what}"))),
        };
        if !flag(&name, &mut value)? {
            return Err(usage(format!("unknown flag {arg}")));
        }
    }
    Ok(Some(positional))
}

/// What the record held (the calls `used`, as `verb` says, when the command ran to its
/// end), and its first warnings, on stderr.
pub fn warn<R: BufRead>(record: &Record<R>, log: &str, verb: &str, used: Option<u64>) {
    let Tally {
        lines,
        skipped,
        bad,
        reordered,
    } = record.tally();
    let calls = match used {
        Some(n) => format!("{n} calls {verb}"),
        None => "stopped".to_owned(),
    };
    eprintln!(
        "{log}: {lines} lines: {calls}, {skipped} skipped (no call to the dependency), {bad} \
         unreadable or misplaced, {reordered} replayed out of start order"
    );
    for w in record.warnings().iter().take(20) {
        eprintln!("{log}:{}: {}", w.line, w.message);
    }
    let more = (bad + reordered).saturating_sub(20);
    if more > 0 {
        eprintln!("{log}: … and {more} more lines warned of");
    }
}
