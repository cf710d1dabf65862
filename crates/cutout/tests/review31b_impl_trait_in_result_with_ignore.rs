//! Hostile review (rev31b): a `#[breaker]` method returning `Result<impl Display, E>`
//! (return-position impl Trait in a trait) with `ignore`. Without `ignore` it compiles; with
//! it, the generated classifier closure is annotated `&Result<impl Display, E>`, and
//! `impl Trait` is not allowed in a closure's parameter type (E0562).
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use std::fmt::Display;

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub enum E {
    Bad,
    Refused,
}
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E::Refused
    }
}
fn bad(e: &E) -> bool {
    *e == E::Bad
}

#[cutout::resilient]
pub trait Render {
    #[breaker(consecutive_failures = 1, ignore = bad)]
    fn render(&self, ok: bool) -> Result<impl Display, E>;
}

struct Backend;
impl Render for Backend {
    fn render(&self, ok: bool) -> Result<impl Display, E> {
        if ok { Ok(7) } else { Err(E::Bad) }
    }
}

#[test]
fn an_impl_trait_result_takes_ignore() {
    let registry = Registry::new();
    let render = RenderResilient::new(Backend, &registry).unwrap();
    assert!(matches!(render.render(false), Err(E::Bad)));
    // Ignored: the breaker is still closed.
    assert_eq!(render.render(true).unwrap().to_string(), "7");
}
