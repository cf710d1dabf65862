// A count past u32: the file refuses `minimum-calls = 4294967296` (CUT-CFG-010); the attribute
// must refuse it when the trait compiles, with the same code, not only at `new`.
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
    #[breaker(minimum_calls = 4294967296)]
    fn get(&self) -> Result<u8, E>;
}

fn main() {}
