//! A deterministic discrete-event simulator of dependency incidents over a fleet of cutout
//! breakers: compare breaker settings side by side on the same seeded scenario.
//!
//! ```no_run
//! use std::path::Path;
//!
//! let scenario = cutout_lab::Scenario::load(Path::new("scenarios/brownout.toml"))?;
//! let lab = cutout_lab::Lab::run(&scenario);
//! println!("{}", lab.table());
//! std::fs::write("brownout.svg", lab.svg()?).map_err(|e| e.to_string())?;
//! # Ok::<(), String>(())
//! ```
//!
//! The pieces: [`dependency`] (latency, errors, capacity), [`incident`] (the script),
//! [`fleet`] (pods and their breakers), [`sim`] (the event loop), [`report`] (the numbers),
//! [`plot`] (the SVG) and [`scenario`] (the file format).

#![forbid(unsafe_code)]

pub mod dependency;
pub mod duration;
pub mod fleet;
pub mod incident;
pub mod plot;
pub mod report;
pub mod scenario;
pub mod sim;

pub use report::{Figure, Metrics};
pub use scenario::Scenario;
pub use sim::{Counts, Run};

/// Every setting of a scenario run on the same seed, with its metrics.
#[derive(Debug, Clone)]
pub struct Lab<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// One run per setting, in the scenario's order.
    pub runs: Vec<Run>,
    /// The metrics of each run.
    pub metrics: Vec<Metrics>,
}

/// How far a [`Lab::run_with`] has come: simulated time done and in all, over every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Simulated nanoseconds done, summed over the runs.
    pub done: u64,
    /// Simulated nanoseconds in all the runs.
    pub total: u64,
}

impl<'a> Lab<'a> {
    /// Runs every setting of `scenario`.
    pub fn run(scenario: &'a Scenario) -> Lab<'a> {
        Lab::run_with(scenario, &|_| {})
    }

    /// Runs every setting of `scenario`, telling `progress` how far it has come now and then
    /// (about every simulated second, from the thread that runs the simulation).
    pub fn run_with(scenario: &'a Scenario, progress: &(dyn Fn(Progress) + Sync)) -> Lab<'a> {
        let each = sim::simulated_nanos(scenario);
        let total = each * scenario.settings.len() as u64;
        let runs: Vec<Run> = scenario
            .settings
            .iter()
            .enumerate()
            .map(|(i, (name, settings))| {
                let before = each * i as u64;
                sim::run(scenario, name, settings, &|done| {
                    progress(Progress {
                        done: before + done.min(each),
                        total,
                    })
                })
            })
            .collect();
        let metrics = runs.iter().map(|r| Metrics::of(scenario, r)).collect();
        Lab {
            scenario,
            runs,
            metrics,
        }
    }

    /// The report table.
    pub fn table(&self) -> String {
        report::table(self.scenario, &self.metrics)
    }

    /// The SVG timeline.
    pub fn svg(&self) -> Result<String, String> {
        plot::svg(self.scenario, &self.runs)
    }
}
