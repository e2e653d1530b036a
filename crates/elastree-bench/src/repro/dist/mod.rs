//! `dist-ycsb`: the STI-BT paper's Figure 2 and Table 2 on a local Redis Cluster. YCSB A-F on
//! the distributed index (`dist`) and its Baseline (`dist-baseline`): throughput, network
//! round trips per index operation and distinct masters contacted per operation; then one
//! more master joins, `dist` rebalances (the cut-off adapts, sub-trees move) and A-F run
//! again on 4 masters.
//!
//! The run, all in one process:
//!
//! 1. a local cluster of 3 masters with 1 replica each is started on free ports (stopped at
//!    the end, also on an error or a panic);
//! 2. `N` rand64 keys are generated; each kind gets one index (a fresh name), loaded untimed
//!    with the first 95% of the keys ([`loaded_keys`](crate::ycsb::loaded_keys)) on [`LOAD_THREADS`] threads;
//! 3. on 3 masters, at each of [`THREADS`], YCSB A-F run in order on that same index, each
//!    [`ExperimentContext::repeat`] times, with [`ops_per_run`]`(N)` operations per run (a
//!    tenth of that for E's scans); the inserts of D and E add the reserved 5%, and later runs
//!    insert those keys again (replacing them);
//! 4. `add_master()` grows the cluster to 4 masters (Redis moves a quarter of the slots with
//!    their keys), a second `dist` client rebalances the index
//!    ([`elastree_dist::DistIndex::rebalance`]) and step 3 runs again on 4 masters. The
//!    measuring clients learn of the moves on their own (MOVED replies, stale tops).
//!
//! Round trips and masters per operation are differences of the measuring client's
//! [`elastree_dist::DistStats`] around each timed run, summed over the repetitions: every
//! request the client sent (retries and top refreshes included) over the index operations
//! it completed. A YCSB read-modify-write is two operations (a get and an insert), a scan
//! one.
//!
//! Rows ([`FIELDS`], `results.jsonl` and `results.csv`): one per index x masters x threads x
//! workload.
//!
//! The code: this file holds the entry and the run's constants; `measure.rs` the cluster,
//! the loads and the YCSB runs; `rows.rs` the row type; `report.rs`,
//! `targets.rs` and `paper.rs` the report's sections,
//! targets and plot.

mod measure;
mod paper;
mod report;
mod rows;
mod targets;

use elastree_dist::DistKind;

use super::{ExperimentContext, Report};
use crate::cluster::LocalClusterGuard;
use crate::keys::KeySetKind;
use crate::ycsb::Ycsb;

pub use rows::{Row, FIELDS};

/// Keys at `--scale 1`: with [`ops_per_run`] and 3 repetitions, about 4 minutes on 2 shared
/// cores.
pub const BASE_N: usize = 100_000;
/// The fewest keys the experiment runs with.
pub const MIN_N: usize = 2_000;
/// Thread counts each workload runs at.
pub const THREADS: &[usize] = &[1, 2];
/// Threads of the untimed load (the client mostly waits for the network).
pub const LOAD_THREADS: usize = 8;
/// The distributed kinds, in report order.
const KINDS: [DistKind; 2] = [DistKind::Tree, DistKind::Baseline];
/// Masters before and after the scale-out.
const MASTERS: [usize; 2] = [3, 4];
/// The paper's node arity: "All tests were executed using α = 25" (section 9).
pub const ARITY: usize = 25;

/// Operations per YCSB run on `n` keys: `n / 20` (at least 100); YCSB E runs a tenth of
/// that, as its operations are scans of up to 100 keys.
pub fn ops_per_run(n: usize) -> usize {
    (n / 20).max(100)
}

/// The operations of one run of `y` on `n` keys.
fn ops_of(y: Ycsb, n: usize) -> usize {
    match y {
        Ycsb::E => (ops_per_run(n) / 10).max(10),
        _ => ops_per_run(n),
    }
}

/// Runs the experiment.
pub fn run(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let keys = KeySetKind::Rand64.generate(ctx.n, ctx.seed);
    eprintln!("dist-ycsb: starting a local Redis Cluster (3 masters, 1 replica each)");
    let mut cluster = LocalClusterGuard::start(3, 1)?;
    // Measure, then stop the cluster whatever happened (dropping the guard also stops it
    // if a measurement panics).
    let measured = measure::measure(ctx, &keys, &mut cluster);
    let stopped = cluster.stop();
    let measured = measured?;
    stopped?;
    eprintln!("dist-ycsb: stopped the local cluster");
    report::report(ctx, measured)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_sizes_scale_with_n() {
        assert_eq!(ops_per_run(BASE_N), 5_000);
        assert_eq!(ops_of(Ycsb::E, BASE_N), 500);
        assert_eq!(ops_per_run(MIN_N), 100);
        assert_eq!(ops_of(Ycsb::E, 10), 10);
    }
}
