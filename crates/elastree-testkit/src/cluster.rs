//! Local Redis Clusters for tests.
//!
//! Starting a cluster costs a few seconds, so the tests of one test binary that neither kill,
//! add nor stop nodes, nor move slots by hand, share one: [`shared`] starts it for the first
//! test that asks, each test then works on an index of its own name, and the cluster is
//! removed when the test process ends (a reaper process waits for that, so a panic, an abort
//! or a kill signal leaves nothing behind either). A test that changes the cluster itself
//! takes its own with [`start`], removed when dropped or when the process ends.
//!
//! Test clusters are set up for machines whose cores are busy elsewhere: a node is declared
//! failed only after [`NODE_TIMEOUT_MS`] without an answer (a starved node must not be
//! failed over by mistake), and they may take [`READY_TIMEOUT_MS`] to become healthy.

use std::sync::OnceLock;

use elastree_dist::local::{ClusterSpec, LocalCluster};

/// `cluster-node-timeout` of test clusters: 15 s. The failover tests ask for a short one
/// ([`start_with_node_timeout`]).
pub const NODE_TIMEOUT_MS: u64 = 15_000;

/// How long a test cluster may take to become healthy: 2 minutes (a few seconds on an idle
/// machine).
pub const READY_TIMEOUT_MS: u64 = 120_000;

/// Starts a cluster of `masters` masters with `replicas` replicas each, for one test: it is
/// removed when dropped, also when the test panics, and when the process ends.
pub fn start(masters: usize, replicas: usize) -> LocalCluster {
    start_with_node_timeout(masters, replicas, NODE_TIMEOUT_MS)
}

/// [`start`] with a node timeout of `node_timeout_ms` (short for a test of failover).
pub fn start_with_node_timeout(
    masters: usize,
    replicas: usize,
    node_timeout_ms: u64,
) -> LocalCluster {
    let spec = ClusterSpec {
        masters,
        replicas,
        node_timeout_ms,
        ready_timeout_ms: READY_TIMEOUT_MS,
        ..ClusterSpec::default()
    };
    let mut cluster = LocalCluster::up(&spec).unwrap_or_else(|e| {
        panic!(
            "starting a local Redis Cluster of {masters} masters with {replicas} replicas \
             each (scripts/install-deps.sh installs redis-server): {e}"
        )
    });
    cluster
        .set_remove_on_drop(true)
        .unwrap_or_else(|e| panic!("starting the cluster's reaper: {e}"));
    cluster
}

/// The cluster every test of this test binary shares: 3 masters without replicas, started
/// by the first test that asks, removed when the process ends. A test must use indexes of
/// its own names on it and must not change its nodes or slots.
pub fn shared() -> &'static LocalCluster {
    static SHARED: OnceLock<Result<LocalCluster, String>> = OnceLock::new();
    // A start that failed is remembered, so every test reports it at once instead of
    // trying again.
    SHARED
        .get_or_init(|| {
            std::panic::catch_unwind(|| start(3, 0)).map_err(|panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "the shared cluster did not start".into())
            })
        })
        .as_ref()
        .unwrap_or_else(|e| panic!("the shared cluster of this test binary: {e}"))
}

/// Every node's address, so a client can connect while some node is down.
pub fn seeds(cluster: &LocalCluster) -> Vec<String> {
    cluster
        .ports()
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect()
}
