//! Elastic scaling: a master joins during a workload; the index lowers its cut-off, moves
//! sub-trees onto the new master until every master holds about the same number, and loses
//! nothing. And keys appended in order spread over the masters as they arrive.

mod cluster;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cluster::key;
use elastree::Index;
use elastree_dist::DistIndex;

#[test]
fn a_master_joining_mid_workload_gets_its_share_and_nothing_is_lost() {
    let mut cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("scale");
    // The default aim of 5 sub-trees per master: enough that an even spread is within 20%.
    let options = elastree_dist::DistOptions {
        subtrees_per_master: 5,
        ..cluster::options(&name, true, 16)
    };
    let connect = || DistIndex::connect(&seeds, options.clone()).expect("connect");
    let setup = connect();
    for k in 0..3000u64 {
        setup.insert(&key(k * 3), k * 3).unwrap();
    }
    let before = setup.subtrees_per_master().unwrap();
    assert_eq!(before.len(), 3);
    let progress = AtomicU64::new(0);
    let (acked, report) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let index = connect();
                let progress = &progress;
                s.spawn(move || {
                    let mut acked = Vec::new();
                    for i in 0..2500u64 {
                        let k = i * 3 + 1 + w;
                        index.insert(&key(k), k).unwrap();
                        acked.push(k);
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    acked
                })
            })
            .collect();
        while progress.load(Ordering::Relaxed) < 500 {
            std::thread::sleep(Duration::from_millis(5));
        }
        cluster.add_master().unwrap();
        let report = connect().rebalance().unwrap();
        let mut acked = Vec::new();
        for w in writers {
            acked.extend(w.join().unwrap());
        }
        (acked, report)
    });
    assert_eq!(report.masters, 4, "{report:?}");
    assert_eq!(report.per_master.len(), 4, "{report:?}");
    assert!(
        report.subtrees_after >= 20,
        "at least 5 sub-trees per master: {report:?}"
    );
    assert!(report.per_master.values().all(|&n| n > 0), "{report:?}");
    // The rebalance above raced the writers' splits (new sub-trees, placed as they appear)
    // and their clients' own rebalances; once they are done, one more pass evens it out.
    let report = connect().rebalance().unwrap();
    assert!(
        report.imbalance() <= 0.2,
        "sub-trees per master within 20% of the mean: {report:?}"
    );
    // `setup` still holds the top from before the scale-out: its stale routes cost a
    // redirect or a refresh once per moved or lowered sub-tree, not per operation.
    let before_stale = setup.stats();
    for k in 0..3000u64 {
        assert_eq!(
            setup.get(&key(k * 3)).unwrap(),
            Some(k * 3),
            "loaded key lost"
        );
    }
    let stale = setup.stats().since(before_stale);
    assert!(
        stale.round_trips as f64 <= 1.1 * stale.operations as f64,
        "a stale client pays once per changed sub-tree: {stale:?}"
    );
    assert!(
        stale.stale_routes > 0,
        "the client did see the change: {stale:?}"
    );
    println!("stale client after the scale-out: {stale:?}");
    let check = connect();
    check.check().unwrap();
    for k in 0..3000u64 {
        assert_eq!(
            check.get(&key(k * 3)).unwrap(),
            Some(k * 3),
            "loaded key lost"
        );
    }
    for k in &acked {
        assert_eq!(
            check.get(&key(*k)).unwrap(),
            Some(*k),
            "acknowledged key lost"
        );
    }
    assert_eq!(check.len(), 3000 + acked.len());
    println!("{report:?}");
    check.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

#[test]
fn keys_appended_in_order_spread_over_every_master() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("append");
    // Sub-trees of at most 2 levels of 8 entries: 64 entries, so 3000 appended keys need
    // dozens of them, and each new one is placed on the master holding the fewest.
    let options = elastree_dist::DistOptions {
        subtree_levels: Some(2),
        ..cluster::options(&name, true, 8)
    };
    let index = DistIndex::connect(&seeds, options).expect("connect");
    for k in 0..3000u64 {
        index.insert(&key(k), k).unwrap();
    }
    index.check().unwrap();
    assert_eq!(index.len(), 3000);
    let subtrees = index.subtrees_per_master().unwrap();
    let entries = index.entries_per_master().unwrap();
    println!(
        "sub-trees {subtrees:?}, entries {entries:?}, {:?}",
        index.stats()
    );
    assert_eq!(entries.values().sum::<usize>(), 3000);
    let mean = 3000.0 / entries.len() as f64;
    assert!(
        entries.values().all(|&n| n as f64 >= 0.5 * mean),
        "every master holds at least half its share of the appended keys: {entries:?}"
    );
    let (most, least) = (
        subtrees.values().max().unwrap(),
        subtrees.values().min().unwrap(),
    );
    assert!(
        most - least <= 2,
        "sub-trees spread as they appear: {subtrees:?}"
    );
    for k in (0..3000u64).step_by(7) {
        assert_eq!(index.get(&key(k)).unwrap(), Some(k));
    }
    index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

#[test]
fn a_client_rebalances_on_its_own_when_a_master_joins() {
    let mut cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("auto");
    let options = elastree_dist::DistOptions {
        subtrees_per_master: 5,
        ..cluster::options(&name, true, 16)
    };
    let index = DistIndex::connect(&seeds, options).expect("connect");
    for k in 0..3000u64 {
        index.insert(&key(k * 7 % 3001), k).unwrap();
    }
    assert_eq!(index.subtrees_per_master().unwrap().len(), 3);
    cluster.add_master().unwrap();
    // No explicit rebalance: the client's next operations meet moved slots, see a fourth
    // master and rebalance in the background.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut k = 0u64;
    while index.stats().auto_rebalances == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no automatic rebalance: {:?}",
            index.stats()
        );
        assert!(index.get(&key(k * 7 % 3001)).unwrap().is_some());
        k = (k + 1) % 3000;
        std::thread::sleep(Duration::from_millis(2));
    }
    let report = index
        .last_auto_rebalance()
        .expect("an outcome")
        .expect("the automatic rebalance succeeded");
    println!("{report:?}");
    assert_eq!(report.masters, 4, "{report:?}");
    assert!(
        report.imbalance() <= 0.2,
        "sub-trees per master within 20% of the mean: {report:?}"
    );
    let per_master = index.subtrees_per_master().unwrap();
    assert_eq!(per_master.len(), 4);
    assert!(per_master.values().all(|&n| n > 0), "{per_master:?}");
    index.check().unwrap();
    assert_eq!(index.len(), 3000);
    index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}
