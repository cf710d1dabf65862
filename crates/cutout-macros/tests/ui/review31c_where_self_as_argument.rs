//! Hostile review (rev31c): `Self` as a type argument in the trait's where clause
//! (`Id: for<'a> From<&'a Self>`) asks something of the wrapper itself, which no delegate can
//! meet for it: a compile error that says so (`Self` as the bounded type or in a path is read
//! as the delegate).

use cutout::Rejected;

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

fn main() {}
