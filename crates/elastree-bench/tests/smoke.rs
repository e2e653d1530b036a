//! Every workload for every index on every key set at a tiny N, checking the results: lookups
//! all hit, scans return the right 15 keys in ascending (and descending) order, delete empties
//! the index, and every YCSB stream gives the same answers as a model `BTreeMap` and leaves the
//! index holding exactly the loaded and inserted keys.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;

use elastree_bench::alloc::CountingAlloc;
use elastree_bench::keys::{Key, KeySet, KeySetKind, KeyWidth};
use elastree_bench::peers::{BenchIndex, Budget, IndexSpec, Peer, SeqTreeTuning};
use elastree_bench::report;
use elastree_bench::runner::timing::run_parallel;
use elastree_bench::workload::{self, OpStreams, RunConfig, Status, Workload};
use elastree_bench::ycsb::{Ycsb, YcsbOp, YcsbStream, TID_MASK, VERSION_STEP};
use elastree_testkit::model::assert_same_pairs;
use elastree_testkit::time_limit;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const N: usize = 2_000;
const SCAN: usize = 15;

fn loaded(spec: IndexSpec, keys: &KeySet, threads: usize) -> Box<dyn BenchIndex> {
    let mut index = spec.build(keys, Budget::default()).expect("builds");
    if index.loads_in_bulk() {
        index.bulk_load(keys).expect("bulk load");
    } else {
        let shared: &dyn BenchIndex = index.as_ref();
        let order: Vec<u32> = (0..keys.len() as u32).collect();
        run_parallel(&order, threads, |_, chunk| {
            for &i in chunk {
                shared.insert(keys.key(i as usize), u64::from(i));
            }
            0
        });
    }
    index
}

/// Scans `SCAN` keys (descending if `descending`) from the first 200 of `starts`: each visits
/// exactly the next (previous) keys of `sorted`, the keys of the set, with their tids.
fn check_short_scans(
    index: &dyn BenchIndex,
    keys: &KeySet,
    starts: &[u32],
    sorted: &[Vec<u8>],
    descending: bool,
    ctx: &str,
) {
    for &start in starts.iter().take(200) {
        let mut seen: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut visit = |k: Key<'_>, tid| seen.push((k.to_bytes(), tid));
        let from = keys.key(start as usize);
        let got = if descending {
            index.scan_desc(from, SCAN, &mut visit)
        } else {
            index.scan(from, SCAN, &mut visit)
        };
        assert_eq!(got, SCAN, "{ctx}: scan length (descending: {descending})");
        assert_eq!(seen.len(), SCAN, "{ctx}: visited");
        let first = sorted
            .binary_search_by(|k| k.as_slice().cmp(&from.to_bytes()))
            .expect("present");
        for (offset, (key, tid)) in seen.iter().enumerate() {
            let expected = if descending {
                first - offset
            } else {
                first + offset
            };
            assert_eq!(
                key, &sorted[expected],
                "{ctx}: scan order (descending: {descending})"
            );
            assert_eq!(keys.key(*tid as usize).to_bytes(), *key, "{ctx}: scan tid");
        }
    }
}

/// Whether `spec` cannot hold keys of `kind`'s width: congee takes only 8-byte keys, the
/// SB-tree 8- and 16-byte ones.
fn refuses_width(spec: IndexSpec, kind: KeySetKind) -> bool {
    match spec {
        IndexSpec::Peer(Peer::Congee) => kind.key_len() != Some(8),
        IndexSpec::Elastree(elastree::IndexKind::SbTree) => !matches!(kind.key_len(), Some(8 | 16)),
        _ => false,
    }
}

fn check_index(spec: IndexSpec, kind: KeySetKind, threads: usize) {
    let keys = kind.generate(N, 99);
    let ops = OpStreams::generate(&keys, SCAN, 99);
    let probe = spec.build(&keys, Budget::default()).expect("builds");
    if let Err(reason) = probe.supports(kind) {
        assert!(!reason.is_empty());
        assert!(refuses_width(spec, kind), "{spec} refuses {kind}: {reason}");
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
    let ascending = index.supports_workload(Workload::Scan).is_ok();
    if ascending {
        check_ascending_scans(index.as_ref(), &keys, &ops, &sorted, &ctx);
    } else {
        assert!(
            refuses_scans(spec, kind),
            "{ctx}: only masstree on variable-length keys lacks scans"
        );
    }
    check_descending_scans(index.as_ref(), spec, &keys, &ops, &sorted, &ctx);
    check_delete(index.as_ref(), &keys, &ops, threads, ascending, &ctx);
}

/// Whether `spec` refuses every scan on key set `kind`: masstree does on variable-length keys.
fn refuses_scans(spec: IndexSpec, kind: KeySetKind) -> bool {
    matches!(spec, IndexSpec::Peer(Peer::MassTree)) && kind.width() == KeyWidth::Variable
}

/// Ascending scans of `index`, loaded with every key of `keys`: short ones from the scan
/// starts, a full one, one that runs past the end, and (8-byte keys) one from between keys.
fn check_ascending_scans(
    index: &dyn BenchIndex,
    keys: &KeySet,
    ops: &OpStreams,
    sorted: &[Vec<u8>],
    ctx: &str,
) {
    check_short_scans(index, keys, &ops.scan_starts, sorted, false, ctx);
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
}

/// Descending scans of `index` (of `spec`), loaded with every key of `keys`, if it supports
/// them: short ones from the scan starts, a full one, one that runs past the start, and ones
/// from between keys.
fn check_descending_scans(
    index: &dyn BenchIndex,
    spec: IndexSpec,
    keys: &KeySet,
    ops: &OpStreams,
    sorted: &[Vec<u8>],
    ctx: &str,
) {
    if index.supports_workload(Workload::ScanDesc).is_ok() {
        check_short_scans(index, keys, &ops.scan_desc_starts, sorted, true, ctx);
        // From the largest key: everything, in reverse; near the start it stops short.
        let mut all = Vec::new();
        let count = index.scan_desc(keys.key(ops.sorted[N - 1] as usize), N + 10, &mut |k, _| {
            all.push(k.to_bytes())
        });
        assert_eq!(count, N, "{ctx}: full descending scan");
        all.reverse();
        assert_eq!(all, sorted, "{ctx}: full descending scan order");
        let near_start = keys.key(ops.sorted[2] as usize);
        assert_eq!(
            index.scan_desc(near_start, SCAN, &mut |_, _| {}),
            3,
            "{ctx}: descending scan past the start"
        );
        // Upper-bound semantics: a start between keys begins at the previous key, wherever
        // in a node it falls.
        for r in (10..N - 1).step_by(97) {
            let between = match keys.key(ops.sorted[r] as usize) {
                Key::U64(k) if k + 1 < u64::MAX => Some(Key::U64(k + 1).to_bytes()),
                Key::Bytes(b) if keys.width() == KeyWidth::Variable => {
                    Some([b, &[0u8][..]].concat())
                }
                _ => None,
            };
            let Some(between) = between else { continue };
            if between == sorted[r + 1] {
                continue;
            }
            let start = match keys.width() {
                KeyWidth::Fixed8 => Key::U64(u64::from_be_bytes(between[..].try_into().unwrap())),
                _ => Key::Bytes(&between),
            };
            let mut first = None;
            index.scan_desc(start, 1, &mut |key, _| first = Some(key.to_bytes()));
            assert_eq!(
                first.as_deref(),
                Some(sorted[r].as_slice()),
                "{ctx}: descending upper bound at rank {r}"
            );
        }
    } else {
        assert!(
            matches!(
                spec,
                IndexSpec::Peer(Peer::Congee) | IndexSpec::Peer(Peer::MassTree)
            ),
            "{ctx}: only congee and masstree lack descending scans"
        );
    }
}

/// Delete: every key once, then `index` is empty (as a scan sees it, if it scans).
fn check_delete(
    index: &dyn BenchIndex,
    keys: &KeySet,
    ops: &OpStreams,
    threads: usize,
    scans: bool,
    ctx: &str,
) {
    if index.supports_workload(Workload::Delete).is_err() {
        return;
    }
    let shared: &dyn BenchIndex = index;
    let (_, removed) = run_parallel(&ops.deletes, threads, |first, chunk| {
        (first..first + chunk.len())
            .filter(|&j| shared.remove(ops.delete_keys.key(j)))
            .count() as u64
    });
    assert_eq!(removed, N as u64, "{ctx}: removes");
    assert!(!index.remove(keys.key(0)), "{ctx}: second remove");
    assert_eq!(index.get(keys.key(0)), None, "{ctx}: get after delete");
    if scans {
        assert_eq!(
            index.scan(keys.key(ops.sorted[0] as usize), 1, &mut |_, _| {}),
            0,
            "{ctx}: empty"
        );
    }
}

/// Runs every YCSB stream (one thread) on `spec` over `kind`, replaying it on a model
/// `BTreeMap`: every read and scan answers what the model does, and the index ends holding
/// exactly the model's pairs (the loaded keys, and the inserted ones after D and E).
fn check_ycsb(spec: IndexSpec, kind: KeySetKind) {
    let keys = kind.generate(N, 7);
    let width = keys.width();
    let probe = spec.build(&keys, Budget::default()).expect("builds");
    if probe.supports(kind).is_err() {
        return;
    }
    for &y in Ycsb::ALL {
        let ctx = format!("{spec} on {kind}, {y}");
        if let Err(reason) = probe.supports_workload(Workload::Ycsb(y)) {
            assert!(
                (probe.loads_in_bulk() && !y.read_only())
                    || (refuses_scans(spec, kind) && y.scans()),
                "{ctx} skipped: {reason}"
            );
            continue;
        }
        let stream = YcsbStream::generate(y, &keys, 1, 7);
        let plan = &stream.plan;
        let prefix: Vec<u32> = (0..plan.loaded as u32).collect();
        let mut index = spec.build(&keys, Budget::default()).expect("builds");
        if index.loads_in_bulk() {
            index.bulk_load(&keys.gather(&prefix)).expect("bulk load");
        } else {
            for &i in &prefix {
                index.insert(keys.key(i as usize), u64::from(i));
            }
        }
        let mut model: BTreeMap<Vec<u8>, u64> = prefix
            .iter()
            .map(|&i| (keys.key(i as usize).to_bytes(), u64::from(i)))
            .collect();
        for (j, (&op, &pos)) in plan.ops.iter().zip(&plan.positions).enumerate() {
            let key = stream.keys.key(j);
            let bytes = key.to_bytes();
            assert_eq!(
                bytes,
                keys.key(pos as usize).to_bytes(),
                "{ctx}: op {j} key"
            );
            match op {
                YcsbOp::Read => {
                    let got = index.get(key);
                    assert_eq!(got, model.get(&bytes).copied(), "{ctx}: read {j}");
                    assert_eq!(got.map(|v| v & TID_MASK), Some(u64::from(pos)), "{ctx}");
                }
                YcsbOp::Update => {
                    assert!(model.contains_key(&bytes), "{ctx}: update of an absent key");
                    let value = u64::from(pos) | ((j as u64 + 1) << 32);
                    index.insert(key, value);
                    model.insert(bytes, value);
                }
                YcsbOp::Insert => {
                    assert!(!model.contains_key(&bytes), "{ctx}: insert of a loaded key");
                    index.insert(key, u64::from(pos));
                    model.insert(bytes, u64::from(pos));
                }
                YcsbOp::Scan(len) => {
                    assert!(model.contains_key(&bytes), "{ctx}: scan from an absent key");
                    let mut seen = Vec::new();
                    let got =
                        index.scan(key, len as usize, &mut |k, v| seen.push((k.to_bytes(), v)));
                    let expected: Vec<(Vec<u8>, u64)> = model
                        .range::<Vec<u8>, _>((Bound::Included(&bytes), Bound::Unbounded))
                        .take(len as usize)
                        .map(|(k, &v)| (k.clone(), v))
                        .collect();
                    assert_eq!(got, expected.len(), "{ctx}: scan {j} length");
                    assert_eq!(seen, expected, "{ctx}: scan {j}");
                }
                YcsbOp::ReadModifyWrite => {
                    let value = index.get(key);
                    assert_eq!(value, model.get(&bytes).copied(), "{ctx}: rmw {j}");
                    let value = value.expect("present") + VERSION_STEP;
                    index.insert(key, value);
                    model.insert(bytes, value);
                }
            }
        }
        // The index holds exactly the model's pairs: the loaded keys and the inserted ones (as
        // a full scan sees them, or lookups of every key of the set where it does not scan).
        let mut all = Vec::new();
        if refuses_scans(spec, kind) {
            all.extend((0..keys.len()).filter_map(|i| {
                let key = keys.key(i);
                index.get(key).map(|v| (key.to_bytes(), v))
            }));
            all.sort();
        } else {
            let smallest = model.keys().next().expect("not empty").clone();
            index.scan(
                Key::from_bytes(width, &smallest),
                usize::MAX,
                &mut |k, v| all.push((k.to_bytes(), v)),
            );
        }
        let expected: Vec<(Vec<u8>, u64)> = model.into_iter().collect();
        assert_eq!(all.len(), expected.len(), "{ctx}: keys after the run");
        assert_same_pairs(
            &borrowed(&all),
            &borrowed(&expected),
            &format!("{ctx}: pairs after the run"),
        );
        assert_eq!(all.len(), plan.loaded + plan.inserted.len(), "{ctx}");
        assert_eq!(!plan.inserted.is_empty(), y.inserts(), "{ctx}");
        for p in plan.inserted.clone() {
            assert_eq!(
                index.get(keys.key(p)),
                Some(p as u64),
                "{ctx}: inserted {p}"
            );
        }
    }
}

/// `pairs` with borrowed keys, to compare with `assert_same_pairs`.
fn borrowed(pairs: &[(Vec<u8>, u64)]) -> Vec<(&[u8], u64)> {
    pairs.iter().map(|(k, t)| (k.as_slice(), *t)).collect()
}

#[test]
fn ycsb_streams_match_a_model_on_every_index() {
    let _limit = time_limit();
    for spec in IndexSpec::all() {
        for &kind in KeySetKind::BASELINE {
            check_ycsb(spec, kind);
        }
    }
}

#[test]
fn every_index_every_key_set_one_thread() {
    let _limit = time_limit();
    for spec in IndexSpec::all() {
        for &kind in KeySetKind::BASELINE {
            check_index(spec, kind, 1);
        }
    }
}

#[test]
fn every_concurrent_index_two_threads() {
    let _limit = time_limit();
    for spec in IndexSpec::all() {
        for &kind in KeySetKind::BASELINE {
            check_index(spec, kind, 2);
        }
    }
}

#[test]
fn names_are_unique_and_parse_back() {
    let _limit = time_limit();
    let specs = IndexSpec::all();
    let names: HashSet<&str> = specs.iter().map(|s| s.name()).collect();
    assert_eq!(names.len(), specs.len());
    for spec in specs {
        assert_eq!(spec.name().parse::<IndexSpec>(), Ok(spec));
        let built = spec
            .build(&KeySetKind::Rand64.generate(0, 0), Budget::default())
            .unwrap();
        assert_eq!(built.name(), spec.name());
    }
    assert!("nope".parse::<IndexSpec>().is_err());
}

#[test]
fn the_runner_measures_every_workload_and_reports() {
    let _limit = time_limit();
    let cfg = RunConfig {
        indexes: IndexSpec::all(),
        keysets: KeySetKind::BASELINE.to_vec(),
        n: N,
        workloads: Workload::ALL.to_vec(),
        threads: vec![1, 2],
        repeat: 2,
        seed: 5,
        scan_len: SCAN,
        // Tight enough that the elastic kind compacts on this small key set.
        budget: Budget::PerKey(12.0),
        tuning: SeqTreeTuning::default(),
        cluster: None,
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
                assert!(
                    m.mops.iter().all(|&x| x > 0.0 && x.is_finite()),
                    "{ctx}: Mops/s {:?}",
                    m.mops
                );
                // Every workload samples latency, except a bulk load (one operation) of the
                // read-only indexes.
                let read_only = ["sorted", "static"].contains(&m.index.as_str());
                let bulk = read_only && m.workload == Workload::Load;
                assert_eq!(m.latency_ns.is_empty(), bulk, "{ctx}: latency samples");
                // Other tests of this binary allocate concurrently, so only the presence of
                // the figure is checked here; tests/memory.rs checks its accuracy.
                assert!(m.bytes_per_key_alloc.is_some(), "{ctx}: allocator figure");
            }
            Status::Skipped(reason) => {
                let read_only_misfit = match m.workload {
                    Workload::Delete | Workload::Mixed => true,
                    Workload::Load => m.threads > 1,
                    Workload::Ycsb(y) => !y.read_only(),
                    _ => false,
                };
                let scans = match m.workload {
                    Workload::Scan | Workload::ScanDesc | Workload::Mixed => true,
                    Workload::Ycsb(y) => y.scans(),
                    _ => false,
                };
                let expected = (m.index == "congee"
                    && (m.keys.width() != KeyWidth::Fixed8 || m.workload == Workload::ScanDesc))
                    || (m.index == "masstree"
                        && ((m.keys.width() == KeyWidth::Variable && scans)
                            || (m.keys.width() != KeyWidth::Fixed8
                                && m.workload == Workload::ScanDesc)))
                    || (["btreemap", "blart"].contains(&m.index.as_str()) && m.threads > 1)
                    || (["sorted", "static"].contains(&m.index.as_str()) && read_only_misfit)
                    || (m.index == "sbtree" && m.keys.width() == KeyWidth::Variable);
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
