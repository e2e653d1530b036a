//! The static stage against a model (`BTreeSet<(key, tid)>`): random builds of every key
//! representation, unique and non-unique, tiny segments and blocks so that multi-segment and
//! multi-block paths run constantly; every query kind; repeated random merges with their
//! published intermediates; memory accounting against a counting allocator; bad input.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Mutex;

use elastree::hybrid::static_stage::{Change, Compression, StaticOptions, StaticStage};
use elastree::{Direction, Error, KeyLen};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use elastree_testkit::alloc::{allocated, assert_close, CountingAlloc};
use elastree_testkit::time_limit;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The memory test measures a process-wide counter: every test takes this lock.
static SERIAL: Mutex<()> = Mutex::new(());

type Model = BTreeSet<(Vec<u8>, u64)>;

#[derive(Clone, Copy, Debug)]
enum Keys {
    Fixed8,
    Fixed16,
    Variable,
}

impl Keys {
    fn key_len(self) -> KeyLen {
        match self {
            Keys::Fixed8 => KeyLen::Fixed(8),
            Keys::Fixed16 => KeyLen::Fixed(16),
            Keys::Variable => KeyLen::Variable,
        }
    }

    /// A random key from a space of about `space` keys (so merges hit existing keys).
    fn key(self, rng: &mut StdRng, space: u64) -> Vec<u8> {
        let v = rng.gen_range(0..space.max(1));
        match self {
            Keys::Fixed8 => {
                // Spread some keys far apart so that block deltas are wide.
                let v = if v % 7 == 0 { v << 40 } else { v };
                v.to_be_bytes().to_vec()
            }
            Keys::Fixed16 => {
                let mut k = b"prefix::".to_vec();
                k.extend_from_slice(&v.to_be_bytes());
                k
            }
            Keys::Variable => {
                const PREFIXES: [&[u8]; 4] = [b"", b"a", b"user/", b"user/abc/"];
                let mut k = PREFIXES[(v % 4) as usize].to_vec();
                let mut rest = v / 4;
                while rest > 0 {
                    k.push([b'a', b'b', b'c', 0, 0xff][(rest % 5) as usize]);
                    rest /= 5;
                }
                k
            }
        }
    }

    /// A bound key: usually a key of the space, sometimes of another length.
    fn bound_key(self, rng: &mut StdRng, space: u64) -> Vec<u8> {
        let mut k = self.key(rng, space);
        match rng.gen_range(0..6) {
            0 => k.truncate(rng.gen_range(0..=k.len())),
            1 => k.push(rng.gen()),
            _ => {}
        }
        k
    }
}

fn random_model(rng: &mut StdRng, keys: Keys, unique: bool, n: usize) -> Model {
    let space = (n as u64 * 3).max(4);
    let mut model = Model::new();
    let mut seen = BTreeSet::new();
    for _ in 0..n {
        let k = keys.key(rng, space);
        if unique {
            if seen.insert(k.clone()) {
                model.insert((k, rng.gen_range(0..1 << 20)));
            }
        } else {
            let tids = if rng.gen_bool(0.2) {
                rng.gen_range(1..40)
            } else {
                1
            };
            for _ in 0..tids {
                model.insert((k.clone(), rng.gen_range(0..1000)));
            }
        }
    }
    model
}

fn options(rng: &mut StdRng, keys: Keys, unique: bool, compression: Compression) -> StaticOptions {
    let mut o = StaticOptions::new(unique, keys.key_len());
    o.compression = compression;
    o.segment_entries = rng.gen_range(1..60);
    o.block_entries = rng.gen_range(1..10);
    o.cache_blocks = rng.gen_range(0..40);
    o
}

fn build(options: &StaticOptions, model: &Model) -> StaticStage {
    StaticStage::build(options.clone(), &mut model.iter().cloned()).unwrap()
}

fn collect(
    stage: &StaticStage,
    start: Bound<&[u8]>,
    dir: Direction,
    limit: usize,
) -> Vec<(Vec<u8>, u64)> {
    let mut cursor = stage.cursor(start, dir);
    let mut out = Vec::new();
    let mut key = Vec::new();
    while out.len() < limit {
        match cursor.next(&mut key) {
            Some(tid) => out.push((key.clone(), tid)),
            None => break,
        }
    }
    out
}

fn expected(
    model: &Model,
    start: Bound<&[u8]>,
    dir: Direction,
    limit: usize,
) -> Vec<(Vec<u8>, u64)> {
    let ok_lower = |k: &[u8]| match start {
        Bound::Unbounded => true,
        Bound::Included(b) => k >= b,
        Bound::Excluded(b) => k > b,
    };
    let ok_upper = |k: &[u8]| match start {
        Bound::Unbounded => true,
        Bound::Included(b) => k <= b,
        Bound::Excluded(b) => k < b,
    };
    match dir {
        Direction::Ascending => model
            .iter()
            .filter(|(k, _)| ok_lower(k))
            .take(limit)
            .cloned()
            .collect(),
        Direction::Descending => model
            .iter()
            .rev()
            .filter(|(k, _)| ok_upper(k))
            .take(limit)
            .cloned()
            .collect(),
    }
}

fn verify(stage: &StaticStage, model: &Model, keys: Keys, rng: &mut StdRng, what: &str) {
    stage.check().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(stage.len(), model.len(), "{what}: len");
    let distinct: BTreeSet<&Vec<u8>> = model.iter().map(|(k, _)| k).collect();
    assert_eq!(stage.key_count(), distinct.len(), "{what}: key_count");
    assert_eq!(stage.is_empty(), model.is_empty());
    let all: Vec<_> = model.iter().cloned().collect();
    assert_eq!(
        collect(stage, Bound::Unbounded, Direction::Ascending, usize::MAX),
        all,
        "{what}: ascending"
    );
    let rev: Vec<_> = model.iter().rev().cloned().collect();
    assert_eq!(
        collect(stage, Bound::Unbounded, Direction::Descending, usize::MAX),
        rev,
        "{what}: descending"
    );
    let space = (model.len() as u64 * 3).max(4);
    // Present keys and random (mostly absent) ones.
    let mut probes: Vec<Vec<u8>> = distinct.iter().step_by(3).map(|k| (*k).clone()).collect();
    probes.extend((0..50).map(|_| keys.bound_key(rng, space)));
    for k in &probes {
        let tids: Vec<u64> = model
            .range((k.clone(), 0)..=(k.clone(), u64::MAX))
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(stage.get(k), tids.first().copied(), "{what}: get {k:?}");
        let mut got = vec![7];
        stage.get_all(k, &mut got);
        assert_eq!(got[1..], tids[..], "{what}: get_all {k:?}");
        for &t in &tids {
            assert!(stage.contains_pair(k, t), "{what}: contains ({k:?}, {t})");
        }
        let t = rng.gen_range(0..1000);
        assert_eq!(
            stage.contains_pair(k, t),
            model.contains(&(k.clone(), t)),
            "{what}: contains ({k:?}, {t})"
        );
    }
    for _ in 0..40 {
        let b = keys.bound_key(rng, space);
        let start = match rng.gen_range(0..3) {
            0 => Bound::Included(&b[..]),
            1 => Bound::Excluded(&b[..]),
            _ => Bound::Unbounded,
        };
        for dir in [Direction::Ascending, Direction::Descending] {
            let limit = rng.gen_range(1..30);
            assert_eq!(
                collect(stage, start, dir, limit),
                expected(model, start, dir, limit),
                "{what}: cursor {start:?} {dir:?}"
            );
        }
    }
}

/// Random updates for `model`: puts and deletes of present and absent keys/pairs.
fn random_updates(
    rng: &mut StdRng,
    model: &Model,
    keys: Keys,
    unique: bool,
    n: usize,
) -> Vec<(Vec<u8>, u64, Change)> {
    let space = (model.len() as u64 * 3).max(8);
    let present: Vec<_> = model.iter().cloned().collect();
    let mut ups = Vec::new();
    for _ in 0..n {
        let change = if rng.gen_bool(0.5) {
            Change::Put
        } else {
            Change::Delete
        };
        let (k, t) = if !present.is_empty() && rng.gen_bool(0.5) {
            let (k, t) = present[rng.gen_range(0..present.len())].clone();
            (
                k,
                if rng.gen_bool(0.5) {
                    t
                } else {
                    rng.gen_range(0..1000)
                },
            )
        } else {
            (keys.key(rng, space), rng.gen_range(0..1000))
        };
        ups.push((k, t, change));
    }
    ups.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    if unique {
        ups.dedup_by(|a, b| a.0 == b.0);
    } else {
        ups.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    }
    ups
}

fn apply(model: &Model, ups: &[(Vec<u8>, u64, Change)], unique: bool) -> Model {
    let mut m = model.clone();
    for (k, t, c) in ups {
        if unique {
            let old: Vec<_> = m
                .range((k.clone(), 0)..=(k.clone(), u64::MAX))
                .cloned()
                .collect();
            for p in old {
                m.remove(&p);
            }
            if *c == Change::Put {
                m.insert((k.clone(), *t));
            }
        } else if *c == Change::Put {
            m.insert((k.clone(), *t));
        } else {
            m.remove(&(k.clone(), *t));
        }
    }
    m
}

/// An intermediate stage must be `new` below some key B and `old` from B on.
fn check_intermediate(stage: &StaticStage, old: &Model, new: &Model, what: &str) {
    stage.check().unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = collect(stage, Bound::Unbounded, Direction::Ascending, usize::MAX);
    let new: Vec<_> = new.iter().cloned().collect();
    let old: Vec<_> = old.iter().cloned().collect();
    let lp = got.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let ls = got
        .iter()
        .rev()
        .zip(old.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let valid = (0..=got.len()).any(|x| {
        if x > lp || got.len() - x > ls || (x > 0 && x < got.len() && got[x].0 == got[x - 1].0) {
            return false;
        }
        match got.get(x) {
            None => x == new.len(),
            Some((b, _)) => {
                new.partition_point(|(k, _)| k < b) == x
                    && old.len() - old.partition_point(|(k, _)| k < b) == got.len() - x
            }
        }
    });
    assert!(
        valid,
        "{what}: intermediate stage is not merged-below-B ++ old-from-B"
    );
}

fn model_run(seed: u64, keys: Keys, unique: bool, compression: Compression) {
    let mut rng = StdRng::seed_from_u64(seed);
    for size in [0usize, 1, 2, 17, 300, 1500] {
        let what = format!("seed {seed} {keys:?} unique {unique} {compression:?} size {size}");
        let opts = options(&mut rng, keys, unique, compression);
        let mut model = random_model(&mut rng, keys, unique, size);
        let mut stage = build(&opts, &model);
        verify(&stage, &model, keys, &mut rng, &what);
        for round in 0..4 {
            let n = rng.gen_range(0..(size / 2).max(3));
            let ups = random_updates(&mut rng, &model, keys, unique, n);
            let new_model = apply(&model, &ups, unique);
            let every = rng.gen_range(0..4);
            let mut published = Vec::new();
            let merged = stage
                .share()
                .merge(&mut ups.into_iter(), every, &mut |s| published.push(s))
                .unwrap();
            let what = format!("{what} merge {round} (publish every {every})");
            for (i, p) in published.iter().enumerate() {
                check_intermediate(p, &model, &new_model, &format!("{what} publish {i}"));
            }
            verify(&merged, &new_model, keys, &mut rng, &what);
            stage = merged;
            model = new_model;
        }
    }
}

#[test]
fn model_all_kinds() {
    // The limit starts once the test has the process to itself.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _limit = time_limit();
    for seed in 0..2 {
        for keys in [Keys::Fixed8, Keys::Fixed16, Keys::Variable] {
            for unique in [true, false] {
                for compression in [Compression::None, Compression::Lz4] {
                    model_run(seed, keys, unique, compression);
                }
            }
        }
    }
}

#[test]
fn default_sizes_many_segments() {
    // The limit starts once the test has the process to itself.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _limit = time_limit();
    let mut rng = StdRng::seed_from_u64(99);
    for unique in [true, false] {
        for compression in [Compression::None, Compression::Lz4] {
            let mut opts = StaticOptions::new(unique, KeyLen::Fixed(8));
            opts.compression = compression;
            let model = random_model(&mut rng, Keys::Fixed8, unique, 20_000);
            let stage = build(&opts, &model);
            verify(&stage, &model, Keys::Fixed8, &mut rng, "default sizes");
            let ups = random_updates(&mut rng, &model, Keys::Fixed8, unique, 3000);
            let new_model = apply(&model, &ups, unique);
            let mut published = 0;
            let merged = stage
                .share()
                .merge(&mut ups.into_iter(), 1, &mut |s| {
                    s.check().unwrap();
                    published += 1;
                })
                .unwrap();
            assert!(published > 0);
            verify(
                &merged,
                &new_model,
                Keys::Fixed8,
                &mut rng,
                "default sizes merged",
            );
        }
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    // The limit starts once the test has the process to itself.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _limit = time_limit();
    let unsorted = vec![(b"b".to_vec(), 1), (b"a".to_vec(), 2)];
    let duplicate = vec![(b"a".to_vec(), 1), (b"a".to_vec(), 2)];
    let dup_pair = vec![(b"a".to_vec(), 1), (b"a".to_vec(), 1)];
    let tids_down = vec![(b"a".to_vec(), 2), (b"a".to_vec(), 1)];
    for (unique, input) in [
        (true, &unsorted),
        (true, &duplicate),
        (false, &unsorted),
        (false, &dup_pair),
        (false, &tids_down),
    ] {
        let r = StaticStage::build(
            StaticOptions::new(unique, KeyLen::Variable),
            &mut input.iter().cloned(),
        );
        assert!(
            matches!(r, Err(Error::InvalidConfig(_))),
            "{unique} {input:?}"
        );
    }
    let r = StaticStage::build(
        StaticOptions::new(true, KeyLen::Fixed(8)),
        &mut vec![(b"short".to_vec(), 1)].into_iter(),
    );
    assert!(matches!(r, Err(Error::InvalidConfig(_))));
    // Block headers hold prefix lengths in 16 bits: longer keys than any index accepts are
    // refused, not truncated.
    let huge = vec![(vec![b'x'; elastree::MAX_KEY_LEN_LIMIT + 1], 1)];
    let r = StaticStage::build(
        StaticOptions::new(true, KeyLen::Variable),
        &mut huge.into_iter(),
    );
    assert!(matches!(r, Err(Error::InvalidConfig(_))));
    // Merges check their updates too.
    let stage = StaticStage::build(
        StaticOptions::new(true, KeyLen::Variable),
        &mut vec![(b"m".to_vec(), 1)].into_iter(),
    )
    .unwrap();
    let mut ups = vec![
        (b"z".to_vec(), 1, Change::Put),
        (b"a".to_vec(), 1, Change::Put),
    ]
    .into_iter();
    assert!(matches!(
        stage.share().merge(&mut ups, 0, &mut |_| {}),
        Err(Error::InvalidConfig(_))
    ));
    let mut opts = StaticOptions::new(true, KeyLen::Variable);
    opts.block_entries = 0;
    assert!(matches!(
        StaticStage::build(opts, &mut std::iter::empty()),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn memory_accounting() {
    // The limit starts once the test has the process to itself.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _limit = time_limit();
    let mut rng = StdRng::seed_from_u64(5);
    for keys in [Keys::Fixed8, Keys::Variable] {
        for unique in [true, false] {
            for compression in [Compression::None, Compression::Lz4] {
                let what = format!("{keys:?} unique {unique} {compression:?}");
                let model = random_model(&mut rng, keys, unique, 100_000);
                let mut opts = StaticOptions::new(unique, keys.key_len());
                opts.compression = compression;
                opts.cache_blocks = 64;
                let baseline = allocated();
                let stage = build(&opts, &model);
                assert_close(
                    &format!("{what} after build"),
                    stage.memory().total(),
                    allocated() - baseline,
                );
                // Fill the cache of a compressed stage.
                for (k, _) in model.iter().step_by(97) {
                    stage.get(k);
                }
                assert_close(
                    &format!("{what} after lookups"),
                    stage.memory().total(),
                    allocated() - baseline,
                );
                let ups = random_updates(&mut rng, &model, keys, unique, 5000);
                let merged = stage
                    .share()
                    .merge(&mut ups.into_iter(), 0, &mut |_| {})
                    .unwrap();
                drop(stage);
                assert_close(
                    &format!("{what} after merge"),
                    merged.memory().total(),
                    allocated() - baseline,
                );
                drop(merged);
                // A leak would be hundreds of KiB; the test harness's captured-output buffer
                // grows by a few KiB meanwhile.
                let leaked = allocated() - baseline;
                assert!(leaked < 16 * 1024, "{what}: leaked {leaked}");
            }
        }
    }
}

/// The `static` kind through the `Index` trait agrees with the B+-tree built from the same
/// sorted pairs, for every scan shape.
#[test]
fn static_kind_matches_btree() {
    use elastree::{Index, IndexBuilder, IndexKind};
    // The limit starts once the test has the process to itself.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _limit = time_limit();
    let mut rng = StdRng::seed_from_u64(11);
    for (keys, unique) in [
        (Keys::Fixed8, true),
        (Keys::Variable, false),
        (Keys::Fixed16, true),
    ] {
        let model = random_model(&mut rng, keys, unique, 3000);
        let builder = |kind| {
            IndexBuilder::new(kind)
                .unique(unique)
                .key_len(keys.key_len())
        };
        let stat = builder(IndexKind::Static)
            .build_sorted(&mut model.iter().cloned())
            .unwrap();
        let tree = builder(IndexKind::BTree)
            .build_sorted(&mut model.iter().cloned())
            .unwrap();
        assert_eq!(stat.kind(), IndexKind::Static.name());
        assert_eq!(stat.len(), tree.len());
        stat.check().unwrap();
        assert!(stat.memory().total() > 0);
        let space = model.len() as u64 * 3;
        for _ in 0..300 {
            let k = keys.key(&mut rng, space);
            assert_eq!(stat.get(&k).unwrap(), tree.get(&k).unwrap());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            stat.get_all(&k, &mut a).unwrap();
            tree.get_all(&k, &mut b).unwrap();
            assert_eq!(a, b);
            let (lo, hi) = (
                keys.bound_key(&mut rng, space),
                keys.bound_key(&mut rng, space),
            );
            let bound = |k: &Vec<u8>, r: u32| match r {
                0 => Bound::Unbounded,
                1 => Bound::Included(k.clone()),
                _ => Bound::Excluded(k.clone()),
            };
            let (lo, hi) = (
                bound(&lo, rng.gen_range(0..3)),
                bound(&hi, rng.gen_range(0..3)),
            );
            for dir in [Direction::Ascending, Direction::Descending] {
                let limit = rng.gen_range(0..50);
                let scan = |index: &dyn Index| {
                    let mut out = Vec::new();
                    let n = index
                        .scan(
                            lo.as_ref().map(|k| &k[..]),
                            hi.as_ref().map(|k| &k[..]),
                            dir,
                            limit,
                            &mut |k, t| out.push((k.to_vec(), t)),
                        )
                        .unwrap();
                    assert_eq!(n, out.len());
                    out
                };
                assert_eq!(
                    scan(&*stat),
                    scan(&*tree),
                    "{keys:?} {lo:?} {hi:?} {dir:?} {limit}"
                );
            }
        }
        assert!(matches!(
            stat.insert(&model.iter().next().unwrap().0, 1),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            stat.remove_pair(b"x", 1),
            Err(Error::Unsupported { .. })
        ));
    }
    let b = IndexBuilder::new(IndexKind::Static).key_len(KeyLen::Fixed(8));
    assert!(b.build().unwrap().is_empty());
    assert!(matches!(
        b.build_sorted(&mut vec![(vec![1; 9], 1)].into_iter()),
        Err(Error::KeyLenMismatch { .. })
    ));
    let b = IndexBuilder::new(IndexKind::Static).max_key_len(4);
    assert!(matches!(
        b.build_sorted(&mut vec![(vec![1; 9], 1)].into_iter()),
        Err(Error::KeyTooLong { .. })
    ));
    assert!(matches!(
        b.build_sorted(&mut vec![(vec![2], 1), (vec![1], 1)].into_iter()),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        b.build().unwrap().get(&[0; 5]),
        Err(Error::KeyTooLong { .. })
    ));
}

/// Readers on many threads share a compressed stage's small block cache (constant
/// eviction) and still see the stage's content.
#[test]
fn concurrent_readers_share_the_cache() {
    // The limit starts once the test has the process to itself.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _limit = time_limit();
    let mut rng = StdRng::seed_from_u64(21);
    let model = random_model(&mut rng, Keys::Variable, true, 20_000);
    let mut opts = StaticOptions::new(true, KeyLen::Variable);
    opts.compression = Compression::Lz4;
    opts.cache_blocks = 8;
    let stage = build(&opts, &model);
    let pairs: Vec<_> = model.iter().cloned().collect();
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (stage, pairs) = (&stage, &pairs);
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                for _ in 0..20_000 {
                    let (k, tid) = &pairs[rng.gen_range(0..pairs.len())];
                    assert_eq!(stage.get(k), Some(*tid));
                }
            });
        }
    });
    stage.check().unwrap();
}
