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

pub use report::Metrics;
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

impl<'a> Lab<'a> {
    /// Runs every setting of `scenario`.
    pub fn run(scenario: &'a Scenario) -> Lab<'a> {
        let runs: Vec<Run> = scenario
            .settings
            .iter()
            .map(|(name, settings)| sim::run(scenario, name, settings))
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
