//! Baselines: what the dependency normally costs and how often it normally fails, measured
//! over a window much longer than the trip window. They never decide by themselves; the
//! relative trips compare the trip window with them.

mod failure;
pub(crate) mod histogram;
mod latency;
pub(crate) mod samples;

pub(crate) use failure::FailureBaseline;
pub(crate) use latency::LatencyBaseline;

/// Slices per baseline window: a slice drops out whole, so the baseline covers between 90%
/// and 100% of its window.
const SLICES: usize = 10;
