//! `hybrid-ycsb` (Figures 7 and 13): `btree`, `hybrid` and `hybrid-compressed` on YCSB
//! workloads, unique and non-unique.

use indicatif::ProgressBar;

use super::*;

/// Operations of each read-only and read/write pass, as a fraction of N (capped at the YCSB
/// stream's length, the loaded distinct keys).
pub const YCSB_OPS_FRACTION: f64 = 0.05;

/// Operations of each scan/insert pass, as a fraction of N (capped likewise).
pub const YCSB_SCAN_OPS_FRACTION: f64 = 0.005;

/// The YCSB workloads after the load, with their names in the report.
pub(super) const YCSB_RUNS: &[(Ycsb, &str)] = &[
    (Ycsb::C, READ_ONLY),
    (Ycsb::A, READ_WRITE),
    (Ycsb::E, SCAN_INSERT),
];

/// Every measure of `hybrid-ycsb`'s throughput table, in order.
pub(super) const YCSB_MEASURES: &[&str] = &[INSERT_ONLY, READ_ONLY, READ_WRITE, SCAN_INSERT];

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
pub(super) struct Pass<'a> {
    pub(super) plan: &'a YcsbPlan,
    pub(super) stream: &'a KeySet,
    pub(super) range: std::ops::Range<usize>,
}

/// Times `pass` on `index`, waiting for its merges at the end, and returns Mops/s.
/// `current` holds the tid to update of each distinct key (`d` of them); reads must find a
/// tid of their key.
pub(super) fn run_ycsb_ops(
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
                            len as usize,
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
pub(super) fn ycsb_stream(
    workload: Ycsb,
    keys: &KeySet,
    ops: usize,
    seed: u64,
) -> (YcsbPlan, KeySet) {
    let mut plan = YcsbPlan::generate(workload, keys.len(), 1, seed);
    let ops = ops.clamp(1, plan.ops.len());
    plan.ops.truncate(ops);
    plan.positions.truncate(ops);
    let stream = keys.gather(&plan.positions);
    (plan, stream)
}

/// The label of a uniqueness in tables.
pub(super) fn uniqueness(unique: bool) -> &'static str {
    if unique {
        "unique"
    } else {
        "non-unique"
    }
}

/// One key set and uniqueness as run, for "What was run".
struct Shape {
    kind: KeySetKind,
    unique: bool,
    /// Distinct keys.
    d: usize,
    /// Pairs loaded.
    pairs: usize,
    /// Operations per pass of each workload of [`YCSB_RUNS`].
    counts: Vec<usize>,
}

/// One workload's YCSB stream: its measure, plan and keys in operation order.
type Stream = (&'static str, YcsbPlan, KeySet);

/// An index loaded once, with the current tid of each distinct key.
type Kept = (&'static str, Loaded, Vec<u64>);

/// `hybrid-ycsb`.
pub(crate) fn run_ycsb(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let mut cells = Cells::default();
    let mut shapes = Vec::new();
    let progress =
        crate::runner::progress_bar((KEYSETS.len() * 2 * (ctx.repeat + 1) * INDEXES.len()) as u64);
    for &kind in KEYSETS {
        for unique in [true, false] {
            shapes.push(measure_keys(ctx, &mut cells, &progress, kind, unique));
        }
    }
    progress.finish_and_clear();

    let labels: Vec<&str> = INDEXES.iter().map(|k| k.name()).collect();
    let plots = ycsb_plots(ctx, &cells, &labels)?;
    let m = Medians(&cells);
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary: ycsb_summary(ctx, &m, &labels),
            sections: Vec::new(),
            paper: ycsb_paper(ctx.n, &m),
            targets: ycsb_targets(&m),
            facts: ycsb_facts(ctx, &labels, &shapes),
            plots,
        },
    )
}

/// Measures every index on `kind` keys of `unique`ness into `cells`: one load per index, then
/// the repetitions of the workload passes interleaved index by index.
fn measure_keys(
    ctx: &ExperimentContext<'_>,
    cells: &mut Cells,
    progress: &ProgressBar,
    kind: KeySetKind,
    unique: bool,
) -> Shape {
    let n = ctx.n;
    let per_key = if unique { 1 } else { TIDS_PER_KEY };
    let d = (n / per_key).max(2);
    progress.suspend(|| {
        eprintln!(
            "{}: {kind} {}: generating {d} keys and the YCSB streams",
            ctx.experiment.name,
            uniqueness(unique)
        );
    });
    let keys = kind.generate(d, ctx.seed);
    let plan = LoadPlan {
        loaded: loaded_keys(d),
        per_key,
    };
    let pairs = plan.loaded * per_key;
    let streams = ycsb_streams(ctx, &keys);
    let shape = Shape {
        kind,
        unique,
        d,
        pairs,
        counts: streams
            .iter()
            .map(|(_, p, _)| p.ops.len() / ctx.repeat)
            .collect(),
    };
    // One load per index (timed: insert-only), all three kept, then the repetitions
    // of the workload passes interleaved index by index.
    let mut indexes = load_indexes(ctx.n, cells, progress, &keys, &shape, plan);
    for rep in 0..ctx.repeat {
        for kept in &mut indexes {
            progress.set_message(format!(
                "{kind} {} {} repetition {}",
                uniqueness(unique),
                kept.0,
                rep + 1
            ));
            run_passes(ctx, cells, &shape, &streams, kept, rep);
            progress.inc(1);
        }
    }
    shape
}

/// Loads `keys` into every index of [`INDEXES`] (timed: insert-only), recording each load
/// (or its failure) in `cells`; returns the indexes that loaded.
fn load_indexes(
    n: usize,
    cells: &mut Cells,
    progress: &ProgressBar,
    keys: &KeySet,
    shape: &Shape,
    plan: LoadPlan,
) -> Vec<Kept> {
    let (kind, unique) = (shape.kind, shape.unique);
    let mut indexes = Vec::new();
    for &index_kind in INDEXES {
        let label = index_kind.name();
        progress.set_message(format!("{kind} {} {label} load", uniqueness(unique)));
        match load(index_kind, keys, unique, plan, &options(n)) {
            Ok(l) => {
                record_load(cells, label, kind, unique, &l);
                indexes.push((label, l, (0..shape.d as u64).collect::<Vec<u64>>()));
            }
            Err(e) => {
                cells.add(
                    (label, kind, unique, INSERT_ONLY),
                    MOPS,
                    shape.pairs,
                    Err(e),
                );
            }
        }
        progress.inc(1);
    }
    indexes
}

/// One stream per workload over `keys`, long enough for every repetition; repetition `r`
/// runs its `r`-th chunk, so updates and inserts never repeat.
fn ycsb_streams(ctx: &ExperimentContext<'_>, keys: &KeySet) -> Vec<Stream> {
    let ops = ((ctx.n as f64 * YCSB_OPS_FRACTION) as usize).max(1);
    let scan_ops = ((ctx.n as f64 * YCSB_SCAN_OPS_FRACTION) as usize).max(1);
    YCSB_RUNS
        .iter()
        .map(|&(w, label)| {
            let count = if w == Ycsb::E { scan_ops } else { ops };
            let (p, s) = ycsb_stream(w, keys, count * ctx.repeat, ctx.seed);
            (label, p, s)
        })
        .collect()
}

/// Runs repetition `rep`'s chunk of every stream on the kept index, recording each pass's
/// throughput in `cells`.
fn run_passes(
    ctx: &ExperimentContext<'_>,
    cells: &mut Cells,
    shape: &Shape,
    streams: &[Stream],
    (label, l, current): &mut Kept,
    rep: usize,
) {
    let chunk = |len: usize| rep * len / ctx.repeat..(rep + 1) * len / ctx.repeat;
    for (measure, p, s) in streams {
        let pass = Pass {
            plan: p,
            stream: s,
            range: chunk(p.ops.len()),
        };
        let mops = run_ycsb_ops(l.index.as_ref(), &pass, shape.d, current);
        let at = (*label, shape.kind, shape.unique, *measure);
        cells.add(at, MOPS, shape.pairs, mops);
    }
}

/// Draws one bar chart per uniqueness and measure (throughputs, then memory).
fn ycsb_plots(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
    labels: &[&str],
) -> Result<Vec<(String, String)>, String> {
    let (name, n) = (ctx.experiment.name, ctx.n);
    let mut plots = Vec::new();
    for unique in [true, false] {
        for &measure in YCSB_MEASURES.iter().chain(&[OWN]) {
            let unit = if measure == OWN { B_PAIR } else { MOPS };
            let slug = measure.replace('/', "-");
            bars(
                ctx,
                cells,
                &mut plots,
                format!("{}-{slug}.png", uniqueness(unique)),
                format!("{name}: {} {measure} ({unit}), n={n}", uniqueness(unique)),
                labels,
                unique,
                measure,
            )?;
        }
    }
    Ok(plots)
}

/// The medians of `hybrid-ycsb`'s cells, and their ratios to `btree`'s.
struct Medians<'a>(&'a Cells);

impl Medians<'_> {
    /// The median at `at`.
    fn get(&self, at: At<'_>) -> Option<f64> {
        self.0.median(at)
    }

    /// The medians at `at` and at `btree` on the same key set, uniqueness and measure.
    fn and_btree(&self, at: At<'_>) -> (Option<f64>, Option<f64>) {
        let (_, keys, unique, measure) = at;
        (self.get(at), self.get(("btree", keys, unique, measure)))
    }

    /// The median at `at` over `btree`'s.
    fn vs(&self, at: At<'_>) -> Option<f64> {
        let (v, btree) = self.and_btree(at);
        ratio(v, btree)
    }

    /// The median at `at` with its ratio to `btree`'s in parentheses.
    fn with_btree(&self, at: At<'_>, decimals: usize) -> String {
        let (v, btree) = self.and_btree(at);
        with_ratio(v, btree, decimals)
    }

    /// [`Medians::vs`] of `label` on every key set, by key set name.
    fn each(&self, label: &str, unique: bool, measure: &'static str) -> Vec<(String, Option<f64>)> {
        KEYSETS
            .iter()
            .map(|&k| (k.name().to_string(), self.vs((label, k, unique, measure))))
            .collect()
    }
}

/// The summary table: every measure of every index, key set and uniqueness.
fn ycsb_summary(ctx: &ExperimentContext<'_>, m: &Medians<'_>, labels: &[&str]) -> String {
    let mut summary = format!(
        "{} pairs per key set and uniqueness (non-unique: {} distinct keys with \
         {TIDS_PER_KEY} tids each); YCSB loads 95% of the distinct keys first. Medians of {} \
         repetitions (Mops/s; insert-only: one load), in parentheses the ratio to `btree`; \
         bytes per pair after the load by the index's own accounting (alloc: the counting \
         allocator).\n\n\
         | keys | uniqueness | index | {} | own B/pair | alloc B/pair |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        ctx.n,
        ctx.n / TIDS_PER_KEY,
        ctx.repeat,
        YCSB_MEASURES.join(" | ")
    );
    for unique in [true, false] {
        for &keys in KEYSETS {
            for &label in labels {
                let cells_text: Vec<String> = YCSB_MEASURES
                    .iter()
                    .map(|&measure| m.with_btree((label, keys, unique, measure), 2))
                    .collect();
                let _ = writeln!(
                    summary,
                    "| {keys} | {} | `{label}` | {} | {} | {} |",
                    uniqueness(unique),
                    cells_text.join(" | "),
                    m.with_btree((label, keys, unique, OWN), 1),
                    fmt_opt(m.get((label, keys, unique, ALLOC)), 1),
                );
            }
        }
    }
    summary
}

/// The targets of issue 5 that `hybrid-ycsb` speaks to.
fn ycsb_targets(m: &Medians<'_>) -> Vec<Target> {
    let mut targets = Vec::new();
    for label in ["hybrid", "hybrid-compressed"] {
        targets.push(all_hold(
            format!("unique: `{label}`'s memory at most 0.5x `btree` on every key set"),
            &m.each(label, true, OWN),
            |r| r <= 0.5,
        ));
        targets.push(all_hold(
            format!("non-unique ({TIDS_PER_KEY} tids per key): `{label}`'s memory at most 0.35x `btree`"),
            &m.each(label, false, OWN),
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
                m.get(("hybrid-compressed", KeySetKind::Email, unique, OWN)),
                m.get(("hybrid", KeySetKind::Email, unique, OWN)),
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
                &m.each("hybrid", unique, measure),
                |r| r >= min,
            ));
        }
    }
    targets
}

/// "What the paper reports", with this run's ratios next to it.
fn ycsb_paper(n: usize, m: &Medians<'_>) -> String {
    format!(
        "{}\n**Ours, next to it** (this run, {n} pairs): unique `hybrid` over `btree`: memory \
         {}; insert-only {}; read/write {}; scan/insert {}. Non-unique memory: {}. \
         `hybrid-compressed` over `hybrid` (unique memory): {}.\n",
        PAPER_FIGURE_7.trim_end(),
        ratios_text(&|k| m.vs(("hybrid", k, true, OWN))),
        ratios_text(&|k| m.vs(("hybrid", k, true, INSERT_ONLY))),
        ratios_text(&|k| m.vs(("hybrid", k, true, READ_WRITE))),
        ratios_text(&|k| m.vs(("hybrid", k, true, SCAN_INSERT))),
        ratios_text(&|k| m.vs(("hybrid", k, false, OWN))),
        ratios_text(&|k| ratio(
            m.get(("hybrid-compressed", k, true, OWN)),
            m.get(("hybrid", k, true, OWN))
        )),
    )
}

/// "What was run": the indexes, the method, the repetitions and each key set's shape.
fn ycsb_facts(ctx: &ExperimentContext<'_>, labels: &[&str], shapes: &[Shape]) -> Vec<String> {
    let mut facts = vec![
        format!(
            "indexes: {} (the hybrid kinds with ratio 10, merge everything, background \
             merges, smallest merge {} entries)",
            labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", "),
            options(ctx.n).min_merge
        ),
        YCSB_METHOD.to_string(),
        format!(
            "repetitions: {} (interleaved index by index), seed {}",
            ctx.repeat, ctx.seed
        ),
    ];
    for s in shapes {
        facts.push(format!(
            "{} {}: {} distinct keys, {} pairs loaded; operations per pass: {}",
            s.kind,
            uniqueness(s.unique),
            s.d,
            s.pairs,
            YCSB_RUNS
                .iter()
                .zip(&s.counts)
                .map(|((_, m), c)| format!("{m} {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    facts
}

/// How `hybrid-ycsb` measures, for "What was run".
const YCSB_METHOD: &str = "per key set and uniqueness, on one thread: each index loaded once \
     with 95% of the distinct keys (`insert-only`, timed until its last merge is done; memory \
     read then; one load per index, so the insert-only and memory figures are single runs: a \
     load is the experiment's longest measurement and repeating it would triple the run), \
     then, per repetition and interleaved index by index, on that same index `read-only` \
     (YCSB C), `read/write` (YCSB A; unique update = insert of the key with a new tid, \
     non-unique update = `remove_pair` of its current tid + insert of the new one) and \
     `scan/insert` (YCSB E: 95% ascending scans of 1-100 pairs from a Zipfian start key, 5% \
     inserts of new keys), each timed until its merges are done; YCSB streams from `ycsb.rs` \
     (scrambled Zipfian, theta 0.99), each repetition running its own chunk of one stream (so \
     updates and inserts never repeat, and the index changes from pass to pass as a running \
     database's would)";
