//! The experiments of the hybrid index (issue 5), after section 6 and appendices C-E of the
//! hybrid-index paper (Zhang et al., SIGMOD 2016) and past it:
//!
//! * `hybrid-static` (Figure 5): the static stage alone against the original: `btree` loaded
//!   by inserts vs a [`StaticStage`] built from the sorted keys, uncompressed (`static`) and
//!   LZ4-compressed (`static-lz4`): uniform and Zipfian lookups, memory;
//! * `hybrid-merge` (Figure 6): an insert-only load into `hybrid` (ratio 10, background
//!   merges), every merge's duration against the static stage's size;
//! * `hybrid-ycsb` (Figure 7 and Figure 13): `btree`, `hybrid` and `hybrid-compressed` as
//!   unique and non-unique (10 tids per key) indexes: insert-only (the load), read-only
//!   (YCSB C), read/write (YCSB A) and scan/insert (YCSB E), and memory after the load; each
//!   index is loaded once per key set and uniqueness, the repetitions are of the YCSB passes;
//! * `hybrid-ratio` (Figure 11): merge ratios 1 to 100 on `rand64` with blocking merges (the
//!   paper's, so the trigger rule alone places the merges): insert-only throughput, then
//!   read-only throughput with the dynamic stage half full; one load per ratio;
//! * `hybrid-latency` (past the paper; its Table 3): the latency of every operation of a
//!   mixed read/insert stream spanning several merges, blocking vs background merges, on one
//!   thread and with a reader and a writer thread.
//!
//! Every experiment drives the indexes through elastree's [`Index`] trait (the benchmark's
//! `BenchIndex` is unique-only and knows no merges), keeps one [`Cell`] of repetition values
//! per index, key set, uniqueness and measure, writes them as rows ([`Row`], fields
//! [`FIELDS`]) with the shared report writer, and ends with the targets of issue 5 it speaks
//! to, PASS or FAIL as computed from the run's numbers. Tid of key `i` is `i` (non-unique:
//! pair `r` of key `k` has tid `r * D + k`, D the number of distinct keys). Memory is the
//! index's own accounting (`Index::memory().total()`) and the counting allocator's figure,
//! both read after `Index::quiesce()` once deferred frees have run.
//!
//! At small scales the smallest merge shrinks with N ([`min_merge`]) so that merges happen;
//! from 1M keys up it is the library's default.

use std::fmt::Write as _;
use std::ops::Bound;
use std::time::Instant;

use elastree::hybrid::static_stage::{Compression, StaticOptions, StaticStage};
use elastree::hybrid::{HybridOptions, HybridStats, MergeMode, MergeRecord, MergeTrigger};
use elastree::{Direction, Index, IndexBuilder, IndexKind, KeyLen};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::document::{targets_table_of, Target};
use super::grow_shrink::fmt_items;
use super::plots::{draw_grouped_bars, draw_lines, plain, LineChart, Point, Series};
use super::variants::{fmt_ratio, ratio};
use super::{ExperimentContext, Report};
use crate::alloc;
use crate::dist::{ScrambledZipfian, DEFAULT_THETA};
use crate::keys::{Key, KeySet, KeySetKind, KeyWidth};
use crate::output::{fmt_opt, write_results};
use crate::report::Summary;
use crate::workload::settle_deferred_frees;
use crate::ycsb::{loaded_keys, Ycsb, YcsbOp, YcsbPlan, TID_MASK, VERSION_STEP};

/// Keys per key set at `--scale 1`, as issue 5 states its targets.
pub const BASE_N: usize = 10_000_000;

/// The fewest keys per key set.
pub const MIN_N: usize = 1_000;

/// The key sets: 8-byte random and increasing integers and ~30-byte e-mail addresses, as in
/// the paper.
pub const KEYSETS: &[KeySetKind] = &[KeySetKind::Rand64, KeySetKind::Mono64, KeySetKind::Email];

/// The indexes of `hybrid-ycsb`: the reference B+-tree and the two hybrid kinds.
pub const INDEXES: &[IndexKind] = &[
    IndexKind::BTree,
    IndexKind::Hybrid,
    IndexKind::HybridCompressed,
];

/// Tids per key of the non-unique (secondary) indexes, as in Appendix E.
pub const TIDS_PER_KEY: usize = 10;

/// The merge ratios of `hybrid-ratio`, as in Appendix C.
pub const RATIOS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0];

/// The library's default smallest merge (`HybridOptions::default().min_merge`).
const DEFAULT_MIN_MERGE: usize = 4096;

/// The smallest merge at `n` keys: the library's default (4096) from 1M keys up, `n / 256`
/// (at least 64) below, so that small runs merge too.
pub fn min_merge(n: usize) -> usize {
    DEFAULT_MIN_MERGE.min(n / 256).max(64)
}

/// The paper's hybrid options (ratio 10, merge everything, in the background) with the
/// smallest merge of [`min_merge`].
pub fn options(n: usize) -> HybridOptions {
    HybridOptions {
        min_merge: min_merge(n),
        ..HybridOptions::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements and rows
// ---------------------------------------------------------------------------------------------

/// The repetition values of one index (label), key set, uniqueness and measure.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The index as the report names it (`btree`, `static-lz4`, `hybrid r=5`, ...).
    pub index: String,
    /// The key set.
    pub keys: KeySetKind,
    /// Unique (`true`) or non-unique index.
    pub unique: bool,
    /// Pairs in the index when measured.
    pub pairs: usize,
    /// What was measured (`insert-only`, `lookup`, `own`, `p99 merging`, ...).
    pub measure: &'static str,
    /// Its unit (`Mops/s`, `B/pair`, `us`, ...).
    pub unit: &'static str,
    /// One value per repetition.
    pub values: Vec<f64>,
    /// What went wrong, if a repetition failed.
    pub failed: Option<String>,
}

/// Every cell of a run, in the order they were first measured.
#[derive(Debug, Clone, Default)]
pub struct Cells(pub Vec<Cell>);

/// Which cell: index label, key set, uniqueness, measure.
type At<'a> = (&'a str, KeySetKind, bool, &'static str);

impl Cells {
    /// Adds one repetition's `value` (or its failure) to the cell `at`.
    pub fn add(
        &mut self,
        at: At<'_>,
        unit: &'static str,
        pairs: usize,
        value: Result<f64, String>,
    ) {
        let (index, keys, unique, measure) = at;
        let cell = match self.0.iter().position(|c| {
            c.index == index && c.keys == keys && c.unique == unique && c.measure == measure
        }) {
            Some(i) => &mut self.0[i],
            None => {
                self.0.push(Cell {
                    index: index.to_string(),
                    keys,
                    unique,
                    pairs,
                    measure,
                    unit,
                    values: Vec::new(),
                    failed: None,
                });
                self.0.last_mut().expect("just pushed")
            }
        };
        match value {
            Ok(v) => cell.values.push(v),
            Err(problem) => {
                eprintln!("FAILED {index} {keys} {measure}: {problem}");
                cell.failed.get_or_insert(problem);
            }
        }
    }

    /// The cell `at`, if measured without failure.
    pub fn summary(&self, at: At<'_>) -> Option<Summary> {
        let (index, keys, unique, measure) = at;
        self.0
            .iter()
            .find(|c| {
                c.index == index && c.keys == keys && c.unique == unique && c.measure == measure
            })
            .filter(|c| c.failed.is_none())
            .and_then(|c| Summary::of(&c.values))
    }

    /// The cell `at` for a plot: its median with the repetitions' range as an error bar, or
    /// without a range for a memory figure (the same every repetition).
    pub fn point(&self, at: At<'_>) -> Option<Point> {
        let s = self.summary(at)?;
        Some(if is_memory(at.3) {
            Point::from(s.median)
        } else {
            Point::from(s)
        })
    }

    /// The median of the cell `at`.
    pub fn median(&self, at: At<'_>) -> Option<f64> {
        self.summary(at).map(|s| s.median)
    }

    /// Cells with a failed repetition.
    pub fn failures(&self) -> usize {
        self.0.iter().filter(|c| c.failed.is_some()).count()
    }
}

/// One raw row: a cell's median, minimum and maximum, or one merge of a load.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The experiment.
    pub experiment: &'static str,
    /// The index label.
    pub index: String,
    /// The key set.
    pub keys: &'static str,
    /// Unique index.
    pub unique: bool,
    /// Pairs in the index when measured.
    pub pairs: usize,
    /// What was measured (`merge` for a merge record).
    pub measure: String,
    /// The unit of the values.
    pub unit: &'static str,
    /// Median over the repetitions (a merge: its duration).
    pub value_median: Option<f64>,
    /// Minimum over the repetitions.
    pub value_min: Option<f64>,
    /// Maximum over the repetitions.
    pub value_max: Option<f64>,
    /// Repetitions (values) behind the row.
    pub samples: usize,
    /// A merge: the repetition it happened in (from 1).
    pub rep: Option<usize>,
    /// A merge: pairs in the static stage before it.
    pub static_before: Option<usize>,
    /// A merge: pairs in the static stage after it.
    pub static_after: Option<usize>,
    /// A merge: dynamic-stage entries it applied.
    pub merged: Option<usize>,
    /// A merge: when it started, in ms from the index's creation.
    pub started_ms: Option<f64>,
    /// `ok` or `failed`.
    pub status: &'static str,
    /// What went wrong.
    pub note: Option<String>,
}

/// The fields of [`Row`], in CSV column order.
pub const FIELDS: &[&str] = &[
    "experiment",
    "index",
    "keys",
    "unique",
    "pairs",
    "measure",
    "unit",
    "value_median",
    "value_min",
    "value_max",
    "samples",
    "rep",
    "static_before",
    "static_after",
    "merged",
    "started_ms",
    "status",
    "note",
];

impl Row {
    fn of_cell(experiment: &'static str, c: &Cell) -> Self {
        let s = Summary::of(&c.values).filter(|_| c.failed.is_none());
        Row {
            experiment,
            index: c.index.clone(),
            keys: c.keys.name(),
            unique: c.unique,
            pairs: c.pairs,
            measure: c.measure.to_string(),
            unit: c.unit,
            value_median: s.map(|s| s.median),
            value_min: s.map(|s| s.min),
            value_max: s.map(|s| s.max),
            samples: c.values.len(),
            rep: None,
            static_before: None,
            static_after: None,
            merged: None,
            started_ms: None,
            status: if c.failed.is_some() { "failed" } else { "ok" },
            note: c.failed.clone(),
        }
    }

    fn of_merge(experiment: &'static str, keys: KeySetKind, rep: usize, m: &MergeRecord) -> Self {
        let ms = m.duration.as_secs_f64() * 1e3;
        Row {
            experiment,
            index: "hybrid".to_string(),
            keys: keys.name(),
            unique: true,
            pairs: m.static_after,
            measure: "merge".to_string(),
            unit: "ms",
            value_median: Some(ms),
            value_min: Some(ms),
            value_max: Some(ms),
            samples: 1,
            rep: Some(rep + 1),
            static_before: Some(m.static_before),
            static_after: Some(m.static_after),
            merged: Some(m.merged),
            started_ms: Some(m.started.as_secs_f64() * 1e3),
            status: "ok",
            note: None,
        }
    }
}

/// What an experiment hands to [`finish`].
struct Written {
    /// The summary table (and how to read it), first in the report and in the README.
    summary: String,
    /// Sections after the summary: (heading, body).
    sections: Vec<(String, String)>,
    /// "What the paper reports" (the paper's numbers, then ours next to them).
    paper: String,
    /// The targets of issue 5 this experiment speaks to.
    targets: Vec<Target>,
    /// Lines of "What was run".
    facts: Vec<String>,
    /// Plots: (what, file).
    plots: Vec<(String, String)>,
}

/// Writes the rows and assembles the report of a finished experiment.
fn finish(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
    extra_rows: Vec<Row>,
    w: Written,
) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let mut rows: Vec<Row> = cells.0.iter().map(|c| Row::of_cell(name, c)).collect();
    rows.extend(extra_rows);
    let mut files = write_results(ctx.out, FIELDS, &rows)?;
    let table = targets_table_of(5, "N = 10M keys", &w.targets);
    let summary = format!("{}\n{table}", w.summary);
    let mut sections = vec![("Summary".to_string(), summary.clone())];
    sections.extend(w.sections);
    sections.push(("What the paper reports".to_string(), w.paper));
    sections.push(("Targets of issue 5".to_string(), table));
    files.extend(w.plots.iter().map(|(_, f)| f.clone()));
    Ok(Report {
        size: format!("{} keys per key set", ctx.n),
        facts: w.facts,
        sections,
        plots: w.plots,
        raw: format!(
            "`results.jsonl` (one JSON object per index x key set x uniqueness x measure, \
             with the median, minimum and maximum over the repetitions; `hybrid-merge` adds \
             one row per merge) and `results.csv` (the same fields: {}), documented in \
             `crates/elastree-bench/src/repro/hybrid.rs`.",
            FIELDS
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        files,
        summary,
        failures: cells.failures(),
    })
}

// ---------------------------------------------------------------------------------------------
// Driving an index
// ---------------------------------------------------------------------------------------------

/// Hands `key`'s bytes (8-byte keys big-endian) to `f` without allocating.
#[inline]
fn with_key<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
    match key {
        Key::U64(v) => f(&v.to_be_bytes()),
        Key::Bytes(b) => f(b),
    }
}

/// The key length an elastree index for `keys` is built with (as the benchmark builds them).
fn key_len_of(keys: KeySetKind) -> KeyLen {
    match keys.width() {
        KeyWidth::Fixed8 => KeyLen::Fixed(8),
        KeyWidth::Fixed16 => KeyLen::Fixed(16),
        KeyWidth::Variable => KeyLen::Variable,
    }
}

/// An empty index of `kind` for `keys`; the hybrid kinds get `options`.
fn build(
    kind: IndexKind,
    keys: KeySetKind,
    unique: bool,
    options: &HybridOptions,
) -> Result<Box<dyn Index>, String> {
    let builder = match kind {
        IndexKind::HybridCompressed => IndexBuilder::new(HybridOptions {
            compression: Compression::Lz4,
            ..options.clone()
        }),
        IndexKind::Hybrid => IndexBuilder::new(options.clone()),
        _ => IndexBuilder::new(kind),
    };
    let builder = builder.key_len(key_len_of(keys)).unique(unique);
    builder.build().map_err(|e| format!("building {kind}: {e}"))
}

/// An index after a timed load.
struct Loaded {
    index: Box<dyn Index>,
    /// When the index was created (merge records count from here): just after `build`.
    created: Instant,
    /// Seconds of the load, waiting for its last merge included.
    secs: f64,
    /// Pairs inserted.
    pairs: usize,
    /// The index's own accounting after the load.
    own: usize,
    /// The counting allocator's figure, if installed.
    alloc: Option<usize>,
}

impl Loaded {
    fn mops(&self) -> f64 {
        self.pairs as f64 / self.secs / 1e6
    }
}

/// What a load inserts: the first `loaded` keys of the key set, `per_key` tids each; pair `r`
/// of key `k` has tid `r * keys.len() + k`, inserted round by round (every key's first tid,
/// then every key's second, ...).
#[derive(Debug, Clone, Copy)]
struct LoadPlan {
    loaded: usize,
    per_key: usize,
}

/// Builds an index of `kind` and loads it by inserts on this thread, timed until its last
/// merge is done; then reads its memory (once deferred frees have run).
fn load(
    kind: IndexKind,
    keys: &KeySet,
    unique: bool,
    plan: LoadPlan,
    options: &HybridOptions,
) -> Result<Loaded, String> {
    settle_deferred_frees();
    let before = alloc::current();
    let index = build(kind, keys.kind, unique, options)?;
    // The hybrid index starts the clock of its merge records as the last step of its
    // construction, so the instant right after `build` returns is its origin to within the
    // boxing of the index (an instant taken before `build` would be early by the whole
    // construction: its stripes and Bloom filter, tens of microseconds).
    let created = Instant::now();
    let d = keys.len();
    let start = Instant::now();
    let mut unexpected = 0usize;
    for r in 0..plan.per_key {
        for k in 0..plan.loaded {
            let tid = (r * d + k) as u64;
            let old = with_key(keys.key(k), |b| index.insert(b, tid))
                .map_err(|e| format!("{kind} insert: {e}"))?;
            unexpected += usize::from(old.is_some());
        }
    }
    index.quiesce().map_err(|e| format!("{kind} merge: {e}"))?;
    let secs = start.elapsed().as_secs_f64();
    if unexpected > 0 {
        return Err(format!(
            "{kind}: {unexpected} inserts of new pairs found the pair present"
        ));
    }
    settle_deferred_frees();
    let alloc = alloc::installed().then(|| alloc::current().saturating_sub(before));
    let own = index.memory().total();
    Ok(Loaded {
        index,
        created,
        secs,
        pairs: plan.loaded * plan.per_key,
        own,
        alloc,
    })
}

/// Times `get` over the keys of `stream` (in lookup order, at key positions `positions`) and
/// returns Mops/s; every lookup must find a tid of its key (low 32 bits modulo `d` equal to
/// the position).
fn lookups(
    stream: &KeySet,
    positions: &[u32],
    d: usize,
    get: impl Fn(&[u8]) -> Option<u64>,
) -> Result<f64, String> {
    let start = Instant::now();
    let mut hits = 0usize;
    for (j, &p) in positions.iter().enumerate() {
        let found = with_key(stream.key(j), &get);
        hits += usize::from(found.is_some_and(|t| (t & TID_MASK) as usize % d == p as usize));
    }
    let secs = start.elapsed().as_secs_f64();
    if hits != positions.len() {
        return Err(format!(
            "{} of {} lookups of present keys missed or returned a wrong tid",
            positions.len() - hits,
            positions.len()
        ));
    }
    Ok(positions.len() as f64 / secs / 1e6)
}

/// `len` uniformly random positions below `n`.
fn uniform_positions(n: usize, len: usize, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x756e_6966);
    (0..len).map(|_| rng.gen_range(0..n as u32)).collect()
}

/// `len` scrambled-Zipfian (theta 0.99) positions below `n`.
fn zipf_positions(n: usize, len: usize, seed: u64) -> Vec<u32> {
    ScrambledZipfian::new(n as u64, DEFAULT_THETA, seed)
        .expect("theta 0.99 over a non-empty key set")
        .positions(len, seed ^ 0x7a69_7066)
}

/// Bytes per pair.
fn per_pair(bytes: usize, pairs: usize) -> f64 {
    bytes as f64 / pairs.max(1) as f64
}

/// `v (ratio to reference)`, or `-`.
fn with_ratio(v: Option<f64>, reference: Option<f64>, decimals: usize) -> String {
    v.map_or_else(
        || "-".to_string(),
        |v| format!("{v:.decimals$} ({})", fmt_ratio(ratio(Some(v), reference))),
    )
}

/// A target met when every named ratio is known and `holds`.
fn all_hold(
    target: String,
    ratios: &[(String, Option<f64>)],
    holds: impl Fn(f64) -> bool,
) -> Target {
    let known: Vec<f64> = ratios.iter().filter_map(|(_, r)| *r).collect();
    Target {
        target,
        ours: ratios
            .iter()
            .map(|(what, r)| format!("{what} {}", fmt_ratio(*r)))
            .collect::<Vec<_>>()
            .join(", "),
        pass: (known.len() == ratios.len() && !known.is_empty())
            .then(|| known.iter().all(|&r| holds(r))),
    }
}

/// Draws a grouped bar chart `file` (key sets as groups, `labels` as bars) of `measure` (see
/// [`Cells::point`]) and adds it to `plots`.
#[allow(clippy::too_many_arguments)]
fn bars(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
    plots: &mut Vec<(String, String)>,
    file: String,
    title: String,
    labels: &[&str],
    unique: bool,
    measure: &'static str,
) -> Result<(), String> {
    let categories: Vec<&str> = KEYSETS.iter().map(|k| k.name()).collect();
    let series: Vec<Series> = labels
        .iter()
        .map(|&label| {
            let values = KEYSETS
                .iter()
                .map(|&keys| cells.point((label, keys, unique, measure)))
                .collect();
            (label.to_string(), values)
        })
        .collect();
    draw_grouped_bars(&ctx.out.join(&file), &title, &categories, &series)
        .map_err(|e| format!("{file}: {e}"))?;
    plots.push((title, file));
    Ok(())
}

/// Draws `chart` into `file` in the output directory and adds it to `plots` under its title.
fn line_plot(
    ctx: &ExperimentContext<'_>,
    plots: &mut Vec<(String, String)>,
    file: String,
    chart: &LineChart<'_>,
) -> Result<(), String> {
    draw_lines(&ctx.out.join(&file), chart).map_err(|e| format!("{file}: {e}"))?;
    plots.push((chart.title.to_string(), file));
    Ok(())
}

/// Whether `measure` is a memory figure (measured once per load, the same every repetition).
fn is_memory(measure: &str) -> bool {
    measure == OWN || measure == ALLOC
}

// Measure names.
const INSERT_ONLY: &str = "insert-only";
const READ_ONLY: &str = "read-only";
const READ_WRITE: &str = "read/write";
const SCAN_INSERT: &str = "scan/insert";
const LOOKUP: &str = "lookup";
const LOOKUP_ZIPF: &str = "lookup-zipf";
const OWN: &str = "own";
const ALLOC: &str = "alloc";
const MOPS: &str = "Mops/s";
const B_PAIR: &str = "B/pair";

/// Records a load's throughput and memory in `cells`.
fn record_load(cells: &mut Cells, label: &str, keys: KeySetKind, unique: bool, l: &Loaded) {
    cells.add(
        (label, keys, unique, INSERT_ONLY),
        MOPS,
        l.pairs,
        Ok(l.mops()),
    );
    cells.add(
        (label, keys, unique, OWN),
        B_PAIR,
        l.pairs,
        Ok(per_pair(l.own, l.pairs)),
    );
    if let Some(bytes) = l.alloc {
        cells.add(
            (label, keys, unique, ALLOC),
            B_PAIR,
            l.pairs,
            Ok(per_pair(bytes, l.pairs)),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// hybrid-static
// ---------------------------------------------------------------------------------------------

/// Lookups per pass of `hybrid-static`, as a fraction of N (each of the uniform and Zipfian
/// passes, per structure and repetition).
pub const STATIC_LOOKUP_FRACTION: f64 = 0.1;

/// The structures of `hybrid-static`.
const STATIC_LABELS: &[&str] = &["btree", "static", "static-lz4"];

/// What the paper reports for Figure 5 (section 6.2).
pub const PAPER_FIGURE_5: &str = "\
Section 6.2, Figure 5 (from the text; the figure's bars are not in our extraction):

- Setup: the read-only workload (YCSB C, Zipfian) on 50 million entries after loading, 10 \
  million queries, 64-bit random and monotonically increasing integers and e-mail keys \
  (30 bytes on average), average of three trials; the compact structures alone, without \
  merging.
- Throughput: the compact indexes read up to 20% faster than their originals in most cases \
  (Compact ART is the exception: 4% slower on random integers, 1% on e-mail).
- Memory: the compact indexes are up to 71% smaller, more than 30% smaller in all but one \
  case; B+-tree and skip-list nodes are 69% full on average (ART 54%).
- Compression (Snappy, B+-tree only): 24% (mono-inc) and 31% (e-mail) further savings at \
  18-34% lower throughput; the paper concludes naive compression is a poor choice.
";

/// One structure of `hybrid-static`.
enum Structure {
    Tree(Box<dyn Index>),
    Static(StaticStage),
}

impl Structure {
    #[inline]
    fn get(&self, key: &[u8]) -> Option<u64> {
        match self {
            Structure::Tree(index) => index.get(key).ok().flatten(),
            Structure::Static(stage) => stage.get(key),
        }
    }
}

/// Builds a static stage from every key of `keys` in key order (tid = position) and returns
/// it with its own and allocated bytes.
fn build_static(
    keys: &KeySet,
    sorted: &[u32],
    compression: Compression,
) -> Result<(StaticStage, usize, Option<usize>), String> {
    settle_deferred_frees();
    let before = alloc::current();
    let mut options = StaticOptions::new(true, key_len_of(keys.kind));
    options.compression = compression;
    let mut pairs = sorted.iter().map(|&i| {
        let mut key = Vec::new();
        keys.key_bytes(i as usize, &mut key);
        (key, u64::from(i))
    });
    let stage = StaticStage::build(options, &mut pairs)
        .map_err(|e| format!("building the static stage: {e}"))?;
    settle_deferred_frees();
    let alloc = alloc::installed().then(|| alloc::current().saturating_sub(before));
    let own = stage.memory().total();
    Ok((stage, own, alloc))
}

/// `hybrid-static`.
pub(super) fn run_static(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let n = ctx.n;
    let ops = ((n as f64 * STATIC_LOOKUP_FRACTION) as usize).max(1);
    let mut cells = Cells::default();
    for &kind in KEYSETS {
        eprintln!("{name}: {kind}: generating {n} keys and the lookup streams");
        let keys = kind.generate(n, ctx.seed);
        let sorted = keys.sorted_order();
        let uniform = uniform_positions(n, ops, ctx.seed);
        let zipf = zipf_positions(n, ops, ctx.seed);
        let (uniform_keys, zipf_keys) = (keys.gather(&uniform), keys.gather(&zipf));
        let mut structures: Vec<(&str, Structure)> = Vec::new();
        eprintln!("{name}: {kind}: loading btree, building the static stages");
        let tree = load(
            IndexKind::BTree,
            &keys,
            true,
            LoadPlan {
                loaded: n,
                per_key: 1,
            },
            &options(n),
        );
        match tree {
            Ok(l) => {
                record_load(&mut cells, "btree", kind, true, &l);
                structures.push(("btree", Structure::Tree(l.index)));
            }
            Err(e) => cells.add(("btree", kind, true, OWN), B_PAIR, n, Err(e)),
        }
        for (label, compression) in [
            ("static", Compression::None),
            ("static-lz4", Compression::Lz4),
        ] {
            let started = Instant::now();
            match build_static(&keys, &sorted, compression) {
                Ok((stage, own, alloc)) => {
                    let secs = started.elapsed().as_secs_f64();
                    cells.add(
                        (label, kind, true, "build"),
                        MOPS,
                        n,
                        Ok(n as f64 / secs / 1e6),
                    );
                    cells.add((label, kind, true, OWN), B_PAIR, n, Ok(per_pair(own, n)));
                    if let Some(a) = alloc {
                        cells.add((label, kind, true, ALLOC), B_PAIR, n, Ok(per_pair(a, n)));
                    }
                    structures.push((label, Structure::Static(stage)));
                }
                Err(e) => cells.add((label, kind, true, OWN), B_PAIR, n, Err(e)),
            }
        }
        // Repetitions interleave the structures, so a slow spell of a shared machine lands on
        // all of them alike.
        for rep in 0..ctx.repeat {
            for (label, s) in &structures {
                for (measure, stream, positions) in [
                    (LOOKUP, &uniform_keys, &uniform),
                    (LOOKUP_ZIPF, &zipf_keys, &zipf),
                ] {
                    let mops = lookups(stream, positions, n, |k| s.get(k));
                    cells.add((label, kind, true, measure), MOPS, n, mops);
                }
            }
            eprintln!("{name}: {kind}: repetition {}/{}", rep + 1, ctx.repeat);
        }
    }

    let mut plots = Vec::new();
    for (measure, what, unit) in [
        (LOOKUP, "uniform lookups", MOPS),
        (LOOKUP_ZIPF, "Zipfian lookups", MOPS),
        (OWN, "memory (own accounting)", B_PAIR),
    ] {
        bars(
            ctx,
            &cells,
            &mut plots,
            format!("{}.png", measure),
            format!("{name}: {what} ({unit}), n={n}"),
            STATIC_LABELS,
            true,
            measure,
        )?;
    }

    let cell = |label: &str, keys, measure| cells.median((label, keys, true, measure));
    let mut summary = format!(
        "{n} keys per key set; medians of {} repetitions of {ops} lookups each (Mops/s), in \
         parentheses the ratio to `btree`; memory in bytes per key by the structure's own \
         accounting (alloc: the counting allocator). `btree` is loaded by inserts, `static` \
         and `static-lz4` are built from the sorted keys; `built`: million keys per second \
         of that load or build (one run).\n\n\
         | keys | structure | lookup | lookup-zipf | own B/key | alloc B/key | built |\n\
         |---|---|---|---|---|---|---|\n",
        ctx.repeat
    );
    for &keys in KEYSETS {
        for &label in STATIC_LABELS {
            let _ = writeln!(
                summary,
                "| {keys} | `{label}` | {} | {} | {} | {} | {} |",
                with_ratio(cell(label, keys, LOOKUP), cell("btree", keys, LOOKUP), 2),
                with_ratio(
                    cell(label, keys, LOOKUP_ZIPF),
                    cell("btree", keys, LOOKUP_ZIPF),
                    2
                ),
                with_ratio(cell(label, keys, OWN), cell("btree", keys, OWN), 1),
                fmt_opt(cell(label, keys, ALLOC), 1),
                fmt_opt(
                    cell(label, keys, "build").or(cell(label, keys, INSERT_ONLY)),
                    2
                ),
            );
        }
    }

    let vs = |label: &str, keys, measure| {
        ratio(cell(label, keys, measure), cell("btree", keys, measure))
    };
    let per_keyset = |label: &'static str, measure| -> Vec<(String, Option<f64>)> {
        KEYSETS
            .iter()
            .map(|&k| (k.name().to_string(), vs(label, k, measure)))
            .collect()
    };
    let targets = vec![
        all_hold(
            "unique memory at most 0.5x `btree` on every key set: the static stage alone \
             (`static`), the floor the hybrid index approaches"
                .to_string(),
            &per_keyset("static", OWN),
            |r| r <= 0.5,
        ),
        Target::check(
            "`hybrid-compressed` at least 20% below `hybrid` on email: the static stage alone \
             (`static-lz4` over `static`)",
            ratio(
                cell("static-lz4", KeySetKind::Email, OWN),
                cell("static", KeySetKind::Email, OWN),
            ),
            |r| r <= 0.8,
            |r| format!("{r:.2}x"),
        ),
        all_hold(
            "read-only at least 0.9x `btree`: the static stage alone (`static`), Zipfian \
             lookups"
                .to_string(),
            &per_keyset("static", LOOKUP_ZIPF),
            |r| r >= 0.9,
        ),
        all_hold(
            "read-only at least 0.9x `btree`: the static stage alone (`static`), uniform \
             lookups"
                .to_string(),
            &per_keyset("static", LOOKUP),
            |r| r >= 0.9,
        ),
    ];
    let paper = format!(
        "{}\n**Ours, next to it** (this run, {n} keys): `static` over `btree`: memory {}; \
         uniform lookups {}. `static-lz4` over `static`: memory {}; uniform lookups {}.\n",
        PAPER_FIGURE_5.trim_end(),
        ratios_text(&|k| vs("static", k, OWN)),
        ratios_text(&|k| vs("static", k, LOOKUP)),
        ratios_text(&|k| ratio(cell("static-lz4", k, OWN), cell("static", k, OWN))),
        ratios_text(&|k| ratio(cell("static-lz4", k, LOOKUP), cell("static", k, LOOKUP))),
    );
    let facts = vec![
        format!(
            "structures: `btree` (elastree's B+-tree, loaded by inserts in the key set's \
             order), `static` (the hybrid index's static stage, `StaticStage::build` from the \
             sorted keys), `static-lz4` (the same with LZ4-compressed leaf blocks and the \
             default cache of {} blocks)",
            HybridOptions::default().cache_blocks
        ),
        format!(
            "key sets: {}, {n} keys each; tid of key i = i",
            KEYSETS
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "lookups: {ops} uniformly random and {ops} scrambled-Zipfian (theta 0.99) lookups \
             of present keys per structure and repetition; one thread"
        ),
        format!(
            "repetitions: {} (interleaved structure by structure over one build of each), \
             seed {}; memory after the build, once deferred frees have run",
            ctx.repeat, ctx.seed
        ),
    ];
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary,
            sections: Vec::new(),
            paper,
            targets,
            facts,
            plots,
        },
    )
}

/// `rand64 0.42x, mono64 0.40x, email 0.45x` for a ratio per key set.
fn ratios_text(of: &dyn Fn(KeySetKind) -> Option<f64>) -> String {
    KEYSETS
        .iter()
        .map(|&k| format!("{k} {}", fmt_ratio(of(k))))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// hybrid-merge
// ---------------------------------------------------------------------------------------------

/// What the paper reports for Figure 6 (section 6.3).
pub const PAPER_FIGURE_6: &str = "\
Section 6.3, Figure 6 (from the text; the figure's curves are not in our extraction):

- Setup: the insert-only workload (the highest merge demand), the default ratio-based \
  trigger with ratio 10 (the dynamic stage is 1/10 of the static stage at each merge), every \
  merge's absolute time recorded with the static stage's size, for all four hybrid indexes \
  and the three key types.
- Merge time grows linearly with the size of the index (\"inevitable because of the \
  fundamental limitations of merging sorted arrays\"); merges get rarer as the index grows, \
  so the amortized cost stays constant. Hybrid ART on mono-inc keys merges much faster (it \
  rebuilds only a few nodes).
";

/// Merges at least this fraction of N in static size count for linearity (1M at 10M keys).
pub const LINEAR_FROM_FRACTION: usize = 10;

/// Our reading of "merge time linear in the static size": the largest merge's time per
/// static entry at most this multiple of the smallest counted merge's.
pub const LINEAR_MAX_RATIO: f64 = 1.5;

/// Nanoseconds per static entry (after the merge) of a merge.
fn ns_per_entry(m: &MergeRecord) -> f64 {
    m.duration.as_secs_f64() * 1e9 / m.static_after.max(1) as f64
}

/// Of the merges with at least `from` static entries before them: the largest's ns/entry over
/// the smallest's.
fn linearity(records: &[MergeRecord], from: usize) -> Option<f64> {
    let big: Vec<&MergeRecord> = records.iter().filter(|m| m.static_before >= from).collect();
    let smallest = big.iter().min_by_key(|m| m.static_before)?;
    let largest = big.iter().max_by_key(|m| m.static_before)?;
    (big.len() >= 2).then(|| ns_per_entry(largest) / ns_per_entry(smallest))
}

/// `hybrid-merge`.
pub(super) fn run_merge(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let n = ctx.n;
    let from = n / LINEAR_FROM_FRACTION;
    let opts = options(n);
    let mut cells = Cells::default();
    let mut merges: Vec<(KeySetKind, Vec<Vec<MergeRecord>>)> = Vec::new();
    let mut extra = Vec::new();
    for &kind in KEYSETS {
        eprintln!("{name}: {kind}: generating {n} keys");
        let keys = kind.generate(n, ctx.seed);
        let mut runs = Vec::new();
        for rep in 0..ctx.repeat {
            let plan = LoadPlan {
                loaded: n,
                per_key: 1,
            };
            match load(IndexKind::Hybrid, &keys, true, plan, &opts) {
                Ok(l) => {
                    record_load(&mut cells, "hybrid", kind, true, &l);
                    let stats = l.index.stats_as::<HybridStats>().unwrap_or_default();
                    let at = |m| ("hybrid", kind, true, m);
                    cells.add(at("merges"), "count", n, Ok(stats.merges as f64));
                    cells.add(
                        at("merge share"),
                        "%",
                        n,
                        Ok(100.0 * stats.merge_time.as_secs_f64() / l.secs),
                    );
                    if let Some(big) = stats.records.iter().max_by_key(|m| m.static_before) {
                        cells.add(
                            at("largest merge"),
                            "ms",
                            n,
                            Ok(big.duration.as_secs_f64() * 1e3),
                        );
                        cells.add(at("largest ns/entry"), "ns", n, Ok(ns_per_entry(big)));
                    }
                    if let Some(r) = linearity(&stats.records, from) {
                        cells.add(at("linearity"), "x", n, Ok(r));
                    }
                    extra.extend(
                        stats
                            .records
                            .iter()
                            .map(|m| Row::of_merge(name, kind, rep, m)),
                    );
                    eprintln!(
                        "{name}: {kind} repetition {}/{}: {:.1} s, {} merges",
                        rep + 1,
                        ctx.repeat,
                        l.secs,
                        stats.merges
                    );
                    runs.push(stats.records);
                }
                Err(e) => cells.add(("hybrid", kind, true, INSERT_ONLY), MOPS, n, Err(e)),
            }
        }
        merges.push((kind, runs));
    }

    let mut plots = Vec::new();
    for (kind, runs) in &merges {
        let Some(first) = runs.first() else { continue };
        let labels: Vec<String> = first.iter().map(|m| fmt_items(m.static_before)).collect();
        let series: Vec<Series> = runs
            .iter()
            .enumerate()
            .map(|(rep, records)| {
                // One line per repetition, each merge measured once: no error bars.
                let values = (0..first.len())
                    .map(|i| records.get(i).map(|m| m.duration.as_secs_f64() * 1e3));
                plain(format!("repetition {}", rep + 1), values)
            })
            .collect();
        let file = format!("merge-{kind}.png");
        let title = format!("{name}: merge time (ms) vs static size before the merge, {kind}");
        let chart = LineChart {
            title: &title,
            x_desc: "static stage entries before the merge (repetition 1's merges, in order)",
            y_desc: "merge time (ms)",
            x_labels: &labels,
            series: &series,
            phases: None,
        };
        line_plot(ctx, &mut plots, file, &chart)?;
    }
    {
        let longest = merges
            .iter()
            .filter_map(|(_, runs)| runs.first().map(Vec::len))
            .max()
            .unwrap_or(0);
        let labels: Vec<String> = (1..=longest).map(|i| i.to_string()).collect();
        let series: Vec<Series> = merges
            .iter()
            .filter_map(|(kind, runs)| {
                let first = runs.first()?;
                let values = (0..longest).map(|i| first.get(i).map(ns_per_entry));
                Some(plain(kind.name().to_string(), values))
            })
            .collect();
        let file = "merge-ns-per-entry.png".to_string();
        let title = format!("{name}: merge time per static entry (ns), repetition 1");
        let chart = LineChart {
            title: &title,
            x_desc: "merge number",
            y_desc: "ns per static entry",
            x_labels: &labels,
            series: &series,
            phases: None,
        };
        line_plot(ctx, &mut plots, file, &chart)?;
    }

    let cell = |keys, measure| cells.median(("hybrid", keys, true, measure));
    let mut summary = format!(
        "Insert-only loads of {n} keys into `hybrid` (ratio 10, background merges); medians of \
         {} repetitions. Linearity: the time per static entry of the largest merge over that \
         of the smallest merge with at least {} static entries (1.00 = exactly linear).\n\n\
         | keys | merges | largest merge ms | its ns/entry | linearity | merge time / load | \
         insert-only Mops/s | own B/key |\n|---|---|---|---|---|---|---|---|\n",
        ctx.repeat,
        fmt_items(from)
    );
    for &keys in KEYSETS {
        let _ = writeln!(
            summary,
            "| {keys} | {} | {} | {} | {} | {}% | {} | {} |",
            fmt_opt(cell(keys, "merges"), 0),
            fmt_opt(cell(keys, "largest merge"), 1),
            fmt_opt(cell(keys, "largest ns/entry"), 1),
            fmt_opt(cell(keys, "linearity"), 2),
            fmt_opt(cell(keys, "merge share"), 0),
            fmt_opt(cell(keys, INSERT_ONLY), 2),
            fmt_opt(cell(keys, OWN), 1),
        );
    }
    let mut per_merge = String::new();
    for (kind, runs) in &merges {
        let Some(first) = runs.first() else { continue };
        let _ = writeln!(
            per_merge,
            "### {kind} (repetition 1)\n\n| # | static before | merged | static after | \
             started s | ms | ns/entry |\n|---|---|---|---|---|---|---|"
        );
        for (i, m) in first.iter().enumerate() {
            let _ = writeln!(
                per_merge,
                "| {} | {} | {} | {} | {:.2} | {:.1} | {:.1} |",
                i + 1,
                m.static_before,
                m.merged,
                m.static_after,
                m.started.as_secs_f64(),
                m.duration.as_secs_f64() * 1e3,
                ns_per_entry(m)
            );
        }
        per_merge.push('\n');
    }
    let targets = vec![all_hold(
        format!(
            "merge time linear in the static stage's size (ours: time per entry of the largest \
             merge at most {LINEAR_MAX_RATIO}x that of the smallest merge with at least {} \
             static entries)",
            fmt_items(from)
        ),
        &KEYSETS
            .iter()
            .map(|&k| (k.name().to_string(), cell(k, "linearity")))
            .collect::<Vec<_>>(),
        |r| r <= LINEAR_MAX_RATIO,
    )];
    let paper = format!(
        "{}\n**Ours, next to it** (this run, {n} keys): time per entry of the largest merge \
         over the smallest one from {} entries: {}; largest merge: {}.\n",
        PAPER_FIGURE_6.trim_end(),
        fmt_items(from),
        ratios_text(&|k| cell(k, "linearity")),
        KEYSETS
            .iter()
            .map(|&k| format!("{k} {} ms", fmt_opt(cell(k, "largest merge"), 1)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let facts = vec![
        format!(
            "index: `hybrid`, merge ratio 10, merge everything, background merges, smallest \
             merge {} entries; insert-only load of every key in the key set's order, one \
             thread, timed until the last merge is done",
            opts.min_merge
        ),
        format!(
            "key sets: {}, {n} keys each",
            KEYSETS
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "merge records: `HybridIndex::stats().records` (static size before and after, \
             entries merged, start and wall time of each merge); repetitions: {}, seed {}",
            ctx.repeat, ctx.seed
        ),
    ];
    finish(
        ctx,
        &cells,
        extra,
        Written {
            summary,
            sections: vec![("Every merge".to_string(), per_merge)],
            paper,
            targets,
            facts,
            plots,
        },
    )
}

// ---------------------------------------------------------------------------------------------
// hybrid-ycsb
// ---------------------------------------------------------------------------------------------

/// Operations of each read-only and read/write pass, as a fraction of N (capped at the YCSB
/// stream's length, the loaded distinct keys).
pub const YCSB_OPS_FRACTION: f64 = 0.05;

/// Operations of each scan/insert pass, as a fraction of N (capped likewise).
pub const YCSB_SCAN_OPS_FRACTION: f64 = 0.005;

/// The YCSB workloads after the load, with their names in the report.
const YCSB_RUNS: &[(Ycsb, &str)] = &[
    (Ycsb::C, READ_ONLY),
    (Ycsb::A, READ_WRITE),
    (Ycsb::E, SCAN_INSERT),
];

/// Every measure of `hybrid-ycsb`'s throughput table, in order.
const YCSB_MEASURES: &[&str] = &[INSERT_ONLY, READ_ONLY, READ_WRITE, SCAN_INSERT];

/// What the paper reports for Figures 7 and 13 (section 6.4, Appendix E).
pub const PAPER_FIGURE_7: &str = "\
Section 6.4 and Appendix E, Figures 7 and 13 (from the text; the bars are not in our \
extraction):

- Setup: YCSB insert-only (the load of 50 million entries, timed), read-only (C), \
  read/write (A, 50/50) and scan/insert (E, 95/5), Zipfian, 10 million operations after the \
  load; 64-bit random and mono-inc integers and e-mail keys; 64-bit values; one thread; \
  memory at the end of each trial; averages of three trials. Secondary indexes: 10 values per \
  key, 64-bit random integers, hybrid B+-tree only (Figure 13).
- Primary: the hybrid indexes' throughput is comparable (faster on some workloads, slower \
  on others) while they use 30-70% less memory; Hybrid-Compressed B+-tree saves up to 30% \
  more but loses a significant fraction of the throughput.
- Insert-only: every hybrid index is slower than its original, mainly because of the \
  uniqueness check in both stages: about a 30% insert throughput drop.
- Read/write: every hybrid index beats its original on every key type (updated entries sit \
  in the small dynamic stage).
- Read-only: slightly slower than the static stage alone; the Bloom filter keeps most reads \
  to one stage.
- Scan/insert: the hybrid indexes are slower (each step compares keys of both stages).
- Memory: B+-tree nodes are about 50% full on mono-inc keys (69% on average).
- Secondary (Appendix E): the insert gap shrinks (no uniqueness check); the hybrid B+-tree \
  loses its large read/write advantage (updates in place); the memory savings are larger \
  (the B+-tree stores duplicate keys, the compact one does not).
";

/// One pass of a YCSB stream: operations `range` of `plan` (their keys in `stream`, in
/// operation order).
struct Pass<'a> {
    plan: &'a YcsbPlan,
    stream: &'a KeySet,
    range: std::ops::Range<usize>,
}

/// Times `pass` on `index`, waiting for its merges at the end, and returns Mops/s.
/// `current` holds the tid to update of each distinct key (`d` of them); reads must find a
/// tid of their key.
fn run_ycsb_ops(
    index: &dyn Index,
    pass: &Pass<'_>,
    d: usize,
    current: &mut [u64],
) -> Result<f64, String> {
    let unique = index.is_unique();
    let (plan, stream, range) = (pass.plan, pass.stream, pass.range.clone());
    let count = range.len();
    let start = Instant::now();
    let mut wrong = 0usize;
    let err = |e: elastree::Error| format!("{}: {e}", index.kind());
    for j in range {
        let (op, p) = (plan.ops[j], plan.positions[j] as usize);
        let ok = with_key(stream.key(j), |key| -> Result<bool, String> {
            Ok(match op {
                YcsbOp::Read => index
                    .get(key)
                    .map_err(err)?
                    .is_some_and(|t| (t & TID_MASK) as usize % d == p),
                YcsbOp::Update => {
                    let old = current[p];
                    let new = old + VERSION_STEP;
                    current[p] = new;
                    if unique {
                        index.insert(key, new).map_err(err)? == Some(old)
                    } else {
                        index.remove_pair(key, old).map_err(err)?
                            && index.insert(key, new).map_err(err)?.is_none()
                    }
                }
                YcsbOp::Insert => index.insert(key, p as u64).map_err(err)?.is_none(),
                YcsbOp::Scan(len) => {
                    let visited = index
                        .scan(
                            Bound::Included(key),
                            Bound::Unbounded,
                            Direction::Ascending,
                            usize::from(len),
                            &mut |_, _| {},
                        )
                        .map_err(err)?;
                    visited >= 1
                }
                YcsbOp::ReadModifyWrite => return Err("not in these workloads".to_string()),
            })
        })?;
        wrong += usize::from(!ok);
    }
    index.quiesce().map_err(err)?;
    let secs = start.elapsed().as_secs_f64();
    if wrong > 0 {
        return Err(format!(
            "{wrong} of {count} operations returned a wrong result"
        ));
    }
    Ok(count as f64 / secs / 1e6)
}

/// The first `ops` operations of `workload`'s YCSB plan over `keys`, with their keys.
fn ycsb_stream(workload: Ycsb, keys: &KeySet, ops: usize, seed: u64) -> (YcsbPlan, KeySet) {
    let mut plan = YcsbPlan::generate(workload, keys.len(), 1, seed);
    let ops = ops.clamp(1, plan.ops.len());
    plan.ops.truncate(ops);
    plan.positions.truncate(ops);
    let stream = keys.gather(&plan.positions);
    (plan, stream)
}

/// The label of a uniqueness in tables.
fn uniqueness(unique: bool) -> &'static str {
    if unique {
        "unique"
    } else {
        "non-unique"
    }
}

/// `hybrid-ycsb`.
pub(super) fn run_ycsb(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let n = ctx.n;
    let opts = options(n);
    let ops = ((n as f64 * YCSB_OPS_FRACTION) as usize).max(1);
    let scan_ops = ((n as f64 * YCSB_SCAN_OPS_FRACTION) as usize).max(1);
    let mut cells = Cells::default();
    let mut shapes = Vec::new();
    let progress =
        crate::cli::progress_bar((KEYSETS.len() * 2 * (ctx.repeat + 1) * INDEXES.len()) as u64);
    for &kind in KEYSETS {
        for unique in [true, false] {
            let per_key = if unique { 1 } else { TIDS_PER_KEY };
            let d = (n / per_key).max(2);
            progress.suspend(|| {
                eprintln!(
                    "{name}: {kind} {}: generating {d} keys and the YCSB streams",
                    uniqueness(unique)
                );
            });
            let keys = kind.generate(d, ctx.seed);
            let plan = LoadPlan {
                loaded: loaded_keys(d),
                per_key,
            };
            let pairs = plan.loaded * per_key;
            // One stream per workload, long enough for every repetition; repetition `r`
            // runs its `r`-th chunk, so updates and inserts never repeat.
            let streams: Vec<(&str, YcsbPlan, KeySet)> = YCSB_RUNS
                .iter()
                .map(|&(w, label)| {
                    let count = if w == Ycsb::E { scan_ops } else { ops };
                    let (p, s) = ycsb_stream(w, &keys, count * ctx.repeat, ctx.seed);
                    (label, p, s)
                })
                .collect();
            let chunk =
                |len: usize, rep: usize| rep * len / ctx.repeat..(rep + 1) * len / ctx.repeat;
            shapes.push((
                kind,
                unique,
                d,
                pairs,
                streams
                    .iter()
                    .map(|(_, p, _)| p.ops.len() / ctx.repeat)
                    .collect::<Vec<_>>(),
            ));
            // One load per index (timed: insert-only), all three kept, then the repetitions
            // of the workload passes interleaved index by index.
            let mut indexes = Vec::new();
            for &index_kind in INDEXES {
                let label = index_kind.name();
                progress.set_message(format!("{kind} {} {label} load", uniqueness(unique)));
                match load(index_kind, &keys, unique, plan, &opts) {
                    Ok(l) => {
                        record_load(&mut cells, label, kind, unique, &l);
                        indexes.push((label, l, (0..d as u64).collect::<Vec<u64>>()));
                    }
                    Err(e) => {
                        cells.add((label, kind, unique, INSERT_ONLY), MOPS, pairs, Err(e));
                    }
                }
                progress.inc(1);
            }
            for rep in 0..ctx.repeat {
                for (label, l, current) in &mut indexes {
                    progress.set_message(format!(
                        "{kind} {} {label} repetition {}",
                        uniqueness(unique),
                        rep + 1
                    ));
                    for (measure, p, s) in &streams {
                        let pass = Pass {
                            plan: p,
                            stream: s,
                            range: chunk(p.ops.len(), rep),
                        };
                        let mops = run_ycsb_ops(l.index.as_ref(), &pass, d, current);
                        cells.add((label, kind, unique, measure), MOPS, pairs, mops);
                    }
                    progress.inc(1);
                }
            }
        }
    }
    progress.finish_and_clear();

    let labels: Vec<&str> = INDEXES.iter().map(|k| k.name()).collect();
    let mut plots = Vec::new();
    for unique in [true, false] {
        for &measure in YCSB_MEASURES.iter().chain(&[OWN]) {
            let unit = if measure == OWN { B_PAIR } else { MOPS };
            let slug = measure.replace('/', "-");
            bars(
                ctx,
                &cells,
                &mut plots,
                format!("{}-{slug}.png", uniqueness(unique)),
                format!("{name}: {} {measure} ({unit}), n={n}", uniqueness(unique)),
                &labels,
                unique,
                measure,
            )?;
        }
    }

    let cell = |label: &str, keys, unique, measure| cells.median((label, keys, unique, measure));
    let vs = |label: &str, keys, unique, measure| {
        ratio(
            cell(label, keys, unique, measure),
            cell("btree", keys, unique, measure),
        )
    };
    let mut summary = format!(
        "{n} pairs per key set and uniqueness (non-unique: {} distinct keys with \
         {TIDS_PER_KEY} tids each); YCSB loads 95% of the distinct keys first. Medians of {} \
         repetitions (Mops/s; insert-only: one load), in parentheses the ratio to `btree`; \
         bytes per pair after the load by the index's own accounting (alloc: the counting \
         allocator).\n\n\
         | keys | uniqueness | index | {} | own B/pair | alloc B/pair |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        n / TIDS_PER_KEY,
        ctx.repeat,
        YCSB_MEASURES.join(" | ")
    );
    for unique in [true, false] {
        for &keys in KEYSETS {
            for &label in &labels {
                let cells_text: Vec<String> = YCSB_MEASURES
                    .iter()
                    .map(|&m| {
                        with_ratio(
                            cell(label, keys, unique, m),
                            cell("btree", keys, unique, m),
                            2,
                        )
                    })
                    .collect();
                let _ = writeln!(
                    summary,
                    "| {keys} | {} | `{label}` | {} | {} | {} |",
                    uniqueness(unique),
                    cells_text.join(" | "),
                    with_ratio(
                        cell(label, keys, unique, OWN),
                        cell("btree", keys, unique, OWN),
                        1
                    ),
                    fmt_opt(cell(label, keys, unique, ALLOC), 1),
                );
            }
        }
    }

    let each = |label: &str, unique: bool, measure| -> Vec<(String, Option<f64>)> {
        KEYSETS
            .iter()
            .map(|&k| (k.name().to_string(), vs(label, k, unique, measure)))
            .collect()
    };
    let mut targets = Vec::new();
    for label in ["hybrid", "hybrid-compressed"] {
        targets.push(all_hold(
            format!("unique: `{label}`'s memory at most 0.5x `btree` on every key set"),
            &each(label, true, OWN),
            |r| r <= 0.5,
        ));
        targets.push(all_hold(
            format!("non-unique ({TIDS_PER_KEY} tids per key): `{label}`'s memory at most 0.35x `btree`"),
            &each(label, false, OWN),
            |r| r <= 0.35,
        ));
    }
    for unique in [true, false] {
        targets.push(Target::check(
            format!(
                "{}: `hybrid-compressed` at least 20% below `hybrid` on email",
                uniqueness(unique)
            ),
            ratio(
                cell("hybrid-compressed", KeySetKind::Email, unique, OWN),
                cell("hybrid", KeySetKind::Email, unique, OWN),
            ),
            |r| r <= 0.8,
            |r| format!("{r:.2}x `hybrid`"),
        ));
    }
    for (measure, min) in [
        (READ_ONLY, 0.9),
        (READ_WRITE, 1.0),
        (INSERT_ONLY, 0.7),
        (SCAN_INSERT, 0.6),
    ] {
        for unique in [true, false] {
            targets.push(all_hold(
                format!(
                    "{}: `hybrid` {measure} at least {min}x `btree`",
                    uniqueness(unique)
                ),
                &each("hybrid", unique, measure),
                |r| r >= min,
            ));
        }
    }

    let paper = format!(
        "{}\n**Ours, next to it** (this run, {n} pairs): unique `hybrid` over `btree`: memory \
         {}; insert-only {}; read/write {}; scan/insert {}. Non-unique memory: {}. \
         `hybrid-compressed` over `hybrid` (unique memory): {}.\n",
        PAPER_FIGURE_7.trim_end(),
        ratios_text(&|k| vs("hybrid", k, true, OWN)),
        ratios_text(&|k| vs("hybrid", k, true, INSERT_ONLY)),
        ratios_text(&|k| vs("hybrid", k, true, READ_WRITE)),
        ratios_text(&|k| vs("hybrid", k, true, SCAN_INSERT)),
        ratios_text(&|k| vs("hybrid", k, false, OWN)),
        ratios_text(&|k| ratio(
            cell("hybrid-compressed", k, true, OWN),
            cell("hybrid", k, true, OWN)
        )),
    );
    let mut facts = vec![
        format!(
            "indexes: {} (the hybrid kinds with ratio 10, merge everything, background \
             merges, smallest merge {} entries)",
            labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", "),
            opts.min_merge
        ),
        "per key set and uniqueness, on one thread: each index loaded once with 95% of the \
         distinct keys (`insert-only`, timed until its last merge is done; memory read then; \
         one load per index, so the insert-only and memory figures are single runs: a load \
         is the experiment's longest measurement and repeating it would triple the run), \
         then, per repetition and interleaved index by index, on that same index \
         `read-only` (YCSB C), `read/write` \
         (YCSB A; unique update = insert of the key with a new tid, non-unique update = \
         `remove_pair` of its current tid + insert of the new one) and `scan/insert` (YCSB E: \
         95% ascending scans of 1-100 pairs from a Zipfian start key, 5% inserts of new keys), \
         each timed until its merges are done; YCSB streams from `ycsb.rs` (scrambled \
         Zipfian, theta 0.99), each repetition running its own chunk of one stream (so \
         updates and inserts never repeat, and the index changes from pass to pass as a \
         running database's would)"
            .to_string(),
        format!(
            "repetitions: {} (interleaved index by index), seed {}",
            ctx.repeat, ctx.seed
        ),
    ];
    for (kind, unique, d, pairs, counts) in &shapes {
        facts.push(format!(
            "{kind} {}: {d} distinct keys, {pairs} pairs loaded; operations per pass: {}",
            uniqueness(*unique),
            YCSB_RUNS
                .iter()
                .zip(counts)
                .map(|((_, m), c)| format!("{m} {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary,
            sections: Vec::new(),
            paper,
            targets,
            facts,
            plots,
        },
    )
}

// ---------------------------------------------------------------------------------------------
// hybrid-ratio
// ---------------------------------------------------------------------------------------------

/// Lookups of the read-only pass of `hybrid-ratio`, as a fraction of N.
pub const RATIO_READS_FRACTION: f64 = 0.1;

/// What the paper reports for Figure 11 (Appendix C).
pub const PAPER_FIGURE_11: &str = "\
Appendix C, Figure 11 (from the text; the curves are not in our extraction):

- Setup: hybrid B+-tree, 64-bit integer keys, the insert-only workload then the read-only \
  workload, merge ratios from 1 to 100; the number of entries inserted is adjusted so that \
  the dynamic stage is about 50% full right before the read-only workload starts.
- A larger ratio gives slightly higher read throughput (a smaller dynamic stage) and lower \
  write throughput (more frequent merges); the write throughput falls faster than the read \
  throughput rises. OLTP workloads being write-intensive, the paper picks 10 as the default.
";

/// Keys to insert so that the load ends just after a merge plus half the next trigger, by
/// the trigger rule of `options` (the largest such count within `n`).
pub fn half_full_count(n: usize, options: &HybridOptions) -> usize {
    let (mut s, mut best) = (0usize, None);
    loop {
        let trigger = options.merge_threshold(s);
        let stop = s + trigger / 2;
        if stop > n {
            break;
        }
        best = Some(stop);
        s += trigger;
    }
    best.unwrap_or(n)
}

fn ratio_label(r: f64) -> String {
    format!("hybrid r={r}")
}

/// `hybrid-ratio`.
pub(super) fn run_ratio(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let n = ctx.n;
    let kind = KeySetKind::Rand64;
    let reads = ((n as f64 * RATIO_READS_FRACTION) as usize).max(1);
    eprintln!("{name}: generating {n} keys");
    let keys = kind.generate(n, ctx.seed);
    // (label, kind, options, keys loaded, read positions, their keys)
    let mut variants = Vec::new();
    let base = options(n);
    let btree_count = n;
    let mut streams: Vec<(usize, Vec<u32>, KeySet)> = Vec::new();
    let mut stream_of = |count: usize| -> usize {
        if let Some(i) = streams.iter().position(|(c, _, _)| *c == count) {
            return i;
        }
        let positions = zipf_positions(count, reads, ctx.seed);
        let gathered = keys.gather(&positions);
        streams.push((count, positions, gathered));
        streams.len() - 1
    };
    variants.push((
        "btree".to_string(),
        IndexKind::BTree,
        base.clone(),
        btree_count,
        stream_of(btree_count),
    ));
    for &r in RATIOS {
        let opts = HybridOptions {
            trigger: MergeTrigger::Ratio(r),
            mode: MergeMode::Blocking,
            ..base.clone()
        };
        let count = half_full_count(n, &opts);
        let s = stream_of(count);
        variants.push((ratio_label(r), IndexKind::Hybrid, opts, count, s));
    }
    let mut cells = Cells::default();
    // One load per variant (timed: insert-only), every loaded index kept, then the
    // repetitions of the read pass interleaved variant by variant.
    let mut loaded = Vec::new();
    for (label, index_kind, opts, count, s) in &variants {
        let plan = LoadPlan {
            loaded: *count,
            per_key: 1,
        };
        match load(*index_kind, &keys, true, plan, opts) {
            Ok(l) => {
                record_load(&mut cells, label, kind, true, &l);
                if let Some(stats) = l.index.stats_as::<HybridStats>() {
                    let trigger = opts.merge_threshold(stats.static_len).max(1);
                    cells.add(
                        (label, kind, true, "dynamic fill"),
                        "%",
                        *count,
                        Ok(100.0 * stats.dynamic_len as f64 / trigger as f64),
                    );
                    cells.add(
                        (label, kind, true, "merges"),
                        "count",
                        *count,
                        Ok(stats.merges as f64),
                    );
                }
                eprintln!("{name}: {label}: loaded {count} keys in {:.1} s", l.secs);
                loaded.push((label, l, *count, *s));
            }
            Err(e) => cells.add((label, kind, true, INSERT_ONLY), MOPS, *count, Err(e)),
        }
    }
    for rep in 0..ctx.repeat {
        for (label, l, count, s) in &loaded {
            let (_, positions, stream) = &streams[*s];
            let mops = lookups(stream, positions, n, |k| l.index.get(k).ok().flatten());
            cells.add((label, kind, true, READ_ONLY), MOPS, *count, mops);
        }
        eprintln!("{name}: reads, repetition {}/{}", rep + 1, ctx.repeat);
    }
    drop(loaded);

    let cell = |label: &str, measure| cells.median((label, kind, true, measure));
    let x_labels: Vec<String> = RATIOS.iter().map(|r| r.to_string()).collect();
    let point = |label: &str, measure| cells.point((label, kind, true, measure));
    let along = |measure| -> Vec<Option<Point>> {
        RATIOS
            .iter()
            .map(|&r| point(&ratio_label(r), measure))
            .collect()
    };
    let flat = |measure| vec![point("btree", measure); RATIOS.len()];
    let series: Vec<Series> = vec![
        ("hybrid insert-only".to_string(), along(INSERT_ONLY)),
        ("btree insert-only".to_string(), flat(INSERT_ONLY)),
        ("hybrid read-only".to_string(), along(READ_ONLY)),
        ("btree read-only".to_string(), flat(READ_ONLY)),
    ];
    let title = format!(
        "{name}: throughput vs merge ratio (Mops/s, median of {}), rand64",
        ctx.repeat
    );
    let chart = LineChart {
        title: &title,
        x_desc: "merge ratio (static / dynamic entries at a merge)",
        y_desc: "Mops/s",
        x_labels: &x_labels,
        series: &series,
        phases: None,
    };
    let mut plots = Vec::new();
    line_plot(ctx, &mut plots, "ratio-throughput.png".to_string(), &chart)?;
    let memory: Vec<Series> = vec![
        ("hybrid (own)".to_string(), along(OWN)),
        ("btree (own)".to_string(), flat(OWN)),
    ];
    let mem_title = format!("{name}: bytes per key after the load vs merge ratio, rand64");
    let mem_chart = LineChart {
        title: &mem_title,
        y_desc: "bytes per key",
        series: &memory,
        ..chart
    };
    line_plot(ctx, &mut plots, "ratio-memory.png".to_string(), &mem_chart)?;

    let mut summary = format!(
        "rand64, one thread; each hybrid variant loads as many keys (of {n}) as ends the load \
         just after a merge plus half the next trigger, so the dynamic stage is about half \
         full for the reads (`fill`: its entries over the trigger, measured); `btree` loads \
         all {n}. Then {reads} Zipfian lookups. Insert-only: one load per variant; read-only: \
         medians of {} repetitions (Mops/s); in parentheses the ratio to `btree`.\n\n\
         | keys | index | keys loaded | merges | fill | insert-only | read-only | own B/key |\n\
         |---|---|---|---|---|---|---|---|\n",
        ctx.repeat
    );
    for (label, _, _, count, _) in &variants {
        let _ = writeln!(
            summary,
            "| {kind} | `{label}` | {count} | {} | {} | {} | {} | {} |",
            fmt_opt(cell(label, "merges"), 0),
            cell(label, "dynamic fill").map_or_else(|| "-".to_string(), |f| format!("{f:.0}%")),
            with_ratio(cell(label, INSERT_ONLY), cell("btree", INSERT_ONLY), 2),
            with_ratio(cell(label, READ_ONLY), cell("btree", READ_ONLY), 2),
            with_ratio(cell(label, OWN), cell("btree", OWN), 1),
        );
    }
    let default = ratio_label(10.0);
    let vs = |label: &str, measure| ratio(cell(label, measure), cell("btree", measure));
    let targets = vec![
        Target::check(
            format!("read-only at least 0.9x `btree` (`{default}`, the default ratio, dynamic stage half full)"),
            vs(&default, READ_ONLY),
            |r| r >= 0.9,
            |r| format!("{r:.2}x"),
        ),
        Target::check(
            format!("insert-only at least 0.7x `btree` (`{default}`)"),
            vs(&default, INSERT_ONLY),
            |r| r >= 0.7,
            |r| format!("{r:.2}x"),
        ),
        Target::check(
            "unique memory at most 0.5x `btree` (`hybrid r=10`, after the load)",
            vs(&default, OWN),
            |r| r <= 0.5,
            |r| format!("{r:.2}x"),
        ),
    ];
    let trend = |measure| {
        ratio(
            cell(&ratio_label(100.0), measure),
            cell(&ratio_label(1.0), measure),
        )
    };
    let paper = format!(
        "{}\n**Ours, next to it** (this run, {n} keys): ratio 100 over ratio 1: insert-only \
         {}, read-only {}.\n",
        PAPER_FIGURE_11.trim_end(),
        fmt_ratio(trend(INSERT_ONLY)),
        fmt_ratio(trend(READ_ONLY)),
    );
    let facts = vec![
        format!(
            "indexes: `btree`, and `hybrid` with merge ratios {} (merge everything, smallest \
             merge {} entries) and blocking merges, as the paper's: a merge runs on the insert \
             that reaches the trigger, so the trigger rule alone decides the merge points and \
             the dynamic stage's fill when the reads start (background merges would let the \
             dynamic stage grow past the trigger by however much a merge lags)",
            RATIOS
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            base.min_merge
        ),
        "keys loaded per ratio: by the trigger rule, the largest count within N that ends \
         just after a merge plus half of the next trigger; the insert-only load is timed until \
         its last merge is done; the read-only pass reads Zipfian (theta 0.99) keys among \
         those loaded"
            .to_string(),
        format!(
            "one load per variant (the insert-only and memory figures are single runs; \
             ratio 100 rewrites the static stage about a hundred times over, so repeating the \
             loads would triple the run), every loaded variant kept; repetitions of the read \
             pass: {} (interleaved variant by variant), seed {}",
            ctx.repeat, ctx.seed
        ),
    ];
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary,
            sections: Vec::new(),
            paper,
            targets,
            facts,
            plots,
        },
    )
}

// ---------------------------------------------------------------------------------------------
// hybrid-latency
// ---------------------------------------------------------------------------------------------

/// Inserts of the mixed stream, as a fraction of N: at ratio 10, enough for three merges
/// after any load (triggers of N/10, 1.1 N/10 and 1.21 N/10 entries).
pub const LATENCY_INSERT_FRACTION: f64 = 0.35;

/// The bound on the maximum operation latency during a non-blocking merge.
pub const MAX_MERGE_LATENCY_MS: f64 = 10.0;

/// Time bins of the latency-over-time plots.
const LATENCY_BINS: usize = 200;

/// What the paper reports for Table 3 (section 7).
pub const PAPER_TABLE_3: &str = "\
Section 7, Table 3: TPC-C transaction latencies in H-Store (8 partitions, the same run as \
Figure 8a), with the paper's blocking merge:

| index | 50%-tile | 99%-tile | MAX |\n|---|---|---|---|\n\
| B+tree | 10 ms | 50 ms | 115 ms |\n\
| Hybrid | 10 ms | 52 ms | 611 ms |\n\
| Hybrid-Compressed | 11 ms | 83 ms | 1981 ms |\n\n\
The hybrid indexes barely change the 50th and 99th percentiles; the MAX grows \"because our \
current merge algorithm is blocking\". The paper leaves space-efficient non-blocking \
merges (and a concurrent hybrid index) to future work. These are whole-transaction \
latencies; ours are single index operations.
";

/// The merge modes of `hybrid-latency` with their labels, plot names and threads.
const LATENCY_MODES: &[(&str, &str, MergeMode, usize)] = &[
    ("hybrid (blocking)", "blocking", MergeMode::Blocking, 1),
    (
        "hybrid (background)",
        "background",
        MergeMode::Background,
        1,
    ),
    (
        "hybrid (background, 2 threads)",
        "background-2-threads",
        MergeMode::Background,
        2,
    ),
];

/// The latency of one stream: each operation's start (ns from the index's creation) and
/// duration (ns), and the merges (from the index's records) that ran during it.
struct Timeline {
    starts: Vec<u64>,
    latencies: Vec<u64>,
    merges: Vec<(u64, u64)>,
}

impl Timeline {
    /// Whether each operation overlapped a merge.
    fn overlapping(&self) -> Vec<bool> {
        let mut i = 0;
        self.starts
            .iter()
            .zip(&self.latencies)
            .map(|(&s, &l)| {
                while i < self.merges.len() && self.merges[i].1 < s {
                    i += 1;
                }
                i < self.merges.len() && s + l >= self.merges[i].0
            })
            .collect()
    }

    /// The maximum latency (ms) per time bin and whether a merge ran in it.
    fn bins(&self) -> (Vec<String>, Vec<Option<f64>>, Vec<bool>) {
        let (Some(&first), Some(&last)) = (self.starts.first(), self.starts.last()) else {
            return (Vec::new(), Vec::new(), Vec::new());
        };
        let width = ((last - first) / LATENCY_BINS as u64).max(1);
        let bin = |t: u64| ((t.saturating_sub(first) / width) as usize).min(LATENCY_BINS - 1);
        let mut max = vec![None::<f64>; LATENCY_BINS];
        for (&s, &l) in self.starts.iter().zip(&self.latencies) {
            let m = &mut max[bin(s)];
            let ms = l as f64 / 1e6;
            *m = Some(m.map_or(ms, |v: f64| v.max(ms)));
        }
        let mut merging = vec![false; LATENCY_BINS];
        for &(a, b) in &self.merges {
            if b < first || a > last {
                continue;
            }
            for flag in &mut merging[bin(a)..=bin(b)] {
                *flag = true;
            }
        }
        let labels = (0..LATENCY_BINS)
            .map(|i| format!("{:.2}", (i as u64 * width) as f64 / 1e9))
            .collect();
        (labels, max, merging)
    }
}

/// The `q` quantile (0..=1) of sorted `values`.
fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    Some(sorted[((last as f64 * q).round() as usize).min(last)] as f64)
}

/// One timed operation of the mixed stream: runs operation `i`, appends its (start,
/// latency) and returns 1 if its answer was wrong.
type TimedOp<'a> = dyn Fn(usize, &mut Vec<(u64, u64)>) -> usize + Sync + 'a;

/// Runs the mixed stream on a loaded index: `reads.len()` Zipfian reads (keys in
/// `read_keys`, they must find their position as tid) and as many inserts of keys
/// `first_new..` of `keys`, each operation timed on its own. One thread alternates a read and
/// an insert; two threads run the reads on one and the inserts on the other, concurrently.
fn mixed_stream(
    l: &Loaded,
    keys: &KeySet,
    first_new: usize,
    (reads, read_keys): (&[u32], &KeySet),
    threads: usize,
) -> Result<Timeline, String> {
    let index = l.index.as_ref();
    let created = l.created;
    let ns = move |t: Instant| t.duration_since(created).as_nanos() as u64;
    // (start, latency) of each operation, and the wrong answers.
    let read = |i: usize, out: &mut Vec<(u64, u64)>| -> usize {
        let t0 = Instant::now();
        let found = with_key(read_keys.key(i), |k| index.get(k));
        let t1 = Instant::now();
        out.push((ns(t0), ns(t1) - ns(t0)));
        usize::from(!matches!(found, Ok(Some(t)) if t == u64::from(reads[i])))
    };
    let insert = |i: usize, out: &mut Vec<(u64, u64)>| -> usize {
        let new = first_new + i;
        let t0 = Instant::now();
        let old = with_key(keys.key(new), |k| index.insert(k, new as u64));
        let t1 = Instant::now();
        out.push((ns(t0), ns(t1) - ns(t0)));
        usize::from(!matches!(old, Ok(None)))
    };
    let count = reads.len();
    let (mut ops, wrong) = if threads <= 1 {
        let mut ops = Vec::with_capacity(2 * count);
        let mut wrong = 0;
        for i in 0..count {
            wrong += read(i, &mut ops) + insert(i, &mut ops);
        }
        (ops, wrong)
    } else {
        let run = |op: &TimedOp<'_>| {
            let mut ops = Vec::with_capacity(count);
            let wrong = (0..count).map(|i| op(i, &mut ops)).sum::<usize>();
            (ops, wrong)
        };
        let ((mut a, wa), (b, wb)) = std::thread::scope(|scope| {
            let reader = scope.spawn(|| run(&read));
            let writer = scope.spawn(|| run(&insert));
            let join = |h: std::thread::ScopedJoinHandle<'_, (Vec<(u64, u64)>, usize)>| {
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            };
            (join(reader), join(writer))
        });
        a.extend(b);
        (a, wa + wb)
    };
    index.quiesce().map_err(|e| e.to_string())?;
    if wrong > 0 {
        return Err(format!(
            "{wrong} of {} operations failed or returned a wrong result",
            2 * count
        ));
    }
    ops.sort_unstable();
    let stream_start = ops.first().map_or(0, |o| o.0);
    let merges = l
        .index
        .stats_as::<HybridStats>()
        .unwrap_or_default()
        .records
        .iter()
        .map(|m| {
            let a = m.started.as_nanos() as u64;
            (a, a + m.duration.as_nanos() as u64)
        })
        .filter(|&(_, b)| b >= stream_start)
        .collect();
    let (starts, latencies) = ops.into_iter().unzip();
    Ok(Timeline {
        starts,
        latencies,
        merges,
    })
}

/// `hybrid-latency`.
pub(super) fn run_latency(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let n = ctx.n;
    let kind = KeySetKind::Rand64;
    let inserts = ((n as f64 * LATENCY_INSERT_FRACTION) as usize).max(1);
    eprintln!("{name}: generating {} keys", n + inserts);
    let keys = kind.generate(n + inserts, ctx.seed);
    let reads = zipf_positions(n, inserts, ctx.seed);
    let read_keys = keys.gather(&reads);
    let mut cells = Cells::default();
    let mut first_timelines: Vec<(&str, &str, Timeline)> = Vec::new();
    let us = |ns: Option<f64>| ns.map(|v| v / 1e3);
    for rep in 0..ctx.repeat {
        for &(label, slug, mode, threads) in LATENCY_MODES {
            let opts = HybridOptions { mode, ..options(n) };
            let plan = LoadPlan {
                loaded: n,
                per_key: 1,
            };
            let started = Instant::now();
            let outcome = load(IndexKind::Hybrid, &keys, true, plan, &opts)
                .and_then(|l| mixed_stream(&l, &keys, n, (&reads, &read_keys), threads));
            let timeline = match outcome {
                Ok(t) => t,
                Err(e) => {
                    cells.add((label, kind, true, "max all"), "us", n, Err(e));
                    continue;
                }
            };
            let during = timeline.overlapping();
            let mut all = timeline.latencies.clone();
            let mut merging: Vec<u64> = timeline
                .latencies
                .iter()
                .zip(&during)
                .filter(|(_, &d)| d)
                .map(|(&l, _)| l)
                .collect();
            all.sort_unstable();
            merging.sort_unstable();
            let pairs = n + inserts;
            let mut put = |measure: &'static str, unit, v: Option<f64>| {
                if let Some(v) = v {
                    cells.add((label, kind, true, measure), unit, pairs, Ok(v));
                }
            };
            put("merges", "count", Some(timeline.merges.len() as f64));
            put("ops", "count", Some(all.len() as f64));
            put("ops merging", "count", Some(merging.len() as f64));
            put("p50 all", "us", us(quantile(&all, 0.5)));
            put("p99 all", "us", us(quantile(&all, 0.99)));
            put("p99.9 all", "us", us(quantile(&all, 0.999)));
            put("max all", "us", us(quantile(&all, 1.0)));
            put("p50 merging", "us", us(quantile(&merging, 0.5)));
            put("p99 merging", "us", us(quantile(&merging, 0.99)));
            put("p99.9 merging", "us", us(quantile(&merging, 0.999)));
            put("max merging", "us", us(quantile(&merging, 1.0)));
            eprintln!(
                "{name}: {label} repetition {}/{}: {:.1} s, {} merges during the stream",
                rep + 1,
                ctx.repeat,
                started.elapsed().as_secs_f64(),
                timeline.merges.len()
            );
            if rep == 0 {
                first_timelines.push((label, slug, timeline));
            }
        }
    }

    let mut plots = Vec::new();
    for (label, slug, timeline) in &first_timelines {
        let (x_labels, max, merging) = timeline.bins();
        let top = max.iter().flatten().copied().fold(0.0f64, f64::max) * 1.05;
        let marks = merging.iter().map(|&m| m.then_some(top));
        // One repetition's stream: no error bars.
        let series: Vec<Series> = vec![
            plain("max latency".to_string(), max),
            plain("merge running".to_string(), marks),
        ];
        let file = format!("latency-{slug}.png");
        let title =
            format!("{name}: {label}, max operation latency per time bin (ms), repetition 1");
        let chart = LineChart {
            title: &title,
            x_desc: "seconds into the mixed stream",
            y_desc: "max latency (ms)",
            x_labels: &x_labels,
            series: &series,
            phases: None,
        };
        line_plot(ctx, &mut plots, file, &chart)?;
    }

    let cell = |label: &str, measure| cells.summary((label, kind, true, measure));
    let med = |label: &str, measure| cell(label, measure).map(|s| s.median);
    let mut summary = format!(
        "rand64: `hybrid` loaded with {n} keys, then {} operations, half Zipfian reads and \
         half inserts of new keys, alternating on one thread (or reads on one thread and \
         inserts on another: `2 threads`); every operation timed. `merging`: the \
         operations whose run overlapped a merge. Medians of {} repetitions, in \
         microseconds; max*: the largest over the repetitions.\n\n\
         | keys | index | merges | ops merging | p50 | p99 | max* | p50 merging | p99 merging \
         | max* merging |\n|---|---|---|---|---|---|---|---|---|---|\n",
        2 * inserts,
        ctx.repeat
    );
    for &(label, ..) in LATENCY_MODES {
        let worst = |m| cell(label, m).map(|s| s.max);
        let _ = writeln!(
            summary,
            "| {kind} | `{label}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_opt(med(label, "merges"), 0),
            fmt_opt(med(label, "ops merging"), 0),
            fmt_opt(med(label, "p50 all"), 2),
            fmt_opt(med(label, "p99 all"), 2),
            fmt_opt(worst("max all"), 0),
            fmt_opt(med(label, "p50 merging"), 2),
            fmt_opt(med(label, "p99 merging"), 2),
            fmt_opt(worst("max merging"), 0),
        );
    }
    let background = LATENCY_MODES[1].0;
    let blocking = LATENCY_MODES[0].0;
    let worst_ms = |label: &str| cell(label, "max merging").map(|s| s.max / 1e3);
    let targets: Vec<Target> = LATENCY_MODES[1..]
        .iter()
        .map(|&(label, ..)| {
            Target::check(
                format!(
                    "non-blocking merge keeps the maximum operation latency during a merge \
                     under {MAX_MERGE_LATENCY_MS} ms (`{label}`, the largest over the \
                     repetitions)"
                ),
                worst_ms(label),
                |ms| ms < MAX_MERGE_LATENCY_MS,
                |ms| {
                    format!(
                        "{ms:.2} ms ({} merges overlapped; blocking: {} ms)",
                        fmt_opt(med(label, "merges"), 0),
                        fmt_opt(worst_ms(blocking), 1)
                    )
                },
            )
        })
        .collect();
    let paper = format!(
        "{}\n**Ours, next to it** (this run, {n} keys, single index operations): maximum \
         latency during merges: blocking {} ms, background {} ms (2 threads: {} ms); p99 \
         over all operations: blocking {} us, background {} us.\n",
        PAPER_TABLE_3.trim_end(),
        fmt_opt(worst_ms(blocking), 1),
        fmt_opt(worst_ms(background), 2),
        fmt_opt(worst_ms(LATENCY_MODES[2].0), 2),
        fmt_opt(med(blocking, "p99 all"), 2),
        fmt_opt(med(background, "p99 all"), 2),
    );
    let facts = vec![
        format!(
            "index: `hybrid` (ratio 10, merge everything, smallest merge {} entries), merges \
             blocking (on the writer that hits the trigger, the paper's) or in the background \
             (on one thread alternating reads and inserts, or with a reader thread and a \
             writer thread running at once)",
            min_merge(n)
        ),
        format!(
            "per repetition and mode: a fresh index loaded with {n} rand64 keys (not timed, \
             its merges awaited), then {} operations: Zipfian (theta 0.99) reads of loaded \
             keys and inserts of {inserts} new keys, each timed with \
             `Instant::now()` around it; merges from the index's records (start and duration \
             from its creation, which the index clocks as the last step of its construction: \
             the origin here is the instant its builder returned); an operation is `merging` \
             when its run overlaps a merge's",
            2 * inserts
        ),
        format!(
            "repetitions: {} (interleaved mode by mode), seed {}; the plots show repetition 1",
            ctx.repeat, ctx.seed
        ),
    ];
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary,
            sections: Vec::new(),
            paper,
            targets,
            facts,
            plots,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn half_full_counts_end_half_a_trigger_after_a_merge() {
        let opts = HybridOptions {
            min_merge: 100,
            ..HybridOptions::default()
        };
        let count = half_full_count(100_000, &opts);
        assert!(count <= 100_000 && count > 80_000, "{count}");
        // Replaying the trigger rule: the count is a merge point plus half the next trigger.
        let mut s = 0;
        while s + opts.merge_threshold(s) / 2 < count {
            s += opts.merge_threshold(s);
        }
        assert_eq!(s + opts.merge_threshold(s) / 2, count);
        let one = HybridOptions {
            trigger: MergeTrigger::Ratio(1.0),
            ..opts
        };
        assert!(half_full_count(100_000, &one) < count);
    }

    #[test]
    fn overlaps_and_quantiles() {
        let t = Timeline {
            starts: vec![0, 10, 20, 30, 40],
            latencies: vec![5, 5, 5, 5, 5],
            merges: vec![(12, 22)],
        };
        assert_eq!(t.overlapping(), [false, true, true, false, false]);
        assert_eq!(quantile(&[1, 2, 3, 4, 5], 0.5), Some(3.0));
        assert_eq!(quantile(&[1, 2, 3, 4, 5], 1.0), Some(5.0));
        assert_eq!(quantile(&[], 0.5), None);
        let records = [
            MergeRecord {
                static_before: 100,
                static_after: 110,
                merged: 10,
                carried: 0,
                started: Duration::ZERO,
                duration: Duration::from_micros(110),
            },
            MergeRecord {
                static_before: 1000,
                static_after: 1100,
                merged: 100,
                carried: 0,
                started: Duration::ZERO,
                duration: Duration::from_micros(2200),
            },
        ];
        assert_eq!(linearity(&records, 50), Some(2.0));
        assert_eq!(linearity(&records, 500), None);
    }
}
