// Hostile review (rev31c): `#[breaker]` on an associated function without `self` (now passed
// through when it has no breaker) must be a clear compile error naming the receiver.
pub struct E;
impl From<cutout::Rejected> for E {
    fn from(_: cutout::Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Factory {
    #[breaker(consecutive_failures = 1)]
    fn make() -> Result<u8, E>;
}

fn main() {}
