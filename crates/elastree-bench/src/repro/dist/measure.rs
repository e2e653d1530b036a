//! The measurement of `dist-ycsb`: a client of each kind with its index loaded, the YCSB runs
//! on 3 masters, the scale-out and the runs on 4 masters.

use elastree_dist::baseline::BaselineIndex;
use elastree_dist::{DistIndex, DistKind, DistOptions, DistStats, RebalanceReport};

use super::rows::Row;
use super::{ops_of, ARITY, KINDS, LOAD_THREADS, MASTERS, THREADS};
use crate::cluster::{self, LocalClusterGuard};
use crate::keys::KeySet;
use crate::peers::{BenchIndex, Elastree};
use crate::repro::ExperimentContext;
use crate::runner::ops;
use crate::runner::timing::Latencies;
use crate::runner::{attempt, Trials};
use crate::ycsb::{loaded_keys, Ycsb, YcsbStream};

/// The facts of one index between the phases.
#[derive(Debug, Clone, Default)]
pub(super) struct Shape {
    /// Baseline: the tree's height on 3 and on 4 masters.
    pub(super) heights: Vec<u64>,
    /// dist: sub-trees on 3 masters (before the rebalance).
    pub(super) subtrees: Option<usize>,
}

/// Everything measured.
pub(super) struct Measured {
    pub(super) rows: Vec<Row>,
    pub(super) rebalance: RebalanceReport,
    pub(super) shape: Shape,
    /// Wall time of each index's untimed load, seconds.
    pub(super) loads: Loads,
}

/// Wall time of each index's untimed load, seconds, by index name.
type Loads = Vec<(&'static str, f64)>;

/// The streams of every workload at each thread count: `(threads, one stream per workload)`.
type Streams = Vec<(usize, Vec<YcsbStream>)>;

/// An index of each kind: its kind, its name on the cluster and its measuring client.
type Indexes = Vec<(DistKind, String, Elastree)>;

/// A client of each kind with its index loaded, the runs on 3 masters, the scale-out and the
/// runs on 4 masters.
pub(super) fn measure(
    ctx: &ExperimentContext<'_>,
    keys: &KeySet,
    cluster: &mut LocalClusterGuard,
) -> Result<Measured, String> {
    let seed = cluster.seed();
    let streams = streams(ctx, keys);
    let (indexes, loads) = load_indexes(keys, &seed)?;
    let mut rows = Vec::new();
    let mut shape = Shape::default();
    let mut rebalance = RebalanceReport::default();
    for (phase, &masters) in MASTERS.iter().enumerate() {
        if phase == 1 {
            rebalance = scale_out(cluster, &seed, &indexes[0].1)?;
        }
        for (kind, name, index) in &indexes {
            read_shape(&mut shape, *kind, phase, &seed, name)?;
            for (threads, per) in &streams {
                for stream in per {
                    eprintln!(
                        "dist-ycsb: {kind} on {masters} masters, {} x{threads}",
                        stream.plan.workload
                    );
                    rows.push(run_workload(ctx, *kind, index, keys, stream, masters));
                }
            }
        }
    }
    // Drop the clients (each deletes its index) before the cluster stops.
    drop(indexes);
    Ok(Measured {
        rows,
        rebalance,
        shape,
        loads,
    })
}

/// The operations of YCSB A-F at each of [`THREADS`].
fn streams(ctx: &ExperimentContext<'_>, keys: &KeySet) -> Streams {
    let n = keys.len();
    THREADS
        .iter()
        .map(|&t| {
            let per = Ycsb::ALL
                .iter()
                .map(|&y| YcsbStream::generate_ops(y, keys, ops_of(y, n), t, ctx.seed))
                .collect();
            (t, per)
        })
        .collect()
}

/// An index of each kind, under a fresh name, loaded untimed with [`loaded_keys`]; and the
/// wall time of each load, seconds.
fn load_indexes(keys: &KeySet, seed: &str) -> Result<(Indexes, Loads), String> {
    let loaded = loaded_keys(keys.len());
    let mut indexes = Vec::new();
    let mut loads = Vec::new();
    for kind in KINDS {
        let name = cluster::fresh_name("dist-ycsb");
        let client = cluster::connect(kind, seed, name.clone(), options(&name))?;
        let index = Elastree::on_cluster(kind, keys, client);
        eprintln!("dist-ycsb: loading {loaded} keys into {kind} (untimed)");
        let started = std::time::Instant::now();
        load(&index, keys, loaded)?;
        loads.push((kind.name(), started.elapsed().as_secs_f64()));
        indexes.push((kind, name, index));
    }
    Ok((indexes, loads))
}

/// Grows the cluster by one master and rebalances the `dist` index `name` from a second
/// client.
fn scale_out(
    cluster: &mut LocalClusterGuard,
    seed: &str,
    name: &str,
) -> Result<RebalanceReport, String> {
    eprintln!("dist-ycsb: adding a master and rebalancing");
    cluster
        .cluster_mut()
        .add_master()
        .map_err(|e| format!("adding a master: {e}"))?;
    let side = DistIndex::connect(&[seed.to_string()], options(name))
        .map_err(|e| format!("connecting the rebalancing client: {e}"))?;
    side.rebalance().map_err(|e| format!("rebalancing: {e}"))
}

/// Notes the shape of index `name` of `kind` in phase `phase` (0: 3 masters, 1: 4 masters):
/// the baseline's height in each phase, `dist`'s sub-trees in the first.
fn read_shape(
    shape: &mut Shape,
    kind: DistKind,
    phase: usize,
    seed: &str,
    name: &str,
) -> Result<(), String> {
    let seeds = [seed.to_string()];
    match kind {
        DistKind::Baseline => shape.heights.push(
            BaselineIndex::connect(&seeds, options(name))
                .and_then(|b| b.height())
                .map_err(|e| format!("reading the baseline's height: {e}"))?,
        ),
        _ if phase == 0 => {
            shape.subtrees = Some(
                DistIndex::connect(&seeds, options(name))
                    .map_err(|e| format!("reading the top: {e}"))?
                    .top_entries()
                    .len(),
            )
        }
        _ => {}
    }
    Ok(())
}

/// The options of both trees: the paper's arity, the rest the defaults, except that the
/// measuring clients do not rebalance on their own: the experiment rebalances once, between
/// the 3- and the 4-master runs, and reports it.
fn options(name: &str) -> DistOptions {
    DistOptions {
        name: name.to_string(),
        node_capacity: ARITY,
        auto_rebalance: false,
        ..DistOptions::default()
    }
}

/// Inserts keys `0..count` (key `i` with tid `i`) on [`LOAD_THREADS`] threads and checks the
/// index then holds them.
fn load(index: &Elastree, keys: &KeySet, count: usize) -> Result<(), String> {
    let positions: Vec<u32> = (0..count as u32).collect();
    let shared: &dyn BenchIndex = index;
    attempt(|| ops::insert(shared, keys, &positions, LOAD_THREADS, &Latencies::none()))
        .map_err(|p| format!("loading: {p}"))?;
    // Every key is there: a scan from the smallest key visits exactly `count`.
    let first = keys.key(keys.sorted_order()[0] as usize);
    let count_seen = shared.scan(first, usize::MAX, &mut |_, _| {});
    if count_seen != count {
        return Err(format!("loaded {count} keys, the index holds {count_seen}"));
    }
    Ok(())
}

/// What the repetitions of one workload measured.
#[derive(Default)]
struct Runs {
    /// Throughput of each repetition, millions of operations per second (the repetitions
    /// stop at the first failure).
    mops: Trials,
    /// Sampled latencies of every repetition, ns, sorted.
    latencies: Vec<u64>,
    /// The measuring client's requests over every repetition.
    stats: DistStats,
}

impl Runs {
    /// The latency at quantile `p` (0 to 1) of the sorted samples.
    fn percentile(&self, p: f64) -> Option<u64> {
        let last = self.latencies.len().checked_sub(1)?;
        Some(self.latencies[(last as f64 * p).round() as usize])
    }
}

/// Runs one workload `ctx.repeat` times on `index` and makes its row.
fn run_workload(
    ctx: &ExperimentContext<'_>,
    kind: DistKind,
    index: &Elastree,
    keys: &KeySet,
    stream: &YcsbStream,
    masters: usize,
) -> Row {
    let runs = repeat(ctx, kind, index, keys, stream);
    row_of(kind, keys.len(), stream, masters, runs)
}

/// Runs one workload `ctx.repeat` times on `index`, stopping at the first failure.
fn repeat(
    ctx: &ExperimentContext<'_>,
    kind: DistKind,
    index: &Elastree,
    keys: &KeySet,
    stream: &YcsbStream,
) -> Runs {
    let mut runs = Runs::default();
    for _ in 0..ctx.repeat {
        let outcome = attempt(|| ops::ycsb(index, keys, stream, stream.plan.threads))
            .unwrap_or_else(|p| Err(format!("panicked: {p}")));
        match outcome {
            Ok((secs, mut lat, dist)) => {
                runs.mops.record(Ok(stream.plan.len() as f64 / secs / 1e6));
                runs.latencies.append(&mut lat);
                if let Some(delta) = dist {
                    runs.stats = cluster::stats_sum(runs.stats, delta);
                }
            }
            Err(problem) => {
                eprintln!(
                    "dist-ycsb: FAILED {kind} {}: {problem}",
                    stream.plan.workload
                );
                runs.mops.record(Err(problem));
                break;
            }
        }
    }
    runs.latencies.sort_unstable();
    runs
}

/// The row of `runs` of `stream` on an index of `kind` with `n` keys on `masters` masters.
fn row_of(kind: DistKind, n: usize, stream: &YcsbStream, masters: usize, runs: Runs) -> Row {
    let ok = runs.mops.ok();
    let summary = runs.mops.summary();
    let per_op = cluster::per_op(runs.stats).filter(|_| ok);
    let dist = ok && kind != DistKind::Baseline;
    Row {
        experiment: "dist-ycsb",
        index: kind.name(),
        masters,
        threads: stream.plan.threads,
        workload: stream.plan.workload.name(),
        n,
        ops: stream.plan.len(),
        repeat: runs.mops.values.len(),
        mops_median: summary.map(|s| s.median),
        mops_min: summary.map(|s| s.min),
        mops_max: summary.map(|s| s.max),
        round_trips_per_op: per_op.map(|p| p.0),
        masters_per_op: per_op.map(|p| p.1),
        top_refreshes: dist.then_some(runs.stats.top_refreshes),
        stale_routes: dist.then_some(runs.stats.stale_routes),
        retries: ok.then_some(runs.stats.retries),
        p50_ns: runs.percentile(0.5).filter(|_| ok),
        p99_ns: runs.percentile(0.99).filter(|_| ok),
        status: runs.mops.status(),
        note: runs.mops.failure,
    }
}
