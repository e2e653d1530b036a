//! Curve experiments over the grow-then-shrink driver ([`crate::growshrink`]): every index
//! on every key set grows to N keys in chunks and shrinks back to none, and the report
//! follows each measurement along the way: one table per key set and measure (memory,
//! lookups, scans, inserts and removes) with a row per step, one line plot per key set and
//! measure (`<keys>-memory.png`, `<keys>-lookup.png`, `<keys>-scan.png`,
//! `<keys>-insert.png`, `<keys>-remove.png`) with a line per index, and one JSON line (and CSV
//! line) per index, key set and step ([`CurveRow`], fields [`FIELDS`]).
//!
//! `grow-shrink` is the experiment of the elastic-index paper's Figure 5 with elastree's
//! `btree` and the peers; [`GrowShrinkExperiment`] takes the index list, the key sets, the
//! driver's settings and the paper's reported numbers as parameters, so that experiments
//! with other indexes (an elastic tree with a memory budget) reuse all of it.

use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use serde::Serialize;

use super::document::{targets_table, Target};
use super::plots::{self, draw_lines, LineChart, Series};
use super::{ExperimentContext, Report};
use crate::alloc;
use crate::growshrink::{self, GrowShrinkConfig, Phase, Point};
use crate::keys::{KeySet, KeySetKind};
use crate::output::{fmt_opt, write_results};
use crate::peers::{Budget, IndexSpec, Peer};
use crate::runner::Summary;
use crate::runner::{median, panic_message};
use crate::workload::Status;

/// Chunks of the grow phase (and of the shrink phase), as in the paper (10 chunks of 10M).
pub const CHUNKS: usize = 10;

/// The fewest keys per key set: ten keys per chunk.
pub const MIN_N: usize = 10 * CHUNKS;

/// The indexes of `grow-shrink`: elastree's B+-tree and every peer that takes inserts and
/// removes.
pub const INDEXES: &[IndexSpec] = &[
    IndexSpec::Elastree(elastree::IndexKind::BTree),
    IndexSpec::Peer(Peer::BTreeMap),
    IndexSpec::Peer(Peer::BPlusTree),
    IndexSpec::Peer(Peer::FernTree),
    IndexSpec::Peer(Peer::Congee),
    IndexSpec::Peer(Peer::Scc),
    IndexSpec::Peer(Peer::SkipMap),
];

/// The key sets of `grow-shrink`: 8-byte random and increasing integers and ~30-byte e-mail
/// addresses (the paper ran 8-byte, 16-byte and 30-byte keys).
pub const KEYSETS: &[KeySetKind] = &[KeySetKind::Rand64, KeySetKind::Mono64, KeySetKind::Email];

/// Why the sorted array is not in `grow-shrink`.
pub const SORTED_LEFT_OUT: &str = "the sorted array is built by one bulk sort and takes no \
    inserts or removes, so it has no grow or shrink phase (an insert into a sorted array \
    shifts half of it: O(n) per key); btree-baseline shows it as the compactness bound";

/// What the elastic-index paper reports for its Figure 5, from the text of section 6.1 (the
/// extracted text has no images: only numbers stated in the text).
pub const PAPER_FIGURE_5: &str = "\
Hershcovitch et al., *Elastic index* (EDBT 2022), section 6.1 and Figure 5, 64-bit keys. \
The figure itself is not in the text extraction we have; these are the numbers its text \
states, in our words.

- Setup: one thread inserts 100M items in chunks of 10M, then deletes them in chunks of 10M; \
  after every chunk it runs 3M lookups of random keys and 1M scans of 15 keys from random \
  keys. Throughputs are averages of 10 runs on a server with two 20-core Xeon E5-2630 v4 CPUs \
  and 64 GB of memory. The indexes: the STX B+-tree (16-key leaves), the elastic B+-tree \
  (which starts compacting at 50M items, 1289 MB, and expands again below 1081 MB), \
  SeqTree128 (every leaf compact) and HOT; ART, Masstree, skip list and Bw-tree were run but \
  left out of the plots as dominated.
- Memory: STX grows linearly and holds 1281 MB at 50M items (our arithmetic: about 26 bytes per \
  item); the elastic tree stays about flat from 50M to 100M items and at its peak uses about 25% more \
  than HOT; HOT and SeqTree128 are about 2.5x as compact as STX at the peak, SeqTree128 10% \
  smaller than HOT.
- Scans: HOT's scans are 1.5-2x slower than STX's (every scanned key is loaded from the \
  table); the elastic tree scans like STX until it compacts, then degrades towards HOT.
- Lookups: HOT is about 10% faster than STX beyond 50M items; SeqTree128's lookups are \
  30-35% slower than HOT's.
- Inserts: at 100M items the elastic tree inserts 25% slower than STX.
- Removes: STX removes faster than HOT at the peak but falls to HOT's rate below 60M items; \
  the elastic tree removes about 10% slower than STX, SeqTree128 40-45% slower.

Here, STX's part is played by elastree's `btree` and by `btreemap`; HOT has no Rust peer \
(congee, an ART, is the trie here, and the paper found ART dominated by HOT). `grow-shrink` \
runs the B+-trees and the peers; `elastic-grow-shrink` adds the elastic tree (`elastic`) and \
SeqTree128 (`seqtree`).
";

/// A grow-shrink experiment: which indexes on which key sets, with what driver settings.
#[derive(Debug, Clone)]
pub struct GrowShrinkExperiment<'a> {
    /// The indexes, in report order (colours follow this order).
    pub indexes: &'a [IndexSpec],
    /// The key sets, in report order.
    pub keysets: &'a [KeySetKind],
    /// The driver's settings (its seed is replaced by the run's, plus the repetition).
    pub driver: GrowShrinkConfig,
    /// Indexes deliberately not in `indexes`, with the reason, for the report.
    pub left_out: &'a [(&'a str, &'a str)],
    /// What the paper reports for this experiment (Markdown), if there is a paper figure.
    pub paper: Option<&'a str>,
    /// How the elastic kind's budget follows from each key set, if not the driver's.
    pub budget_rule: Option<BudgetRule>,
    /// The targets this experiment speaks to, checked against a finished run.
    pub targets: Option<fn(&GrowShrinkRun<'_>) -> Vec<Target>>,
}

/// How an experiment derives the elastic kind's budget from the key set it runs on.
#[derive(Debug, Clone, Copy)]
pub struct BudgetRule {
    /// What the budget is, for the report (e.g. "btree's own memory at N/2 keys").
    pub about: &'static str,
    /// The budget for a key set.
    pub of: fn(&KeySet) -> Result<Budget, String>,
}

/// `grow-shrink`.
pub(super) fn run(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    GrowShrinkExperiment {
        indexes: INDEXES,
        keysets: KEYSETS,
        driver: GrowShrinkConfig {
            chunks: CHUNKS,
            ..GrowShrinkConfig::default()
        },
        left_out: &[("sorted", SORTED_LEFT_OUT)],
        paper: Some(PAPER_FIGURE_5),
        budget_rule: None,
        targets: None,
    }
    .run(ctx)
}

/// One step of a curve: the medians (and ranges) over the repetitions after one chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Growing or shrinking.
    pub phase: Phase,
    /// Keys present after the chunk.
    pub items: usize,
    /// The chunk's inserts (growing) or removes (shrinking), Mops/s.
    pub update: Option<Summary>,
    /// Lookups on the present keys, Mops/s (none when no key is present).
    pub lookup: Option<Summary>,
    /// Scans, millions of keys visited per second (none when no key is present).
    pub scan: Option<Summary>,
    /// Median bytes held by the index by the counting allocator, if it is installed.
    pub bytes_alloc: Option<f64>,
    /// Median bytes the index reports itself holding, if it accounts for its memory.
    pub bytes_self: Option<f64>,
}

impl Step {
    /// The memory to plot and compare: the allocator's figure, else the index's own.
    pub fn bytes(&self) -> Option<f64> {
        self.bytes_alloc.or(self.bytes_self)
    }
}

/// One index on one key set through the whole run.
#[derive(Debug, Clone)]
pub struct Curve {
    /// The index.
    pub index: &'static str,
    /// The key set.
    pub keys: KeySetKind,
    /// Whether it ran, and why not.
    pub status: Status,
    /// One step per chunk (empty unless `status` is ok).
    pub steps: Vec<Step>,
}

impl Curve {
    /// The summaries of `runs` (each a list of the driver's points, all of the same steps).
    fn aggregate(runs: &[Vec<Point>]) -> Vec<Step> {
        let Some(first) = runs.first() else {
            return Vec::new();
        };
        (0..first.len())
            .map(|i| {
                let values = |f: fn(&Point) -> f64| -> Vec<f64> {
                    runs.iter().map(|points| f(&points[i])).collect()
                };
                let items = first[i].items;
                let present = |s: Option<Summary>| s.filter(|_| items > 0);
                let bytes_self: Vec<f64> = runs
                    .iter()
                    .filter_map(|points| points[i].bytes_self.map(|b| b as f64))
                    .collect();
                Step {
                    phase: first[i].phase,
                    items,
                    update: Summary::of(&values(|p| p.update_mops)),
                    lookup: present(Summary::of(&values(|p| p.lookup_mops))),
                    scan: present(Summary::of(&values(|p| p.scan_mkeys))),
                    bytes_alloc: alloc::installed()
                        .then(|| median(&values(|p| p.bytes_alloc as f64)))
                        .flatten(),
                    bytes_self: median(&bytes_self),
                }
            })
            .collect()
    }

    /// The step at the peak (every key present), if the curve has one.
    pub fn peak(&self) -> Option<&Step> {
        self.steps
            .iter()
            .filter(|s| s.phase == Phase::Grow)
            .max_by_key(|s| s.items)
    }

    /// The throughput of a whole phase's inserts or removes at the chunks' median rates:
    /// equal chunks, so the harmonic mean of the rates.
    pub fn phase_rate(&self, phase: Phase) -> Option<f64> {
        let rates: Vec<f64> = self
            .steps
            .iter()
            .filter(|s| s.phase == phase)
            .filter_map(|s| s.update.map(|u| u.median))
            .collect();
        if rates.is_empty() || rates.iter().any(|&r| r <= 0.0) {
            return None;
        }
        Some(rates.len() as f64 / rates.iter().map(|r| 1.0 / r).sum::<f64>())
    }
}

/// One JSON line (and CSV line): an index on a key set after one chunk. An index that did
/// not run has one row with `status` and `note` and no step.
#[derive(Debug, Clone, Serialize)]
pub struct CurveRow<'a> {
    /// The index.
    pub index: &'a str,
    /// The key set.
    pub keys: &'a str,
    /// Keys in the key set (the peak number of items).
    pub n: usize,
    /// The step: 0 after the first inserted chunk, `2 * chunks - 1` after the last removal.
    pub step: Option<usize>,
    /// `grow` or `shrink`.
    pub phase: Option<&'a str>,
    /// Keys present after the chunk.
    pub items: Option<usize>,
    /// What the chunk did: `insert` (grow) or `remove` (shrink).
    pub update: Option<&'a str>,
    /// The chunk's update throughput, Mops/s: median over the repetitions.
    pub update_mops_median: Option<f64>,
    /// The slowest repetition's update throughput.
    pub update_mops_min: Option<f64>,
    /// The fastest repetition's update throughput.
    pub update_mops_max: Option<f64>,
    /// Lookup throughput after the chunk, Mops/s (median; null when no key is present).
    pub lookup_mops_median: Option<f64>,
    /// Slowest repetition's lookup throughput.
    pub lookup_mops_min: Option<f64>,
    /// Fastest repetition's lookup throughput.
    pub lookup_mops_max: Option<f64>,
    /// Scan throughput after the chunk, millions of keys visited per second (median).
    pub scan_mkeys_median: Option<f64>,
    /// Slowest repetition's scan throughput.
    pub scan_mkeys_min: Option<f64>,
    /// Fastest repetition's scan throughput.
    pub scan_mkeys_max: Option<f64>,
    /// Bytes the index holds by the counting allocator (median over the repetitions).
    pub bytes_alloc: Option<f64>,
    /// Bytes the index reports itself holding (median), for indexes that account for it.
    pub bytes_self: Option<f64>,
    /// Lookups after each chunk.
    pub lookups: usize,
    /// Scans after each chunk.
    pub scans: usize,
    /// Keys per scan.
    pub scan_len: usize,
    /// Repetitions measured.
    pub repeat: usize,
    /// `ok`, `skipped` or `failed`.
    pub status: &'a str,
    /// Why the index was skipped or what failed.
    pub note: Option<&'a str>,
}

/// The fields of a [`CurveRow`], in order: the columns of `results.csv`.
pub const FIELDS: &[&str] = &[
    "index",
    "keys",
    "n",
    "step",
    "phase",
    "items",
    "update",
    "update_mops_median",
    "update_mops_min",
    "update_mops_max",
    "lookup_mops_median",
    "lookup_mops_min",
    "lookup_mops_max",
    "scan_mkeys_median",
    "scan_mkeys_min",
    "scan_mkeys_max",
    "bytes_alloc",
    "bytes_self",
    "lookups",
    "scans",
    "scan_len",
    "repeat",
    "status",
    "note",
];

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Grow => "grow",
        Phase::Shrink => "shrink",
    }
}

fn update_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Grow => "insert",
        Phase::Shrink => "remove",
    }
}

/// Median, min and max of a summary, each optional.
fn spread(s: Option<Summary>) -> (Option<f64>, Option<f64>, Option<f64>) {
    (s.map(|s| s.median), s.map(|s| s.min), s.map(|s| s.max))
}

const MIB: f64 = 1024.0 * 1024.0;

/// An item count as `250`, `100K`, `1.5M`.
pub fn fmt_items(items: usize) -> String {
    let short = |v: f64, unit: &str| {
        if v.fract() == 0.0 {
            format!("{v:.0}{unit}")
        } else {
            format!("{v:.1}{unit}")
        }
    };
    if items >= 1_000_000 {
        short((items as f64 / 1e5).round() / 10.0, "M")
    } else if items >= 1_000 {
        short((items as f64 / 1e2).round() / 10.0, "K")
    } else {
        items.to_string()
    }
}

fn fmt_summary(s: Option<Summary>) -> String {
    s.map_or_else(
        || "-".to_string(),
        |s| format!("{:.2} [{:.2}-{:.2}]", s.median, s.min, s.max),
    )
}

impl GrowShrinkExperiment<'_> {
    /// The driver settings of repetition `rep` (the operation orders differ between
    /// repetitions and are the same for every index within one) with the elastic `budget`.
    fn driver(&self, seed: u64, rep: usize, budget: Budget) -> GrowShrinkConfig {
        GrowShrinkConfig {
            seed: seed.wrapping_add(rep as u64),
            budget,
            ..self.driver.clone()
        }
    }

    /// Runs the experiment: measures, writes the raw rows and plots into `ctx.out` and
    /// returns the report.
    pub fn run(&self, ctx: &ExperimentContext<'_>) -> Result<Report, String> {
        let chunks = self.driver.chunks.clamp(1, ctx.n.max(1));
        let mut curves: Vec<Curve> = Vec::new();
        let mut key_lengths = Vec::new();
        let mut budgets = Vec::new();
        for &kind in self.keysets {
            eprintln!(
                "{}: generating {} keys of {kind}",
                ctx.experiment.name, ctx.n
            );
            let keys = kind.generate(ctx.n, ctx.seed);
            key_lengths.push(keys.avg_key_len());
            let budget = match &self.budget_rule {
                Some(rule) => (rule.of)(&keys)?,
                None => self.driver.budget,
            };
            budgets.push(budget.bytes(keys.len()));
            curves.extend(self.curves(ctx, &keys, budget));
        }
        let written = GrowShrinkRun {
            experiment: self,
            name: ctx.experiment.name,
            n: ctx.n,
            chunks,
            repeat: ctx.repeat,
            seed: ctx.seed,
            curves: &curves,
            key_lengths: &key_lengths,
            budgets: &budgets,
        };
        written.report(ctx)
    }

    /// Every index's curve on `keys`: its repetitions interleaved with the other indexes', so
    /// a slow spell of a shared machine lands on all of them alike. An index that fails a
    /// repetition keeps no points and is marked failed.
    fn curves(&self, ctx: &ExperimentContext<'_>, keys: &KeySet, budget: Budget) -> Vec<Curve> {
        let kind = keys.kind;
        let mut runs: Vec<(IndexSpec, Status, Vec<Vec<Point>>)> = self
            .indexes
            .iter()
            .map(|&spec| {
                let status = match growshrink::supports(spec, kind, self.driver.threads) {
                    Ok(()) => Status::Ok,
                    Err(reason) => Status::Skipped(reason),
                };
                (spec, status, Vec::new())
            })
            .collect();
        for rep in 0..ctx.repeat {
            let cfg = self.driver(ctx.seed, rep, budget);
            for (spec, status, points) in &mut runs {
                if *status != Status::Ok {
                    continue;
                }
                match Self::repetition(ctx, *spec, keys, &cfg, rep) {
                    Ok(run) => points.push(run),
                    Err(problem) => {
                        *status = Status::Failed(problem);
                        points.clear();
                    }
                }
            }
        }
        runs.into_iter()
            .map(|(spec, status, points)| Curve {
                index: spec.name(),
                keys: kind,
                steps: Curve::aggregate(&points),
                status,
            })
            .collect()
    }

    /// One repetition of `spec` on `keys` (a panic is a failure), said on stderr.
    fn repetition(
        ctx: &ExperimentContext<'_>,
        spec: IndexSpec,
        keys: &KeySet,
        cfg: &GrowShrinkConfig,
        rep: usize,
    ) -> Result<Vec<Point>, String> {
        let (name, kind) = (ctx.experiment.name, keys.kind);
        let started = Instant::now();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| growshrink::run(spec, keys, cfg)))
            .unwrap_or_else(|payload| {
                Err(format!("panicked: {}", panic_message(payload.as_ref())))
            });
        match &outcome {
            Ok(_) => eprintln!(
                "{name}: {kind} {} repetition {}/{}: {:.1} s",
                spec.name(),
                rep + 1,
                ctx.repeat,
                started.elapsed().as_secs_f64()
            ),
            Err(problem) => eprintln!("{name}: FAILED {kind} {}: {problem}", spec.name()),
        }
        outcome
    }
}

/// A finished grow-shrink run, ready to be written out.
#[derive(Debug, Clone)]
pub struct GrowShrinkRun<'a> {
    /// The experiment that ran.
    pub experiment: &'a GrowShrinkExperiment<'a>,
    /// The experiment's name.
    pub name: &'a str,
    /// Keys per key set (the peak).
    pub n: usize,
    /// Chunks per phase.
    pub chunks: usize,
    /// Repetitions.
    pub repeat: usize,
    /// The run's seed.
    pub seed: u64,
    /// Every index on every key set.
    pub curves: &'a [Curve],
    /// Average key length of each key set, in `experiment.keysets` order.
    pub key_lengths: &'a [f64],
    /// The elastic kind's budget in bytes on each key set, in `experiment.keysets` order.
    pub budgets: &'a [usize],
}

impl GrowShrinkRun<'_> {
    /// The curve of `index` on `keys`, if it ran.
    pub fn curve(&self, index: &str, keys: KeySetKind) -> Option<&Curve> {
        self.curves
            .iter()
            .find(|c| c.index == index && c.keys == keys && c.status == Status::Ok)
    }

    /// The elastic kind's budget on `keys`, in bytes.
    pub fn budget(&self, keys: KeySetKind) -> Option<usize> {
        let at = self.experiment.keysets.iter().position(|&k| k == keys)?;
        self.budgets.get(at).copied()
    }

    fn lookups(&self) -> usize {
        ((self.n as f64 * self.experiment.driver.lookup_fraction) as usize).max(1)
    }

    fn scans(&self) -> usize {
        ((self.n as f64 * self.experiment.driver.scan_fraction) as usize).max(1)
    }

    /// The phase and item count of every step, as the driver takes them.
    fn steps(&self) -> Vec<(Phase, usize)> {
        let (n, chunks) = (self.n, self.chunks);
        let grow = (1..=chunks).map(|c| (Phase::Grow, c * n / chunks));
        let shrink = (1..=chunks).map(|c| (Phase::Shrink, n - c * n / chunks));
        grow.chain(shrink).collect()
    }

    fn curves_of(&self, keys: KeySetKind) -> impl Iterator<Item = &Curve> + '_ {
        self.curves.iter().filter(move |c| c.keys == keys)
    }

    fn report(&self, ctx: &ExperimentContext<'_>) -> Result<Report, String> {
        let mut report = Report {
            size: format!("{} keys per key set", self.n),
            ..Report::default()
        };
        let rows = self.rows();
        report.files = write_results(ctx.out, FIELDS, &rows)?;
        for &keys in self.experiment.keysets {
            for (what, file) in self.plot(ctx, keys)? {
                report.files.push(file.clone());
                report.plots.push((what, file));
            }
        }
        report.facts = self.facts();
        report.summary = self.summary();
        report
            .sections
            .push(("Summary".to_string(), report.summary.clone()));
        if let Some(targets) = self.experiment.targets {
            let table = targets_table(&targets(self));
            report.summary = format!("{}\n{table}", report.summary);
            report.sections.push(("Targets".to_string(), table));
        }
        if let Some(paper) = self.experiment.paper {
            report.sections.push((
                "What the paper reports".to_string(),
                format!("{}\n{}", paper.trim_end(), self.ours_next_to_the_paper()),
            ));
        }
        report
            .sections
            .push(("Results per step".to_string(), self.tables()));
        let not_measured = self.not_measured();
        if !not_measured.is_empty() {
            report
                .sections
                .push(("Not measured".to_string(), not_measured));
        }
        report.raw = format!(
            "`results.jsonl` (one JSON object per index x key set x step; an index that did \
             not run has one row with its status and note) and `results.csv` (the same \
             fields: {}), documented in `crates/elastree-bench/src/repro/grow_shrink.rs`.",
            FIELDS
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        report.failures = self
            .curves
            .iter()
            .filter(|c| matches!(c.status, Status::Failed(_)))
            .count();
        Ok(report)
    }

    fn rows(&self) -> Vec<CurveRow<'_>> {
        let mut rows = Vec::new();
        for curve in self.curves {
            let (status, note) = match &curve.status {
                Status::Ok => ("ok", None),
                Status::Skipped(reason) => ("skipped", Some(reason.as_str())),
                Status::Failed(problem) => ("failed", Some(problem.as_str())),
            };
            let row = |step: Option<(usize, &Step)>| {
                let (um, ul, uh) = spread(step.and_then(|(_, s)| s.update));
                let (lm, ll, lh) = spread(step.and_then(|(_, s)| s.lookup));
                let (sm, sl, sh) = spread(step.and_then(|(_, s)| s.scan));
                CurveRow {
                    index: curve.index,
                    keys: curve.keys.name(),
                    n: self.n,
                    step: step.map(|(i, _)| i),
                    phase: step.map(|(_, s)| phase_name(s.phase)),
                    items: step.map(|(_, s)| s.items),
                    update: step.map(|(_, s)| update_name(s.phase)),
                    update_mops_median: um,
                    update_mops_min: ul,
                    update_mops_max: uh,
                    lookup_mops_median: lm,
                    lookup_mops_min: ll,
                    lookup_mops_max: lh,
                    scan_mkeys_median: sm,
                    scan_mkeys_min: sl,
                    scan_mkeys_max: sh,
                    bytes_alloc: step.and_then(|(_, s)| s.bytes_alloc),
                    bytes_self: step.and_then(|(_, s)| s.bytes_self),
                    lookups: self.lookups(),
                    scans: self.scans(),
                    scan_len: self.experiment.driver.scan_len,
                    repeat: self.repeat,
                    status,
                    note,
                }
            };
            if curve.steps.is_empty() {
                rows.push(row(None));
            } else {
                rows.extend(curve.steps.iter().enumerate().map(|s| row(Some(s))));
            }
        }
        rows
    }

    fn facts(&self) -> Vec<String> {
        let d = &self.experiment.driver;
        let indexes: Vec<&str> = self.experiment.indexes.iter().map(|s| s.name()).collect();
        let keysets: Vec<&str> = self.experiment.keysets.iter().map(|k| k.name()).collect();
        let mut facts = vec![format!("indexes: {}", indexes.join(", "))];
        if !self.experiment.left_out.is_empty() {
            let left: Vec<&str> = self.experiment.left_out.iter().map(|(i, _)| *i).collect();
            facts.push(format!(
                "left out: {} (see \"Not measured\")",
                left.join(", ")
            ));
        }
        facts.push(format!(
            "key sets: {}, {} keys each",
            keysets.join(", "),
            self.n
        ));
        if let Some(rule) = &self.experiment.budget_rule {
            let budgets: Vec<String> = self
                .experiment
                .keysets
                .iter()
                .zip(self.budgets)
                .map(|(keys, &b)| format!("{keys} {:.2} MiB ({b} bytes)", b as f64 / MIB))
                .collect();
            facts.push(format!(
                "the elastic budget: {}: {}",
                rule.about,
                budgets.join(", ")
            ));
        }
        facts.push(format!(
            "grow: {} chunks of {} inserts (in the key set's order); shrink: {} chunks of as \
             many removes (in random order)",
            self.chunks,
            self.n / self.chunks,
            self.chunks
        ));
        facts.push(format!(
            "after each chunk: {} uniformly random lookups of present keys ({} of N) and {} \
             ascending scans of {} keys from random present keys ({} of N), then the memory: \
             bytes the index holds by the counting allocator once deferred frees have run, \
             and the index's own accounting where it has one",
            self.lookups(),
            d.lookup_fraction,
            self.scans(),
            d.scan_len,
            d.scan_fraction
        ));
        facts.push(format!(
            "threads: {}; repetitions: {} (interleaved index by index, each on a fresh index; \
             operation orders differ between repetitions), seed {}; throughputs are medians \
             [min-max], memory the median",
            d.threads, self.repeat, self.seed
        ));
        facts
    }

    /// The summary: per key set and index, the peak memory, the throughputs at the peak and
    /// over each phase, and the memory left when empty.
    fn summary(&self) -> String {
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(
            w,
            "At the peak ({} keys): memory (MiB and bytes per key; counting allocator), \
             lookups and {}-key scans. Insert and remove: the whole grow and shrink phases \
             at the chunks' median rates. Left: MiB the index still holds once every key is \
             removed. Medians of {} repetitions.\n",
            self.n, self.experiment.driver.scan_len, self.repeat
        );
        let _ = writeln!(
            w,
            "| keys | index | peak MiB | B/key | lookup Mops/s | scan M keys/s | insert Mops/s \
             | remove Mops/s | left MiB |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|");
        for &keys in self.experiment.keysets {
            for curve in self.curves_of(keys) {
                let Some(peak) = curve.peak() else { continue };
                let bytes = peak.bytes();
                let left = curve.steps.last().and_then(Step::bytes);
                let _ = writeln!(
                    w,
                    "| {keys} | `{}` | {} | {} | {} | {} | {} | {} | {} |",
                    curve.index,
                    fmt_opt(bytes.map(|b| b / MIB), 1),
                    fmt_opt(bytes.map(|b| b / peak.items.max(1) as f64), 1),
                    fmt_opt(peak.lookup.map(|s| s.median), 2),
                    fmt_opt(peak.scan.map(|s| s.median), 1),
                    fmt_opt(curve.phase_rate(Phase::Grow), 2),
                    fmt_opt(curve.phase_rate(Phase::Shrink), 2),
                    fmt_opt(left.map(|b| b / MIB), 2),
                );
            }
        }
        md
    }

    /// Our figures the paper's text can be held against: bytes per item at the peak of the
    /// B+-trees that play STX's part.
    fn ours_next_to_the_paper(&self) -> String {
        let mut md = String::new();
        let Some(&keys) = self
            .experiment
            .keysets
            .iter()
            .find(|k| k.key_len() == Some(8))
        else {
            return md;
        };
        let per_key: Vec<String> = self
            .curves_of(keys)
            .filter_map(|c| {
                let peak = c.peak()?;
                let b = peak.bytes()? / peak.items.max(1) as f64;
                Some(format!("`{}` {b:.1}", c.index))
            })
            .collect();
        if !per_key.is_empty() {
            let _ = writeln!(
                md,
                "\n**Ours, next to it** (this run, {keys}, {} keys at the peak; bytes per key \
                 by the counting allocator): {}. The throughput curves are in the plots below \
                 and in \"Results per step\"; this run's N is far below the paper's 100M, so \
                 compare shapes and ratios, not absolute rates.",
                self.n,
                per_key.join(", ")
            );
        }
        md
    }

    /// A table with a row per step and a column per index of `keys`.
    fn step_table(&self, keys: KeySetKind, cell: impl Fn(&Curve, &Step) -> String) -> String {
        let curves: Vec<&Curve> = self.curves_of(keys).collect();
        let mut md = String::new();
        let w = &mut md;
        let names: Vec<String> = curves.iter().map(|c| format!("`{}`", c.index)).collect();
        let _ = writeln!(w, "| step | phase | items | {} |", names.join(" | "));
        let _ = writeln!(w, "|{}", "---|".repeat(3 + curves.len()));
        for (i, (phase, items)) in self.steps().into_iter().enumerate() {
            let cells: Vec<String> = curves
                .iter()
                .map(|c| match (&c.status, c.steps.get(i)) {
                    (Status::Ok, Some(step)) => cell(c, step),
                    (Status::Skipped(_), _) => "skipped".to_string(),
                    (Status::Failed(_), _) => "FAILED".to_string(),
                    (Status::Ok, None) => "-".to_string(),
                })
                .collect();
            let _ = writeln!(
                w,
                "| {i} | {} | {items} | {} |",
                phase_name(phase),
                cells.join(" | ")
            );
        }
        md
    }

    fn tables(&self) -> String {
        let mut md = String::new();
        let w = &mut md;
        for (&keys, len) in self.experiment.keysets.iter().zip(self.key_lengths) {
            let _ = writeln!(
                w,
                "### {keys}: {} keys, {len:.1} bytes per key on average\n",
                self.n
            );
            let _ = writeln!(
                w,
                "Memory, MiB by the counting allocator (in parentheses: the index's own \
                 accounting):\n"
            );
            let _ = writeln!(
                w,
                "{}",
                self.step_table(keys, |_, s| {
                    let alloc = fmt_opt(s.bytes_alloc.map(|b| b / MIB), 2);
                    match s.bytes_self {
                        Some(own) => format!("{alloc} ({:.2})", own / MIB),
                        None => alloc,
                    }
                })
            );
            let _ = writeln!(
                w,
                "Lookups, Mops/s, median [min-max]:\n\n{}",
                self.step_table(keys, |_, s| fmt_summary(s.lookup))
            );
            let _ = writeln!(
                w,
                "Scans of {} keys, millions of keys visited per second:\n\n{}",
                self.experiment.driver.scan_len,
                self.step_table(keys, |_, s| fmt_summary(s.scan))
            );
            let _ = writeln!(
                w,
                "The chunk's inserts (grow) or removes (shrink), Mops/s:\n\n{}",
                self.step_table(keys, |_, s| fmt_summary(s.update))
            );
        }
        md
    }

    fn not_measured(&self) -> String {
        let mut md = String::new();
        for (index, why) in self.experiment.left_out {
            let _ = writeln!(md, "- `{index}`, every key set: left out: {why}.");
        }
        for curve in self.curves {
            let note = match &curve.status {
                Status::Ok => continue,
                Status::Skipped(reason) => format!("skipped: {reason}"),
                Status::Failed(problem) => format!("FAILED: {problem}"),
            };
            let _ = writeln!(md, "- `{}` on {}: {note}", curve.index, curve.keys);
        }
        md
    }

    /// Draws the five plots of `keys`; returns (what, file) of each.
    fn plot(
        &self,
        ctx: &ExperimentContext<'_>,
        keys: KeySetKind,
    ) -> Result<Vec<(String, String)>, String> {
        let steps = self.steps();
        let labels: Vec<String> = steps.iter().map(|&(_, items)| fmt_items(items)).collect();
        let in_phase = |phase: Phase| -> Vec<String> {
            steps
                .iter()
                .zip(&labels)
                .filter(|((p, _), _)| *p == phase)
                .map(|(_, l)| l.clone())
                .collect()
        };
        let (grow_labels, shrink_labels) = (in_phase(Phase::Grow), in_phase(Phase::Shrink));
        let both = "items in the index (grow, then shrink)";
        let memory_desc = if alloc::installed() {
            "MiB (counting allocator)"
        } else {
            "MiB (the index's own accounting)"
        };
        // Throughputs: medians with the repetitions' ranges as error bars; memory (the same
        // every repetition) has none.
        let memory = |s: &Step| s.bytes().map(|b| plots::Point::from(b / MIB));
        let lookup = |s: &Step| s.lookup.map(plots::Point::from);
        let scan = |s: &Step| s.scan.map(plots::Point::from);
        let update = |s: &Step| s.update.map(plots::Point::from);
        let plots = [
            PlotSpec {
                what: "memory",
                y_desc: memory_desc,
                x_desc: both,
                x_labels: &labels,
                phase: None,
                value: &memory,
            },
            PlotSpec {
                what: "lookup",
                y_desc: "lookups, Mops/s",
                x_desc: both,
                x_labels: &labels,
                phase: None,
                value: &lookup,
            },
            PlotSpec {
                what: "scan",
                y_desc: "scans, million keys visited/s",
                x_desc: both,
                x_labels: &labels,
                phase: None,
                value: &scan,
            },
            PlotSpec {
                what: "insert",
                y_desc: "inserts, Mops/s",
                x_desc: "items in the index after the chunk (grow)",
                x_labels: &grow_labels,
                phase: Some(Phase::Grow),
                value: &update,
            },
            PlotSpec {
                what: "remove",
                y_desc: "removes, Mops/s",
                x_desc: "items in the index after the chunk (shrink)",
                x_labels: &shrink_labels,
                phase: Some(Phase::Shrink),
                value: &update,
            },
        ];
        let mut files = Vec::new();
        for spec in plots {
            files.push(self.draw(ctx, keys, &spec)?);
        }
        Ok(files)
    }

    /// Draws one line plot of `keys` as `spec` says; returns (what it shows, file name).
    fn draw(
        &self,
        ctx: &ExperimentContext<'_>,
        keys: KeySetKind,
        spec: &PlotSpec<'_>,
    ) -> Result<(String, String), String> {
        let what = spec.what;
        let file = format!("{}-{what}.png", keys.name());
        let title = format!(
            "{}, {keys} ({} keys): {what} (median of {})",
            self.name, self.n, self.repeat
        );
        let series = self.series(keys, spec.phase, spec.value);
        let chart = LineChart {
            title: &title,
            x_desc: spec.x_desc,
            y_desc: spec.y_desc,
            x_labels: spec.x_labels,
            series: &series,
            phases: spec
                .phase
                .is_none()
                .then_some((self.chunks, "grow", "shrink")),
        };
        draw_lines(&ctx.out.join(&file), &chart).map_err(|e| format!("{file}: {e}"))?;
        Ok((format!("{keys}: {what}"), file))
    }

    /// One line per index of `keys`: `value` at every step (of `phase`, or all of them), its
    /// name marked when the index was skipped or failed.
    fn series(&self, keys: KeySetKind, phase: Option<Phase>, value: &StepValue<'_>) -> Vec<Series> {
        let steps = self.steps();
        self.curves_of(keys)
            .map(|c| {
                let name = match c.status {
                    Status::Ok => c.index.to_string(),
                    Status::Skipped(_) => format!("{} (skipped)", c.index),
                    Status::Failed(_) => format!("{} (FAILED)", c.index),
                };
                let values = steps
                    .iter()
                    .enumerate()
                    .filter(|(_, (p, _))| phase.is_none_or(|want| *p == want))
                    .map(|(i, _)| c.steps.get(i).and_then(value))
                    .collect();
                (name, values)
            })
            .collect()
    }
}

/// One line plot of a key set: what it shows, its axes, and the steps it covers (every step,
/// or one phase's).
struct PlotSpec<'a> {
    what: &'a str,
    y_desc: &'a str,
    x_desc: &'a str,
    x_labels: &'a [String],
    phase: Option<Phase>,
    value: &'a StepValue<'a>,
}

/// What a line plot of a key set shows of each step: a point, with the repetitions' range
/// where there is one.
type StepValue<'a> = dyn Fn(&Step) -> Option<plots::Point> + 'a;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repro::find;

    #[test]
    fn item_counts_are_short() {
        assert_eq!(fmt_items(0), "0");
        assert_eq!(fmt_items(250), "250");
        assert_eq!(fmt_items(100_000), "100K");
        assert_eq!(fmt_items(1_500), "1.5K");
        assert_eq!(fmt_items(1_000_000), "1M");
        assert_eq!(fmt_items(2_500_000), "2.5M");
    }

    #[test]
    fn runs_every_index_up_and_down_and_writes_rows_and_plots() {
        let dir = std::env::temp_dir().join(format!("elastree-gs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = ExperimentContext {
            experiment: find("grow-shrink").unwrap(),
            n: 2_000,
            repeat: 2,
            seed: 7,
            out: &dir,
        };
        let indexes = [
            IndexSpec::Elastree(elastree::IndexKind::BTree),
            IndexSpec::Peer(Peer::Congee),
            IndexSpec::Peer(Peer::Sorted),
        ];
        let experiment = GrowShrinkExperiment {
            indexes: &indexes,
            keysets: &[KeySetKind::Rand64, KeySetKind::Email],
            driver: GrowShrinkConfig {
                chunks: 4,
                ..GrowShrinkConfig::default()
            },
            left_out: &[],
            paper: Some("The paper says."),
            budget_rule: None,
            targets: None,
        };
        let report = experiment.run(&ctx).unwrap();
        assert_eq!(report.failures, 0);
        // 2 key sets x 5 plots, and the raw rows.
        assert_eq!(report.plots.len(), 10);
        for (_, file) in &report.plots {
            let bytes = std::fs::read(dir.join(file)).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{file}");
        }
        let jsonl = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
        let rows: Vec<serde_json::Value> = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // btree on both key sets and congee on rand64: 8 steps each; congee on email and
        // the sorted array (built in bulk) on both: one skipped row each.
        assert_eq!(rows.len(), 3 * 8 + 3);
        let skipped: Vec<&serde_json::Value> =
            rows.iter().filter(|r| r["status"] == "skipped").collect();
        assert_eq!(skipped.len(), 3);
        assert!(skipped.iter().all(|r| r["step"].is_null()));
        let btree: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| r["index"] == "btree" && r["keys"] == "rand64")
            .collect();
        let items: Vec<u64> = btree.iter().map(|r| r["items"].as_u64().unwrap()).collect();
        assert_eq!(items, [500, 1000, 1500, 2000, 1500, 1000, 500, 0]);
        assert_eq!(btree[0]["update"], "insert");
        assert_eq!(btree[7]["update"], "remove");
        assert!(btree[..7]
            .iter()
            .all(|r| r["lookup_mops_median"].as_f64().unwrap() > 0.0));
        assert!(
            btree[7]["lookup_mops_median"].is_null(),
            "nothing to look up"
        );
        // elastree accounts for its own memory: most at the peak.
        let own: Vec<f64> = btree
            .iter()
            .map(|r| r["bytes_self"].as_f64().unwrap())
            .collect();
        assert!(own[3] > own[0] && own[3] > own[7], "{own:?}");
        let first = rows[0].as_object().unwrap();
        let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
        let mut fields = FIELDS.to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields, "FIELDS lists exactly the JSON fields");
        let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
        assert_eq!(csv.lines().count(), rows.len() + 1);
        // The report: summary rows for what ran, the paper's section, per-step tables.
        assert!(report.summary.contains("| rand64 | `btree` |"));
        assert!(report.summary.contains("| email | `btree` |"));
        assert!(!report.summary.contains("| email | `congee` |"));
        let headings: Vec<&str> = report.sections.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(
            headings,
            [
                "Summary",
                "What the paper reports",
                "Results per step",
                "Not measured"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
