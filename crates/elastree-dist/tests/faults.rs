//! Faults: a master killed in the middle of a workload (after failover every acknowledged
//! write is there and the invariants hold), and a cluster that is gone (operations fail with
//! the typed error within the timeout, never hang).

mod cluster;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cluster::key;
use std::ops::Bound;

use elastree::{Direction, Error, Index};
use elastree_dist::baseline::BaselineIndex;
use elastree_dist::local::LocalCluster;
use elastree_dist::{DistError, DistIndex, DistOptions, RebalanceReport, RouterOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn acknowledged_writes_survive_a_master_killed_mid_workload() {
    let mut cluster = cluster::start(3, 1);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("fault");
    let connect =
        || DistIndex::connect(&seeds, cluster::options(&name, true, 16)).expect("connect");
    let setup = connect();
    // Enough keys first that every master holds sub-trees.
    for k in 0..2000u64 {
        setup.insert(&key(k * 2), k * 2).unwrap();
    }
    let progress = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let (acked, failed) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let index = connect();
                let (progress, stop) = (&progress, &stop);
                s.spawn(move || {
                    let mut acked = Vec::new();
                    let mut failed = 0;
                    for i in 0..2000u64 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let k = 100_000 + i * 2 + w;
                        match index.insert(&key(k), k) {
                            Ok(_) => acked.push(k),
                            Err(Error::Unavailable(_)) => failed += 1,
                            Err(e) => panic!("unexpected error {e}"),
                        }
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    (acked, failed)
                })
            })
            .collect();
        while progress.load(Ordering::Relaxed) < 600 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Kill the master that owns the first sub-tree, by PID.
        let victim = cluster.masters().unwrap()[0];
        cluster.kill(victim).unwrap();
        let mut acked = Vec::new();
        let mut failed = 0;
        for w in writers {
            let (a, f) = w.join().unwrap();
            acked.extend(a);
            failed += f;
        }
        stop.store(true, Ordering::Relaxed);
        (acked, failed)
    });
    cluster.wait_for_failover(Duration::from_secs(30)).unwrap();
    let check = connect();
    assert!(
        acked.len() > 1000,
        "the workload went on after the failover: {} acked",
        acked.len()
    );
    // Every key that reads wrong, then what the tree looks like, so a failure says why.
    let wrong: Vec<(u64, Result<Option<u64>, Error>)> = acked
        .iter()
        .copied()
        .chain((0..2000u64).map(|k| k * 2))
        .map(|k| (k, check.get(&key(k))))
        .filter(|(k, got)| !matches!(got, Ok(Some(t)) if t == k))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} acknowledged or loaded keys read wrong, e.g. {:?}; check(): {:?}; top: {:?}; {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)],
        check.try_check(),
        check.top_entries(),
        check.last_auto_rebalance()
    );
    check.check().unwrap();
    println!(
        "{} acknowledged, {failed} failed during the failover",
        acked.len()
    );
    drop(check);
    cluster.down_with(true).unwrap();
}

#[test]
fn a_stopped_cluster_gives_the_typed_error_within_the_timeout() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let timeout = Duration::from_secs(1);
    let options = DistOptions {
        router: RouterOptions {
            op_timeout: timeout,
            connect_timeout: Duration::from_millis(200),
            ..RouterOptions::default()
        },
        ..cluster::options(&cluster::unique_name("down"), true, 16)
    };
    let index = DistIndex::connect(&seeds, options.clone()).unwrap();
    index.insert(b"before", 1).unwrap();
    cluster.down_with(true).unwrap();
    for attempt in 0..2 {
        let started = Instant::now();
        let result = if attempt == 0 {
            index.insert(b"after", 2).map(|_| ())
        } else {
            index.get(b"before").map(|_| ())
        };
        assert!(
            matches!(result, Err(Error::Unavailable(_))),
            "got {result:?}"
        );
        assert!(
            started.elapsed() < timeout * 3,
            "took {:?}",
            started.elapsed()
        );
    }
    let started = Instant::now();
    let refused = DistIndex::connect(&seeds, options);
    assert!(
        matches!(refused, Err(DistError::Unavailable(_))),
        "got {refused:?}"
    );
    assert!(
        started.elapsed() < timeout * 3,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_frozen_sub_tree_refuses_writes_until_its_holder_lifts_the_freeze() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("freeze");
    let options = DistOptions {
        router: RouterOptions {
            op_timeout: Duration::from_millis(800),
            ..RouterOptions::default()
        },
        ..cluster::options(&name, true, 16)
    };
    let index = DistIndex::connect(&seeds, options).expect("connect");
    index.insert(&key(1), 1).unwrap();
    // Freeze the only sub-tree as a migration would (holder "test", for a minute), through
    // the function library directly.
    let entry = index.top_entries()[0].clone();
    let tag = format!("{{et:{name}:{}}}", entry.token);
    let fcall =
        |function: &str, args: &[&[u8]]| cluster::fcall(&cluster, &tag, function, entry.id, args);
    fcall("et_freeze", &[b"test", b"60000"]);
    let began = Instant::now();
    match index.insert(&key(2), 2) {
        Err(Error::Unavailable(msg)) => assert!(msg.contains("frozen"), "{msg}"),
        other => panic!("a write into a frozen sub-tree: {other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(index.get(&key(1)).unwrap(), Some(1), "reads go on");
    // Another holder cannot lift it; its own can.
    fcall("et_unfreeze", &[b"someone else"]);
    assert!(index.insert(&key(2), 2).is_err());
    fcall("et_unfreeze", &[b"test"]);
    assert_eq!(index.insert(&key(2), 2).unwrap(), None);
    index.check().unwrap();
    assert_eq!(index.len(), 2);
    index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

/// Caught in a failover run: a root split whose post to the top was lost (its master had
/// just died) leaves the new sub-tree reachable only through the old root's right link; a
/// migration of the old root cut that link and the new sub-tree's keys could no longer be
/// read. A migration now posts such a sibling first.
#[test]
fn moving_a_sub_tree_keeps_a_sibling_whose_post_was_lost() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("lostpost");
    let options = DistOptions {
        subtrees_per_master: 5,
        router: RouterOptions {
            op_timeout: Duration::from_secs(3),
            ..RouterOptions::default()
        },
        ..cluster::options(&name, true, 4)
    };
    let index = DistIndex::connect(&seeds, options).expect("connect");
    index.insert(&key(10), 10).unwrap();
    // Split the only root into two sub-tree roots through the function library, as a
    // client would, but never post the new root.
    let entry = index.top_entries()[0].clone();
    let tag = format!("{{et:{name}:{}}}", entry.token);
    let mut split = false;
    for k in 11..20u64 {
        let reply = cluster::fcall(
            &cluster,
            &tag,
            "et_put",
            entry.id,
            &[&key(k), &k.to_be_bytes(), b"4", b"1", b"u", b"9"],
        );
        split |= matches!(reply, redis::Value::Array(parts) if parts.len() >= 6);
    }
    assert!(split, "the root split into two sub-tree roots");
    assert_eq!(
        index.top_entries().len(),
        1,
        "and the new one was not posted"
    );
    // Move it to any other master: the one it is on says it is there already.
    let moved = cluster.masters().unwrap().into_iter().any(|port| {
        index
            .move_subtree(&key(10), &format!("127.0.0.1:{port}"))
            .unwrap()
    });
    assert!(moved);
    for k in 10..20u64 {
        assert_eq!(
            index.get(&key(k)).unwrap(),
            Some(k),
            "key {k} after the move"
        );
    }
    index.check().unwrap();
    assert_eq!(index.len(), 10);
    index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

/// A client of a cluster that has taken no write yet still waits for replicas: `CLUSTER
/// SLOTS` lists no replica until it has reported a replication offset, and a client that
/// took its replica counts from there acknowledged writes without `WAIT` (an acknowledged
/// write could then be lost with its master).
#[test]
fn writes_on_a_fresh_cluster_wait_for_replicas() {
    let cluster = cluster::start(3, 1);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("fresh");
    let index = DistIndex::connect(&seeds, cluster::options(&name, true, 16)).expect("connect");
    let before = index.stats();
    for k in 0..20u64 {
        index.insert(&key(k), k).unwrap();
    }
    let writes = index.stats().since(before);
    assert!(
        writes.replicated_writes >= 20,
        "every insert waited for its replica: {writes:?}"
    );
    let base_name = cluster::unique_name("fresh-base");
    let baseline = BaselineIndex::connect(&seeds, cluster::options(&base_name, true, 16))
        .expect("connect the baseline");
    baseline.insert(&key(1), 1).unwrap();
    assert!(
        baseline.stats().replicated_writes >= 1,
        "{:?}",
        baseline.stats()
    );
    cluster.down_with(true).unwrap();
}

/// Every write a client makes is safe to repeat. A failover can lose the reply of a write
/// that was applied, and the client then sends it again (the first failure here: a move's
/// repeated forward found its own marker, answered EXPIRED, and the client dropped the only
/// copy of the sub-tree). With every write request sent twice, inserts, removes, root
/// splits into new sub-trees, rebalances (cut-off lowered, sub-trees moved) and single moves
/// leave the keys and counts the model says and a tree that passes `check()`.
#[test]
fn every_write_is_safe_to_repeat_after_a_lost_reply() {
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let masters = cluster::master_addrs(&cluster);
    for unique in [true, false] {
        let name = cluster::unique_name("repeat");
        let options = DistOptions {
            subtrees_per_master: 3,
            router: RouterOptions {
                op_timeout: Duration::from_secs(20),
                repeat_writes: true,
                ..RouterOptions::default()
            },
            ..cluster::options(&name, unique, 6)
        };
        let index = DistIndex::connect(&seeds, options.clone()).expect("connect");
        let mut rng = StdRng::seed_from_u64(if unique { 1 } else { 2 });
        // The pairs present; on a unique index at most one per key.
        let mut model: BTreeSet<(u64, u64)> = BTreeSet::new();
        let mut rebalanced = RebalanceReport::default();
        let mut moves = 0;
        for i in 0..1200 {
            let k = rng.gen_range(0..400u64);
            let present: Vec<(u64, u64)> = model.range((k, 0)..=(k, u64::MAX)).copied().collect();
            if rng.gen_range(0..4) == 0 && !present.is_empty() {
                let (k, tid) = present[rng.gen_range(0..present.len())];
                // What a repeated write answers is what it finds (see the crate docs).
                let _ = index.remove_pair(&key(k), tid).unwrap();
                model.remove(&(k, tid));
            } else {
                let tid = rng.gen_range(0..4u64);
                let _ = index.insert(&key(k), tid).unwrap();
                if unique {
                    for pair in present {
                        model.remove(&pair);
                    }
                }
                model.insert((k, tid));
            }
            if i % 400 == 200 {
                // A client that aims for more sub-trees each time lowers the cut-off.
                let lowerer = DistIndex::connect(
                    &seeds,
                    DistOptions {
                        subtrees_per_master: 4 + i / 200,
                        auto_rebalance: false,
                        ..options.clone()
                    },
                )
                .expect("connect");
                let report = lowerer.rebalance().unwrap();
                rebalanced.lowered += report.lowered;
                rebalanced.moved += report.moved;
            }
            if i % 100 == 99 {
                let at = rng.gen_range(0..400u64);
                let to = &masters[rng.gen_range(0..masters.len())];
                moves += usize::from(index.move_subtree(&key(at), to).unwrap());
            }
        }
        assert!(
            rebalanced.lowered > 0 && rebalanced.moved > 0 && moves > 0,
            "the run changed the cut-off or moved sub-trees ({rebalanced:?}, {moves} moves)"
        );
        let expected: Vec<(u64, u64)> = model.iter().copied().collect();
        assert_eq!(
            cluster::common::all_pairs(&index),
            expected,
            "unique: {unique}"
        );
        for &(k, tid) in &model {
            let mut tids = Vec::new();
            index.get_all(&key(k), &mut tids).unwrap();
            assert!(tids.contains(&tid), "key {k} lost tid {tid}");
        }
        index.check().unwrap();
        assert_eq!(index.len(), model.len(), "unique: {unique}");
        println!(
            "unique {unique}: {} pairs, {} sub-trees, {rebalanced:?}, {moves} moves",
            model.len(),
            index.top_entries().len()
        );
        index.destroy().unwrap();
    }
    cluster.down_with(true).unwrap();
}

/// A plain connection to the node on `port`.
fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap()
}

/// Moves `keys` from the node on `from` to the node on `to` (MIGRATE, as redis-cli does).
fn migrate_keys(from: u16, to: u16, keys: &[Vec<u8>]) {
    if keys.is_empty() {
        return;
    }
    let mut cmd = redis::cmd("MIGRATE");
    cmd.arg("127.0.0.1")
        .arg(to)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS");
    for k in keys {
        cmd.arg(k);
    }
    let _: String = cmd.query(&mut node(from)).unwrap();
}

/// An index whose first sub-tree is about to have its slot migrated by hand (CLUSTER
/// SETSLOT), as redis-cli does: the slot, the master that owns it and another one.
struct SlotMove {
    index: DistIndex,
    slot: u16,
    source: u16,
    target: u16,
}

impl SlotMove {
    /// An index named `name` holding `keys` (each its own tid) in one sub-tree per master.
    fn new(cluster: &LocalCluster, name: &str, keys: impl Iterator<Item = u64>) -> SlotMove {
        let options = DistOptions {
            subtrees_per_master: 1,
            auto_rebalance: false,
            ..cluster::options(name, true, 4)
        };
        let index = DistIndex::connect(&cluster::seeds(cluster), options).expect("connect");
        for k in keys {
            index.insert(&key(k), k).unwrap();
        }
        let entry = index.top_entries()[0].clone();
        let tag = format!("{{et:{name}:{}}}", entry.token);
        let slot = elastree_dist::slots::slot_of(tag.as_bytes());
        let masters = cluster.masters().unwrap();
        let mut plan = SlotMove {
            index,
            slot,
            source: 0,
            target: 0,
        };
        plan.source = *masters.iter().find(|&&p| plan.keys_in_slot(p) > 0).unwrap();
        plan.target = *masters.iter().find(|&&p| p != plan.source).unwrap();
        plan
    }

    fn keys_in_slot(&self, port: u16) -> i64 {
        redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(self.slot)
            .query(&mut node(port))
            .unwrap()
    }

    fn id(port: u16) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut node(port))
            .unwrap()
    }

    /// CLUSTER SETSLOT of the slot on the node at `port`.
    fn setslot(&self, port: u16, args: &[&str]) {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(self.slot);
        for a in args {
            cmd.arg(*a);
        }
        let _: String = cmd.query(&mut node(port)).unwrap();
    }

    /// Marks the slot migrating from source to target (no key moved yet).
    fn start(&self) {
        self.setslot(self.target, &["IMPORTING", &Self::id(self.source)]);
        self.setslot(self.source, &["MIGRATING", &Self::id(self.target)]);
    }
}

#[test]
fn operations_wait_out_a_slot_migration_of_their_sub_tree() {
    let cluster = cluster::start(3, 0);
    let name = cluster::unique_name("slotmig");
    let plan = SlotMove::new(&cluster, &name, (0..300u64).map(|k| k * 2));
    let (index, slot, source, target) = (&plan.index, plan.slot, plan.source, plan.target);
    plan.start();
    // The tag's node keys go first; its meta key stays, so calls still land on the source
    // and find their nodes gone.
    let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(10_000)
        .query(&mut node(source))
        .unwrap();
    let (rest, first): (Vec<Vec<u8>>, Vec<Vec<u8>>) =
        keys.into_iter().partition(|k| k.ends_with(b":m"));
    migrate_keys(source, target, &first);
    let began = Instant::now();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            // Keys of the migrating sub-tree: an insert (it may split), a get, a scan.
            assert_eq!(index.insert(&key(1), 1).unwrap(), None);
            assert_eq!(index.get(&key(2)).unwrap(), Some(2));
            let mut seen = 0;
            index
                .scan(
                    Bound::Unbounded,
                    Bound::Unbounded,
                    Direction::Ascending,
                    50,
                    &mut |_, _| seen += 1,
                )
                .unwrap();
            assert_eq!(seen, 50);
            began.elapsed()
        });
        // Finish the migration after a while, as redis-cli would.
        std::thread::sleep(Duration::from_millis(700));
        migrate_keys(source, target, &rest);
        let target_id = SlotMove::id(target);
        for port in cluster.masters().unwrap() {
            plan.setslot(port, &["NODE", &target_id]);
        }
        let waited = worker.join().unwrap();
        assert!(
            waited >= Duration::from_millis(500),
            "the operations waited for the migration: {waited:?}"
        );
    });
    index.check().unwrap();
    assert_eq!(index.len(), 301);
    for k in 0..300u64 {
        assert_eq!(index.get(&key(k * 2)).unwrap(), Some(k * 2));
    }
    plan.index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}

#[test]
fn a_split_refused_by_a_migrating_slot_changes_nothing_until_it_succeeds() {
    let cluster = cluster::start(3, 0);
    let name = cluster::unique_name("slotsplit");
    let plan = SlotMove::new(&cluster, &name, (0..40u64).map(|k| k * 100));
    let (index, source) = (&plan.index, plan.source);
    // The slot starts migrating, but no key has moved: every node is there, and only a new
    // node key (a split) is refused.
    plan.start();
    let keys_before = plan.keys_in_slot(source);
    let began = Instant::now();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            // Between two existing keys: enough to split a leaf of 4.
            for k in 1..=12u64 {
                assert_eq!(index.insert(&key(k), k).unwrap(), None);
            }
            began.elapsed()
        });
        std::thread::sleep(Duration::from_millis(700));
        // The migration is called off.
        plan.setslot(source, &["STABLE"]);
        plan.setslot(plan.target, &["STABLE"]);
        let waited = worker.join().unwrap();
        assert!(
            waited >= Duration::from_millis(500),
            "a split waited for the slot: {waited:?}"
        );
    });
    assert!(
        plan.keys_in_slot(source) > keys_before,
        "the splits did happen"
    );
    // check() compares the tag's count with the entries: failed attempts left no trace.
    index.check().unwrap();
    assert_eq!(index.len(), 52);
    plan.index.destroy().unwrap();
    cluster.down_with(true).unwrap();
}
