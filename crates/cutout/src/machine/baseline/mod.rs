//! Baselines: what the dependency normally costs and how often it normally fails, measured
//! over a window much longer than the trip window. They never decide by themselves; the
//! relative trips compare the trip window with them.

mod failure;
pub(crate) mod histogram;
mod latency;
mod tail;

pub(crate) use failure::FailureBaseline;
pub(crate) use latency::LatencyBaseline;
pub(crate) use tail::{ProbeTail, SPELL_MULTIPLE, TAIL_CHANCE};

/// Slices per latency baseline window: a slice drops out whole, so the baseline covers between
/// 75% and 100% of its window. Four, not ten, because each is a histogram of 420 bytes and a
/// default breaker holds at most 4 KiB (`tests/memory.rs`).
const LATENCY_SLICES: usize = 4;

/// Slices per failure baseline window: it covers between 90% and 100% of its window. Each
/// slice is two counts (16 bytes); its boundaries also end the fast flag (see
/// `Machine::publish`), so their spacing is unchanged.
const FAILURE_SLICES: usize = 10;
