//! Model tests: long random operation sequences against `BTreeMap`, for every index kind,
//! unique and non-unique, over fixed 8- and 16-byte keys and variable-length keys, with tiny
//! nodes (constant splits and merges) and with the default node sizes.

mod common;

use common::{builder, run_model, tiny, Keys, Registry};
use elastree::{Index, IndexKind};

const KEY_SETS: &[Keys] = &[
    Keys::Small64 { space: 600 },
    Keys::Sequential64,
    Keys::Small128 { space: 600 },
    Keys::Var { max: 40 },
];

/// The elastic budget of tests with default node sizes: below what their keys need in a
/// plain B+-tree, so leaves are compacted and expanded.
const DEFAULT_NODES_BUDGET: usize = 256 * 1024;

/// For the elastic kind: the run compacted leaves and expanded them back, so the model
/// checked both directions of conversion. For the hybrid kinds: the run merged many times.
fn converted_both_ways(index: &dyn Index) {
    if let Some(stats) = index.elastic_stats() {
        assert!(
            stats.compactions > 0 && stats.expansions > 0,
            "the elastic tree did not convert both ways: {stats:?}"
        );
    }
    if index.hybrid_stats().is_some() {
        index.quiesce().unwrap();
        let stats = index.hybrid_stats().unwrap();
        assert!(
            stats.merges >= common::min_merges(5),
            "the hybrid index merged too rarely: {stats:?}"
        );
    }
}

/// Every kind that takes writes (the read-only `static` kind has its own model test in
/// `tests/static_stage.rs`).
fn for_every_kind(f: impl Fn(IndexKind)) {
    for &kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        f(kind);
    }
}

#[test]
fn unique_tiny_nodes() {
    for_every_kind(|kind| {
        for (i, &keys) in KEY_SETS.iter().enumerate() {
            let registry = Registry::new();
            let index = tiny(kind, &registry, true, keys, 40).build().unwrap();
            run_model(&*index, &registry, keys, 40_000, 100 + i as u64, 97);
            converted_both_ways(&*index);
        }
    });
}

#[test]
fn non_unique_tiny_nodes() {
    for_every_kind(|kind| {
        for (i, &keys) in KEY_SETS.iter().enumerate() {
            let registry = Registry::new();
            let index = tiny(kind, &registry, false, keys, 40).build().unwrap();
            run_model(&*index, &registry, keys, 40_000, 200 + i as u64, 97);
            converted_both_ways(&*index);
        }
    });
}

#[test]
fn default_nodes_larger_key_space() {
    for_every_kind(|kind| {
        for (i, keys) in [Keys::Small64 { space: 50_000 }, Keys::Var { max: 1024 }]
            .into_iter()
            .enumerate()
        {
            for unique in [true, false] {
                let registry = Registry::new();
                let index = builder(kind, &registry, DEFAULT_NODES_BUDGET)
                    .unique(unique)
                    .key_len(keys.key_len())
                    .build()
                    .unwrap();
                run_model(&*index, &registry, keys, 60_000, 300 + i as u64, 5_000);
            }
        }
    });
}

#[test]
fn keys_up_to_the_limit() {
    for_every_kind(|kind| {
        // Keys at the 1 KiB default limit in small nodes: the heap, not the slot count,
        // decides when a node is full.
        let registry = Registry::new();
        let index = builder(kind, &registry, DEFAULT_NODES_BUDGET)
            .leaf_capacity(8)
            .inner_capacity(8)
            .build()
            .unwrap();
        run_model(
            &*index,
            &registry,
            Keys::Var { max: 1024 },
            20_000,
            400,
            499,
        );
    });
}
