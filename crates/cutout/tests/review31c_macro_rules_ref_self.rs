//! Hostile review (rev31c): the `macro_rules!` fix looks through the invisible group around a
//! whole parameter type, not around a `Self` fragment inside a reference. A trait written by
//! a macro with `other: &$t` and `$t = Self` reaches `passed` as `&Group(Self)`: `is_self`
//! does not ungroup `r.elem`, and the parameter is refused ("cannot reach one inside another
//! type") though the same trait written by hand (`other: &Self`) is wrapped, as the docs
//! promise for `Self`, `&Self` and `&mut Self` parameters.
#![cfg(all(feature = "macros", feature = "tokio"))]
#![allow(missing_docs)]

use cutout::Registry;

macro_rules! comparable {
    ($name:ident, $t:ty) => {
        #[cutout::resilient]
        pub trait $name {
            fn same(&self, other: &$t) -> bool;
        }
    };
}

comparable!(Same, Self);

struct Backend(u8);
impl Same for Backend {
    fn same(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

#[test]
fn a_macro_rules_ref_self_parameter_is_the_delegate() {
    let registry = Registry::new();
    let a = SameResilient::new(Backend(1), &registry).unwrap();
    let b = SameResilient::new(Backend(1), &registry).unwrap();
    assert!(a.same(&b));
}
