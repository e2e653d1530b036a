//! PNG plots of the reports: grouped bar charts (one group per key set, one bar per index)
//! and line charts (one line per index over the steps of a curve experiment). A bar or point
//! that carries the range of its repetitions (min to max) gets an error bar: a vertical
//! whisker with small caps.
//!
//! Plots are drawn with plotters' bitmap backend; text is rendered with ab_glyph from the
//! DejaVu Sans font embedded by the `dejavu` crate, so no system fonts are needed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::runner::Summary;

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

/// One bar or point: its value and, if it was measured more than once, the range of the
/// repetitions, drawn as an error bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The value drawn (a median, where there were repetitions).
    pub value: f64,
    /// The smallest and the largest of the repetitions.
    pub range: Option<(f64, f64)>,
}

impl Point {
    /// The point with its value and range multiplied by `factor` (a change of unit).
    pub fn scaled(self, factor: f64) -> Point {
        Point {
            value: self.value * factor,
            range: self.range.map(|(lo, hi)| (lo * factor, hi * factor)),
        }
    }

    /// The error bar to draw: the range, when it is finite and not a single value.
    fn whisker(&self) -> Option<(f64, f64)> {
        self.range
            .filter(|(lo, hi)| lo.is_finite() && hi.is_finite() && hi > lo)
    }
}

/// A value without a range (one measurement, or a deterministic figure such as memory).
impl From<f64> for Point {
    fn from(value: f64) -> Point {
        Point { value, range: None }
    }
}

/// The median, with the range from the minimum to the maximum.
impl From<Summary> for Point {
    fn from(s: Summary) -> Point {
        Point {
            value: s.median,
            range: Some((s.min, s.max)),
        }
    }
}

/// A named series of points; `None` where there is no value.
pub type Series = (String, Vec<Option<Point>>);

/// A series of plain values (no error bars).
pub fn plain(name: String, values: impl IntoIterator<Item = Option<f64>>) -> Series {
    (
        name,
        values.into_iter().map(|v| v.map(Point::from)).collect(),
    )
}

/// A drawing area of a PNG plot.
type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// A white canvas on `backend` (`WIDTH` x `HEIGHT`) split into the plot area and the legend
/// column, with the legend drawn.
fn canvas<'a>(
    backend: BitMapBackend<'a>,
    series: &[Series],
) -> Result<(Area<'a>, Area<'a>), String> {
    ensure_font()?;
    let root = backend.into_drawing_area();
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

/// The top of the y axis: a tenth above the largest finite value or range end (1 if there is
/// none).
fn y_top(series: &[Series]) -> f64 {
    let max = series
        .iter()
        .flat_map(|(_, values)| values.iter().flatten())
        .flat_map(|p| [Some(p.value), p.whisker().map(|(_, hi)| hi)])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// The colour of error bars on bars.
const WHISKER: RGBColor = RGBColor(30, 30, 30);

/// The most pixels an error bar's cap reaches either side of its whisker.
const CAP_PX: f64 = 6.0;

/// Half the width of an error bar's caps on `chart`: `half` in x units, at most `CAP_PX`.
fn cap_width<DB: DrawingBackend>(
    chart: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    half: f64,
) -> f64 {
    let px_per_unit =
        f64::from(chart.backend_coord(&(1.0, 0.0)).0 - chart.backend_coord(&(0.0, 0.0)).0);
    if px_per_unit > 0.0 {
        half.min(CAP_PX / px_per_unit)
    } else {
        half
    }
}

/// An error bar from `lo` to `hi` at `x`: a vertical whisker and caps `cap` wide either side.
fn error_bar(
    x: f64,
    (lo, hi): (f64, f64),
    cap: f64,
    style: ShapeStyle,
) -> [PathElement<(f64, f64)>; 3] {
    [
        PathElement::new(vec![(x, lo), (x, hi)], style),
        PathElement::new(vec![(x - cap, lo), (x + cap, lo)], style),
        PathElement::new(vec![(x - cap, hi), (x + cap, hi)], style),
    ]
}

/// Draws a grouped bar chart into a PNG at `path`: one group per category (key set), one bar
/// per series (index) in it, a legend on the right. A missing value is marked `n/a`; a bar
/// with a range gets an error bar.
pub fn draw_grouped_bars(
    path: &Path,
    title: &str,
    categories: &[&str],
    series: &[Series],
) -> Result<(), String> {
    let backend = BitMapBackend::new(path, (WIDTH, HEIGHT));
    grouped_bars_on(backend, title, categories, series)
}

/// [`draw_grouped_bars`] on `backend`.
fn grouped_bars_on(
    backend: BitMapBackend<'_>,
    title: &str,
    categories: &[&str],
    series: &[Series],
) -> Result<(), String> {
    let (root, plot_area) = canvas(backend, series)?;
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
    let x0 = |ci: usize, si: usize| ci as f64 + 0.1 + si as f64 * bar;
    for (si, (_, values)) in series.iter().enumerate() {
        let bars = values.iter().enumerate().filter_map(|(ci, point)| {
            let x0 = x0(ci, si);
            Some(Rectangle::new(
                [(x0, 0.0), (x0 + bar * 0.9, point.as_ref()?.value)],
                color(si).filled(),
            ))
        });
        chart.draw_series(bars).map_err(|e| err(&e))?;
    }
    // Error bars over the bars, centred on each, their caps half the bar wide (at most
    // `CAP_PX` either side).
    let whisker_style = WHISKER.stroke_width(2);
    let cap = cap_width(&chart, bar * 0.225);
    for (si, (_, values)) in series.iter().enumerate() {
        let whiskers = values.iter().enumerate().flat_map(|(ci, point)| {
            let range = point.as_ref().and_then(Point::whisker);
            let x = x0(ci, si) + bar * 0.45;
            range
                .map(|range| error_bar(x, range, cap, whisker_style))
                .into_iter()
                .flatten()
        });
        chart.draw_series(whiskers).map_err(|e| err(&e))?;
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
/// line; a point with a range gets an error bar in its line's colour.
pub fn draw_lines(path: &Path, chart: &LineChart<'_>) -> Result<(), String> {
    lines_on(BitMapBackend::new(path, (WIDTH, HEIGHT)), chart)
}

/// [`draw_lines`] on `backend`.
fn lines_on(backend: BitMapBackend<'_>, chart: &LineChart<'_>) -> Result<(), String> {
    let (root, plot_area) = canvas(backend, chart.series)?;
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
        for (i, point) in values.iter().enumerate() {
            match point {
                Some(p) if p.value.is_finite() => segment.push((i as f64, p.value)),
                _ => segments.push(std::mem::take(&mut segment)),
            }
        }
        // Caps a fifth of the space between points wide (at most `CAP_PX` either side).
        let cap = cap_width(&plot, 0.1);
        let whiskers = values.iter().enumerate().flat_map(|(i, point)| {
            let range = point.as_ref().and_then(Point::whisker);
            range
                .map(|range| error_bar(i as f64, range, cap, color(si).stroke_width(1)))
                .into_iter()
                .flatten()
        });
        plot.draw_series(whiskers).map_err(|e| err(&e))?;
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
            plain("btree".to_string(), [Some(2.0), Some(1.5)]),
            plain("congee".to_string(), [Some(3.0), None]),
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
            plain("btree".to_string(), [Some(2.0), Some(3.0), Some(2.5), None]),
            plain("btreemap".to_string(), [Some(1.0), None, Some(1.5), None]),
            plain("empty".to_string(), [None; 4]),
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

    /// The RGB pixels `draw` paints on a canvas of the plots' size.
    fn pixels(draw: impl FnOnce(BitMapBackend<'_>) -> Result<(), String>) -> Vec<u8> {
        let mut buffer = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
        draw(BitMapBackend::with_buffer(&mut buffer, (WIDTH, HEIGHT))).unwrap();
        buffer
    }

    /// The bounding box (left, top, right, bottom) of the pixels where `a` and `b` differ.
    fn difference(a: &[u8], b: &[u8]) -> Option<(u32, u32, u32, u32)> {
        let mut bbox: Option<(u32, u32, u32, u32)> = None;
        for (i, (pa, pb)) in a.chunks(3).zip(b.chunks(3)).enumerate() {
            if pa != pb {
                let (x, y) = (i as u32 % WIDTH, i as u32 / WIDTH);
                bbox = Some(bbox.map_or((x, y, x, y), |(l, t, r, btm)| {
                    (l.min(x), t.min(y), r.max(x), btm.max(y))
                }));
            }
        }
        bbox
    }

    /// The first series with a point whose range is `range`; a second, taller series keeps
    /// the y axis the same with or without the range.
    fn with_range(range: Option<(f64, f64)>) -> Vec<Series> {
        let point = Point { value: 1.0, range };
        vec![
            (
                "ranged".to_string(),
                vec![Some(point), Some(Point::from(1.0))],
            ),
            plain("tall".to_string(), [Some(2.0), Some(2.0)]),
        ]
    }

    /// An error bar is a whisker with caps: what it adds is much taller than wide, spans the
    /// range (0.5 to 1.5 on a y axis of 2.2, about 45% of the plot's height) and nothing
    /// else; a range of one value adds nothing.
    fn assert_error_bar(draw: impl Fn(&[Series], BitMapBackend<'_>) -> Result<(), String>) {
        let without = pixels(|b| draw(&with_range(None), b));
        let with = pixels(|b| draw(&with_range(Some((0.5, 1.5))), b));
        let (left, top, right, bottom) = difference(&without, &with).expect("no error bar");
        let (wide, tall) = (right - left + 1, bottom - top + 1);
        assert!((5..=30).contains(&wide), "caps {wide} px wide");
        assert!(
            tall > HEIGHT * 3 / 10 && tall < HEIGHT / 2,
            "whisker {tall} px tall"
        );
        let flat = pixels(|b| draw(&with_range(Some((1.0, 1.0))), b));
        assert_eq!(difference(&without, &flat), None, "a range of one value");
    }

    #[test]
    fn bars_with_a_range_get_an_error_bar() {
        assert_error_bar(|series, backend| {
            grouped_bars_on(backend, "test", &["rand64", "email"], series)
        });
    }

    #[test]
    fn points_with_a_range_get_an_error_bar() {
        let labels: Vec<String> = ["1K", "2K"].map(String::from).to_vec();
        assert_error_bar(|series, backend| {
            let chart = LineChart {
                title: "test",
                x_desc: "items",
                y_desc: "Mops/s",
                x_labels: &labels,
                series,
                phases: None,
            };
            lines_on(backend, &chart)
        });
    }

    #[test]
    fn the_y_axis_reaches_over_the_ranges() {
        let series = vec![(
            "a".to_string(),
            vec![Some(Point {
                value: 1.0,
                range: Some((0.5, 3.0)),
            })],
        )];
        assert!((y_top(&series) - 3.3).abs() < 1e-9);
        assert!((y_top(&with_range(None)) - 2.2).abs() < 1e-9);
        let scaled = Point::from(Summary::of(&[1.0, 2.0, 4.0]).unwrap()).scaled(10.0);
        assert_eq!(scaled.value, 20.0);
        assert_eq!(scaled.range, Some((10.0, 40.0)));
    }
}
