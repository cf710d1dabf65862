use cutout::Rejected;

pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

/// # Safety
/// `get` never returns 0.
#[cutout::resilient]
unsafe trait NonZero {
    #[breaker(name = "non-zero")]
    fn get(&self) -> Result<u8, E>;
}

fn main() {}
