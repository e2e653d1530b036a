//! Several clients at once: writers inserting and removing, scanners checking order and that
//! keys present throughout are always seen, a rebalance (cut-off lowered, sub-trees moved)
//! running in the middle of it and a mover shifting random sub-trees between masters all
//! along. At the end every acknowledged key is present exactly once and the invariants hold.
//!
//! Every test works on an index of its own name on the cluster the test binary shares.

mod cluster;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use cluster::{joined, key};
use elastree::{Direction, Index};
use elastree_dist::baseline::BaselineIndex;
use elastree_dist::DistIndex;
use elastree_testkit::model::assert_same_pairs;
use elastree_testkit::{time_limit, StopFlag};
use rand::seq::SliceRandom;
use rand::SeedableRng;

const WRITERS: u64 = 4;
const PER_WRITER: u64 = 3000;
/// Keys loaded before the workload and never touched: every scan must see all of them.
const STABLE: std::ops::Range<u64> = 1_000_000..1_000_300;
/// Moves the mover makes at least, also when the writers finish first.
const MIN_MOVES: usize = 6;

/// The keys of a whole-index scan in `direction`, put in ascending order; every key maps to
/// its own tid. `what` names the scan in a failure.
fn scanned(index: &dyn Index, direction: Direction, what: &str) -> Vec<u64> {
    let mut seen = Vec::new();
    index
        .scan(
            Bound::Unbounded,
            Bound::Unbounded,
            direction,
            usize::MAX,
            &mut |k, t| {
                let k =
                    u64::from_be_bytes(k.try_into().unwrap_or_else(|_| {
                        panic!("{what}: a key of {} bytes: {k:02x?}", k.len())
                    }));
                assert_eq!(
                    k,
                    t,
                    "{what}: key {k} maps to tid {t}, not to its own (pair {} of the scan)",
                    seen.len()
                );
                seen.push(k);
            },
        )
        .unwrap_or_else(|e| panic!("{what}: the scan failed after {} keys: {e}", seen.len()));
    if direction == Direction::Descending {
        seen.reverse();
    }
    seen
}

/// A scan under concurrent writers: strictly ascending (nothing repeated) and holding every
/// key present throughout. `what` names the scan (scanner, direction) in a failure.
fn assert_sound_scan(seen: &[u64], what: &str) {
    if let Some(i) = seen.windows(2).position(|w| w[0] >= w[1]) {
        panic!(
            "{what}: keys out of order or repeated at position {i} of {} (in ascending order): \
             {} then {}",
            seen.len(),
            seen[i],
            seen[i + 1]
        );
    }
    let present: BTreeSet<u64> = seen
        .iter()
        .copied()
        .filter(|k| STABLE.contains(k))
        .collect();
    let missing: Vec<u64> = STABLE.filter(|k| !present.contains(k)).collect();
    assert!(
        missing.is_empty(),
        "{what}: the scan missed {} of the {} keys present throughout, e.g. {:?}",
        missing.len(),
        STABLE.count(),
        &missing[..missing.len().min(10)]
    );
}

#[test]
fn writers_scanners_and_a_rebalance_lose_and_duplicate_nothing() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("conc");
    let connect = |per_master: usize| {
        let mut options = cluster::options(&name, true, 8);
        options.subtrees_per_master = per_master;
        options.scan_chunk = 64;
        DistIndex::connect(&seeds, options).unwrap_or_else(|e| {
            panic!("connect to index {name} ({per_master} sub-trees per master): {e}")
        })
    };
    let setup = connect(2);
    for k in STABLE {
        setup
            .insert(&key(k), k)
            .unwrap_or_else(|e| panic!("setup: insert of stable key {k}: {e}"));
    }
    // Set when the writers are done, and (the guard) when this scope ends by a panic, so
    // the scanners, the mover and the rebalancer stop instead of hanging the scope.
    let stop = StopFlag::new();
    let written = AtomicU64::new(0);
    let (expected, report, moved) = std::thread::scope(|s| {
        let _stop = stop.set_on_drop();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let index = connect(2);
                let written = &written;
                s.spawn(move || {
                    let mut mine: Vec<u64> = (0..PER_WRITER).map(|i| i * WRITERS + w).collect();
                    mine.shuffle(&mut rand::rngs::StdRng::seed_from_u64(w));
                    let mut kept = BTreeSet::new();
                    for (n, &k) in mine.iter().enumerate() {
                        let previous = index.insert(&key(k), k).unwrap_or_else(|e| {
                            panic!("writer {w} (shuffle seed {w}), insert {n}: key {k}: {e}")
                        });
                        assert_eq!(
                            previous, None,
                            "writer {w} (shuffle seed {w}), insert {n}: key {k} is this \
                             writer's alone and new, yet the insert found a tid"
                        );
                        kept.insert(k);
                        written.fetch_add(1, Ordering::Relaxed);
                        if n % 5 == 4 {
                            // Remove one of this writer's earlier keys.
                            let victim = mine[n / 2];
                            if kept.remove(&victim) {
                                let removed = index.remove(&key(victim)).unwrap_or_else(|e| {
                                    panic!(
                                        "writer {w} (shuffle seed {w}), after insert {n}: \
                                             remove of key {victim}: {e}"
                                    )
                                });
                                assert_eq!(
                                    removed,
                                    Some(victim),
                                    "writer {w} (shuffle seed {w}), after insert {n}: remove \
                                     of key {victim}, inserted by this writer and not removed \
                                     since"
                                );
                            }
                        }
                    }
                    kept
                })
            })
            .collect();
        for scanner in 0..2 {
            let index = connect(2);
            let stop = &stop;
            s.spawn(move || {
                let mut scans = 0;
                while !stop.is_set() || scans < 3 {
                    let direction = if scans % 2 == 0 {
                        Direction::Ascending
                    } else {
                        Direction::Descending
                    };
                    let what = format!("scanner {scanner}, scan {scans} ({direction:?})");
                    assert_sound_scan(&scanned(&index, direction, &what), &what);
                    scans += 1;
                }
            });
        }
        // The mover: the sub-tree covering a random key to a random master, again and again,
        // racing splits, posts, merges and scans.
        let mover = {
            let index = connect(2);
            let stop = &stop;
            let masters = cluster::master_addrs(cluster);
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(99);
                // At least a few moves even if the writers finish first (a fast machine); a
                // deadline from then on, so a mover that cannot move fails instead of hanging.
                let mut moved = 0;
                let mut deadline: Option<Instant> = None;
                while !stop.is_set() || moved < MIN_MOVES {
                    if stop.is_set() {
                        let deadline =
                            *deadline.get_or_insert(Instant::now() + cluster::WAIT_LIMIT);
                        assert!(
                            Instant::now() < deadline,
                            "the mover (seed 99) made only {moved} moves, and none more in \
                             {:?} after the writers were done; stats {:?}",
                            cluster::WAIT_LIMIT,
                            index.stats()
                        );
                    }
                    let k = rand::Rng::gen_range(&mut rng, 0..PER_WRITER * WRITERS);
                    let to = masters.choose(&mut rng).expect("the cluster has masters");
                    let done = index.move_subtree(&key(k), to).unwrap_or_else(|e| {
                        panic!(
                            "the mover (seed 99), move {moved}: the sub-tree of key {k} to \
                             {to}: {e}; stats {:?}",
                            index.stats()
                        )
                    });
                    if done {
                        moved += 1;
                    }
                    // Pacing, not synchronization: leave the writers room to work.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                moved
            })
        };
        // The rebalance: aim for 6 sub-trees per master while everybody works. It starts
        // once the writers are a quarter through (not after a fixed sleep), so it always
        // has a tree to lower, and the writers are still at work.
        let rebalancer = connect(6);
        let report = {
            let (written, stop) = (&written, &stop);
            s.spawn(move || {
                let quarter = WRITERS * PER_WRITER / 4;
                let reached = cluster::wait_for_progress(
                    "the writers' first quarter of inserts",
                    quarter,
                    || written.load(Ordering::Relaxed),
                    || stop.is_set(),
                );
                // Not reached only if a writer failed: its panic is the test's failure.
                reached.then(|| {
                    let report = rebalancer.rebalance().unwrap_or_else(|e| {
                        panic!(
                            "the rebalance under load (6 sub-trees per master) failed: {e}; \
                             stats {:?}",
                            rebalancer.stats()
                        )
                    });
                    (report, rebalancer.stats())
                })
            })
        };
        let mut expected = BTreeSet::new();
        for w in writers {
            expected.extend(joined(w));
        }
        stop.set();
        let report = joined(report);
        let moved = joined(mover);
        (expected, report, moved)
    });
    let (report, rebalancer_stats) =
        report.expect("the writers all finished, so the rebalance ran");
    assert!(
        report.lowered > 0,
        "the rebalance under load lowered the cut-off: {report:?}; its stats {rebalancer_stats:?}"
    );
    assert!(moved >= MIN_MOVES, "the mover moved {moved} sub-trees");
    println!("rebalance {report:?}; the mover moved {moved} sub-trees");

    let check = connect(2);
    let want: Vec<u64> = expected.iter().copied().chain(STABLE).collect();
    let verify = |when: &str| {
        check
            .try_check()
            .unwrap_or_else(|e| panic!("check() {when}: {e}; stats {:?}", check.stats()));
        let all = scanned(&check, Direction::Ascending, &format!("the scan {when}"));
        assert_same_pairs(
            &all,
            &want,
            &format!("every acknowledged key exactly once, {when}"),
        );
        let len = check
            .try_len()
            .unwrap_or_else(|e| panic!("len() {when}: {e}"));
        assert_eq!(len, want.len(), "len() {when}");
        for k in expected.iter().step_by(37) {
            let got = check
                .get(&key(*k))
                .unwrap_or_else(|e| panic!("get of key {k} {when}: {e}"));
            assert_eq!(got, Some(*k), "get of key {k} {when}");
        }
    };
    verify("after the workload");
    let subtrees = check.top_entries().len();
    assert!(
        subtrees > 3,
        "the index spread over sub-trees: {subtrees} in the top"
    );
    // Whether the rebalance under load moved sub-trees depends on the schedule (the mover
    // may have evened the counts already, a freeze may expire on a busy machine); that
    // moving works under load is the mover's count above. Once the workload is over, a
    // rebalance must spread the sub-trees evenly, and lose nothing doing it.
    let quiet = connect(6);
    let spread = quiet.rebalance().unwrap_or_else(|e| {
        panic!(
            "the rebalance after the workload failed: {e}; stats {:?}",
            quiet.stats()
        )
    });
    assert!(
        spread.imbalance() <= 0.2,
        "sub-trees per master within 20% of the mean after a rebalance once the workload is \
         over: imbalance {:.3}, {spread:?}; stats {:?}",
        spread.imbalance(),
        quiet.stats()
    );
    verify("after the quiet rebalance");
    check
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
}

/// The baseline's client-side B-link protocol (split: new right node, compare-and-set of the
/// left one, post to the parent) under concurrent writers and scanners.
#[test]
fn the_baseline_under_concurrent_writers_and_scanners() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("conc-base");
    let connect = || {
        BaselineIndex::connect(&seeds, cluster::options(&name, true, 4))
            .unwrap_or_else(|e| panic!("connect to baseline index {name}: {e}"))
    };
    let setup = connect();
    for k in STABLE {
        setup
            .insert(&key(k), k)
            .unwrap_or_else(|e| panic!("setup: insert of stable key {k}: {e}"));
    }
    let stop = StopFlag::new();
    std::thread::scope(|s| {
        let _stop = stop.set_on_drop();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let index = connect();
                s.spawn(move || {
                    let mut mine: Vec<u64> = (0..PER_WRITER / 3).map(|i| i * WRITERS + w).collect();
                    mine.shuffle(&mut rand::rngs::StdRng::seed_from_u64(w));
                    for (n, &k) in mine.iter().enumerate() {
                        let previous = index.insert(&key(k), k).unwrap_or_else(|e| {
                            panic!("writer {w} (shuffle seed {w}), insert {n}: key {k}: {e}")
                        });
                        assert_eq!(
                            previous, None,
                            "writer {w} (shuffle seed {w}), insert {n}: key {k} is this \
                             writer's alone and new, yet the insert found a tid"
                        );
                    }
                })
            })
            .collect();
        let index = connect();
        let stop = &stop;
        s.spawn(move || {
            let mut scans = 0;
            while !stop.is_set() {
                let what = format!("scanner, scan {scans} (Ascending)");
                assert_sound_scan(&scanned(&index, Direction::Ascending, &what), &what);
                scans += 1;
            }
        });
        for w in writers {
            joined(w);
        }
        stop.set();
    });
    let check = connect();
    check
        .check()
        .unwrap_or_else(|e| panic!("check() of baseline index {name}: {e}"));
    let all = scanned(&check, Direction::Ascending, "the final scan");
    let want: Vec<u64> = (0..PER_WRITER / 3 * WRITERS).chain(STABLE).collect();
    assert_same_pairs(&all, &want, "every acknowledged key exactly once");
    let height = check
        .height()
        .unwrap_or_else(|e| panic!("height() of baseline index {name}: {e}"));
    assert!(
        height >= 4,
        "small nodes make a tall tree: height {height} for {} keys in nodes of 4",
        want.len()
    );
    check
        .destroy()
        .unwrap_or_else(|e| panic!("destroy baseline index {name}: {e}"));
}

/// Many threads sharing one client while sub-trees appear and move to other masters (a
/// moved sub-tree's forwarding marker retargets the shared cached top under the mover).
#[test]
fn threads_sharing_one_client_while_new_subtrees_move() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("shared");
    let mut options = cluster::options(&name, true, 8);
    options.subtrees_per_master = 5;
    let index = DistIndex::connect(&seeds, options)
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let index = &index;
                s.spawn(move || {
                    for i in 0..800u64 {
                        let k = i * 8 + t;
                        let previous = index.insert(&key(k), k).unwrap_or_else(|e| {
                            panic!(
                                "thread {t}, insert {i}: key {k}: {e}; stats {:?}",
                                index.stats()
                            )
                        });
                        assert_eq!(
                            previous, None,
                            "thread {t}, insert {i}: key {k} is this thread's alone and new, \
                             yet the insert found a tid"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            joined(t);
        }
    });
    index
        .try_check()
        .unwrap_or_else(|e| panic!("check() of index {name}: {e}; stats {:?}", index.stats()));
    let len = index
        .try_len()
        .unwrap_or_else(|e| panic!("len() of index {name}: {e}"));
    assert_eq!(len, 6400, "len() after 8 threads inserted 800 keys each");
    let per_master = index
        .subtrees_per_master()
        .unwrap_or_else(|e| panic!("subtrees_per_master() of index {name}: {e}"));
    let stats = index.stats();
    assert!(
        per_master.values().all(|&n| n > 0),
        "new sub-trees spread as they appear: {per_master:?}; stats {stats:?}"
    );
    // A placement fails only with an error (a deadline of op_timeout passed, or a
    // compare-and-set conflict); a freeze that expires leaves the sub-tree in place
    // without one.
    assert_eq!(
        stats.placement_failures, 0,
        "no new sub-tree failed to be placed; sub-trees per master {per_master:?}; stats \
         {stats:?}"
    );
    for k in (0..6400u64).step_by(13) {
        let got = index
            .get(&key(k))
            .unwrap_or_else(|e| panic!("get of key {k}: {e}"));
        assert_eq!(got, Some(k), "get of key {k}");
    }
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
}
