//! Elastic scaling: a master joins during a workload; the index lowers its cut-off, moves
//! sub-trees onto the new master until every master holds about the same number, and loses
//! nothing. And keys appended in order spread over the masters as they arrive.
//!
//! The tests that add a master start their own cluster; the other one works on an index of
//! its own name on the cluster the test binary shares.

mod cluster;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cluster::{joined, key};
use elastree::Index;
use elastree_dist::DistIndex;
use elastree_testkit::{time_limit, StopFlag};

/// A cluster's node table, for a failure message.
fn status_of(cluster: &elastree_dist::local::LocalCluster) -> String {
    cluster
        .status()
        .map_or_else(|e| format!("(no status: {e})"), |s| s.to_string())
}

#[test]
fn a_master_joining_mid_workload_gets_its_share_and_nothing_is_lost() {
    let _limit = time_limit();
    // Its own cluster: a master joins.
    let mut cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("scale");
    // The default aim of 5 sub-trees per master: enough that an even spread is within 20%.
    // No client of this test rebalances by itself: the explicit rebalances are the ones
    // under test, and an automatic one (a detached thread that outlives its client) would
    // freeze and move sub-trees under them, under the stale client's reads and under
    // check(). The automatic path has its own test below.
    let options = elastree_dist::DistOptions {
        subtrees_per_master: 5,
        auto_rebalance: false,
        ..cluster::options(&name, true, 16)
    };
    let connect = |who: &str| {
        DistIndex::connect(&seeds, options.clone())
            .unwrap_or_else(|e| panic!("connect {who} to index {name}: {e}"))
    };
    let setup = connect("the setup client");
    for k in 0..3000u64 {
        setup
            .insert(&key(k * 3), k * 3)
            .unwrap_or_else(|e| panic!("setup: insert of key {}: {e}", k * 3));
    }
    let before = setup
        .subtrees_per_master()
        .unwrap_or_else(|e| panic!("subtrees_per_master() before the scale-out: {e}"));
    assert_eq!(
        before.len(),
        3,
        "sub-trees per master before the scale-out: {before:?}"
    );
    let progress = AtomicU64::new(0);
    // Set when this scope ends, also by a panic (add_master failed): the writers then stop
    // after their current insert.
    let stop = StopFlag::new();
    let (acked, report) = std::thread::scope(|s| {
        let _stop = stop.set_on_drop();
        let mut writers: Vec<_> = (0..2u64)
            .map(|w| {
                let index = connect(&format!("writer {w}"));
                let (progress, stop) = (&progress, &stop);
                s.spawn(move || {
                    let mut acked = Vec::new();
                    for i in 0..2500u64 {
                        if stop.is_set() {
                            break;
                        }
                        let k = i * 3 + 1 + w;
                        index.insert(&key(k), k).unwrap_or_else(|e| {
                            panic!(
                                "writer {w}, insert {i}: key {k}: {e}; stats {:?}",
                                index.stats()
                            )
                        });
                        acked.push(k);
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    acked
                })
            })
            .collect();
        cluster::writers_reach("the scale-out", 500, &progress, &mut writers);
        let new = cluster.add_master().unwrap_or_else(|e| {
            panic!(
                "add_master during the workload: {e}\n{}",
                status_of(&cluster)
            )
        });
        let rebalancer = connect("the first rebalancer");
        let report = rebalancer.rebalance().unwrap_or_else(|e| {
            panic!(
                "rebalance after port {new} joined, during the workload: {e}; stats {:?}",
                rebalancer.stats()
            )
        });
        let mut acked = Vec::new();
        for w in writers {
            acked.extend(joined(w));
        }
        (acked, report)
    });
    assert_eq!(
        report.masters, 4,
        "masters seen by the rebalance: {report:?}"
    );
    assert_eq!(
        report.per_master.len(),
        4,
        "masters in the rebalance's counts: {report:?}"
    );
    assert!(
        report.subtrees_after >= 20,
        "at least 5 sub-trees per master: {report:?}"
    );
    assert!(
        report.per_master.values().all(|&n| n > 0),
        "every master holds a sub-tree after the rebalance: {report:?}"
    );
    // The rebalance above raced the writers' splits (new sub-trees, placed as they appear);
    // once they are done, one more pass evens it out.
    let second = connect("the second rebalancer");
    let report = second.rebalance().unwrap_or_else(|e| {
        panic!(
            "the rebalance after the workload: {e}; stats {:?}",
            second.stats()
        )
    });
    assert!(
        report.imbalance() <= 0.2,
        "sub-trees per master within 20% of the mean: imbalance {:.3}, {report:?}; stats {:?}",
        report.imbalance(),
        second.stats()
    );
    // `setup` still holds the top from before the scale-out: its stale routes cost a
    // redirect or a refresh once per moved or lowered sub-tree, not per operation.
    let before_stale = setup.stats();
    for k in 0..3000u64 {
        assert_eq!(
            setup
                .get(&key(k * 3))
                .unwrap_or_else(|e| panic!("stale client: get of loaded key {}: {e}", k * 3)),
            Some(k * 3),
            "stale client: loaded key {} lost",
            k * 3
        );
    }
    let stale = setup.stats().since(before_stale);
    assert!(
        stale.round_trips as f64 <= 1.1 * stale.operations as f64,
        "a stale client pays once per changed sub-tree: {} round trips for {} operations; \
         {stale:?}",
        stale.round_trips,
        stale.operations
    );
    assert!(
        stale.stale_routes > 0,
        "the client did see the change: {stale:?}"
    );
    println!("stale client after the scale-out: {stale:?}");
    let check = connect("the checking client");
    check
        .try_check()
        .unwrap_or_else(|e| panic!("check() after the scale-out: {e}; {report:?}"));
    for k in 0..3000u64 {
        assert_eq!(
            check
                .get(&key(k * 3))
                .unwrap_or_else(|e| panic!("get of loaded key {}: {e}", k * 3)),
            Some(k * 3),
            "loaded key {} lost",
            k * 3
        );
    }
    for k in &acked {
        assert_eq!(
            check
                .get(&key(*k))
                .unwrap_or_else(|e| panic!("get of acknowledged key {k}: {e}")),
            Some(*k),
            "acknowledged key {k} lost"
        );
    }
    assert_eq!(
        check
            .try_len()
            .unwrap_or_else(|e| panic!("len() after the scale-out: {e}")),
        3000 + acked.len(),
        "len(): 3000 loaded keys and {} acknowledged ones",
        acked.len()
    );
    println!("{report:?}");
    check
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster: {e}"));
}

#[test]
fn keys_appended_in_order_spread_over_every_master() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("append");
    // Sub-trees of at most 2 levels of 8 entries: 64 entries, so 3000 appended keys need
    // dozens of them, and each new one is placed on the master holding the fewest.
    let options = elastree_dist::DistOptions {
        subtree_levels: Some(2),
        ..cluster::options(&name, true, 8)
    };
    let index = DistIndex::connect(&seeds, options)
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    for k in 0..3000u64 {
        index
            .insert(&key(k), k)
            .unwrap_or_else(|e| panic!("append of key {k}: {e}; stats {:?}", index.stats()));
    }
    cluster::assert_sound(
        &index,
        &format!("of index {name} (keys 0 to 2999 appended)"),
        3000,
    );
    let subtrees = index
        .subtrees_per_master()
        .unwrap_or_else(|e| panic!("subtrees_per_master() of index {name}: {e}"));
    let entries = index
        .entries_per_master()
        .unwrap_or_else(|e| panic!("entries_per_master() of index {name}: {e}"));
    let stats = index.stats();
    println!("sub-trees {subtrees:?}, entries {entries:?}, {stats:?}");
    assert_eq!(
        entries.values().sum::<usize>(),
        3000,
        "entries per master add up to the keys: {entries:?}"
    );
    let mean = 3000.0 / entries.len() as f64;
    assert!(
        entries.values().all(|&n| n as f64 >= 0.5 * mean),
        "every master holds at least half its share of the appended keys: {entries:?}; \
         sub-trees {subtrees:?}; stats {stats:?}"
    );
    let (most, least) = (
        subtrees.values().max().expect("the cluster has masters"),
        subtrees.values().min().expect("the cluster has masters"),
    );
    assert!(
        most - least <= 2,
        "sub-trees spread as they appear: {subtrees:?}; stats {stats:?}"
    );
    for k in (0..3000u64).step_by(7) {
        assert_eq!(
            index
                .get(&key(k))
                .unwrap_or_else(|e| panic!("get of key {k}: {e}")),
            Some(k),
            "get of appended key {k}"
        );
    }
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
}

#[test]
fn a_client_rebalances_on_its_own_when_a_master_joins() {
    let _limit = time_limit();
    // Its own cluster: a master joins.
    let mut cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("auto");
    let options = elastree_dist::DistOptions {
        subtrees_per_master: 5,
        ..cluster::options(&name, true, 16)
    };
    let index = DistIndex::connect(&seeds, options)
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    for k in 0..3000u64 {
        index
            .insert(&key(k * 7 % 3001), k)
            .unwrap_or_else(|e| panic!("insert of key {}: {e}", k * 7 % 3001));
    }
    let before = index
        .subtrees_per_master()
        .unwrap_or_else(|e| panic!("subtrees_per_master() before the scale-out: {e}"));
    assert_eq!(
        before.len(),
        3,
        "sub-trees per master before the scale-out: {before:?}"
    );
    let new = cluster
        .add_master()
        .unwrap_or_else(|e| panic!("add_master: {e}\n{}", status_of(&cluster)));
    // No explicit rebalance: the client's next operations meet moved slots, see a fourth
    // master and rebalance in the background.
    // Twice the usual wait: the client re-reads the slot map every 5 s, and its rebalance
    // first waits for the map to settle (up to a minute on a busy machine).
    let limit = cluster::WAIT_LIMIT * 2;
    let deadline = std::time::Instant::now() + limit;
    let mut k = 0u64;
    while index.stats().auto_rebalances == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no automatic rebalance within {limit:?} of port {new} joining: {:?}",
            index.stats()
        );
        let key_k = k * 7 % 3001;
        let got = index
            .get(&key(key_k))
            .unwrap_or_else(|e| panic!("get of key {key_k} after port {new} joined: {e}"));
        assert!(
            got.is_some(),
            "get of loaded key {key_k} after port {new} joined found nothing"
        );
        k = (k + 1) % 3000;
        // Pacing, not synchronization: the loop waits for the count above.
        std::thread::sleep(Duration::from_millis(2));
    }
    let report = index
        .last_auto_rebalance()
        .expect("a completed automatic rebalance has an outcome")
        .unwrap_or_else(|e| panic!("the automatic rebalance failed: {e}"));
    println!("{report:?}");
    assert_eq!(
        report.masters, 4,
        "masters seen by the automatic rebalance: {report:?}"
    );
    assert!(
        report.imbalance() <= 0.2,
        "sub-trees per master within 20% of the mean: imbalance {:.3}, {report:?}",
        report.imbalance()
    );
    let per_master = index
        .subtrees_per_master()
        .unwrap_or_else(|e| panic!("subtrees_per_master() after the scale-out: {e}"));
    assert_eq!(
        per_master.len(),
        4,
        "sub-trees per master after the scale-out: {per_master:?}"
    );
    assert!(
        per_master.values().all(|&n| n > 0),
        "every master holds a sub-tree: {per_master:?}"
    );
    cluster::assert_sound(&index, "after the automatic rebalance", 3000);
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster: {e}"));
}
