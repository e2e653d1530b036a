//! Shared test machinery: key generators and the BTreeMap model every index kind is checked
//! against.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use elastree::hybrid::{HybridOptions, MergeTrigger};
use elastree::table::KeySource;
use elastree::{Direction, Index, IndexBuilder, IndexKind, KeyLen};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `n` scaled by the `ELASTREE_TEST_SCALE` environment variable (default 1.0; CI's valgrind
/// run uses a small fraction), at least 1.
pub fn scaled(n: u64) -> u64 {
    let scale: f64 = std::env::var("ELASTREE_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((n as f64 * scale) as u64).max(1)
}

/// The table of a test: the key of every tid handed to an index, so that kinds with
/// indirect keys (elastic, seqtree) can load them. Every kind's tests use it, so every kind
/// sees the same tids.
#[derive(Default)]
pub struct Registry {
    keys: RwLock<HashMap<u64, Vec<u8>>>,
}

impl Registry {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Records that `tid` is a tuple with key `key`.
    pub fn register(&self, tid: u64, key: &[u8]) {
        self.keys.write().unwrap().insert(tid, key.to_vec());
    }

    /// The tid of the `j`-th tuple with key `key` (deterministic, registered).
    pub fn pair_tid(&self, key: &[u8], j: u64) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ j.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h ^= h >> 29;
        self.register(h, key);
        h
    }
}

impl KeySource for Registry {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        out.clear();
        match self.keys.read().unwrap().get(&tid) {
            Some(key) => {
                out.extend_from_slice(key);
                true
            }
            None => false,
        }
    }
}

/// A builder for `kind` wired to `registry` (and, for the elastic kind, to a budget of
/// `budget` bytes), so every kind can be built the same way.
pub fn builder(kind: IndexKind, registry: &Arc<Registry>, budget: usize) -> IndexBuilder {
    let builder = IndexBuilder::new(kind).hybrid_options(frequent_merges());
    if !kind.needs_key_source() {
        return builder;
    }
    let builder = builder.key_source(registry.clone() as Arc<dyn KeySource>);
    if kind == IndexKind::Elastic {
        builder.budget(budget)
    } else {
        builder
    }
}

/// Every pair of `index` in ascending order, for indexes whose keys are 8-byte big-endian
/// integers.
pub fn all_pairs(index: &dyn Index) -> Vec<(u64, u64)> {
    all_pairs_by(index, |k| u64::from_be_bytes(k.try_into().unwrap()))
}

/// Every pair of `index` in ascending order, each key turned back into its integer by
/// `decode`.
pub fn all_pairs_by(index: &dyn Index, decode: impl Fn(&[u8]) -> u64) -> Vec<(u64, u64)> {
    let mut pairs = Vec::new();
    index
        .scan(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Ascending,
            usize::MAX,
            &mut |k, t| pairs.push((decode(k), t)),
        )
        .unwrap();
    pairs
}

/// Lets the epoch collector free replaced nodes (they stay counted until then) until
/// `index` holds at most `bound` bytes or 10 s pass, and returns what it holds then. Other
/// tests' threads pinned on a busy machine hold the epoch back for a while, so a fixed
/// number of flushes is not enough.
pub fn settled_memory(index: &dyn Index, bound: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        for _ in 0..64 {
            crossbeam_epoch::pin().flush();
        }
        let held = index.memory().total();
        if held <= bound || std::time::Instant::now() >= deadline {
            return held;
        }
        std::thread::yield_now();
    }
}

/// Hybrid options that merge after a few writes (a 2:1 ratio, at least 8 entries) and
/// publish after every segment, so tests run every merge path many times.
pub fn frequent_merges() -> HybridOptions {
    HybridOptions {
        trigger: MergeTrigger::Ratio(2.0),
        min_merge: 8,
        publish_every: 1,
        ..HybridOptions::default()
    }
}

/// The fewest merges a hybrid test run of full size must have made, scaled like the run
/// itself (`ELASTREE_TEST_SCALE`), at least 1.
pub fn min_merges(full: u64) -> u64 {
    scaled(full).max(1)
}

/// The elastic budget of tiny-node tests: small enough that the model tests' few hundred
/// keys push the tree into shrinking, and draining it brings it back to expanding.
pub const TINY_BUDGET: usize = 8 * 1024;

/// How the model test draws keys.
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    /// 8-byte big-endian integers from a small space, so keys collide and nodes churn.
    Small64 { space: u64 },
    /// 8-byte keys, mostly increasing, the pattern of time-series and auto-increment ids.
    Sequential64,
    /// 16-byte keys from a small space.
    Small128 { space: u64 },
    /// Variable length from 0 to `max` bytes over a tiny alphabet (shared prefixes, keys that
    /// are prefixes of others, zero bytes).
    Var { max: usize },
}

impl Keys {
    pub fn key_len(self) -> KeyLen {
        match self {
            Keys::Small64 { .. } | Keys::Sequential64 => KeyLen::Fixed(8),
            Keys::Small128 { .. } => KeyLen::Fixed(16),
            Keys::Var { .. } => KeyLen::Variable,
        }
    }

    pub fn draw(self, rng: &mut StdRng, step: u64) -> Vec<u8> {
        match self {
            Keys::Small64 { space } => rng.gen_range(0..space).to_be_bytes().to_vec(),
            Keys::Sequential64 => {
                // Mostly the next few keys, sometimes a jump back.
                let base = step / 2;
                let k = if rng.gen_bool(0.9) {
                    base + rng.gen_range(0..4)
                } else {
                    rng.gen_range(0..=base)
                };
                k.to_be_bytes().to_vec()
            }
            Keys::Small128 { space } => {
                let k = rng.gen_range(0..space);
                let mut key = (k / 7).to_be_bytes().to_vec();
                key.extend_from_slice(&(k % 7).to_be_bytes());
                key
            }
            Keys::Var { max } => {
                let len = if rng.gen_bool(0.05) {
                    max
                } else {
                    rng.gen_range(0..=max.min(24))
                };
                (0..len)
                    .map(|_| [0u8, 1, b'a', b'b', 0xff][rng.gen_range(0..5)])
                    .collect()
            }
        }
    }
}

/// The model of an index: key -> tids (one for unique).
pub type Model = BTreeMap<Vec<u8>, std::collections::BTreeSet<u64>>;

/// Every pair of the model in (key, tid) order within the bounds.
pub fn model_range(model: &Model, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Vec<(Vec<u8>, u64)> {
    let lower = lower.map(|b| b.to_vec());
    let upper = upper.map(|b| b.to_vec());
    if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
        (&lower, &upper)
    {
        if l > u {
            return Vec::new();
        }
        if l == u && !(matches!(lower, Bound::Included(_)) && matches!(upper, Bound::Included(_))) {
            return Vec::new();
        }
    }
    model
        .range((lower, upper))
        .flat_map(|(k, tids)| tids.iter().map(move |t| (k.clone(), *t)))
        .collect()
}

fn bound_of(rng: &mut StdRng, keys: Keys, step: u64) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(keys.draw(rng, step)),
        _ => Bound::Excluded(keys.draw(rng, step)),
    }
}

/// Runs `ops` random operations against `index` and the model, comparing every result, and
/// checks the structure every `check_every` operations and at the end.
pub fn run_model(
    index: &dyn Index,
    registry: &Registry,
    keys: Keys,
    ops: u64,
    seed: u64,
    check_every: u64,
) {
    let ops = scaled(ops);
    let check_every = scaled(check_every);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let unique = index.is_unique();
    for step in 0..ops {
        let key = keys.draw(&mut rng, step);
        let ctx = || format!("seed {seed} step {step} key {key:02x?}");
        match rng.gen_range(0..100) {
            0..=39 => {
                let tid = if unique {
                    let tid = rng.gen();
                    registry.register(tid, &key);
                    tid
                } else {
                    registry.pair_tid(&key, rng.gen_range(0..8))
                };
                let got = index.insert(&key, tid).unwrap();
                let tids = model.entry(key.clone()).or_default();
                if unique {
                    let previous = tids.pop_first();
                    tids.insert(tid);
                    assert_eq!(got, previous, "insert {}", ctx());
                } else {
                    let present = !tids.insert(tid);
                    assert_eq!(got, present.then_some(tid), "insert {}", ctx());
                }
            }
            40..=64 => {
                if unique {
                    let got = index.remove(&key).unwrap();
                    let expected = model.remove(&key).and_then(|mut t| t.pop_first());
                    assert_eq!(got, expected, "remove {}", ctx());
                } else {
                    let tid = registry.pair_tid(&key, rng.gen_range(0..8));
                    let got = index.remove_pair(&key, tid).unwrap();
                    let expected = model.get_mut(&key).is_some_and(|t| t.remove(&tid));
                    if model.get(&key).is_some_and(|t| t.is_empty()) {
                        model.remove(&key);
                    }
                    assert_eq!(got, expected, "remove_pair {}", ctx());
                }
            }
            65..=79 => {
                let expected: Vec<u64> = model
                    .get(&key)
                    .map(|t| t.iter().copied().collect())
                    .unwrap_or_default();
                assert_eq!(
                    index.get(&key).unwrap(),
                    expected.first().copied(),
                    "get {}",
                    ctx()
                );
                let mut all = Vec::new();
                index.get_all(&key, &mut all).unwrap();
                assert_eq!(all, expected, "get_all {}", ctx());
            }
            _ => {
                let lower = bound_of(&mut rng, keys, step);
                let upper = bound_of(&mut rng, keys, step);
                let limit = if rng.gen_bool(0.2) {
                    usize::MAX
                } else {
                    rng.gen_range(0..40)
                };
                let direction = if rng.gen_bool(0.5) {
                    Direction::Ascending
                } else {
                    Direction::Descending
                };
                let (lo, hi) = (
                    lower.as_ref().map(|b| b.as_slice()),
                    upper.as_ref().map(|b| b.as_slice()),
                );
                let mut expected = model_range(&model, lo, hi);
                if direction == Direction::Descending {
                    expected.reverse();
                }
                expected.truncate(limit);
                let mut got = Vec::new();
                let n = index
                    .scan(lo, hi, direction, limit, &mut |k, t| {
                        got.push((k.to_vec(), t))
                    })
                    .unwrap();
                assert_eq!(n, got.len());
                assert_eq!(
                    got,
                    expected,
                    "scan {direction:?} {lower:02x?}..{upper:02x?} limit {limit} {}",
                    ctx()
                );
            }
        }
        if check_every > 0 && step % check_every == 0 {
            index
                .check()
                .unwrap_or_else(|e| panic!("check {}: {e}", ctx()));
            let pairs: usize = model.values().map(|t| t.len()).sum();
            assert_eq!(index.len(), pairs, "len {}", ctx());
        }
    }
    index.check().unwrap();
    let pairs: usize = model.values().map(|t| t.len()).sum();
    assert_eq!(index.len(), pairs);
    // Drain everything: exercises merges down to an empty tree.
    for (key, tids) in &model {
        for tid in tids {
            if unique {
                assert_eq!(index.remove(key).unwrap(), Some(*tid));
            } else {
                assert!(index.remove_pair(key, *tid).unwrap());
            }
        }
    }
    index.check().unwrap();
    assert_eq!(index.len(), 0);
    let mut left = 0;
    index
        .scan(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Ascending,
            usize::MAX,
            &mut |_, _| left += 1,
        )
        .unwrap();
    assert_eq!(left, 0);
}

/// A builder for `kind` with tiny nodes, so splits and merges happen constantly.
pub fn tiny(
    kind: IndexKind,
    registry: &Arc<Registry>,
    unique: bool,
    keys: Keys,
    max_key_len: usize,
) -> IndexBuilder {
    // Two BlindiTree levels even in 4-key SeqTree leaves, so searches use the tree.
    builder(kind, registry, TINY_BUDGET)
        .tree_levels(2)
        .unique(unique)
        .key_len(keys.key_len())
        .max_key_len(max_key_len)
        .leaf_capacity(4)
        .inner_capacity(4)
}
