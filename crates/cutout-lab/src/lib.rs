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
//! [`plot`] (the SVG), [`scenario`] (the file format), [`oracle`] (the column that refuses
//! exactly the attempts that would fail, and every setting's figures against it) and
//! [`signals`] (fleet signals through a simulated store, with cutout-fleet's aggregation); on
//! the caller's side, [`saturation`] (a
//! pod's CPU saturation delaying all its calls), [`connections`] (pools whose new
//! connections pay setup) and [`phases`] (traffic that changes shape), whose keys
//! [`keys`] checks. [`json`] writes every seed's figures and the settings compared seed by
//! seed (`--json`).

#![forbid(unsafe_code)]

pub mod caller;
pub mod connections;
pub mod dependency;
pub mod duration;
pub mod fit;
pub mod fleet;
pub mod incident;
pub mod json;
pub mod keys;
pub mod latency;
pub mod load_sweep;
pub mod oracle;
pub mod phases;
pub mod plot;
pub mod record;
pub mod replay;
pub mod report;
pub mod saturation;
pub mod scenario;
pub mod seeds;
pub mod signals;
pub mod sim;
pub mod sweep;

pub use report::{Figure, Metrics};
pub use scenario::Scenario;
pub use sim::{Counts, Run};

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::caller::RetryPolicy;
use crate::fleet::BreakerPer;
pub use crate::oracle::ORACLE;
pub use crate::sim::Subject;

/// The label of the fleet without breakers, the first column of every report.
pub const NO_BREAKER: &str = "no breaker";

/// Every setting of a scenario run on the same seed, with its metrics.
#[derive(Debug, Clone)]
pub struct Lab<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// One run per subject, in [`Lab::subjects`]'s order: no breaker first, the oracle last.
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

    /// What a scenario's report compares, in column order: the fleet with no breaker first,
    /// then every setting under every breaker layout the scenario names (with
    /// `[fleet-signals]`, each setting's column is followed by `<setting> + fleet signals`),
    /// and the [`ORACLE`] last ([`crate::oracle`]), routing as a breaker per replica does
    /// when a layout of the scenario is one.
    ///
    /// Without a breaker both retry policies are the same one: the no-breaker column and the
    /// oracle run once, with the first.
    pub fn subjects(scenario: &Scenario) -> Vec<Subject<'_>> {
        let layouts = &scenario.traffic.breaker_per;
        let policies = &scenario.traffic.retry_policy;
        let mut subjects = vec![Subject {
            label: NO_BREAKER.to_owned(),
            settings: None,
            per: BreakerPer::Dependency,
            retry: policies[0],
            fleet_signals: false,
            oracle: false,
        }];
        let signals: &[bool] = if scenario.fleet_signals.is_some() {
            &[false, true]
        } else {
            &[false]
        };
        for &retry in policies {
            for &per in layouts {
                for (name, settings) in &scenario.settings {
                    let mut label = name.clone();
                    if layouts.len() > 1 {
                        label += match per {
                            BreakerPer::Dependency => ", one per dependency",
                            BreakerPer::Host => ", per host",
                        };
                    }
                    if policies.len() > 1 {
                        label += match retry {
                            RetryPolicy::Naive => ", naive retries",
                            RetryPolicy::BreakerAware => ", breaker-aware retries",
                        };
                    }
                    for &fleet_signals in signals {
                        let mut label = label.clone();
                        if fleet_signals {
                            label += " + fleet signals";
                        }
                        subjects.push(Subject {
                            label,
                            settings: Some(settings),
                            per,
                            retry,
                            fleet_signals,
                            oracle: false,
                        });
                    }
                }
            }
        }
        subjects.push(Subject {
            label: ORACLE.to_owned(),
            settings: None,
            per: if layouts.contains(&BreakerPer::Host) {
                BreakerPer::Host
            } else {
                BreakerPer::Dependency
            },
            retry: policies[0],
            fleet_signals: false,
            oracle: true,
        });
        subjects
    }

    /// Runs every subject of `scenario` (see [`Lab::subjects`]), as many at once as there
    /// are cores, telling `progress` how far they have come now and then (about every
    /// simulated second, from the threads that run them).
    pub fn run_with(scenario: &'a Scenario, progress: &(dyn Fn(Progress) + Sync)) -> Lab<'a> {
        let subjects = Lab::subjects(scenario);
        let each = sim::simulated_nanos(scenario);
        let total = each * subjects.len() as u64;
        let done: Vec<AtomicU64> = subjects.iter().map(|_| AtomicU64::new(0)).collect();
        let next = AtomicUsize::new(0);
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(subjects.len());
        let mut runs: Vec<(usize, Run)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(subject) = subjects.get(i) else {
                                return mine;
                            };
                            let run = sim::run(scenario, subject, &|at| {
                                done[i].store(at.min(each), Ordering::Relaxed);
                                progress(Progress {
                                    done: done.iter().map(|d| d.load(Ordering::Relaxed)).sum(),
                                    total,
                                });
                            });
                            mine.push((i, run));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        runs.sort_by_key(|(i, _)| *i);
        let runs: Vec<Run> = runs.into_iter().map(|(_, run)| run).collect();
        let mut metrics: Vec<Metrics> = runs.iter().map(|r| Metrics::of(scenario, r)).collect();
        if let Some(o) = runs.iter().position(|r| r.oracle) {
            let oracle_goodput = metrics[o].goodput;
            for (m, run) in metrics.iter_mut().zip(&runs) {
                if !run.oracle {
                    m.read_against_oracle(scenario, run, &runs[o], oracle_goodput);
                }
            }
        }
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

    /// The SVG timeline, every file of it: (file-name suffix, SVG), at most 1,600 px wide
    /// each (see [`plot::svgs`]).
    pub fn svgs(&self) -> Result<Vec<(String, String)>, String> {
        plot::svgs(self.scenario, &self.runs)
    }

    /// The SVG timeline's first file (all of it for up to four columns).
    pub fn svg(&self) -> Result<String, String> {
        plot::svg(self.scenario, &self.runs)
    }
}
