//! The live status page: static HTML whose script polls `/breakers` every second and redraws.
//!
//! The page keeps, in memory, the state changes it has itself observed between polls
//! (`#seen`), so a test can tell an update without a reload from a fresh load.

/// The page (see `status.html`).
pub const HTML: &str = include_str!("status.html");
