//! Hostile review (rev31c): held: associated functions without `self` pass through, generic
//! ones and ones taking `Self` too; a where clause `Self::X: Trait<Self::Y>`.
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
pub trait Api
where
    Self::X: PartialEq<Self::Y>,
{
    type X;
    type Y;
    fn make<T: Default>() -> T;
    fn version() -> u8;
    fn both(a: &Self, b: Self) -> u8;
    #[breaker(consecutive_failures = 1)]
    fn get(&self) -> Result<Self::X, E>;
}

struct Backend(u8);
impl Api for Backend {
    type X = u8;
    type Y = u8;
    fn make<T: Default>() -> T {
        T::default()
    }
    fn version() -> u8 {
        3
    }
    fn both(a: &Self, b: Self) -> u8 {
        a.0 + b.0
    }
    fn get(&self) -> Result<u8, E> {
        Ok(self.0)
    }
}

#[test]
fn associated_functions_pass_through() {
    let registry = Registry::new();
    let a = ApiResilient::new(Backend(1), &registry).unwrap();
    let b = ApiResilient::new(Backend(2), &registry).unwrap();
    assert_eq!(<ApiResilient<Backend> as Api>::version(), 3);
    assert_eq!(<ApiResilient<Backend> as Api>::make::<u32>(), 0);
    assert_eq!(<ApiResilient<Backend> as Api>::both(&a, b), 3);
    assert_eq!(a.get(), Ok(1));
}
