//! Model tests: long random operation sequences against `BTreeMap`, for every index kind,
//! unique and non-unique, over fixed 8- and 16-byte keys and variable-length keys, with tiny
//! nodes (constant splits and merges) and with the default node sizes; the B+-tree also in
//! optimized pages.

use elastree::bwtree::BwTreeStats;
use elastree::elastic::ElasticStats;
use elastree::sbtree::SbTreeStats;
use elastree::{IndexBuilder, IndexKind};
use elastree_testkit::model::{
    as_is, base_pages, builder, bwtree_base_pages, bwtree_pages, prefix_pages, prefix_split_pages,
    run_model_merging, tiny, Built, Keys, Registry, Shape,
};
use elastree_testkit::time_limit;

const KEY_SETS: &[Keys] = &[
    Keys::Small64 { space: 600 },
    Keys::Sequential64,
    Keys::Small128 { space: 600 },
    Keys::Var { max: 40 },
    Keys::Prefixed { max: 40 },
];

/// The elastic budget of tests with default node sizes: below what their keys need in a
/// plain B+-tree, so leaves are compacted and expanded.
const DEFAULT_NODES_BUDGET: usize = 256 * 1024;

/// Merges a tiny-node run forces on a hybrid index (background merges come on top).
const FORCED_MERGES: u64 = 5;

/// Runs the model test on `kind` built by `builder` and, with tiny nodes, checks that the
/// run went through the kind's conversions: the elastic tree compacted leaves and expanded
/// them back; the Bw-tree merged pages; the hybrid index merged, both the merges the run
/// forced and at least one its trigger started (counts the schedule cannot change; background
/// merges race the operations in between).
fn model_case(kind: IndexKind, builder: IndexBuilder, registry: &Registry, run: Run) {
    let built = Built::new(&builder);
    let forced = run_model_merging(
        &built,
        registry,
        run.keys,
        run.ops,
        run.seed,
        run.check_every,
        if run.tiny { FORCED_MERGES } else { 0 },
    );
    if !run.tiny {
        return;
    }
    let index = built.index();
    if let Some(stats) = index.stats_as::<SbTreeStats>() {
        // Tiny blocks: segments sealed and converted, keys below the frontier written into
        // data blocks, and (mostly increasing keys) late keys in the frontier.
        let late = matches!(run.keys, Keys::Sequential64);
        assert!(
            stats.seals > 0 && stats.delayed_inserts > 0 && (!late || stats.late_inserts > 0),
            "{kind} ({:?}, seed {}): {stats:?}",
            run.keys,
            run.seed
        );
    }
    if let Some(stats) = index.stats_as::<ElasticStats>() {
        assert!(
            stats.compactions > 0 && stats.expansions > 0,
            "the elastic tree did not convert both ways ({:?}, seed {}): {stats:?}",
            run.keys,
            run.seed
        );
    }
    if let Some(stats) = index.stats_as::<BwTreeStats>() {
        // Tiny pages and chains of 2: the run's removes empty leaves, which merge into their
        // left siblings (and pages split again as keys come back). Inner pages merge only
        // where the left sibling has room, which tiny pages of long keys seldom have: the
        // unit tests, the stress test and the loom model assert those.
        assert!(
            stats.merges > 0 && stats.splits > stats.merges,
            "the Bw-tree did not merge ({:?}, seed {}): {stats:?}",
            run.keys,
            run.seed
        );
    }
    if let Some(hybrid) = built.hybrid() {
        hybrid.wait_for_merge().unwrap();
        let merges = hybrid.stats().merges;
        // More merges than forced: the trigger fired too (a write that finds the stage due
        // starts a merge or finds one running, and a forced merge never is).
        assert!(
            forced >= 1 && merges > forced,
            "{kind} ({:?}, seed {}): {merges} merges, {forced} forced",
            run.keys,
            run.seed
        );
    }
}

/// One model run: keys, operations, seed, structure check period, tiny nodes or not.
#[derive(Clone, Copy)]
struct Run {
    keys: Keys,
    ops: u64,
    seed: u64,
    check_every: u64,
    tiny: bool,
}

/// The model test with tiny nodes on every key set for one kind.
fn tiny_nodes(kind: IndexKind, shape: Shape, unique: bool, seed: u64) {
    for (i, &keys) in KEY_SETS.iter().enumerate() {
        let registry = Registry::new();
        let builder = shape(tiny(kind, &registry, unique, keys, 40), true);
        let run = Run {
            keys,
            ops: 40_000,
            seed: seed + i as u64,
            check_every: 97,
            tiny: true,
        };
        model_case(kind, builder, &registry, run);
    }
}

/// The model test with the default node sizes over larger key spaces for one kind.
fn default_nodes(kind: IndexKind, shape: Shape) {
    for (i, keys) in [Keys::Small64 { space: 50_000 }, Keys::Var { max: 1024 }]
        .into_iter()
        .enumerate()
    {
        for unique in [true, false] {
            let registry = Registry::new();
            let builder = builder(kind, &registry, DEFAULT_NODES_BUDGET)
                .unique(unique)
                .key_len(keys.key_len());
            let builder = shape(builder, false);
            let run = Run {
                keys,
                ops: 60_000,
                seed: 300 + i as u64,
                check_every: 5_000,
                tiny: false,
            };
            model_case(kind, builder, &registry, run);
        }
    }
}

/// Keys at the 1 KiB default limit in small nodes: the heap, not the slot count, decides
/// when a node is full.
fn keys_up_to_the_limit(kind: IndexKind, shape: Shape) {
    let registry = Registry::new();
    let builder = builder(kind, &registry, DEFAULT_NODES_BUDGET)
        .leaf_capacity(8)
        .inner_capacity(8);
    let builder = shape(builder, false);
    let run = Run {
        keys: Keys::Var { max: 1024 },
        ops: 20_000,
        seed: 400,
        check_every: 499,
        tiny: false,
    };
    model_case(kind, builder, &registry, run);
}

/// One test per kind, so that the harness spreads them over the cores and a failure names
/// the kind. (The read-only `static` kind has its own model test in `tests/static_stage.rs`.)
macro_rules! model_tests {
    ($($name:ident: $kind:expr, $shape:expr;)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn unique_tiny_nodes() {
                let _limit = time_limit();
                tiny_nodes($kind, $shape, true, 100);
            }

            #[test]
            fn non_unique_tiny_nodes() {
                let _limit = time_limit();
                tiny_nodes($kind, $shape, false, 200);
            }

            #[test]
            fn default_nodes_larger_key_space() {
                let _limit = time_limit();
                default_nodes($kind, $shape);
            }

            #[test]
            fn keys_up_to_the_limit() {
                let _limit = time_limit();
                super::keys_up_to_the_limit($kind, $shape);
            }
        }
    )*};
}

model_tests! {
    btree: IndexKind::BTree, as_is;
    btree_prefix_pages: IndexKind::BTree, prefix_pages;
    btree_prefix_split_tiny_pages: IndexKind::BTree, prefix_split_pages;
    btree_base_pages: IndexKind::BTree, base_pages;
    elastic: IndexKind::Elastic, as_is;
    seqtree: IndexKind::SeqTree, as_is;
    hybrid: IndexKind::Hybrid, as_is;
    hybrid_compressed: IndexKind::HybridCompressed, as_is;
    bwtree: IndexKind::BwTree, bwtree_pages;
    bwtree_base_pages: IndexKind::BwTree, bwtree_base_pages;
}

/// The SB-tree indexes fixed-width integer keys: its model tests run the integer key sets,
/// with tiny blocks (4 entries per block and run block: seals, late runs, splits and search
/// layer rebuilds all the time) and with the default blocks.
mod sbtree {
    use super::*;

    const INTEGER_KEY_SETS: &[Keys] = &[
        Keys::Small64 { space: 600 },
        Keys::Sequential64,
        Keys::Small128 { space: 600 },
    ];

    fn tiny_blocks(unique: bool, seed: u64) {
        for (i, &keys) in INTEGER_KEY_SETS.iter().enumerate() {
            let registry = Registry::new();
            let builder = tiny(IndexKind::SbTree, &registry, unique, keys, 16);
            let run = Run {
                keys,
                ops: 40_000,
                seed: seed + i as u64,
                check_every: 97,
                tiny: true,
            };
            model_case(IndexKind::SbTree, builder, &registry, run);
        }
    }

    #[test]
    fn unique_tiny_blocks() {
        let _limit = time_limit();
        tiny_blocks(true, 100);
    }

    #[test]
    fn non_unique_tiny_blocks() {
        let _limit = time_limit();
        tiny_blocks(false, 200);
    }

    #[test]
    fn default_blocks_larger_key_space() {
        let _limit = time_limit();
        for (i, keys) in [Keys::Small64 { space: 50_000 }, Keys::Sequential64]
            .into_iter()
            .enumerate()
        {
            for unique in [true, false] {
                let registry = Registry::new();
                let builder = builder(IndexKind::SbTree, &registry, DEFAULT_NODES_BUDGET)
                    .unique(unique)
                    .key_len(keys.key_len());
                let run = Run {
                    keys,
                    ops: 60_000,
                    seed: 300 + i as u64,
                    check_every: 5_000,
                    tiny: false,
                };
                model_case(IndexKind::SbTree, builder, &registry, run);
            }
        }
    }
}

/// Every kind that takes writes has its tests above.
#[test]
fn every_writable_kind_runs_the_model_test() {
    let covered = [
        IndexKind::BTree,
        IndexKind::Elastic,
        IndexKind::SeqTree,
        IndexKind::Hybrid,
        IndexKind::HybridCompressed,
        IndexKind::SbTree,
        IndexKind::BwTree,
    ];
    for kind in IndexKind::ALL.iter().filter(|k| k.is_writable()) {
        assert!(
            covered.contains(kind),
            "{kind} takes writes but has no model tests"
        );
    }
}
