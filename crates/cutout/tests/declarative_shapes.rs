//! The trait shapes `#[cutout::resilient]` wraps: lifetime and const parameters, associated
//! consts, methods passed through with every receiver, and `#[breaker]` without keys (the
//! built-in defaults, its own id).
#![cfg(feature = "macros")]

use cutout::{Registry, Rejected, Settings};

#[derive(Debug, PartialEq)]
struct Missing;

impl From<Rejected> for Missing {
    fn from(_: Rejected) -> Self {
        Missing
    }
}

#[cutout::resilient]
trait Lookup<'a, const N: usize> {
    const LIMIT: usize;

    #[breaker]
    fn find(&self, key: &'a str) -> Result<&'a str, Missing>;

    fn reset(&mut self) -> usize;

    fn into_count(self) -> usize;
}

struct Table {
    resets: usize,
}

impl<'a> Lookup<'a, 4> for Table {
    const LIMIT: usize = 4;

    fn find(&self, key: &'a str) -> Result<&'a str, Missing> {
        if key.len() <= 4 {
            Ok(key)
        } else {
            Err(Missing)
        }
    }

    fn reset(&mut self) -> usize {
        self.resets += 1;
        self.resets
    }

    fn into_count(self) -> usize {
        self.resets
    }
}

#[test]
fn lifetimes_consts_and_every_receiver_are_wrapped() {
    let registry = Registry::new();
    let mut table: LookupResilient<'_, Table, 4> =
        LookupResilient::new(Table { resets: 0 }, &registry).unwrap();
    let key = String::from("abc");
    assert_eq!(table.find(&key), Ok("abc"));
    assert_eq!(table.find("too long"), Err(Missing));
    assert_eq!(<LookupResilient<'_, Table, 4> as Lookup<'_, 4>>::LIMIT, 4);
    assert_eq!(table.reset(), 1);
    assert_eq!(table.reset(), 2);
    assert_eq!(table.into_count(), 2);

    // `#[breaker]` without keys: the built-in defaults, under the method's own id.
    let breaker = registry.get("Lookup#find(&'a str)").unwrap();
    assert_eq!(breaker.settings(), &Settings::default());
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (2, 1));
}
