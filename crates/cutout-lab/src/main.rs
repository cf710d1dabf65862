//! `cutout-lab SCENARIO.toml [--svg OUT.svg]`: runs a scenario, prints the report and writes
//! the SVG timeline.
//!
//! A scenario path that does not exist relative to the working directory is also looked up
//! relative to this crate's directory, so `cutout-lab scenarios/brownout.toml` works from the
//! repository root as well as from the crate. The SVG goes to `--svg`, or by default to
//! `target/cutout-lab/<scenario>.svg` under the working directory.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use cutout_lab::{Lab, Scenario};

const USAGE: &str = "usage: cutout-lab SCENARIO.toml [--svg OUT.svg]";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cutout-lab: {message}");
            ExitCode::FAILURE
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

fn run(args: Vec<String>) -> Result<(), String> {
    let mut scenario_path = None;
    let mut svg_path = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--svg" => svg_path = Some(PathBuf::from(args.next().ok_or(USAGE)?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if scenario_path.is_none() => scenario_path = Some(resolve(&arg)),
            _ => return Err(USAGE.into()),
        }
    }
    let scenario = Scenario::load(&scenario_path.ok_or(USAGE)?)?;
    let started = Instant::now();
    let lab = Lab::run(&scenario);
    let elapsed = started.elapsed();
    print!("{}", lab.table());
    let svg_path = svg_path
        .unwrap_or_else(|| Path::new("target/cutout-lab").join(format!("{}.svg", scenario.name)));
    if let Some(dir) = svg_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&svg_path, lab.svg()?).map_err(|e| format!("{}: {e}", svg_path.display()))?;
    println!("\ntimeline: {}", svg_path.display());
    eprintln!("simulated in {:.1} s", elapsed.as_secs_f64());
    Ok(())
}
