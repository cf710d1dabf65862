//! The SVG timeline: one column per run (setting), one row per kind of panel, second by
//! second, with failing incidents shaded.
//!
//! The rows, top to bottom: the requests that succeeded (the share of the requests that ended
//! each second, as the report's "requests that succeeded" counts them over the run); the load (offered and admitted attempts, goodput and the dependency's
//! capacity, per second; in every column but the oracle's, the oracle's admitted attempts
//! too, so that how far a setting's admitted rate stays below the ceiling's reads by eye); the caller-side latency (p50 and p99, log scale); the probes per
//! second, on an axis of their own; and the fleet's breakers per state. Every panel of a row
//! shares one y scale across all the runs, so settings compare by eye, and every legend gives
//! the run's totals for what it draws.
//!
//! A document is at most [`MAX_WIDTH`] pixels wide: when the runs do not fit side by side,
//! [`svgs`] splits them into several documents of the same layout, each with its own row
//! labels and legends.

use std::fmt::Display;
use std::ops::Range;

use cutout::{State, Transition};
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::scenario::Scenario;
use crate::sim::{Run, Second};

/// The widest document [`svgs`] writes, in pixels.
pub const MAX_WIDTH: u32 = 1600;
/// At most this many points per line: longer runs are averaged into wider buckets, which
/// keeps the SVG small. Narrow columns get fewer (one per pixel of the plot).
const MAX_POINTS: usize = 600;
/// The strip on the left that names the rows.
const LABEL_WIDTH: u32 = 28;
/// A column is never narrower than this: more runs than fit go to another document.
const MIN_COLUMN: u32 = 380;
/// Nor wider than this.
const MAX_COLUMN: u32 = 620;
const TITLE_HEIGHT: u32 = 46;
const HEADER_HEIGHT: u32 = 22;
const BOTTOM_MARGIN: u32 = 6;
const LEGEND_LINE: u32 = 15;
const LEGEND_PAD: u32 = 3;
/// Where a legend starts, from the left of its column.
const LEGEND_LEFT: i32 = 10;
const Y_LABEL_AREA: u32 = 50;
const X_LABEL_AREA: u32 = 20;
const RIGHT_MARGIN: u32 = 12;
/// Room above a chart for its top y label.
const CHART_TOP: u32 = 6;
const FONT: &str = "sans-serif";
/// Font sizes as plotters takes them (the SVG gets 1/1.24 of this, in pixels).
const LEGEND_FONT: f64 = 13.0;
const AXIS_FONT: f64 = 12.0;

const OFFERED: RGBColor = RGBColor(150, 150, 150);
const ADMITTED: RGBColor = RGBColor(0, 90, 200);
/// The oracle's admitted attempts, under a setting's own: a light cyan, drawn first.
const ORACLE_ADMITTED: RGBColor = RGBColor(80, 200, 230);
const GOODPUT: RGBColor = RGBColor(0, 150, 60);
const CAPACITY: RGBColor = RGBColor(30, 30, 30);
const P50: RGBColor = RGBColor(90, 40, 160);
const P99: RGBColor = RGBColor(230, 120, 0);
const PROBES: RGBColor = RGBColor(200, 0, 0);
const CLOSED: RGBColor = RGBColor(0, 128, 0);
const OPEN: RGBColor = RGBColor(200, 0, 0);
const HALF_OPEN: RGBColor = RGBColor(230, 140, 0);
const RECOVERING: RGBColor = RGBColor(0, 90, 200);

fn text<E: Display>(e: E) -> String {
    e.to_string()
}

/// The kinds of panel, one row each, top to bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Health,
    Load,
    Latency,
    Probes,
    States,
}

const ROWS: [Row; 5] = [
    Row::Health,
    Row::Load,
    Row::Latency,
    Row::Probes,
    Row::States,
];

impl Row {
    fn label(self) -> &'static str {
        match self {
            Row::Health => "requests that succeeded",
            Row::Load => "load (per second)",
            Row::Latency => "caller latency (log)",
            Row::Probes => "probes per second",
            Row::States => "breakers per state",
        }
    }

    fn chart_height(self) -> u32 {
        match self {
            Row::Health => 120,
            Row::Load => 210,
            Row::Latency => 170,
            Row::Probes => 130,
            Row::States => 170,
        }
    }
}

/// One bucket of the timeline (one or more seconds): the mean per second of each count over
/// it, the share of ended requests that succeeded, the caller latencies (ms, weighted by the
/// requests that ended in each second) and the peak probes of a second. `NaN`: no data (no
/// request ended).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    offered: f64,
    admitted: f64,
    goodput: f64,
    capacity: f64,
    health: f64,
    p50: f64,
    p99: f64,
    probes: f64,
    closed: f64,
    open: f64,
    half_open: f64,
    recovering: f64,
}

fn bucket(chunk: &[Second]) -> Bucket {
    let n = chunk.len().max(1) as f64;
    let sum = |f: fn(&Second) -> u32| chunk.iter().map(|s| u64::from(f(s))).sum::<u64>() as f64;
    let mean = |f: fn(&Second) -> u32| sum(f) / n;
    let ended = sum(|s| s.ended);
    let latency = |f: fn(&Second) -> u32| {
        if ended == 0.0 {
            return f64::NAN;
        }
        let weighted: f64 = chunk
            .iter()
            .filter(|s| s.ended > 0)
            .map(|s| f64::from(f(s)) * f64::from(s.ended))
            .sum();
        weighted / ended / 1000.0
    };
    Bucket {
        offered: mean(|s| s.offered),
        admitted: mean(|s| s.admitted),
        goodput: mean(|s| s.goodput),
        capacity: mean(|s| s.capacity),
        health: if ended == 0.0 {
            f64::NAN
        } else {
            sum(|s| s.goodput) / ended
        },
        p50: latency(|s| s.latency_p50_us),
        p99: latency(|s| s.latency_p99_us),
        probes: f64::from(chunk.iter().map(|s| s.probes).max().unwrap_or(0)),
        closed: mean(|s| s.closed),
        open: mean(|s| s.open),
        half_open: mean(|s| s.half_open),
        recovering: mean(|s| s.recovering),
    }
}

/// The totals of a run over the seconds plotted, for the legends.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    offered: u64,
    admitted: u64,
    goodput: u64,
    ended: u64,
    /// The run's requests and those that succeeded, over the whole run as the report counts
    /// them (the requests that end after the last plotted second included), so that the
    /// legend and the report's "requests that succeeded" read the same figure.
    requests: u64,
    requests_ok: u64,
    probes: u64,
    probe_peak: u32,
    /// The least and most capacity of a second; `None` when the run recorded none.
    capacity: Option<(u32, u32)>,
    /// Breakers opening from closed or recovering (as the report counts trips).
    trips: u64,
    /// Breakers opening again from half-open (a probe failed).
    reopens: u64,
    /// Whether any second counted a breaker in some state (a fleet without breakers has none).
    breakers: bool,
}

fn totals(run: &Run, timeline: &[Second]) -> Totals {
    let mut t = Totals::default();
    let mut capacity = (u32::MAX, 0);
    t.requests = run.counts.requests;
    t.requests_ok = run.counts.requests_ok;
    for s in timeline {
        t.offered += u64::from(s.offered);
        t.admitted += u64::from(s.admitted);
        t.goodput += u64::from(s.goodput);
        t.ended += u64::from(s.ended);
        t.probes += u64::from(s.probes);
        t.probe_peak = t.probe_peak.max(s.probes);
        capacity = (capacity.0.min(s.capacity), capacity.1.max(s.capacity));
        t.breakers |= s.closed + s.open + s.half_open + s.recovering > 0;
    }
    t.capacity = (capacity.1 > 0).then_some(capacity);
    for transition in &run.transitions {
        if let Transition::Opened { from, .. } = transition.transition {
            if from == State::HalfOpen {
                t.reopens += 1;
            } else {
                t.trips += 1;
            }
        }
    }
    t
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `v` with at most `decimals` decimals, trailing zeros dropped.
fn trimmed(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// An axis label for a count: `950`, `1.2k`, `35k`, `1.5M`.
fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trimmed(v / 1e6, 1))
    } else if a >= 1e4 {
        format!("{}k", trimmed(v / 1e3, 0))
    } else if a >= 1e3 {
        format!("{}k", trimmed(v / 1e3, 1))
    } else {
        trimmed(v, 1)
    }
}

/// An axis label for a latency in milliseconds.
fn millis(v: &f64) -> String {
    let v = *v;
    if v >= 1000.0 {
        format!("{}s", trimmed(v / 1000.0, 1))
    } else if v >= 1.0 {
        format!("{}ms", trimmed(v, 1))
    } else {
        format!("{}µs", trimmed(v * 1000.0, 0))
    }
}

/// One legend entry: a line key in `color` (none: a note) and its text.
#[derive(Debug, Clone)]
struct Legend {
    color: Option<RGBColor>,
    text: String,
}

fn key(color: RGBColor, text: impl Into<String>) -> Legend {
    Legend {
        color: Some(color),
        text: text.into(),
    }
}

fn note(text: impl Into<String>) -> Legend {
    Legend {
        color: None,
        text: text.into(),
    }
}

/// A line: its colour and its value per bucket (`NaN` breaks it).
type Line = (RGBColor, Vec<f64>);

/// What one panel draws.
#[derive(Debug, Clone, Default)]
struct Panel {
    lines: Vec<Line>,
    legend: Vec<Legend>,
}

/// The y range of each row, shared by every run.
#[derive(Debug, Clone, Copy)]
struct Scales {
    load: f64,
    /// Milliseconds, whole decades.
    latency: (f64, f64),
    probes: f64,
    states: f64,
}

fn peak(values: impl Iterator<Item = f64>) -> f64 {
    values.filter(|v| !v.is_nan()).fold(0.0, f64::max)
}

fn scales(scenario: &Scenario, runs: &[Vec<Bucket>]) -> Scales {
    let all = || runs.iter().flatten();
    let load = peak(all().flat_map(|b| [b.offered, b.admitted, b.goodput]));
    let capacity = peak(all().map(|b| b.capacity));
    // Capacity far above the load would flatten the load: past twice the load it is off
    // the scale (the legend says so).
    let load = (load.max(capacity.min(2.0 * load)) * 1.1).max(1.0);
    let latencies = || all().flat_map(|b| [b.p50, b.p99]).filter(|v| *v > 0.0);
    let latency = match latencies().reduce(f64::min) {
        None => (1.0, 1000.0),
        Some(least) => {
            let most = latencies().fold(least, f64::max);
            let lo = 10f64.powf((least / 1.2).log10().floor()).max(0.01);
            let hi = 10f64.powf((most * 1.2).log10().ceil()).max(lo * 10.0);
            (lo, hi)
        }
    };
    let probes = peak(all().map(|b| b.probes)).max(1.0) * 1.15;
    let states = peak(all().flat_map(|b| [b.closed, b.open, b.half_open, b.recovering]))
        .max(f64::from(scenario.traffic.pods))
        .max(1.0)
        * 1.05;
    Scales {
        load,
        latency,
        probes,
        states,
    }
}

fn line(color: RGBColor, buckets: &[Bucket], f: impl Fn(&Bucket) -> f64) -> Line {
    (color, buckets.iter().map(f).collect())
}

/// The oracle's admitted attempts, drawn in the other columns: its buckets and its total.
type OracleLine<'a> = Option<(&'a [Bucket], u64)>;

/// The five panels of one run, in [`ROWS`] order; `oracle` adds the oracle's admitted
/// attempts to the load panel.
fn panels(
    buckets: &[Bucket],
    t: &Totals,
    scales: &Scales,
    bucketed: bool,
    oracle: OracleLine<'_>,
) -> Vec<Panel> {
    let health = Panel {
        lines: vec![line(CLOSED, buckets, |b| b.health)],
        legend: vec![if t.requests == 0 {
            note("no request ended")
        } else {
            key(
                CLOSED,
                format!(
                    "requests that succeeded: {:.2}% of {}",
                    100.0 * t.requests_ok as f64 / t.requests as f64,
                    grouped(t.requests)
                ),
            )
        }],
    };

    let mut load = Panel {
        lines: vec![line(OFFERED, buckets, |b| b.offered)],
        legend: vec![key(OFFERED, format!("offered ({})", grouped(t.offered)))],
    };
    if let Some((oracle, admitted)) = oracle {
        load.lines
            .push(line(ORACLE_ADMITTED, oracle, |b| b.admitted));
        load.legend.push(key(
            ORACLE_ADMITTED,
            format!("oracle admitted ({})", grouped(admitted)),
        ));
    }
    load.lines.push(line(ADMITTED, buckets, |b| b.admitted));
    load.legend
        .push(key(ADMITTED, format!("admitted ({})", grouped(t.admitted))));
    if t.ended > 0 {
        load.lines.push(line(GOODPUT, buckets, |b| b.goodput));
        load.legend
            .push(key(GOODPUT, format!("goodput ({})", grouped(t.goodput))));
    } else {
        load.legend.push(note("goodput: not recorded"));
    }
    match t.capacity {
        None => load.legend.push(note("capacity: not recorded")),
        Some((least, most)) => {
            let top = scales.load;
            load.lines.push(line(CAPACITY, buckets, |b| {
                if b.capacity > top {
                    f64::NAN
                } else {
                    b.capacity
                }
            }));
            let range = if least == most {
                format!("{}/s", grouped(u64::from(most)))
            } else {
                format!(
                    "{}-{}/s",
                    grouped(u64::from(least)),
                    grouped(u64::from(most))
                )
            };
            let above = buckets.iter().filter(|b| b.capacity > top).count();
            let off = if above == 0 {
                ""
            } else if above == buckets.len() {
                ", above the scale"
            } else {
                ", gaps: above the scale"
            };
            load.legend
                .push(key(CAPACITY, format!("capacity ({range}{off})")));
        }
    }

    let (lo, hi) = scales.latency;
    let clamp = |v: f64| if v.is_nan() { v } else { v.clamp(lo, hi) };
    let latency = if t.ended == 0 {
        Panel {
            lines: vec![],
            legend: vec![note("no request ended: no latency")],
        }
    } else {
        Panel {
            lines: vec![
                line(P99, buckets, |b| clamp(b.p99)),
                line(P50, buckets, |b| clamp(b.p50)),
            ],
            legend: vec![
                key(P50, "p50"),
                key(P99, "p99"),
                note(format!("of {} requests ended", grouped(t.ended))),
            ],
        }
    };

    let probes = Panel {
        lines: vec![line(PROBES, buckets, |b| b.probes)],
        legend: vec![key(
            PROBES,
            format!(
                "probes ({}; peak {} in a second{})",
                grouped(t.probes),
                grouped(u64::from(t.probe_peak)),
                if bucketed { ", drawn per bucket" } else { "" }
            ),
        )],
    };

    let states = if !t.breakers {
        Panel {
            lines: vec![],
            legend: vec![note("no breakers")],
        }
    } else {
        Panel {
            lines: vec![
                line(CLOSED, buckets, |b| b.closed),
                line(RECOVERING, buckets, |b| b.recovering),
                line(HALF_OPEN, buckets, |b| b.half_open),
                line(OPEN, buckets, |b| b.open),
            ],
            legend: vec![
                key(CLOSED, "closed"),
                key(OPEN, format!("open (trips: {})", grouped(t.trips))),
                key(
                    HALF_OPEN,
                    format!("half-open (re-opens: {})", grouped(t.reopens)),
                ),
                key(RECOVERING, "recovering"),
            ],
        }
    };
    vec![health, load, latency, probes, states]
}

/// The rough width of `s` drawn at plotters size `size` (SVG viewers render about 0.56 em a
/// character in a sans-serif font; plotters cannot measure text without a font file).
fn text_width(s: &str, size: f64) -> i32 {
    (s.chars().count() as f64 * size / 1.24 * 0.56).ceil() as i32
}

const KEY_WIDTH: i32 = 20;
const ENTRY_GAP: i32 = 14;

/// Where each entry of `legend` goes within `width` pixels, wrapping entries to new lines:
/// (x, line) per entry, and the number of lines.
fn flow(legend: &[Legend], width: i32) -> (Vec<(i32, u32)>, u32) {
    let mut at = Vec::with_capacity(legend.len());
    let (mut x, mut line) = (0, 0);
    for entry in legend {
        let w = text_width(&entry.text, LEGEND_FONT)
            + if entry.color.is_some() { KEY_WIDTH } else { 0 };
        if x > 0 && x + w > width {
            line += 1;
            x = 0;
        }
        at.push((x, line));
        x += w + ENTRY_GAP;
    }
    (at, line + 1)
}

/// The layout every document shares.
#[derive(Debug, Clone)]
struct Plan {
    columns_per_file: usize,
    column_width: u32,
    /// Per row: the top of its legend strip, the strip's height and the chart's height.
    rows: Vec<(u32, u32, u32)>,
    height: u32,
    /// The x axis: seconds per unit and the unit's name.
    unit: (f64, &'static str),
    end: f64,
    /// The x of each bucket, in units.
    at: Vec<f64>,
    /// Seconds per bucket.
    bucket: usize,
}

/// How many columns a document holds and how wide each is, for `runs` runs: as many as fit
/// [`MAX_WIDTH`] at [`MIN_COLUMN`] each, spread evenly over the documents.
fn columns(runs: usize) -> (usize, u32) {
    let fit = ((MAX_WIDTH - LABEL_WIDTH) / MIN_COLUMN).max(1) as usize;
    let runs = runs.max(1);
    let per_file = runs.div_ceil(runs.div_ceil(fit));
    let width = ((MAX_WIDTH - LABEL_WIDTH) / per_file as u32).min(MAX_COLUMN);
    (per_file, width)
}

fn legend_width(column_width: u32) -> i32 {
    column_width as i32 - LEGEND_LEFT - RIGHT_MARGIN as i32
}

/// Widths a bucket takes, in seconds: round numbers, so a point reads as "the mean over
/// 3 min".
const BUCKETS: [usize; 16] = [
    1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600,
];

/// The narrowest round bucket width that cuts `seconds` into at most `points` buckets.
fn bucket_width(seconds: usize, points: usize) -> usize {
    let least = seconds.div_ceil(points.max(1)).max(1);
    BUCKETS
        .into_iter()
        .find(|&w| w >= least)
        .unwrap_or_else(|| least.div_ceil(3600) * 3600)
}

/// `seconds` as a short duration: `45 s`, `3 min`, `1 h`, `1.5 h`.
fn span(seconds: usize) -> String {
    if seconds < 60 {
        format!("{seconds} s")
    } else if seconds < 3600 {
        format!("{} min", trimmed(seconds as f64 / 60.0, 1))
    } else {
        format!("{} h", trimmed(seconds as f64 / 3600.0, 1))
    }
}

/// A column of the documents: a run's name and panels.
struct Column {
    setting: String,
    panels: Vec<Panel>,
}

/// Draws the timeline of `runs` (one column per setting) as SVG documents of at most
/// [`MAX_WIDTH`] pixels each: `(file suffix, SVG text)`, the suffix `""` for the first
/// document and `"-2"`, `"-3"`… for the rest. The same runs give the same bytes.
pub fn svgs(scenario: &Scenario, runs: &[Run]) -> Result<Vec<(String, String)>, String> {
    let seconds = scenario.duration.as_secs_f64().ceil() as usize;
    let (per_file, column_width) = columns(runs.len());
    let plot_width = (column_width - Y_LABEL_AREA - RIGHT_MARGIN) as usize;
    let bucket_seconds = bucket_width(seconds, MAX_POINTS.min(plot_width));
    let unit = if seconds <= 900 {
        (1.0, "s")
    } else if seconds <= 6 * 3600 {
        (60.0, "m")
    } else {
        (3600.0, "h")
    };

    let timelines: Vec<&[Second]> = runs
        .iter()
        .map(|r| &r.timeline[..seconds.min(r.timeline.len())])
        .collect();
    let buckets: Vec<Vec<Bucket>> = timelines
        .iter()
        .map(|t| t.chunks(bucket_seconds).map(bucket).collect())
        .collect();
    let scales = scales(scenario, &buckets);
    let oracle = runs.iter().position(|r| r.oracle).map(|o| {
        let admitted = timelines[o].iter().map(|s| u64::from(s.admitted)).sum();
        (&buckets[o][..], admitted)
    });
    let columns: Vec<Column> = runs
        .iter()
        .zip(&timelines)
        .zip(&buckets)
        .map(|((run, timeline), b)| Column {
            setting: run.setting.clone(),
            panels: panels(
                b,
                &totals(run, timeline),
                &scales,
                bucket_seconds > 1,
                oracle.filter(|_| !run.oracle),
            ),
        })
        .collect();

    let mut rows = Vec::with_capacity(ROWS.len());
    let mut y = TITLE_HEIGHT + HEADER_HEIGHT;
    for (r, row) in ROWS.iter().enumerate() {
        let lines = columns
            .iter()
            .map(|c| flow(&c.panels[r].legend, legend_width(column_width)).1)
            .max()
            .unwrap_or(1);
        let legend = lines * LEGEND_LINE + LEGEND_PAD;
        rows.push((y, legend, row.chart_height()));
        y += legend + row.chart_height();
    }
    // Every run's buckets start at the same seconds (a shorter timeline has fewer of them).
    let count = seconds.div_ceil(bucket_seconds);
    let plan = Plan {
        columns_per_file: per_file,
        column_width,
        rows,
        height: y + BOTTOM_MARGIN,
        unit,
        end: seconds as f64 / unit.0,
        at: (0..count)
            .map(|i| (i * bucket_seconds) as f64 / unit.0)
            .collect(),
        bucket: bucket_seconds,
    };

    let shading: Vec<(f64, f64)> = scenario
        .script
        .incidents()
        .iter()
        .filter(|i| i.kind.is_failing())
        .map(|i| {
            // At least a bucket wide, so a short incident in a long run still shows.
            let end = seconds as f64;
            let from = i.start.as_secs_f64().min(end);
            let to = i
                .end()
                .as_secs_f64()
                .max(from + bucket_seconds as f64)
                .min(end);
            (from / unit.0, to / unit.0)
        })
        .collect();

    let parts: Vec<&[Column]> = if columns.is_empty() {
        vec![&[]]
    } else {
        columns.chunks(plan.columns_per_file).collect()
    };
    let count = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let suffix = if i == 0 {
                String::new()
            } else {
                format!("-{}", i + 1)
            };
            let doc = document(scenario, &plan, &scales, &shading, part, (i + 1, count))?;
            Ok((suffix, doc))
        })
        .collect()
}

/// Draws the timeline of `runs` (one column per setting) as an SVG document: the first of
/// [`svgs`], all of it when the runs fit [`MAX_WIDTH`].
pub fn svg(scenario: &Scenario, runs: &[Run]) -> Result<String, String> {
    let mut docs = svgs(scenario, runs)?;
    Ok(docs.swap_remove(0).1)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn document(
    scenario: &Scenario,
    plan: &Plan,
    scales: &Scales,
    shading: &[(f64, f64)],
    columns: &[Column],
    (part, parts): (usize, usize),
) -> Result<String, String> {
    let width = LABEL_WIDTH + plan.column_width * columns.len().max(1) as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, plan.height)).into_drawing_area();
        root.fill(&WHITE).map_err(text)?;
        let left = Pos::new(HPos::Left, VPos::Top);
        let mut title = format!(
            "{}: {} pods x {} req/s, seed {}",
            scenario.name, scenario.traffic.pods, scenario.traffic.rate, scenario.seed
        );
        if parts > 1 {
            title += &format!(" (part {part} of {parts})");
        }
        root.draw(&Text::new(
            title,
            (8, 6),
            (FONT, 18).into_font().color(&BLACK).pos(left),
        ))
        .map_err(text)?;
        let mut legend = String::from("shaded: failing incidents; ");
        if plan.bucket > 1 {
            legend += &format!(
                "each point is the mean over {} (probes: the peak second)",
                span(plan.bucket)
            );
        } else {
            legend += "one point per second";
        }
        legend += "; every row shares one y scale";
        root.draw(&Text::new(
            legend,
            (8, 28),
            (FONT, 13).into_font().color(&BLACK.mix(0.7)).pos(left),
        ))
        .map_err(text)?;

        let rotated = (FONT, AXIS_FONT)
            .into_font()
            .transform(FontTransform::Rotate270)
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        for (row, &(top, legend, chart)) in ROWS.iter().zip(&plan.rows) {
            let y = top + legend + (chart - X_LABEL_AREA) / 2;
            root.draw(&Text::new(
                row.label(),
                (LABEL_WIDTH as i32 / 2, y as i32),
                rotated.clone(),
            ))
            .map_err(text)?;
        }

        for (c, column) in columns.iter().enumerate() {
            let x = LABEL_WIDTH + c as u32 * plan.column_width;
            let plot = plan.column_width - Y_LABEL_AREA - RIGHT_MARGIN;
            root.draw(&Text::new(
                column.setting.as_str(),
                (
                    (x + Y_LABEL_AREA + plot / 2) as i32,
                    (TITLE_HEIGHT + 3) as i32,
                ),
                (FONT, 16)
                    .into_font()
                    .style(FontStyle::Bold)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(text)?;
            for ((&row, &(top, legend, chart)), panel) in
                ROWS.iter().zip(&plan.rows).zip(&column.panels)
            {
                let strip = root.clone().shrink((x, top), (plan.column_width, legend));
                draw_legend(&strip, &panel.legend, plan.column_width)?;
                let area = root
                    .clone()
                    .shrink((x, top + legend), (plan.column_width, chart));
                let x_range = RangedCoordf64::from(0.0..plan.end);
                match row {
                    Row::Latency => {
                        let (lo, hi) = scales.latency;
                        let y: LogCoord<f64> = (lo..hi).log_scale().into();
                        chart_panel(&area, plan, x_range, y, lo..hi, &millis, shading, panel)?
                    }
                    _ => {
                        let top = match row {
                            Row::Health => 1.05,
                            Row::Load => scales.load,
                            Row::Probes => scales.probes,
                            _ => scales.states,
                        };
                        let format: &dyn Fn(&f64) -> String = if row == Row::Health {
                            &|v: &f64| format!("{:.0}%", v * 100.0)
                        } else {
                            &|v: &f64| compact(*v)
                        };
                        let y = RangedCoordf64::from(0.0..top);
                        chart_panel(&area, plan, x_range, y, 0.0..top, format, shading, panel)?
                    }
                }
            }
        }
        root.present().map_err(text)?;
    }
    Ok(out)
}

fn draw_legend(area: &Area<'_>, legend: &[Legend], column_width: u32) -> Result<(), String> {
    let (at, _) = flow(legend, legend_width(column_width));
    let style = (FONT, LEGEND_FONT)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let noted = (FONT, LEGEND_FONT)
        .into_font()
        .color(&BLACK.mix(0.6))
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (entry, &(x, line)) in legend.iter().zip(&at) {
        let x = LEGEND_LEFT + x;
        let y = (LEGEND_PAD + line * LEGEND_LINE + LEGEND_LINE / 2) as i32;
        match entry.color {
            Some(color) => {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + KEY_WIDTH - 6, y)],
                    color.stroke_width(2),
                ))
                .map_err(text)?;
                area.draw(&Text::new(
                    entry.text.as_str(),
                    (x + KEY_WIDTH, y),
                    style.clone(),
                ))
                .map_err(text)?;
            }
            None => area
                .draw(&Text::new(entry.text.as_str(), (x, y), noted.clone()))
                .map_err(text)?,
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn chart_panel<Y>(
    area: &Area<'_>,
    plan: &Plan,
    x: RangedCoordf64,
    y: Y,
    y_range: Range<f64>,
    y_format: &dyn Fn(&f64) -> String,
    shading: &[(f64, f64)],
    panel: &Panel,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin_right(RIGHT_MARGIN)
        .margin_top(CHART_TOP)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(x, y)
        .map_err(text)?;
    let shade = RGBColor(220, 60, 60).mix(0.12);
    chart
        .draw_series(shading.iter().map(|&(from, to)| {
            Rectangle::new([(from, y_range.start), (to, y_range.end)], shade.filled())
        }))
        .map_err(text)?;
    let unit = plan.unit.1;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(TRANSPARENT)
        .x_labels(6)
        .y_labels(5)
        .x_label_formatter(&|v| format!("{}{unit}", trimmed(*v, 1)))
        .y_label_formatter(&y_format)
        .label_style((FONT, AXIS_FONT))
        .draw()
        .map_err(text)?;
    // One bucket's width in units, to draw a lone bucket (between two gaps) as a dash.
    let width = plan.bucket as f64 / plan.unit.0;
    for (color, values) in &panel.lines {
        // A bucket without data breaks the line instead of bridging it.
        let mut start = 0;
        while start < values.len() {
            if values[start].is_nan() {
                start += 1;
                continue;
            }
            let len = values[start..]
                .iter()
                .position(|v| v.is_nan())
                .unwrap_or(values.len() - start);
            let mut points: Vec<(f64, f64)> = (start..start + len)
                .map(|i| (plan.at[i], values[i]))
                .collect();
            if len == 1 {
                points.push(((plan.at[start] + width).min(plan.end), values[start]));
            }
            let points = thinned(&points, |p| chart.backend_coord(p));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(1)))
                .map_err(text)?;
            start += len;
        }
    }
    Ok(())
}

/// `points` without those that change nothing once drawn: a point on the same pixel as the
/// one before, or on the straight line from the one before to the next (a flat stretch, say),
/// in pixels as `pixel` maps them. The drawing stays the same pixel for pixel; the SVG gets
/// smaller.
fn thinned(points: &[(f64, f64)], pixel: impl Fn(&(f64, f64)) -> (i32, i32)) -> Vec<(f64, f64)> {
    let mut kept: Vec<((f64, f64), (i32, i32))> = Vec::with_capacity(points.len());
    for p in points {
        let at = pixel(p);
        if kept.last().is_some_and(|&(_, last)| last == at) {
            continue;
        }
        if kept.len() >= 2 {
            let (a, b) = (kept[kept.len() - 2].1, kept[kept.len() - 1].1);
            let (ab, bc) = ((b.0 - a.0, b.1 - a.1), (at.0 - b.0, at.1 - b.1));
            let cross = i64::from(ab.0) * i64::from(bc.1) - i64::from(ab.1) * i64::from(bc.0);
            let dot = i64::from(ab.0) * i64::from(bc.0) + i64::from(ab.1) * i64::from(bc.1);
            if cross == 0 && dot > 0 {
                kept.pop();
            }
        }
        kept.push((*p, at));
    }
    kept.into_iter().map(|(p, _)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(duration: &str) -> Scenario {
        let text = format!(
            r#"
            name = "synthetic"
            seed = 3
            duration = "{duration}"
            [dependency]
            latency-median = "10ms"
            latency-p99 = "40ms"
            error-rate = 0.01
            capacity = 1000
            [fleet]
            pods = 10
            rate = 50
            timeout = "1s"
            [[incidents]]
            kind = "outage"
            start = "60s"
            duration = "30s"
            [[incidents]]
            kind = "capacity-limited"
            start = "90s"
            duration = "60s"
            capacity-from = 0.2
            [breakers.instances.a]
            "#
        );
        Scenario::from_toml(&text, "x").unwrap()
    }

    /// A made-up run of `seconds` seconds: an outage from 60 s to 90 s, probes every 5 s
    /// while open, capacity cut to a fifth and growing back after it.
    fn run(setting: &str, seconds: usize, salt: u32) -> Run {
        let timeline = (0..seconds)
            .map(|i| {
                let t = i as u32;
                let down = (60..90).contains(&i);
                let cold = (90..150).contains(&i);
                let offered = 500 + (t * 7 + salt) % 40;
                let admitted = if down { 20 } else { offered };
                let probes = u32::from(down && i % 5 == 0) * (3 + salt % 4);
                let capacity = if down {
                    0
                } else if cold {
                    200 + (t - 90) * 13
                } else {
                    1000
                };
                let ended = if i % 97 == 13 { 0 } else { offered - 10 };
                Second {
                    offered,
                    admitted,
                    succeeded: if down { 0 } else { admitted - 3 },
                    failed: if down { admitted } else { 3 },
                    ended,
                    goodput: if down { 0 } else { ended.saturating_sub(5) },
                    latency_p50_us: if ended == 0 { 0 } else { 11_000 + t % 50 * 10 },
                    latency_p99_us: if ended == 0 {
                        0
                    } else if down {
                        1_000_000
                    } else {
                        45_000 + salt * 1000
                    },
                    capacity,
                    probes,
                    closed: if down { 2 } else { 10 },
                    open: if down { 7 } else { 0 },
                    half_open: u32::from(down),
                    recovering: 0,
                    ..Second::default()
                }
            })
            .collect();
        Run {
            setting: setting.to_owned(),
            counts: Default::default(),
            probe_times: vec![],
            transitions: vec![],
            timeline,
            latencies: Default::default(),
            ok_latencies: Default::default(),
            window_reach: Default::default(),
            oracle: false,
        }
    }

    fn runs(n: usize, seconds: usize) -> Vec<Run> {
        (0..n)
            .map(|i| run(&format!("setting-{i}"), seconds, i as u32))
            .collect()
    }

    /// The `name` attribute of the root `<svg …>` element.
    fn root_attribute(svg: &str, name: &str) -> u32 {
        let tag = &svg[..svg.find('>').unwrap()];
        let key = format!(" {name}=\"");
        let from = tag.find(&key).unwrap() + key.len();
        let len = tag[from..].find('"').unwrap();
        tag[from..from + len].parse().unwrap()
    }

    #[test]
    fn documents_are_at_most_max_width_and_split_when_needed() {
        let s = scenario("5m");
        for (n, files) in [(1, 1), (3, 1), (4, 1), (5, 2), (9, 3)] {
            let docs = svgs(&s, &runs(n, 300)).unwrap();
            assert_eq!(docs.len(), files, "{n} runs");
            let mut columns = 0;
            for (i, (suffix, svg)) in docs.iter().enumerate() {
                let expected = if i == 0 {
                    String::new()
                } else {
                    format!("-{}", i + 1)
                };
                assert_eq!(suffix, &expected);
                assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
                let width = root_attribute(svg, "width");
                assert!(width <= MAX_WIDTH, "{n} runs: {width} px");
                assert!(root_attribute(svg, "height") > 0);
                // Every document names its rows.
                for row in ROWS {
                    assert!(svg.contains(row.label()), "{n} runs, file {i}: {row:?}");
                }
                columns += svg.matches(">\nsetting-").count();
            }
            assert_eq!(columns, n, "every run drawn once");
        }
        assert_eq!(
            svg(&s, &runs(9, 300)).unwrap(),
            svgs(&s, &runs(9, 300)).unwrap()[0].1
        );
    }

    /// With an oracle among the runs, every other column draws the oracle's admitted
    /// attempts under its own, with the oracle's total; the oracle's column does not draw
    /// itself twice, and without an oracle no column has the line.
    #[test]
    fn other_columns_draw_the_oracles_admitted_rate() {
        let s = scenario("5m");
        let mut oracle = run("the-oracle", 300, 7);
        oracle.oracle = true;
        for second in &mut oracle.timeline[60..90] {
            second.admitted = 0;
        }
        let admitted: u64 = oracle.timeline.iter().map(|s| u64::from(s.admitted)).sum();
        let legend = format!("oracle admitted ({})", grouped(admitted));
        let svg = svg(&s, &[run("a", 300, 0), run("b", 300, 1), oracle.clone()]).unwrap();
        assert_eq!(svg.matches(&legend).count(), 2, "in a and b only");
        let cyan = "#50C8E6";
        assert!(svg.matches(cyan).count() >= 4, "two keys and two lines");
        let alone = self::svg(&s, &[run("a", 300, 0), run("b", 300, 1)]).unwrap();
        assert!(!alone.contains("oracle admitted") && !alone.contains(cyan));
        let only = self::svg(&s, &[oracle]).unwrap();
        assert!(!only.contains("oracle admitted"));
    }

    #[test]
    fn legends_carry_the_totals() {
        let s = scenario("5m");
        let mut r = run("counted", 300, 0);
        // The report's figure, drain included: not the plotted seconds' sums.
        (r.counts.requests, r.counts.requests_ok) = (4598, 2713);
        let opened = |from| crate::fleet::PodTransition {
            pod: 0,
            replica: None,
            at: 61_000_000_000,
            transition: Transition::Opened {
                from,
                reason: cutout::OpenReason::ConsecutiveFailures(5),
                break_for: std::time::Duration::from_secs(5),
            },
        };
        r.transitions = vec![
            opened(State::Closed),
            opened(State::HalfOpen),
            opened(State::Closed),
        ];
        let t = totals(&r, &r.timeline);
        let svg = svg(&s, &[r]).unwrap();
        assert!(t.admitted > 1000);
        for expected in [
            format!("offered ({})", grouped(t.offered)),
            format!("admitted ({})", grouped(t.admitted)),
            format!("goodput ({})", grouped(t.goodput)),
            format!("probes ({}; peak {}", t.probes, t.probe_peak),
            "trips: 2".to_owned(),
            "re-opens: 1".to_owned(),
            "capacity (0-1,000/s)".to_owned(),
            format!("of {} requests ended", grouped(t.ended)),
            "requests that succeeded: 59.00% of 4,598".to_owned(),
        ] {
            assert!(svg.contains(&expected), "{expected}");
        }
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
    }

    #[test]
    fn thinning_keeps_the_drawing() {
        let pixel = |p: &(f64, f64)| (p.0 as i32, p.1 as i32);
        let points = [
            (0.0, 5.0),
            (1.0, 5.0),
            (2.0, 5.0),
            (2.4, 5.2),
            (3.0, 7.0),
            (4.0, 9.0),
            (5.0, 11.0),
            (6.0, 2.0),
            (6.5, 9.0),
        ];
        assert_eq!(
            thinned(&points, pixel),
            [(0.0, 5.0), (2.0, 5.0), (5.0, 11.0), (6.0, 2.0), (6.5, 9.0)]
        );
        // A line that turns back on itself keeps its turning point.
        let back = [(0.0, 0.0), (5.0, 0.0), (2.0, 0.0)];
        assert_eq!(thinned(&back, pixel), back);
        assert_eq!(bucket_width(300, 600), 1);
        assert_eq!(bucket_width(86_400, 560), 180);
        assert_eq!(bucket_width(86_400 * 30, 600), 7200);
        assert_eq!(span(180), "3 min");
    }

    #[test]
    fn the_same_runs_give_the_same_bytes() {
        let s = scenario("5m");
        let a = svgs(&s, &runs(6, 300)).unwrap();
        let b = svgs(&s, &runs(6, 300)).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_run_where_no_request_ended_draws_no_latency() {
        let s = scenario("5m");
        let mut quiet = run("quiet", 300, 0);
        for second in &mut quiet.timeline {
            second.ended = 0;
            second.goodput = 0;
            second.latency_p50_us = 0;
            second.latency_p99_us = 0;
            second.capacity = 0;
        }
        let alone = svg(&s, std::slice::from_ref(&quiet)).unwrap();
        assert!(alone.contains("no request ended"));
        assert!(alone.contains("goodput: not recorded"));
        assert!(alone.contains("capacity: not recorded"));
        assert!(!alone.contains("no breakers"));
        let p50 = format!("stroke=\"#{:02X}{:02X}{:02X}\"", P50.0, P50.1, P50.2);
        let polylines = |svg: &str| {
            svg.lines()
                .filter(|l| l.starts_with("<polyline") && l.contains(&p50))
                .count()
        };
        assert_eq!(polylines(&alone), 0, "no p50 line");
        // Beside a run that has latencies, only that one draws them.
        let both = svg(&s, &[quiet, run("busy", 300, 1)]).unwrap();
        assert!(polylines(&both) > 0);
        // A fleet without breakers says so instead of drawing four flat lines.
        let mut bare = run("bare", 300, 0);
        for second in &mut bare.timeline {
            (second.closed, second.open, second.half_open) = (0, 0, 0);
        }
        assert!(svg(&s, &[bare]).unwrap().contains("no breakers"));
        // And an empty run, or none at all, still draws.
        let mut empty = run("empty", 0, 0);
        empty.timeline.clear();
        assert!(svg(&s, &[empty.clone()]).unwrap().starts_with("<svg"));
        assert!(
            svg(&s, &[empty, run("full", 300, 0)])
                .unwrap()
                .starts_with("<svg")
        );
        assert!(svg(&s, &[]).unwrap().starts_with("<svg"));
    }

    #[test]
    fn a_day_long_run_stays_small() {
        let s = scenario("24h");
        let seconds = 86_400;
        let docs = svgs(&s, &runs(1, seconds)).unwrap();
        assert_eq!(docs.len(), 1);
        let svg = &docs[0].1;
        assert!(svg.len() < 100_000, "{} bytes", svg.len());
        // No line has more points than MAX_POINTS.
        for l in svg.lines().filter(|l| l.starts_with("<polyline")) {
            let points = l.split("points=\"").nth(1).unwrap();
            let points = &points[..points.find('"').unwrap()];
            assert!(points.split_whitespace().count() <= MAX_POINTS, "{l}");
        }
        // Four long runs side by side too.
        let four = svgs(&s, &runs(4, seconds)).unwrap();
        assert_eq!(four.len(), 1);
        assert!(four[0].1.len() < 300_000, "{} bytes", four[0].1.len());
    }
}
