//! The binary: prints the report, writes the SVG, and prints the same thing twice.

use std::process::Command;

const SCENARIO: &str = r#"
seed = 2
duration = "90s"
[dependency]
latency-median = "20ms"
latency-p99 = "80ms"
error-rate = 0.01
capacity = 1000
[fleet]
pods = 5
rate = 10
timeout = "1s"
[[incidents]]
kind = "outage"
start = "20s"
duration = "20s"
[breakers.instances.none]
jitter = "none"
[breakers.instances.equal]
"#;

fn run(dir: &std::path::Path, svg: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .arg(dir.join("tiny.toml"))
        .arg("--svg")
        .arg(dir.join(svg))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_binary_is_deterministic_and_writes_the_svg() {
    let dir = std::env::temp_dir().join(format!("cutout-lab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tiny.toml"), SCENARIO).unwrap();
    let first = run(&dir, "a.svg");
    let second = run(&dir, "b.svg");
    assert!(
        first.contains("most probes reaching it in any 1 s"),
        "{first}"
    );
    assert_eq!(
        first.replace("a.svg", "b.svg"),
        second,
        "same seed, same output"
    );
    let a = std::fs::read_to_string(dir.join("a.svg")).unwrap();
    assert!(a.starts_with("<svg"), "{}", &a[..40.min(a.len())]);
    assert_eq!(a, std::fs::read_to_string(dir.join("b.svg")).unwrap());
    let missing = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}
