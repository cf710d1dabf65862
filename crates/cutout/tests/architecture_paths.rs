//! `ARCHITECTURE.md` cannot rot silently: every path it names in backticks exists, and every
//! crate of the workspace has its place in the code map.
//!
//! A backticked span is taken for a path when it has no whitespace and no `::`, and either
//! contains a `/` or ends in a file extension this repository uses (`BENCHMARKS.md`,
//! `crates/cutout/src/breaker.rs`, `crates/cutout/src/front/`). Paths are written from the
//! repository root. Fenced code blocks are skipped. What this cannot see: a path written
//! without backticks, and a file that exists but no longer does what the document says.

use std::path::{Path, PathBuf};

/// Extensions that make a backticked span a path even without a `/`.
const EXTENSIONS: &[&str] = &[
    ".rs", ".md", ".toml", ".html", ".svg", ".json", ".sh", ".lock",
];

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The backticked spans of `text` outside fenced code blocks.
fn code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Odd pieces between backticks are code spans (the document uses single backticks).
        spans.extend(line.split('`').skip(1).step_by(2));
    }
    spans
}

/// Whether a code span names a file or directory of the repository.
fn is_path(span: &str) -> bool {
    !span.is_empty()
        && !span.chars().any(char::is_whitespace)
        && !span.contains("::")
        && !span.contains("://")
        && (span.contains('/') || EXTENSIONS.iter().any(|ext| span.ends_with(ext)))
}

/// The paths `text` names that do not exist under `root`, in the order they appear.
fn missing_paths(root: &Path, text: &str) -> Vec<String> {
    code_spans(text)
        .into_iter()
        .filter(|span| is_path(span))
        .filter(|path| !root.join(path).exists())
        .map(str::to_owned)
        .collect()
}

/// The crates of the workspace (`crates/<name>` with a `Cargo.toml`) that `text` never names
/// as a backticked `crates/<name>`.
fn crates_not_mapped(root: &Path, text: &str) -> Vec<String> {
    let spans = code_spans(text);
    let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("the crates directory")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").exists())
        .map(|entry| format!("crates/{}", entry.file_name().to_string_lossy()))
        .collect();
    crates.sort();
    crates.retain(|name| !spans.iter().any(|span| span.trim_end_matches('/') == name));
    crates
}

fn architecture() -> String {
    let path = repository_root().join("ARCHITECTURE.md");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("ARCHITECTURE.md at {}: {e}", path.display()))
}

#[test]
fn every_path_the_architecture_document_names_exists() {
    let text = architecture();
    let named = code_spans(&text).into_iter().filter(|s| is_path(s)).count();
    assert!(
        named > 50,
        "only {named} paths found: is the extraction still reading the document?"
    );
    let missing = missing_paths(&repository_root(), &text);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (fix the document or the path): {missing:#?}"
    );
}

#[test]
fn every_crate_of_the_workspace_is_in_the_code_map() {
    let missing = crates_not_mapped(&repository_root(), &architecture());
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map has no entry for: {missing:#?}"
    );
}

#[test]
fn a_path_that_does_not_exist_is_reported_and_other_spans_are_not_paths() {
    let text = "\
The handle is `crates/cutout/src/breaker.rs`; the old one was `crates/cutout/src/gone.rs`.
`Breaker::call`, `# Orderings`, `cfg(loom)`, `\"30s\"` and `CUT-CFG-001` are not paths;
`NOPE.md` is one, and so is `crates/cutout/src/nowhere/`.
```text
`crates/inside/a/fence.rs` is skipped
```
";
    assert_eq!(
        missing_paths(&repository_root(), text),
        [
            "crates/cutout/src/gone.rs",
            "NOPE.md",
            "crates/cutout/src/nowhere/"
        ]
    );
}

#[test]
fn a_crate_missing_from_the_code_map_is_reported() {
    let missing = crates_not_mapped(&repository_root(), "only `crates/cutout` here");
    assert!(missing.contains(&"crates/cutout-gateway".to_owned()));
    assert!(!missing.contains(&"crates/cutout".to_owned()));
}
