// Hostile review (rev31b): a key given twice inside `retry(...)`. The attribute refuses a key
// given twice ("one would silently win: the config file's reader refuses a duplicate key
// too"), but inside `retry(...)` the last `attempts` silently wins.
use cutout::Rejected;

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Api {
    #[breaker(retry(attempts = 2, attempts = 5))]
    fn get(&self) -> Result<u8, E>;

    #[breaker(retry(backoff = "1ms", backoff = "1s"))]
    fn put(&self) -> Result<u8, E>;
}

fn main() {}
