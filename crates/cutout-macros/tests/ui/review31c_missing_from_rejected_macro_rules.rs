// Hostile review (rev31c): the refusal arm's hygiene change keeps `refused::<E>` spanned at the
// error type; with the error type a `macro_rules!` fragment, the message must still point at it.
#[derive(Debug)]
pub struct Declined;

macro_rules! payments {
    ($e:ty) => {
        #[cutout::resilient]
        pub trait Payments {
            #[breaker(window_size = 10)]
            fn charge(&self, order: &str) -> Result<String, $e>;
        }
    };
}

payments!(Declined);

fn main() {}
