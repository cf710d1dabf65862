//! `cutout-lab fit LOG`: reads the command line, fits a scenario to the record through
//! [`cutout_lab::fit::fit`] and writes it.

use std::path::PathBuf;
use std::time::Duration;

use cutout_lab::fit::{self, Options};
use cutout_lab::replay::Candidate;

use super::record::{Source, duration, help, walk, warn};
use crate::{Failure, out};

/// The usage line.
pub const USAGE: &str = "usage: cutout-lab fit LOG [--out SCENARIO.toml] [--phase 5m] [--format \
                         access|csv|jsonl] [--cluster NAME] [--bin 10s] [--incident-errors 20%] \
                         [--incident-slowdown 5]";

const HELP: &str = "\
Fits a scenario to a service's own record of calls to one dependency, so that the
simulation (cutout-lab SCENARIO.toml) runs on that traffic: the arrival rate phase by phase
(with bursts where calls came in bunches), the dependency's recorded latency distribution
and error rate outside the incidents, one replica per host, and the incidents the record
shows (outages, hangs, error spikes, brownouts). The dependency's capacity is not in a
record: the scenario gives it ten times the busiest second, and says so.

arguments:
  LOG                    the record: a file (gzipped or not; read twice, so not stdin)

options:
  --out SCENARIO.toml    write the scenario there (default: stdout)
  --phase DURATION       one phase of the arrival rate (default 5m; whole seconds, 1s
                         to 1h)
{SOURCE_FLAGS}
  -h, --help             print this help and exit

exit status:
  0                      the scenario was written
  1                      the record could not be read, or held no call outside incidents
  2                      a bad command line";

/// `cutout-lab fit ARGS`.
pub fn run(args: Vec<String>) -> Result<(), Failure> {
    let mut source = Source::default();
    let mut path = None;
    let mut phase = None;
    let positional = walk(args, &mut |flag, value| {
        if source.take(flag, value)? {
            return Ok(true);
        }
        match flag {
            "--out" => path = Some(PathBuf::from(value("a path")?)),
            "--phase" => {
                let text = value("a duration such as 5m")?;
                let nanos = duration(
                    "--phase",
                    &text,
                    Duration::from_secs(1),
                    Duration::from_secs(3600),
                )?;
                if nanos % 1_000_000_000 != 0 {
                    return Err(Failure::Usage(format!(
                        "--phase {text:?}: a phase is whole seconds (the lab's phases are)"
                    )));
                }
                phase = Some(nanos);
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    let Some(positional) = positional else {
        return help(USAGE, HELP);
    };
    for arg in positional {
        source.take_log(arg)?;
    }
    let (log, shape) = source.checked()?;
    if log == "-" {
        return Err(Failure::Usage(
            "fit reads the record twice: give a file, not stdin".into(),
        ));
    }
    let defaults = Options::default();
    let options = Options {
        bin: source.bin.unwrap_or(defaults.bin),
        phase: phase.unwrap_or(defaults.phase),
        incident_errors: source.incident_errors.unwrap_or(defaults.incident_errors),
        incident_slowdown: source
            .incident_slowdown
            .unwrap_or(defaults.incident_slowdown),
    };
    let name = std::path::Path::new(log)
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .split('.')
                .next()
                .unwrap_or("fitted")
                .to_owned()
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "fitted".into());
    let mut record = source.open()?;
    let fitted = fit::fit(
        &mut record,
        || source.open(),
        &name,
        log,
        &Candidate::shipped(shape),
        &options,
    );
    warn(
        &record,
        log,
        "fitted",
        fitted.as_ref().ok().map(|f| f.calls),
    );
    let fitted = fitted.map_err(|e| format!("{log}: {e}"))?;
    match &path {
        None => out(format_args!("{}", fitted.scenario))?,
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            std::fs::write(path, &fitted.scenario)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!(
                "{log}: {} calls, {} incidents: wrote {}",
                fitted.calls,
                fitted.incidents.len(),
                path.display()
            );
        }
    }
    Ok(())
}
