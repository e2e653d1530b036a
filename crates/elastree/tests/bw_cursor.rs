//! Bw-tree cursors against a `BTreeMap` model: physiological cursors read a batch at a time
//! while the tree splits under them (tiny pages, short chains), unique and non-unique, both
//! directions; prefix cursors; and cursors read beside concurrent writers.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use elastree::bwtree::{BwCursor, BwTreeIndex};
use elastree::{BwTreeOptions, Direction, Index, IndexOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A Bw-tree whose pages hold at most 4 entries and whose chains are consolidated after 2
/// deltas: every few writes split a page.
fn tiny(unique: bool) -> BwTreeIndex {
    let options = IndexOptions {
        unique,
        leaf_capacity: Some(4),
        inner_capacity: Some(4),
        ..IndexOptions::default()
    };
    BwTreeIndex::new(
        &options,
        &BwTreeOptions {
            chain_length: 2,
            leaf_page_bytes: 256,
            inner_page_bytes: 256,
            ..BwTreeOptions::default()
        },
    )
    .unwrap()
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// Reads the whole rest of `cursor` in batches of random sizes; between batches calls
/// `between` with the last key handed out.
fn drain(
    cursor: &mut BwCursor<'_>,
    rng: &mut StdRng,
    mut between: impl FnMut(&[u8], &mut StdRng),
) -> Vec<(Vec<u8>, u64)> {
    let mut out: Vec<(Vec<u8>, u64)> = Vec::new();
    loop {
        let limit = match rng.gen_range(0..4) {
            0 => 1,
            1 => rng.gen_range(1..6),
            2 => rng.gen_range(1..40),
            _ => usize::MAX,
        };
        let before = out.len();
        let got = cursor.next_batch(limit, &mut |k, v| out.push((k.to_vec(), v)));
        assert_eq!(
            got,
            out.len() - before,
            "next_batch counts what it hands out"
        );
        assert!(got <= limit, "a batch of {got} over its limit of {limit}");
        if got == 0 {
            assert!(cursor.is_done());
            return out;
        }
        let last = out.last().unwrap().0.clone();
        between(&last, rng);
    }
}

fn random_bound(rng: &mut StdRng, space: u64) -> Bound<u64> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(rng.gen_range(0..space)),
        _ => Bound::Excluded(rng.gen_range(0..space)),
    }
}

/// The model's pairs in `(lower, upper)`, in `direction` order (non-unique: each key's tids
/// ascending, descending scans reverse the whole order).
fn expected(
    model: &BTreeMap<u64, BTreeSet<u64>>,
    (lower, upper): (Bound<u64>, Bound<u64>),
    direction: Direction,
) -> Vec<(Vec<u8>, u64)> {
    if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
        (lower, upper)
    {
        if l > u
            || (l == u
                && !(matches!(lower, Bound::Included(_)) && matches!(upper, Bound::Included(_))))
        {
            return Vec::new();
        }
    }
    let mut all: Vec<(Vec<u8>, u64)> = model
        .range((lower, upper))
        .flat_map(|(&k, tids)| tids.iter().map(move |&t| (key(k).to_vec(), t)))
        .collect();
    if direction == Direction::Descending {
        all.reverse();
    }
    all
}

/// Random writes to the index and the model, each to a key for which `allowed` holds.
fn write_some(
    index: &BwTreeIndex,
    model: &mut BTreeMap<u64, BTreeSet<u64>>,
    rng: &mut StdRng,
    (space, count): (u64, usize),
    allowed: impl Fn(u64) -> bool,
) {
    let unique = index.is_unique();
    for _ in 0..count {
        let k = rng.gen_range(0..space);
        if !allowed(k) {
            continue;
        }
        let tid = if unique {
            rng.gen_range(0..1000)
        } else {
            rng.gen_range(0..4)
        };
        if rng.gen_bool(0.7) {
            index.insert(&key(k), tid).unwrap();
            let tids = model.entry(k).or_default();
            if unique {
                tids.clear();
            }
            tids.insert(tid);
        } else if unique {
            index.remove(&key(k)).unwrap();
            model.remove(&k);
        } else {
            index.remove_pair(&key(k), tid).unwrap();
            if let Some(tids) = model.get_mut(&k) {
                tids.remove(&tid);
                if tids.is_empty() {
                    model.remove(&k);
                }
            }
        }
    }
}

/// Cursors read whole ranges in batches of random sizes while writes behind them (keys the
/// cursor has passed, so the rest of its range is unchanged) split and consolidate the pages
/// it remembers: the batches together equal the model's range when the cursor was opened.
fn model_case(unique: bool, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let index = tiny(unique);
    let mut model = BTreeMap::new();
    let space = 400;
    let mut hinted = 0;
    for round in 0..300 {
        write_some(&index, &mut model, &mut rng, (space, 30), |_| true);
        let (lower, upper) = (random_bound(&mut rng, space), random_bound(&mut rng, space));
        let direction = if rng.gen_bool(0.5) {
            Direction::Ascending
        } else {
            Direction::Descending
        };
        let want = expected(&model, (lower, upper), direction);
        let (l, u) = (lower.map(key), upper.map(key));
        let mut cursor = index
            .cursor(
                l.as_ref().map(|k| &k[..]),
                u.as_ref().map(|k| &k[..]),
                direction,
            )
            .unwrap();
        if round % 7 == 0 {
            cursor.set_physiological(false);
        }
        let model_ref = &mut model;
        let got = drain(&mut cursor, &mut rng, |last, rng| {
            let last = u64::from_be_bytes(last.try_into().unwrap());
            // Only keys the cursor has passed: the rest of its range stays as it was.
            let passed = |k: u64| match direction {
                Direction::Ascending => k < last,
                Direction::Descending => k > last,
            };
            write_some(&index, model_ref, rng, (space, 12), passed);
        });
        assert_eq!(
            got, want,
            "seed {seed} round {round}: cursor {direction:?} {lower:?}..{upper:?}"
        );
        hinted += cursor.stats().hinted;
        if round % 20 == 0 {
            index.check().unwrap();
        }
    }
    assert!(hinted > 0, "no batch used its cursor's hint");
}

#[test]
fn unique_cursors_match_the_model_through_splits() {
    for seed in 0..3 {
        model_case(true, seed);
    }
}

#[test]
fn non_unique_cursors_match_the_model_through_splits() {
    for seed in 10..13 {
        model_case(false, seed);
    }
}

/// A batch holds at most one page: a cursor over a large range of a tree with pages of 4
/// entries hands out at most 4 entries per batch, and the right sibling's hint lets every
/// ascending batch but the first skip the descent when nothing changes.
#[test]
fn batches_are_a_page_and_ascending_batches_skip_the_descent() {
    let index = tiny(true);
    for i in 0..2000 {
        index.insert(&key(i), i).unwrap();
    }
    let mut cursor = index
        .cursor(Bound::Unbounded, Bound::Unbounded, Direction::Ascending)
        .unwrap();
    let mut next = 0;
    loop {
        let got = cursor.next_batch(usize::MAX, &mut |k, v| {
            assert_eq!(k, key(next));
            assert_eq!(v, next);
            next += 1;
        });
        // A page's base holds at most 4 entries, its chain at most 2 deltas.
        assert!(got <= 6, "a batch of {got} entries from pages of 4");
        if got == 0 {
            break;
        }
    }
    assert_eq!(next, 2000);
    let stats = cursor.stats();
    assert_eq!(stats.descents, 1, "{stats:?}");
    assert_eq!(stats.rejected, 0, "{stats:?}");
    // One page per batch, each found through the hint but the first.
    assert_eq!(stats.hinted + stats.descents, stats.batches, "{stats:?}");
}

/// Paging 3 keys at a time (a batch stopping inside a page) resumes on the remembered page,
/// in both directions.
#[test]
fn short_batches_resume_on_the_remembered_page() {
    let index = tiny(true);
    for i in 0..500 {
        index.insert(&key(i), i).unwrap();
    }
    for direction in [Direction::Ascending, Direction::Descending] {
        let mut cursor = index
            .cursor(Bound::Unbounded, Bound::Unbounded, direction)
            .unwrap();
        let mut seen = Vec::new();
        while cursor.next_batch(3, &mut |_, v| seen.push(v)) > 0 {}
        let mut want: Vec<u64> = (0..500).collect();
        if direction == Direction::Descending {
            want.reverse();
        }
        assert_eq!(seen, want);
        let stats = cursor.stats();
        assert_eq!(stats.rejected, 0, "{direction:?}: {stats:?}");
        // Descending cursors descend after finishing a page (no left link), ascending ones
        // only for the first batch.
        match direction {
            Direction::Ascending => assert_eq!(stats.descents, 1, "{stats:?}"),
            Direction::Descending => assert!(stats.hinted > 0, "{stats:?}"),
        }
    }
}

/// Composite keys (a 2-byte user id, then a 6-byte row number): a prefix cursor for each
/// user reads exactly that user's keys, from a sub-tree below the root once the tree is
/// large, and keeps being right (sought again when stale) while the tree grows.
#[test]
fn prefix_cursors_read_exactly_their_prefix() {
    for unique in [true, false] {
        let index = tiny(unique);
        let mut model: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        let composite = |user: u64, row: u64| (user << 48) | row;
        let mut rng = StdRng::seed_from_u64(7);
        let mut below_root = 0;
        for round in 0..6 {
            for _ in 0..600 {
                let (user, row) = (rng.gen_range(0..8), rng.gen_range(0..200));
                let k = composite(user, row);
                index.insert(&key(k), row).unwrap();
                let tids = model.entry(k).or_default();
                if unique {
                    tids.clear();
                }
                tids.insert(row);
            }
            let user = round % 8;
            let prefix = &key(composite(user, 0))[..2];
            let mut prefixed = index.prefix_cursor(prefix).unwrap();
            // One user's keys span many leaves: the sub-tree is an inner page, the root
            // only when the user's range straddles the root's separators.
            assert!(prefixed.subtree().1 > 0, "one user of 8 fits no leaf");
            below_root += u64::from(prefixed.subtree().0 != 0);
            let range = (
                Bound::Included(composite(user, 0)),
                Bound::Excluded(composite(user + 1, 0)),
            );
            for direction in [Direction::Ascending, Direction::Descending] {
                let mut cursor = prefixed.cursor(None, direction).unwrap();
                let got = drain(&mut cursor, &mut rng, |_, _| {});
                assert_eq!(
                    got,
                    expected(&model, range, direction),
                    "user {user} {direction:?}"
                );
            }
            // Lookups through the prefix cursor, while the tree splits between them.
            for row in 0..200 {
                let k = composite(user, row);
                let want = model.get(&k).and_then(|t| t.iter().next().copied());
                assert_eq!(
                    prefixed.get(&key(k)).unwrap(),
                    want,
                    "user {user} row {row}"
                );
                if row % 10 == 0 {
                    let other = composite((user + 1) % 8, 500 + row + 1000 * round);
                    index.insert(&key(other), 1).unwrap();
                    model.entry(other).or_default().insert(1);
                }
            }
            let from = key(composite(user, 100));
            let mut cursor = prefixed.cursor(Some(&from), Direction::Ascending).unwrap();
            let got = drain(&mut cursor, &mut rng, |_, _| {});
            let range = (Bound::Included(composite(user, 100)), range.1);
            assert_eq!(got, expected(&model, range, Direction::Ascending));
            let stats = prefixed.stats();
            assert!(stats.reused > 0, "{stats:?}");
            assert!(prefixed
                .cursor(Some(&key(composite(user + 1, 0))), Direction::Ascending)
                .is_err());
        }
        assert!(below_root > 0, "no prefix had a sub-tree below the root");
        index.check().unwrap();
    }
}

/// Writers insert and remove churn keys (odd) while every even key stays present; cursor
/// readers with small batches in both directions must see every even key, keys strictly in
/// order, and only values the writers could have written.
#[test]
fn concurrent_writers_and_cursor_readers() {
    let index = tiny(true);
    let space = 4000u64;
    for k in (0..space).step_by(2) {
        index.insert(&key(k), k * 10).unwrap();
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (index, stop) = (&index, &stop);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + w);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = rng.gen_range(0..space / 2) * 2 + 1;
                    if rng.gen_bool(0.6) {
                        index.insert(&key(k), k * 10 + 1).unwrap();
                    } else {
                        index.remove(&key(k)).unwrap();
                    }
                }
            });
        }
        let mut rng = StdRng::seed_from_u64(5);
        for round in 0..40 {
            let direction = if round % 2 == 0 {
                Direction::Ascending
            } else {
                Direction::Descending
            };
            let mut cursor = index
                .cursor(Bound::Unbounded, Bound::Unbounded, direction)
                .unwrap();
            let got = drain(&mut cursor, &mut rng, |_, _| {});
            let keys: Vec<u64> = got
                .iter()
                .map(|(k, _)| u64::from_be_bytes(k[..].try_into().unwrap()))
                .collect();
            for pair in keys.windows(2) {
                let ordered = match direction {
                    Direction::Ascending => pair[0] < pair[1],
                    Direction::Descending => pair[0] > pair[1],
                };
                assert!(ordered, "round {round}: {} then {}", pair[0], pair[1]);
            }
            for (&k, (_, v)) in keys.iter().zip(&got) {
                assert_eq!(*v, k * 10 + k % 2, "key {k}");
            }
            let evens = keys.iter().filter(|&&k| k % 2 == 0).count() as u64;
            assert_eq!(
                evens,
                space / 2,
                "round {round}: an always-present key was missed"
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    index.check().unwrap();
}
