//! Concurrent stress tests: writers on interleaved (overlapping) key ranges with tiny nodes so
//! that splits and merges race, scanners checking order and completeness while they run, and
//! a final check that every acknowledged pair is present exactly once. Each test runs every
//! writable kind over several seeds (`ELASTREE_STRESS_SEEDS`, default 3; the kinds can be
//! narrowed with `ELASTREE_STRESS_KINDS`, a comma-separated list of names); what it checks is
//! what no schedule can change: every writer's own results, the scans' order and the stable
//! keys they must return, the final contents, `len()` and `check()`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Barrier;
use std::thread;

use elastree::bwtree::BwTreeStats;
use elastree::elastic::ElasticStats;
use elastree::{Direction, Index, IndexKind, KeyLen};
use elastree_testkit::model::{
    all_pairs_by, as_is, assert_same_pairs, base_pages, builder, builder_levels, bwtree_base_pages,
    bwtree_pages, prefix_pages, prefix_split_pages, scaled, settled_memory, Built, Registry, Shape,
};
use elastree_testkit::{time_limit, StopFlag};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const WRITERS: u64 = 4;
const SCANNERS: u64 = 2;
const KEYS_PER_WRITER: u64 = 3_000;
const OPS_PER_WRITER: u64 = 60_000;
/// Keys `k` with `k % STABLE_EVERY == 0` are inserted before the run and never touched, so
/// every scan must return the ones in its range.
const STABLE_EVERY: u64 = 10;
/// Merges writer 0 forces on a hybrid index while the others write and scan (background
/// merges come on top; only forced ones have a count the schedule cannot change).
const FORCED_MERGES: u64 = 3;

/// The seeds each test runs: `ELASTREE_STRESS_SEEDS` of them (default 3).
fn seeds() -> std::ops::Range<u64> {
    let n = std::env::var("ELASTREE_STRESS_SEEDS")
        .ok()
        .map(|v| {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or_else(|| panic!("ELASTREE_STRESS_SEEDS={v:?}: expected a count >= 1"))
        })
        .unwrap_or(3);
    0..n
}

/// How a test encodes key numbers.
#[derive(Clone, Copy, Debug)]
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

/// One writer's view of its own keys: what it last wrote under each key it owns.
#[derive(Default)]
struct Mine {
    /// Unique index: key -> tid.
    unique: BTreeMap<u64, u64>,
    /// Non-unique index: the pairs present.
    pairs: BTreeSet<(u64, u64)>,
}

impl Mine {
    fn into_pairs(self) -> impl Iterator<Item = (u64, u64)> {
        self.unique.into_iter().chain(self.pairs)
    }
}

/// How the writers write: the share of inserts among their operations, whether each first
/// inserts every key it owns (so that a run of mostly removes empties pages), and whether
/// they write in bursts of neighbouring keys (`burst` operations at a time on `burst` of their
/// keys in a row, a tenant's rows or a time range; 0: every key drawn from all of them).
#[derive(Clone, Copy)]
struct Mix {
    inserts: f64,
    preload: bool,
    burst: u64,
}

/// The mix of most tests: 60% inserts, from an index holding the stable keys only.
const MIXED: Mix = Mix {
    inserts: 0.6,
    preload: false,
    burst: 0,
};

/// [`MIXED`] in bursts of 64 operations on 64 neighbouring keys of the writer's.
const BURSTS: Mix = Mix { burst: 64, ..MIXED };

/// Writer `w`'s run: random inserts and removes of the keys it owns (in `mix`), each result
/// checked against what it wrote before. Writer 0 also forces merges of a hybrid index.
fn write(
    built: &Built,
    registry: &Registry,
    enc: Enc,
    seed: u64,
    w: u64,
    mix: Mix,
    what: &str,
) -> Mine {
    let index = built.index();
    let unique = index.is_unique();
    let universe = WRITERS * KEYS_PER_WRITER;
    let ops = scaled(OPS_PER_WRITER);
    let mut rng = StdRng::seed_from_u64(seed * 1000 + w);
    let mut mine = Mine::default();
    let mut burst_start = 0;
    let owned = (0..KEYS_PER_WRITER).map(|i| i * WRITERS + w);
    for k in owned.filter(|k| mix.preload && k % STABLE_EVERY != 0) {
        let key = encode(enc, k);
        let tid = if unique {
            let tid = universe + k;
            registry.register(tid, &key);
            mine.unique.insert(k, tid);
            tid
        } else {
            let tid = registry.pair_tid(&key, 0);
            mine.pairs.insert((k, tid));
            tid
        };
        let previous = index.insert(&key, tid).unwrap();
        assert_eq!(previous, None, "{what}: writer {w} preloading key {k}");
    }
    for op in 0..ops {
        if w == 0 && (1..=FORCED_MERGES).any(|i| op == ops * i / (FORCED_MERGES + 1)) {
            if let Some(hybrid) = built.hybrid() {
                hybrid
                    .merge_now()
                    .unwrap_or_else(|e| panic!("{what}: forced merge at op {op}: {e}"));
            }
        }
        // Writer w owns keys k with k % WRITERS == w: interleaved with the others, so all
        // writers hit the same leaves.
        let i = if mix.burst == 0 {
            rng.gen_range(0..KEYS_PER_WRITER)
        } else {
            if op % mix.burst == 0 {
                burst_start = rng.gen_range(0..KEYS_PER_WRITER - mix.burst);
            }
            burst_start + rng.gen_range(0..mix.burst)
        };
        let k = i * WRITERS + w;
        if k.is_multiple_of(STABLE_EVERY) {
            continue;
        }
        let key = encode(enc, k);
        // Tids name tuples: one per insert (unique), or one of three per key (non-unique);
        // the registry is the table kinds with indirect keys load keys from.
        let tid = if unique {
            let tid = universe * 2 + op * WRITERS + w;
            registry.register(tid, &key);
            tid
        } else {
            registry.pair_tid(&key, rng.gen_range(0..3))
        };
        let ctx = || format!("{what}: writer {w} op {op} key {k} tid {tid}");
        if rng.gen_bool(mix.inserts) {
            let previous = index
                .insert(&key, tid)
                .unwrap_or_else(|e| panic!("insert failed: {e}; {}", ctx()));
            if unique {
                let expected = mine.unique.insert(k, tid);
                assert_eq!(previous, expected, "insert (previous tid); {}", ctx());
            } else {
                let present = !mine.pairs.insert((k, tid));
                assert_eq!(previous.is_some(), present, "insert (present?); {}", ctx());
            }
        } else if unique {
            let removed = index
                .remove(&key)
                .unwrap_or_else(|e| panic!("remove failed: {e}; {}", ctx()));
            assert_eq!(removed, mine.unique.remove(&k), "remove (tid); {}", ctx());
        } else {
            let removed = index
                .remove_pair(&key, tid)
                .unwrap_or_else(|e| panic!("remove_pair failed: {e}; {}", ctx()));
            let expected = mine.pairs.remove(&(k, tid));
            assert_eq!(removed, expected, "remove_pair (removed?); {}", ctx());
        }
    }
    mine
}

/// Scanner `scanner`'s run until `stop`: scans of random ranges both ways, each in order,
/// without repeats, and holding every stable key of its range.
fn scan(index: &dyn Index, enc: Enc, seed: u64, scanner: u64, stop: &StopFlag, what: &str) {
    let universe = WRITERS * KEYS_PER_WRITER;
    let mut rng = StdRng::seed_from_u64(seed * 1000 + 500 + scanner);
    let mut scans = 0;
    while !stop.is_set() || scans < scaled(20) {
        scans += 1;
        let lo = rng.gen_range(0..universe);
        let hi = (lo + rng.gen_range(1..universe / 4)).min(universe);
        let direction = if scans % 2 == 0 {
            Direction::Ascending
        } else {
            Direction::Descending
        };
        let what = format!("{what}: scanner {scanner} scan {scans} {direction:?} {lo}..{hi}");
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
            .unwrap_or_else(|e| panic!("{what} failed: {e}"));
        if direction == Direction::Descending {
            seen.reverse();
        }
        if let Some(at) = seen.windows(2).position(|p| p[0] >= p[1]) {
            panic!(
                "{what}: out of order or repeated at position {at}: {:?} then {:?}",
                seen[at],
                seen[at + 1]
            );
        }
        let keys: BTreeSet<u64> = seen.iter().map(|p| p.0).collect();
        let stable = (lo.div_ceil(STABLE_EVERY) * STABLE_EVERY..hi).step_by(STABLE_EVERY as usize);
        let missed: Vec<u64> = stable.filter(|k| !keys.contains(k)).take(5).collect();
        assert!(missed.is_empty(), "{what}: missed stable keys {missed:?}");
    }
}

fn stress(built: &Built, registry: &Registry, enc: Enc, seed: u64, mix: Mix, what: &str) {
    let index = built.index();
    let universe = WRITERS * KEYS_PER_WRITER;
    let stable: Vec<u64> = (0..universe).step_by(STABLE_EVERY as usize).collect();
    for &k in &stable {
        let key = encode(enc, k);
        registry.register(k, &key);
        index
            .insert(&key, k)
            .unwrap_or_else(|e| panic!("{what}: loading stable key {k}: {e}"));
    }
    let stop = StopFlag::new();
    let barrier = Barrier::new((WRITERS + SCANNERS) as usize);
    let finals: Vec<Mine> = thread::scope(|s| {
        // Set when this closure ends, also when a writer's panic unwinds it, so the scanners
        // stop and the panic reaches the harness instead of hanging the scope.
        let stopping = stop.set_on_drop();
        for scanner in 0..SCANNERS {
            let (stop, barrier) = (&stop, &barrier);
            s.spawn(move || {
                barrier.wait();
                scan(index, enc, seed, scanner, stop, what);
            });
        }
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    write(built, registry, enc, seed, w, mix, what)
                })
            })
            .collect();
        let finals = writers.into_iter().map(|h| h.join().unwrap()).collect();
        drop(stopping);
        finals
    });

    index
        .check()
        .unwrap_or_else(|e| panic!("{what}: check after the run: {e}"));
    let mut expected: BTreeSet<(u64, u64)> = stable.iter().map(|&k| (k, k)).collect();
    for mine in finals {
        expected.extend(mine.into_pairs());
    }
    let expected: Vec<(u64, u64)> = expected.into_iter().collect();
    let got = all_pairs_by(index, |k| decode(enc, k));
    assert_same_pairs(&got, &expected, &format!("{what}: final contents"));
    assert_eq!(index.len(), expected.len(), "{what}: len");
}

/// Budget of the elastic kind: a fraction of what the keys need, so leaves convert both ways
/// while the writers race.
const STRESS_BUDGET: usize = 16 * 1024;

fn run(kind: IndexKind, unique: bool, key_len: KeyLen, tiny: bool, enc: Enc) {
    run_shaped(kind, as_is, unique, key_len, tiny, enc);
}

/// [`run`] with `shape` applied to the builder.
fn run_shaped(kind: IndexKind, shape: Shape, unique: bool, key_len: KeyLen, tiny: bool, enc: Enc) {
    run_mix(kind, shape, (unique, key_len, tiny, enc), MIXED);
}

/// [`run_shaped`] with the writers' `mix`.
fn run_mix(
    kind: IndexKind,
    shape: Shape,
    (unique, key_len, tiny, enc): (bool, KeyLen, bool, Enc),
    mix: Mix,
) {
    if !kind.takes_key_len(key_len) {
        return;
    }
    for seed in seeds() {
        let what = format!(
            "{kind} {} {enc:?} {} nodes, seed {seed}",
            if unique { "unique" } else { "non-unique" },
            if tiny { "tiny" } else { "default" }
        );
        let registry = Registry::new();
        // Two BlindiTree levels even in 4-key SeqTree leaves, so searches use the tree.
        let levels = tiny.then_some(2);
        let b = builder_levels(kind, &registry, STRESS_BUDGET, levels)
            .unique(unique)
            .key_len(key_len);
        let b = if tiny {
            b.leaf_capacity(4).inner_capacity(4)
        } else {
            b
        };
        let built = Built::new(&shape(b, tiny));
        stress(&built, &registry, enc, seed, mix, &what);
        if let Some(stats) = built.index().stats_as::<ElasticStats>() {
            // The race ran through conversions, not around them.
            assert!(
                stats.compactions > 0 && stats.expansions + stats.grows > 0,
                "{what}: {stats:?}"
            );
        }
        if let Some(hybrid) = built.hybrid() {
            // The race ran through merges too: the ones writer 0 forced, and more that the
            // trigger started (loading the stable keys alone reaches it).
            hybrid.wait_for_merge().unwrap();
            let merges = hybrid.stats().merges;
            assert!(
                merges > FORCED_MERGES,
                "{what}: {merges} merges, {FORCED_MERGES} forced"
            );
        }
    }
}

fn for_every_writable_kind(f: impl Fn(IndexKind)) {
    // `ELASTREE_STRESS_KINDS=sbtree,btree` runs only the kinds named (by `IndexKind::name`).
    let only = std::env::var("ELASTREE_STRESS_KINDS").ok();
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == kind.name()))
        {
            continue;
        }
        f(kind);
    }
}

#[test]
fn unique_fixed8_tiny_nodes() {
    let _limit = time_limit();
    for_every_writable_kind(|kind| run(kind, true, KeyLen::Fixed(8), true, Enc::Fixed8));
}

#[test]
fn unique_fixed8_default_nodes() {
    let _limit = time_limit();
    for_every_writable_kind(|kind| run(kind, true, KeyLen::Fixed(8), false, Enc::Fixed8));
}

#[test]
fn unique_variable_tiny_nodes() {
    let _limit = time_limit();
    for_every_writable_kind(|kind| run(kind, true, KeyLen::Variable, true, Enc::Var));
}

#[test]
fn non_unique_fixed8_tiny_nodes() {
    let _limit = time_limit();
    for_every_writable_kind(|kind| run(kind, false, KeyLen::Fixed(8), true, Enc::Fixed8));
}

/// The B+-tree in every page organization (the tests above run its default one too),
/// variable-length keys with shared prefixes, tiny and default pages, unique and non-unique.
#[test]
fn every_page_organization_variable_keys() {
    let _limit = time_limit();
    let shapes: [Shape; 3] = [prefix_pages, prefix_split_pages, base_pages];
    for (unique, tiny) in [(true, true), (false, true), (true, false)] {
        for shape in shapes {
            run_shaped(
                IndexKind::BTree,
                shape,
                unique,
                KeyLen::Variable,
                tiny,
                Enc::Var,
            );
        }
    }
}

/// Writers in bursts of neighbouring keys (a tenant's rows, a time range) on the B+-tree's
/// optimized pages: most inserts start at the writer's insert finger, a page above the
/// leaves, while pages split and merge (and inner pages are retired) under it.
#[test]
fn page_writers_in_bursts_of_neighbouring_keys() {
    let _limit = time_limit();
    let shapes: [Shape; 2] = [prefix_pages, prefix_split_pages];
    for (unique, tiny) in [(true, true), (false, true), (true, false)] {
        for shape in shapes {
            let config = (unique, KeyLen::Variable, tiny, Enc::Var);
            run_mix(IndexKind::BTree, shape, config, BURSTS);
        }
    }
}

/// The Bw-tree with the smallest pages and chains of 2 deltas (the tests above run it with
/// 4-entry pages and default chains): consolidations, splits, root growth and helped index
/// entries race the writers and scanners all the time.
#[test]
fn bwtree_tiny_pages_short_chains() {
    let _limit = time_limit();
    for (unique, key_len, enc) in [
        (true, KeyLen::Variable, Enc::Var),
        (false, KeyLen::Variable, Enc::Var),
        (true, KeyLen::Fixed(8), Enc::Fixed8),
    ] {
        run_shaped(IndexKind::BwTree, bwtree_pages, unique, key_len, true, enc);
    }
}

/// The Bw-tree in pages of whole keys (no prefix, splits in the middle), smallest pages and
/// chains of 2, variable-length keys with shared prefixes, unique and non-unique.
#[test]
fn bwtree_base_pages_tiny() {
    let _limit = time_limit();
    for unique in [true, false] {
        run_shaped(
            IndexKind::BwTree,
            bwtree_base_pages,
            unique,
            KeyLen::Variable,
            true,
            Enc::Var,
        );
    }
}

/// The Bw-tree with the smallest pages and chains of 2, each writer first inserting every
/// key it owns, then removing far more than it inserts (30% inserts) while scanners read:
/// emptied leaves merge into their left siblings all the time, and so do inner pages left
/// with one child, racing splits, other merges and the scans. No key is lost or duplicated,
/// and both kinds of merges happen.
#[test]
fn bwtree_delete_heavy_tiny_pages() {
    let _limit = time_limit();
    let mix = Mix {
        inserts: 0.3,
        preload: true,
        burst: 0,
    };
    for (unique, key_len, enc) in [
        (true, KeyLen::Fixed(8), Enc::Fixed8),
        (false, KeyLen::Variable, Enc::Var),
    ] {
        for seed in seeds() {
            let what = format!("bwtree delete-heavy unique {unique} {enc:?}, seed {seed}");
            let registry = Registry::new();
            let b = builder(IndexKind::BwTree, &registry, STRESS_BUDGET)
                .unique(unique)
                .key_len(key_len)
                .leaf_capacity(4)
                .inner_capacity(4);
            let built = Built::new(&bwtree_pages(b, true));
            stress(&built, &registry, enc, seed, mix, &what);
            let stats = built.index().stats_as::<BwTreeStats>().unwrap();
            // About 30% of the keys stay (and the stable tenth): the leaves, split while the
            // writers preloaded, merged back, and so did inner pages left with one child.
            assert!(stats.merges > 100, "{what}: {stats:?}");
            assert!(stats.inner_merges > 0, "{what}: {stats:?}");
            assert!(stats.splits > stats.merges, "{what}: {stats:?}");
        }
    }
}

#[test]
fn non_unique_variable_tiny_nodes() {
    let _limit = time_limit();
    for_every_writable_kind(|kind| run(kind, false, KeyLen::Variable, true, Enc::Var));
}

/// Writers appending increasing keys to an elastic index with a budget (writer `w` takes
/// keys `w`, `w + WRITERS`, ..., so all of them append to the same last leaves) while a
/// scanner reads: the sweep compacts the cold leaves behind them as they race. Every key is
/// there at the end, the structure checks, scans never go backwards, and the budget holds
/// (a sweep that finds the cursor taken or loses races leaves its pairs owed to the next, so
/// the sweep keeps pace whatever the schedule).
#[test]
fn elastic_ordered_writers_sweep_under_the_budget() {
    let _limit = time_limit();
    let registry = Registry::new();
    let per_writer = scaled(50_000);
    let total = WRITERS * per_writer;
    for k in 0..total {
        registry.register(k, &k.to_be_bytes());
    }
    // About 12 bytes per key: B+-tree leaves take ~16, SeqTree leaves ~10.
    let budget = (total as usize * 12).max(64 * 1024);
    let index = builder(IndexKind::Elastic, &registry, budget)
        .key_len(KeyLen::Fixed(8))
        .build()
        .unwrap();
    let index = &*index;
    let stop = StopFlag::new();
    thread::scope(|s| {
        let stopping = stop.set_on_drop();
        let stop = &stop;
        s.spawn(move || {
            let mut rng = StdRng::seed_from_u64(7);
            let mut scans = 0;
            while !stop.is_set() || scans < scaled(20) {
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
                if let Some(at) = seen.windows(2).position(|p| p[0].0 >= p[1].0) {
                    panic!(
                        "scan {scans} from {lo}: out of order at {at}: {:?} then {:?}",
                        seen[at],
                        seen[at + 1]
                    );
                }
                if let Some(bad) = seen.iter().find(|&&(k, t)| k != t || k < lo) {
                    panic!(
                        "scan {scans} from {lo}: pair {bad:?} (tid must equal key, key >= {lo})"
                    );
                }
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    for i in 0..per_writer {
                        let k = i * WRITERS + w;
                        let previous = index.insert(&k.to_be_bytes(), k);
                        assert_eq!(previous, Ok(None), "writer {w} insert of new key {k}");
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        drop(stopping);
    });
    index.check().unwrap();
    assert_eq!(index.len(), total as usize);
    for k in 0..total {
        assert_eq!(
            index.get(&k.to_be_bytes()).unwrap(),
            Some(k),
            "get of key {k}"
        );
    }
    let stats = index.stats_as::<ElasticStats>().unwrap();
    assert!(stats.sweeps > 0, "{stats:?}");
    let held = settled_memory(index, (budget as f64 * 1.05) as usize);
    assert!(
        held as f64 <= budget as f64 * 1.05,
        "{held} bytes over the budget of {budget} ({stats:?})"
    );
}

/// The SB-tree under the workload it is for: writers take batches of increasing keys from a
/// shared clock (the newest readings) and append them, hold some back and insert them a few
/// batches later (delayed readings, which land in the frontier's late runs or in data
/// blocks), insert keys another writer also inserts at the same time (duplicates, which meet
/// in the runs' checks), and remove some of their own keys; scanners check order and the
/// stable keys while segments are sealed and converted under them. At the end every key is
/// there once, with the tid of its last insert; every insert's answer chains: of all inserts
/// of a key exactly one found nothing, and the others each replaced a distinct earlier tid.
mod sbtree_ingest {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    use std::ops::Bound;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::thread;

    use elastree::sbtree::{SbTreeOptions, SbTreeStats};
    use elastree::{Direction, Index, IndexBuilder, KeyLen};
    use elastree_testkit::model::{all_pairs, assert_same_pairs, scaled};
    use elastree_testkit::{time_limit, StopFlag};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const WRITERS: u64 = 4;
    const SCANNERS: u64 = 2;
    /// Keys a writer takes from the clock at a time.
    const BATCH: u64 = 16;
    /// Batches each writer takes.
    const BATCHES: u64 = 2_500;
    /// Keys below this are loaded before the run and never touched: every scan must see
    /// the ones in its range.
    const STABLE: u64 = 2_000;
    /// Keys are the clock's values spread out, as timestamps with a sensor id are.
    fn key(clock: u64) -> u64 {
        (1 << 40) + clock * 8
    }

    /// What one writer did: every insert (key, tid, the index's answer), and the keys it
    /// removed with the tid removed.
    #[derive(Default)]
    struct Log {
        inserts: Vec<(u64, u64, Option<u64>)>,
        removes: Vec<(u64, u64)>,
    }

    fn write(index: &dyn Index, clock: &AtomicU64, w: u64, seed: u64) -> Log {
        let mut rng = StdRng::seed_from_u64(seed * 100 + w);
        let mut log = Log::default();
        let mut held: Vec<(u64, u64)> = Vec::new(); // (release batch, key)
        let mut mine: Vec<u64> = Vec::new();
        let mut n = 0u64;
        let mut insert = |k: u64, log: &mut Log| {
            n += 1;
            let tid = (w << 48) | n;
            let previous = index.insert(&key(k).to_be_bytes(), tid).unwrap();
            log.inserts.push((k, tid, previous));
        };
        for batch in 0..scaled(BATCHES) {
            let first = clock.fetch_add(BATCH, Ordering::AcqRel);
            for k in first..first + BATCH {
                if rng.gen_bool(0.15) {
                    held.push((batch + rng.gen_range(1..8), k));
                } else {
                    insert(k, &mut log);
                    mine.push(k);
                }
            }
            // A key of the batch before this one, likely another writer's: two inserts of it
            // race (or follow each other) across runs.
            if first >= STABLE + BATCH && rng.gen_bool(0.3) {
                insert(first - rng.gen_range(1..=BATCH), &mut log);
            }
            // Delayed keys due now.
            let (due, later): (Vec<_>, Vec<_>) = held.drain(..).partition(|&(at, _)| at <= batch);
            held = later;
            for (_, k) in due {
                insert(k, &mut log);
            }
            // Now and then, remove one of this writer's own keys (no one else removes them).
            if rng.gen_bool(0.05) && !mine.is_empty() {
                let k = mine.swap_remove(rng.gen_range(0..mine.len()));
                if let Some(tid) = index.remove(&key(k).to_be_bytes()).unwrap() {
                    log.removes.push((k, tid));
                }
            }
        }
        for (_, k) in held {
            insert(k, &mut log);
        }
        log
    }

    fn scan(index: &dyn Index, clock: &AtomicU64, scanner: u64, stop: &StopFlag) {
        let mut rng = StdRng::seed_from_u64(9000 + scanner);
        let mut scans = 0;
        while !stop.is_set() || scans < scaled(20) {
            scans += 1;
            let top = clock.load(Ordering::Acquire).max(STABLE);
            let lo = rng.gen_range(0..top);
            let hi = lo + rng.gen_range(1..2_000);
            let descending = scans % 2 == 1;
            let mut seen = Vec::new();
            index
                .scan(
                    Bound::Included(&key(lo).to_be_bytes()[..]),
                    Bound::Excluded(&key(hi).to_be_bytes()[..]),
                    if descending {
                        Direction::Descending
                    } else {
                        Direction::Ascending
                    },
                    usize::MAX,
                    &mut |k, _| seen.push(u64::from_be_bytes(k.try_into().unwrap())),
                )
                .unwrap();
            if descending {
                seen.reverse();
            }
            if let Some(at) = seen.windows(2).position(|p| p[0] >= p[1]) {
                panic!("scan {scans} {lo}..{hi} (descending {descending}): out of order at {at}: {} then {}", seen[at], seen[at + 1]);
            }
            let keys: BTreeSet<u64> = seen.into_iter().collect();
            let missed: Vec<u64> = (lo..hi.min(STABLE))
                .filter(|&k| !keys.contains(&key(k)))
                .take(5)
                .collect();
            assert!(
                missed.is_empty(),
                "scan {scans} {lo}..{hi}: missed stable keys {missed:?}"
            );
        }
    }

    fn run(builder: IndexBuilder, seed: u64, what: &str) {
        let index = builder.build().unwrap();
        let index = &*index;
        for k in 0..STABLE {
            index.insert(&key(k).to_be_bytes(), k).unwrap();
        }
        let clock = AtomicU64::new(STABLE);
        let stop = StopFlag::new();
        let logs: Vec<Log> = thread::scope(|s| {
            let stopping = stop.set_on_drop();
            for scanner in 0..SCANNERS {
                let (clock, stop) = (&clock, &stop);
                s.spawn(move || scan(index, clock, scanner, stop));
            }
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let clock = &clock;
                    s.spawn(move || write(index, clock, w, seed))
                })
                .collect();
            let logs = writers.into_iter().map(|h| h.join().unwrap()).collect();
            drop(stopping);
            logs
        });
        index
            .check()
            .unwrap_or_else(|e| panic!("{what}: check: {e}"));
        // Every key's inserts chain: one found nothing, each other replaced a distinct tid.
        let mut by_key: HashMap<u64, Vec<(u64, Option<u64>)>> = HashMap::new();
        for log in &logs {
            for &(k, tid, previous) in &log.inserts {
                by_key.entry(k).or_default().push((tid, previous));
            }
        }
        let removed: HashMap<u64, u64> = logs
            .iter()
            .flat_map(|l| l.removes.iter().copied())
            .collect();
        let mut expected: BTreeMap<u64, u64> = (0..STABLE).map(|k| (k, k)).collect();
        for (&k, inserts) in &by_key {
            let tids: BTreeSet<u64> = inserts.iter().map(|i| i.0).collect();
            let firsts = inserts.iter().filter(|i| i.1.is_none()).count();
            let replaced: Vec<u64> = inserts.iter().filter_map(|i| i.1).collect();
            let distinct: BTreeSet<u64> = replaced.iter().copied().collect();
            let ctx = || {
                format!(
                    "{what}: key {k}, inserts {inserts:?}, removed {:?}",
                    removed.get(&k)
                )
            };
            // A removal in between restarts the chain, so allow one more first insert.
            let restarts = usize::from(removed.contains_key(&k));
            assert!(firsts >= 1 && firsts <= 1 + restarts, "{}", ctx());
            assert_eq!(
                distinct.len(),
                replaced.len(),
                "a tid replaced twice: {}",
                ctx()
            );
            assert!(
                distinct.is_subset(&tids),
                "replaced a tid never inserted: {}",
                ctx()
            );
            let unreplaced: Vec<u64> = tids.difference(&distinct).copied().collect();
            if restarts == 0 {
                assert_eq!(unreplaced.len(), 1, "{}", ctx());
                expected.insert(k, unreplaced[0]);
            } else {
                // Removed once: its tid is gone; the key holds the last tid inserted after it
                // if any (found in the index, and it must be one nobody replaced).
                let removed_tid = removed[&k];
                let left: Vec<u64> = unreplaced
                    .into_iter()
                    .filter(|&t| t != removed_tid)
                    .collect();
                assert!(left.len() <= 1, "{}", ctx());
                if let Some(&t) = left.first() {
                    expected.insert(k, t);
                }
            }
        }
        let got: Vec<(u64, u64)> = all_pairs(index)
            .into_iter()
            .map(|(k, t)| ((k - (1 << 40)) / 8, t))
            .collect();
        let expected: Vec<(u64, u64)> = expected.into_iter().collect();
        assert_same_pairs(&got, &expected, &format!("{what}: final contents"));
        assert_eq!(index.len(), expected.len(), "{what}: len");
        // Segments sealed under the writers, and every held-back key went below its
        // writer's last append: into a late run or a data block.
        let stats = index.stats_as::<SbTreeStats>().unwrap();
        assert!(
            stats.seals > 0 && stats.late_inserts + stats.delayed_inserts > 0,
            "{what}: {stats:?}"
        );
    }

    /// Writers that append the same keys at the same time, in order: every key is appended
    /// to several runs at once, so the runs' checks meet on every one. Each key ends with
    /// one tid, and its inserts' answers chain.
    #[test]
    fn twin_writers_append_the_same_keys() {
        let _limit = time_limit();
        for (unique, tiny) in [(true, true), (true, false), (false, true)] {
            let mut builder = IndexBuilder::new(SbTreeOptions {
                run_blocks: 4,
                ..SbTreeOptions::default()
            })
            .key_len(KeyLen::Fixed(8))
            .unique(unique);
            if tiny {
                builder = builder.leaf_capacity(8);
            }
            let index = builder.build().unwrap();
            let index = &*index;
            let n = scaled(20_000);
            // With tiny runs (a seal every 16 appends) the writers keep closer, or the one
            // behind finds the keys already converted.
            let lead = if tiny { 4 } else { 32 };
            // Each writer keeps within a few dozen keys of the other, so a writer mostly finds
            // the key in the other's run, and now and then both publish it at once (a wait
            // that spins, then yields: it only paces, no check depends on it).
            let progress = [AtomicU64::new(0), AtomicU64::new(0)];
            let logs: Vec<Vec<(u64, u64, Option<u64>)>> = thread::scope(|s| {
                let writers: Vec<_> = (0..2u64)
                    .map(|w| {
                        let progress = &progress;
                        s.spawn(move || -> Vec<(u64, u64, Option<u64>)> {
                            (0..n)
                                .map(|k| {
                                    let other = &progress[1 - w as usize];
                                    let mut spins = 0u32;
                                    while other.load(Ordering::Acquire) + lead < k {
                                        spins += 1;
                                        if spins < 64 {
                                            std::hint::spin_loop();
                                        } else {
                                            thread::yield_now();
                                        }
                                    }
                                    // Non-unique: both writers insert the same pair.
                                    let tid = if unique { (w << 48) | k } else { k };
                                    let answer = index.insert(&key(k).to_be_bytes(), tid).unwrap();
                                    progress[w as usize].store(k + 1, Ordering::Release);
                                    (k, tid, answer)
                                })
                                .collect()
                        })
                    })
                    .collect();
                writers.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let what = format!("twin writers, unique {unique}, tiny {tiny}");
            index
                .check()
                .unwrap_or_else(|e| panic!("{what}: check: {e}"));
            let got = all_pairs(index);
            assert_eq!(got.len(), n as usize, "{what}: one pair per key");
            for (i, &(k, tid)) in got.iter().enumerate() {
                let k = (k - (1 << 40)) / 8;
                assert_eq!(k, i as u64, "{what}");
                let answers: Vec<(u64, Option<u64>)> =
                    logs.iter().map(|l| (l[i].1, l[i].2)).collect();
                let firsts = answers.iter().filter(|a| a.1.is_none()).count();
                assert_eq!(firsts, 1, "{what}: key {k}: {answers:?}");
                if unique {
                    // The last insert's tid stayed; each other one was replaced exactly once.
                    let mut replaced: Vec<u64> = answers.iter().filter_map(|a| a.1).collect();
                    replaced.sort_unstable();
                    let mut others: Vec<u64> =
                        answers.iter().map(|a| a.0).filter(|&t| t != tid).collect();
                    others.sort_unstable();
                    assert_eq!(replaced, others, "{what}: key {k} holds {tid}: {answers:?}");
                } else {
                    assert!(
                        answers.iter().all(|a| a.1.is_none_or(|t| t == k)),
                        "{what}: key {k}: {answers:?}"
                    );
                }
            }
            assert_eq!(index.len(), n as usize, "{what}: len");
        }
    }

    /// Small runs: segments seal every few dozen appends per writer.
    #[test]
    fn tiny_blocks() {
        let _limit = time_limit();
        for seed in super::seeds() {
            let options = SbTreeOptions {
                run_blocks: 2,
                ..SbTreeOptions::default()
            };
            let builder = IndexBuilder::new(options)
                .key_len(KeyLen::Fixed(8))
                .leaf_capacity(8)
                .inner_capacity(4);
            run(builder, seed, &format!("sbtree tiny blocks, seed {seed}"));
        }
    }

    /// The default blocks (4 KiB), in runs of 16 blocks (and late runs of 4), so that the
    /// writers fill segments and seal them.
    #[test]
    fn default_blocks() {
        let _limit = time_limit();
        for seed in super::seeds() {
            let options = SbTreeOptions {
                run_blocks: 16,
                ..SbTreeOptions::default()
            };
            let builder = IndexBuilder::new(options).key_len(KeyLen::Fixed(8));
            run(
                builder,
                seed,
                &format!("sbtree default blocks, seed {seed}"),
            );
        }
    }
}
