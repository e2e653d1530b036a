//! Key generators: deterministic, distinct, shaped as documented.

use std::collections::{HashMap, HashSet};

use elastree_bench::keys::{
    Key, KeyData, KeySet, KeySetKind, KeyWidth, OBJLOG_DAY_US, PREFIX28_GROUP, TSENSOR_SENSORS,
};
use elastree_bench::peers::{Budget, IndexSpec, Peer};
use elastree_testkit::time_limit;

/// Every key set, plus a `tsensor` with a non-default delayed fraction.
fn every_kind() -> Vec<KeySetKind> {
    let mut kinds = KeySetKind::ALL.to_vec();
    kinds.push(KeySetKind::tsensor(0.2).unwrap());
    kinds
}

fn bytes_of(keys: &KeySet) -> Vec<Vec<u8>> {
    (0..keys.len()).map(|i| keys.key(i).to_bytes()).collect()
}

fn u64s(keys: &KeySet) -> &[u64] {
    match &*keys.data {
        KeyData::U64(values) => values,
        _ => panic!("{} holds u64 keys", keys.kind),
    }
}

#[test]
fn every_key_set_is_deterministic_and_seed_dependent() {
    let _limit = time_limit();
    for kind in every_kind() {
        let a = kind.generate(5_000, 7);
        let b = kind.generate(5_000, 7);
        let c = kind.generate(5_000, 8);
        assert_eq!(a, b, "{kind}: same seed, same keys");
        assert_ne!(a, c, "{kind}: another seed, other keys");
        assert_eq!(a.len(), 5_000);
    }
}

#[test]
fn every_key_set_is_distinct() {
    let _limit = time_limit();
    for kind in every_kind() {
        let keys = kind.generate(20_000, 1);
        let distinct: HashSet<Vec<u8>> = bytes_of(&keys).into_iter().collect();
        assert_eq!(distinct.len(), keys.len(), "{kind}");
    }
}

#[test]
fn tiny_sets_work() {
    let _limit = time_limit();
    for kind in every_kind() {
        for n in [0, 1, 2, 999, 1_001] {
            let keys = kind.generate(n, 4);
            assert_eq!(keys.len(), n, "{kind}");
            assert_eq!(keys.sorted_order().len(), n, "{kind}");
        }
    }
}

#[test]
fn key_lengths_are_as_documented() {
    let _limit = time_limit();
    let expected = [
        ("rand64", Some(8), KeyWidth::Fixed8),
        ("mono64", Some(8), KeyWidth::Fixed8),
        ("rand128", Some(16), KeyWidth::Fixed16),
        ("email", None, KeyWidth::Variable),
        ("docterm", None, KeyWidth::Variable),
        ("prefix28", Some(28), KeyWidth::Variable),
        ("sha1", Some(20), KeyWidth::Variable),
        ("tsensor", Some(8), KeyWidth::Fixed8),
        ("objlog", Some(16), KeyWidth::Fixed16),
    ];
    for (name, len, width) in expected {
        let kind: KeySetKind = name.parse().unwrap();
        assert_eq!(kind.key_len(), len, "{kind}");
        assert_eq!(kind.width(), width, "{kind}");
        let keys = kind.generate(10_000, 2);
        assert_eq!(keys.width(), width);
        if let Some(len) = len {
            assert!(
                (0..keys.len()).all(|i| keys.key(i).to_bytes().len() == len),
                "{kind}: every key is {len} bytes"
            );
            assert_eq!(keys.avg_key_len(), len as f64, "{kind}");
        }
        // Byte-keyed indexes get byte strings, 8-byte sets integers.
        match (width, keys.key(0)) {
            (KeyWidth::Fixed8, Key::U64(_)) => {}
            (KeyWidth::Fixed16 | KeyWidth::Variable, Key::Bytes(_)) => {}
            (w, k) => panic!("{kind}: {w:?} keys handed out as {k:?}"),
        }
    }
}

#[test]
fn rand64_is_spread_and_unordered() {
    let _limit = time_limit();
    let keys = KeySetKind::Rand64.generate(100_000, 3);
    let values = u64s(&keys);
    assert_eq!(keys.width(), KeyWidth::Fixed8);
    assert!(!values.contains(&u64::MAX));
    // Roughly uniform: each quarter of the range holds about a quarter of the keys.
    let mut quarters = [0usize; 4];
    for &v in values {
        quarters[(v >> 62) as usize] += 1;
    }
    for q in quarters {
        assert!((22_000..28_000).contains(&q), "{quarters:?}");
    }
    // Not sorted: about half the neighbours are descending.
    let descents = values.windows(2).filter(|w| w[0] > w[1]).count();
    assert!((45_000..55_000).contains(&descents), "{descents}");
}

#[test]
fn mono64_is_strictly_increasing() {
    let _limit = time_limit();
    let keys = KeySetKind::Mono64.generate(100_000, 3);
    let values = u64s(&keys);
    assert!(values.windows(2).all(|w| w[0] < w[1]));
    assert!(values.windows(2).all(|w| w[1] - w[0] <= 8));
}

/// Every byte position of uniformly random keys averages about 127.5, and the keys come in
/// random order.
fn assert_uniform_bytes(kind: KeySetKind) {
    let keys = bytes_of(&kind.generate(40_000, 6));
    let len = keys[0].len();
    for pos in 0..len {
        let mean = keys.iter().map(|k| f64::from(k[pos])).sum::<f64>() / keys.len() as f64;
        assert!(
            (124.5..130.5).contains(&mean),
            "{kind}: byte {pos} mean {mean}"
        );
    }
    let descents = keys.windows(2).filter(|w| w[0] > w[1]).count();
    assert!((18_000..22_000).contains(&descents), "{kind}: {descents}");
}

#[test]
fn rand128_and_sha1_are_uniform_bytes() {
    let _limit = time_limit();
    assert_uniform_bytes(KeySetKind::Rand128);
    assert_uniform_bytes(KeySetKind::Sha1);
}

#[test]
fn email_looks_like_email_with_the_documented_length() {
    let _limit = time_limit();
    let keys = KeySetKind::Email.generate(100_000, 5);
    assert_eq!(keys.width(), KeyWidth::Variable);
    let avg = keys.avg_key_len();
    assert!((25.0..=35.0).contains(&avg), "average e-mail length {avg}");
    let mut lengths = HashSet::new();
    let mut gmail = 0;
    for i in 0..keys.len() {
        let Key::Bytes(bytes) = keys.key(i) else {
            panic!("email keys are bytes");
        };
        let text = std::str::from_utf8(bytes).expect("ASCII");
        let (local, domain) = text.split_once('@').expect("one @");
        assert!(!local.is_empty() && domain.contains('.'), "{text}");
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"@._-".contains(&b)),
            "{text}"
        );
        lengths.insert(bytes.len());
        if domain == "gmail.com" {
            gmail += 1;
        }
    }
    assert!(lengths.len() >= 15, "variable lengths: {lengths:?}");
    // Skewed domains: the most popular one has far more than a uniform share.
    assert!(gmail > keys.len() / 5, "gmail share {gmail}");
}

#[test]
fn docterm_is_path_slash_term_with_the_documented_length() {
    let _limit = time_limit();
    let keys = KeySetKind::DocTerm.generate(100_000, 5);
    let avg = keys.avg_key_len();
    assert!((28.0..=36.0).contains(&avg), "average docterm length {avg}");
    let mut lengths = HashSet::new();
    let mut paths: HashMap<String, usize> = HashMap::new();
    for i in 0..keys.len() {
        let bytes = keys.key(i).to_bytes();
        let text = String::from_utf8(bytes.clone()).expect("ASCII");
        let (path, term) = text.split_once('/').expect("<path>/<term>");
        assert!(
            !path.is_empty() && !term.is_empty() && !term.contains('/'),
            "{text}"
        );
        assert!(
            text.bytes().all(|b| b.is_ascii_graphic()),
            "printable: {text}"
        );
        lengths.insert(bytes.len());
        *paths.entry(path.to_string()).or_default() += 1;
    }
    assert!(lengths.len() >= 20, "variable lengths: {lengths:?}");
    // Skewed paths: the most common one has several times a uniform share.
    assert!(paths.len() >= 20, "{} paths", paths.len());
    let top = paths.values().copied().max().unwrap();
    assert!(
        top > 3 * keys.len() / paths.len(),
        "top path has {top} of {} keys over {} paths",
        keys.len(),
        paths.len()
    );
}

#[test]
fn prefix28_shares_each_prefix_among_1000_consecutive_keys() {
    let _limit = time_limit();
    let n = 10 * PREFIX28_GROUP + 500;
    let keys = bytes_of(&KeySetKind::Prefix28.generate(n, 9));
    let mut prefixes = HashSet::new();
    for (group, chunk) in keys.chunks(PREFIX28_GROUP).enumerate() {
        let prefix = &chunk[0][..8];
        assert!(
            chunk.iter().all(|k| &k[..8] == prefix),
            "group {group} shares one prefix"
        );
        assert!(
            prefixes.insert(prefix.to_vec()),
            "group {group}'s prefix is new"
        );
        // Suffixes are random within the group: unordered, not all sharing a first byte.
        let first_bytes: HashSet<u8> = chunk.iter().map(|k| k[8]).collect();
        assert!(
            first_bytes.len() > 100.min(chunk.len() / 2),
            "group {group}"
        );
    }
    assert_eq!(prefixes.len(), 11);
    // In key order each prefix is one run.
    let mut sorted = keys.clone();
    sorted.sort();
    let runs = 1 + sorted.windows(2).filter(|w| w[0][..8] != w[1][..8]).count();
    assert_eq!(runs, 11);
}

/// The fraction of keys smaller than the largest key loaded before them.
fn out_of_order_fraction(values: &[u64]) -> f64 {
    let mut max = 0;
    let mut late = 0;
    for (i, &v) in values.iter().enumerate() {
        if i > 0 && v < max {
            late += 1;
        }
        max = max.max(v);
    }
    late as f64 / values.len() as f64
}

#[test]
fn tsensor_has_the_configured_delayed_fraction() {
    let _limit = time_limit();
    for (spec, fraction) in [
        ("tsensor", 0.05),
        ("tsensor:0", 0.0),
        ("tsensor:0.2", 0.2),
        ("tsensor:50%", 0.5),
    ] {
        let kind: KeySetKind = spec.parse().unwrap();
        assert_eq!(kind.delayed_fraction(), fraction, "{spec}");
        let keys = kind.generate(100_000, 12);
        let values = u64s(&keys);
        let measured = out_of_order_fraction(values);
        assert!(
            (measured - fraction).abs() < 0.01,
            "{spec}: {measured} of the keys arrive late, configured {fraction}"
        );
        // Keys: a 6-byte millisecond timestamp in 2024-2025 and a sensor id below 1,024.
        let sensors: HashSet<u64> = values.iter().map(|v| v & 0xffff).collect();
        assert!(sensors.iter().all(|&s| s < TSENSOR_SENSORS), "{spec}");
        assert!(sensors.len() > 1_000, "{spec}: {} sensors", sensors.len());
        for &v in values {
            let ms = v >> 16;
            assert!(
                (1_704_067_200_000..1_767_225_600_000).contains(&ms),
                "{spec}: timestamp {ms}"
            );
        }
        // Mostly increasing: the in-order keys form a sorted run of about (1 - f) * n keys.
        let sorted_after = values.windows(2).filter(|w| w[0] < w[1]).count();
        assert!(sorted_after as f64 > (1.0 - 2.0 * fraction - 0.01) * values.len() as f64);
    }
}

#[test]
fn objlog_days_vary_like_cloud_logs() {
    let _limit = time_limit();
    let keys = bytes_of(&KeySetKind::ObjLog.generate(200_000, 13));
    // Loaded in time order: timestamps strictly increase.
    let stamps: Vec<u64> = keys
        .iter()
        .map(|k| u64::from_be_bytes(k[..8].try_into().unwrap()))
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] < w[1]));
    let mut per_day: HashMap<u64, usize> = HashMap::new();
    for &t in &stamps {
        *per_day.entry(t / OBJLOG_DAY_US).or_default() += 1;
    }
    let first = *per_day.keys().min().unwrap();
    let last = *per_day.keys().max().unwrap();
    let days = (last - first + 1) as usize;
    assert_eq!(per_day.len(), days, "no empty day");
    assert_eq!(days, 200);
    let mean = keys.len() as f64 / days as f64;
    let ratios: Vec<f64> = per_day.values().map(|&v| v as f64 / mean).collect();
    let ordinary = ratios.iter().filter(|r| (0.7..=1.3).contains(*r)).count();
    let bursts = ratios.iter().filter(|r| (2.0..=3.5).contains(*r)).count();
    assert!(
        ordinary >= days * 85 / 100,
        "{ordinary} of {days} days near the mean"
    );
    assert!(
        (days / 50..=days / 8).contains(&bursts),
        "{bursts} burst days"
    );
    assert_eq!(
        ordinary + bursts,
        days,
        "every day is ordinary or a burst: {ratios:?}"
    );
    // Objects: Zipf-popular, so some object ids repeat often.
    let mut objects: HashMap<&[u8], usize> = HashMap::new();
    for k in &keys {
        *objects.entry(&k[8..]).or_default() += 1;
    }
    let hottest = objects.values().copied().max().unwrap();
    assert!(hottest > keys.len() / 100, "hottest object {hottest}");
}

#[test]
fn names_parse_back() {
    let _limit = time_limit();
    for kind in every_kind() {
        assert_eq!(kind.name().parse::<KeySetKind>(), Ok(kind), "{kind}");
        assert_eq!(kind.to_string(), kind.name());
    }
    let t = KeySetKind::tsensor(0.2).unwrap();
    assert_eq!(t.name(), "tsensor:0.2");
    assert_eq!(t.base_name(), "tsensor");
    assert_eq!("tsensor:20%".parse::<KeySetKind>(), Ok(t));
    assert_eq!(
        "tsensor:0.05".parse::<KeySetKind>().unwrap().name(),
        "tsensor",
        "the default fraction spells as plain tsensor"
    );
    for bad in [
        "tsensor:1",
        "tsensor:-0.1",
        "tsensor:x",
        "rand64:2",
        "nope",
        "",
    ] {
        assert!(bad.parse::<KeySetKind>().is_err(), "{bad:?}");
    }
    let names: HashSet<&str> = KeySetKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), KeySetKind::ALL.len());
    assert!(KeySetKind::BASELINE
        .iter()
        .all(|k| KeySetKind::ALL.contains(k)));
}

#[test]
fn sorted_order_matches_byte_order() {
    let _limit = time_limit();
    for kind in every_kind() {
        let keys = kind.generate(3_000, 11);
        let order = keys.sorted_order();
        let bytes: Vec<Vec<u8>> = order
            .iter()
            .map(|&i| keys.key(i as usize).to_bytes())
            .collect();
        assert!(bytes.windows(2).all(|w| w[0] < w[1]), "{kind}");
        // gather keeps the representation and the keys.
        let gathered = keys.gather(&order);
        assert_eq!(bytes_of(&gathered), bytes, "{kind}");
    }
}

#[test]
fn every_index_takes_every_key_width_but_congee_only_8_bytes_and_sbtree_8_or_16() {
    let _limit = time_limit();
    for kind in every_kind() {
        for spec in IndexSpec::all() {
            let index = spec
                .build(&kind.generate(0, 0), Budget::default())
                .expect("builds");
            match (spec, index.supports(kind)) {
                (IndexSpec::Peer(Peer::Congee), Ok(())) => {
                    assert_eq!(kind.key_len(), Some(8), "congee on {kind}")
                }
                (IndexSpec::Peer(Peer::Congee), Err(reason)) => {
                    assert_ne!(kind.key_len(), Some(8), "congee on {kind}");
                    assert!(reason.contains(kind.name()), "{reason}");
                }
                (IndexSpec::Elastree(elastree::IndexKind::SbTree), result) => {
                    let integer = matches!(kind.key_len(), Some(8 | 16));
                    assert_eq!(result.is_ok(), integer, "sbtree on {kind}: {result:?}");
                }
                (_, result) => assert_eq!(result, Ok(()), "{spec} on {kind}"),
            }
        }
    }
}

/// The smoke tests run every index on [`KeySetKind::BASELINE`]; this runs every index on the other
/// key sets, at a tiny size: every key is found with its tid, scans return the next keys in
/// byte order, removals empty the index.
#[test]
fn every_index_works_on_the_new_key_sets() {
    let _limit = time_limit();
    const N: usize = 1_500;
    const SCAN: usize = 12;
    for kind in every_kind() {
        if KeySetKind::BASELINE.contains(&kind) {
            continue;
        }
        let keys = kind.generate(N, 21);
        let order = keys.sorted_order();
        let sorted: Vec<Vec<u8>> = order
            .iter()
            .map(|&i| keys.key(i as usize).to_bytes())
            .collect();
        for spec in IndexSpec::all() {
            let mut index = spec.build(&keys, Budget::default()).expect("builds");
            if index.supports(kind).is_err() {
                continue;
            }
            let ctx = format!("{spec} on {kind}");
            if index.loads_in_bulk() {
                index.bulk_load(&keys).expect("bulk load");
            } else {
                for i in 0..N {
                    index.insert(keys.key(i), i as u64);
                }
            }
            for i in 0..N {
                assert_eq!(index.get(keys.key(i)), Some(i as u64), "{ctx}: key {i}");
            }
            let absent = match keys.key(0) {
                Key::U64(_) => Key::U64(u64::MAX),
                Key::Bytes(_) => Key::Bytes(&[0xff; 40]),
            };
            assert_eq!(index.get(absent), None, "{ctx}: absent key");
            if index
                .supports_workload(elastree_bench::workload::Workload::Scan)
                .is_err()
            {
                // masstree refuses scans on variable-length keys; nothing else does.
                assert_eq!(spec, IndexSpec::Peer(Peer::MassTree), "{ctx}: no scans");
                assert_eq!(kind.width(), KeyWidth::Variable, "{ctx}: no scans");
            } else {
                for rank in (0..N).step_by(97) {
                    let mut seen = Vec::new();
                    let start = keys.key(order[rank] as usize);
                    let got = index.scan(start, SCAN, &mut |k, tid| seen.push((k.to_bytes(), tid)));
                    let want = SCAN.min(N - rank);
                    assert_eq!(got, want, "{ctx}: scan from rank {rank}");
                    for (j, (k, tid)) in seen.iter().enumerate() {
                        assert_eq!(k, &sorted[rank + j], "{ctx}: scan from rank {rank}");
                        assert_eq!(*tid, u64::from(order[rank + j]), "{ctx}");
                    }
                }
            }
            if index
                .supports_workload(elastree_bench::workload::Workload::Delete)
                .is_ok()
            {
                for i in 0..N {
                    assert!(index.remove(keys.key(i)), "{ctx}: remove {i}");
                }
                assert!(!index.remove(keys.key(0)), "{ctx}: removed twice");
                assert_eq!(index.get(keys.key(0)), None, "{ctx}");
            }
        }
    }
}
