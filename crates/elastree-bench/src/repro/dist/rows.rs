//! The rows of `dist-ycsb`: one per index x masters x threads x workload, and the lookups the
//! report makes in them.

use serde::Serialize;

use elastree_dist::DistKind;

use crate::runner::Summary;
use crate::ycsb::Ycsb;

/// The fields of a row, in CSV order.
pub const FIELDS: &[&str] = &[
    "experiment",
    "index",
    "masters",
    "threads",
    "workload",
    "n",
    "ops",
    "repeat",
    "mops_median",
    "mops_min",
    "mops_max",
    "round_trips_per_op",
    "masters_per_op",
    "top_refreshes",
    "stale_routes",
    "retries",
    "p50_ns",
    "p99_ns",
    "status",
    "note",
];

/// One row: an index on a cluster size at a thread count under a workload.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `dist-ycsb`.
    pub experiment: &'static str,
    /// `dist` or `dist-baseline`.
    pub index: &'static str,
    /// Masters of the cluster.
    pub masters: usize,
    /// Client threads.
    pub threads: usize,
    /// `ycsb-a` ... `ycsb-f`.
    pub workload: &'static str,
    /// Keys in the key set (95% loaded before the first run).
    pub n: usize,
    /// YCSB operations per repetition.
    pub ops: usize,
    /// Repetitions measured.
    pub repeat: usize,
    /// Median throughput over the repetitions, millions of YCSB operations per second.
    pub mops_median: Option<f64>,
    /// The slowest repetition.
    pub mops_min: Option<f64>,
    /// The fastest repetition.
    pub mops_max: Option<f64>,
    /// Network round trips per index operation, over every repetition.
    pub round_trips_per_op: Option<f64>,
    /// Distinct masters contacted per index operation, over every repetition.
    pub masters_per_op: Option<f64>,
    /// Times the client re-read the replicated top (over every repetition; `dist` only).
    pub top_refreshes: Option<u64>,
    /// Sub-tree calls routed by a stale top (`dist` only).
    pub stale_routes: Option<u64>,
    /// Requests retried (redirects, failovers, busy sub-trees).
    pub retries: Option<u64>,
    /// Median sampled latency of one YCSB operation, ns.
    pub p50_ns: Option<u64>,
    /// 99th-percentile sampled latency, ns.
    pub p99_ns: Option<u64>,
    /// `ok` or `failed`.
    pub status: &'static str,
    /// What failed.
    pub note: Option<String>,
}

impl Row {
    /// The throughput's median over the runs.
    pub(super) fn median(&self) -> Option<f64> {
        self.mops_median
    }

    /// The throughput's median, minimum and maximum over the runs.
    pub(super) fn mops(&self) -> Option<Summary> {
        Some(Summary {
            median: self.mops_median?,
            min: self.mops_min?,
            max: self.mops_max?,
        })
    }
}

/// The row of `index` on `masters` masters at `threads` threads under `workload`.
pub(super) fn find(
    rows: &[Row],
    index: DistKind,
    masters: usize,
    threads: usize,
    workload: Ycsb,
) -> Option<&Row> {
    rows.iter().find(|r| {
        r.index == index.name()
            && r.masters == masters
            && r.threads == threads
            && r.workload == workload.name()
    })
}

/// `dist`'s median throughput over `dist-baseline`'s on `masters` masters at `threads`
/// threads under `workload`, when both were measured and the baseline's is positive.
pub(super) fn speedup(rows: &[Row], masters: usize, threads: usize, workload: Ycsb) -> Option<f64> {
    let d = find(rows, DistKind::Tree, masters, threads, workload)?.median()?;
    let b = find(rows, DistKind::Baseline, masters, threads, workload)?.median()?;
    (b > 0.0).then(|| d / b)
}
