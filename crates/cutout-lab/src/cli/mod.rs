//! The binary's subcommands beside a scenario run (`cutout-lab replay`).

pub mod replay;
