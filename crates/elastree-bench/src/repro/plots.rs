//! PNG plots of the reports: grouped bar charts (one group per key set, one bar per index)
//! and line charts (one line per index over the steps of a curve experiment).
//!
//! Plots are drawn with plotters' bitmap backend; text is rendered with ab_glyph from the
//! DejaVu Sans font embedded by the `dejavu` crate, so no system fonts are needed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font family the plots use, registered from the embedded DejaVu Sans.
const FONT: &str = "sans-serif";

/// Size of every plot, in pixels, and the width of its legend column (room for a name like
/// "dist-baseline, 4 masters").
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 560;
const LEGEND_WIDTH: u32 = 240;

/// Registers the embedded font with plotters once.
fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("the embedded DejaVu Sans font could not be loaded".to_string())
    }
}

/// Series colours, one per index in order (the first is elastree's).
const COLORS: &[RGBColor] = &[
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(series: usize) -> RGBColor {
    COLORS[series % COLORS.len()]
}

fn err(e: &dyn std::fmt::Display) -> String {
    e.to_string()
}

/// A named series of values; `None` where there is no value.
pub type Series = (String, Vec<Option<f64>>);

/// A drawing area of a PNG plot.
type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// A white canvas split into the plot area and the legend column, with the legend drawn.
fn canvas<'a>(path: &'a Path, series: &[Series]) -> Result<(Area<'a>, Area<'a>), String> {
    ensure_font()?;
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (plot_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let legend_style = TextStyle::from((FONT, 15).into_font()).color(&BLACK);
    for (si, (name, _)) in series.iter().enumerate() {
        let y = 50 + 26 * si as i32;
        legend_area
            .draw(&Rectangle::new([(8, y), (24, y + 16)], color(si).filled()))
            .map_err(|e| err(&e))?;
        legend_area
            .draw(&Text::new(name.clone(), (32, y), &legend_style))
            .map_err(|e| err(&e))?;
    }
    Ok((root, plot_area))
}

/// The top of the y axis: a tenth above the largest finite value (1 if there is none).
fn y_top(series: &[Series]) -> f64 {
    let max = series
        .iter()
        .flat_map(|(_, values)| values.iter().flatten())
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// Draws a grouped bar chart into a PNG at `path`: one group per category (key set), one bar
/// per series (index) in it, a legend on the right. A missing value is marked `n/a`.
pub fn draw_grouped_bars(
    path: &Path,
    title: &str,
    categories: &[&str],
    series: &[Series],
) -> Result<(), String> {
    let (root, plot_area) = canvas(path, series)?;
    let top = y_top(series);
    let groups = categories.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..groups, 0.0..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(categories.len().max(1))
        .x_label_formatter(&|_| String::new())
        .y_labels(8)
        .y_label_formatter(&|v| format_value(*v))
        .label_style((FONT, 14))
        .draw()
        .map_err(|e| err(&e))?;

    let per_group = series.len().max(1) as f64;
    let bar = 0.8 / per_group;
    for (si, (_, values)) in series.iter().enumerate() {
        let bars = values.iter().enumerate().filter_map(|(ci, value)| {
            let v = (*value)?;
            let x0 = ci as f64 + 0.1 + si as f64 * bar;
            Some(Rectangle::new(
                [(x0, 0.0), (x0 + bar * 0.9, v)],
                color(si).filled(),
            ))
        });
        chart.draw_series(bars).map_err(|e| err(&e))?;
    }
    // A missing value (the index cannot take that key set) is marked, not left as a zero.
    let missing_style = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    for (si, (_, values)) in series.iter().enumerate() {
        for (ci, value) in values.iter().enumerate() {
            if value.is_none() {
                let x = ci as f64 + 0.1 + (si as f64 + 0.45) * bar;
                let (px, py) = chart.backend_coord(&(x, 0.0));
                root.draw(&Text::new("n/a", (px, py - 2), &missing_style))
                    .map_err(|e| err(&e))?;
            }
        }
    }
    let label_style = TextStyle::from((FONT, 16).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (ci, name) in categories.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(ci as f64 + 0.5, 0.0));
        root.draw(&Text::new(name.to_string(), (x, y + 8), &label_style))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A line chart: one line per series over evenly spaced points labelled `x_labels`.
#[derive(Debug, Clone, Copy)]
pub struct LineChart<'a> {
    /// The caption.
    pub title: &'a str,
    /// What the x axis shows.
    pub x_desc: &'a str,
    /// What the y axis shows, with its unit.
    pub y_desc: &'a str,
    /// One label per point.
    pub x_labels: &'a [String],
    /// The lines; each has one value (or `None`: no point) per label.
    pub series: &'a [Series],
    /// A phase boundary before point `.0`, with the names of the phases before and after it.
    pub phases: Option<(usize, &'a str, &'a str)>,
}

/// Draws `chart` into a PNG at `path`, the legend on the right. A run of `None`s breaks a
/// line.
pub fn draw_lines(path: &Path, chart: &LineChart<'_>) -> Result<(), String> {
    let (root, plot_area) = canvas(path, chart.series)?;
    let top = y_top(chart.series);
    let points = chart.x_labels.len().max(1);
    let mut plot = ChartBuilder::on(&plot_area)
        .caption(chart.title, (FONT, 18))
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5..points as f64 - 0.5, 0.0..top)
        .map_err(|e| err(&e))?;
    plot.configure_mesh()
        .disable_x_mesh()
        .x_labels(1)
        .x_label_formatter(&|_| String::new())
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .y_labels(8)
        .y_label_formatter(&|v| format_value(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(|e| err(&e))?;

    if let Some((at, before, after)) = chart.phases {
        let x = at as f64 - 0.5;
        plot.draw_series(DashedLineSeries::new(
            [(x, 0.0), (x, top)],
            6,
            4,
            BLACK.mix(0.6).stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
        let (px, py) = plot.backend_coord(&(x, top));
        let style = |h| {
            TextStyle::from((FONT, 14).into_font())
                .color(&BLACK)
                .pos(Pos::new(h, VPos::Top))
        };
        root.draw(&Text::new(
            format!("{before} \u{2190}"),
            (px - 6, py + 4),
            style(HPos::Right),
        ))
        .map_err(|e| err(&e))?;
        root.draw(&Text::new(
            format!("\u{2192} {after}"),
            (px + 6, py + 4),
            style(HPos::Left),
        ))
        .map_err(|e| err(&e))?;
    }

    for (si, (_, values)) in chart.series.iter().enumerate() {
        let style = color(si).stroke_width(2);
        let mut segment: Vec<(f64, f64)> = Vec::new();
        let mut segments = Vec::new();
        for (i, value) in values.iter().enumerate() {
            match value {
                Some(v) if v.is_finite() => segment.push((i as f64, *v)),
                _ => segments.push(std::mem::take(&mut segment)),
            }
        }
        segments.push(segment);
        for segment in segments.into_iter().filter(|s| !s.is_empty()) {
            plot.draw_series(
                segment
                    .iter()
                    .map(|&p| Circle::new(p, 3, color(si).filled())),
            )
            .map_err(|e| err(&e))?;
            plot.draw_series(LineSeries::new(segment, style))
                .map_err(|e| err(&e))?;
        }
    }

    // Point labels under the axis; every k-th one when there are too many to fit.
    let every = chart.x_labels.len().div_ceil(24).max(1);
    let label_style = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, label) in chart.x_labels.iter().enumerate().step_by(every) {
        let (x, y) = plot.backend_coord(&(i as f64, 0.0));
        root.draw(&Text::new(label.clone(), (x, y + 6), &label_style))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// An axis label: few significant digits.
fn format_value(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn temp_png(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("elastree-plot-{}-{name}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        (dir, path)
    }

    fn assert_png(path: &Path) {
        let bytes = fs::read(path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn bars_render_to_png() {
        let (dir, path) = temp_png("bars");
        let series = vec![
            ("btree".to_string(), vec![Some(2.0), Some(1.5)]),
            ("congee".to_string(), vec![Some(3.0), None]),
        ];
        draw_grouped_bars(&path, "test", &["rand64", "email"], &series).unwrap();
        assert_png(&path);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lines_render_to_png_with_gaps_and_phases() {
        let (dir, path) = temp_png("lines");
        let labels: Vec<String> = ["1K", "2K", "1K", "0"].map(String::from).to_vec();
        let series = vec![
            (
                "btree".to_string(),
                vec![Some(2.0), Some(3.0), Some(2.5), None],
            ),
            (
                "btreemap".to_string(),
                vec![Some(1.0), None, Some(1.5), None],
            ),
            ("empty".to_string(), vec![None; 4]),
        ];
        let chart = LineChart {
            title: "test",
            x_desc: "items",
            y_desc: "Mops/s",
            x_labels: &labels,
            series: &series,
            phases: Some((2, "grow", "shrink")),
        };
        draw_lines(&path, &chart).unwrap();
        assert_png(&path);
        fs::remove_dir_all(&dir).unwrap();
    }
}
