//! `hybrid-ratio` (Figure 11): merge ratios 1 to 100, insert-only then read-only.

use super::*;

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

pub(super) fn ratio_label(r: f64) -> String {
    format!("hybrid r={r}")
}

/// The key set of `hybrid-ratio`.
const RATIO_KEYS: KeySetKind = KeySetKind::Rand64;

/// One index of `hybrid-ratio`: its label, kind and options, how many keys it loads and its
/// read stream (an index into [`Streams`]).
struct Variant {
    label: String,
    index: IndexKind,
    options: HybridOptions,
    count: usize,
    stream: usize,
}

/// The Zipfian read streams of `hybrid-ratio`, one per distinct count of keys loaded:
/// (count, read positions, their keys).
struct Streams<'a> {
    keys: &'a KeySet,
    reads: usize,
    seed: u64,
    list: Vec<(usize, Vec<u32>, KeySet)>,
}

impl Streams<'_> {
    /// The stream of `reads` Zipfian reads among the first `count` keys, made on first use.
    fn of(&mut self, count: usize) -> usize {
        if let Some(i) = self.list.iter().position(|(c, _, _)| *c == count) {
            return i;
        }
        let positions = zipf_positions(count, self.reads, self.seed);
        let gathered = self.keys.gather(&positions);
        self.list.push((count, positions, gathered));
        self.list.len() - 1
    }
}

/// `hybrid-ratio`.
pub(crate) fn run_ratio(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let (name, n) = (ctx.experiment.name, ctx.n);
    let reads = ((n as f64 * RATIO_READS_FRACTION) as usize).max(1);
    eprintln!("{name}: generating {n} keys");
    let keys = RATIO_KEYS.generate(n, ctx.seed);
    let mut streams = Streams {
        keys: &keys,
        reads,
        seed: ctx.seed,
        list: Vec::new(),
    };
    let variants = ratio_variants(&mut streams, n);
    let mut cells = Cells::default();
    measure_variants(ctx, &mut cells, &keys, &variants, &streams);
    let plots = ratio_plots(ctx, &cells)?;
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary: ratio_summary(ctx, &cells, &variants, reads),
            sections: Vec::new(),
            paper: ratio_paper(&cells, n),
            targets: ratio_targets(&cells),
            facts: ratio_facts(ctx),
            plots,
        },
    )
}

/// `btree` over all `n` keys, then `hybrid` at every ratio of [`RATIOS`] with blocking
/// merges over its [`half_full_count`]; their read streams from `streams`.
fn ratio_variants(streams: &mut Streams<'_>, n: usize) -> Vec<Variant> {
    let base = options(n);
    let mut variants = vec![Variant {
        label: "btree".to_string(),
        index: IndexKind::BTree,
        options: base.clone(),
        count: n,
        stream: streams.of(n),
    }];
    for &r in RATIOS {
        let options = HybridOptions {
            trigger: MergeTrigger::Ratio(r),
            mode: MergeMode::Blocking,
            ..base.clone()
        };
        let count = half_full_count(n, &options);
        variants.push(Variant {
            label: ratio_label(r),
            index: IndexKind::Hybrid,
            options,
            count,
            stream: streams.of(count),
        });
    }
    variants
}

/// One load per variant (timed: insert-only), every loaded index kept, then the repetitions
/// of the read pass interleaved variant by variant.
fn measure_variants(
    ctx: &ExperimentContext<'_>,
    cells: &mut Cells,
    keys: &KeySet,
    variants: &[Variant],
    streams: &Streams<'_>,
) {
    let name = ctx.experiment.name;
    let mut loaded = Vec::new();
    for v in variants {
        let plan = LoadPlan {
            loaded: v.count,
            per_key: 1,
        };
        match load(v.index, keys, true, plan, &v.options) {
            Ok(l) => {
                record_variant_load(cells, v, &l);
                eprintln!(
                    "{name}: {}: loaded {} keys in {:.1} s",
                    v.label, v.count, l.secs
                );
                loaded.push((v, l));
            }
            Err(e) => cells.add(
                (&v.label, RATIO_KEYS, true, INSERT_ONLY),
                MOPS,
                v.count,
                Err(e),
            ),
        }
    }
    for rep in 0..ctx.repeat {
        for (v, l) in &loaded {
            let (_, positions, stream) = &streams.list[v.stream];
            let mops = lookups(stream, positions, ctx.n, |k| l.index.get(k).ok().flatten());
            cells.add((&v.label, RATIO_KEYS, true, READ_ONLY), MOPS, v.count, mops);
        }
        eprintln!("{name}: reads, repetition {}/{}", rep + 1, ctx.repeat);
    }
}

/// Records variant `v`'s load `l`: throughput and memory, and for a hybrid index its merges
/// and the dynamic stage's fill (its entries over the trigger).
fn record_variant_load(cells: &mut Cells, v: &Variant, l: &Loaded) {
    let label = v.label.as_str();
    record_load(cells, label, RATIO_KEYS, true, l);
    if let Some(stats) = l.index.stats_as::<HybridStats>() {
        let trigger = v.options.merge_threshold(stats.static_len).max(1);
        cells.add(
            (label, RATIO_KEYS, true, "dynamic fill"),
            "%",
            v.count,
            Ok(100.0 * stats.dynamic_len as f64 / trigger as f64),
        );
        cells.add(
            (label, RATIO_KEYS, true, "merges"),
            "count",
            v.count,
            Ok(stats.merges as f64),
        );
    }
}

/// The median of `label`'s `measure`.
fn ratio_cell(cells: &Cells, label: &str, measure: &'static str) -> Option<f64> {
    cells.median((label, RATIO_KEYS, true, measure))
}

/// `label`'s median `measure` over `btree`'s.
fn over_btree(cells: &Cells, label: &str, measure: &'static str) -> Option<f64> {
    ratio(
        ratio_cell(cells, label, measure),
        ratio_cell(cells, "btree", measure),
    )
}

/// The line charts of `hybrid-ratio`: throughput and memory against the merge ratio, `btree`
/// as a flat line.
fn ratio_plots(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
) -> Result<Vec<(String, String)>, String> {
    let name = ctx.experiment.name;
    let x_labels: Vec<String> = RATIOS.iter().map(|r| r.to_string()).collect();
    let point = |label: &str, measure| cells.point((label, RATIO_KEYS, true, measure));
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
    Ok(plots)
}

/// The summary table of `hybrid-ratio`, `reads` lookups per read pass.
fn ratio_summary(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
    variants: &[Variant],
    reads: usize,
) -> String {
    let n = ctx.n;
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
    for Variant { label, count, .. } in variants {
        let cell = |measure| ratio_cell(cells, label, measure);
        let vs_btree = |measure, decimals| {
            with_ratio(cell(measure), ratio_cell(cells, "btree", measure), decimals)
        };
        let _ = writeln!(
            summary,
            "| {RATIO_KEYS} | `{label}` | {count} | {} | {} | {} | {} | {} |",
            fmt_opt(cell("merges"), 0),
            cell("dynamic fill").map_or_else(|| "-".to_string(), |f| format!("{f:.0}%")),
            vs_btree(INSERT_ONLY, 2),
            vs_btree(READ_ONLY, 2),
            vs_btree(OWN, 1),
        );
    }
    summary
}

/// The targets of issue 5 that `hybrid-ratio` speaks to, at the default ratio.
fn ratio_targets(cells: &Cells) -> Vec<Target> {
    let default = ratio_label(10.0);
    vec![
        ratio_target(
            format!("read-only at least 0.9x `btree` (`{default}`, the default ratio, dynamic stage half full)"),
            over_btree(cells, &default, READ_ONLY),
            |r| r >= 0.9,
        ),
        ratio_target(
            format!("insert-only at least 0.7x `btree` (`{default}`)"),
            over_btree(cells, &default, INSERT_ONLY),
            |r| r >= 0.7,
        ),
        ratio_target(
            "unique memory at most 0.5x `btree` (`hybrid r=10`, after the load)",
            over_btree(cells, &default, OWN),
            |r| r <= 0.5,
        ),
    ]
}

/// "What the paper reports" for `hybrid-ratio`, with this run's `n` keys next to it.
fn ratio_paper(cells: &Cells, n: usize) -> String {
    let trend = |measure| {
        ratio(
            ratio_cell(cells, &ratio_label(100.0), measure),
            ratio_cell(cells, &ratio_label(1.0), measure),
        )
    };
    format!(
        "{}\n**Ours, next to it** (this run, {n} keys): ratio 100 over ratio 1: insert-only \
         {}, read-only {}.\n",
        PAPER_FIGURE_11.trim_end(),
        fmt_ratio(trend(INSERT_ONLY)),
        fmt_ratio(trend(READ_ONLY)),
    )
}

/// "What was run" of `hybrid-ratio`.
fn ratio_facts(ctx: &ExperimentContext<'_>) -> Vec<String> {
    vec![
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
            options(ctx.n).min_merge
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
    ]
}
