//! `hybrid-ycsb` (Figures 7 and 13): `btree`, `hybrid` and `hybrid-compressed` on YCSB
//! workloads, unique and non-unique.

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

/// `hybrid-ycsb`.
pub(crate) fn run_ycsb(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let n = ctx.n;
    let opts = options(n);
    let ops = ((n as f64 * YCSB_OPS_FRACTION) as usize).max(1);
    let scan_ops = ((n as f64 * YCSB_SCAN_OPS_FRACTION) as usize).max(1);
    let mut cells = Cells::default();
    let mut shapes = Vec::new();
    let progress =
        crate::run::progress_bar((KEYSETS.len() * 2 * (ctx.repeat + 1) * INDEXES.len()) as u64);
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
