//! A fixed, repeatable workload over the hot paths (load, lookup, 15-key scan, delete) for
//! instruction counting: `valgrind --tool=callgrind target/release/examples/hot_paths`.
//! Instruction counts, unlike timings, are repeatable on this shared machine.
//!
//! Arguments: `[keys] [kind] [BlindiTree levels] [budget bytes per key]` (default 200000
//! btree); the `elastic` kind's budget defaults to 12 bytes per key, so it compacts.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use elastree::hybrid::HybridStats;
use elastree::table::KeySource;
use elastree::{Direction, ElasticOptions, IndexBuilder, IndexKind, KeyLen, SeqTreeOptions};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let keys: Vec<[u8; 8]> = (0..n)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes())
        .collect();
    let kind: IndexKind = std::env::args()
        .nth(2)
        .map(|s| s.parse().expect("an index kind"))
        .unwrap_or(IndexKind::BTree);
    let table = || {
        let table: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        Arc::new(table) as Arc<dyn KeySource>
    };
    let tree_levels = std::env::args()
        .nth(3)
        .map(|levels| levels.parse().expect("BlindiTree levels"));
    let builder = match kind {
        IndexKind::Elastic => {
            let per_key: usize = std::env::args()
                .nth(4)
                .map_or(12, |s| s.parse().expect("budget bytes per key"));
            IndexBuilder::new(ElasticOptions {
                tree_levels,
                ..ElasticOptions::new(per_key * n as usize, table())
            })
        }
        IndexKind::SeqTree => IndexBuilder::new(SeqTreeOptions {
            tree_levels,
            ..SeqTreeOptions::new(table())
        }),
        _ => IndexBuilder::new(kind),
    };
    let index = builder.key_len(KeyLen::Fixed(8)).build().expect("build");
    let mops = |start: Instant, ops: usize| ops as f64 / start.elapsed().as_secs_f64() / 1e6;
    let start = Instant::now();
    for (tid, key) in keys.iter().enumerate() {
        index.insert(key, tid as u64).expect("insert");
    }
    // Let a hybrid index's background merge finish, as a steady state would.
    index.quiesce().expect("background work");
    let load = mops(start, keys.len());
    if let Some(stats) = index.stats_as::<HybridStats>() {
        eprintln!(
            "hybrid after the load: {} merges, static {} pairs, dynamic {} entries",
            stats.merges, stats.static_len, stats.dynamic_len
        );
    }
    // Look up in another order than the load's, so lookups do not follow the load's path.
    let probes: Vec<&[u8; 8]> = keys
        .iter()
        .rev()
        .step_by(2)
        .chain(keys.iter().step_by(2))
        .collect();
    let start = Instant::now();
    let mut hits = 0u64;
    for key in &probes {
        hits += u64::from(index.get(*key).expect("get").is_some());
    }
    let lookup = mops(start, probes.len());
    let start = Instant::now();
    let mut scanned = 0;
    for key in keys.iter().step_by(4) {
        scanned += index
            .scan(
                Bound::Included(key),
                Bound::Unbounded,
                Direction::Ascending,
                15,
                &mut |_, _| {},
            )
            .expect("scan");
    }
    let scan = mops(start, scanned);
    let start = Instant::now();
    for key in &keys {
        index.remove(key).expect("remove");
    }
    let delete = mops(start, keys.len());
    println!(
        "n {n} hits {hits} scanned {scanned} left {}: Mops/s load {load:.3} lookup {lookup:.3} scan-keys {scan:.3} delete {delete:.3}",
        index.len()
    );
}
