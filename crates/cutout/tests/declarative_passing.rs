//! What a generated wrapper hands its delegate: a `Self` parameter (by value, `&Self`,
//! `&mut Self`) as the delegate inside the wrapper, on methods passed through and on
//! `#[breaker]` methods alike; and a classifier named by path (a `static` one too) borrowed,
//! never moved.
#![cfg(feature = "macros")]

use cutout::classify::{Classify, Outcome};
use cutout::{Registry, Rejected, State};

#[derive(Debug, PartialEq)]
struct Down;

impl From<Rejected> for Down {
    fn from(_: Rejected) -> Self {
        Down
    }
}

/// A classifier that is not `Copy` (it owns a `String`): moving it out of its `static` would
/// not compile.
struct StatusAbove {
    limit: u16,
    _label: String,
}

impl Classify<u16, Down> for StatusAbove {
    fn classify(&self, result: &Result<u16, Down>) -> Outcome {
        match result {
            Ok(status) if *status >= self.limit => Outcome::Failure,
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Ignored,
        }
    }
}

static SERVER_ERRORS: StatusAbove = StatusAbove {
    limit: 500,
    _label: String::new(),
};

#[cutout::resilient]
trait Counter {
    /// Associated types stay the delegate's, whichever way they are named.
    type Unit;

    fn merged(&self, other: &Self) -> u32;

    fn add(&self, unit: <Self as Counter>::Unit, more: Self::Unit) -> u32;

    fn absorb(&mut self, other: Self) -> u32;

    fn take_from(&self, other: &mut Self) -> u32;

    #[breaker(consecutive_failures = 1, break_duration = "1m")]
    fn compare(&self, other: &Self) -> Result<bool, Down>;

    #[breaker(name = "status", consecutive_failures = 1, break_duration = "1m", classifier = SERVER_ERRORS)]
    fn status(&self, code: u16) -> Result<u16, Down>;
}

#[derive(Debug, PartialEq)]
struct Count(u32);

impl Counter for Count {
    type Unit = u32;

    fn merged(&self, other: &Self) -> u32 {
        self.0 + other.0
    }

    fn add(&self, unit: u32, more: u32) -> u32 {
        self.0 + unit + more
    }

    fn absorb(&mut self, other: Self) -> u32 {
        self.0 += other.0;
        self.0
    }

    fn take_from(&self, other: &mut Self) -> u32 {
        std::mem::take(&mut other.0)
    }

    fn compare(&self, other: &Self) -> Result<bool, Down> {
        if other.0 == 0 {
            Err(Down)
        } else {
            Ok(self.0 > other.0)
        }
    }

    fn status(&self, code: u16) -> Result<u16, Down> {
        Ok(code)
    }
}

fn counter(n: u32, registry: &Registry) -> CounterResilient<Count> {
    CounterResilient::new(Count(n), registry).unwrap()
}

#[test]
fn a_self_parameter_is_the_delegate_inside_the_wrapper() {
    let registry = Registry::new();
    let mut a = counter(2, &registry);
    let mut b = counter(3, &registry);
    assert_eq!(a.merged(&b), 5, "&Self: the other wrapper's delegate");
    assert_eq!(a.add(1, 2), 5, "associated types named through Self");
    assert_eq!(a.take_from(&mut b), 3, "&mut Self");
    assert_eq!(
        CounterResilient::delegate(&b),
        &Count(0),
        "taken from b's delegate"
    );
    assert_eq!(a.absorb(counter(4, &registry)), 6, "Self by value");
    assert_eq!(CounterResilient::into_inner(a), Count(6));
}

#[test]
fn a_self_parameter_of_a_breaker_method_reaches_the_delegate() {
    let registry = Registry::new();
    let a = counter(5, &registry);
    assert_eq!(a.compare(&counter(2, &registry)), Ok(true));
    assert_eq!(
        registry.state("Counter#compare(&Self)").unwrap(),
        State::Closed
    );
    assert_eq!(a.compare(&counter(0, &registry)), Err(Down));
    assert_eq!(
        registry.state("Counter#compare(&Self)").unwrap(),
        State::Open,
        "the delegate saw the other's zero, and failed"
    );
}

#[test]
fn a_static_classifier_is_borrowed() {
    let registry = Registry::new();
    let a = counter(1, &registry);
    assert_eq!(a.status(200), Ok(200));
    assert_eq!(registry.state("status").unwrap(), State::Closed);
    assert_eq!(a.status(503), Ok(503));
    assert_eq!(registry.state("status").unwrap(), State::Open);
}
