//! The distributed kinds (`dist`, `dist-baseline`) through the benchmark's runner on a local
//! Redis Cluster on free ports (removed when the test ends): every workload measured and
//! checked, round trips per operation reported, and every index the run built deleted from
//! the cluster afterwards. Needs `redis-server` and `redis-cli` on PATH.

use std::process::Command;

use elastree::IndexKind;
use elastree_bench::keys::KeySetKind;
use elastree_bench::peers::{Budget, IndexSpec, SeqTreeTuning};
use elastree_bench::workload::{self, RunConfig, Status, Workload};
use elastree_dist::local::{ClusterSpec, LocalCluster};

/// Keys on the cluster's masters, summed (`DBSIZE` on each).
fn keys_on(cluster: &LocalCluster) -> u64 {
    cluster
        .masters()
        .unwrap()
        .iter()
        .map(|port| {
            let out = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "DBSIZE"])
                .output()
                .expect("run redis-cli");
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("DBSIZE on {port}: {out:?}"))
        })
        .sum()
}

#[test]
fn the_runner_measures_the_distributed_kinds_and_cleans_up() {
    let mut cluster = LocalCluster::up(&ClusterSpec {
        masters: 3,
        replicas: 0,
        ..ClusterSpec::default()
    })
    .expect("start a local cluster (needs redis-server and redis-cli)");
    cluster.set_remove_on_drop(true);
    let specs: Vec<IndexSpec> = IndexKind::DISTRIBUTED
        .iter()
        .map(|&k| IndexSpec::Elastree(k))
        .collect();
    let cfg = RunConfig {
        indexes: specs.clone(),
        keysets: vec![KeySetKind::Rand64, KeySetKind::Email],
        n: 1_500,
        workloads: Workload::ALL.to_vec(),
        threads: vec![1, 2],
        repeat: 1,
        seed: 7,
        scan_len: 15,
        budget: Budget::default(),
        tuning: SeqTreeTuning::default(),
        cluster: Some(cluster.seed()),
    };
    let rows = workload::run_suite(&cfg, &indicatif::ProgressBar::hidden());
    assert_eq!(
        rows.len(),
        specs.len() * cfg.keysets.len() * cfg.workloads.len() * cfg.threads.len()
    );
    for m in &rows {
        let what = format!("{} {} {} x{}", m.index, m.keys, m.workload, m.threads);
        assert_eq!(m.status, Status::Ok, "{what}");
        let rt = m
            .round_trips_per_op
            .unwrap_or_else(|| panic!("{what}: no RT/op"));
        let masters = m.masters_per_op.unwrap();
        assert!(
            masters >= 1.0 && masters <= rt,
            "{what}: {masters} masters, {rt} RT"
        );
        // A point lookup of dist is one round trip (the top is cached after the load);
        // the baseline's is one per level, so at least two on these trees.
        if m.workload == Workload::Lookup {
            if m.index == "dist" {
                assert!(rt < 1.05, "{what}: {rt}");
            } else {
                assert!(rt >= 2.0, "{what}: {rt}");
            }
        }
        // What the tree takes on the masters, as Redis counts it per key: more than the 16
        // bytes of key and tid, and not absurdly more.
        let self_bytes = m
            .bytes_per_key_self
            .unwrap_or_else(|| panic!("{what}: no bytes per key from the cluster"));
        assert!(
            (16.0..400.0).contains(&self_bytes),
            "{what}: {self_bytes} bytes per key"
        );
    }
    // Every index the run built (probes, loads, one per YCSB workload) was deleted.
    assert_eq!(
        keys_on(&cluster),
        0,
        "the benchmark left keys on the cluster"
    );
}

#[test]
fn distributed_kinds_need_a_cluster_and_are_not_in_all() {
    let keys = KeySetKind::Rand64.generate(100, 1);
    for &kind in IndexKind::DISTRIBUTED {
        let spec: IndexSpec = kind.name().parse().unwrap();
        assert_eq!(spec, IndexSpec::Elastree(kind));
        assert!(spec.is_distributed());
        assert!(!IndexSpec::all().contains(&spec));
        let err = spec.build(&keys, Budget::default()).err().unwrap();
        assert!(err.contains("Redis Cluster"), "{err}");
        // A cluster nobody serves: a clear error, not a panic.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let err = spec
            .build_on(
                &keys,
                Budget::default(),
                SeqTreeTuning::default(),
                Some(&addr),
            )
            .err()
            .unwrap();
        assert!(err.contains(&addr), "{err}");
    }
}
