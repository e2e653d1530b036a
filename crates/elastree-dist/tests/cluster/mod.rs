//! The local clusters the tests run against: each test starts its own (on free ports) and
//! stops it when dropped, even when the test fails.

#![allow(dead_code)]

/// The library's shared test machinery (the model test, key helpers).
#[path = "../../../elastree/tests/common/mod.rs"]
pub mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use elastree_dist::local::{ClusterSpec, LocalCluster};
use elastree_dist::{DistOptions, RouterOptions};

/// Starts a cluster of `masters` masters with `replicas` replicas each.
pub fn start(masters: usize, replicas: usize) -> LocalCluster {
    let mut cluster = LocalCluster::up(&ClusterSpec {
        masters,
        replicas,
        ..ClusterSpec::default()
    })
    .expect("a local Redis Cluster (scripts/install-deps.sh installs redis-server)");
    cluster.set_remove_on_drop(true);
    cluster
}

/// A name no other index on the cluster has.
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Options for a test index: small nodes so that splits, posts and merges happen often.
pub fn options(name: &str, unique: bool, capacity: usize) -> DistOptions {
    DistOptions {
        name: name.into(),
        unique,
        node_capacity: capacity,
        max_key_len: 64,
        subtrees_per_master: 2,
        subtree_levels: None,
        auto_rebalance: true,
        scan_chunk: 7,
        router: RouterOptions {
            op_timeout: Duration::from_secs(20),
            ..RouterOptions::default()
        },
    }
}

/// Big-endian bytes of `i`: keys that sort like the integers.
pub fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// Every node's address, so a client can connect while some node is down.
pub fn seeds(cluster: &LocalCluster) -> Vec<String> {
    cluster
        .ports()
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect()
}

/// The masters' addresses, as `DistIndex::move_subtree` takes them.
pub fn master_addrs(cluster: &LocalCluster) -> Vec<String> {
    cluster
        .masters()
        .unwrap()
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect()
}

/// How many keys on the cluster's masters match `pattern` (KEYS, fine for test sizes).
pub fn keys_matching(cluster: &LocalCluster, pattern: &str) -> usize {
    cluster
        .masters()
        .unwrap()
        .into_iter()
        .map(|port| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
            let mut con = client
                .get_connection_with_timeout(Duration::from_secs(2))
                .unwrap();
            let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg(pattern).query(&mut con).unwrap();
            keys.len()
        })
        .sum()
}

/// Calls the library function `function` on the sub-tree root `root` of tag `tag` (its meta
/// key declares the slot; the root id goes as its 4 bytes), then `args`, on whichever master
/// owns the tag (the others redirect): what a client sends, for tests that must reach past
/// the client.
pub fn fcall(
    cluster: &LocalCluster,
    tag: &str,
    function: &str,
    root: u64,
    args: &[&[u8]],
) -> redis::Value {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(function)
        .arg(1)
        .arg(format!("{tag}:m"))
        .arg(tag)
        .arg(&(root as u32).to_be_bytes()[..]);
    for a in args {
        cmd.arg(*a);
    }
    cluster
        .masters()
        .unwrap()
        .into_iter()
        .find_map(|port| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
            let mut con = client.get_connection().ok()?;
            cmd.query(&mut con).ok()
        })
        .expect("the tag's master answers")
}
