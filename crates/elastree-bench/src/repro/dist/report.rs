//! The report of `dist-ycsb`: the rows' files, the throughput plot, the summary table, the
//! scale-out section and the run's facts; the targets and the paper's numbers are beside
//! (`targets.rs`, `paper.rs`).

use std::fmt::Write as _;

use elastree_dist::{DistKind, RebalanceReport};

use super::measure::{Measured, Shape};
use super::paper::paper_section;
use super::rows::{find, speedup, Row, FIELDS};
use super::targets::{round_trip_bound, targets_section};
use super::{ops_of, ops_per_run, ARITY, KINDS, LOAD_THREADS, MASTERS, THREADS};
use crate::output::write_results;
use crate::repro::plots::{draw_grouped_bars, Point, Series};
use crate::repro::{ExperimentContext, Report};
use crate::ycsb::{loaded_keys, Ycsb};

/// Writes the rows and the plot and assembles the report.
pub(super) fn report(ctx: &ExperimentContext<'_>, m: Measured) -> Result<Report, String> {
    let rows = &m.rows;
    let mut files = write_results(ctx.out, FIELDS, rows)?;
    let plot = throughput_plot(ctx, rows)?;
    let targets_md = targets_section(rows, &m.shape, &m.rebalance);
    let summary = format!(
        "{}\n{}\n{targets_md}\n{}",
        how(ctx),
        summary_table(rows),
        round_trip_bound(rows)
    );
    let sections = vec![
        ("Summary".to_string(), summary.clone()),
        (
            "Scale-out: 3 to 4 masters".to_string(),
            scale_out_section(&m.rebalance, &m.shape),
        ),
        ("What the paper reports".to_string(), paper_section(rows)),
        ("Targets".to_string(), targets_md),
    ];
    files.push(plot.clone());
    Ok(Report {
        size: format!("{} keys", ctx.n),
        facts: facts(ctx, &m),
        sections,
        plots: vec![(
            "YCSB throughput, dist vs dist-baseline, 3 and 4 masters, 1 thread".to_string(),
            plot,
        )],
        raw: raw(),
        files,
        summary,
        failures: rows.iter().filter(|r| r.status != "ok").count(),
    })
}

/// The plot: one-thread throughput per workload, both kinds, both cluster sizes; the runs'
/// ranges as error bars. Returns its file name.
fn throughput_plot(ctx: &ExperimentContext<'_>, rows: &[Row]) -> Result<String, String> {
    let categories: Vec<&str> = Ycsb::ALL.iter().map(|y| y.name()).collect();
    let series: Vec<Series> = MASTERS
        .iter()
        .flat_map(|&masters| {
            KINDS.iter().map(move |&kind| {
                let values = Ycsb::ALL
                    .iter()
                    .map(|&y| find(rows, kind, masters, 1, y).and_then(Row::mops))
                    .map(|s| s.map(|s| Point::from(s).scaled(1e3)))
                    .collect();
                (format!("{kind}, {masters} masters"), values)
            })
        })
        .collect();
    let plot = "throughput.png".to_string();
    draw_grouped_bars(
        &ctx.out.join(&plot),
        &format!(
            "YCSB on a local Redis Cluster, 1 client thread: thousand ops/s ({} keys)",
            ctx.n
        ),
        &categories,
        &series,
    )?;
    Ok(plot)
}

/// How the runs were made: the paragraph above the summary table.
fn how(ctx: &ExperimentContext<'_>) -> String {
    let n = ctx.n;
    format!(
        "{n} rand64 keys ({} loaded before the runs), {} operations per run ({} for \
         ycsb-e's scans), median of {} runs, nodes of {ARITY} entries (the paper's arity) in \
         both trees; kops/s = thousand YCSB operations per second; \
         RT/op = network round trips per index operation (a read-modify-write is two \
         operations), masters/op = distinct masters contacted per operation. After the 3-master \
         runs a fourth master joined and `dist` was rebalanced.\n",
        loaded_keys(n),
        ops_per_run(n),
        ops_of(Ycsb::E, n),
        ctx.repeat
    )
}

/// The main table: both kinds side by side per cluster size, thread count and workload.
fn summary_table(rows: &[Row]) -> String {
    let mut table = String::new();
    let w = &mut table;
    table_head(
        w,
        "| keys | masters | threads | workload | `dist` kops/s | `dist-baseline` kops/s | \
         ratio | `dist` RT/op | `dist-baseline` RT/op | `dist` masters/op | \
         `dist-baseline` masters/op |",
    );
    for &masters in &MASTERS {
        for &threads in THREADS {
            for &y in Ycsb::ALL {
                let d = find(rows, DistKind::Tree, masters, threads, y);
                let b = find(rows, DistKind::Baseline, masters, threads, y);
                let _ = writeln!(
                    w,
                    "| rand64 | {masters} | {threads} | {y} | {} | {} | {} | {} | {} | {} | {} |",
                    fmt_kops(d.and_then(Row::median)),
                    fmt_kops(b.and_then(Row::median)),
                    fmt_ratio(speedup(rows, masters, threads, y)),
                    fmt2(d.and_then(|r| r.round_trips_per_op)),
                    fmt2(b.and_then(|r| r.round_trips_per_op)),
                    fmt2(d.and_then(|r| r.masters_per_op)),
                    fmt2(b.and_then(|r| r.masters_per_op)),
                );
            }
        }
    }
    table
}

/// The scale-out: what `add_master()` and `rebalance()` did, and the baseline's height.
fn scale_out_section(r: &RebalanceReport, shape: &Shape) -> String {
    let mut scale = String::new();
    let w = &mut scale;
    let _ = writeln!(
        w,
        "`add_master()` grew the cluster from 3 to {} masters (Redis moved a share of the \
         slots and their keys to the new one); a second `dist` client then ran `rebalance()`:\n",
        r.masters
    );
    table_head(
        w,
        "| sub-trees before | sub-trees after | roots lowered under | sub-trees moved | \
         per master | imbalance |",
    );
    let _ = writeln!(
        w,
        "| {} | {} | {} | {} | {} | {:.0}% |",
        r.subtrees_before,
        r.subtrees_after,
        r.lowered,
        r.moved,
        per_master(r),
        r.imbalance() * 100.0
    );
    let _ = writeln!(
        w,
        "\nImbalance is the largest relative deviation of a master's sub-tree count from the \
         mean. `dist-baseline` places each node by its own key, so Redis's slot migration \
         spread it by itself. Tree height of `dist-baseline`: {}.",
        joined(shape.heights.iter().zip(MASTERS), |(h, masters)| format!(
            "{h} on {masters} masters"
        ))
    );
    scale
}

/// The facts of the run: the cluster, the keys and their load, the workloads, the indexes.
fn facts(ctx: &ExperimentContext<'_>, m: &Measured) -> Vec<String> {
    let n = ctx.n;
    let mut facts = vec![
        "cluster: local Redis Cluster started by the experiment, 3 masters with 1 replica \
         each (writes acknowledged after `WAIT 1`), then a 4th master; all on 127.0.0.1"
            .to_string(),
        format!(
            "keys: {n} rand64 (seed {}), {} loaded untimed on {LOAD_THREADS} threads (load \
             time: {})",
            ctx.seed,
            loaded_keys(n),
            joined(&m.loads, |(k, s)| format!("{k} {s:.1} s"))
        ),
        format!(
            "workloads: YCSB A-F in order on the same index, {} operations per run ({} for \
             E), {} repetitions, threads {THREADS:?}",
            ops_per_run(n),
            ops_of(Ycsb::E, n),
            ctx.repeat
        ),
        format!(
            "indexes: `dist` (STI-BT: co-located sub-trees as Redis Functions, cached \
             replicated top) and `dist-baseline` (every node its own key, one node per round \
             trip), nodes of {ARITY} entries (the paper's arity)"
        ),
    ];
    if let Some(subtrees) = m.shape.subtrees {
        facts.push(format!(
            "`dist` sub-trees after the load on 3 masters: {subtrees}"
        ));
    }
    facts
}

/// Where the raw rows are and what their fields are.
fn raw() -> String {
    format!(
        "`results.jsonl` (one JSON object per index x masters x threads x workload) and \
         `results.csv` (the same fields: {}), documented in \
         `crates/elastree-bench/src/repro/dist/rows.rs`.",
        joined(FIELDS, |f| format!("`{f}`"))
    )
}

/// A Markdown table's header row `header` and the separator row under it.
pub(super) fn table_head(w: &mut String, header: &str) {
    let columns = header.matches('|').count().saturating_sub(1);
    let _ = writeln!(w, "{header}");
    let _ = writeln!(w, "|{}", "---|".repeat(columns));
}

/// The items, each formatted by `each`, separated by commas.
pub(super) fn joined<T>(
    items: impl IntoIterator<Item = T>,
    each: impl FnMut(T) -> String,
) -> String {
    items.into_iter().map(each).collect::<Vec<_>>().join(", ")
}

/// Sub-trees per master after the rebalance, comma-separated.
pub(super) fn per_master(r: &RebalanceReport) -> String {
    joined(r.per_master.values(), |c| c.to_string())
}

/// `v` formatted by `f`, or `-` when unknown.
pub(super) fn or_dash<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// Millions of operations per second as thousands, one decimal.
fn fmt_kops(mops: Option<f64>) -> String {
    or_dash(mops, |m| format!("{:.1}", m * 1e3))
}

/// Two decimals.
pub(super) fn fmt2(v: Option<f64>) -> String {
    or_dash(v, |v| format!("{v:.2}"))
}

/// A ratio, one decimal with an `x`.
pub(super) fn fmt_ratio(r: Option<f64>) -> String {
    or_dash(r, |r| format!("{r:.1}x"))
}
