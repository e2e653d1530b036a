//! Suite experiments: a [`RunConfig`] of the benchmark, measured by [`runner::measure`] and
//! reported as a table of medians with min-max and ratios against `btreemap`, one grouped
//! bar chart per workload (`<workload>.png`, medians with min-max error bars), `memory.png`
//! with bytes per key (measured once: no error bars), and the raw
//! rows (`results.jsonl`, `results.csv`; fields: see [`crate::report`]).
//!
//! `btree-baseline` is the suite of elastree's B+-tree against every peer on the baseline
//! key sets.

use std::fmt::Write as _;

use super::document::{fmt_rate, targets_table_of, Target};
use super::plots::{draw_grouped_bars, Point, Series};
use super::{ExperimentContext, Report};
use crate::keys::KeySetKind;
use crate::output::{to_file, RESULT_FILES};
use crate::peers::{IndexSpec, Peer};
use crate::report::{self, BASELINE};
use crate::runner;
use crate::runner::Summary;
use crate::workload::{Measurement, RunConfig, Status, Workload, DEFAULT_SCAN_LEN};

/// The run of `btree-baseline` for `n` keys per key set: elastree's `btree` and every peer,
/// on the baseline key sets, every workload, one thread.
pub fn btree_baseline_config(n: usize, repeat: usize, seed: u64) -> RunConfig {
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
        budget: crate::peers::Budget::default(),
        tuning: crate::peers::SeqTreeTuning::default(),
        cluster: None,
    }
}

/// `btree-baseline`.
pub(super) fn run(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    suite(ctx, &btree_baseline_config(ctx.n, ctx.repeat, ctx.seed))
}

/// Measures `cfg`, writes its raw rows and bar charts into `ctx.out`, and returns the report.
/// The summary compares the first index of `cfg` with `btreemap`.
pub fn suite(ctx: &ExperimentContext<'_>, cfg: &RunConfig) -> Result<Report, String> {
    cfg.validate()?;
    eprintln!(
        "{}: {} indexes x {} key sets x {} workloads",
        ctx.experiment.name,
        cfg.indexes.len(),
        cfg.keysets.len(),
        cfg.workloads.len()
    );
    let rows = runner::measure(cfg);
    let labels: Vec<String> = cfg.indexes.iter().map(|s| s.name().to_string()).collect();
    write_suite(ctx, cfg, &labels, BASELINE, &rows)
}

/// What an experiment with targets adds to its suite's report, computed from the measured
/// suite (see [`targeted_suite`]).
#[derive(Debug, Default)]
pub(super) struct Additions {
    /// The targets: the report's first section and the start of its README block.
    pub(super) targets: Vec<Target>,
    /// The experiment's own sections, after the results.
    pub(super) sections: Vec<(String, String)>,
    /// What the README block shows after the targets and the suite's ratios.
    pub(super) shown: String,
    /// Whether `shown` takes the place of the suite's ratios (a table too wide to read when
    /// the experiment has many workloads).
    pub(super) replaces_ratios: bool,
    /// Plots the experiment drew into its output directory: (name, file).
    pub(super) plots: Vec<(String, String)>,
    /// Lines for the report's "What was run".
    pub(super) facts: Vec<String>,
}

/// Measures `cfg` and returns its suite report (ratios to `baseline`) with what `add` makes
/// of the measured suite: the targets (stated for `stated_for`, e.g. `10 million keys`)
/// first, then the results, then the experiment's sections and plots.
pub(super) fn targeted_suite(
    ctx: &ExperimentContext<'_>,
    cfg: &RunConfig,
    (baseline, stated_for): (&str, &str),
    add: impl FnOnce(&Suite<'_>) -> Result<Additions, String>,
) -> Result<Report, String> {
    cfg.validate()?;
    let rows = runner::measure(cfg);
    let labels: Vec<String> = cfg.indexes.iter().map(|s| s.name().to_string()).collect();
    let mut report = write_suite(ctx, cfg, &labels, baseline, &rows)?;
    let suite = Suite {
        name: ctx.experiment.name,
        cfg,
        labels: &labels,
        baseline,
        rows: &rows,
    };
    let add = add(&suite)?;
    let table = targets_table_of(stated_for, &add.targets);
    report.summary = if add.replaces_ratios {
        format!("{table}\n{}", add.shown)
    } else {
        format!("{table}\n{}\n{}", report.summary, add.shown)
    };
    report.sections.insert(0, ("Targets".to_string(), table));
    report.sections.extend(add.sections);
    for (name, file) in add.plots {
        report.plots.push((name, file.clone()));
        report.files.push(file);
    }
    report.facts.extend(add.facts);
    Ok(report)
}

/// Writes the raw rows and bar charts of measured `rows` into `ctx.out` and returns the
/// report: a results table with a row per label (the rows' `index`, in `labels` order) and
/// key set, ratios to the rows of `baseline`, and a summary comparing the first label with
/// `baseline`. `cfg` says what was run (its key sets, workloads, repetitions and scan
/// length; the indexes are `labels`).
pub fn write_suite(
    ctx: &ExperimentContext<'_>,
    cfg: &RunConfig,
    labels: &[String],
    baseline: &str,
    rows: &[Measurement],
) -> Result<Report, String> {
    let suite = Suite {
        name: ctx.experiment.name,
        cfg,
        labels,
        baseline,
        rows,
    };
    let mut report = Report {
        size: format!("{} keys per key set", cfg.n),
        ..Report::default()
    };
    let [json, csv] = RESULT_FILES;
    let io = |file: &str, e: std::io::Error| format!("{file}: {e}");
    to_file(&ctx.out.join(json), |out| {
        report::write_json_lines(rows, out)
    })
    .map_err(|e| io(json, e))?;
    to_file(&ctx.out.join(csv), |out| report::write_csv(rows, out)).map_err(|e| io(csv, e))?;
    report.files = RESULT_FILES.iter().map(|f| f.to_string()).collect();

    for &workload in &cfg.workloads {
        let file = format!("{}.png", workload.name());
        let unit = if workload.unit() == "keys" {
            "million keys visited/s"
        } else {
            "Mops/s"
        };
        let title = format!(
            "{}: {workload} throughput ({unit}, median of {}), n={}",
            suite.name, cfg.repeat, cfg.n
        );
        let series = suite.series(|index, keys| {
            suite
                .row(index, keys, workload)
                .filter(|m| m.status == Status::Ok)
                .and_then(|m| Summary::of(&m.mops))
                .map(Point::from)
        });
        draw_grouped_bars(&ctx.out.join(&file), &title, &suite.keyset_names(), &series)
            .map_err(|e| format!("{file}: {e}"))?;
        report
            .plots
            .push((workload.name().to_string(), file.clone()));
        report.files.push(file);
    }
    let file = "memory.png".to_string();
    let title = format!(
        "{}: bytes per key after the load (counting allocator), n={}",
        suite.name, cfg.n
    );
    let series = suite.series(|index, keys| suite.bytes_per_key(index, keys).0.map(Point::from));
    draw_grouped_bars(&ctx.out.join(&file), &title, &suite.keyset_names(), &series)
        .map_err(|e| format!("{file}: {e}"))?;
    report
        .plots
        .push(("memory (bytes/key)".to_string(), file.clone()));
    report.files.push(file);

    report.facts = suite.facts();
    report
        .sections
        .push(("Results".to_string(), suite.results_table()));
    report.raw = "`results.jsonl` (one JSON object per index x key set x workload x threads) \
                  and `results.csv` (the same fields), documented in \
                  `crates/elastree-bench/src/report.rs`."
        .to_string();
    report.summary = suite.summary();
    report.failures = rows
        .iter()
        .filter(|m| matches!(m.status, Status::Failed(_)))
        .count();
    Ok(report)
}

/// A measured suite, ready to be reported.
pub(super) struct Suite<'a> {
    pub(super) name: &'a str,
    pub(super) cfg: &'a RunConfig,
    /// The indexes as the rows name them, in report order.
    pub(super) labels: &'a [String],
    /// The index every other is compared with.
    pub(super) baseline: &'a str,
    pub(super) rows: &'a [Measurement],
}

impl Suite<'_> {
    fn keyset_names(&self) -> Vec<&'static str> {
        self.cfg.keysets.iter().map(|k| k.name()).collect()
    }

    /// One point per index per key set, in the configuration's orders.
    fn series(&self, value: impl Fn(&str, KeySetKind) -> Option<Point>) -> Vec<Series> {
        self.labels
            .iter()
            .map(|label| {
                let values = self
                    .cfg
                    .keysets
                    .iter()
                    .map(|&keys| value(label, keys))
                    .collect();
                (label.clone(), values)
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

    /// The median throughput of `index` on `keys` for `workload`, if it was measured.
    pub(super) fn median(&self, index: &str, keys: KeySetKind, workload: Workload) -> Option<f64> {
        self.row(index, keys, workload)
            .filter(|m| m.status == Status::Ok)
            .and_then(|m| Summary::of(&m.mops))
            .map(|s| s.median)
    }

    /// The median throughput of `index` on `keys` for `workload` on `threads` threads.
    pub(super) fn median_at(
        &self,
        index: &str,
        keys: KeySetKind,
        workload: Workload,
        threads: usize,
    ) -> Option<f64> {
        self.rows
            .iter()
            .find(|m| {
                m.index == index && m.keys == keys && m.workload == workload && m.threads == threads
            })
            .filter(|m| m.status == Status::Ok)
            .and_then(|m| Summary::of(&m.mops))
            .map(|s| s.median)
    }

    /// The sampled latencies of `index` on `keys` for `workload` (single thread, or the
    /// first row), sorted, in nanoseconds.
    pub(super) fn sorted_latencies(
        &self,
        index: &str,
        keys: KeySetKind,
        workload: Workload,
    ) -> Vec<u64> {
        let mut latencies = self
            .row(index, keys, workload)
            .filter(|m| m.status == Status::Ok)
            .map_or_else(Vec::new, |m| m.latency_ns.clone());
        latencies.sort_unstable();
        latencies
    }

    /// Bytes per key (allocator, self-reported) of `index` on `keys`, from any of its rows.
    pub(super) fn bytes_per_key(
        &self,
        index: &str,
        keys: KeySetKind,
    ) -> (Option<f64>, Option<f64>) {
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
                    .median(self.baseline, keys, workload)
                    .filter(|&b| b > 0.0);
                let ratio = base.map_or_else(String::new, |b| format!(" ({:.2}x)", s.median / b));
                let (median, min, max) = (fmt_rate(s.median), fmt_rate(s.min), fmt_rate(s.max));
                format!("{median} [{min}-{max}]{ratio}")
            }
            Status::Skipped(_) => "skipped".to_string(),
            Status::Failed(_) => "FAILED".to_string(),
        }
    }

    /// The experiment's lines of "What was run".
    fn facts(&self) -> Vec<String> {
        let cfg = self.cfg;
        let indexes: Vec<&str> = self.labels.iter().map(String::as_str).collect();
        let workloads: Vec<&str> = cfg.workloads.iter().map(|w| w.name()).collect();
        let threads: Vec<String> = cfg.threads.iter().map(|t| t.to_string()).collect();
        vec![
            format!("indexes: {}", indexes.join(", ")),
            format!(
                "key sets: {}, {} keys each",
                self.keyset_names().join(", "),
                cfg.n
            ),
            format!(
                "workloads: {} (scans visit {} keys each); memory is measured after the load",
                workloads.join(", "),
                cfg.scan_len
            ),
            format!(
                "threads: {}; repetitions: {} (interleaved index by index), seed {}",
                threads.join(", "),
                cfg.repeat,
                cfg.seed
            ),
        ]
    }

    /// The "Results" section: the table of every index, key set and workload.
    fn results_table(&self) -> String {
        let (cfg, baseline) = (self.cfg, self.baseline);
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(
            w,
            "Throughput in millions of operations per second (scan: millions of keys visited \
             per second): median [min-max] over {} repetitions, and in parentheses the ratio \
             of the median to {baseline}'s on the same key set. B/key alloc: bytes the loaded \
             index holds by the counting allocator, per key; B/key self: the index's own \
             accounting; the last column compares B/key alloc with {baseline}'s.\n",
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
            format!("B/key vs {baseline}"),
        ]);
        let _ = writeln!(w, "| {} |", header.join(" | "));
        let _ = writeln!(w, "|{}", "---|".repeat(header.len()));
        let mut notes: Vec<String> = Vec::new();
        for &keys in &cfg.keysets {
            let (base_alloc, _) = self.bytes_per_key(baseline, keys);
            for index in self.labels {
                let index = index.as_str();
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
        md
    }

    /// The README summary: the first index's median throughput as a ratio to `btreemap`'s
    /// on each key set and workload, and both indexes' bytes per key.
    fn summary(&self) -> String {
        let (cfg, baseline) = (self.cfg, self.baseline);
        let Some(first) = self.labels.first() else {
            return String::new();
        };
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(
            w,
            "`{first}` against `{baseline}`{} in the same run: \
             ratio of median throughputs (median of {} interleaved repetitions; scans of {} \
             keys), and bytes per key by the counting allocator.\n",
            if baseline == BASELINE {
                " (`std::collections::BTreeMap`)"
            } else {
                ""
            },
            cfg.repeat,
            cfg.scan_len
        );
        let mut header = vec!["keys".to_string()];
        header.extend(cfg.workloads.iter().map(|wl| wl.name().to_string()));
        header.push(format!("bytes/key `{first}` (`{baseline}`)"));
        let _ = writeln!(w, "| {} |", header.join(" | "));
        let _ = writeln!(w, "|{}", "---|".repeat(header.len()));
        for &keys in &cfg.keysets {
            let mut cells = vec![keys.name().to_string()];
            cells.extend(cfg.workloads.iter().map(|&wl| {
                match (
                    self.median(first, keys, wl),
                    self.median(baseline, keys, wl).filter(|&b| b > 0.0),
                ) {
                    (Some(a), Some(b)) => format!("{:.2}x", a / b),
                    _ => "-".to_string(),
                }
            }));
            let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
            cells.push(format!(
                "{} ({})",
                fmt(self.bytes_per_key(first, keys).0),
                fmt(self.bytes_per_key(baseline, keys).0)
            ));
            let _ = writeln!(w, "| {} |", cells.join(" | "));
        }
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btree_baseline_measures_btree_and_every_peer_on_every_key_set() {
        let cfg = btree_baseline_config(1000, 3, 42);
        let names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
        let mut expected = vec!["btree"];
        expected.extend(Peer::ALL.iter().map(|p| p.name()));
        assert_eq!(names, expected);
        assert_eq!(cfg.keysets, KeySetKind::BASELINE);
        assert_eq!(cfg.workloads, Workload::DEFAULT);
    }
}
