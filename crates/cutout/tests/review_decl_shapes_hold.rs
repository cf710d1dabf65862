//! Hostile review (#31): shapes the macro should take (holding unless a test fails).
#![cfg(all(feature = "macros", feature = "tokio"))]
// The shapes under test are odd on purpose (a method named `new` on `&self`, types named
// like the prelude's): the lints that would rename them are off here.
#![allow(
    dead_code,
    missing_docs,
    clippy::new_ret_no_self,
    clippy::wrong_self_convention
)]

use cutout::{Registry, Rejected};

/// The error the tests' delegates answer.
#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

/// A user type named like the prelude's.
pub struct Ok;
pub struct Some;

#[cutout::resilient]
pub(crate) trait Shapes {
    type Item;
    const LIMIT: usize;

    #[breaker]
    fn borrowed<'a>(&self, k: &'a str) -> Result<&'a str, E>;

    #[breaker]
    fn generic<T: Into<String>>(&self, t: T) -> Result<String, E>;

    #[breaker]
    fn with_where<T>(&self, t: T) -> Result<usize, E>
    where
        T: AsRef<[u8]>;

    #[breaker]
    fn pattern(&self, (a, b): (u8, u8), mut c: u8) -> Result<u8, E> {
        c += a + b;
        Result::Ok(c)
    }

    #[breaker]
    fn item(&self) -> Result<Self::Item, E>;

    #[breaker(retry(attempts = 2))]
    fn retried(&self, __cutout_arg0: u8, breaker: u8, delegate: u8, self_: u8) -> Result<u8, E>;

    #[breaker]
    fn by_impl(&self, k: impl AsRef<str>) -> Result<usize, E>;

    #[breaker]
    async fn borrowed_async<'a>(&'a self, k: &'a str) -> Result<&'a str, E>;

    #[breaker]
    fn new(&self) -> Result<u8, E>;

    fn ping(&self) -> u8 {
        1
    }
}

#[cutout::resilient]
trait Other {
    #[breaker]
    fn borrowed<'a>(&self, k: &'a str) -> Result<&'a str, E>;
}

struct S;
impl Shapes for S {
    type Item = u16;
    const LIMIT: usize = 3;
    fn borrowed<'a>(&self, k: &'a str) -> Result<&'a str, E> {
        Result::Ok(k)
    }
    fn generic<T: Into<String>>(&self, t: T) -> Result<String, E> {
        Result::Ok(t.into())
    }
    fn with_where<T>(&self, t: T) -> Result<usize, E>
    where
        T: AsRef<[u8]>,
    {
        Result::Ok(t.as_ref().len())
    }
    fn item(&self) -> Result<u16, E> {
        Result::Ok(9)
    }
    fn retried(&self, a: u8, b: u8, c: u8, d: u8) -> Result<u8, E> {
        Result::Ok(a + b + c + d)
    }
    fn by_impl(&self, k: impl AsRef<str>) -> Result<usize, E> {
        Result::Ok(k.as_ref().len())
    }
    async fn borrowed_async<'a>(&'a self, k: &'a str) -> Result<&'a str, E> {
        Result::Ok(k)
    }
    fn new(&self) -> Result<u8, E> {
        Result::Ok(5)
    }
}
impl Other for S {
    fn borrowed<'a>(&self, k: &'a str) -> Result<&'a str, E> {
        Result::Ok(k)
    }
}

#[test]
fn shapes_compile_and_run() {
    let registry = Registry::new();
    let w = ShapesResilient::new(S, &registry).unwrap();
    let o = OtherResilient::new(S, &registry).unwrap();
    assert_eq!(w.borrowed("x"), Result::Ok("x"));
    assert_eq!(o.borrowed("y"), Result::Ok("y"));
    assert_eq!(w.generic("g"), Result::Ok("g".to_owned()));
    assert_eq!(w.with_where("abc"), Result::Ok(3));
    assert_eq!(w.pattern((1, 2), 3), Result::Ok(6));
    assert_eq!(w.item(), Result::Ok(9));
    assert_eq!(w.retried(1, 2, 3, 4), Result::Ok(10));
    assert_eq!(w.by_impl("four"), Result::Ok(4));
    assert_eq!(Shapes::new(&w), Result::Ok(5));
    assert_eq!(<ShapesResilient<S> as Shapes>::LIMIT, 3);
    assert_eq!(w.ping(), 1);
    assert!(registry.contains("Shapes#borrowed(&'a str)"));
    assert!(registry.contains("Other#borrowed(&'a str)"));
    assert!(registry.contains("Shapes#generic(T)"));
    assert!(
        registry.contains("Shapes#pattern((u8, u8), u8)"),
        "{:?}",
        registry.ids()
    );
    assert!(
        registry.contains("Shapes#by_impl(impl AsRef<str>)"),
        "{:?}",
        registry.ids()
    );
}
