//! The compile errors of `#[cutout::resilient]` (trybuild): each `ui/*.rs` must fail to
//! compile with its `.stderr` (pin new ones with `TRYBUILD=overwrite`, then read them).

#[test]
fn compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
