//! Hostile review (rev31c): `where Self: Sized` on the trait, the most common where clause
//! naming `Self`. `as_delegate` reads a `Self` followed by *one* `:` as the start of a path
//! (`Self::X`), so the bound `Self: Sized` becomes `<D as Export<T>>: Sized`, which does not
//! parse: the macro fails with "expected `::`". The fix's claim: "a trait where-clause naming
//! Self reads it as the delegate on the impls".
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

#[cutout::resilient]
pub trait Export<T>
where
    T: From<u8>,
    Self: Sized,
{
    #[breaker(consecutive_failures = 1)]
    fn export(&self) -> Result<T, E>;
}

struct Backend;
impl Export<u16> for Backend {
    fn export(&self) -> Result<u16, E> {
        Ok(u16::from(7u8))
    }
}

#[test]
fn self_sized_where_clause_holds() {
    let api = ExportResilient::new(Backend, &Registry::new()).unwrap();
    assert_eq!(api.export(), Ok(7));
}
