//! The SVG timeline: per setting, the dependency's health, offered against admitted load, and
//! the fleet's breaker states, second by second, with failing incidents shaded.

use std::fmt::Display;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::scenario::Scenario;
use crate::sim::{Run, Second};

/// At most this many points per line: longer runs are averaged into wider buckets, which
/// keeps the SVG small.
const MAX_POINTS: usize = 600;
const PANEL_WIDTH: u32 = 620;
const PANEL_HEIGHT: u32 = 210;
const TITLE_HEIGHT: u32 = 36;

fn text<E: Display>(e: E) -> String {
    e.to_string()
}

/// One averaged bucket of the timeline: its start in seconds and its mean values.
struct Point {
    at: f64,
    values: [f64; 8],
}

fn values(s: &Second) -> [f64; 8] {
    let done = s.succeeded + s.failed;
    let health = if done == 0 {
        f64::NAN
    } else {
        f64::from(s.succeeded) / f64::from(done)
    };
    [
        health,
        f64::from(s.offered),
        f64::from(s.admitted),
        f64::from(s.closed),
        f64::from(s.open),
        f64::from(s.half_open),
        f64::from(s.recovering),
        f64::from(s.probes),
    ]
}

fn points(run: &Run, seconds: usize) -> Vec<Point> {
    let timeline = &run.timeline[..seconds.min(run.timeline.len())];
    let width = timeline.len().div_ceil(MAX_POINTS).max(1);
    timeline
        .chunks(width)
        .enumerate()
        .map(|(i, chunk)| {
            let mut sum = [0.0; 8];
            let mut counted = [0usize; 8];
            for s in chunk {
                for (k, v) in values(s).into_iter().enumerate() {
                    if !v.is_nan() {
                        sum[k] += v;
                        counted[k] += 1;
                    }
                }
            }
            let mut mean = [f64::NAN; 8];
            for k in 0..8 {
                if counted[k] > 0 {
                    mean[k] = sum[k] / counted[k] as f64;
                }
            }
            Point {
                at: (i * width) as f64,
                values: mean,
            }
        })
        .collect()
}

/// Draws the timeline of `runs` (one column per setting) as an SVG document.
pub fn svg(scenario: &Scenario, runs: &[Run]) -> Result<String, String> {
    let mut out = String::new();
    let size = (
        PANEL_WIDTH * runs.len().max(1) as u32,
        TITLE_HEIGHT + 3 * PANEL_HEIGHT,
    );
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(text)?;
        let (title, body) = root.split_vertically(TITLE_HEIGHT);
        title
            .titled(
                &format!(
                    "{}: {} pods x {} req/s, seed {} (shaded: failing incidents)",
                    scenario.name, scenario.traffic.pods, scenario.traffic.rate, scenario.seed
                ),
                ("sans-serif", 18),
            )
            .map_err(text)?;
        let panels = body.split_evenly((3, runs.len().max(1)));
        for (column, run) in runs.iter().enumerate() {
            let areas = [
                &panels[column],
                &panels[runs.len() + column],
                &panels[2 * runs.len() + column],
            ];
            draw_column(scenario, run, areas)?;
        }
        root.present().map_err(text)?;
    }
    Ok(out)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A panel: its caption, the top of its y axis, and its lines (value index, label, colour).
type Panel<'a> = (&'a str, f64, &'a [(usize, &'a str, RGBColor)]);

fn draw_column(scenario: &Scenario, run: &Run, areas: [&Area<'_>; 3]) -> Result<(), String> {
    let seconds = scenario.duration.as_secs_f64().ceil() as usize;
    let pts = points(run, seconds);
    let end = seconds as f64;
    let peak_load = pts
        .iter()
        .map(|p| p.values[1].max(p.values[2]))
        .filter(|v| !v.is_nan())
        .fold(1.0, f64::max)
        * 1.1;
    let pods = f64::from(scenario.traffic.pods) * 1.05;
    let panels: [Panel<'_>; 3] = [
        (
            "dependency: share of finished calls that succeeded",
            1.05,
            &[(0, "succeeded", RGBColor(0, 128, 0))],
        ),
        (
            "load: attempts per second",
            peak_load,
            &[
                (1, "offered", RGBColor(150, 150, 150)),
                (2, "admitted", RGBColor(0, 90, 200)),
                (7, "probes", RGBColor(200, 0, 0)),
            ],
        ),
        (
            "fleet: breakers per state",
            pods,
            &[
                (3, "closed", RGBColor(0, 128, 0)),
                (4, "open", RGBColor(200, 0, 0)),
                (5, "half-open", RGBColor(230, 140, 0)),
                (6, "recovering", RGBColor(0, 90, 200)),
            ],
        ),
    ];
    for (area, (caption, top, lines)) in areas.into_iter().zip(panels) {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{}: {caption}", run.setting), ("sans-serif", 13))
            .margin(6)
            .x_label_area_size(22)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..end, 0.0..top)
            .map_err(text)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("s")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(text)?;
        let shade = RGBColor(220, 60, 60).mix(0.12);
        chart
            .draw_series(
                scenario
                    .script
                    .incidents()
                    .iter()
                    .filter(|i| i.kind.is_failing())
                    .map(|i| {
                        let from = i.start.as_secs_f64().min(end);
                        let to = i.end().as_secs_f64().min(end);
                        Rectangle::new([(from, 0.0), (to, top)], shade.filled())
                    }),
            )
            .map_err(text)?;
        for &(k, label, color) in lines {
            // A bucket without data (no call finished) breaks the line instead of bridging it.
            let segments = pts
                .split(|p| p.values[k].is_nan())
                .filter(|segment| !segment.is_empty());
            let mut labelled = false;
            for segment in segments {
                let series = segment.iter().map(|p| (p.at, p.values[k]));
                let drawn = chart
                    .draw_series(LineSeries::new(series, color.stroke_width(1)))
                    .map_err(text)?;
                if !labelled {
                    labelled = true;
                    drawn
                        .label(label)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color));
                }
            }
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 11))
            .border_style(BLACK.mix(0.3))
            .background_style(WHITE.mix(0.85))
            .position(SeriesLabelPosition::LowerLeft)
            .draw()
            .map_err(text)?;
    }
    Ok(())
}
