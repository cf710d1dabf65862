#[derive(Debug)]
pub struct Declined;

#[cutout::resilient]
pub trait Payments {
    #[breaker(window_size = 10)]
    fn charge(&self, order: &str) -> Result<String, Declined>;
}

fn main() {}
