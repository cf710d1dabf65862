use cutout::Rejected;

pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

// Spelled as the config file spells it.
#[cutout::resilient]
trait Payments {
    #[breaker(name = "payments", failure-ratio = 0.5)]
    fn charge(&self) -> Result<u8, E>;
}

fn main() {}
