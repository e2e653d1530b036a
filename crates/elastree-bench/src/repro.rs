//! Named experiments: `elastree repro <experiment> [--scale S] [--out DIR]`.
//!
//! Each [`Experiment`] in [`EXPERIMENTS`] runs a fixed measurement (scaled by `--scale`, which
//! multiplies the number of keys) and writes into its output directory (default
//! `results/<experiment>/`):
//!
//! * `report.md`: what was run, the exact command, the machine (CPU model, cores, memory), the
//!   date, a Markdown table of medians with min-max and ratios against `btreemap`, and the
//!   plots;
//! * `<workload>.png`: a grouped bar chart of throughput per index per key set, one per
//!   workload, and `memory.png` with bytes per key;
//! * `results.jsonl` and `results.csv`: the raw rows (fields: see [`crate::report`]).
//!
//! Plots are drawn with plotters' bitmap backend; text is rendered with ab_glyph from the
//! DejaVu Sans font embedded by the `dejavu` crate, so no system fonts are needed.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::cli::{self, EXIT_USAGE};
use crate::keys::KeySetKind;
use crate::peers::{IndexSpec, Peer};
use crate::report::{self, Summary, BASELINE};
use crate::workload::{Measurement, RunConfig, Status, Workload, DEFAULT_SCAN_LEN};

/// A named experiment.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    /// The name `elastree repro` takes.
    pub name: &'static str,
    /// One line on what it measures.
    pub about: &'static str,
    /// Keys per key set at `--scale 1`.
    pub base_n: usize,
    /// Builds the run configuration for `n` keys per key set.
    configure: fn(n: usize, repeat: usize, seed: u64) -> RunConfig,
}

/// Every experiment `elastree repro` knows.
pub const EXPERIMENTS: &[Experiment] = &[Experiment {
    name: "btree-baseline",
    about: "elastree's B+-tree (btree) vs BTreeMap, bplustree, ferntree, congee, scc, \
            SkipMap and a sorted array on every key set: load, lookup, scan, delete and \
            bytes per key, one thread",
    base_n: 1_000_000,
    configure: btree_baseline,
}];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

fn btree_baseline(n: usize, repeat: usize, seed: u64) -> RunConfig {
    RunConfig {
        indexes: std::iter::once(IndexSpec::Elastree(elastree::IndexKind::BTree))
            .chain(Peer::ALL.iter().map(|&p| IndexSpec::Peer(p)))
            .collect(),
        keysets: KeySetKind::BASELINE.to_vec(),
        n,
        workloads: Workload::DEFAULT.to_vec(),
        threads: vec![1],
        repeat,
        seed,
        scan_len: DEFAULT_SCAN_LEN,
    }
}

/// Arguments of `elastree repro`.
#[derive(Debug, Clone, Args)]
pub struct ReproArgs {
    /// The experiment to run.
    #[arg(value_name = "EXPERIMENT", value_parser = experiment_parser())]
    pub experiment: String,

    /// Multiplies the experiment's number of keys (1 = its default, which finishes in a few
    /// minutes on 2 cores).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,

    /// Where to write the report, plots and raw rows (default: results/<EXPERIMENT>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Repetitions of each measurement (median, min and max are reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,

    /// Seed of the key sets and operation streams.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// The experiment names as clap's possible values, with their descriptions for `--help`.
fn experiment_parser() -> PossibleValuesParser {
    PossibleValuesParser::new(
        EXPERIMENTS
            .iter()
            .map(|e| PossibleValue::new(e.name).help(e.about)),
    )
}

/// Runs an experiment and writes its report. `command` is the command line as typed, for the
/// report. Exit codes: 0 on success, 1 when a file cannot be written or a measurement failed
/// its result check, 2 on arguments that make no run.
pub fn run(args: &ReproArgs, command: &str) -> ExitCode {
    let Some(experiment) = find(&args.experiment) else {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        eprintln!(
            "elastree repro: unknown experiment {:?} (known: {})",
            args.experiment,
            names.join(", ")
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let cfg = match configure(experiment, args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("elastree repro: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("results").join(experiment.name));
    if let Err(e) = fs::create_dir_all(&out) {
        eprintln!("elastree repro: creating {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    cli::warn_if_debug("cargo run --release -p elastree-cli -- repro");
    eprintln!(
        "elastree repro {}: n={} per key set, {} indexes x {} key sets x {} workloads, \
         repeat {}; writing to {}",
        experiment.name,
        cfg.n,
        cfg.indexes.len(),
        cfg.keysets.len(),
        cfg.workloads.len(),
        cfg.repeat,
        out.display()
    );
    let started = Instant::now();
    let rows = cli::measure(&cfg);
    let elapsed = started.elapsed();
    let run = Run {
        experiment,
        cfg: &cfg,
        rows: &rows,
        command,
        elapsed,
    };
    match run.write(&out) {
        Ok(files) => {
            println!(
                "elastree repro {}: done in {}; wrote {}",
                experiment.name,
                fmt_duration(elapsed),
                files
                    .iter()
                    .map(|f| out.join(f).display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Err(e) => {
            eprintln!(
                "elastree repro: writing the report to {}: {e}",
                out.display()
            );
            return ExitCode::FAILURE;
        }
    }
    if rows.iter().any(|m| matches!(m.status, Status::Failed(_))) {
        eprintln!("elastree repro: some measurements FAILED their result checks (see report.md)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The run configuration of `experiment` under `args`.
fn configure(experiment: &Experiment, args: &ReproArgs) -> Result<RunConfig, String> {
    if !(args.scale.is_finite() && args.scale > 0.0) {
        return Err(format!(
            "--scale must be a positive number, not {}",
            args.scale
        ));
    }
    let n = (experiment.base_n as f64 * args.scale).round();
    if n > f64::from(u32::MAX) {
        return Err(format!("--scale {} makes too many keys", args.scale));
    }
    let cfg = (experiment.configure)(n as usize, args.repeat, args.seed);
    cli::validate(&cfg).map_err(|e| format!("--scale {}: {e}", args.scale))?;
    Ok(cfg)
}

/// A finished run, ready to be written out.
struct Run<'a> {
    experiment: &'a Experiment,
    cfg: &'a RunConfig,
    rows: &'a [Measurement],
    command: &'a str,
    elapsed: Duration,
}

/// The file holding the plot of `workload` (or `memory`).
fn plot_file(name: &str) -> String {
    format!("{name}.png")
}

impl Run<'_> {
    /// Writes the raw rows, the plots and the report into `dir`; returns the file names.
    fn write(&self, dir: &Path) -> Result<Vec<String>, String> {
        let mut files = Vec::new();
        let io = |file: &str, e: std::io::Error| format!("{file}: {e}");
        cli::write_rows(
            &dir.join("results.jsonl"),
            self.rows,
            report::write_json_lines,
        )
        .map_err(|e| io("results.jsonl", e))?;
        files.push("results.jsonl".to_string());
        cli::write_rows(&dir.join("results.csv"), self.rows, report::write_csv)
            .map_err(|e| io("results.csv", e))?;
        files.push("results.csv".to_string());

        let mut plots = Vec::new();
        for &workload in &self.cfg.workloads {
            let file = plot_file(workload.name());
            let unit = if workload.unit() == "keys" {
                "million keys visited/s"
            } else {
                "Mops/s"
            };
            let title = format!(
                "{}: {workload} throughput ({unit}, median of {}), n={}",
                self.experiment.name, self.cfg.repeat, self.cfg.n
            );
            let series = self.series(|index, keys| {
                self.row(index, keys, workload)
                    .filter(|m| m.status == Status::Ok)
                    .and_then(|m| Summary::of(&m.mops))
                    .map(|s| s.median)
            });
            draw_grouped_bars(&dir.join(&file), &title, &self.keyset_names(), &series)
                .map_err(|e| format!("{file}: {e}"))?;
            plots.push((workload.name().to_string(), file.clone()));
            files.push(file);
        }
        let file = plot_file("memory");
        let title = format!(
            "{}: bytes per key after the load (counting allocator), n={}",
            self.experiment.name, self.cfg.n
        );
        let series = self.series(|index, keys| self.bytes_per_key(index, keys).0);
        draw_grouped_bars(&dir.join(&file), &title, &self.keyset_names(), &series)
            .map_err(|e| format!("{file}: {e}"))?;
        plots.push(("memory (bytes/key)".to_string(), file.clone()));
        files.push(file);

        fs::write(dir.join("report.md"), self.markdown(&plots)).map_err(|e| io("report.md", e))?;
        files.insert(0, "report.md".to_string());
        Ok(files)
    }

    fn keyset_names(&self) -> Vec<&'static str> {
        self.cfg.keysets.iter().map(|k| k.name()).collect()
    }

    /// One value per index per key set, in the configuration's orders.
    fn series(
        &self,
        value: impl Fn(&str, KeySetKind) -> Option<f64>,
    ) -> Vec<(String, Vec<Option<f64>>)> {
        self.cfg
            .indexes
            .iter()
            .map(|spec| {
                let values = self
                    .cfg
                    .keysets
                    .iter()
                    .map(|&keys| value(spec.name(), keys))
                    .collect();
                (spec.name().to_string(), values)
            })
            .collect()
    }

    /// The single-thread row (or the first) of `index` on `keys` for `workload`.
    fn row(&self, index: &str, keys: KeySetKind, workload: Workload) -> Option<&Measurement> {
        let mut matching = self
            .rows
            .iter()
            .filter(|m| m.index == index && m.keys == keys && m.workload == workload);
        let first = matching.next()?;
        Some(
            std::iter::once(first)
                .chain(matching)
                .find(|m| m.threads == 1)
                .unwrap_or(first),
        )
    }

    /// Bytes per key (allocator, self-reported) of `index` on `keys`, from any of its rows.
    fn bytes_per_key(&self, index: &str, keys: KeySetKind) -> (Option<f64>, Option<f64>) {
        let rows = || {
            self.rows
                .iter()
                .filter(move |m| m.index == index && m.keys == keys)
        };
        (
            rows().find_map(|m| m.bytes_per_key_alloc),
            rows().find_map(|m| m.bytes_per_key_self),
        )
    }

    /// The table cell of one measurement: `median [min-max] (ratio)`, or why there is none.
    fn cell(&self, index: &str, keys: KeySetKind, workload: Workload) -> String {
        let Some(m) = self.row(index, keys, workload) else {
            return "-".to_string();
        };
        match &m.status {
            Status::Ok => {
                let Some(s) = Summary::of(&m.mops) else {
                    return "-".to_string();
                };
                let base = self
                    .row(BASELINE, keys, workload)
                    .filter(|b| b.status == Status::Ok)
                    .and_then(|b| Summary::of(&b.mops))
                    .map(|b| b.median)
                    .filter(|&b| b > 0.0);
                let ratio = base.map_or_else(String::new, |b| format!(" ({:.2}x)", s.median / b));
                format!("{:.3} [{:.3}-{:.3}]{ratio}", s.median, s.min, s.max)
            }
            Status::Skipped(_) => "skipped".to_string(),
            Status::Failed(_) => "FAILED".to_string(),
        }
    }

    fn markdown(&self, plots: &[(String, String)]) -> String {
        let cfg = self.cfg;
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(w, "# `elastree repro {}`\n", self.experiment.name);
        let _ = writeln!(w, "{}.\n", self.experiment.about);
        let _ = writeln!(w, "## What was run\n");
        let _ = writeln!(w, "- command: `{}`", self.command);
        let _ = writeln!(w, "- date: {} (UTC)", utc_now());
        let _ = writeln!(
            w,
            "- wall time of the measurements: {}",
            fmt_duration(self.elapsed)
        );
        let indexes: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
        let _ = writeln!(w, "- indexes: {}", indexes.join(", "));
        let _ = writeln!(
            w,
            "- key sets: {}, {} keys each",
            self.keyset_names().join(", "),
            cfg.n
        );
        let workloads: Vec<&str> = cfg.workloads.iter().map(|w| w.name()).collect();
        let _ = writeln!(
            w,
            "- workloads: {} (scans visit {} keys each); memory is measured after the load",
            workloads.join(", "),
            cfg.scan_len
        );
        let threads: Vec<String> = cfg.threads.iter().map(|t| t.to_string()).collect();
        let _ = writeln!(
            w,
            "- threads: {}; repetitions: {} (interleaved index by index), seed {}",
            threads.join(", "),
            cfg.repeat,
            cfg.seed
        );
        let _ = writeln!(
            w,
            "- build: {}, elastree-bench {}",
            if cfg!(debug_assertions) {
                "debug (numbers are not representative)"
            } else {
                "release"
            },
            env!("CARGO_PKG_VERSION")
        );
        let _ = writeln!(w, "\n## Machine\n");
        let facts = machine_facts();
        let _ = writeln!(w, "- CPU: {}", facts.cpu);
        let _ = writeln!(w, "- cores (nproc): {}", facts.cores);
        let _ = writeln!(w, "- memory (MemTotal): {}", facts.memory);

        let _ = writeln!(w, "\n## Results\n");
        let _ = writeln!(
            w,
            "Throughput in millions of operations per second (scan: millions of keys visited \
             per second): median [min-max] over {} repetitions, and in parentheses the ratio \
             of the median to {BASELINE}'s on the same key set. B/key alloc: bytes the loaded \
             index holds by the counting allocator, per key; B/key self: the index's own \
             accounting; the last column compares B/key alloc with {BASELINE}'s.\n",
            cfg.repeat
        );
        let mut header = vec!["keys".to_string(), "index".to_string()];
        header.extend(cfg.workloads.iter().map(|wl| {
            if wl.unit() == "keys" {
                format!("{wl} (M keys/s)")
            } else {
                format!("{wl} (Mops/s)")
            }
        }));
        header.extend([
            "B/key alloc".to_string(),
            "B/key self".to_string(),
            format!("B/key vs {BASELINE}"),
        ]);
        let _ = writeln!(w, "| {} |", header.join(" | "));
        let _ = writeln!(w, "|{}", "---|".repeat(header.len()));
        let mut notes: Vec<String> = Vec::new();
        for &keys in &cfg.keysets {
            let (base_alloc, _) = self.bytes_per_key(BASELINE, keys);
            for spec in &cfg.indexes {
                let index = spec.name();
                let mut cells = vec![keys.name().to_string(), format!("`{index}`")];
                cells.extend(cfg.workloads.iter().map(|&wl| self.cell(index, keys, wl)));
                let (alloc, own) = self.bytes_per_key(index, keys);
                let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
                cells.push(fmt(alloc));
                cells.push(fmt(own));
                cells.push(match (alloc, base_alloc) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                    _ => "-".to_string(),
                });
                let _ = writeln!(w, "| {} |", cells.join(" | "));
                for m in self
                    .rows
                    .iter()
                    .filter(|m| m.index == index && m.keys == keys)
                {
                    let note = match &m.status {
                        Status::Skipped(r) => format!("skipped: {r}"),
                        Status::Failed(p) => format!("FAILED: {p}"),
                        Status::Ok => continue,
                    };
                    let line = format!("- `{index}` on {keys}, {}: {note}", m.workload);
                    if !notes.contains(&line) {
                        notes.push(line);
                    }
                }
            }
        }
        if !notes.is_empty() {
            let _ = writeln!(w, "\nNot measured:\n");
            for note in &notes {
                let _ = writeln!(w, "{note}");
            }
        }
        let _ = writeln!(w, "\n## Plots\n");
        for (what, file) in plots {
            let _ = writeln!(w, "### {what}\n\n![{what}]({file})\n");
        }
        let _ = writeln!(w, "## Raw rows\n");
        let _ = writeln!(
            w,
            "`results.jsonl` (one JSON object per index x key set x workload x threads) and \
             `results.csv` (the same fields), documented in \
             `crates/elastree-bench/src/report.rs`."
        );
        md
    }
}

/// What the report says about the machine.
struct MachineFacts {
    cpu: String,
    cores: String,
    memory: String,
}

fn machine_facts() -> MachineFacts {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".to_string(), |(_, v)| v.trim().to_string());
    let cores = std::thread::available_parallelism()
        .map_or_else(|_| "unknown".to_string(), |n| n.get().to_string());
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or_else(
            || "unknown".to_string(),
            |kib| format!("{:.1} GiB", kib / (1024.0 * 1024.0)),
        );
    MachineFacts { cpu, cores, memory }
}

fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        format!("{}m {:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

// ---------------------------------------------------------------------------------------------
// Plots
// ---------------------------------------------------------------------------------------------

/// The font family the plots use, registered from the embedded DejaVu Sans.
const FONT: &str = "sans-serif";

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

/// Bar colours, one per index in order (the first is elastree's).
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

/// Draws a grouped bar chart into a PNG at `path`: one group per category (key set), one bar
/// per series (index) in it, a legend on the right. A missing value is marked `n/a`.
pub fn draw_grouped_bars(
    path: &Path,
    title: &str,
    categories: &[&str],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<(), String> {
    ensure_font()?;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let (width, height) = (1100u32, 560u32);
    let legend_width = 170u32;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (plot_area, legend_area) = root.split_horizontally(width - legend_width);

    let max = series
        .iter()
        .flat_map(|(_, values)| values.iter().flatten())
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let top = if max > 0.0 { max * 1.1 } else { 1.0 };
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
        let color = COLORS[si % COLORS.len()];
        let bars = values.iter().enumerate().filter_map(|(ci, value)| {
            let v = (*value)?;
            let x0 = ci as f64 + 0.1 + si as f64 * bar;
            Some(Rectangle::new(
                [(x0, 0.0), (x0 + bar * 0.9, v)],
                color.filled(),
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

    let legend_style = TextStyle::from((FONT, 15).into_font()).color(&BLACK);
    for (si, (name, _)) in series.iter().enumerate() {
        let y = 50 + 26 * si as i32;
        let color = COLORS[si % COLORS.len()];
        legend_area
            .draw(&Rectangle::new([(8, y), (24, y + 16)], color.filled()))
            .map_err(|e| err(&e))?;
        legend_area
            .draw(&Text::new(name.clone(), (32, y), &legend_style))
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

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn registry_names_are_unique_and_found() {
        for e in EXPERIMENTS {
            assert_eq!(find(e.name).map(|f| f.name), Some(e.name));
            assert_eq!(EXPERIMENTS.iter().filter(|o| o.name == e.name).count(), 1);
        }
        assert!(find("nope").is_none());
    }

    #[test]
    fn btree_baseline_measures_btree_and_every_peer_on_every_key_set() {
        let e = find("btree-baseline").unwrap();
        let cfg = (e.configure)(1000, 3, 42);
        let names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "btree",
                "btreemap",
                "bplustree",
                "ferntree",
                "congee",
                "scc",
                "skipmap",
                "sorted"
            ]
        );
        assert_eq!(cfg.keysets, KeySetKind::BASELINE);
        assert_eq!(cfg.workloads, Workload::DEFAULT);
    }

    #[test]
    fn scale_must_be_positive_and_make_enough_keys() {
        let e = find("btree-baseline").unwrap();
        let args = |scale: f64| ReproArgs {
            experiment: e.name.to_string(),
            scale,
            out: None,
            repeat: 3,
            seed: 42,
        };
        assert_eq!(configure(e, &args(0.5)).unwrap().n, 500_000);
        assert!(configure(e, &args(0.0)).is_err());
        assert!(configure(e, &args(-1.0)).is_err());
        assert!(configure(e, &args(f64::NAN)).is_err());
        assert!(configure(e, &args(1e-9)).is_err());
    }

    #[test]
    fn plots_render_to_png() {
        let dir = std::env::temp_dir().join(format!("elastree-plot-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bars.png");
        let series = vec![
            ("btree".to_string(), vec![Some(2.0), Some(1.5)]),
            ("congee".to_string(), vec![Some(3.0), None]),
        ];
        draw_grouped_bars(&path, "test", &["rand64", "email"], &series).unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        fs::remove_dir_all(&dir).unwrap();
    }
}
