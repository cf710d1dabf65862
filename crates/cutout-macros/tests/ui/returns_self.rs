use cutout::Rejected;

pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Fork {
    #[breaker]
    fn fork(&self) -> Result<Self, E>
    where
        Self: Sized;
}

fn main() {}
