//! Hostile review (rev31b), held: an `unsafe fn` trait method passed through under
//! `#![deny(unsafe_op_in_unsafe_fn)]` (edition 2024).
#![cfg(all(feature = "macros", feature = "tokio"))]
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(unsafe_code)]
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
pub trait Raw {
    /// # Safety
    /// `ptr` is valid.
    unsafe fn peek(&self, ptr: *const u8) -> u8;

    #[breaker(consecutive_failures = 3)]
    fn get(&self) -> Result<u8, E>;
}

struct Backend;
impl Raw for Backend {
    unsafe fn peek(&self, ptr: *const u8) -> u8 {
        // SAFETY: the caller's promise.
        unsafe { *ptr }
    }
    fn get(&self) -> Result<u8, E> {
        Ok(1)
    }
}

#[test]
fn an_unsafe_method_is_passed_through_without_a_lint() {
    let raw = RawResilient::new(Backend, &Registry::new()).unwrap();
    let x = 7u8;
    // SAFETY: `&x` is valid.
    assert_eq!(unsafe { raw.peek(&x) }, 7);
    assert_eq!(raw.get(), Ok(1));
}
