use cutout::Rejected;

#[derive(Debug)]
pub struct Down;

impl From<Rejected> for Down {
    fn from(_: Rejected) -> Self {
        Down
    }
}

fn bad(_: &Down) -> bool {
    true
}

fn classify(_: &Result<String, Down>) -> cutout::Outcome {
    cutout::Outcome::Failure
}

#[cutout::resilient]
pub trait Payments {
    #[breaker(classifier = classify, ignore = bad)]
    fn charge(&self, order: &str) -> Result<String, Down>;
}

fn main() {}
