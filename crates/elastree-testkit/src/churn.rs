//! Random updates that change an index's contents (the garbage-bound measurement): a key
//! space of `2 * keys` scattered 8-byte keys, the even-numbered half inserted first, then
//! each update flips one random key of the space (removes it if present, inserts it if
//! not), so the index keeps about `keys` keys while its pages split, empty and merge and its
//! chains are replaced. Threads own interleaved keys (key `i` belongs to thread
//! `i % threads`), so each knows its keys' state without sharing it and every result is
//! checked.
//!
//! The tree the churned one is compared with is "freshly built with the same contents":
//! the final keys inserted one by one in a random order into a new index of the same
//! options. Random order is the fair reference: the churned tree's keys also arrived in
//! random order, and a sorted (bulk-like) load would leave its pages half full (a page
//! splits in the middle and never takes keys again), which is not what a tree that was
//! written at random holds.

use elastree::Index;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Key `i` of the space: a multiplicative hash, distinct and scattered.
pub fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

/// Loads the even-numbered keys of a `2 * keys` space into `index` (tid = key number) on
/// `threads` threads, then makes `updates` random flips in all; returns the key numbers
/// present at the end, sorted.
pub fn churn(index: &dyn Index, keys: u64, updates: u64, threads: u64, seed: u64) -> Vec<u64> {
    let space = 2 * keys;
    let per_thread = updates / threads;
    let finals: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    // This thread's keys: i = t + j * threads.
                    let mine = space.div_ceil(threads);
                    let mut present: Vec<bool> = (0..mine)
                        .map(|j| (t + j * threads).is_multiple_of(2) && t + j * threads < space)
                        .collect();
                    for (j, &p) in present.iter().enumerate() {
                        if p {
                            let i = t + j as u64 * threads;
                            assert_eq!(index.insert(&key(i), i).unwrap(), None, "load {i}");
                        }
                    }
                    let mut rng = StdRng::seed_from_u64(seed * 1000 + t);
                    for _ in 0..per_thread {
                        let j = rng.gen_range(0..mine);
                        let i = t + j * threads;
                        if i >= space {
                            continue;
                        }
                        let was = &mut present[j as usize];
                        if *was {
                            assert_eq!(index.remove(&key(i)).unwrap(), Some(i), "remove {i}");
                        } else {
                            assert_eq!(index.insert(&key(i), i).unwrap(), None, "insert {i}");
                        }
                        *was = !*was;
                    }
                    present
                        .iter()
                        .enumerate()
                        .filter(|&(_, &p)| p)
                        .map(|(j, _)| t + j as u64 * threads)
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = finals.into_iter().flatten().collect();
    all.sort_unstable();
    all
}

/// Inserts key numbers `contents` into `index` (tid = key number) in a random order: the
/// freshly built reference of a churned index (see the module docs).
pub fn fresh(index: &dyn Index, contents: &[u64], seed: u64) {
    let mut order = contents.to_vec();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    for i in order {
        assert_eq!(index.insert(&key(i), i).unwrap(), None, "fresh insert {i}");
    }
}
