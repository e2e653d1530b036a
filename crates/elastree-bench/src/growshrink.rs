//! The grow-then-shrink driver: the data-spike experiment of the elastic-index paper
//! (Figure 5), shared by every experiment that watches an index as its data set swells and
//! subsides.
//!
//! The driver inserts the key set in `chunks` equal chunks, then deletes it again in as many
//! chunks (in random order). After every chunk it measures, on the keys present at that
//! moment: `3N/100` uniformly random lookups, `N/100` ascending scans of `scan_len` keys, and
//! the index's memory (counting allocator, and the index's own accounting where it has one).
//! The chunk's own inserts or deletes are timed too. Everything a timed region reads (keys in
//! operation order) is generated before the region starts.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use elastree::Direction;

use crate::alloc;
use crate::keys::{KeySet, KeySetKind};
use crate::peers::{BenchIndex, Budget, IndexSpec};
use crate::runner::ops;
use crate::runner::settle::{settle_deferred_frees, settle_deferred_frees_watching};
use crate::runner::timing::Latencies;
use crate::workload::Workload;

/// What the driver does.
#[derive(Debug, Clone)]
pub struct GrowShrinkConfig {
    /// Chunks to grow in (and as many to shrink in).
    pub chunks: usize,
    /// Lookups after each chunk, as a fraction of the key set's size (the paper: 3/100).
    pub lookup_fraction: f64,
    /// Scans after each chunk, as a fraction of the key set's size (the paper: 1/100).
    pub scan_fraction: f64,
    /// Keys per scan.
    pub scan_len: usize,
    /// Threads for every timed phase.
    pub threads: usize,
    /// Seed of the operation streams.
    pub seed: u64,
    /// The elastic kind's budget.
    pub budget: Budget,
}

impl Default for GrowShrinkConfig {
    fn default() -> Self {
        Self {
            chunks: 20,
            lookup_fraction: 0.03,
            scan_fraction: 0.01,
            scan_len: 15,
            threads: 1,
            seed: 42,
            budget: Budget::default(),
        }
    }
}

/// Whether a point was taken while growing or shrinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// After inserting a chunk.
    Grow,
    /// After deleting a chunk.
    Shrink,
}

/// The measurements after one chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Growing or shrinking.
    pub phase: Phase,
    /// Keys present after the chunk.
    pub items: usize,
    /// Throughput of the chunk's inserts (growing) or deletes (shrinking), Mops/s.
    pub update_mops: f64,
    /// Lookup throughput on the present keys, Mops/s.
    pub lookup_mops: f64,
    /// Scan throughput, millions of keys visited per second.
    pub scan_mkeys: f64,
    /// Bytes the index holds by the counting allocator (0 if it is not installed).
    pub bytes_alloc: usize,
    /// Bytes the index reports itself holding, if it accounts for its memory.
    pub bytes_self: Option<usize>,
}

/// Runs the grow-then-shrink experiment for one index on one key set.
///
/// Fails (with the reason) if the index cannot take the key set, is built in bulk, cannot run
/// on `cfg.threads` threads, or answers wrongly (a missed lookup or delete).
pub fn run(spec: IndexSpec, keys: &KeySet, cfg: &GrowShrinkConfig) -> Result<Vec<Point>, String> {
    supports(spec, keys.kind, cfg.threads)?;
    let n = keys.len();
    let chunks = cfg.chunks.clamp(1, n.max(1));
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x6772_6f77);
    let lookups = ((n as f64 * cfg.lookup_fraction) as usize).max(1);
    let scans = ((n as f64 * cfg.scan_fraction) as usize).max(1);
    let chunk = |c: usize| c * n / chunks..(c + 1) * n / chunks;
    let mut points = Vec::with_capacity(2 * chunks);
    let positions: Vec<u32> = (0..n as u32).collect();

    // The index's memory is what the allocator holds beyond this point, less what the driver
    // itself holds at a reading (nothing: every stream of a chunk is dropped before it).
    settle_deferred_frees();
    let baseline = alloc::current();
    let index = spec.build(keys, cfg.budget)?;

    // Grow: keys 0..end are present after a chunk that ends at `end`.
    for c in 0..chunks {
        let range = chunk(c);
        let (secs, _) = ops::insert(
            index.as_ref(),
            keys,
            &positions[range.clone()],
            cfg.threads,
            &Latencies::none(),
        );
        let present = &positions[..range.end];
        let mut point = measure(index.as_ref(), keys, present, lookups, scans, cfg, &mut rng)?;
        point.phase = Phase::Grow;
        point.update_mops = mops(range.len() as u64, secs);
        record_memory(&mut point, index.as_ref(), baseline);
        points.push(point);
    }

    // Shrink: delete in random order; the keys after the chunk's end stay present.
    let mut order = positions;
    order.shuffle(&mut rng);
    for c in 0..chunks {
        let range = chunk(c);
        let removed = keys.gather(&order[range.clone()]);
        let (secs, _, _) = ops::remove(
            index.as_ref(),
            &removed,
            &order[range.clone()],
            cfg.threads,
            false,
        )
        .map_err(|e| format!("{}: {e}", spec.name()))?;
        drop(removed);
        let present = &order[range.end..];
        let mut point = measure(index.as_ref(), keys, present, lookups, scans, cfg, &mut rng)?;
        point.phase = Phase::Shrink;
        point.update_mops = mops(range.len() as u64, secs);
        record_memory(&mut point, index.as_ref(), baseline);
        points.push(point);
    }
    Ok(points)
}

/// Whether the driver can run `spec` on key set `keys` with `threads` threads, or why not:
/// the index cannot take the key set or scan it (the driver times scans), is built in bulk (it
/// has no inserts to grow by), or is single-threaded and more threads were asked for.
pub fn supports(spec: IndexSpec, keys: KeySetKind, threads: usize) -> Result<(), String> {
    // An empty key set of the kind is enough to ask the index what it supports.
    let probe = spec.build(&keys.generate(0, 0), Budget::default())?;
    probe.supports(keys)?;
    probe.supports_workload(Workload::Scan)?;
    if probe.loads_in_bulk() {
        return Err(format!("{} is built in bulk and cannot grow", spec.name()));
    }
    if threads > 1 && !probe.concurrent() {
        return Err(format!("{} is single-threaded", spec.name()));
    }
    Ok(())
}

/// Times lookups and scans over the `present` keys (positions into `keys`).
fn measure(
    index: &dyn BenchIndex,
    keys: &KeySet,
    present: &[u32],
    lookups: usize,
    scans: usize,
    cfg: &GrowShrinkConfig,
    rng: &mut StdRng,
) -> Result<Point, String> {
    let mut point = Point {
        phase: Phase::Grow,
        items: present.len(),
        update_mops: 0.0,
        lookup_mops: 0.0,
        scan_mkeys: 0.0,
        bytes_alloc: 0,
        bytes_self: None,
    };
    if present.is_empty() {
        return Ok(point);
    }
    let pick = |rng: &mut StdRng, count: usize| -> Vec<u32> {
        (0..count)
            .map(|_| present[rng.gen_range(0..present.len())])
            .collect()
    };
    let lookup_tids = pick(rng, lookups);
    let lookup_keys = keys.gather(&lookup_tids);
    let (secs, _, _) = ops::lookup(index, &lookup_keys, &lookup_tids, cfg.threads, false)
        .map_err(|e| format!("{}: {e}", index.name()))?;
    point.lookup_mops = mops(lookups as u64, secs);

    let scan_starts = pick(rng, scans);
    let scan_keys = keys.gather(&scan_starts);
    let unsampled = (Direction::Ascending, false);
    let starts = (&scan_starts[..], &scan_keys);
    let ((secs, _, _), visited, _) =
        ops::scans(index, starts, cfg.scan_len, cfg.threads, unsampled);
    point.scan_mkeys = mops(visited, secs);
    Ok(point)
}

/// Millions of `count` per second over `secs` (at least a nanosecond).
fn mops(count: u64, secs: f64) -> f64 {
    count as f64 / secs.max(1e-9) / 1e6
}

fn record_memory(point: &mut Point, index: &dyn BenchIndex, baseline: usize) {
    index.quiesce();
    // The index's own count drops as the collector frees what it retired: it tells when the
    // collection is over also where the counting allocator is not installed.
    settle_deferred_frees_watching(&|| index.self_reported_bytes().unwrap_or(0));
    point.bytes_alloc = alloc::current().saturating_sub(baseline);
    point.bytes_self = index.self_reported_bytes();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_shrinks_to_empty() {
        let keys = KeySetKind::Rand64.generate(4_000, 3);
        let spec = IndexSpec::Elastree(elastree::IndexKind::BTree);
        let cfg = GrowShrinkConfig {
            chunks: 8,
            ..GrowShrinkConfig::default()
        };
        let points = run(spec, &keys, &cfg).unwrap();
        assert_eq!(points.len(), 16);
        let items: Vec<usize> = points.iter().map(|p| p.items).collect();
        assert_eq!(items[..8], [500, 1000, 1500, 2000, 2500, 3000, 3500, 4000]);
        assert_eq!(items[8..], [3500, 3000, 2500, 2000, 1500, 1000, 500, 0]);
        let phases: Vec<Phase> = points.iter().map(|p| p.phase).collect();
        assert!(phases[..8].iter().all(|&p| p == Phase::Grow), "{phases:?}");
        assert!(
            phases[8..].iter().all(|&p| p == Phase::Shrink),
            "{phases:?}"
        );
        let updates: Vec<f64> = points.iter().map(|p| p.update_mops).collect();
        assert!(
            updates.iter().all(|&m| m > 0.0),
            "update Mops/s {updates:?}"
        );
        let reads: Vec<(f64, f64)> = points[..15]
            .iter()
            .map(|p| (p.lookup_mops, p.scan_mkeys))
            .collect();
        assert!(
            reads.iter().all(|&(l, s)| l > 0.0 && s > 0.0),
            "(lookup Mops/s, scan Mkeys/s) before the last step: {reads:?}"
        );
        // elastree accounts for its memory: more keys, more bytes.
        let bytes: Vec<Option<usize>> = points.iter().map(|p| p.bytes_self).collect();
        let bytes: Vec<usize> = bytes
            .iter()
            .map(|b| b.unwrap_or_else(|| panic!("elastree reports its bytes: {bytes:?}")))
            .collect();
        assert!(
            bytes[7] > bytes[0] && bytes[7] > bytes[15],
            "bytes held after each step (the most at step 7): {bytes:?}"
        );
    }

    #[test]
    fn runs_on_two_threads_and_refuses_what_cannot_grow() {
        let keys = KeySetKind::Rand64.generate(2_000, 5);
        let cfg = GrowShrinkConfig {
            chunks: 4,
            threads: 2,
            ..GrowShrinkConfig::default()
        };
        let points = run(IndexSpec::Elastree(elastree::IndexKind::BTree), &keys, &cfg).unwrap();
        assert_eq!(points.last().map(|p| p.items), Some(0));
        let sorted = IndexSpec::Peer(crate::peers::Peer::Sorted);
        assert!(run(sorted, &keys, &cfg).unwrap_err().contains("bulk"));
        let btreemap = IndexSpec::Peer(crate::peers::Peer::BTreeMap);
        assert!(run(btreemap, &keys, &cfg)
            .unwrap_err()
            .contains("single-threaded"));
    }
}
