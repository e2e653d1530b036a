//! Model tests: long random operation sequences against `BTreeMap`, for every index kind,
//! unique and non-unique, over fixed 8- and 16-byte keys and variable-length keys, with tiny
//! nodes (constant splits and merges) and with the default node sizes.

mod common;

use common::{run_model, tiny, Keys};
use elastree::{IndexBuilder, IndexKind};

const KEY_SETS: &[Keys] = &[
    Keys::Small64 { space: 600 },
    Keys::Sequential64,
    Keys::Small128 { space: 600 },
    Keys::Var { max: 40 },
];

fn for_every_kind(f: impl Fn(IndexKind)) {
    for &kind in IndexKind::ALL {
        f(kind);
    }
}

#[test]
fn unique_tiny_nodes() {
    for_every_kind(|kind| {
        for (i, &keys) in KEY_SETS.iter().enumerate() {
            let index = tiny(kind, true, keys, 40).build().unwrap();
            run_model(&*index, keys, 40_000, 100 + i as u64, 97);
        }
    });
}

#[test]
fn non_unique_tiny_nodes() {
    for_every_kind(|kind| {
        for (i, &keys) in KEY_SETS.iter().enumerate() {
            let index = tiny(kind, false, keys, 40).build().unwrap();
            run_model(&*index, keys, 40_000, 200 + i as u64, 97);
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
                let index = IndexBuilder::new(kind)
                    .unique(unique)
                    .key_len(keys.key_len())
                    .build()
                    .unwrap();
                run_model(&*index, keys, 60_000, 300 + i as u64, 5_000);
            }
        }
    });
}

#[test]
fn keys_up_to_the_limit() {
    for_every_kind(|kind| {
        // Keys at the 1 KiB default limit in small nodes: the heap, not the slot count,
        // decides when a node is full.
        let index = IndexBuilder::new(kind)
            .leaf_capacity(8)
            .inner_capacity(8)
            .build()
            .unwrap();
        run_model(&*index, Keys::Var { max: 1024 }, 20_000, 400, 499);
    });
}
