//! Concurrent stress tests: writers on interleaved (overlapping) key ranges with tiny nodes so
//! that splits and merges race, scanners checking order and completeness while they run, and
//! a final check that every acknowledged pair is present exactly once.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;

use common::{scaled, Registry};
use elastree::{Direction, Index, IndexKind, KeyLen};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const WRITERS: u64 = 4;
const SCANNERS: u64 = 2;
const KEYS_PER_WRITER: u64 = 3_000;
const OPS_PER_WRITER: u64 = 60_000;
/// Keys `k` with `k % STABLE_EVERY == 0` are inserted before the run and never touched, so
/// every scan must return the ones in its range.
const STABLE_EVERY: u64 = 10;

/// How a test encodes key numbers.
#[derive(Clone, Copy)]
enum Enc {
    Fixed8,
    Var,
}

fn encode(enc: Enc, k: u64) -> Vec<u8> {
    match enc {
        Enc::Fixed8 => k.to_be_bytes().to_vec(),
        // Variable length with shared prefixes: "user/<k>" plus a length that varies with k.
        Enc::Var => {
            let mut key = format!("user/{k:08}").into_bytes();
            key.extend(std::iter::repeat_n(b'x', (k % 13) as usize));
            key
        }
    }
}

fn decode(enc: Enc, key: &[u8]) -> u64 {
    match enc {
        Enc::Fixed8 => u64::from_be_bytes(key.try_into().unwrap()),
        Enc::Var => std::str::from_utf8(&key[5..13]).unwrap().parse().unwrap(),
    }
}

fn stress(index: &dyn Index, registry: &Registry, enc: Enc) {
    let universe = WRITERS * KEYS_PER_WRITER;
    let stable: Vec<u64> = (0..universe).filter(|k| k % STABLE_EVERY == 0).collect();
    for &k in &stable {
        let key = encode(enc, k);
        registry.register(k, &key);
        index.insert(&key, k).unwrap();
    }
    let done = AtomicBool::new(false);
    let barrier = Barrier::new((WRITERS + SCANNERS) as usize);
    let unique = index.is_unique();

    let finals: Vec<BTreeSet<(u64, u64)>> = thread::scope(|s| {
        for scanner in 0..SCANNERS {
            let (done, barrier, stable) = (&done, &barrier, &stable);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(1000 + scanner);
                barrier.wait();
                let mut scans = 0;
                while !done.load(Ordering::Relaxed) || scans < scaled(20) {
                    scans += 1;
                    let lo = rng.gen_range(0..universe);
                    let hi = (lo + rng.gen_range(1..universe / 4)).min(universe);
                    let direction = if scans % 2 == 0 {
                        Direction::Ascending
                    } else {
                        Direction::Descending
                    };
                    let (lo_key, hi_key) = (encode(enc, lo), encode(enc, hi));
                    let mut seen: Vec<(u64, u64)> = Vec::new();
                    index
                        .scan(
                            Bound::Included(&lo_key),
                            Bound::Excluded(&hi_key),
                            direction,
                            usize::MAX,
                            &mut |k, t| seen.push((decode(enc, k), t)),
                        )
                        .unwrap();
                    if direction == Direction::Descending {
                        seen.reverse();
                    }
                    for pair in seen.windows(2) {
                        assert!(pair[0] < pair[1], "scan out of order or repeated: {pair:?}");
                    }
                    let keys: BTreeSet<u64> = seen.iter().map(|p| p.0).collect();
                    for k in stable.iter().filter(|&&k| k >= lo && k < hi) {
                        assert!(keys.contains(k), "scan {lo}..{hi} missed stable key {k}");
                    }
                }
            });
        }
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let barrier = &barrier;
                s.spawn(move || {
                    // Writer w owns keys k with k % WRITERS == w: interleaved with the others,
                    // so all writers hit the same leaves.
                    let mut rng = StdRng::seed_from_u64(w);
                    let mut mine = BTreeSet::new();
                    barrier.wait();
                    for op in 0..scaled(OPS_PER_WRITER) {
                        let k = rng.gen_range(0..KEYS_PER_WRITER) * WRITERS + w;
                        if k % STABLE_EVERY == 0 {
                            continue;
                        }
                        let key = encode(enc, k);
                        // Tids name tuples: one per insert (unique), or one of three per key
                        // (non-unique); the registry is the table kinds with indirect keys
                        // load keys from.
                        let tid = if unique {
                            let tid = universe + op * WRITERS + w;
                            registry.register(tid, &key);
                            tid
                        } else {
                            registry.pair_tid(&key, rng.gen_range(0..3))
                        };
                        if rng.gen_bool(0.6) {
                            let previous = index.insert(&key, tid).unwrap();
                            if unique {
                                let expected =
                                    mine.iter().find(|p: &&(u64, u64)| p.0 == k).copied();
                                assert_eq!(previous, expected.map(|p| p.1));
                                if let Some(p) = expected {
                                    mine.remove(&p);
                                }
                            } else {
                                assert_eq!(previous.is_some(), mine.contains(&(k, tid)));
                            }
                            mine.insert((k, tid));
                        } else if unique {
                            let removed = index.remove(&key).unwrap();
                            let expected = mine.iter().find(|p| p.0 == k).copied();
                            assert_eq!(removed, expected.map(|p| p.1));
                            if let Some(p) = expected {
                                mine.remove(&p);
                            }
                        } else {
                            let removed = index.remove_pair(&key, tid).unwrap();
                            assert_eq!(removed, mine.remove(&(k, tid)));
                        }
                    }
                    mine
                })
            })
            .collect();
        let finals = writers.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        finals
    });

    index.check().unwrap();
    let mut expected: BTreeSet<(u64, u64)> = stable.iter().map(|&k| (k, k)).collect();
    for set in finals {
        expected.extend(set);
    }
    let got = common::all_pairs_by(index, |k| decode(enc, k));
    assert_eq!(got.len(), expected.len(), "pairs lost or duplicated");
    assert!(
        got.iter().copied().eq(expected.iter().copied()),
        "final contents differ"
    );
    assert_eq!(index.len(), expected.len());
}

/// Budget of the elastic kind: a fraction of what the keys need, so leaves convert both ways
/// while the writers race.
const STRESS_BUDGET: usize = 16 * 1024;

fn run(kind: IndexKind, unique: bool, key_len: KeyLen, tiny: bool, enc: Enc) {
    let registry = Registry::new();
    let b = common::builder(kind, &registry, STRESS_BUDGET)
        .unique(unique)
        .key_len(key_len);
    let b = if tiny {
        b.leaf_capacity(4).inner_capacity(4).tree_levels(2)
    } else {
        b
    };
    let index = b.build().unwrap();
    stress(&*index, &registry, enc);
    if kind == IndexKind::Elastic {
        // The race ran through conversions, not around them.
        let stats = index.elastic_stats().unwrap();
        assert!(
            stats.compactions > 0 && stats.expansions + stats.grows > 0,
            "{stats:?}"
        );
    }
    if index.hybrid_stats().is_some() {
        // The race ran through merges too.
        index.quiesce().unwrap();
        let stats = index.hybrid_stats().unwrap();
        assert!(stats.merges >= common::min_merges(3), "{stats:?}");
    }
}

#[test]
fn unique_fixed8_tiny_nodes() {
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        run(kind, true, KeyLen::Fixed(8), true, Enc::Fixed8);
    }
}

#[test]
fn unique_fixed8_default_nodes() {
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        run(kind, true, KeyLen::Fixed(8), false, Enc::Fixed8);
    }
}

#[test]
fn unique_variable_tiny_nodes() {
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        run(kind, true, KeyLen::Variable, true, Enc::Var);
    }
}

#[test]
fn non_unique_fixed8_tiny_nodes() {
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        run(kind, false, KeyLen::Fixed(8), true, Enc::Fixed8);
    }
}

#[test]
fn non_unique_variable_tiny_nodes() {
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        run(kind, false, KeyLen::Variable, true, Enc::Var);
    }
}

/// Writers appending increasing keys to an elastic index with a budget (writer `w` takes
/// keys `w`, `w + WRITERS`, ..., so all of them append to the same last leaves) while a
/// scanner reads: the sweep compacts the cold leaves behind them as they race. Every key is
/// there at the end, the structure checks, scans never go backwards, and the budget holds.
#[test]
fn elastic_ordered_writers_sweep_under_the_budget() {
    let registry = Registry::new();
    let per_writer = scaled(50_000);
    let total = WRITERS * per_writer;
    for k in 0..total {
        registry.register(k, &k.to_be_bytes());
    }
    // About 12 bytes per key: B+-tree leaves take ~16, SeqTree leaves ~10.
    let budget = (total as usize * 12).max(64 * 1024);
    let index = common::builder(IndexKind::Elastic, &registry, budget)
        .key_len(KeyLen::Fixed(8))
        .build()
        .unwrap();
    let index = &*index;
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let done = &done;
        s.spawn(move || {
            let mut rng = StdRng::seed_from_u64(7);
            let mut scans = 0;
            while !done.load(Ordering::Relaxed) || scans < scaled(20) {
                scans += 1;
                let lo = rng.gen_range(0..total);
                let mut seen = Vec::new();
                index
                    .scan(
                        Bound::Included(&lo.to_be_bytes()),
                        Bound::Unbounded,
                        Direction::Ascending,
                        2_000,
                        &mut |k, t| seen.push((decode(Enc::Fixed8, k), t)),
                    )
                    .unwrap();
                for pair in seen.windows(2) {
                    assert!(pair[0].0 < pair[1].0, "scan out of order: {pair:?}");
                }
                assert!(seen.iter().all(|&(k, t)| k == t && k >= lo), "{seen:?}");
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    for i in 0..per_writer {
                        let k = i * WRITERS + w;
                        assert_eq!(index.insert(&k.to_be_bytes(), k).unwrap(), None);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    index.check().unwrap();
    assert_eq!(index.len(), total as usize);
    for k in 0..total {
        assert_eq!(index.get(&k.to_be_bytes()).unwrap(), Some(k), "key {k}");
    }
    let stats = index.elastic_stats().unwrap();
    assert!(stats.sweeps > 0, "{stats:?}");
    let held = common::settled_memory(index, (budget as f64 * 1.05) as usize);
    assert!(
        held as f64 <= budget as f64 * 1.05,
        "{held} bytes over the budget of {budget} ({stats:?})"
    );
}
