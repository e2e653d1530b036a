//! The distributed kinds (`dist`, `dist-baseline`) in the benchmark: where their cluster is,
//! how a client is opened on it, and the counters the reports take from it.
//!
//! A distributed index is driven through the same [`crate::peers::Elastree`] adapter as the
//! local kinds, over a [`DistClient`]: the client's [`elastree::Index`] operations plus its
//! [`DistStats`] counters. Every index the benchmark builds gets a fresh name and is deleted
//! from the cluster when it is dropped, so repeated runs leave nothing behind.
//!
//! Without a cluster address the benchmark starts a local cluster of 3
//! masters with 1 replica each for the run ([`LocalClusterGuard`]) and stops it at the end,
//! also when a measurement panics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use elastree_dist::local::{ClusterSpec, LocalCluster};
use elastree_dist::{DistClient, DistKind, DistOptions, DistStats};

/// A [`DistClient`] that deletes its index from the cluster when dropped.
pub struct Owned(Option<Box<dyn DistClient>>);

impl Owned {
    /// Takes ownership of `client`'s index.
    pub fn new(client: Box<dyn DistClient>) -> Self {
        Owned(Some(client))
    }

    /// The client.
    pub fn client(&self) -> &dyn DistClient {
        self.0.as_deref().expect("present until dropped")
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            let name = client.kind();
            if let Err(e) = client.destroy() {
                eprintln!(
                    "warning: could not delete a benchmark {name} index from the cluster: {e}"
                );
            }
        }
    }
}

/// A name no other index of this or another benchmark process has: `bench-<pid>-<time>-<n>`.
pub fn fresh_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{prefix}-{}-{:x}-{}",
        std::process::id(),
        nanos & 0xffff_ffff,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Opens a new, empty unique index of distributed `kind` named `name` on the cluster at
/// `seed` ("host:port"), with `options`' other settings. An address nothing listens on is
/// an error at once (within `options.router.connect_timeout`), not after the operation
/// timeout.
pub fn connect(
    kind: DistKind,
    seed: &str,
    name: String,
    options: DistOptions,
) -> Result<Box<dyn DistClient>, String> {
    elastree_dist::reachable(seed, options.router.connect_timeout).map_err(|e| e.to_string())?;
    let options = DistOptions { name, ..options };
    elastree_dist::open(kind, &[seed.to_string()], options).map_err(|e| e.to_string())
}

/// The counters `after` minus `before` (each field; counters only grow).
pub fn stats_delta(after: DistStats, before: DistStats) -> DistStats {
    after.since(before)
}

/// The sum of two counter sets (each field).
pub fn stats_sum(a: DistStats, b: DistStats) -> DistStats {
    a + b
}

/// Round trips and distinct masters contacted per index operation of `stats`, or `None`
/// when it counts no operation.
pub fn per_op(stats: DistStats) -> Option<(f64, f64)> {
    (stats.operations > 0).then(|| {
        let ops = stats.operations as f64;
        (
            stats.round_trips as f64 / ops,
            stats.masters_contacted as f64 / ops,
        )
    })
}

/// `cluster-node-timeout` of the clusters the benchmark starts itself, in milliseconds.
pub const BENCH_NODE_TIMEOUT_MS: u64 = 15_000;

/// How long the benchmark waits for a cluster it starts (or grows) to become healthy, in
/// milliseconds: a few seconds on an idle machine, more while the cores are busy elsewhere.
pub const BENCH_READY_TIMEOUT_MS: u64 = 120_000;

/// A local cluster started for one run: stopped (processes killed, directory deleted) when
/// dropped, also during a panic.
pub struct LocalClusterGuard {
    cluster: Option<LocalCluster>,
}

impl LocalClusterGuard {
    /// Starts a local cluster of `masters` masters with `replicas` replicas each on free
    /// ports, in a fresh temporary directory. It is removed when the guard drops, and when
    /// the process ends without dropping it (Ctrl-C, a kill).
    pub fn start(masters: usize, replicas: usize) -> Result<Self, String> {
        let spec = ClusterSpec {
            masters,
            replicas,
            // A benchmark keeps both the clients and the nodes busy on the same cores; a node
            // starved for a moment must not be declared failed (the default is 2 s, for
            // trying failover by hand). No run here measures a failover.
            node_timeout_ms: BENCH_NODE_TIMEOUT_MS,
            ready_timeout_ms: BENCH_READY_TIMEOUT_MS,
            ..ClusterSpec::default()
        };
        let mut cluster =
            LocalCluster::up(&spec).map_err(|e| format!("starting a local Redis Cluster: {e}"))?;
        cluster
            .set_remove_on_drop(true)
            .map_err(|e| format!("starting the local Redis Cluster's reaper: {e}"))?;
        Ok(Self {
            cluster: Some(cluster),
        })
    }

    /// The cluster.
    pub fn cluster(&self) -> &LocalCluster {
        self.cluster.as_ref().expect("running until stopped")
    }

    /// The cluster, to grow it.
    pub fn cluster_mut(&mut self) -> &mut LocalCluster {
        self.cluster.as_mut().expect("running until stopped")
    }

    /// A seed address of the cluster.
    pub fn seed(&self) -> String {
        self.cluster().seed()
    }

    /// Stops the cluster (SIGTERM, then SIGKILL) and deletes its directory.
    pub fn stop(mut self) -> Result<(), String> {
        match self.cluster.take() {
            Some(cluster) => cluster
                .down_with(true)
                .map_err(|e| format!("stopping the local Redis Cluster: {e}")),
            None => Ok(()),
        }
    }
}

impl Drop for LocalClusterGuard {
    fn drop(&mut self) {
        // The cluster's own drop kills its processes and deletes its directory.
        self.cluster.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_fresh_and_valid() {
        let a = fresh_name("bench");
        let b = fresh_name("bench");
        assert_ne!(a, b);
        for name in [a, b] {
            assert!(name.len() <= 64, "{name}");
            assert!(
                name.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
                "{name}"
            );
        }
    }

    #[test]
    fn deltas_and_ratios() {
        let before = DistStats {
            operations: 10,
            round_trips: 12,
            masters_contacted: 10,
            ..DistStats::default()
        };
        let after = DistStats {
            operations: 30,
            round_trips: 34,
            masters_contacted: 31,
            retries: 2,
            ..DistStats::default()
        };
        let d = stats_delta(after, before);
        assert_eq!(
            (d.operations, d.round_trips, d.masters_contacted, d.retries),
            (20, 22, 21, 2)
        );
        let (rt, m) = per_op(d).unwrap();
        assert!((rt - 1.1).abs() < 1e-9 && (m - 1.05).abs() < 1e-9);
        assert_eq!(per_op(DistStats::default()), None);
        assert_eq!(stats_sum(d, d).round_trips, 44);
    }
}
