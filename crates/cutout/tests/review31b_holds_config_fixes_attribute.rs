//! Hostile review (rev31b), held: settings invalid in the attribute alone (`max_break_duration`
//! below `break_duration`) that the registry's `[instances.<id>]` makes valid once merged key
//! by key, and the reverse (a valid attribute made invalid by the file) failing at `new`.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, dead_code)]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use cutout::config::Config;
use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Api {
    #[breaker(break_duration = "30s", max_break_duration = "10s")]
    fn get(&self) -> Result<u8, E>;
    #[breaker(break_duration = "30s", max_break_duration = "60s")]
    fn put(&self) -> Result<u8, E>;
}

struct Backend;
impl Api for Backend {
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
    fn put(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn the_file_fixes_the_attribute_key_by_key() {
    let config = Config::from_toml(
        r#"
        [instances."Api#get()"]
        max-break-duration = "60s"
        "#,
    )
    .unwrap();
    let registry = Registry::builder().config(config).build();
    assert!(ApiResilient::new(Backend, &registry).is_ok());
}

#[test]
fn without_the_file_new_fails_with_a_code() {
    let error = ApiResilient::new(Backend, &Registry::new())
        .err()
        .expect("invalid");
    assert!(error.to_string().starts_with("CUT-CFG-"), "{error}");
}

#[test]
fn the_file_breaks_a_valid_attribute_at_new() {
    let config = Config::from_toml(
        r#"
        [instances."Api#get()"]
        max-break-duration = "60s"
        [instances."Api#put()"]
        break-duration = "2m"
        "#,
    )
    .unwrap();
    let registry = Registry::builder().config(config).build();
    let error = ApiResilient::new(Backend, &registry)
        .err()
        .expect("invalid");
    assert!(error.to_string().starts_with("CUT-CFG-"), "{error}");
}
