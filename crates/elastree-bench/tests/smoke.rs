//! Every workload for every index on every key set at a tiny N, checking the results: lookups
//! all hit, scans return the right 15 keys in ascending order, delete empties the index.

use std::collections::HashSet;

use elastree_bench::alloc::CountingAlloc;
use elastree_bench::keys::{Key, KeySet, KeySetKind, KeyWidth};
use elastree_bench::peers::{BenchIndex, IndexSpec, Peer};
use elastree_bench::report;
use elastree_bench::workload::{self, OpStreams, RunConfig, Status, Workload};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const N: usize = 2_000;
const SCAN: usize = 15;

fn loaded(spec: IndexSpec, keys: &KeySet, threads: usize) -> Box<dyn BenchIndex> {
    let mut index = spec.build(keys.width()).expect("builds");
    if index.loads_in_bulk() {
        index.bulk_load(keys).expect("bulk load");
    } else {
        let shared: &dyn BenchIndex = index.as_ref();
        let order: Vec<u32> = (0..keys.len() as u32).collect();
        workload::run_parallel(&order, threads, |_, chunk| {
            for &i in chunk {
                shared.insert(keys.key(i as usize), u64::from(i));
            }
            0
        });
    }
    index
}

fn check_index(spec: IndexSpec, kind: KeySetKind, threads: usize) {
    let keys = kind.generate(N, 99);
    let ops = OpStreams::generate(&keys, SCAN, 99);
    let probe = spec.build(keys.width()).expect("builds");
    if let Err(reason) = probe.supports(kind) {
        assert!(!reason.is_empty());
        assert!(
            matches!(spec, IndexSpec::Peer(Peer::Congee)),
            "{spec} refuses {kind}: {reason}"
        );
        return;
    }
    if threads > 1 && !probe.concurrent() {
        return;
    }
    let ctx = format!("{spec} on {kind} x{threads}");
    let index = loaded(spec, &keys, threads);

    // Lookups: every key hits with its tid; absent keys miss.
    for i in 0..N {
        assert_eq!(index.get(keys.key(i)), Some(i as u64), "{ctx}: lookup {i}");
    }
    let absent_u64 = [u64::MAX];
    match keys.key(0) {
        Key::U64(_) => assert_eq!(index.get(Key::U64(absent_u64[0])), None, "{ctx}"),
        Key::Bytes(_) => assert_eq!(
            index.get(Key::Bytes(b"no-such-key@nowhere.invalid")),
            None,
            "{ctx}"
        ),
    }

    // Scans: 15 keys ascending, exactly the next ones in sorted order.
    let sorted: Vec<Vec<u8>> = ops
        .sorted
        .iter()
        .map(|&i| keys.key(i as usize).to_bytes())
        .collect();
    let rank = |bytes: &[u8]| {
        sorted
            .binary_search_by(|k| k.as_slice().cmp(bytes))
            .expect("present")
    };
    for &start in ops.scan_starts.iter().take(200) {
        let mut seen: Vec<(Vec<u8>, u64)> = Vec::new();
        let got = index.scan(keys.key(start as usize), SCAN, &mut |k, tid| {
            seen.push((k.to_bytes(), tid))
        });
        assert_eq!(got, SCAN, "{ctx}: scan length");
        assert_eq!(seen.len(), SCAN, "{ctx}: visited");
        let first = rank(&keys.key(start as usize).to_bytes());
        for (offset, (key, tid)) in seen.iter().enumerate() {
            assert_eq!(key, &sorted[first + offset], "{ctx}: scan order");
            assert_eq!(keys.key(*tid as usize).to_bytes(), *key, "{ctx}: scan tid");
        }
    }
    // A scan from the smallest key sees everything in order; one near the end stops short.
    let mut all = Vec::new();
    let count = index.scan(keys.key(ops.sorted[0] as usize), N + 10, &mut |k, _| {
        all.push(k.to_bytes())
    });
    assert_eq!(count, N, "{ctx}: full scan");
    assert_eq!(all, sorted, "{ctx}: full scan order");
    let near_end = keys.key(ops.sorted[N - 3] as usize);
    assert_eq!(
        index.scan(near_end, SCAN, &mut |_, _| {}),
        3,
        "{ctx}: scan past the end"
    );
    // Lower-bound semantics: a start between keys begins at the next key.
    if let Key::U64(k) = keys.key(ops.sorted[10] as usize) {
        let mut first = None;
        index.scan(Key::U64(k + 1), 1, &mut |key, _| {
            first = Some(key.to_bytes())
        });
        assert_eq!(
            first.as_deref(),
            Some(sorted[11].as_slice()),
            "{ctx}: lower bound"
        );
    }

    // Delete: every key once, then the index is empty.
    if index.supports_workload(Workload::Delete).is_err() {
        return;
    }
    let shared: &dyn BenchIndex = index.as_ref();
    let (_, removed) = workload::run_parallel(&ops.deletes, threads, |first, chunk| {
        (first..first + chunk.len())
            .filter(|&j| shared.remove(ops.delete_keys.key(j)))
            .count() as u64
    });
    assert_eq!(removed, N as u64, "{ctx}: removes");
    assert!(!index.remove(keys.key(0)), "{ctx}: second remove");
    assert_eq!(index.get(keys.key(0)), None, "{ctx}: get after delete");
    assert_eq!(
        index.scan(keys.key(ops.sorted[0] as usize), 1, &mut |_, _| {}),
        0,
        "{ctx}: empty"
    );
}

#[test]
fn every_index_every_key_set_one_thread() {
    for spec in IndexSpec::all() {
        for &kind in KeySetKind::BASELINE {
            check_index(spec, kind, 1);
        }
    }
}

#[test]
fn every_concurrent_index_two_threads() {
    for spec in IndexSpec::all() {
        for &kind in KeySetKind::BASELINE {
            check_index(spec, kind, 2);
        }
    }
}

#[test]
fn names_are_unique_and_parse_back() {
    let specs = IndexSpec::all();
    let names: HashSet<&str> = specs.iter().map(|s| s.name()).collect();
    assert_eq!(names.len(), specs.len());
    for spec in specs {
        assert_eq!(spec.name().parse::<IndexSpec>(), Ok(spec));
        let built = spec.build(KeySetKind::Rand64.width()).unwrap();
        assert_eq!(built.name(), spec.name());
    }
    assert!("nope".parse::<IndexSpec>().is_err());
}

#[test]
fn the_runner_measures_every_workload_and_reports() {
    let cfg = RunConfig {
        indexes: IndexSpec::all(),
        keysets: KeySetKind::BASELINE.to_vec(),
        n: N,
        workloads: Workload::ALL.to_vec(),
        threads: vec![1, 2],
        repeat: 2,
        seed: 5,
        scan_len: SCAN,
    };
    let progress = indicatif::ProgressBar::hidden();
    let mut rows = workload::run_suite(&cfg, &progress);
    assert_eq!(
        rows.len(),
        cfg.indexes.len() * cfg.keysets.len() * cfg.workloads.len() * cfg.threads.len()
    );
    for m in &rows {
        let ctx = format!("{} {} {} x{}", m.index, m.keys, m.workload, m.threads);
        match &m.status {
            Status::Ok => {
                assert_eq!(m.mops.len(), 2, "{ctx}");
                assert!(m.mops.iter().all(|&x| x > 0.0 && x.is_finite()), "{ctx}");
                // Other tests of this binary allocate concurrently, so only the presence of
                // the figure is checked here; tests/memory.rs checks its accuracy.
                assert!(m.bytes_per_key_alloc.is_some(), "{ctx}: allocator figure");
            }
            Status::Skipped(reason) => {
                let expected = (m.index == "congee" && m.keys.width() != KeyWidth::Fixed8)
                    || (m.index == "btreemap" && m.threads > 1)
                    || (m.index == "sorted"
                        && (m.workload == Workload::Delete
                            || (m.workload == Workload::Load && m.threads > 1)));
                assert!(expected, "{ctx} skipped: {reason}");
            }
            Status::Failed(problem) => panic!("{ctx} failed: {problem}"),
        }
        if m.index == "btree" && m.status == Status::Ok {
            assert!(
                m.bytes_per_key_self.is_some(),
                "{ctx}: elastree reports its memory"
            );
        }
    }
    let keyset_names: Vec<&str> = cfg.keysets.iter().map(|k| k.name()).collect();
    let index_names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
    report::sort_for_report(&mut rows, &keyset_names, &index_names);
    let table = report::render_table(&rows);
    assert!(
        table.contains("btreemap") && table.contains("1.00x"),
        "{table}"
    );
    let mut json = Vec::new();
    report::write_json_lines(&rows, &mut json).unwrap();
    assert_eq!(String::from_utf8(json).unwrap().lines().count(), rows.len());
}
