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
    #[breaker(window_size = 2000000)]
    fn charge(&self, order: &str) -> Result<String, Down>;
}

fn main() {}
