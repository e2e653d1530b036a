//! `hybrid-merge` (Figure 6): every merge's duration against the static stage's size.

use super::*;

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
pub(super) fn ns_per_entry(m: &MergeRecord) -> f64 {
    m.duration.as_secs_f64() * 1e9 / m.static_after.max(1) as f64
}

/// Of the merges with at least `from` static entries before them: the largest's ns/entry over
/// the smallest's.
pub(super) fn linearity(records: &[MergeRecord], from: usize) -> Option<f64> {
    let big: Vec<&MergeRecord> = records.iter().filter(|m| m.static_before >= from).collect();
    let smallest = big.iter().min_by_key(|m| m.static_before)?;
    let largest = big.iter().max_by_key(|m| m.static_before)?;
    (big.len() >= 2).then(|| ns_per_entry(largest) / ns_per_entry(smallest))
}

/// Every repetition's merge records of one key set.
type Runs = Vec<Vec<MergeRecord>>;

/// `hybrid-merge`.
pub(crate) fn run_merge(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let mut cells = Cells::default();
    let mut merges: Vec<(KeySetKind, Runs)> = Vec::new();
    let mut extra = Vec::new();
    for &kind in KEYSETS {
        let runs = measure_merges(ctx, &mut cells, &mut extra, kind);
        merges.push((kind, runs));
    }

    let mut plots = Vec::new();
    for (kind, runs) in &merges {
        merge_time_plot(ctx, &mut plots, *kind, runs)?;
    }
    ns_per_entry_plot(ctx, &mut plots, &merges)?;

    finish(
        ctx,
        &cells,
        extra,
        Written {
            summary: merge_summary(ctx, &cells),
            sections: vec![("Every merge".to_string(), every_merge(&merges))],
            paper: merge_paper(ctx.n, &cells),
            targets: merge_targets(ctx.n, &cells),
            facts: merge_facts(ctx),
            plots,
        },
    )
}

/// Loads `kind` keys into `hybrid` once per repetition, recording each load's cells into
/// `cells` and one row per merge into `extra`; returns each repetition's merge records.
fn measure_merges(
    ctx: &ExperimentContext<'_>,
    cells: &mut Cells,
    extra: &mut Vec<Row>,
    kind: KeySetKind,
) -> Runs {
    let (name, n) = (ctx.experiment.name, ctx.n);
    eprintln!("{name}: {kind}: generating {n} keys");
    let keys = kind.generate(n, ctx.seed);
    let mut runs = Vec::new();
    for rep in 0..ctx.repeat {
        let plan = LoadPlan {
            loaded: n,
            per_key: 1,
        };
        match load(IndexKind::Hybrid, &keys, true, plan, &options(n)) {
            Ok(l) => {
                let stats = record_merges(cells, kind, n, &l);
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
    runs
}

/// Records a load of `n` `kind` keys and its merges in `cells`; returns its merge statistics.
fn record_merges(cells: &mut Cells, kind: KeySetKind, n: usize, l: &Loaded) -> HybridStats {
    record_load(cells, "hybrid", kind, true, l);
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
    if let Some(r) = linearity(&stats.records, n / LINEAR_FROM_FRACTION) {
        cells.add(at("linearity"), "x", n, Ok(r));
    }
    stats
}

/// Draws every merge's time against the static size before it, one line per repetition of
/// `kind` (nothing without a repetition).
fn merge_time_plot(
    ctx: &ExperimentContext<'_>,
    plots: &mut Vec<(String, String)>,
    kind: KeySetKind,
    runs: &Runs,
) -> Result<(), String> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    let labels: Vec<String> = first.iter().map(|m| fmt_items(m.static_before)).collect();
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(rep, records)| {
            // One line per repetition, each merge measured once: no error bars.
            let values =
                (0..first.len()).map(|i| records.get(i).map(|m| m.duration.as_secs_f64() * 1e3));
            plain(format!("repetition {}", rep + 1), values)
        })
        .collect();
    let file = format!("merge-{kind}.png");
    let title = format!(
        "{}: merge time (ms) vs static size before the merge, {kind}",
        ctx.experiment.name
    );
    let x_desc = "static stage entries before the merge (repetition 1's merges, in order)";
    let texts = [title.as_str(), x_desc, "merge time (ms)"];
    draw_merge_lines(ctx, plots, file, texts, &labels, &series)
}

/// Draws each key set's merge time per static entry against the merge number (repetition 1).
fn ns_per_entry_plot(
    ctx: &ExperimentContext<'_>,
    plots: &mut Vec<(String, String)>,
    merges: &[(KeySetKind, Runs)],
) -> Result<(), String> {
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
    let title = format!(
        "{}: merge time per static entry (ns), repetition 1",
        ctx.experiment.name
    );
    let texts = [title.as_str(), "merge number", "ns per static entry"];
    draw_merge_lines(ctx, plots, file, texts, &labels, &series)
}

/// Draws the line chart `file` of `series` over `x_labels`, captioned `[title, x_desc,
/// y_desc]`, and adds it to `plots`.
fn draw_merge_lines(
    ctx: &ExperimentContext<'_>,
    plots: &mut Vec<(String, String)>,
    file: String,
    [title, x_desc, y_desc]: [&str; 3],
    x_labels: &[String],
    series: &[Series],
) -> Result<(), String> {
    let chart = LineChart {
        title,
        x_desc,
        y_desc,
        x_labels,
        series,
        phases: None,
    };
    line_plot(ctx, plots, file, &chart)
}

/// The median of `measure` of `hybrid` on `keys`.
fn median(cells: &Cells, keys: KeySetKind, measure: &'static str) -> Option<f64> {
    cells.median(("hybrid", keys, true, measure))
}

/// The summary table: one row per key set.
fn merge_summary(ctx: &ExperimentContext<'_>, cells: &Cells) -> String {
    let mut summary = format!(
        "Insert-only loads of {} keys into `hybrid` (ratio 10, background merges); medians of \
         {} repetitions. Linearity: the time per static entry of the largest merge over that \
         of the smallest merge with at least {} static entries (1.00 = exactly linear).\n\n\
         | keys | merges | largest merge ms | its ns/entry | linearity | merge time / load | \
         insert-only Mops/s | own B/key |\n|---|---|---|---|---|---|---|---|\n",
        ctx.n,
        ctx.repeat,
        fmt_items(ctx.n / LINEAR_FROM_FRACTION)
    );
    for &keys in KEYSETS {
        let cell = |measure, decimals| fmt_opt(median(cells, keys, measure), decimals);
        let _ = writeln!(
            summary,
            "| {keys} | {} | {} | {} | {} | {}% | {} | {} |",
            cell("merges", 0),
            cell("largest merge", 1),
            cell("largest ns/entry", 1),
            cell("linearity", 2),
            cell("merge share", 0),
            cell(INSERT_ONLY, 2),
            cell(OWN, 1),
        );
    }
    summary
}

/// The "Every merge" section: a table of repetition 1's merges per key set.
fn every_merge(merges: &[(KeySetKind, Runs)]) -> String {
    let mut per_merge = String::new();
    for (kind, runs) in merges {
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
    per_merge
}

/// The target of issue 5 that `hybrid-merge` speaks to: merge time linear in the static size.
fn merge_targets(n: usize, cells: &Cells) -> Vec<Target> {
    vec![all_hold(
        format!(
            "merge time linear in the static stage's size (ours: time per entry of the largest \
             merge at most {LINEAR_MAX_RATIO}x that of the smallest merge with at least {} \
             static entries)",
            fmt_items(n / LINEAR_FROM_FRACTION)
        ),
        &KEYSETS
            .iter()
            .map(|&k| (k.name().to_string(), median(cells, k, "linearity")))
            .collect::<Vec<_>>(),
        |r| r <= LINEAR_MAX_RATIO,
    )]
}

/// "What the paper reports", with this run's figures next to it.
fn merge_paper(n: usize, cells: &Cells) -> String {
    format!(
        "{}\n**Ours, next to it** (this run, {n} keys): time per entry of the largest merge \
         over the smallest one from {} entries: {}; largest merge: {}.\n",
        PAPER_FIGURE_6.trim_end(),
        fmt_items(n / LINEAR_FROM_FRACTION),
        ratios_text(&|k| median(cells, k, "linearity")),
        KEYSETS
            .iter()
            .map(|&k| format!("{k} {} ms", fmt_opt(median(cells, k, "largest merge"), 1)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// "What was run".
fn merge_facts(ctx: &ExperimentContext<'_>) -> Vec<String> {
    vec![
        format!(
            "index: `hybrid`, merge ratio 10, merge everything, background merges, smallest \
             merge {} entries; insert-only load of every key in the key set's order, one \
             thread, timed until the last merge is done",
            options(ctx.n).min_merge
        ),
        format!(
            "key sets: {}, {} keys each",
            KEYSETS
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", "),
            ctx.n
        ),
        format!(
            "merge records: `HybridIndex::stats().records` (static size before and after, \
             entries merged, start and wall time of each merge); repetitions: {}, seed {}",
            ctx.repeat, ctx.seed
        ),
    ]
}
