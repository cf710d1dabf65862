use cutout::Rejected;

#[derive(Debug)]
pub struct Down;

impl From<Rejected> for Down {
    fn from(_: Rejected) -> Self {
        Down
    }
}

#[cutout::resilient]
pub trait Payments {
    #[breaker(name = "payments", window_sise = 10)]
    fn charge(&self, order: &str) -> Result<String, Down>;
}

fn main() {}
