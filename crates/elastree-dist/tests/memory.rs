//! The index's account of its bytes on the cluster ([`DistIndex::server_memory`]) against
//! Redis's own per-key account (`MEMORY USAGE`) of every key that carries the index's name on
//! every master, found by listing them: no key forgotten, none counted twice.
//!
//! Both tests work on indexes of their own names on the cluster the test binary shares;
//! the keys are found by name, so other indexes on it do not count.

mod cluster;

use cluster::{key, node};
use elastree::Index;
use elastree_dist::local::LocalCluster;
use elastree_dist::DistIndex;
use elastree_testkit::time_limit;

/// Redis's account of every key of index `name`: (keys, bytes), and the sum of the masters'
/// `used_memory_dataset` (for the report).
fn redis_account(cluster: &LocalCluster, name: &str) -> (usize, i64, i64) {
    let (mut keys, mut bytes, mut dataset) = (0, 0, 0);
    for port in cluster::masters(cluster) {
        let mut con = node(port);
        let patterns = [
            format!("{{et:{name}:*"),
            format!("{{et:{name}}}:*"),
            format!("et:{name}:b:*"),
        ];
        for pattern in patterns {
            let found: Vec<Vec<u8>> = redis::cmd("KEYS")
                .arg(&pattern)
                .query(&mut con)
                .unwrap_or_else(|e| panic!("KEYS {pattern} on port {port}: {e}"));
            for k in found {
                keys += 1;
                bytes += redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&k)
                    .query::<i64>(&mut con)
                    .unwrap_or_else(|e| {
                        panic!(
                            "MEMORY USAGE {:?} on port {port}: {e}",
                            String::from_utf8_lossy(&k)
                        )
                    });
            }
        }
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query(&mut con)
            .unwrap_or_else(|e| panic!("INFO memory on port {port}: {e}"));
        dataset += info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory_dataset:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or_else(|| panic!("no used_memory_dataset in INFO memory of port {port}"));
    }
    (keys, bytes, dataset)
}

#[test]
fn server_memory_accounts_for_every_key_of_the_index() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("mem");
    let options = elastree_dist::DistOptions {
        subtrees_per_master: 3,
        ..cluster::options(&name, true, 25)
    };
    let index = DistIndex::connect(&seeds, options)
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    let (_, _, dataset_before) = redis_account(cluster, &name);
    let scrambled = |k: u64| key(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for k in 0..20_000u64 {
        index
            .insert(&scrambled(k), k)
            .unwrap_or_else(|e| panic!("insert of key {k} (scrambled): {e}"));
    }
    for k in (0..20_000u64).step_by(3) {
        index
            .remove(&scrambled(k))
            .unwrap_or_else(|e| panic!("remove of key {k} (scrambled): {e}"));
    }
    let server = index
        .server_memory()
        .unwrap_or_else(|e| panic!("server_memory() of index {name}: {e}"));
    let (keys, bytes, dataset_after) = redis_account(cluster, &name);
    let total = server.total() as i64;
    println!(
        "server_memory {server:?} = {total} bytes for {} entries; MEMORY USAGE of the index's \
         {keys} keys: {bytes}; the masters' used_memory_dataset grew {}",
        index.len(),
        dataset_after - dataset_before
    );
    assert!(
        server.inner > 0 && server.leaves > server.inner && server.aux > 0,
        "inner nodes, more leaf bytes than inner, and aux bytes: {server:?}"
    );
    // Markers left where moved sub-trees were are the only keys not counted: a few bytes.
    let error = (bytes - total).abs() as f64 / bytes as f64;
    assert!(
        error <= 0.01,
        "the index's account is within 1% of Redis's: {total} vs {bytes} for {keys} keys \
         ({:.2}%); server_memory {server:?}",
        error * 100.0
    );
    let memory = index.memory();
    assert_eq!(
        memory.inner, server.inner,
        "memory() and server_memory() count the same inner nodes: {memory:?} vs {server:?}"
    );
    assert!(
        memory.aux > server.aux,
        "memory() adds the client's cached top: {memory:?} vs server_memory {server:?}"
    );
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy index {name}: {e}"));
    let (keys, _, _) = redis_account(cluster, &name);
    assert_eq!(keys, 0, "destroy leaves no key of index {name}");
}

#[test]
fn the_baselines_server_memory_accounts_for_every_key() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let name = cluster::unique_name("bmem");
    let index =
        elastree_dist::baseline::BaselineIndex::connect(&seeds, cluster::options(&name, true, 25))
            .unwrap_or_else(|e| panic!("connect to baseline index {name}: {e}"));
    for k in 0..5_000u64 {
        index
            .insert(&key(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)), k)
            .unwrap_or_else(|e| panic!("insert of key {k} (scrambled): {e}"));
    }
    let server = index
        .server_memory()
        .unwrap_or_else(|e| panic!("server_memory() of baseline index {name}: {e}"));
    let (keys, bytes, _) = redis_account(cluster, &name);
    println!("baseline server_memory {server:?}; MEMORY USAGE of its {keys} keys: {bytes}");
    assert_eq!(
        server.total() as i64,
        bytes,
        "every key counted once: server_memory {server:?} against MEMORY USAGE of {keys} keys"
    );
    assert_eq!(
        index.memory(),
        server,
        "memory() is server_memory() for the baseline"
    );
    index
        .destroy()
        .unwrap_or_else(|e| panic!("destroy baseline index {name}: {e}"));
}
