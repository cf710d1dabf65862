//! `cutout-lab replay`: generated records of a healthy stretch and of an outage, in the CSV,
//! JSON-lines and gateway access-log shapes, replayed through the binary: when the defaults
//! open, that a healthy record trips nothing, that the recommended block reads back as the
//! same settings, that malformed lines are named by number, and that memory stays bounded
//! on a streamed record.

mod common;

use common::Dir;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

/// 2026-12-04T10:00:00Z, in seconds since the Unix epoch.
const T0: f64 = 1_796_378_400.0;

/// One generated call: start (seconds since the epoch), duration (seconds), success.
struct Call {
    start: f64,
    duration: f64,
    ok: bool,
    host: u32,
}

/// `seconds` of Poisson calls at `rate` a second: 20 ms log-normal durations, 0.5% errors;
/// during `outage` (offsets in seconds), 95% fail, half of them at a 1 s timeout.
fn calls(seconds: f64, rate: f64, outage: Option<(f64, f64)>, seed: u64) -> Vec<Call> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += -(1.0 - rng.f64()).ln() / rate;
        if t >= seconds {
            return out;
        }
        let normal =
            (-2.0 * (1.0 - rng.f64()).ln()).sqrt() * (2.0 * std::f64::consts::PI * rng.f64()).cos();
        let mut duration = 0.020 * (0.5 * normal).exp();
        let mut ok = rng.f64() >= 0.005;
        if let Some((from, to)) = outage
            && (from..to).contains(&t)
        {
            ok = rng.f64() < 0.05;
            if !ok && rng.bool() {
                duration = 1.0;
            }
        }
        out.push(Call {
            start: T0 + t,
            duration,
            ok,
            host: rng.u32(1..=3),
        });
    }
}

fn csv(calls: &[Call]) -> String {
    let mut text = String::from("timestamp,duration,outcome,host\n");
    for c in calls {
        let outcome = if c.ok { "ok" } else { "error" };
        text += &format!(
            "{:.6},{:.3},{outcome},h{}\n",
            c.start,
            c.duration * 1e3,
            c.host
        );
    }
    text
}

fn jsonl(calls: &[Call]) -> String {
    calls
        .iter()
        .map(|c| {
            format!(
                "{{\"timestamp\": {:.6}, \"duration\": \"{:.3}ms\", \"outcome\": \"{}\"}}\n",
                c.start,
                c.duration * 1e3,
                if c.ok { "success" } else { "failure" }
            )
        })
        .collect()
}

/// The gateway's access lines of `calls` in `cluster`, in end order as the gateway writes
/// them, with one line of the gateway's other logging in between.
fn access(calls: &[Call], cluster: &str) -> String {
    let mut ends: Vec<(f64, &Call)> = calls.iter().map(|c| (c.start + c.duration, c)).collect();
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut text = String::new();
    for (n, (end, c)) in ends.iter().enumerate() {
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(*end);
        let (status, outcome) = if c.ok {
            (200, "ok")
        } else {
            (503, "upstream_error")
        };
        text += &format!(
            "{}  INFO request request_id=r-{n} method=GET path=/a cluster={cluster} \
             host=127.0.0.1:700{} status={status} duration={:.2}ms decision=admitted \
             outcome={outcome}\n",
            humantime::format_rfc3339_micros(time),
            c.host,
            c.duration * 1e3
        );
        if n == 10 {
            text += "2026-12-04T10:00:01.000000Z  INFO cutout_gateway: listening\n";
        }
    }
    text
}

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .arg("replay")
        .args(args)
        .output()
        .unwrap()
}

/// The replay's JSON figures, and its stdout and stderr, after checking it exited 0.
fn replay(dir: &Dir, args: &[&str]) -> (serde_json::Value, String, String) {
    let json = dir.0.join("out.json").display().to_string();
    let mut all = args.to_vec();
    all.extend(["--json", json.as_str()]);
    let out = lab(&all);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (value, stdout, stderr)
}

fn candidate<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no candidate {name}: {json:#}"))
}

#[test]
fn a_healthy_record_trips_nothing_on_the_defaults_over_many_seeds() {
    let dir = Dir::new("replay-healthy");
    for seed in 1..=5 {
        let path = dir.write("healthy.csv", &csv(&calls(1200.0, 20.0, None, seed)));
        let (json, stdout, _) = replay(&dir, &[&path]);
        assert_eq!(json["incidents"].as_array().unwrap().len(), 0, "{stdout}");
        let defaults = candidate(&json, "defaults");
        assert_eq!(defaults["trips"], 0, "seed {seed}: {stdout}");
        assert_eq!(defaults["refused"]["succeeded"], 0, "{stdout}");
        assert_eq!(json["recommended"], "defaults", "{stdout}");
        assert!(stdout.contains("the record shows no incident"), "{stdout}");
    }
}

#[test]
fn an_outage_opens_the_defaults_inside_it_and_the_report_says_when() {
    let dir = Dir::new("replay-outage");
    let path = dir.write(
        "outage.csv",
        &csv(&calls(1200.0, 20.0, Some((600.0, 780.0)), 7)),
    );
    let (json, stdout, _) = replay(&dir, &[&path]);
    let incidents = json["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{stdout}");
    assert_eq!(incidents[0]["offset_seconds"], 600.0, "{stdout}");
    assert_eq!(incidents[0]["seconds"], 180.0, "{stdout}");
    let defaults = candidate(&json, "defaults");
    assert_eq!(defaults["false_trips"], 0, "{stdout}");
    let first = defaults["opens"][0]["offset_seconds"].as_f64().unwrap();
    assert!((600.0..602.0).contains(&first), "{first}: {stdout}");
    assert_eq!(defaults["opens"][0]["incident"], 1);
    let opened = defaults["incidents"][0]["opened_after_seconds"]
        .as_f64()
        .unwrap();
    assert!(opened < 2.0, "{opened}");
    // It spared the dependency most of the failures, and gave traffic back within 30 s.
    let failed = json["record"]["failed"].as_u64().unwrap();
    let spared = defaults["refused"]["failed"].as_u64().unwrap();
    assert!(spared * 10 >= failed * 8, "{spared} of {failed}");
    let closed = defaults["incidents"][0]["closed_after_end_seconds"]
        .as_f64()
        .unwrap();
    assert!(closed < 30.0, "{closed}: {stdout}");
    assert!(
        defaults["regret"].as_u64().unwrap() < failed / 2,
        "{stdout}"
    );
    // The recommendation states the window its first trip fell in.
    assert_eq!(json["recommended"], "defaults");
    let window = json["recommended_window_seconds"].as_f64().unwrap();
    assert!((opened - window).abs() < 1e-9, "{window} {opened}");
    assert!(
        stdout.contains("it opened within") && stdout.contains("of the start of every incident"),
        "{stdout}"
    );
}

#[test]
fn the_three_shapes_of_one_record_replay_alike() {
    let dir = Dir::new("replay-shapes");
    let record = calls(900.0, 20.0, Some((300.0, 420.0)), 3);
    let (from_csv, ..) = replay(&dir, &[&dir.write("r.csv", &csv(&record))]);
    let (from_json, ..) = replay(&dir, &[&dir.write("r.jsonl", &jsonl(&record))]);
    // A rotated (gzipped) record reads as the plain one.
    let gz = dir.0.join("r.csv.gz");
    let mut encoder =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    encoder.write_all(csv(&record).as_bytes()).unwrap();
    encoder.finish().unwrap();
    let (from_gz, ..) = replay(&dir, &[gz.to_str().unwrap()]);
    assert_eq!(from_gz, from_csv);
    let log = dir.write("gateway.log", &access(&record, "accounts"));
    // The access log is replayed on the gateway's own defaults; give it cutout's.
    let config = dir.write("defaults.toml", "[defaults]\n");
    let (from_log, _, stderr) = replay(&dir, &[&log, "--cluster", "accounts", "--config", &config]);
    assert!(stderr.contains("1 skipped"), "{stderr}");
    for json in [&from_json, &from_log] {
        for key in ["succeeded", "failed", "unknown", "start"] {
            assert_eq!(
                json["record"][key], from_csv["record"][key],
                "{key}: {json:#}"
            );
        }
        assert_eq!(json["incidents"], from_csv["incidents"]);
        let (a, b) = (
            candidate(json, "defaults"),
            candidate(&from_csv, "defaults"),
        );
        assert_eq!(a["refused"], b["refused"]);
        // The CSV's durations round to the microsecond, the log's to 10: openings agree
        // to the millisecond.
        for (x, y) in a["opens"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["opens"].as_array().unwrap())
        {
            let (x, y) = (
                x["offset_seconds"].as_f64().unwrap(),
                y["offset_seconds"].as_f64().unwrap(),
            );
            assert!((x - y).abs() < 1e-3, "{x} {y}");
        }
    }
    // Another cluster's lines are not this one's.
    let (other, _, stderr) = {
        let out = lab(&[&log, "--cluster", "payments"]);
        (
            out.status,
            String::new(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(other.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no call to replay"), "{stderr}");
}

#[test]
fn the_access_log_is_replayed_on_the_gateway_s_shipped_defaults() {
    let dir = Dir::new("replay-gateway");
    let log = dir.write(
        "gateway.log",
        &access(&calls(900.0, 20.0, Some((300.0, 420.0)), 5), "accounts"),
    );
    // The relative slow-call rule swept on the gateway's defaults (which switch it off):
    // each value switches it back on, as in a gateway's later section.
    let (swept, stdout, _) = replay(&dir, &[&log, "--sweep", "slow-calls-multiple=3,10"]);
    let three = candidate(&swept, "slow-calls-multiple=3");
    assert!(three["block"].get("slow-calls").is_none(), "{stdout}");
    assert_eq!(three["block"]["slow-calls-multiple"], 3, "{stdout}");
    let (json, stdout, _) = replay(&dir, &[&log]);
    let shipped = candidate(&json, "gateway-defaults");
    assert_eq!(shipped["block"]["slow-calls"], "off", "{stdout}");
    assert_eq!(shipped["false_trips"], 0, "{stdout}");
    assert!(shipped["trips"].as_u64().unwrap() >= 1, "{stdout}");
    // Two clusters are two dependencies: without --cluster the replay says so.
    let record = calls(60.0, 5.0, None, 6);
    let two = dir.write(
        "two.log",
        &(access(&record, "accounts") + &access(&record, "payments")),
    );
    let out = lab(&[&two]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cluster payments, after accounts")
            && stderr.contains("replay one with --cluster NAME"),
        "{stderr}"
    );
    let (json, ..) = replay(&dir, &[&two, "--cluster", "payments"]);
    assert_eq!(
        json["record"]["succeeded"].as_u64().unwrap() + json["record"]["failed"].as_u64().unwrap(),
        record.len() as u64
    );
}

/// The `[configs.recommended]` block the report prints.
fn recommended_block(stdout: &str) -> String {
    let at = stdout
        .find("[configs.recommended]")
        .unwrap_or_else(|| panic!("no block: {stdout}"));
    stdout[at..]
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_sweep_recommends_a_block_that_reads_back_as_its_settings() {
    let dir = Dir::new("replay-sweep");
    let path = dir.write(
        "outage.csv",
        &csv(&calls(900.0, 20.0, Some((300.0, 420.0)), 11)),
    );
    let config = dir.write(
        "cutout.toml",
        "[defaults]\nminimum-calls = 20\n[configs.base]\nbreak-duration = \"2s\"\n\
         [instances.payments]\nbase-config = \"base\"\nfailure-ratio = 0.4\n",
    );
    let (json, stdout, _) = replay(
        &dir,
        &[
            &path,
            "--config",
            &config,
            "--sweep",
            "consecutive-failures=3,50",
        ],
    );
    let names: Vec<&str> = json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["consecutive-failures=3", "consecutive-failures=50"]);
    let chosen = json["recommended"].as_str().unwrap();
    let block = recommended_block(&stdout);
    // The block holds the instance's layers merged with the swept key.
    let config = cutout::config::Config::from_toml(&block).unwrap();
    let theirs = config.config("recommended").unwrap();
    let expected = cutout::config::Config::from_toml(&format!(
        "[configs.x]\nminimum-calls = 20\nbreak-duration = \"2s\"\nfailure-ratio = 0.4\n\
         consecutive-failures = {}\n",
        chosen.trim_start_matches("consecutive-failures=")
    ))
    .unwrap();
    assert_eq!(theirs, expected.config("x").unwrap(), "{block}");
}

#[test]
fn an_access_log_s_recommendation_gives_the_gateway_cluster_the_replayed_settings() {
    let dir = Dir::new("replay-gateway-block");
    let log = dir.write(
        "gateway.log",
        &access(&calls(900.0, 20.0, Some((300.0, 420.0)), 13), "accounts"),
    );
    let (json, stdout, _) = replay(&dir, &[&log, "--sweep", "break-duration=2s,10s"]);
    let chosen = json["recommended"].as_str().unwrap();
    let block = recommended_block(&stdout);
    // Pasted as the report says, under the gateway's [breakers], for a cluster of two hosts
    // (one host's breaker is capped as a host's: README "Your own traffic").
    let gateway = format!(
        "[[routes]]\nprefix = \"/a\"\ncluster = \"accounts\"\n[clusters.accounts]\n\
         upstreams = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]\n\
         [breakers.instances.accounts]\nbase-config = \"recommended\"\n{}",
        block.replace("[configs.", "[breakers.configs.")
    );
    let config = cutout_gateway::GatewayConfig::from_toml(&gateway)
        .unwrap_or_else(|e| panic!("{e}\n{gateway}"));
    let replayed = cutout::config::Config::from_toml(&format!(
        "[configs.x]\nslow-calls = \"off\"\nbreak-duration = \"{}\"\n",
        chosen.trim_start_matches("break-duration=")
    ))
    .unwrap();
    assert_eq!(
        &config.cluster_settings("accounts"),
        replayed.config("x").unwrap(),
        "{gateway}"
    );
}

#[test]
fn malformed_lines_are_named_by_number_and_the_rest_replayed() {
    let dir = Dir::new("replay-malformed");
    let mut text = csv(&calls(300.0, 10.0, None, 2));
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.insert(5, "1796378401.5,12".into()); // truncated: line 6
    lines.insert(8, "1796378401.9,12,maybe,h1".into()); // an unknown outcome: line 9
    lines.insert(15, format!("1796378402.0,12,ok,{}", "h".repeat(70_000))); // line 16
    lines.insert(18, "yesterday,12,ok,h1".into()); // line 19
    // 240 s back, read when calls from 130 s on have been replayed: line 2501.
    lines.insert(2500, "1796378410.0,12,ok,h1".into());
    text = lines.join("\n") + "\n";
    let path = dir.write("bad.csv", &text);
    let (json, _, stderr) = replay(&dir, &[&path]);
    for (line, what) in [
        (6, "outcome"),
        (9, "maybe"),
        (2501, "out of order by more than 2m"),
        (16, "longer than 65536 bytes"),
        (19, "yesterday"),
    ] {
        let found = stderr
            .lines()
            .find(|l| l.contains(&format!("bad.csv:{line}: ")))
            .unwrap_or_else(|| panic!("no warning for line {line}: {stderr}"));
        assert!(found.contains(what), "line {line}: {found}");
    }
    assert!(
        stderr.contains("5 unreadable or misplaced, 0 replayed out of start order"),
        "{stderr}"
    );
    let total = text.lines().count() as u64 - 1;
    let replayed = ["succeeded", "failed", "unknown"]
        .iter()
        .map(|k| json["record"][k].as_u64().unwrap())
        .sum::<u64>();
    // Every line but the header and the five bad ones was replayed.
    assert_eq!(replayed, total - 5, "{stderr}");
}

#[test]
fn bad_command_lines_exit_2_with_the_reason() {
    let dir = Dir::new("replay-usage");
    let path = dir.write("r.csv", &csv(&calls(10.0, 10.0, None, 1)));
    for (args, says) in [
        (vec![], "no record given"),
        (vec![path.as_str(), "--format", "xml"], "--format \"xml\""),
        (
            vec![path.as_str(), "--cluster", "a"],
            "--cluster is for the gateway's access log",
        ),
        (vec![path.as_str(), "--bin", "0s"], "--bin \"0s\""),
        (
            vec![path.as_str(), "--incident-errors", "120%"],
            "--incident-errors",
        ),
        (
            vec![path.as_str(), "--incident-slowdown", "1"],
            "--incident-slowdown",
        ),
        (
            vec![path.as_str(), "--seed", "1", "--seed", "2"],
            "--seed is given twice",
        ),
        (vec![path.as_str(), "--sweep", "failure-ratio"], "no '='"),
        (
            vec![path.as_str(), "--frobnicate"],
            "unknown flag --frobnicate",
        ),
    ] {
        let out = lab(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // A key cutout rejects is named by cutout, exit 2; a missing file exits 1.
    let out = lab(&[&path, "--sweep", "failure-ration=10%,20%"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("CUT-CFG"), "{stderr}");
    let out = lab(&["/nonexistent/record.csv"]);
    assert_eq!(out.status.code(), Some(1));
    let out = lab(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("open-loop"));
}

/// The peak resident memory of process `pid`, in kB (Linux).
fn peak_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_streamed_record_is_replayed_in_bounded_memory() {
    if !std::path::Path::new("/proc/self/status").exists() {
        eprintln!("skipped: needs Linux's /proc to read the replay's peak memory");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .args(["replay", "-", "--format", "csv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"timestamp,duration,outcome\n").unwrap();
    // 400,000 calls at 100 a second (67 minutes, about 12 MB), written in chunks; the peak
    // after the first fifth and at the end must be about the same.
    let mut rng = fastrand::Rng::with_seed(9);
    let mut peaks = Vec::new();
    for chunk in 0..5 {
        let mut text = String::new();
        for i in 0..80_000u64 {
            let n = chunk * 80_000 + i;
            let ok = if rng.f64() < 0.01 { "error" } else { "ok" };
            text += &format!(
                "{:.3},{:.2},{ok}\n",
                T0 + n as f64 / 100.0,
                5.0 + rng.f64() * 20.0
            );
        }
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        peaks.push(peak_kb(child.id()).unwrap_or(0));
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("400001 lines: 400000 calls replayed"),
        "{stderr}"
    );
    let (first, last) = (peaks[0], peaks[4]);
    assert!(first > 0, "{peaks:?}");
    // Reading five times the record may not grow the peak by more than 8 MB.
    assert!(
        last <= first + 8 * 1024,
        "peak memory grew with the record: {peaks:?} kB"
    );
}

#[test]
fn a_gateway_config_s_clusters_are_replayed_on_the_settings_the_gateway_gives_them() {
    assert_eq!(
        cutout_lab::replay::HOST_MAX_BREAK,
        cutout_gateway::config::DEFAULT_HOST_MAX_BREAK
    );
    // Two clusters of two upstreams (one with an instance of its own, switching the slow
    // rule back on), and two of one upstream (one capped as a host, one that sets its own
    // max-break-duration).
    let routes: String = ["accounts", "payments", "ledger", "search"]
        .iter()
        .map(|c| format!("[[routes]]\nprefix = \"/{c}\"\ncluster = \"{c}\"\n"))
        .collect();
    let config = format!(
        "{routes}[clusters.accounts]\nupstreams = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]\n\
         [clusters.payments]\nupstreams = [\"http://127.0.0.1:3\", \"http://127.0.0.1:4\"]\n\
         [clusters.ledger]\nupstreams = [\"http://127.0.0.1:5\"]\n\
         [clusters.search]\nupstreams = [\"http://127.0.0.1:6\"]\n\
         [breakers.defaults]\nminimum-calls = 20\n\
         [breakers.configs.patient]\nmax-break-duration = \"1m\"\n\
         [breakers.instances.payments]\nslow-calls-multiple = 4\n\
         [breakers.instances.search]\nbase-config = \"patient\"\n"
    );
    for text in [
        config.clone(),
        // With no instance of their own, and with no [breakers] at all.
        config.split("[breakers.configs").next().unwrap().to_owned(),
        config
            .split("[breakers.defaults]")
            .next()
            .unwrap()
            .to_owned(),
    ] {
        let gateway = cutout_gateway::GatewayConfig::from_toml(&text).unwrap();
        let candidates = cutout_lab::replay::Candidate::from_document(&text).unwrap();
        let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["accounts", "ledger", "payments", "search"],
            "{text}"
        );
        for c in &candidates {
            assert_eq!(
                c.settings,
                gateway.cluster_settings(&c.name),
                "{}: {text}",
                c.name
            );
        }
        let ledger = &candidates[1];
        assert_eq!(
            ledger.block["max-break-duration"].as_str(),
            Some("15s"),
            "{text}"
        );
    }
}

#[test]
fn an_outage_the_recording_s_own_breaker_cut_is_still_one_incident() {
    let dir = Dir::new("replay-cut");
    // The gateway's breaker was not in shadow mode: after the outage's first failures it
    // refused the calls, letting one probe through every 5 s, until the outage ended.
    let record = calls(900.0, 20.0, Some((300.0, 420.0)), 21);
    let mut log = String::new();
    let mut last_probe = f64::NEG_INFINITY;
    let mut failed = 0;
    for line in access(&record, "accounts").lines() {
        let at = humantime::parse_rfc3339_weak(line.split_whitespace().next().unwrap())
            .map(|t| {
                t.duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64()
                    - T0
            })
            .unwrap_or(0.0);
        let cut = (300.0..420.0).contains(&at) && failed >= 5 && at - last_probe < 5.0;
        if cut {
            log += &line
                .replace("status=503", "status=503 reason=open")
                .replace("status=200", "status=503 reason=open")
                .replace("decision=admitted", "decision=refused")
                .replace("outcome=upstream_error", "outcome=refused")
                .replace("outcome=ok", "outcome=refused");
        } else {
            if (300.0..420.0).contains(&at) {
                failed += 1;
                last_probe = at;
            }
            log += line;
        }
        log.push('\n');
    }
    let path = dir.write("cut.log", &log);
    let config = dir.write(
        "short.toml",
        "[instances.short-breaks]\nbreak-duration = \"1s\"\nmax-break-duration = \"1s\"\n",
    );
    let (json, stdout, _) = replay(&dir, &[&path, "--config", &config]);
    let incidents = json["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{stdout}");
    assert!(
        incidents[0]["seconds"].as_f64().unwrap() >= 110.0,
        "the whole outage, refusals included: {stdout}"
    );
    assert!(incidents[0]["refused"].as_u64().unwrap() > 1000, "{stdout}");
    let short = candidate(&json, "short-breaks");
    assert!(short["trips"].as_u64().unwrap() > 3, "{stdout}");
    assert_eq!(short["false_trips"], 0, "{stdout}");
    assert!(
        stdout.contains("refused by the recording's own breaker"),
        "{stdout}"
    );
}

#[test]
fn a_trip_on_slow_successes_is_a_false_trip_unless_a_latency_budget_says_they_failed() {
    let dir = Dir::new("replay-slow");
    // Every call succeeds; from 300 s to 420 s they take 10 times as long (100-200 ms). The
    // record cannot say whether the dependency or the caller (its own CPU) was slow.
    let mut record = calls(900.0, 20.0, None, 31);
    for c in &mut record {
        c.ok = true;
        if (300.0..420.0).contains(&(c.start - T0)) {
            c.duration *= 10.0;
        }
    }
    let path = dir.write("slow.csv", &csv(&record));
    let (json, stdout, _) = replay(&dir, &[&path]);
    assert_eq!(json["incidents"].as_array().unwrap().len(), 1, "{stdout}");
    assert_eq!(json["incidents"][0]["failing"], false, "{stdout}");
    let defaults = candidate(&json, "defaults");
    let trips = defaults["trips"].as_u64().unwrap();
    assert!(trips >= 1, "the relative slow rule opens on it: {stdout}");
    assert_eq!(defaults["false_trips"].as_u64().unwrap(), trips, "{stdout}");
    assert!(json["recommended"].is_null(), "{stdout}");
    assert!(stdout.contains("--latency-budget"), "{stdout}");
    // Callers that give up at 100 ms: the slow calls failed them, and the trips are the
    // incident's.
    let (json, stdout, _) = replay(&dir, &[&path, "--latency-budget", "100ms"]);
    assert_eq!(json["incidents"][0]["failing"], true, "{stdout}");
    assert_eq!(candidate(&json, "defaults")["false_trips"], 0, "{stdout}");
}
