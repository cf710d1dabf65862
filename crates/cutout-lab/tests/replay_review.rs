//! A hostile review of `cutout-lab replay`: inputs an SRE's real logs hold (offsets, BOMs, a
//! gateway's no-route lines, a stray timestamp, long timeouts) and figures that must add up.
//! Each test names the behaviour it checks; thirteen of them failed on the first version (a
//! timestamp's offset dropped, a cluster named `-`, a BOM, warnings copying whole lines, a
//! stray date stopping the replay or becoming its origin, an incident's own timeouts called a
//! false trip, a close measured from the wrong opening, durations past u64).

mod common;

use common::Dir;

use std::process::{Command, Output};

use cutout_lab::record::{Answer, Call, Record, Shape, Tally, Warning};
use cutout_lab::replay::{self, Candidate, Options, Replay};

/// 2026-12-04T10:00:00Z, in seconds since the Unix epoch.
const T0: u64 = 1_796_378_400;

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutout-lab"))
        .arg("replay")
        .args(args)
        .output()
        .unwrap()
}

fn outputs(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every call of `text` read as `shape`, the warnings and the tally.
fn read(text: &str, shape: Shape) -> (Vec<Call>, Vec<Warning>, Tally) {
    let mut record = Record::new(text.as_bytes(), shape, None);
    let mut calls = Vec::new();
    while let Some(call) = record.next_call().unwrap() {
        calls.push(call);
    }
    (calls, record.warnings().to_vec(), record.tally())
}

/// `n` healthy CSV lines from `from` seconds after T0, `every` seconds apart.
fn healthy_csv(from: f64, n: usize, every: f64) -> String {
    (0..n)
        .map(|i| format!("{:.3},20,ok\n", T0 as f64 + from + i as f64 * every))
        .collect()
}

fn candidate(name: &str, toml_block: &str) -> Candidate {
    Candidate::from_block(name, toml::from_str(toml_block).unwrap()).unwrap()
}

fn replay_csv(text: &str, candidates: &[Candidate]) -> Replay {
    let mut record = Record::new(text.as_bytes(), Shape::Csv, None);
    replay::run(&mut record, candidates, &Options::default()).unwrap()
}

/// A gateway access line (as `cutout_gateway::access` writes it) ending at `end` seconds
/// after T0.
fn access_line(end: f64, n: usize, cluster: &str, rest: &str) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(T0 as f64 + end);
    format!(
        "{}  INFO request request_id=r-{n} method=GET path=/a cluster={cluster} {rest}\n",
        humantime::format_rfc3339_micros(time)
    )
}

// ---------------------------------------------------------------------------------------
// Timestamps and durations
// ---------------------------------------------------------------------------------------

/// RFC 3339 allows any UTC offset; `12:00:00.500+02:00` is `10:00:00.500Z`. The reader must
/// read the instant, not the wall-clock digits (or at least refuse the line).
#[test]
fn an_rfc3339_timestamp_with_an_offset_and_a_fraction_is_read_at_its_instant() {
    let text = "timestamp,duration,outcome\n\
                2026-12-04T10:00:00.000Z,5,ok\n\
                2026-12-04T12:00:00.500+02:00,5,ok\n";
    let (calls, warnings, _) = read(text, Shape::Csv);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].start - calls[0].start,
        500_000_000,
        "+02:00 read as UTC: the second call is placed {} s after the first instead of 0.5 s",
        (calls[1].start - calls[0].start) as f64 / 1e9
    );
}

/// RFC 3339 with an offset and no fraction (what most loggers outside UTC write) is a
/// documented timestamp form ("RFC 3339"); it must not be rejected as unreadable.
#[test]
fn an_rfc3339_timestamp_with_an_offset_and_no_fraction_is_accepted() {
    let text = "timestamp,duration,outcome\n\
                2026-12-04T10:00:00Z,5,ok\n\
                2026-12-04T05:00:01-05:00,5,ok\n\
                2026-12-04T11:00:02+01:00,5,ok\n";
    let (calls, warnings, tally) = read(text, Shape::Csv);
    assert_eq!(tally.bad, 0, "valid RFC 3339 lines rejected: {warnings:?}");
    let starts: Vec<u64> = calls.iter().map(|c| c.start / 1_000_000_000 - T0).collect();
    assert_eq!(starts, [0, 1, 2]);
}

/// Epoch seconds with a fraction, and RFC 3339 with `Z` and micro/nanosecond fractions, land
/// on the same instant (checked and found right).
#[test]
fn epoch_seconds_and_rfc3339_z_read_alike() {
    let text = "timestamp,duration,outcome\n\
                1796378400.25,5,ok\n\
                2026-12-04T10:00:00.250000Z,5,ok\n\
                2026-12-04T10:00:00.250000000Z,5,ok\n";
    let (calls, warnings, _) = read(text, Shape::Csv);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(calls.len(), 3);
    for c in &calls {
        assert!(
            c.start.abs_diff(T0 * 1_000_000_000 + 250_000_000) < 1_000,
            "{calls:?}"
        );
    }
}

/// Durations as documented: `850µs`, `12ms`, `1.2s`, `2m 30s`, a plain number of
/// milliseconds, and zero (checked and found right).
#[test]
fn documented_durations_and_a_zero_duration_read_right() {
    let text = "timestamp,duration,outcome\n\
                1796378400,850µs,ok\n\
                1796378401,12ms,ok\n\
                1796378402,1.2s,ok\n\
                1796378403,2m 30s,ok\n\
                1796378404,21.4,ok\n\
                1796378405,0,ok\n\
                1796378406,0s,ok\n";
    let (calls, warnings, _) = read(text, Shape::Csv);
    assert!(warnings.is_empty(), "{warnings:?}");
    let durations: Vec<u64> = calls.iter().map(|c| c.duration).collect();
    assert_eq!(
        durations,
        [
            850_000,
            12_000_000,
            1_200_000_000,
            150_000_000_000,
            21_400_000,
            0,
            0
        ]
    );
}

/// A duration longer than a u64 of nanoseconds holds (~584 years) must be refused as out of
/// range, not silently clamped to u64::MAX nanoseconds.
#[test]
fn a_duration_past_what_nanoseconds_hold_is_refused_not_clamped() {
    let text = "timestamp,duration,outcome\n\
                1796378400,5,ok\n\
                1796378401,100000000h,error\n";
    let (calls, warnings, tally) = read(text, Shape::Csv);
    let clamped: Vec<&Call> = calls.iter().filter(|c| c.duration == u64::MAX).collect();
    assert!(
        clamped.is_empty() && tally.bad == 1,
        "100000000h (11 400 years) accepted as {:?} ns: {warnings:?}",
        clamped.first().map(|c| c.duration)
    );
}

/// Library code must not panic on user input: failures with the longest accepted duration
/// (a day) end, and trip the breaker, long after the record's start; the report must still
/// print. (Longer durations are refused line by line: see the test above.)
#[test]
fn very_long_durations_do_not_panic_the_report() {
    let mut text = String::from("timestamp,duration,outcome\n");
    for i in 0..30 {
        text += &format!("{}.{:02},24h,error\n", T0, i);
    }
    let result = std::panic::catch_unwind(|| {
        let replay = replay_csv(&text, &[Candidate::shipped(Shape::Csv)]);
        (replay.report(), replay.json().to_string())
    });
    assert!(
        result.is_ok(),
        "the replay or its report panicked on 24h durations"
    );
}

// ---------------------------------------------------------------------------------------
// CSV details
// ---------------------------------------------------------------------------------------

/// Excel and many exporters write a UTF-8 byte order mark before the header. The header
/// still names `timestamp`; the record must be read.
#[test]
fn a_csv_with_a_byte_order_mark_is_read() {
    let dir = Dir::new("replay-review-bom");
    let mut text = String::from("\u{feff}timestamp,duration,outcome\n");
    text += &healthy_csv(0.0, 50, 1.0);
    let path = dir.write("calls.csv", text.as_bytes());
    let out = lab(&[&path]);
    let (stdout, stderr) = outputs(&out);
    assert!(
        out.status.success(),
        "a BOM stops the replay:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("record: 50 calls"), "{stdout}");
}

/// A UTF-8 byte order mark before the first JSON line (Windows tools write one) must not
/// cost the record its first call.
#[test]
fn a_json_lines_record_with_a_byte_order_mark_keeps_its_first_call() {
    let text = "\u{feff}{\"timestamp\": 1796378400, \"duration\": 12, \"outcome\": \"ok\"}\n\
                {\"timestamp\": 1796378401, \"duration\": 12, \"outcome\": \"ok\"}\n";
    let (calls, warnings, _) = read(text, Shape::Jsonl);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(calls.len(), 2);
}

/// The same for an access log saved through a Windows editor.
#[test]
fn an_access_log_with_a_byte_order_mark_keeps_its_first_call() {
    let mut text = String::from("\u{feff}");
    for n in 0..3 {
        text += &access_line(
            n as f64,
            n,
            "accounts",
            "host=127.0.0.1:7001 status=200 duration=20ms decision=admitted outcome=ok",
        );
    }
    let (calls, warnings, _) = read(&text, Shape::Access);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(calls.len(), 3);
}

/// CRLF line ends, quoted fields with commas, columns in any order and extra columns
/// (checked and found right).
#[test]
fn a_crlf_csv_with_quoted_fields_reads_every_call() {
    let text = "\"outcome\",note,duration,timestamp,host\r\n\
                ok,\"a, b\",12,1796378400.0,\"h1\"\r\n\
                \"error\",\"say \"\"hi\"\"\",1000,1796378401.0,h2\r\n\
                \r\n\
                timeout,x,1000,2026-12-04T10:00:02Z,h2\r\n";
    let (calls, warnings, tally) = read(text, Shape::Csv);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].answer, Answer::Success);
    assert_eq!(calls[1].answer, Answer::Failure);
    assert_eq!(calls[2].answer, Answer::Failure);
    assert_eq!(calls[1].duration, 1_000_000_000);
    assert_eq!(tally.lines, 5);
}

/// An empty file, and a header-only file, exit 1 saying the record holds no call (the
/// documented exit status); neither panics (checked and found right).
#[test]
fn an_empty_or_header_only_record_exits_1_with_the_reason() {
    let dir = Dir::new("replay-review-empty");
    for (name, body) in [
        ("empty.csv", ""),
        ("header.csv", "timestamp,duration,outcome\n"),
        ("empty.jsonl", ""),
        ("empty.log", ""),
    ] {
        let path = dir.write(name, body.as_bytes());
        let out = lab(&[&path]);
        let (stdout, stderr) = outputs(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}\n{stderr}");
        assert!(stderr.contains("no call"), "{name}: {stderr}");
    }
}

// ---------------------------------------------------------------------------------------
// Malformed records "never stop a replay" (README)
// ---------------------------------------------------------------------------------------

/// README: "Malformed records never stop a replay": one line whose year is a typo (a year
/// ahead) must be warned of by number, not end the replay of the other 200 calls.
#[test]
fn one_line_dated_a_year_ahead_does_not_stop_the_replay() {
    let dir = Dir::new("replay-review-future");
    let mut text = String::from("timestamp,duration,outcome\n");
    text += &healthy_csv(0.0, 100, 1.0);
    text += "2027-12-04T10:01:40Z,20,ok\n"; // line 102
    text += &healthy_csv(100.0, 100, 1.0);
    let path = dir.write("calls.csv", text.as_bytes());
    let out = lab(&[&path]);
    let (_, stderr) = outputs(&out);
    assert!(
        out.status.success(),
        "one mistyped year stops the replay (exit {:?}):\n{stderr}",
        out.status.code()
    );
    assert!(stderr.contains(":102: "), "{stderr}");
}

/// A null timestamp exported as 0 (1970) near the start of the record must be warned of, not
/// become the record's origin and then stop the replay of the real calls 56 years later.
#[test]
fn a_zero_timestamp_near_the_start_does_not_become_the_origin() {
    let dir = Dir::new("replay-review-zero");
    let mut text = String::from("timestamp,duration,outcome\n");
    text += &healthy_csv(0.0, 3, 1.0);
    text += "0,20,ok\n"; // line 5
    text += &healthy_csv(3.0, 100, 1.0);
    let path = dir.write("calls.csv", text.as_bytes());
    let out = lab(&[&path]);
    let (stdout, stderr) = outputs(&out);
    assert!(
        out.status.success(),
        "exit {:?}:\n{stdout}\n{stderr}",
        out.status.code()
    );
    assert!(stdout.contains("from 2026-12-04T10:00:00Z"), "{stdout}");
}

/// The first 20 unreadable lines are named with their numbers, then a count (README, --help)
/// (checked and found right).
#[test]
fn more_than_twenty_bad_lines_are_named_then_counted() {
    let dir = Dir::new("replay-review-many-bad");
    let mut text = String::from("timestamp,duration,outcome\n");
    text += &healthy_csv(0.0, 10, 1.0);
    for i in 0..25 {
        text += &format!("{}.5,20,sideways\n", T0 + 10 + i);
    }
    let path = dir.write("calls.csv", text.as_bytes());
    let out = lab(&[&path]);
    let (stdout, stderr) = outputs(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("calls.csv:12: "), "{stderr}");
    assert!(stderr.contains("calls.csv:31: "), "{stderr}");
    assert!(!stderr.contains("calls.csv:32: "), "{stderr}");
    assert!(stderr.contains("and 5 more"), "{stderr}");
    assert!(stderr.contains("10 calls replayed"), "{stderr}");
    assert!(stderr.contains("25 unreadable"), "{stderr}");
}

/// A warning is kept per bad line (up to 10 000): each must not copy the whole (up to
/// 64 KiB) line, or 10 000 warnings hold 640 MiB and stderr prints 64 KiB lines. The README
/// says memory stays bounded (a 10-million-call record in 4.8 MB).
#[test]
fn a_warning_does_not_copy_a_whole_long_line() {
    let mut text = String::from("timestamp,duration,outcome\n");
    text += &format!("{},20,ok\n", "9".repeat(60_000));
    text += &format!("{},{},ok\n", T0, "1".repeat(60_000) + "x");
    text += &format!("{},20,{}\n", T0, "o".repeat(60_000));
    let (_, warnings, tally) = read(&text, Shape::Csv);
    assert_eq!(tally.bad, 3);
    let longest = warnings.iter().map(|w| w.message.len()).max().unwrap();
    assert!(
        longest <= 1_000,
        "a warning of {longest} bytes for one line (lines {:?})",
        warnings.iter().map(|w| w.line).collect::<Vec<_>>()
    );
}

// ---------------------------------------------------------------------------------------
// The gateway's access log
// ---------------------------------------------------------------------------------------

/// A gateway writes `cluster=-` for requests refused before routing (`no_route`,
/// `bad_request`, cutout-gateway/src/access.rs: "`-` when none (no route; …)"). Those are no
/// call to any dependency; a single-cluster log holding one 404 must replay without
/// --cluster, not be refused as "several clusters".
#[test]
fn a_no_route_line_does_not_make_a_single_cluster_log_several_clusters() {
    let dir = Dir::new("replay-review-no-route");
    let mut text = String::new();
    for n in 0..60 {
        text += &access_line(
            n as f64,
            n,
            "accounts",
            "host=127.0.0.1:7001 status=200 duration=20ms decision=admitted outcome=ok",
        );
        if n == 30 {
            text += &access_line(
                n as f64 + 0.5,
                1000,
                "-",
                "host=- status=404 duration=40µs decision=none outcome=no_route",
            );
        }
    }
    let path = dir.write("access.log", text.as_bytes());
    let out = lab(&[&path]);
    let (stdout, stderr) = outputs(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("record: 60 calls"), "{stdout}");
}

/// The same when the no-route line comes first.
#[test]
fn a_first_no_route_line_does_not_claim_the_log_for_cluster_dash() {
    let dir = Dir::new("replay-review-no-route-first");
    let mut text = access_line(
        0.0,
        1000,
        "-",
        "host=- status=400 duration=40µs decision=none outcome=bad_request",
    );
    for n in 0..60 {
        text += &access_line(
            1.0 + n as f64,
            n,
            "accounts",
            "host=127.0.0.1:7001 status=200 duration=20ms decision=admitted outcome=ok",
        );
    }
    let path = dir.write("access.log", text.as_bytes());
    let out = lab(&[&path]);
    let (stdout, stderr) = outputs(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("record: 60 calls"), "{stdout}");
}

/// Every outcome of the gateway's table (cutout-gateway/src/access.rs) maps as the record
/// docs say: ok a success; upstream_error, timeout, unreachable, body_error, body_timeout
/// failures; refused and ejected unknown; gave_up as its detached attempt's upstream, or
/// nothing when dropped or capped; client_fault, deadline, rate_limited, exhausted nothing
/// (checked and found right).
#[test]
fn every_gateway_outcome_maps_as_documented() {
    let cases: &[(&str, Option<Answer>)] = &[
        ("outcome=ok", Some(Answer::Success)),
        ("outcome=upstream_error", Some(Answer::Failure)),
        ("outcome=timeout", Some(Answer::Failure)),
        ("outcome=unreachable", Some(Answer::Failure)),
        ("outcome=body_error", Some(Answer::Failure)),
        ("outcome=body_timeout", Some(Answer::Failure)),
        ("reason=open outcome=refused", Some(Answer::Unknown)),
        ("outcome=ejected", Some(Answer::Unknown)),
        (
            "outcome=gave_up counted=detached upstream=ok",
            Some(Answer::Success),
        ),
        (
            "outcome=gave_up counted=detached upstream=body_timeout",
            Some(Answer::Failure),
        ),
        ("outcome=gave_up counted=detached upstream=capped", None),
        ("outcome=gave_up counted=dropped", None),
        ("outcome=client_fault", None),
        ("outcome=deadline counted=deadline", None),
        ("outcome=rate_limited", None),
        ("outcome=exhausted", None),
    ];
    let mut text = String::new();
    for (n, (outcome, _)) in cases.iter().enumerate() {
        text += &access_line(
            n as f64,
            n,
            "accounts",
            &format!("host=127.0.0.1:7001 status=200 duration=1.5ms decision=admitted {outcome}"),
        );
    }
    let (calls, warnings, tally) = read(&text, Shape::Access);
    assert!(warnings.is_empty(), "{warnings:?}");
    let expected: Vec<(u64, Answer)> = cases
        .iter()
        .enumerate()
        .filter_map(|(n, (_, a))| a.map(|a| (n as u64 + 1, a)))
        .collect();
    let got: Vec<(u64, Answer)> = calls.iter().map(|c| (c.line, c.answer)).collect();
    assert_eq!(got, expected);
    assert_eq!(tally.skipped, 6);
    // The line is written at the end: the call started its duration before.
    assert_eq!(calls[0].start, T0 * 1_000_000_000 - 1_500_000);
    assert_eq!(calls[0].duration, 1_500_000);
}

/// A truncated access line (a log cut mid-write) is named with its number (checked and found
/// right).
#[test]
fn a_truncated_access_line_is_named_by_number() {
    let mut text = String::new();
    for n in 0..5 {
        text += &access_line(
            n as f64,
            n,
            "accounts",
            "host=127.0.0.1:7001 status=200 duration=20ms decision=admitted outcome=ok",
        );
    }
    let cut = access_line(5.0, 5, "accounts", "host=127.0.0.1:7001 status=200 dur");
    text += &cut;
    let (calls, warnings, _) = read(&text, Shape::Access);
    assert_eq!(calls.len(), 5);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 6);
}

// ---------------------------------------------------------------------------------------
// Figures
// ---------------------------------------------------------------------------------------

/// An outage of 10 s during which every call hangs 30 s and times out (a 30 s client
/// timeout, the common case). The breaker opens on the incident's own failures, when they
/// end (~30 s after they started); that opening is the incident's, not a trip "on a healthy
/// dependency" (every failure the breaker saw started inside the incident).
#[test]
fn an_opening_on_an_incident_s_own_timeouts_is_the_incident_s() {
    let mut text = String::from("timestamp,duration,outcome\n");
    let mut lines = Vec::new();
    for i in 0..600 {
        let t = i as f64 * 0.2; // 5 calls a second, 120 s
        let failing = (60.0..70.0).contains(&t);
        let (d, o) = if failing {
            ("30000", "timeout")
        } else {
            ("20", "ok")
        };
        lines.push(format!("{:.3},{d},{o}\n", T0 as f64 + t));
    }
    text += &lines.concat();
    let replay = replay_csv(
        &text,
        &[candidate(
            "c",
            "failure-ratio = \"20%\"\nminimum-calls = 20\nconsecutive-failures = 1000\n\
             adaptive = false\n",
        )],
    );
    assert_eq!(replay.incidents.len(), 1, "{:?}", replay.incidents);
    let o = &replay.outcomes[0];
    let opens: Vec<u64> = o.opens().map(|(t, _)| t / 1_000_000_000).collect();
    assert!(!opens.is_empty());
    assert_eq!(
        replay.false_trips(o),
        0,
        "openings at {opens:?} s on the incident's failures (started 60-70 s) called trips on \
         a healthy dependency; incident {:?}",
        replay.incidents[0]
    );
}

/// "closed after it ended" must be when the breaker closed after the opening counted in the
/// incident, not the first closing after the incident's start (which may end an earlier,
/// unrelated break).
#[test]
fn closed_after_an_incident_is_measured_from_the_incident_s_opening() {
    let mut lines = String::from("timestamp,duration,outcome\n");
    let mut add = |t: f64, ok: bool| {
        lines += &format!(
            "{:.3},10,{}\n",
            T0 as f64 + t,
            if ok { "ok" } else { "error" }
        );
    };
    // 0-1 s: three failures (too few calls for an incident): a trip on a healthy dependency,
    // a 40 s break.
    for t in [0.0, 0.3, 0.6] {
        add(t, false);
    }
    // Healthy, one call a second (bin 0 keeps its 3 calls: too few for an incident).
    for s in 10..40 {
        add(s as f64, true);
    }
    // The incident's bin, 40-50 s: a success (the probe that closes the first break), then
    // failures that open again at ~40.9 s for 40 s.
    add(40.65, true);
    let mut t = 40.7;
    while t < 50.0 {
        add(t, false);
        t += 0.1;
    }
    // Healthy again: the break ends ~80.9 s, the probe at 81 s closes it.
    for s in 50..130 {
        add(s as f64, true);
    }
    let c = candidate(
        "c",
        "consecutive-failures = 3\nbreak-duration = \"40s\"\njitter = \"none\"\nbreak-multiplier = 1\n\
         probe-successes = 1\nadaptive = false\n",
    );
    let replay = replay_csv(&lines, &[c]);
    assert_eq!(replay.incidents.len(), 1, "{:?}", replay.incidents);
    let i = replay.incidents[0];
    let o = &replay.outcomes[0];
    let changes: Vec<(f64, bool)> = o
        .changes
        .iter()
        .map(|(t, c)| (*t as f64 / 1e9, matches!(c, replay::Change::Closed)))
        .collect();
    let json = replay.json();
    let closed = json["candidates"][0]["incidents"][0]["closed_after_end_seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("{changes:?} {:?}", json["candidates"][0]));
    // Its opening in the incident is at ~40.9 s; it closed at ~81 s, ~31 s after the
    // incident's end at 50 s.
    assert!(
        (25.0..35.0).contains(&closed),
        "closed {closed} s after the incident ended; changes (s, closed?) {changes:?}, \
         incident {i:?}"
    );
}

/// Every candidate's admitted and refused calls add up to the record's calls, answer by
/// answer; regret is cost plus admitted failures (checked and found right).
#[test]
fn each_candidate_s_counts_add_up_to_the_record() {
    let mut text = String::from("timestamp,duration,outcome\n");
    for i in 0..3000 {
        let t = i as f64 * 0.1;
        let o = if (100.0..160.0).contains(&t) && i % 4 != 0 {
            "error"
        } else if i % 37 == 0 {
            "refused"
        } else {
            "ok"
        };
        text += &format!("{:.3},{},{o}\n", T0 as f64 + t, 10 + i % 7);
    }
    let candidates = [
        Candidate::shipped(Shape::Csv),
        candidate("ratio", "failure-ratio = \"50%\"\nminimum-calls = 10\n"),
        candidate("consec", "consecutive-failures = 2\n"),
    ];
    let replay = replay_csv(&text, &candidates);
    let total: u64 = replay.calls.iter().sum();
    assert_eq!(total, 3000);
    for o in &replay.outcomes {
        for k in 0..3 {
            assert_eq!(
                o.counts.admitted[k] + o.counts.refused[k],
                replay.calls[k],
                "{}",
                o.candidate.name
            );
        }
        assert_eq!(
            o.counts.regret(),
            o.counts.refused[0] + o.counts.admitted[1]
        );
    }
}

/// The printed [configs.recommended] block reads back through cutout::config as the
/// recommended candidate's settings, for a --config candidate with [defaults] layers
/// (checked).
#[test]
fn a_recommended_block_from_a_layered_config_reads_back() {
    let dir = Dir::new("replay-review-layered");
    let config = "[defaults]\nbreak-duration = \"20s\"\nminimum-calls = 10\n\n\
                  [configs.tight]\nfailure-ratio = \"30%\"\n\n\
                  [configs.loose]\nfailure-ratio = \"90%\"\nconsecutive-failures = 50\n";
    let config_path = dir.write("cutout.toml", config.as_bytes());
    let mut text = String::from("timestamp,duration,outcome\n");
    for i in 0..3000 {
        let t = i as f64 * 0.1;
        let o = if (100.0..130.0).contains(&t) {
            "error"
        } else {
            "ok"
        };
        text += &format!("{:.3},12,{o}\n", T0 as f64 + t);
    }
    let path = dir.write("calls.csv", text.as_bytes());
    let json_path = dir.path("out.json");
    let out = lab(&[&path, "--config", &config_path, "--json", &json_path]);
    let (stdout, stderr) = outputs(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let name = json["recommended"]
        .as_str()
        .expect("a recommendation")
        .to_owned();
    let at = stdout.find("[configs.recommended]").unwrap();
    let block: String = stdout[at..]
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let read = cutout::config::Config::from_toml(&block).unwrap();
    let whole = cutout::config::Config::from_toml(config).unwrap();
    assert_eq!(
        read.config("recommended").unwrap(),
        whole.config(&name).unwrap(),
        "{block}"
    );
}

/// The recommendation obeys its objective: no false trip, then the least regret (checked).
#[test]
fn the_recommendation_has_no_false_trip_and_the_least_regret() {
    let mut text = String::from("timestamp,duration,outcome\n");
    for i in 0..6000 {
        let t = i as f64 * 0.05;
        let outage = (100.0..150.0).contains(&t) && i % 10 != 0;
        let o = if outage || i % 97 == 0 { "error" } else { "ok" };
        text += &format!("{:.3},12,{o}\n", T0 as f64 + t);
    }
    let candidates: Vec<Candidate> = ["10%", "30%", "50%", "80%"]
        .iter()
        .map(|r| {
            candidate(
                &format!("failure-ratio={r}"),
                &format!(
                    "failure-ratio = \"{r}\"\nminimum-calls = 20\nconsecutive-failures = 1000\n"
                ),
            )
        })
        .collect();
    let replay = replay_csv(&text, &candidates);
    let best = replay.recommended().expect("a recommendation");
    assert_eq!(replay.false_trips(best), 0);
    for o in &replay.outcomes {
        if replay.false_trips(o) == 0 {
            assert!(
                best.counts.regret() <= o.counts.regret(),
                "{}",
                o.candidate.name
            );
        }
    }
}
