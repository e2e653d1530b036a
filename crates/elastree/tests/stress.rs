//! Concurrent stress tests: writers on interleaved (overlapping) key ranges with tiny nodes so
//! that splits and merges race, scanners checking order and completeness while they run, and
//! a final check that every acknowledged pair is present exactly once. Each test runs every
//! writable kind over several seeds (`ELASTREE_STRESS_SEEDS`, default 3); what it checks is
//! what no schedule can change: every writer's own results, the scans' order and the stable
//! keys they must return, the final contents, `len()` and `check()`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Barrier;
use std::thread;

use elastree::elastic::ElasticStats;
use elastree::{Direction, Index, IndexKind, KeyLen};
use elastree_testkit::model::{
    all_pairs_by, as_is, assert_same_pairs, base_pages, builder, builder_levels, prefix_pages,
    prefix_split_pages, scaled, settled_memory, Built, Registry, Shape,
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

/// Writer `w`'s run: random inserts and removes of the keys it owns, each result checked
/// against what it wrote before. Writer 0 also forces merges of a hybrid index.
fn write(built: &Built, registry: &Registry, enc: Enc, seed: u64, w: u64, what: &str) -> Mine {
    let index = built.index();
    let unique = index.is_unique();
    let universe = WRITERS * KEYS_PER_WRITER;
    let ops = scaled(OPS_PER_WRITER);
    let mut rng = StdRng::seed_from_u64(seed * 1000 + w);
    let mut mine = Mine::default();
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
        let k = rng.gen_range(0..KEYS_PER_WRITER) * WRITERS + w;
        if k % STABLE_EVERY == 0 {
            continue;
        }
        let key = encode(enc, k);
        // Tids name tuples: one per insert (unique), or one of three per key (non-unique);
        // the registry is the table kinds with indirect keys load keys from.
        let tid = if unique {
            let tid = universe + op * WRITERS + w;
            registry.register(tid, &key);
            tid
        } else {
            registry.pair_tid(&key, rng.gen_range(0..3))
        };
        let ctx = || format!("{what}: writer {w} op {op} key {k} tid {tid}");
        if rng.gen_bool(0.6) {
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

fn stress(built: &Built, registry: &Registry, enc: Enc, seed: u64, what: &str) {
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
                    write(built, registry, enc, seed, w, what)
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
        stress(&built, &registry, enc, seed, &what);
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
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
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
