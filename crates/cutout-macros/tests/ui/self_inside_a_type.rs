use cutout::Rejected;

pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
trait Merge {
    fn merge_all(&self, others: Vec<&Self>) -> u32;
}

fn main() {}
