//! The SB-tree paper's experiments on the `tsensor` key set (8-byte time-series keys: a
//! millisecond timestamp and a sensor id, in arrival order with a fraction of delayed
//! readings), each a suite of [`super::baseline`] with `sbtree` first and `btree` the index
//! every ratio is taken against:
//!
//! * `sbtree-ingest` (Figures 6 and 7): in-order keys; load (insert-only), lookups, 100-key
//!   scans and the `mixed` workload ([`crate::mixed`]) on 1 and 2 threads;
//! * `sbtree-delayed` (Figure 8): insert-only loads with 0 to 50% of the keys delayed;
//! * `sbtree-latency` (Figure 10): the sampled latency of inserts, lookups and scans from the
//!   50th to the 99.99th percentile, 5% delayed (the key set's default);
//! * `sbtree-memory` (Figure 11 and Table 1): bytes per key after loads with 0, 20 and 50%
//!   delayed, by the counting allocator and by the index's own accounting.
//!
//! Each ends with the targets it speaks to, PASS or FAIL from the run's numbers.

use std::fmt::Write as _;

use super::baseline::{targeted_suite, Additions, Suite};
use super::document::Target;
use super::{ExperimentContext, Report};
use crate::keys::KeySetKind;
use crate::peers::{IndexSpec, Peer};
use crate::runner;
use crate::workload::{RunConfig, Workload};

/// Keys per key set at `--scale 1`: the targets' 10 million.
pub const BASE_N: usize = 10_000_000;

/// The fewest keys an SB-tree experiment runs with (the mixed workload's longest scan and
/// a few of the index's blocks).
pub const MIN_N: usize = 10_000;

/// The index every ratio is taken against.
const BTREE: &str = "btree";

/// The index under test.
const SBTREE: &str = "sbtree";

/// The peers beside the two: the ordered map of the standard library, and the concurrent
/// ordered indexes that take 8-byte keys (an adaptive radix tree, a B+-tree, Masstree).
const PEERS: &[Peer] = &[Peer::BTreeMap, Peer::Congee, Peer::Scc, Peer::MassTree];

/// The length of the scans of `sbtree-ingest` and `sbtree-latency` (the targets' 100 keys).
const SCAN_LEN: usize = 100;

/// The delayed fractions of `sbtree-delayed`.
const DELAYED: &[f64] = &[0.0, 0.1, 0.2, 0.3, 0.4, 0.5];

/// The delayed fractions of `sbtree-memory`.
const MEMORY_DELAYED: &[f64] = &[0.0, 0.2, 0.5];

/// The latency percentiles reported by `sbtree-latency`.
const PERCENTILES: &[(f64, &str)] = &[
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
];

/// The suite's run: `sbtree`, `btree` and the peers on `keysets`.
fn config(
    ctx: &ExperimentContext<'_>,
    keysets: Vec<KeySetKind>,
    workloads: Vec<Workload>,
    threads: Vec<usize>,
) -> RunConfig {
    RunConfig {
        indexes: [elastree::IndexKind::SbTree, elastree::IndexKind::BTree]
            .into_iter()
            .map(IndexSpec::Elastree)
            .chain(PEERS.iter().map(|&p| IndexSpec::Peer(p)))
            .collect(),
        keysets,
        n: ctx.n,
        workloads,
        threads,
        repeat: ctx.repeat,
        seed: ctx.seed,
        scan_len: SCAN_LEN,
        budget: crate::peers::Budget::default(),
        tuning: crate::peers::SeqTreeTuning::default(),
        cluster: None,
    }
}

/// `tsensor` with each of `fractions` delayed.
fn tsensor_sets(fractions: &[f64]) -> Result<Vec<KeySetKind>, String> {
    fractions.iter().map(|&f| KeySetKind::tsensor(f)).collect()
}

/// An experiment's own sections of its report (heading, Markdown), and what of them its
/// README block shows after the targets and the ratios.
type Extra = (Vec<(String, String)>, String);

/// Measures `cfg` and returns its suite report (ratios to `btree`) with `targets` (computed
/// from the measured suite) first and `extra` sections (likewise) after the results.
fn run_suite(
    ctx: &ExperimentContext<'_>,
    cfg: &RunConfig,
    targets: impl Fn(&Suite<'_>) -> Vec<Target>,
    extra: impl Fn(&Suite<'_>) -> Extra,
) -> Result<Report, String> {
    targeted_suite(ctx, cfg, (BTREE, "10 million keys"), |suite| {
        let (sections, shown) = extra(suite);
        Ok(Additions {
            targets: targets(suite),
            sections,
            shown,
            facts: vec![format!(
                "tsensor: 8-byte keys, a 6-byte millisecond timestamp and a 2-byte sensor id, \
                 loaded in arrival order; a delayed reading arrives 16 to 16,384 readings \
                 late; ratios are to {BTREE}, elastree's B+-tree"
            )],
            ..Additions::default()
        })
    })
}

/// `a / b`, when both are known and `b` is positive.
pub(super) fn over(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.zip(b.filter(|&b| b > 0.0)).map(|(a, b)| a / b)
}

/// A ratio as a figure.
pub(super) fn times(r: f64) -> String {
    format!("{r:.2}x")
}

/// `sbtree-ingest`.
pub(super) fn ingest(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let keys = KeySetKind::tsensor(0.0)?;
    let workloads = vec![
        Workload::Load,
        Workload::Lookup,
        Workload::Scan,
        Workload::Mixed,
    ];
    let cfg = config(ctx, vec![keys], workloads.clone(), vec![1, 2]);
    let targets = |suite: &Suite<'_>| {
        let at =
            |index: &str, w: Workload, threads: usize| suite.median_at(index, keys, w, threads);
        let vs_btree = |w: Workload| over(at(SBTREE, w, 1), at(BTREE, w, 1));
        vec![
            Target::check(
                "in-order inserts, 1 thread: at least 5x btree",
                vs_btree(Workload::Load),
                |r| r >= 5.0,
                times,
            ),
            Target::check(
                "in-order inserts, 2 threads: at least 1.8x the 1-thread figure",
                over(at(SBTREE, Workload::Load, 2), at(SBTREE, Workload::Load, 1)),
                |r| r >= 1.8,
                times,
            ),
            Target::check(
                "mixed workload, 1 thread: at least 2x btree",
                vs_btree(Workload::Mixed),
                |r| r >= 2.0,
                times,
            ),
            Target::check(
                "lookups, 1 thread: at least 1.0x btree",
                vs_btree(Workload::Lookup),
                |r| r >= 1.0,
                times,
            ),
            Target::check(
                "100-key scans, 1 thread: at least 1.3x btree",
                vs_btree(Workload::Scan),
                |r| r >= 1.3,
                times,
            ),
        ]
    };
    let threads_table = |suite: &Suite<'_>, labels: &[&str]| {
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(
            w,
            "Median throughput (Mops/s; scan: M keys/s) on 1 and 2 threads, and the 2-thread \
             figure over the 1-thread one:\n"
        );
        let _ = writeln!(w, "| index | workload | 1 thread | 2 threads | scaling |");
        let _ = writeln!(w, "|---|---|---|---|---|");
        for &label in labels {
            for &wl in &workloads {
                let (one, two) = (
                    suite.median_at(label, keys, wl, 1),
                    suite.median_at(label, keys, wl, 2),
                );
                let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
                let scaling = over(two, one).map_or_else(|| "-".to_string(), times);
                let _ = writeln!(
                    w,
                    "| `{label}` | {wl} | {} | {} | {scaling} |",
                    fmt(one),
                    fmt(two)
                );
            }
        }
        md
    };
    let extra = |suite: &Suite<'_>| {
        let all: Vec<&str> = suite.labels.iter().map(String::as_str).collect();
        (
            vec![("Threads".to_string(), threads_table(suite, &all))],
            threads_table(suite, &[SBTREE, BTREE]),
        )
    };
    let mut report = run_suite(ctx, &cfg, targets, extra)?;
    report.facts.push(
        "mixed: half of the keys loaded untimed, then as many operations as keys left: 50% \
         inserts of the next keys (taken in batches of 256 from one shared cursor), 30% scans \
         of 10-100 keys, 10% scans of 5-10 keys, 10% lookups"
            .to_string(),
    );
    Ok(report)
}

/// `sbtree-delayed`.
pub(super) fn delayed(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let sets = tsensor_sets(DELAYED)?;
    let cfg = config(ctx, sets.clone(), vec![Workload::Load], vec![1]);
    let targets = |suite: &Suite<'_>| {
        let vs_btree = |fraction: f64| {
            let keys = KeySetKind::tsensor(fraction).ok()?;
            over(
                suite.median(SBTREE, keys, Workload::Load),
                suite.median(BTREE, keys, Workload::Load),
            )
        };
        vec![
            Target::check(
                "inserts with 20% delayed: at least 3x btree",
                vs_btree(0.2),
                |r| r >= 3.0,
                times,
            ),
            Target::check(
                "inserts with 50% delayed: at least 1.5x btree",
                vs_btree(0.5),
                |r| r >= 1.5,
                times,
            ),
        ]
    };
    run_suite(ctx, &cfg, targets, |_| (Vec::new(), String::new()))
}

/// `sbtree-latency`.
pub(super) fn latency(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let keys = KeySetKind::tsensor(f64::from(crate::keys::TSENSOR_DEFAULT_DELAYED_PPM) / 1e6)?;
    let workloads = vec![Workload::Load, Workload::Lookup, Workload::Scan];
    let cfg = config(ctx, vec![keys], workloads.clone(), vec![1]);
    let percentile = |suite: &Suite<'_>, index: &str, w: Workload, q: f64| {
        super::hybrid::quantile(&suite.sorted_latencies(index, keys, w), q)
    };
    let targets = move |suite: &Suite<'_>| {
        let p999 = |index: &str| percentile(suite, index, Workload::Load, 0.999);
        let ratio = over(p999(SBTREE), p999(BTREE));
        vec![Target::check(
            "p99.9 insert latency below btree's (sbtree's over btree's)",
            ratio,
            |r| r < 1.0,
            |r| {
                format!(
                    "{:.0} ns vs {:.0} ns ({r:.2}x)",
                    p999(SBTREE).unwrap_or(0.0),
                    p999(BTREE).unwrap_or(0.0)
                )
            },
        )]
    };
    let table = move |suite: &Suite<'_>| {
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(
            w,
            "Sampled latency of one operation (every {}th of every repetition; a scan is one \
             operation of {SCAN_LEN} keys), in nanoseconds:\n",
            runner::timing::LATENCY_SAMPLE_EVERY
        );
        let names: Vec<&str> = PERCENTILES.iter().map(|&(_, name)| name).collect();
        let _ = writeln!(w, "| workload | index | {} |", names.join(" | "));
        let _ = writeln!(w, "|---|---|{}", "---|".repeat(names.len()));
        for &wl in &workloads {
            for label in suite.labels {
                let cells: Vec<String> = PERCENTILES
                    .iter()
                    .map(|&(q, _)| {
                        percentile(suite, label, wl, q)
                            .map_or_else(|| "-".to_string(), |ns| format!("{ns:.0}"))
                    })
                    .collect();
                let _ = writeln!(w, "| {wl} | `{label}` | {} |", cells.join(" | "));
            }
        }
        (vec![("Latency percentiles".to_string(), md.clone())], md)
    };
    run_suite(ctx, &cfg, targets, table)
}

/// `sbtree-memory`.
pub(super) fn memory(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let sets = tsensor_sets(MEMORY_DELAYED)?;
    let cfg = config(ctx, sets.clone(), vec![Workload::Load], vec![1]);
    let targets = |suite: &Suite<'_>| {
        // The largest ratio over the delayed fractions.
        let worst = sets
            .iter()
            .map(|&keys| {
                over(
                    suite.bytes_per_key(SBTREE, keys).0,
                    suite.bytes_per_key(BTREE, keys).0,
                )
            })
            .try_fold(0.0f64, |worst, r| r.map(|r| worst.max(r)));
        vec![Target::check(
            "memory at most 0.8x btree's on the same keys (0, 20 and 50% delayed; the largest \
             ratio)",
            worst,
            |r| r <= 0.8,
            times,
        )]
    };
    run_suite(ctx, &cfg, targets, |_| (Vec::new(), String::new()))
}
