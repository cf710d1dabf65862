//! Hostile review (rev31c): the docs say the default id is the parameter types "spaced as
//! rustfmt writes types". `compact` drops the space between a word and a following `[` or
//! `(`, so `&mut [u8]` is `&mut[u8]`, `&'a [u8]` is `&'a[u8]`, `*const [u8]` is
//! `*const[u8]`, and `[u8; 4 - 1]` loses the spaces `[u8; 4 + 1]` keeps: an
//! `[instances."Io#read(&mut [u8])"]` section written from the source matches nothing.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs, clippy::needless_lifetimes)]

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Io {
    #[breaker]
    fn read(&self, buf: &mut [u8]) -> Result<usize, E>;
    #[breaker]
    fn peek<'a>(&self, buf: &'a [u8]) -> Result<usize, E>;
    #[breaker]
    fn raw(&self, buf: *const [u8]) -> Result<usize, E>;
    #[breaker]
    fn minus(&self, buf: [u8; 4 - 1]) -> Result<usize, E>;
}

struct Backend;
impl Io for Backend {
    fn read(&self, _: &mut [u8]) -> Result<usize, E> {
        Ok(0)
    }
    fn peek<'a>(&self, _: &'a [u8]) -> Result<usize, E> {
        Ok(0)
    }
    fn raw(&self, _: *const [u8]) -> Result<usize, E> {
        Ok(0)
    }
    fn minus(&self, _: [u8; 4 - 1]) -> Result<usize, E> {
        Ok(0)
    }
}

#[test]
fn slice_ids_are_spaced_as_rustfmt_writes_types() {
    let registry = Registry::new();
    let _io = IoResilient::new(Backend, &registry).unwrap();
    let mut ids: Vec<String> = registry
        .ids()
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "Io#minus([u8; 4 - 1])",
            "Io#peek(&'a [u8])",
            "Io#raw(*const [u8])",
            "Io#read(&mut [u8])",
        ]
    );
}
