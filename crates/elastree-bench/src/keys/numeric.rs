//! The integer and fixed-length key sets: `rand64`, `mono64`, `rand128`, `sha1`, `prefix28`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{mix64, FixedKeys};

/// `n` distinct pseudo-random keys: a bijective mix of a seeded counter, so distinct by
/// construction. `u64::MAX` is left out: some peers (congee) take an exclusive scan end bound and
/// could never return it.
pub(super) fn rand64(n: usize, seed: u64) -> Vec<u64> {
    let base = mix64(seed ^ 0x5eed_0000_0000_0001);
    let mut keys = Vec::with_capacity(n);
    let mut counter = base;
    while keys.len() < n {
        let key = mix64(counter);
        counter = counter.wrapping_add(1);
        if key != u64::MAX {
            keys.push(key);
        }
    }
    keys
}

/// `n` strictly increasing keys starting below 2^40 with random gaps of 1..=8, like timestamps
/// or sequence numbers with holes.
pub(super) fn mono64(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d6f_6e6f);
    let mut key = rng.gen_range(0..1u64 << 40);
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        keys.push(key);
        key += rng.gen_range(1..=8);
    }
    keys
}

/// Two more independent 64-bit lanes of a counter, for keys wider than 8 bytes.
pub(super) const LANE_1: u64 = 0x243f_6a88_85a3_08d3;
pub(super) const LANE_2: u64 = 0x1319_8a2e_0370_7344;

/// `n` distinct uniform random 16-byte keys: the first 8 bytes are a bijective mix of a seeded
/// counter (so the keys are distinct by construction), the last 8 an independent mix of it.
pub(super) fn rand128(n: usize, seed: u64) -> FixedKeys {
    let base = mix64(seed ^ 0x0072_616e_6431_3238);
    let mut keys = FixedKeys::with_capacity(16, n);
    let mut key = [0u8; 16];
    for i in 0..n as u64 {
        let counter = base.wrapping_add(i);
        key[..8].copy_from_slice(&mix64(counter).to_be_bytes());
        key[8..].copy_from_slice(&mix64(counter.rotate_left(23) ^ LANE_1).to_be_bytes());
        keys.push(&key);
    }
    keys
}

pub(super) const SHA1_LEN: usize = 20;

/// `n` distinct 20-byte hash values: a 160-bit mix of a seeded counter (three independent
/// splitmix lanes; the first is a bijection of the counter, so the values are distinct).
pub(super) fn sha1(n: usize, seed: u64) -> FixedKeys {
    let base = mix64(seed ^ 0x7368_6131);
    let mut keys = FixedKeys::with_capacity(SHA1_LEN, n);
    let mut key = [0u8; SHA1_LEN];
    for i in 0..n as u64 {
        let counter = base.wrapping_add(i);
        key[..8].copy_from_slice(&mix64(counter).to_be_bytes());
        key[8..16].copy_from_slice(&mix64(counter.rotate_left(17) ^ LANE_1).to_be_bytes());
        let tail = mix64(counter.rotate_left(41) ^ LANE_2).to_be_bytes();
        key[16..].copy_from_slice(&tail[..4]);
        keys.push(&key);
    }
    keys
}

pub(super) const PREFIX28_LEN: usize = 28;
/// How many consecutive `prefix28` keys share one 8-byte prefix.
pub const PREFIX28_GROUP: usize = 1_000;

/// `n` distinct 28-byte keys in groups of [`PREFIX28_GROUP`]: every key of a group starts with
/// the group's random 8-byte prefix (distinct per group), followed by a random 20-byte suffix
/// (distinct within the group). Loaded group after group, each group's keys in random order:
/// ingestion by tenant or by table with a key prefix per tenant. The last group may be short.
pub(super) fn prefix28(n: usize, seed: u64) -> FixedKeys {
    let prefix_base = mix64(seed ^ 0x7072_6566_6978);
    let suffix_base = mix64(seed ^ 0x7375_6666_6978);
    let mut keys = FixedKeys::with_capacity(PREFIX28_LEN, n);
    let mut key = [0u8; PREFIX28_LEN];
    for i in 0..n as u64 {
        let group = i / PREFIX28_GROUP as u64;
        key[..8].copy_from_slice(&mix64(prefix_base.wrapping_add(group)).to_be_bytes());
        let counter = suffix_base.wrapping_add(i);
        key[8..16].copy_from_slice(&mix64(counter).to_be_bytes());
        key[16..24].copy_from_slice(&mix64(counter.rotate_left(29) ^ LANE_1).to_be_bytes());
        let tail = mix64(counter.rotate_left(47) ^ LANE_2).to_be_bytes();
        key[24..].copy_from_slice(&tail[..4]);
        keys.push(&key);
    }
    keys
}
