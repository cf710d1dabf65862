//! Hostile review (#31): generic traits (lifetimes, consts, defaults, where): holding.
// The shapes under test are odd on purpose (a method named `new` on `&self`, types named
// like the prelude's): the lints that would rename them are off here.
#![allow(missing_docs, clippy::new_ret_no_self, clippy::manual_async_fn)]
#![cfg(feature = "macros")]

use cutout::{Registry, Rejected};

/// The error the tests' delegates answer.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Lookup<'a, K = String, const N: usize = 4>
where
    K: AsRef<str>,
{
    #[breaker]
    fn get(&self, k: &'a K) -> Result<[u8; N], E>;
}

struct L;
impl<'a> Lookup<'a, String, 4> for L {
    fn get(&self, _: &'a String) -> Result<[u8; 4], E> {
        Ok([1; 4])
    }
}

#[test]
fn generic_traits_are_wrapped() {
    let registry = Registry::new();
    let w: LookupResilient<'_, L, String, 4> = LookupResilient::new(L, &registry).unwrap();
    let k = "k".to_owned();
    assert_eq!(w.get(&k), Ok([1; 4]));
}
