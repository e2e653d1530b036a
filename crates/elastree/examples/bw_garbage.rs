//! The Bw-tree's garbage bound at scale: `cargo run --release -p elastree --example
//! bw_garbage [updates] [keys] [threads]` (default 10,000,000 updates over 1,000,000 keys on
//! 2 threads). Loads half of a `2 * keys` space of scattered 8-byte keys, makes `updates`
//! random flips (each removes a present key or inserts an absent one:
//! `elastree_testkit::churn`), lets the epoch free the retired chains, and compares the
//! index's own `memory()` with a freshly built tree's holding the same keys (inserted in a
//! random order); `tests/memory_accounting.rs` checks `memory()` against the allocator and
//! asserts the bound at test scale. It prints both trees' `memory()` (inner pages, leaves
//! with their deltas, and the rest: the mapping table and the delta pool) and statistics.
//!
//! First measured with a merge threshold of a third (chains of 4 deltas): 1.061x. With the
//! defaults of this build (chains of 6, chain directories), 10,000,000 updates on 2 threads
//! over 1,000,000 keys leave 1,001,030 keys in 26,307,728 B against a fresh tree's
//! 23,600,064 B, 1.115x: leaves 24.9 MB against 23.0 (14,129 leaves against 10,765: the
//! deltas left on chains and the pages' own bytes), the rest 0.97 MB against 0.33 (a
//! segment more of mapping table, and the delta pool). The excess is the deltas: a lookup of
//! every key afterwards (which consolidates every chain of 2 deltas or more) leaves the
//! leaves at 21.4 MB, below the fresh tree's. Three changes brought it to 1.083x-1.085x:
//! deltas without tid words in unique trees and without a directory entry for `next`
//! (1.104x), leaves merged under two fifths of a page instead of a third (13,100 leaves
//! instead of 14,250: 1.088x-1.100x), and a delta pool keeping a 128th of the tree per shard
//! instead of a 64th.

use std::time::Instant;

use elastree::bwtree::BwTreeStats;
use elastree::{Index, IndexBuilder, IndexKind, KeyLen};
use elastree_testkit::churn::{churn, fresh};

/// Flushes the epoch until the index's bytes stop falling (retired chains freed), at most
/// 10,000 rounds.
fn settled(index: &dyn Index) -> usize {
    let mut last = index.memory().total();
    let mut quiet = 0;
    for _ in 0..10_000 {
        for _ in 0..64 {
            crossbeam_epoch::pin().flush();
        }
        let now = index.memory().total();
        quiet = if now == last { quiet + 1 } else { 0 };
        if quiet == 4 {
            break;
        }
        last = now;
    }
    last
}

fn main() {
    let mut args = std::env::args().skip(1);
    let updates: u64 = args
        .next()
        .map_or(10_000_000, |a| a.parse().expect("updates"));
    let keys: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("keys"));
    let threads: u64 = args.next().map_or(2, |a| a.parse().expect("threads"));
    let build = || {
        IndexBuilder::new(IndexKind::BwTree)
            .key_len(KeyLen::Fixed(8))
            .build()
            .expect("index")
    };
    let churned = build();
    let start = Instant::now();
    let contents = churn(&*churned, keys, updates, threads, 1);
    let seconds = start.elapsed().as_secs_f64();
    let held = settled(&*churned);
    churned.check().expect("check");
    let reference = build();
    fresh(&*reference, &contents, 2);
    let fresh_bytes = settled(&*reference);
    println!(
        "{updates} updates on {threads} threads over {keys} keys ({:.2} Mops/s): {} keys, \
         memory {held} B ({:?}, {:?}); freshly built: {fresh_bytes} B ({:?}, {:?}); \
         ratio {:.4}",
        updates as f64 / seconds / 1e6,
        contents.len(),
        churned.memory(),
        churned.stats_as::<BwTreeStats>().expect("stats"),
        reference.memory(),
        reference.stats_as::<BwTreeStats>().expect("stats"),
        held as f64 / fresh_bytes as f64,
    );
}
