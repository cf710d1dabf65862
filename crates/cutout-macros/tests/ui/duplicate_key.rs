// A key given twice in one attribute: a TOML table rejects it; the attribute must too.
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
    #[breaker(window_size = 10, window_size = 20)]
    fn get(&self) -> Result<u8, E>;

    #[breaker(name = "a", name = "b")]
    fn put(&self) -> Result<u8, E>;
}

fn main() {}
