//! Hostile review (rev31c): the fix "a sync method's `&mut` parameter is reborrowed for each
//! attempt" looks at the syntax (`Type::Reference` with `mut`), so a `&mut` parameter spelled
//! through a type alias (`Buf<'_>` for `&mut Vec<u8>`) is still cloned, and the trait does not
//! compile (`&mut Vec<u8>: Clone` does not hold). Against the docs: "a sync method's `&mut`
//! parameter is reborrowed for each attempt instead".
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs)]

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

pub type Buf<'a> = &'a mut Vec<u8>;

#[cutout::resilient]
pub trait Reader {
    #[breaker(consecutive_failures = 5, retry(attempts = 2))]
    fn read_into(&self, buf: Buf<'_>) -> Result<usize, E>;
}

struct Backend;
impl Reader for Backend {
    fn read_into(&self, buf: Buf<'_>) -> Result<usize, E> {
        buf.push(1);
        if buf.len() < 2 { Err(E) } else { Ok(buf.len()) }
    }
}

#[test]
fn a_retried_method_takes_an_aliased_mut_reference() {
    let reader = ReaderResilient::new(Backend, &Registry::new()).unwrap();
    let mut buf = Vec::new();
    assert_eq!(reader.read_into(&mut buf), Ok(2));
}
