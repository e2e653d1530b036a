//! Several clients at once: writers inserting and removing, scanners checking order and that
//! keys present throughout are always seen, a rebalance (cut-off lowered, sub-trees moved)
//! running in the middle of it and a mover shifting random sub-trees between masters all
//! along. At the end every acknowledged key is present exactly once and the invariants hold.

mod cluster;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use cluster::key;
use elastree::{Direction, Index};
use elastree_dist::baseline::BaselineIndex;
use elastree_dist::DistIndex;
use rand::seq::SliceRandom;
use rand::SeedableRng;

const WRITERS: u64 = 4;
const PER_WRITER: u64 = 3000;
/// Keys loaded before the workload and never touched: every scan must see all of them.
const STABLE: std::ops::Range<u64> = 1_000_000..1_000_300;

/// The keys of a whole-index scan in `direction`, put in ascending order; every key maps to
/// its own tid.
fn scanned(index: &dyn Index, direction: Direction) -> Vec<u64> {
    let mut seen = Vec::new();
    index
        .scan(
            Bound::Unbounded,
            Bound::Unbounded,
            direction,
            usize::MAX,
            &mut |k, t| {
                let k = u64::from_be_bytes(k.try_into().unwrap());
                assert_eq!(k, t, "a key maps to its own tid");
                seen.push(k);
            },
        )
        .unwrap();
    if direction == Direction::Descending {
        seen.reverse();
    }
    seen
}

/// A scan under concurrent writers: strictly ascending (nothing repeated) and holding every
/// key present throughout.
fn assert_sound_scan(seen: &[u64]) {
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "scan out of order or repeated"
    );
    let stable = seen.iter().filter(|k| STABLE.contains(k)).count();
    assert_eq!(
        stable,
        STABLE.count(),
        "a scan missed a key present throughout"
    );
}

#[test]
fn writers_scanners_and_a_rebalance_lose_and_duplicate_nothing() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("conc");
    let connect = |per_master: usize| {
        let mut options = cluster::options(&name, true, 8);
        options.subtrees_per_master = per_master;
        options.scan_chunk = 64;
        DistIndex::connect(&seeds, options).expect("connect")
    };
    let setup = connect(2);
    for k in STABLE {
        setup.insert(&key(k), k).unwrap();
    }
    let writing = AtomicBool::new(true);
    let expected: BTreeSet<u64> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let index = connect(2);
                s.spawn(move || {
                    let mut mine: Vec<u64> = (0..PER_WRITER).map(|i| i * WRITERS + w).collect();
                    mine.shuffle(&mut rand::rngs::StdRng::seed_from_u64(w));
                    let mut kept = BTreeSet::new();
                    for (n, &k) in mine.iter().enumerate() {
                        assert_eq!(index.insert(&key(k), k).unwrap(), None);
                        kept.insert(k);
                        if n % 5 == 4 {
                            // Remove one of this writer's earlier keys.
                            let victim = mine[n / 2];
                            if kept.remove(&victim) {
                                assert_eq!(index.remove(&key(victim)).unwrap(), Some(victim));
                            }
                        }
                    }
                    kept
                })
            })
            .collect();
        for _ in 0..2 {
            let index = connect(2);
            let writing = &writing;
            s.spawn(move || {
                let mut scans = 0;
                while writing.load(Ordering::Relaxed) || scans < 3 {
                    let direction = if scans % 2 == 0 {
                        Direction::Ascending
                    } else {
                        Direction::Descending
                    };
                    assert_sound_scan(&scanned(&index, direction));
                    scans += 1;
                }
            });
        }
        // The mover: the sub-tree covering a random key to a random master, again and again,
        // racing splits, posts, merges and scans.
        let mover = {
            let index = connect(2);
            let writing = &writing;
            let masters = cluster::master_addrs(&cluster);
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(99);
                // At least a few moves even if the writers finish first (a fast machine).
                let mut moved = 0;
                while writing.load(Ordering::Relaxed) || moved < 6 {
                    let k = rand::Rng::gen_range(&mut rng, 0..PER_WRITER * WRITERS);
                    let to = masters.choose(&mut rng).unwrap();
                    if index.move_subtree(&key(k), to).unwrap() {
                        moved += 1;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                moved
            })
        };
        // The rebalance: aim for 6 sub-trees per master while everybody works.
        let rebalancer = connect(6);
        let report = s.spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            rebalancer.rebalance().unwrap()
        });
        let mut expected = BTreeSet::new();
        for w in writers {
            expected.extend(w.join().unwrap());
        }
        writing.store(false, Ordering::Relaxed);
        let report = report.join().unwrap();
        assert!(report.lowered > 0, "the cut-off was lowered: {report:?}");
        assert!(report.moved > 0, "sub-trees were moved: {report:?}");
        let moved = mover.join().unwrap();
        println!("rebalance {report:?}; the mover moved {moved} sub-trees");
        expected
    });
    let check = connect(2);
    check.check().unwrap();
    let all = scanned(&check, Direction::Ascending);
    let want: Vec<u64> = expected.iter().copied().chain(STABLE).collect();
    assert_eq!(all, want, "every acknowledged key exactly once");
    assert_eq!(check.len(), want.len());
    for k in expected.iter().step_by(37) {
        assert_eq!(check.get(&key(*k)).unwrap(), Some(*k));
    }
    assert!(
        check.top_entries().len() > 3,
        "the index spread over sub-trees"
    );
    check.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

/// The baseline's client-side B-link protocol (split: new right node, compare-and-set of the
/// left one, post to the parent) under concurrent writers and scanners.
#[test]
fn the_baseline_under_concurrent_writers_and_scanners() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("conc-base");
    let connect =
        || BaselineIndex::connect(&seeds, cluster::options(&name, true, 4)).expect("connect");
    let setup = connect();
    for k in STABLE {
        setup.insert(&key(k), k).unwrap();
    }
    let writing = AtomicBool::new(true);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let index = connect();
                s.spawn(move || {
                    let mut mine: Vec<u64> = (0..PER_WRITER / 3).map(|i| i * WRITERS + w).collect();
                    mine.shuffle(&mut rand::rngs::StdRng::seed_from_u64(w));
                    for &k in &mine {
                        assert_eq!(index.insert(&key(k), k).unwrap(), None);
                    }
                })
            })
            .collect();
        let index = connect();
        let writing = &writing;
        s.spawn(move || {
            while writing.load(Ordering::Relaxed) {
                assert_sound_scan(&scanned(&index, Direction::Ascending));
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        writing.store(false, Ordering::Relaxed);
    });
    let check = connect();
    check.check().unwrap();
    let all = scanned(&check, Direction::Ascending);
    let want: Vec<u64> = (0..PER_WRITER / 3 * WRITERS).chain(STABLE).collect();
    assert_eq!(all, want, "every acknowledged key exactly once");
    assert!(check.height().unwrap() >= 4, "small nodes make a tall tree");
    check.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

/// Many threads sharing one client while sub-trees appear and move to other masters (a
/// moved sub-tree's forwarding marker retargets the shared cached top under the mover).
#[test]
fn threads_sharing_one_client_while_new_subtrees_move() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("shared");
    let mut options = cluster::options(&name, true, 8);
    options.subtrees_per_master = 5;
    let index = DistIndex::connect(&seeds, options).expect("connect");
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let index = &index;
            s.spawn(move || {
                for i in 0..800u64 {
                    let k = i * 8 + t;
                    assert_eq!(index.insert(&key(k), k).unwrap(), None);
                }
            });
        }
    });
    index.check().unwrap();
    assert_eq!(index.len(), 6400);
    let per_master = index.subtrees_per_master().unwrap();
    assert!(
        per_master.values().all(|&n| n > 0),
        "new sub-trees spread: {per_master:?}"
    );
    assert_eq!(index.stats().placement_failures, 0);
    for k in (0..6400u64).step_by(13) {
        assert_eq!(index.get(&key(k)).unwrap(), Some(k));
    }
    index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}
