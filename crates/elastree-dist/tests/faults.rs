//! Faults: a master killed in the middle of a workload (after failover every acknowledged
//! write is there and the invariants hold), a frozen sub-tree, a lost post, repeated writes,
//! and slot migrations by hand under the index's feet. (A cluster that is stopped
//! altogether has a test binary of its own, `stopped_cluster.rs`, so that no other test's
//! cluster can start on its ports.)
//!
//! Tests that only use indexes of their own names share the test binary's cluster; those
//! that kill a master, need a cluster that took no write yet, or move slots by hand (which
//! moves every index's keys in the slot) start their own.

mod cluster;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cluster::{joined, key, node};
use std::ops::Bound;

use elastree::{Direction, Error, Index};
use elastree_dist::baseline::BaselineIndex;
use elastree_dist::local::LocalCluster;
use elastree_dist::{unavailable, DistIndex, DistOptions, RebalanceReport, RouterOptions};
use elastree_testkit::model::{all_pairs, assert_same_pairs};
use elastree_testkit::{time_limit, StopFlag};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The first word of a function's reply (`OK`, `BUSY`, ...), if it has one.
fn first_word(reply: &redis::Value) -> Option<String> {
    let first = match reply {
        redis::Value::Array(parts) => parts.first()?,
        other => other,
    };
    match first {
        redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::Okay => Some("OK".into()),
        _ => None,
    }
}

#[test]
fn acknowledged_writes_survive_a_master_killed_mid_workload() {
    let _limit = time_limit();
    // Its own cluster (a master is killed), with a node timeout of 2 s so that the replica
    // takes over within seconds.
    let mut cluster = cluster::start_with_node_timeout(3, 1, 2000);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("fault");
    // The setup and the writers rebalance nothing by themselves: the failover changes the
    // masters, and their automatic rebalances (detached threads) would freeze and move
    // sub-trees while check() reads them. The automatic path has its own test (scaling.rs).
    let writer_options = DistOptions {
        auto_rebalance: false,
        ..cluster::options(&name, true, 16)
    };
    let connect = |options: &DistOptions, who: &str| {
        DistIndex::connect(&seeds, options.clone())
            .unwrap_or_else(|e| panic!("connect {who} to index {name}: {e}"))
    };
    let setup = connect(&writer_options, "the setup client");
    // Enough keys first that every master holds sub-trees.
    for k in 0..2000u64 {
        setup
            .insert(&key(k * 2), k * 2)
            .unwrap_or_else(|e| panic!("setup: insert of key {}: {e}", k * 2));
    }
    let progress = AtomicU64::new(0);
    // Set when this scope ends, also by a panic (the failover does not come): the writers
    // then stop after their current insert instead of running out 2000 timeouts each.
    let stop = StopFlag::new();
    let (acked, failed, victim) = std::thread::scope(|s| {
        let _stop = stop.set_on_drop();
        let mut writers: Vec<_> = (0..2u64)
            .map(|w| {
                let index = connect(&writer_options, &format!("writer {w}"));
                let (progress, stop) = (&progress, &stop);
                s.spawn(move || {
                    let mut acked = Vec::new();
                    let mut failed = 0;
                    for i in 0..2000u64 {
                        if stop.is_set() {
                            break;
                        }
                        let k = 100_000 + i * 2 + w;
                        match index.insert(&key(k), k) {
                            Ok(_) => acked.push(k),
                            Err(e) if unavailable(&e).is_some() => failed += 1,
                            Err(e) => panic!(
                                "writer {w}, insert {i}: key {k}: an error other than \
                                 Unavailable: {e}; stats {:?}",
                                index.stats()
                            ),
                        }
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    (acked, failed)
                })
            })
            .collect();
        cluster::writers_reach("the kill", 600, &progress, &mut writers);
        // Kill the master that owns the first sub-tree, by PID.
        let victim = cluster::masters(&cluster)[0];
        let at = progress.load(Ordering::Relaxed);
        cluster
            .kill(victim)
            .unwrap_or_else(|e| panic!("kill the master on port {victim}: {e}"));
        cluster
            .wait_for_failover(Duration::from_secs(60))
            .unwrap_or_else(|e| {
                panic!(
                    "the failover after killing port {victim} (at {at} inserts): {e}\n{}",
                    cluster
                        .status()
                        .map_or_else(|e| format!("no status: {e}"), |s| s.to_string())
                )
            });
        let mut acked = Vec::new();
        let mut failed = 0;
        for w in writers {
            let (a, f) = joined(w);
            acked.extend(a);
            failed += f;
        }
        (acked, failed, victim)
    });
    let check = connect(&cluster::options(&name, true, 16), "the checking client");
    assert!(
        acked.len() > 1000,
        "the workload went on after the failover: {} of 4000 inserts acknowledged, {failed} \
         failed (master on port {victim} killed)",
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
        "{} acknowledged or loaded keys read wrong (key, get), e.g. {:?}; check(): {:?}; top: \
         {:?}; {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)],
        check.try_check(),
        check.top_entries(),
        check.last_auto_rebalance()
    );
    check.try_check().unwrap_or_else(|e| {
        panic!(
            "check() after the failover of port {victim}: {e}; top {:?}",
            check.top_entries()
        )
    });
    println!(
        "{} acknowledged, {failed} failed during the failover",
        acked.len()
    );
    drop(check);
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster: {e}"));
}

#[test]
fn a_frozen_sub_tree_refuses_writes_until_its_holder_lifts_the_freeze() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("freeze");
    let options = cluster::options(&name, true, 16);
    let index = DistIndex::connect(&seeds, options.clone())
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    index
        .insert(&key(1), 1)
        .unwrap_or_else(|e| panic!("insert of key 1: {e}"));
    // A second client of the index whose operations give up after `short`: only the writes
    // that must be refused go through it, everything else has the normal deadline.
    // (A busy machine may make its own setup time out: that is retried.)
    let short = Duration::from_secs(2);
    let impatient_options = DistOptions {
        router: RouterOptions {
            op_timeout: short,
            ..options.router.clone()
        },
        ..options.clone()
    };
    let impatient = cluster::retried("connecting the impatient client", || {
        DistIndex::connect(&seeds, impatient_options.clone())
    });
    // Freeze the only sub-tree as a migration would (holder "test", for 10 minutes: far
    // longer than the test, so it cannot expire under the refused writes), through the
    // function library directly.
    let (entry, tag) = cluster::first_subtree(&index, &name);
    let fcall =
        |function: &str, args: &[&[u8]]| cluster::fcall(cluster, &tag, function, entry.id, args);
    let frozen = fcall("et_freeze", &[b"test", b"600000"]);
    assert_eq!(
        first_word(&frozen).as_deref(),
        Some("OK"),
        "et_freeze of root {} in {tag}: {frozen:?}",
        entry.id
    );
    // A write into the frozen sub-tree retries until its deadline, then fails with the
    // typed error: not before the deadline, and long before the freeze would end.
    // (An attempt that timed out before it reached the server, on a busy machine, is
    // Unavailable without the reason: it is tried again, for up to a minute.)
    let refused = |attempt: &str| {
        let deadline = Instant::now() + cluster::WAIT_LIMIT;
        let took = loop {
            let began = Instant::now();
            let result = impatient.insert(&key(2), 2);
            let took = began.elapsed();
            match &result {
                Err(e) if unavailable(e).is_some_and(|why| why.contains("frozen")) => break took,
                Err(e) if unavailable(e).is_some() && Instant::now() < deadline => continue,
                other => panic!(
                    "{attempt}: insert of key 2 into the frozen sub-tree {}:{} gave {other:?} \
                     after {took:?}, expected Unavailable saying it is frozen",
                    entry.token, entry.id
                ),
            }
        };
        assert!(
            took >= short,
            "{attempt}: the refused insert of key 2 retried until its deadline of {short:?}: \
             it gave up after {took:?}"
        );
        assert!(
            took < short + cluster::PAST_DEADLINE,
            "{attempt}: the refused insert of key 2 returned the typed error soon after its \
             deadline of {short:?} (not at the end of the 10-minute freeze): it took {took:?}"
        );
    };
    refused("while frozen");
    assert_eq!(
        index
            .get(&key(1))
            .unwrap_or_else(|e| panic!("get of key 1 while frozen: {e}")),
        Some(1),
        "reads go on: get of key 1 while frozen"
    );
    // Another holder cannot lift it; its own can.
    let other = fcall("et_unfreeze", &[b"someone else"]);
    assert_eq!(
        first_word(&other).as_deref(),
        Some("OK"),
        "et_unfreeze by another holder: {other:?}"
    );
    refused("after another holder's et_unfreeze");
    let own = fcall("et_unfreeze", &[b"test"]);
    assert_eq!(
        first_word(&own).as_deref(),
        Some("OK"),
        "et_unfreeze by its holder: {own:?}"
    );
    // None of the refused inserts was applied: key 2 is new.
    assert_eq!(
        index
            .insert(&key(2), 2)
            .unwrap_or_else(|e| panic!("insert of key 2 after the freeze was lifted: {e}")),
        None,
        "insert of key 2 after the freeze was lifted"
    );
    cluster::assert_sound(&index, &format!("of index {name} (keys 1 and 2)"), 2);
    drop(impatient);
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
}

/// Caught in a failover run: a root split whose post to the top was lost (its master had
/// just died) leaves the new sub-tree reachable only through the old root's right link; a
/// migration of the old root cut that link and the new sub-tree's keys could no longer be
/// read. A migration now posts such a sibling first.
#[test]
fn moving_a_sub_tree_keeps_a_sibling_whose_post_was_lost() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("lostpost");
    let options = DistOptions {
        subtrees_per_master: 5,
        ..cluster::options(&name, true, 4)
    };
    let index = DistIndex::connect(&seeds, options)
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    index
        .insert(&key(10), 10)
        .unwrap_or_else(|e| panic!("insert of key 10: {e}"));
    // Split the only root into two sub-tree roots through the function library, as a
    // client would, but never post the new root.
    let (entry, tag) = cluster::first_subtree(&index, &name);
    let mut replies = Vec::new();
    for k in 11..20u64 {
        let reply = cluster::fcall(
            cluster,
            &tag,
            "et_put",
            entry.id,
            &[&key(k), &k.to_be_bytes(), b"4", b"1", b"u", b"9"],
        );
        replies.push((k, reply));
    }
    let split = replies
        .iter()
        .any(|(_, reply)| matches!(reply, redis::Value::Array(parts) if parts.len() >= 6));
    assert!(
        split,
        "the root split into two sub-tree roots: no et_put reply names a new root; replies \
         (key, reply): {replies:?}"
    );
    assert_eq!(
        index.top_entries().len(),
        1,
        "and the new one was not posted: top {:?}",
        index.top_entries()
    );
    // Move it to any other master: the one it is on says it is there already.
    let mut attempts = Vec::new();
    for port in cluster::masters(cluster) {
        let to = format!("127.0.0.1:{port}");
        let moved = index.move_subtree(&key(10), &to).unwrap_or_else(|e| {
            panic!(
                "move_subtree of the sub-tree of key 10 to {to}: {e}; stats {:?}",
                index.stats()
            )
        });
        attempts.push((to, moved));
        if moved {
            break;
        }
    }
    assert!(
        attempts.iter().any(|(_, moved)| *moved),
        "the sub-tree of key 10 moved to another master; (target, moved): {attempts:?}; stats \
         {:?}",
        index.stats()
    );
    for k in 10..20u64 {
        assert_eq!(
            index
                .get(&key(k))
                .unwrap_or_else(|e| panic!("get of key {k} after the move: {e}")),
            Some(k),
            "key {k} after the move"
        );
    }
    cluster::assert_sound(
        &index,
        &format!("of index {name} after the move (keys 10 to 19)"),
        10,
    );
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
}

/// A client of a cluster that has taken no write yet still waits for replicas: `CLUSTER
/// SLOTS` lists no replica until it has reported a replication offset, and a client that
/// took its replica counts from there acknowledged writes without `WAIT` (an acknowledged
/// write could then be lost with its master).
#[test]
fn writes_on_a_fresh_cluster_wait_for_replicas() {
    let _limit = time_limit();
    // Its own cluster: it must not have taken a write yet.
    let cluster = cluster::start(3, 1);
    let seeds = cluster::seeds(&cluster);
    let name = cluster::unique_name("fresh");
    let index = DistIndex::connect(&seeds, cluster::options(&name, true, 16))
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    let before = index.stats();
    for k in 0..20u64 {
        index
            .insert(&key(k), k)
            .unwrap_or_else(|e| panic!("insert of key {k}: {e}"));
    }
    let writes = index.stats().since(before);
    assert!(
        writes.replicated_writes >= 20,
        "every one of the 20 inserts waited for its replica: {writes:?}"
    );
    let base_name = cluster::unique_name("fresh-base");
    let baseline = BaselineIndex::connect(&seeds, cluster::options(&base_name, true, 16))
        .unwrap_or_else(|e| panic!("connect to baseline index {base_name}: {e}"));
    baseline
        .insert(&key(1), 1)
        .unwrap_or_else(|e| panic!("baseline insert of key 1: {e}"));
    assert!(
        baseline.stats().replicated_writes >= 1,
        "the baseline's insert waited for its replica: {:?}",
        baseline.stats()
    );
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster: {e}"));
}

/// Every write a client makes is safe to repeat. A failover can lose the reply of a write
/// that was applied, and the client then sends it again (the first failure here: a move's
/// repeated forward found its own marker, answered EXPIRED, and the client dropped the only
/// copy of the sub-tree). With every write request sent twice, inserts, removes, root
/// splits into new sub-trees, rebalances (cut-off lowered, sub-trees moved) and single moves
/// leave the keys and counts the model says and a tree that passes `check()`.
#[test]
fn every_write_is_safe_to_repeat_after_a_lost_reply() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let masters = cluster::master_addrs(cluster);
    for unique in [true, false] {
        let name = cluster::unique_name("repeat");
        let seed = if unique { 1 } else { 2 };
        let options = DistOptions {
            subtrees_per_master: 3,
            router: RouterOptions {
                repeat_writes: true,
                ..cluster::options(&name, unique, 6).router
            },
            ..cluster::options(&name, unique, 6)
        };
        let run = format!("index {name} (unique: {unique}, seed {seed})");
        let index = DistIndex::connect(&seeds, options.clone())
            .unwrap_or_else(|e| panic!("connect to {run}: {e}"));
        let mut rng = StdRng::seed_from_u64(seed);
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
                let _ = index.remove_pair(&key(k), tid).unwrap_or_else(|e| {
                    panic!("{run}, step {i}: remove_pair of key {k} tid {tid}: {e}")
                });
                model.remove(&(k, tid));
            } else {
                let tid = rng.gen_range(0..4u64);
                let _ = index.insert(&key(k), tid).unwrap_or_else(|e| {
                    panic!("{run}, step {i}: insert of key {k} tid {tid}: {e}")
                });
                if unique {
                    for pair in present {
                        model.remove(&pair);
                    }
                }
                model.insert((k, tid));
            }
            if i % 400 == 200 {
                // A client that aims for more sub-trees each time lowers the cut-off.
                let per_master = 4 + i / 200;
                let lowerer = DistIndex::connect(
                    &seeds,
                    DistOptions {
                        subtrees_per_master: per_master,
                        auto_rebalance: false,
                        ..options.clone()
                    },
                )
                .unwrap_or_else(|e| panic!("{run}, step {i}: connect the lowering client: {e}"));
                let report = lowerer.rebalance().unwrap_or_else(|e| {
                    panic!(
                        "{run}, step {i}: rebalance aiming for {per_master} sub-trees per \
                         master: {e}; stats {:?}",
                        lowerer.stats()
                    )
                });
                rebalanced.lowered += report.lowered;
                rebalanced.moved += report.moved;
            }
            if i % 100 == 99 {
                let at = rng.gen_range(0..400u64);
                let to = &masters[rng.gen_range(0..masters.len())];
                let moved = index.move_subtree(&key(at), to).unwrap_or_else(|e| {
                    panic!("{run}, step {i}: move_subtree of the sub-tree of key {at} to {to}: {e}")
                });
                moves += usize::from(moved);
            }
        }
        assert!(
            rebalanced.lowered > 0 && rebalanced.moved > 0 && moves > 0,
            "{run}: the run changed the cut-off or moved sub-trees ({rebalanced:?}, {moves} \
             moves); stats {:?}",
            index.stats()
        );
        let expected: Vec<(u64, u64)> = model.iter().copied().collect();
        assert_same_pairs(
            &all_pairs(&index),
            &expected,
            &format!("{run}: the pairs against the model"),
        );
        for &(k, tid) in &model {
            let mut tids = Vec::new();
            index
                .get_all(&key(k), &mut tids)
                .unwrap_or_else(|e| panic!("{run}: get_all of key {k}: {e}"));
            assert!(
                tids.contains(&tid),
                "{run}: key {k} lost tid {tid}: get_all gives {tids:?}"
            );
        }
        index
            .try_check()
            .unwrap_or_else(|e| panic!("{run}: check(): {e}"));
        assert_eq!(
            index
                .try_len()
                .unwrap_or_else(|e| panic!("{run}: len(): {e}")),
            model.len(),
            "{run}: len() against the model"
        );
        println!(
            "{run}: {} pairs, {} sub-trees, {rebalanced:?}, {moves} moves",
            model.len(),
            index.top_entries().len()
        );
        index
            .destroy()
            .unwrap_or_else(|e| panic!("destroy {run}: {e}"));
    }
}

/// Moves `keys` from the node on `from` to the node on `to` (MIGRATE, as redis-cli does).
fn migrate_keys(from: u16, to: u16, keys: &[Vec<u8>]) {
    if keys.is_empty() {
        return;
    }
    let mut cmd = redis::cmd("MIGRATE");
    // The timeout (ms) of the transfer between the nodes: far above what it takes.
    cmd.arg("127.0.0.1")
        .arg(to)
        .arg("")
        .arg(0)
        .arg(30_000)
        .arg("KEYS");
    for k in keys {
        cmd.arg(k);
    }
    let _: String = cmd.query(&mut node(from)).unwrap_or_else(|e| {
        panic!(
            "MIGRATE of {} keys from port {from} to port {to} (e.g. {:?}): {e}",
            keys.len(),
            String::from_utf8_lossy(&keys[0])
        )
    });
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
        let index = DistIndex::connect(&cluster::seeds(cluster), options)
            .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
        for k in keys {
            index
                .insert(&key(k), k)
                .unwrap_or_else(|e| panic!("setup: insert of key {k}: {e}"));
        }
        let (_, tag) = cluster::first_subtree(&index, name);
        let slot = elastree_dist::slots::slot_of(tag.as_bytes());
        let masters = cluster::masters(cluster);
        let mut plan = SlotMove {
            index,
            slot,
            source: 0,
            target: 0,
        };
        let counts: Vec<(u16, i64)> = masters.iter().map(|&p| (p, plan.keys_in_slot(p))).collect();
        plan.source = counts
            .iter()
            .find(|(_, n)| *n > 0)
            .map(|(p, _)| *p)
            .unwrap_or_else(|| {
                panic!("no master holds a key of slot {slot} ({tag}); (port, keys): {counts:?}")
            });
        plan.target = *masters
            .iter()
            .find(|&&p| p != plan.source)
            .unwrap_or_else(|| panic!("no master besides {} in {masters:?}", plan.source));
        plan
    }

    fn keys_in_slot(&self, port: u16) -> i64 {
        redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(self.slot)
            .query(&mut node(port))
            .unwrap_or_else(|e| panic!("CLUSTER COUNTKEYSINSLOT {} on port {port}: {e}", self.slot))
    }

    fn id(port: u16) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut node(port))
            .unwrap_or_else(|e| panic!("CLUSTER MYID on port {port}: {e}"))
    }

    /// CLUSTER SETSLOT of the slot on the node at `port`.
    fn setslot(&self, port: u16, args: &[&str]) {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(self.slot);
        for a in args {
            cmd.arg(*a);
        }
        let _: String = cmd.query(&mut node(port)).unwrap_or_else(|e| {
            panic!("CLUSTER SETSLOT {} {args:?} on port {port}: {e}", self.slot)
        });
    }

    /// Marks the slot migrating from source to target (no key moved yet).
    fn start(&self) {
        self.setslot(self.target, &["IMPORTING", &Self::id(self.source)]);
        self.setslot(self.source, &["MIGRATING", &Self::id(self.target)]);
    }

    /// Runs `operations` (named `what`) on a thread while the slot migrates, waits until
    /// they meet the migration (the client retries), then ends it with `end` (finishing or
    /// calling it off), as redis-cli would: not after a fixed sleep. The operations can only
    /// complete after that: a flag set just before `end` must be set when they are done, and
    /// they must have retried.
    fn wait_out(&self, what: &str, operations: impl FnOnce() + Send, end: impl FnOnce()) {
        let (index, slot) = (&self.index, self.slot);
        let ending = AtomicBool::new(false);
        let before = index.stats();
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                operations();
                assert!(
                    ending.load(Ordering::SeqCst),
                    "{what} completed while slot {slot} was migrating: they did not wait for \
                     the migration; stats {:?}",
                    index.stats().since(before)
                );
            });
            cluster::wait_until(
                &format!("the first retry of {what} on migrating slot {slot}"),
                || index.stats().retries > before.retries || worker.is_finished(),
                || format!("stats since the start {:?}", index.stats().since(before)),
            );
            ending.store(true, Ordering::SeqCst);
            end();
            joined(worker);
        });
        assert!(
            index.stats().since(before).retries > 0,
            "{what} met the migration of slot {slot} and retried: {:?}",
            index.stats().since(before)
        );
    }
}

#[test]
fn operations_wait_out_a_slot_migration_of_their_sub_tree() {
    let _limit = time_limit();
    // Its own cluster: it migrates a whole slot by hand.
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
        .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT {slot} on port {source}: {e}"));
    let (rest, first): (Vec<Vec<u8>>, Vec<Vec<u8>>) =
        keys.into_iter().partition(|k| k.ends_with(b":m"));
    migrate_keys(source, target, &first);
    // Keys of the migrating sub-tree: an insert (it may split), a get, a scan.
    let operations = || {
        let inserted = index
            .insert(&key(1), 1)
            .unwrap_or_else(|e| panic!("insert of key 1 during the migration of slot {slot}: {e}"));
        assert_eq!(inserted, None, "insert of key 1 (new) during the migration");
        let got = index
            .get(&key(2))
            .unwrap_or_else(|e| panic!("get of key 2 during the migration of slot {slot}: {e}"));
        assert_eq!(got, Some(2), "get of key 2 during the migration");
        let mut seen = 0;
        index
            .scan(
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Ascending,
                50,
                &mut |_, _| seen += 1,
            )
            .unwrap_or_else(|e| panic!("scan (limit 50) during the migration of slot {slot}: {e}"));
        assert_eq!(
            seen, 50,
            "keys of the scan with limit 50 during the migration"
        );
    };
    // Finishing it: the meta key moves, then every master learns the slot's new owner.
    let finish = || {
        migrate_keys(source, target, &rest);
        let target_id = SlotMove::id(target);
        for port in cluster::masters(&cluster) {
            plan.setslot(port, &["NODE", &target_id]);
        }
    };
    plan.wait_out(
        "the insert, get and scan of the sub-tree whose node keys moved",
        operations,
        finish,
    );
    cluster::assert_sound(
        index,
        &format!("of index {name} after the migration (300 loaded keys and key 1)"),
        301,
    );
    for k in 0..300u64 {
        assert_eq!(
            index
                .get(&key(k * 2))
                .unwrap_or_else(|e| panic!("get of key {} after the migration: {e}", k * 2)),
            Some(k * 2),
            "get of loaded key {} after the migration",
            k * 2
        );
    }
    plan.index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster: {e}"));
}

#[test]
fn a_split_refused_by_a_migrating_slot_changes_nothing_until_it_succeeds() {
    let _limit = time_limit();
    // Its own cluster: it marks a slot migrating by hand, and COUNTKEYSINSLOT would count
    // other indexes' keys.
    let cluster = cluster::start(3, 0);
    let name = cluster::unique_name("slotsplit");
    let plan = SlotMove::new(&cluster, &name, (0..40u64).map(|k| k * 100));
    let (index, source) = (&plan.index, plan.source);
    // The slot starts migrating, but no key has moved: every node is there, and only a new
    // node key (a split) is refused.
    plan.start();
    let keys_before = plan.keys_in_slot(source);
    // Between two existing keys: enough to split a leaf of 4.
    let operations = || {
        for k in 1..=12u64 {
            let inserted = index.insert(&key(k), k).unwrap_or_else(|e| {
                panic!("insert of key {k} while slot {} migrates: {e}", plan.slot)
            });
            assert_eq!(
                inserted, None,
                "insert of key {k} (new) while the slot migrates"
            );
        }
    };
    let call_off = || {
        plan.setslot(source, &["STABLE"]);
        plan.setslot(plan.target, &["STABLE"]);
    };
    plan.wait_out(
        "the 12 inserts, which must split a leaf of 4,",
        operations,
        call_off,
    );
    let keys_after = plan.keys_in_slot(source);
    assert!(
        keys_after > keys_before,
        "the splits did happen: slot {} holds {keys_after} keys on port {source}, {keys_before} \
         before",
        plan.slot
    );
    // check() compares the tag's count with the entries: failed attempts left no trace.
    cluster::assert_sound(
        index,
        &format!("of index {name} (40 loaded keys and keys 1 to 12)"),
        52,
    );
    plan.index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster: {e}"));
}
