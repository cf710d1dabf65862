//! Hostile review (rev31c): "a trait where-clause naming Self reads it as the delegate on the
//! impls". That is right for `Self::X` (the wrapper's `X` is the delegate's), wrong for a
//! bare `Self` as a type argument: `where Id: for<'a> From<&'a Self>` is a promise about the
//! *implementor*, here the wrapper, so the impl the macro writes (`Id: From<&'a D>`) does not
//! prove the trait's `Id: From<&'a IdentifiedResilient<D>>` and the trait impl does not
//! compile.
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

// `Self` as a type argument in the trait's where clause.
pub struct Id(pub u8);

#[cutout::resilient]
pub trait Identified
where
    Id: for<'a> From<&'a Self>,
{
    fn id(&self) -> Id;
}

struct Named(u8);
impl<'a> From<&'a Named> for Id {
    fn from(n: &'a Named) -> Id {
        Id(n.0)
    }
}
impl Identified for Named {
    fn id(&self) -> Id {
        Id::from(self)
    }
}

#[test]
fn self_as_a_type_argument_in_the_where_clause() {
    let api = IdentifiedResilient::new(Named(3), &Registry::new()).unwrap();
    assert_eq!(api.id().0, 3);
}
