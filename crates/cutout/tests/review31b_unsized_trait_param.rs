//! Hostile review (rev31b): a trait generic over a `?Sized` type (`Codec<T: ?Sized>`, used as
//! `Codec<str>`). The wrapper's marker is `PhantomData<fn() -> (T,)>`, a tuple of the trait's
//! type parameters, which needs them `Sized` (with two, the first one must be).
#![cfg(all(feature = "macros", feature = "tokio"))]
// A test's items are public only to be used as users would; its shapes are written as users write them.
#![allow(
    missing_docs,
    async_fn_in_trait,
    clippy::manual_async_fn,
    clippy::new_ret_no_self,
    clippy::non_minimal_cfg
)]

use cutout::{Registry, Rejected};

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Codec<T: ?Sized, U> {
    #[breaker(consecutive_failures = 3)]
    fn encode(&self, value: &T, extra: U) -> Result<usize, E>;
}

struct Len;
impl Codec<str, u8> for Len {
    fn encode(&self, value: &str, extra: u8) -> Result<usize, E> {
        Ok(value.len() + usize::from(extra))
    }
}

#[test]
fn a_trait_over_an_unsized_parameter_is_wrapped() {
    let codec = CodecResilient::new(Len, &Registry::new()).unwrap();
    assert_eq!(codec.encode("abc", 1), Ok(4));
}
