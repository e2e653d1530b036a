//! The model test every index kind runs: long random operation sequences compared with a
//! `BTreeMap`, structure checks along the way and a full drain at the end; plus the key
//! generators, the tuple table kinds with indirect keys load keys from, and the builders
//! with tiny nodes that make splits, merges and conversions constant.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use elastree::btree::MIN_PAGE_BYTES;
use elastree::hybrid::{HybridIndex, HybridOptions, MergeTrigger};
use elastree::table::KeySource;
use elastree::{
    BTreeOptions, Direction, ElasticOptions, Index, IndexBuilder, IndexKind, KeyLen, MidWidth,
    PageOrganization, SbTreeOptions, SeqTreeOptions,
};
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

/// How many operations apart a model run of `ops` (scaled) operations checks the structure:
/// every `check_every`, but often enough for at least [`MIN_CHECKS`] checks in a run made
/// short by a small `ELASTREE_TEST_SCALE`. (Scaling the period with the run would check after
/// every operation at valgrind's 2%: more checks than a full-size run, most of that run's
/// time spent in walks that write nothing.)
pub fn check_period(ops: u64, check_every: u64) -> u64 {
    check_every.min(ops / MIN_CHECKS).max(1)
}

/// The fewest structure checks in a model run (see [`check_period`]).
pub const MIN_CHECKS: u64 = 20;

/// The table of a test: the key of every tid handed to an index, so that kinds with
/// indirect keys (elastic, seqtree) can load them. Every kind's tests use it, so every kind
/// sees the same tids.
#[derive(Default)]
pub struct Registry {
    keys: RwLock<HashMap<u64, Vec<u8>>>,
}

impl Registry {
    /// An empty table, shared with the index as its [`KeySource`].
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Records that `tid` is a tuple with key `key`.
    pub fn register(&self, tid: u64, key: &[u8]) {
        // Most calls repeat a pair already known (non-unique tids are derived from the key):
        // answer those under the read lock, so writers on many threads do not queue.
        let known = self
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tid)
            .is_some_and(|k| k == key);
        if !known {
            self.keys
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(tid, key.to_vec());
        }
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
        match self
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tid)
        {
            Some(key) => {
                out.extend_from_slice(key);
                true
            }
            None => false,
        }
    }
}

/// A builder for `kind` wired to `registry` (and, for the elastic kind, to a budget of
/// `budget` bytes; hybrid kinds merge often), so every kind can be built the same way.
pub fn builder(kind: IndexKind, registry: &Arc<Registry>, budget: usize) -> IndexBuilder {
    builder_levels(kind, registry, budget, None)
}

/// [`builder`] with `tree_levels` BlindiTree levels in the kinds with SeqTree leaves.
pub fn builder_levels(
    kind: IndexKind,
    registry: &Arc<Registry>,
    budget: usize,
    tree_levels: Option<u8>,
) -> IndexBuilder {
    let keys = || registry.clone() as Arc<dyn KeySource>;
    match kind {
        IndexKind::Elastic => IndexBuilder::new(ElasticOptions {
            tree_levels,
            ..ElasticOptions::new(budget, keys())
        }),
        IndexKind::SeqTree => IndexBuilder::new(SeqTreeOptions {
            tree_levels,
            ..SeqTreeOptions::new(keys())
        }),
        IndexKind::Hybrid | IndexKind::HybridCompressed => {
            IndexBuilder::new(frequent_merges().for_kind(kind))
        }
        _ => IndexBuilder::new(kind),
    }
}

/// What a test does to a kind's builder beyond the kind (a node layout, say); the flag says
/// whether the test wants tiny nodes.
pub type Shape = fn(IndexBuilder, bool) -> IndexBuilder;

/// The kind as it comes.
pub fn as_is(builder: IndexBuilder, _tiny: bool) -> IndexBuilder {
    builder
}

/// The B+-tree in optimized pages split in the middle ([`PageOrganization::Prefix`]) with the
/// paper's 4-byte mid-keys; the smallest pages in tiny-node tests, so that splits and merges
/// happen constantly.
pub fn prefix_pages(builder: IndexBuilder, tiny: bool) -> IndexBuilder {
    optimized_pages(builder, tiny, PageOrganization::Prefix, MidWidth::Four)
}

/// Optimized pages with splits for long prefixes and short separators
/// ([`PageOrganization::PrefixSplit`]) and 8-byte mid-keys: the defaults.
pub fn prefix_split_pages(builder: IndexBuilder, tiny: bool) -> IndexBuilder {
    optimized_pages(
        builder,
        tiny,
        PageOrganization::PrefixSplit,
        MidWidth::Eight,
    )
}

/// The Bw-tree, with the smallest pages and chains of 2 deltas when `tiny` (so that
/// consolidations, splits and root growth happen all the time).
pub fn bwtree_pages(builder: IndexBuilder, tiny: bool) -> IndexBuilder {
    if !tiny {
        return builder;
    }
    builder.with_kind(elastree::BwTreeOptions {
        chain_length: 2,
        leaf_page_bytes: MIN_PAGE_BYTES,
        inner_page_bytes: MIN_PAGE_BYTES,
        ..elastree::BwTreeOptions::default()
    })
}

/// The Bw-tree in pages of whole keys ([`PageOrganization::Base`]: no prefix factored out,
/// splits in the middle), the smallest pages and chains of 2 deltas when `tiny`.
pub fn bwtree_base_pages(builder: IndexBuilder, tiny: bool) -> IndexBuilder {
    let mut options = elastree::BwTreeOptions {
        pages: PageOrganization::Base,
        ..elastree::BwTreeOptions::default()
    };
    if tiny {
        options.chain_length = 2;
        options.leaf_page_bytes = MIN_PAGE_BYTES;
        options.inner_page_bytes = MIN_PAGE_BYTES;
    }
    builder.with_kind(options)
}

/// The B+-tree in slotted nodes for variable-length keys ([`PageOrganization::Base`]).
pub fn base_pages(builder: IndexBuilder, _tiny: bool) -> IndexBuilder {
    builder.with_kind(BTreeOptions::default().pages(PageOrganization::Base))
}

fn optimized_pages(
    builder: IndexBuilder,
    tiny: bool,
    pages: PageOrganization,
    mid_key: MidWidth,
) -> IndexBuilder {
    let mut options = BTreeOptions {
        mid_key,
        ..BTreeOptions::default().pages(pages)
    };
    if tiny {
        options.leaf_page_bytes = MIN_PAGE_BYTES;
        options.inner_page_bytes = MIN_PAGE_BYTES;
    }
    builder.with_kind(options)
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
    let builder = builder_levels(kind, registry, TINY_BUDGET, Some(2));
    // SB-tree segments of 16 tiny blocks (and late runs of 4), so that even a short run
    // seals segments and splits late blocks again and again.
    let builder = if kind == IndexKind::SbTree {
        builder.with_kind(SbTreeOptions {
            run_blocks: 16,
            ..SbTreeOptions::default()
        })
    } else {
        builder
    };
    builder
        .unique(unique)
        .key_len(keys.key_len())
        .max_key_len(max_key_len)
        .leaf_capacity(4)
        .inner_capacity(4)
}

/// An index built for a test. The hybrid kinds keep their own type, so that a test can
/// force merges at chosen points (background merges start when the machine gets to them,
/// so only forced ones have a count the schedule cannot change).
pub enum Built {
    /// `hybrid` or `hybrid-compressed`.
    Hybrid(HybridIndex),
    /// Every other kind.
    Other(Box<dyn Index>),
}

impl Built {
    /// Builds the index `builder` describes.
    pub fn new(builder: &IndexBuilder) -> Built {
        let kind = builder.kind();
        let hybrid = builder
            .kind_options_as::<HybridOptions>()
            .cloned()
            .or_else(|| {
                matches!(kind, IndexKind::Hybrid | IndexKind::HybridCompressed)
                    .then(|| HybridOptions::default().for_kind(kind))
            });
        let built = match hybrid {
            Some(hybrid) => HybridIndex::new(builder.options(), &hybrid).map(Built::Hybrid),
            None => builder.build().map(Built::Other),
        };
        built.unwrap_or_else(|e| panic!("building a {kind} index: {e}"))
    }

    /// The index.
    pub fn index(&self) -> &dyn Index {
        match self {
            Built::Hybrid(index) => index,
            Built::Other(index) => &**index,
        }
    }

    /// The hybrid index, if it is one.
    pub fn hybrid(&self) -> Option<&HybridIndex> {
        match self {
            Built::Hybrid(index) => Some(index),
            Built::Other(_) => None,
        }
    }
}

/// [`run_model`] on `built`; on a hybrid index it also forces `merges` merges spread evenly
/// over the run's structure checks (fewer if the run has fewer checks), while background
/// merges go on racing the operations in between. Returns how many it forced, a count the
/// schedule cannot change: the index's merge count is at least that.
pub fn run_model_merging(
    built: &Built,
    registry: &Registry,
    keys: Keys,
    ops: u64,
    seed: u64,
    check_every: u64,
    merges: u64,
) -> u64 {
    let checks = scaled(ops) / check_period(scaled(ops), check_every);
    let period = (checks / merges.max(1)).max(1);
    let (mut seen, mut forced) = (0u64, 0u64);
    run_model_with(
        built.index(),
        registry,
        keys,
        ops,
        seed,
        check_every,
        &mut |step| {
            seen += 1;
            if let Some(hybrid) = built.hybrid() {
                if seen % period == 0 && forced < merges {
                    hybrid.merge_now().unwrap_or_else(|e| {
                        panic!(
                            "forced merge at step {step} failed: {e}; keys {keys:?}, seed {seed}"
                        )
                    });
                    forced += 1;
                }
            }
        },
    );
    forced
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
        .unwrap_or_else(|e| panic!("full scan of the {} index: {e}", index.kind()));
    pairs
}

/// Panics with the first difference between two sorted listings, `got` and `expected`,
/// named by `what`: the first pair missing, the first pair extra, and both counts (a dump
/// of two long vectors helps nobody).
pub fn assert_same_pairs<T: Ord + Debug + Copy>(got: &[T], expected: &[T], what: &str) {
    if got == expected {
        return;
    }
    let got_set: BTreeSet<T> = got.iter().copied().collect();
    let expected_set: BTreeSet<T> = expected.iter().copied().collect();
    let missing: Vec<&T> = expected_set.difference(&got_set).take(5).collect();
    let extra: Vec<&T> = got_set.difference(&expected_set).take(5).collect();
    let duplicated = got.len() - got_set.len();
    let first_difference = got
        .iter()
        .zip(expected)
        .position(|(g, e)| g != e)
        .unwrap_or(got.len().min(expected.len()));
    panic!(
        "{what}: got {} pairs, expected {}; first difference at position {first_difference}; \
         missing (first 5): {missing:?}; extra (first 5): {extra:?}; {duplicated} repeated",
        got.len(),
        expected.len()
    );
}

/// How long [`settled_memory`] waits for the epoch collector at most.
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Lets the epoch collector free replaced nodes (they stay counted until then) until
/// `index` holds at most `bound` bytes or [`SETTLE_LIMIT`] passes, and returns what it holds
/// then. Another test's thread that is pinned while the machine runs something else holds
/// the epoch back for as long, so this waits for the condition rather than flushing a
/// fixed number of times; it sleeps between rounds so that thread gets to run and unpin.
pub fn settled_memory(index: &dyn Index, bound: usize) -> usize {
    let deadline = std::time::Instant::now() + SETTLE_LIMIT;
    loop {
        for _ in 0..64 {
            crossbeam_epoch::pin().flush();
        }
        let held = index.memory().total();
        if held <= bound || std::time::Instant::now() >= deadline {
            return held;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
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

/// The elastic budget of tiny-node tests: small enough that the model tests' few hundred
/// keys push the tree into shrinking, and draining it brings it back to expanding.
pub const TINY_BUDGET: usize = 8 * 1024;

/// How the model test draws keys.
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    /// 8-byte big-endian integers from a small space, so keys collide and nodes churn.
    Small64 {
        /// Keys are drawn from `0..space`.
        space: u64,
    },
    /// 8-byte keys, mostly increasing, the pattern of time-series and auto-increment ids.
    Sequential64,
    /// 16-byte keys from a small space.
    Small128 {
        /// Keys are drawn from `space` values.
        space: u64,
    },
    /// Variable length from 0 to `max` bytes over a tiny alphabet (shared prefixes, keys that
    /// are prefixes of others, zero bytes).
    Var {
        /// The longest key drawn (5% of keys have this length).
        max: usize,
    },
    /// Variable length up to `max` bytes: one of a few long shared prefixes (a tenant and a
    /// path, 18 to 30 bytes), then a short tail over the tiny alphabet of [`Keys::Var`]; so
    /// keys share long prefixes, and many differ only in their last byte.
    Prefixed {
        /// The longest key drawn.
        max: usize,
    },
}

/// The long prefixes of [`Keys::Prefixed`].
const SHARED_PREFIXES: [&[u8]; 3] = [
    b"tenant-0042/users/",
    b"tenant-0042/users/archive/2026/",
    b"tenant-0043/orders/\x00\x01\x02",
];

impl Keys {
    /// The key length an index needs for these keys.
    pub fn key_len(self) -> KeyLen {
        match self {
            Keys::Small64 { .. } | Keys::Sequential64 => KeyLen::Fixed(8),
            Keys::Small128 { .. } => KeyLen::Fixed(16),
            Keys::Var { .. } | Keys::Prefixed { .. } => KeyLen::Variable,
        }
    }

    /// The key of operation `step`.
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
            Keys::Prefixed { max } => {
                let prefix = SHARED_PREFIXES[rng.gen_range(0..SHARED_PREFIXES.len())];
                let mut key = prefix[..prefix.len().min(max)].to_vec();
                let tail = rng.gen_range(0..=3).min(max - key.len());
                key.extend((0..tail).map(|_| [0u8, 3, 4, b'a', 0xff][rng.gen_range(0..5)]));
                key
            }
        }
    }
}

/// The model of an index: key -> tids (one for unique).
pub type Model = BTreeMap<Vec<u8>, BTreeSet<u64>>;

/// Every pair of the model in (key, tid) order within the bounds, lazily (a scan with a
/// limit of 5 must not pay for a listing of 30,000 pairs); reverse it for a descending scan.
pub fn model_range<'m>(
    model: &'m Model,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> impl DoubleEndedIterator<Item = (&'m [u8], u64)> + 'm {
    let empty = match (lower, upper) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => {
            l > u || (l == u && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_))))
        }
        _ => false,
    };
    let range = (!empty).then(|| model.range::<[u8], _>((lower, upper)));
    range
        .into_iter()
        .flatten()
        .flat_map(|(k, tids)| tids.iter().map(move |t| (k.as_slice(), *t)))
}

fn bound_of(rng: &mut StdRng, keys: Keys, step: u64) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(keys.draw(rng, step)),
        _ => Bound::Excluded(keys.draw(rng, step)),
    }
}

/// Runs `ops` random operations against `index` and the model, comparing every result, and
/// checks the structure every `check_every` operations and at the end. Every failure names
/// the index kind, the keys, the seed, the step, the operation and the key.
pub fn run_model(
    index: &dyn Index,
    registry: &Registry,
    keys: Keys,
    ops: u64,
    seed: u64,
    check_every: u64,
) {
    run_model_with(index, registry, keys, ops, seed, check_every, &mut |_| {});
}

/// [`run_model`], calling `checkpoint(step)` after each structure check (a hybrid test
/// merges there, for example).
pub fn run_model_with(
    index: &dyn Index,
    registry: &Registry,
    keys: Keys,
    ops: u64,
    seed: u64,
    check_every: u64,
    checkpoint: &mut dyn FnMut(u64),
) {
    let ops = scaled(ops);
    let check_every = check_period(ops, check_every);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let unique = index.is_unique();
    let run = format!(
        "{} index ({}), keys {keys:?}, seed {seed}",
        index.kind(),
        if unique { "unique" } else { "non-unique" }
    );
    for step in 0..ops {
        let key = keys.draw(&mut rng, step);
        let ctx = || format!("{run}, step {step}, key {key:02x?}");
        match rng.gen_range(0..100) {
            0..=39 => {
                let tid = if unique {
                    let tid = rng.gen();
                    registry.register(tid, &key);
                    tid
                } else {
                    registry.pair_tid(&key, rng.gen_range(0..8))
                };
                let got = index
                    .insert(&key, tid)
                    .unwrap_or_else(|e| fail(&format!("insert tid {tid}"), e, &ctx));
                let tids = model.entry(key.clone()).or_default();
                if unique {
                    let previous = tids.pop_first();
                    tids.insert(tid);
                    assert_eq!(got, previous, "insert tid {tid} (previous tid); {}", ctx());
                } else {
                    let present = !tids.insert(tid);
                    assert_eq!(
                        got,
                        present.then_some(tid),
                        "insert tid {tid} (already present?); {}",
                        ctx()
                    );
                }
            }
            40..=64 => {
                if unique {
                    let got = index
                        .remove(&key)
                        .unwrap_or_else(|e| fail("remove", e, &ctx));
                    let expected = model.remove(&key).and_then(|mut t| t.pop_first());
                    assert_eq!(got, expected, "remove (removed tid); {}", ctx());
                } else {
                    let tid = registry.pair_tid(&key, rng.gen_range(0..8));
                    let got = index
                        .remove_pair(&key, tid)
                        .unwrap_or_else(|e| fail(&format!("remove_pair tid {tid}"), e, &ctx));
                    let expected = model.get_mut(&key).is_some_and(|t| t.remove(&tid));
                    if model.get(&key).is_some_and(|t| t.is_empty()) {
                        model.remove(&key);
                    }
                    assert_eq!(got, expected, "remove_pair tid {tid} (removed?); {}", ctx());
                }
            }
            65..=79 => {
                let expected: Vec<u64> = model
                    .get(&key)
                    .map(|t| t.iter().copied().collect())
                    .unwrap_or_default();
                let got = index.get(&key).unwrap_or_else(|e| fail("get", e, &ctx));
                assert_eq!(got, expected.first().copied(), "get; {}", ctx());
                let mut all = Vec::new();
                index
                    .get_all(&key, &mut all)
                    .unwrap_or_else(|e| fail("get_all", e, &ctx));
                assert_eq!(all, expected, "get_all; {}", ctx());
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
                // Each pair the scan visits is compared with the model's next pair as it
                // comes (no copy of every visited key: unlimited scans of large ranges are
                // most of the model test's time otherwise).
                let mut expected: Box<dyn Iterator<Item = (&[u8], u64)>> = match direction {
                    Direction::Ascending => Box::new(model_range(&model, lo, hi).take(limit)),
                    Direction::Descending => {
                        Box::new(model_range(&model, lo, hi).rev().take(limit))
                    }
                };
                let mut visited = 0usize;
                let mut difference: Option<String> = None;
                let n = index
                    .scan(lo, hi, direction, limit, &mut |k, t| {
                        if difference.is_none() {
                            match expected.next() {
                                Some((ek, et)) if ek == k && et == t => {}
                                other => {
                                    difference = Some(format!(
                                        "pair {visited} is ({k:02x?}, {t}), expected {other:02x?}"
                                    ))
                                }
                            }
                        }
                        visited += 1;
                    })
                    .unwrap_or_else(|e| fail("scan", e, &ctx));
                if difference.is_none() {
                    if let Some(next) = expected.next() {
                        difference = Some(format!(
                            "the scan ended after {visited} pairs, expected also {next:02x?}"
                        ));
                    }
                }
                let what = || {
                    format!(
                        "scan {direction:?} {lower:02x?}..{upper:02x?} limit {limit}; {}",
                        ctx()
                    )
                };
                if let Some(difference) = difference {
                    panic!("{}: {difference}", what());
                }
                assert_eq!(n, visited, "pairs counted by {}", what());
            }
        }
        if check_every > 0 && step % check_every == 0 {
            check_against(index, &model, &ctx());
            checkpoint(step);
        }
    }
    check_against(index, &model, &format!("{run}, after {ops} steps"));
    // Drain everything: exercises merges down to an empty tree.
    for (key, tids) in &model {
        for &tid in tids {
            let ctx = || format!("{run}, draining key {key:02x?} tid {tid}");
            if unique {
                let removed = index
                    .remove(key)
                    .unwrap_or_else(|e| panic!("remove failed: {e}; {}", ctx()));
                assert_eq!(removed, Some(tid), "remove; {}", ctx());
            } else {
                let removed = index
                    .remove_pair(key, tid)
                    .unwrap_or_else(|e| panic!("remove_pair failed: {e}; {}", ctx()));
                assert!(removed, "remove_pair found nothing; {}", ctx());
            }
        }
    }
    check_against(index, &Model::new(), &format!("{run}, drained"));
    let mut left = 0;
    index
        .scan(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Ascending,
            usize::MAX,
            &mut |_, _| left += 1,
        )
        .unwrap_or_else(|e| panic!("full scan failed: {e}; {run}, drained"));
    assert_eq!(left, 0, "pairs left in a drained index; {run}");
}

/// Panics saying that operation `op` failed with `e`, and where.
fn fail(op: &str, e: elastree::Error, ctx: &dyn Fn() -> String) -> ! {
    panic!("{op} failed: {e}; {}", ctx())
}

/// The structure check and the pair count against the model.
fn check_against(index: &dyn Index, model: &Model, ctx: &str) {
    index
        .check()
        .unwrap_or_else(|e| panic!("check failed: {e}; {ctx}"));
    let pairs: usize = model.values().map(|t| t.len()).sum();
    assert_eq!(index.len(), pairs, "len; {ctx}");
}
