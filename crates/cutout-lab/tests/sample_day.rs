//! The shipped sample (`samples/day/`): a real access log of the gateway under a scripted
//! day, replayed as the README walks through it. The recommendation trips on nothing
//! healthy, opens within the window it states, and its block gives a gateway cluster and
//! cutout's config exactly the settings replayed; the healthy part of the day alone trips
//! nothing; the fitted scenario loads and runs.

mod common;

use std::process::Command;

use common::Dir;

fn sample(name: &str) -> String {
    format!("{}/samples/day/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn lab(args: &[&str]) -> (serde_json::Value, String) {
    let dir = Dir::new("sample-day");
    let json = dir.path("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .args(args)
        .args(["--json", &json])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (value, stdout)
}

#[test]
fn the_sample_day_s_recommendation_holds_what_it_states() {
    let log = sample("day.log.gz");
    let candidates = sample("candidates.toml");
    let (json, stdout) = lab(&[
        "replay",
        &log,
        "--config",
        &candidates,
        "--latency-budget",
        "100ms",
    ]);
    // The scripted day's outage and brownout, and nothing else.
    let incidents = json["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 2, "{stdout}");
    assert_eq!(incidents[0]["seconds"], 180.0, "{stdout}");
    assert_eq!(incidents[1]["seconds"], 120.0, "{stdout}");
    let chosen = json["recommended"].as_str().unwrap();
    let outcome = json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == chosen)
        .unwrap();
    assert_eq!(outcome["false_trips"], 0, "{stdout}");
    let window = json["recommended_window_seconds"].as_f64().unwrap();
    for incident in outcome["incidents"].as_array().unwrap() {
        let opened = incident["opened_after_seconds"].as_f64().unwrap();
        assert!(opened <= window, "{opened} > {window}: {stdout}");
    }
    // The shipped defaults give traffic back a minute after the outage; the recommendation
    // within 15 s.
    let shipped = json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "shipped")
        .unwrap();
    assert!(
        shipped["incidents"][0]["closed_after_end_seconds"]
            .as_f64()
            .unwrap()
            > 30.0
    );
    assert!(
        outcome["incidents"][0]["closed_after_end_seconds"]
            .as_f64()
            .unwrap()
            < 15.0
    );

    // The block, pasted into the sample's gateway config for its cluster, gives it the
    // settings replayed; and cutout's config reads it as the same.
    let at = stdout.find("[configs.recommended]").unwrap();
    let block: String = stdout[at..]
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let replayed =
        cutout::config::Config::from_toml(&std::fs::read_to_string(&candidates).unwrap()).unwrap();
    let replayed = replayed.instance(chosen).unwrap();
    let core = cutout::config::Config::from_toml(&block).unwrap();
    assert_eq!(core.config("recommended").unwrap(), replayed, "{block}");
    let gateway_text = std::fs::read_to_string(sample("gateway.toml")).unwrap();
    let gateway_text = gateway_text.replace("[breakers.defaults]\nshadow = true\n", "")
        + "\n[breakers.instances.accounts]\nbase-config = \"recommended\"\n"
        + &block.replace("[configs.", "[breakers.configs.");
    let gateway = cutout_gateway::GatewayConfig::from_toml(&gateway_text).unwrap();
    assert_eq!(
        &gateway.cluster_settings("accounts"),
        replayed,
        "{gateway_text}"
    );

    // The healthy part of the day alone (before the outage, 12 minutes in): no trip.
    let dir = Dir::new("sample-day-healthy");
    let text = {
        use std::io::Read as _;
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&log).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        text
    };
    let healthy: String = text
        .lines()
        .take_while(|l| !l.contains("outcome=upstream_error"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(healthy.lines().count() > 4000);
    let healthy = dir.write("healthy.log", &healthy);
    let recommended = dir.write("recommended.toml", &block);
    let (json, stdout) = lab(&["replay", &healthy, "--config", &recommended]);
    assert_eq!(json["incidents"].as_array().unwrap().len(), 0, "{stdout}");
    assert_eq!(json["candidates"][0]["trips"], 0, "{stdout}");
}

#[test]
fn the_sample_day_s_fitted_scenario_loads_and_runs() {
    let scenario = sample("day.toml");
    let dir = Dir::new("sample-day-fit");
    let svg = dir.path("day.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .args([scenario.as_str(), "--svg", &svg])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains("incident Outage from 720 s to 900 s"),
        "{report}"
    );
    // Fitting the log again writes the same file (the sample is what fit writes).
    let again = dir.path("again.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .args([
            "fit",
            &sample("day.log.gz"),
            "--phase",
            "75s",
            "--out",
            &again,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let strip = |t: &str| -> String {
        t.lines()
            .filter(|l| !l.starts_with("# Fitted") && !l.starts_with("description"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(&std::fs::read_to_string(&again).unwrap()),
        strip(&std::fs::read_to_string(&scenario).unwrap())
    );
}
