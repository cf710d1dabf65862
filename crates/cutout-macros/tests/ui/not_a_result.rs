#[cutout::resilient]
pub trait Payments {
    #[breaker(window_size = 10)]
    fn charge(&self, order: &str) -> String;
}

fn main() {}
