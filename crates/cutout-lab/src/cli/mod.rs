//! The binary's subcommands beside a scenario run (`cutout-lab replay`, `cutout-lab fit`).

pub mod fit;
mod record;
pub mod replay;
