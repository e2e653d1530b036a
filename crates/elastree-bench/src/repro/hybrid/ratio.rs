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

/// `hybrid-ratio`.
pub(crate) fn run_ratio(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
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
