//! Every writable peer through a random sequence of inserts, updates, removes, lookups and scans
//! in both directions, compared with a model `BTreeMap`, on 8-byte, 16-byte and variable-length
//! keys. The variable-length keys include keys that are prefixes of others, keys with `0x00`
//! and `0xFF` bytes, and scan starts that are absent or prefixes of present keys: what an
//! adaptive radix tree (blart, congee) or a trie (masstree) must get right. Scans run in the
//! directions the peer supports (`scan`, `scan-desc`).

use std::collections::BTreeMap;
use std::ops::Bound;

use elastree_bench::keys::{Key, KeySetKind, KeyWidth};
use elastree_bench::peers::{Budget, IndexSpec, Peer};
use elastree_bench::workload::Workload;
use elastree_testkit::time_limit;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Distinct keys drawn from a key set, before the variable-length extras.
const POOL: usize = 300;
/// Operations per peer and key set.
const OPS: usize = 4_000;
/// The longest scan.
const MAX_SCAN: usize = 24;

/// Key bytes (in index order) to run the operations on: keys of `kind`, and for
/// variable-length sets also every prefix of some of them and extensions by `0x00`, `0x00 0x00`
/// and `0xFF`.
fn key_pool(kind: KeySetKind, seed: u64) -> Vec<Vec<u8>> {
    let keys = kind.generate(POOL, seed);
    let mut pool: Vec<Vec<u8>> = (0..keys.len()).map(|i| keys.key(i).to_bytes()).collect();
    if kind.width() == KeyWidth::Variable {
        for key in pool.clone().iter().take(20) {
            pool.extend((1..key.len()).map(|len| key[..len].to_vec()));
            for tail in [&[0x00][..], &[0x00, 0x00], &[0xFF], &[0x00, 0x01]] {
                pool.push([key.as_slice(), tail].concat());
            }
        }
        pool.push(vec![0x00]);
        pool.push(vec![0x00, 0x00, 0x7F]);
        pool.push(vec![0xFF; 3]);
    }
    pool.sort();
    pool.dedup();
    pool
}

/// Bytes that are a key's or between keys: a pool key, or one changed in its last byte, cut
/// short or extended (never empty; 8-byte sets keep 8 bytes, 16-byte sets 16 for writes only).
fn scan_start(rng: &mut StdRng, pool: &[Vec<u8>], width: KeyWidth) -> Vec<u8> {
    let mut start = pool[rng.gen_range(0..pool.len())].clone();
    match rng.gen_range(0..4) {
        0 => {}
        1 => {
            let last = start.len() - 1;
            start[last] = start[last].wrapping_add(1);
        }
        2 if width == KeyWidth::Variable && start.len() > 1 => {
            start.truncate(rng.gen_range(1..start.len()));
        }
        _ if width == KeyWidth::Variable => start.push(rng.gen()),
        _ => {
            let last = start.len() - 1;
            start[last] = start[last].wrapping_sub(1);
        }
    }
    start
}

fn check_peer(peer: Peer, kind: KeySetKind, seed: u64) {
    let spec = IndexSpec::Peer(peer);
    let width = kind.width();
    let index = spec
        .build(&kind.generate(0, 0), Budget::default())
        .expect("builds");
    if index.supports(kind).is_err() || index.supports_workload(Workload::Delete).is_err() {
        return;
    }
    let ascending = index.supports_workload(Workload::Scan).is_ok();
    let descending = index.supports_workload(Workload::ScanDesc).is_ok();
    let pool = key_pool(kind, seed);
    let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    for op in 0..OPS {
        let ctx = format!("{spec} on {kind} (seed {seed}), op {op}");
        let key = &pool[rng.gen_range(0..pool.len())];
        match rng.gen_range(0..100) {
            0..=34 => {
                let value = rng.gen();
                index.insert(Key::from_bytes(width, key), value);
                model.insert(key.clone(), value);
            }
            35..=49 => {
                let removed = index.remove(Key::from_bytes(width, key));
                assert_eq!(
                    removed,
                    model.remove(key).is_some(),
                    "{ctx}: remove {key:?}"
                );
            }
            50..=69 => {
                let got = index.get(Key::from_bytes(width, key));
                assert_eq!(got, model.get(key).copied(), "{ctx}: get {key:?}");
            }
            draw if ascending || descending => {
                let reverse = (draw >= 85 || !ascending) && descending;
                let start = scan_start(&mut rng, &pool, width);
                let n = rng.gen_range(0..=MAX_SCAN);
                let mut seen = Vec::new();
                let mut visit = |k: Key<'_>, v| seen.push((k.to_bytes(), v));
                let from = Key::from_bytes(width, &start);
                let (got, expected): (usize, Vec<(Vec<u8>, u64)>) = if reverse {
                    let got = index.scan_desc(from, n, &mut visit);
                    let range =
                        model.range::<[u8], _>((Bound::Unbounded, Bound::Included(&start[..])));
                    (
                        got,
                        range.rev().take(n).map(|(k, &v)| (k.clone(), v)).collect(),
                    )
                } else {
                    let got = index.scan(from, n, &mut visit);
                    let range =
                        model.range::<[u8], _>((Bound::Included(&start[..]), Bound::Unbounded));
                    (got, range.take(n).map(|(k, &v)| (k.clone(), v)).collect())
                };
                assert_eq!(
                    seen, expected,
                    "{ctx}: scan of {n} from {start:?} (descending: {reverse})"
                );
                assert_eq!(got, expected.len(), "{ctx}: scan count");
            }
            _ => {}
        }
    }
    // Every key has its value, or is absent.
    for key in &pool {
        let got = index.get(Key::from_bytes(width, key));
        assert_eq!(
            got,
            model.get(key).copied(),
            "{spec} on {kind} (seed {seed}): {key:?}"
        );
    }
    if !ascending {
        return;
    }
    // The index ends holding exactly the model's pairs.
    let mut all = Vec::new();
    if let Some(first) = model.keys().next() {
        index.scan(Key::from_bytes(width, first), usize::MAX, &mut |k, v| {
            all.push((k.to_bytes(), v))
        });
    }
    let expected: Vec<(Vec<u8>, u64)> = model.into_iter().collect();
    assert_eq!(
        all, expected,
        "{spec} on {kind} (seed {seed}): the final pairs"
    );
}

#[test]
fn every_peer_matches_a_model_map() {
    let _limit = time_limit();
    let kinds = [
        KeySetKind::Rand64,
        KeySetKind::Rand128,
        KeySetKind::ObjLog,
        KeySetKind::Email,
        KeySetKind::DocTerm,
        KeySetKind::Prefix28,
        KeySetKind::Sha1,
    ];
    for &peer in Peer::ALL {
        for kind in kinds {
            for seed in 1..=2 {
                check_peer(peer, kind, seed);
            }
        }
    }
}
