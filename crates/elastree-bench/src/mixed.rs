//! The `mixed` workload: the time-series mix of the SB-tree paper's evaluation (after the
//! Blink-hash paper's): 50% inserts of new readings, 30% long scans (10 to 100 keys), 10%
//! short scans (5 to 10 keys) and 10% point lookups.
//!
//! It runs on an index of its own, loaded (untimed) with the first half of the key set in the
//! set's order, key `i` mapping to tid `i`; then `n / 2` operations run, timed:
//!
//! * *insert*: adds the next key of the second half. Inserts take the keys **in the set's
//!   order from one shared cursor**, in batches of [`crate::runner::ops::STREAM_BATCH`]
//!   (as ingest workers reading one queue of readings do), each thread as many as its part
//!   of the plan has; every insert adds a key that was not there.
//! * *lookup*: a point lookup of a loaded key, uniformly random; it must find the key's tid.
//! * *scan*: an ascending scan from a loaded key, uniformly random; it must visit at least
//!   that key and at most its length. A scan is one operation.
//!
//! Each thread runs a contiguous part of the plan (as YCSB's streams do): an exact-count mix
//! of its length, shuffled. Throughput is in operations per second.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::keys::KeySet;

/// The mix: inserts take what the rounded-down counts of the others leave.
const MIX: &[(MixedKind, f64)] = &[
    (MixedKind::LongScan, 0.3),
    (MixedKind::ShortScan, 0.1),
    (MixedKind::Lookup, 0.1),
];

/// The shortest and longest long scan.
pub const LONG_SCAN: (u8, u8) = (10, 100);

/// The shortest and longest short scan.
pub const SHORT_SCAN: (u8, u8) = (5, 10);

/// One operation of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MixedOp {
    /// An insert of the next key of the second half.
    Insert,
    /// A point lookup of a loaded key.
    Lookup,
    /// An ascending scan of this many keys from a loaded key.
    Scan(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MixedKind {
    LongScan,
    ShortScan,
    Lookup,
}

/// The operations of one `mixed` run, split for a thread count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixedPlan {
    /// The thread count the plan was split for.
    pub threads: usize,
    /// Keys `0..loaded` of the key set are loaded before the run.
    pub loaded: usize,
    /// The operations, in plan order; thread `t` runs the `t`-th of `threads` contiguous parts.
    pub ops: Vec<MixedOp>,
    /// The key position of each lookup and scan (an insert's is 0: inserts take theirs from
    /// the shared cursor).
    pub positions: Vec<u32>,
    /// The number of inserts: keys `loaded..loaded + inserts` are added.
    pub inserts: usize,
}

impl MixedPlan {
    /// The plan for a key set of `n` keys (at least 2) on `threads` threads.
    pub fn generate(n: usize, threads: usize, seed: u64) -> Self {
        assert!(n >= 2, "the mixed workload needs at least 2 keys, got {n}");
        let threads = threads.max(1);
        let loaded = n / 2;
        let total = (n / 2).max(1);
        let mut rng = StdRng::seed_from_u64(seed ^ 0x006d_6978_6564);
        let mut ops = Vec::with_capacity(total);
        let mut positions = Vec::with_capacity(total);
        for t in 0..threads {
            let len = (t + 1) * total / threads - t * total / threads;
            let mut kinds: Vec<Option<MixedKind>> = Vec::with_capacity(len);
            for &(kind, share) in MIX {
                kinds.extend(std::iter::repeat_n(
                    Some(kind),
                    (share * len as f64) as usize,
                ));
            }
            // Inserts (`None`) take the rest.
            kinds.resize(len, None);
            kinds.shuffle(&mut rng);
            for kind in kinds {
                let read = rng.gen_range(0..loaded) as u32;
                let (op, position) = match kind {
                    None => (MixedOp::Insert, 0),
                    Some(MixedKind::Lookup) => (MixedOp::Lookup, read),
                    Some(MixedKind::LongScan) => (
                        MixedOp::Scan(rng.gen_range(LONG_SCAN.0..=LONG_SCAN.1)),
                        read,
                    ),
                    Some(MixedKind::ShortScan) => (
                        MixedOp::Scan(rng.gen_range(SHORT_SCAN.0..=SHORT_SCAN.1)),
                        read,
                    ),
                };
                ops.push(op);
                positions.push(position);
            }
        }
        let inserts = ops.iter().filter(|&&op| op == MixedOp::Insert).count();
        debug_assert!(loaded + inserts <= n);
        Self {
            threads,
            loaded,
            ops,
            positions,
            inserts,
        }
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the plan has no operations (never: it has at least one).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A [`MixedPlan`] with the keys of its lookups and scans gathered in operation order.
#[derive(Debug, Clone)]
pub struct MixedStream {
    /// The operations.
    pub plan: MixedPlan,
    /// The key at each operation's position, in operation order (an insert's entry is unused).
    pub keys: KeySet,
}

impl MixedStream {
    /// The stream over `keys` for `threads` threads.
    pub fn generate(keys: &KeySet, threads: usize, seed: u64) -> Self {
        let plan = MixedPlan::generate(keys.len(), threads, seed);
        Self {
            keys: keys.gather(&plan.positions),
            plan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_has_the_mix_on_every_thread_and_reads_only_loaded_keys() {
        for threads in [1, 2, 3] {
            let plan = MixedPlan::generate(100_000, threads, 7);
            assert_eq!(plan.len(), 50_000);
            assert_eq!(plan.loaded, 50_000);
            for t in 0..threads {
                let part = &plan.ops[t * plan.len() / threads..(t + 1) * plan.len() / threads];
                let share = |pred: &dyn Fn(MixedOp) -> bool| {
                    part.iter().filter(|&&op| pred(op)).count() as f64 / part.len() as f64
                };
                assert!((share(&|op| op == MixedOp::Insert) - 0.5).abs() < 0.01);
                assert!((share(&|op| op == MixedOp::Lookup) - 0.1).abs() < 0.01);
                // Long scans of exactly 10 keys look like short ones: count by length.
                let scans = share(&|op| matches!(op, MixedOp::Scan(_)));
                assert!((scans - 0.4).abs() < 0.01, "x{threads}: {scans}");
                let long = share(&|op| matches!(op, MixedOp::Scan(l) if l > SHORT_SCAN.1));
                assert!(long > 0.25, "x{threads}: long scans {long}");
            }
            assert_eq!(
                plan.inserts,
                plan.ops.iter().filter(|&&op| op == MixedOp::Insert).count()
            );
            assert!(plan.loaded + plan.inserts <= 100_000);
            for (&op, &position) in plan.ops.iter().zip(&plan.positions) {
                match op {
                    MixedOp::Insert => assert_eq!(position, 0),
                    MixedOp::Lookup => assert!((position as usize) < plan.loaded),
                    MixedOp::Scan(len) => {
                        assert!((position as usize) < plan.loaded);
                        assert!((SHORT_SCAN.0..=LONG_SCAN.1).contains(&len));
                    }
                }
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_plan() {
        assert_eq!(
            MixedPlan::generate(10_000, 2, 5),
            MixedPlan::generate(10_000, 2, 5)
        );
        assert_ne!(
            MixedPlan::generate(10_000, 2, 5),
            MixedPlan::generate(10_000, 2, 6)
        );
    }
}
