//! Key generators: deterministic, distinct, shaped as documented.

use std::collections::HashSet;

use elastree_bench::keys::{Key, KeyData, KeySetKind, KeyWidth};

#[test]
fn every_key_set_is_deterministic_and_seed_dependent() {
    for &kind in KeySetKind::ALL {
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
    for &kind in KeySetKind::ALL {
        let keys = kind.generate(20_000, 1);
        let distinct: HashSet<Vec<u8>> = (0..keys.len()).map(|i| keys.key(i).to_bytes()).collect();
        assert_eq!(distinct.len(), keys.len(), "{kind}");
    }
}

#[test]
fn rand64_is_spread_and_unordered() {
    let keys = KeySetKind::Rand64.generate(100_000, 3);
    let KeyData::U64(values) = &keys.data else {
        panic!("rand64 holds u64 keys");
    };
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
    let keys = KeySetKind::Mono64.generate(100_000, 3);
    let KeyData::U64(values) = &keys.data else {
        panic!("mono64 holds u64 keys");
    };
    assert!(values.windows(2).all(|w| w[0] < w[1]));
    assert!(values.windows(2).all(|w| w[1] - w[0] <= 8));
}

#[test]
fn email_looks_like_email_with_the_documented_length() {
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
fn sorted_order_matches_byte_order() {
    for &kind in KeySetKind::ALL {
        let keys = kind.generate(3_000, 11);
        let order = keys.sorted_order();
        let bytes: Vec<Vec<u8>> = order
            .iter()
            .map(|&i| keys.key(i as usize).to_bytes())
            .collect();
        assert!(bytes.windows(2).all(|w| w[0] < w[1]), "{kind}");
    }
}
