//! The Bw-tree paper's experiments, each a suite of [`super::baseline`] on two threads with
//! `bwtree` first and `btree` (the OLC B+-tree) the index every ratio is taken against, on
//! rand64, email, docterm and url keys:
//!
//! * `bwtree-update` (Figure 10): loads, lookups and the read/update mixes `updates-P`
//!   (P% blind updates of uniformly random keys, the rest lookups) for the Bw-tree in its
//!   page organizations beside `btree` and the concurrent peers;
//! * `bwtree-scan` (Figure 11 and the appendix table): the mixes `scan-update-L` (95% scans
//!   of L keys from uniformly random keys, 5% blind updates of Zipfian keys) for L from 1 to
//!   1,000,000, and the same streams read through cursors, a request of L keys at a time
//!   (`cursor-update-L` physiological, `logical-update-L` logical) for L = 10 and 1,000.
//!
//! Each ends with the targets it speaks to, PASS or FAIL from the run's numbers, and a line
//! plot per key set of throughput against the update share or the scan length.

use std::fmt::Write as _;

use elastree::{IndexKind, PageOrganization};

use super::baseline::{targeted_suite, Additions, Suite};
use super::document::{fmt_rate, Target};
use super::plots::{draw_lines, plain, LineChart};
use super::sbtree::{over, times};
use super::{ExperimentContext, Report};
use crate::keys::KeySetKind;
use crate::peers::{IndexSpec, Peer};
use crate::workload::{RunConfig, Workload};
use crate::ycsb::{Ycsb, SCAN_UPDATE_MIXES, UPDATE_MIXES};

/// Keys per key set at `--scale 1`: the targets' 10 million.
pub const BASE_N: usize = 10_000_000;

/// The fewest keys a Bw-tree experiment runs with (a few pages per thread).
pub const MIN_N: usize = 10_000;

/// The index every ratio is taken against.
const BTREE: &str = "btree";

/// The index under test (Prefix+Split pages, its default).
const BWTREE: &str = "bwtree";

/// The key sets of both experiments.
const KEYSETS: &[KeySetKind] = &[
    KeySetKind::Rand64,
    KeySetKind::Email,
    KeySetKind::DocTerm,
    KeySetKind::Url,
];

/// The concurrent peers that take keys of every length.
const PEERS: &[Peer] = &[Peer::Scc, Peer::SkipMap, Peer::MassTree, Peer::FernTree];

/// Both experiments run on two threads (the targets' figure).
const THREADS: usize = 2;

/// The suite's run of `workloads`: the Bw-tree in each of its page organizations, `btree`
/// and the peers on [`KEYSETS`], two threads.
fn config(ctx: &ExperimentContext<'_>, workloads: Vec<Workload>) -> RunConfig {
    let bwtree_pages = crate::peers::Elastree::PAGE_TREES
        .iter()
        .filter(|&&(kind, _)| kind == IndexKind::BwTree)
        .flat_map(|&(kind, organizations)| {
            organizations[1..]
                .iter()
                .map(move |&o| IndexSpec::Pages(kind, o))
        });
    RunConfig {
        indexes: std::iter::once(IndexSpec::Elastree(IndexKind::BwTree))
            .chain(bwtree_pages)
            .chain(std::iter::once(IndexSpec::Elastree(IndexKind::BTree)))
            .chain(PEERS.iter().map(|&p| IndexSpec::Peer(p)))
            .collect(),
        keysets: KEYSETS.to_vec(),
        n: ctx.n,
        workloads,
        threads: vec![THREADS],
        repeat: ctx.repeat,
        seed: ctx.seed,
        scan_len: crate::workload::DEFAULT_SCAN_LEN,
        budget: crate::peers::Budget::default(),
        tuning: crate::peers::SeqTreeTuning::default(),
        cluster: None,
    }
}

/// The smallest of `ratios` if every one is known.
fn worst(ratios: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    ratios
        .into_iter()
        .try_fold(f64::INFINITY, |least, r| r.map(|r| least.min(r)))
}

/// A line plot per key set: every index's two-thread median throughput over `points` (a
/// label and a workload each), written as `<prefix>-<keys>.png`; returns the plots.
fn line_plots(
    ctx: &ExperimentContext<'_>,
    suite: &Suite<'_>,
    (prefix, x_desc): (&str, &str),
    points: &[(String, Workload)],
) -> Result<Vec<(String, String)>, String> {
    let mut plots = Vec::new();
    let labels: Vec<String> = points.iter().map(|(label, _)| label.clone()).collect();
    for &keys in KEYSETS {
        let series: Vec<_> = suite
            .labels
            .iter()
            .map(|index| {
                plain(
                    index.clone(),
                    points
                        .iter()
                        .map(|&(_, w)| suite.median_at(index, keys, w, THREADS)),
                )
            })
            .collect();
        let file = format!("{prefix}-{}.png", keys.name());
        let title = format!(
            "{}: {keys}, {THREADS} threads, n={} (median Mops/s)",
            suite.name, suite.cfg.n
        );
        let chart = LineChart {
            title: &title,
            x_desc,
            y_desc: "Mops/s",
            x_labels: &labels,
            series: &series,
            phases: None,
        };
        draw_lines(&ctx.out.join(&file), &chart).map_err(|e| format!("{file}: {e}"))?;
        plots.push((format!("{keys}"), file));
    }
    Ok(plots)
}

/// A table of every index's two-thread median (Mops/s) on `keys` over `points`, with the
/// ratio to `btree` of the Bw-tree's figures.
fn points_table(suite: &Suite<'_>, points: &[(String, Workload)], keys: KeySetKind) -> String {
    let mut md = String::new();
    let w = &mut md;
    let heads: Vec<&str> = points.iter().map(|(label, _)| label.as_str()).collect();
    let _ = writeln!(w, "`{keys}`, {THREADS} threads, median Mops/s:\n");
    let _ = writeln!(w, "| index | {} |", heads.join(" | "));
    let _ = writeln!(w, "|---|{}", "---|".repeat(heads.len()));
    for label in suite.labels {
        let cells: Vec<String> = points
            .iter()
            .map(|&(_, wl)| {
                let v = suite.median_at(label, keys, wl, THREADS);
                let ratio = over(v, suite.median_at(BTREE, keys, wl, THREADS));
                match (v, ratio) {
                    (Some(v), Some(r)) if label != BTREE => format!("{} ({r:.2}x)", fmt_rate(v)),
                    (Some(v), _) => fmt_rate(v),
                    (None, _) => "-".to_string(),
                }
            })
            .collect();
        let _ = writeln!(w, "| `{label}` | {} |", cells.join(" | "));
    }
    md
}

/// `bwtree`'s two-thread median over `btree`'s, a row per key set and a column per point.
fn ratios_table(suite: &Suite<'_>, points: &[(String, Workload)]) -> String {
    let mut md = String::new();
    let w = &mut md;
    let heads: Vec<&str> = points.iter().map(|(label, _)| label.as_str()).collect();
    let _ = writeln!(
        w,
        "`{BWTREE}` over `{BTREE}`, ratio of the median throughputs on {THREADS} threads:\n"
    );
    let _ = writeln!(w, "| keys | {} |", heads.join(" | "));
    let _ = writeln!(w, "|---|{}", "---|".repeat(heads.len()));
    for &keys in KEYSETS {
        let cells: Vec<String> = points
            .iter()
            .map(|&(_, wl)| {
                over(
                    suite.median_at(BWTREE, keys, wl, THREADS),
                    suite.median_at(BTREE, keys, wl, THREADS),
                )
                .map_or_else(|| "-".to_string(), times)
            })
            .collect();
        let _ = writeln!(w, "| {keys} | {} |", cells.join(" | "));
    }
    md
}

/// Measures `cfg`, then returns its suite report (ratios to `btree`) with `targets` first,
/// `bwtree`'s ratios over `ratios`, a table per key set over `points` and their line plots.
fn run(
    ctx: &ExperimentContext<'_>,
    cfg: &RunConfig,
    targets: impl Fn(&Suite<'_>) -> Vec<Target>,
    plot: (&str, &str),
    points: &[(String, Workload)],
    ratios: &[(String, Workload)],
) -> Result<Report, String> {
    targeted_suite(ctx, cfg, (BTREE, "10 million keys"), |suite| {
        let tables: String = KEYSETS
            .iter()
            .map(|&keys| points_table(suite, points, keys))
            .collect::<Vec<_>>()
            .join("\n");
        Ok(Additions {
            targets: targets(suite),
            // The suite's own ratios, a column per workload, are too wide to read here.
            shown: format!("{}\n{tables}", ratios_table(suite, ratios)),
            replaces_ratios: true,
            sections: vec![("By key set".to_string(), tables)],
            plots: line_plots(ctx, suite, plot, points)?,
            facts: vec![format!(
                "{THREADS} threads; ratios are to {BTREE}, elastree's OLC B+-tree; `bwtree` \
                 has Prefix+Split pages, `bwtree-prefix` pages split in the middle, \
                 `bwtree-base` pages of whole keys (no prefix factored out, split in the \
                 middle, whole keys posted)"
            )],
        })
    })
}

/// `bwtree-update`.
pub(super) fn update(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let mixes: Vec<(String, Workload)> = UPDATE_MIXES
        .iter()
        .map(|&(p, _)| (format!("{p}%"), Workload::Ycsb(Ycsb::Updates(p))))
        .collect();
    let workloads = [Workload::Load, Workload::Lookup]
        .into_iter()
        .chain(mixes.iter().map(|&(_, w)| w))
        .collect();
    let cfg = config(ctx, workloads);
    let targets = |suite: &Suite<'_>| {
        let vs = |index: &str, base: &str, keys: KeySetKind, w: Workload| {
            over(
                suite.median_at(index, keys, w, THREADS),
                suite.median_at(base, keys, w, THREADS),
            )
        };
        let both = [KeySetKind::Rand64, KeySetKind::Email];
        let writes = [Workload::Load, Workload::Ycsb(Ycsb::Updates(100))];
        vec![
            Target::check(
                "lookups, 2 threads: at least 0.9x btree on rand64 and email (the smaller)",
                worst(both.map(|k| vs(BWTREE, BTREE, k, Workload::Lookup))),
                |r| r >= 0.9,
                times,
            ),
            Target::check(
                "inserts (load) and updates (updates-100), 2 threads: at least 0.8x btree on \
                 rand64 and email (the smallest)",
                worst(
                    both.iter()
                        .flat_map(|&k| writes.map(|w| vs(BWTREE, BTREE, k, w))),
                ),
                |r| r >= 0.8,
                times,
            ),
            Target::check(
                "lookups with Prefix+Split pages: at least 1.2x Base pages on docterm and \
                 email (the smaller)",
                worst([KeySetKind::DocTerm, KeySetKind::Email].map(|k| {
                    let base = crate::peers::Elastree::pages_name(
                        IndexKind::BwTree,
                        PageOrganization::Base,
                    );
                    vs(BWTREE, base, k, Workload::Lookup)
                })),
                |r| r >= 1.2,
                times,
            ),
        ]
    };
    let ratios: Vec<(String, Workload)> = [
        ("load".to_string(), Workload::Load),
        ("lookup".to_string(), Workload::Lookup),
    ]
    .into_iter()
    .chain(mixes.iter().cloned())
    .collect();
    run(
        ctx,
        &cfg,
        targets,
        ("updates", "blind updates (%)"),
        &mixes,
        &ratios,
    )
}

/// The scan lengths the cursor mixes run at: the two the targets name.
const CURSOR_LENGTHS: &[u32] = &[10, 1_000];

/// `bwtree-scan`.
pub(super) fn scan(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let mixes: Vec<(String, Workload)> = SCAN_UPDATE_MIXES
        .iter()
        .map(|&(len, _)| (len.to_string(), Workload::Ycsb(Ycsb::ScanUpdate(len))))
        .collect();
    // The same streams read through cursors, a request of L keys at a time: physiological
    // (`cursor-update-L`) and logical (`logical-update-L`).
    let cursors: Vec<(String, Workload)> = CURSOR_LENGTHS
        .iter()
        .flat_map(|&len| {
            [
                (
                    format!("{len} cursor"),
                    Workload::Ycsb(Ycsb::CursorUpdate(len)),
                ),
                (
                    format!("{len} logical"),
                    Workload::Ycsb(Ycsb::LogicalUpdate(len)),
                ),
            ]
        })
        .collect();
    let workloads = mixes.iter().chain(&cursors).map(|&(_, w)| w).collect();
    let cfg = config(ctx, workloads);
    let targets =
        |suite: &Suite<'_>| {
            let vs = |index: &str, base: &str, keys: KeySetKind, w: Workload, wb: Workload| {
                over(
                    suite.median_at(index, keys, w, THREADS),
                    suite.median_at(base, keys, wb, THREADS),
                )
            };
            let scan = Workload::Ycsb(Ycsb::ScanUpdate(1_000));
            let cursor = Workload::Ycsb(Ycsb::CursorUpdate(1_000));
            let (short, logical) = (
                Workload::Ycsb(Ycsb::CursorUpdate(10)),
                Workload::Ycsb(Ycsb::LogicalUpdate(10)),
            );
            vec![
            Target::check(
                "scans of 1,000 keys (with 5% updates), 2 threads: at least as fast as btree on \
                 every key set (the smallest ratio)",
                worst(KEYSETS.iter().map(|&k| vs(BWTREE, BTREE, k, scan, scan))),
                |r| r >= 1.0,
                times,
            ),
            Target::check(
                "scans of 1,000 keys read through cursors (cursor-update-1000), 2 threads: at \
                 least as fast as btree on every key set (the smallest ratio)",
                worst(KEYSETS.iter().map(|&k| vs(BWTREE, BTREE, k, cursor, cursor))),
                |r| r >= 1.0,
                times,
            ),
            Target::check(
                "scans of 10 keys through physiological cursors (cursor-update-10) at least \
                 1.2x the same through logical cursors (logical-update-10), bwtree, every key \
                 set (the smallest ratio)",
                worst(KEYSETS.iter().map(|&k| vs(BWTREE, BWTREE, k, short, logical))),
                |r| r >= 1.2,
                times,
            ),
        ]
        };
    let ratios: Vec<(String, Workload)> = mixes.iter().chain(&cursors).cloned().collect();
    let mut report = run(
        ctx,
        &cfg,
        targets,
        ("scans", "keys per scan"),
        &mixes,
        &ratios,
    )?;
    report.facts.push(
        "an operation is a scan (95%) or a blind update (5%): Mops/s counts both; a scan \
         visits L keys unless it reaches the end of the key set"
            .to_string(),
    );
    report.facts.push(format!(
        "`L cursor` and `L logical` (cursor-update-L, logical-update-L) run the stream of \
         scan-update-L with each scan a request for the next L keys of the thread's cursor, \
         opened at the scan's start key and kept for {} requests (a client paging through a \
         range, holding nothing of the index between requests): physiological cursors (the \
         Bw-tree's, which go straight to the page remembered when it passes validation) or \
         logical ones (the last key only: every request descends from the root); indexes \
         without a physiological cursor run logical ones in both",
        crate::ycsb::CURSOR_REQUESTS
    ));
    Ok(report)
}
