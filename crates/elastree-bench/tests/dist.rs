//! The distributed kinds (`dist`, `dist-baseline`) through the benchmark's runner on a local
//! Redis Cluster on free ports (this test binary's shared cluster, removed when the process
//! ends): every workload measured and checked, round trips per operation reported, and every
//! index the run built deleted from the cluster afterwards. Needs `redis-server` and
//! `redis-cli` on PATH.

use std::collections::BTreeSet;
use std::net::{TcpListener, TcpStream};
use std::process::Command;

use elastree_bench::keys::KeySetKind;
use elastree_bench::peers::{Budget, IndexSpec, SeqTreeTuning};
use elastree_bench::workload::{self, RunConfig, Status, Workload};
use elastree_dist::local::LocalCluster;
use elastree_dist::DistKind;
use elastree_testkit::{cluster, process, time_limit};

/// Every key on the cluster's masters (`redis-cli --scan` on each; redis-cli 7.0 has no
/// timeout option, so the child's own limit bounds it).
fn keys_on(cluster: &LocalCluster) -> BTreeSet<String> {
    let masters = cluster
        .masters()
        .unwrap_or_else(|e| panic!("the cluster's masters: {e}"));
    let mut keys = BTreeSet::new();
    for port in masters {
        let out = process::output(
            Command::new("redis-cli").args(["-p", &port.to_string(), "--scan"]),
            b"",
        );
        assert!(
            out.status.success(),
            "redis-cli --scan on port {port}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        keys.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
        );
    }
    keys
}

#[test]
fn the_runner_measures_the_distributed_kinds_and_cleans_up() {
    let _limit = time_limit();
    // The only test of this binary on the shared cluster: every key that appears on it
    // during the run is the run's.
    let cluster = cluster::shared();
    let before = keys_on(cluster);
    let specs: Vec<IndexSpec> = DistKind::ALL.iter().map(|&k| IndexSpec::Dist(k)).collect();
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
    // Every index the run built (probes, loads, one per YCSB workload) was deleted: the
    // cluster holds exactly the keys it held before.
    let after = keys_on(cluster);
    let left: Vec<&String> = after.difference(&before).take(20).collect();
    let gone: Vec<&String> = before.difference(&after).take(20).collect();
    assert!(
        left.is_empty() && gone.is_empty(),
        "the benchmark left {} keys on the cluster (first 20: {left:?}) and removed {} \
         that were there before (first 20: {gone:?})",
        after.difference(&before).count(),
        before.difference(&after).count()
    );
}

#[test]
fn distributed_kinds_need_a_cluster_and_are_not_in_all() {
    let _limit = time_limit();
    let keys = KeySetKind::Rand64.generate(100, 1);
    // A port nothing listens on and nothing else can take while the test runs: the local
    // end of an open connection (bound, not listening, so a connection to it is refused).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let held = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let addr = held.local_addr().unwrap().to_string();
    for &kind in DistKind::ALL {
        let spec: IndexSpec = kind.name().parse().unwrap();
        assert_eq!(spec, IndexSpec::Dist(kind));
        assert!(spec.is_distributed());
        assert!(!IndexSpec::all().contains(&spec));
        let err = spec.build(&keys, Budget::default()).err().unwrap();
        assert!(err.contains("Redis Cluster"), "{err}");
        // A cluster nobody serves: a clear error, not a panic (at once: the address is
        // checked before the client's operation timeout starts).
        let err = spec
            .build_on(
                &keys,
                Budget::default(),
                SeqTreeTuning::default(),
                Some(&addr),
            )
            .err()
            .unwrap_or_else(|| panic!("{kind} built on {addr}, where nothing listens"));
        assert!(err.contains(&addr), "{kind}: {err}");
    }
}
