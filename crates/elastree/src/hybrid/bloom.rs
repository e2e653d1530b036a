//! A concurrent blocked Bloom filter over byte-string keys.
//!
//! The hybrid index keeps one over the keys of each dynamic stage, so a point read whose key
//! the dynamic stage never saw goes straight to the static stage. Bits are only ever set
//! (with `fetch_or`), so a key added before a reader looks is always found: a negative
//! answer is exact, a positive one is right with probability about 1 - 1% at 10 bits per
//! key.
//!
//! Layout: `blocks` cache lines of 512 bits each (eight `AtomicU64` words, 64-byte
//! aligned). A key selects one block from the high half of its hash and sets `PROBES`
//! bits inside it chosen by successive 9-bit slices of the low half, so a query touches one
//! cache line. Invariant: `blocks` is a power of two, so the block is `hash >> 32 & mask`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits set per key. Six probes in a 512-bit block give about a 1% false-positive rate at
/// 10 bits per key.
const PROBES: u32 = 6;

/// One 512-bit block: a cache line.
#[repr(align(64))]
#[derive(Default)]
struct Block([AtomicU64; 8]);

/// A Bloom filter sized for an expected number of keys; see the module docs.
pub struct Bloom {
    blocks: Box<[Block]>,
    mask: u64,
}

impl Bloom {
    /// A filter with about `bits_per_key` bits for each of `expected` keys (at least one
    /// block).
    pub fn new(expected: usize, bits_per_key: usize) -> Self {
        let bits = expected.saturating_mul(bits_per_key.max(1)).max(512);
        let blocks = bits.div_ceil(512).next_power_of_two();
        Self {
            blocks: (0..blocks).map(|_| Block::default()).collect(),
            mask: blocks as u64 - 1,
        }
    }

    /// The block and the in-block bit positions of a hash.
    #[inline]
    fn probes(&self, hash: u64) -> (&Block, impl Iterator<Item = (usize, u64)>) {
        let block = &self.blocks[((hash >> 32) & self.mask) as usize];
        // A second, independent mix of the hash for the in-block bits (the block used the
        // high half).
        let low = (hash ^ (hash >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let bits = (0..PROBES).map(move |i| {
            let bit = (low >> (9 * i)) & 511;
            ((bit >> 6) as usize, 1u64 << (bit & 63))
        });
        (block, bits)
    }

    /// Adds a key by its [`key_hash`].
    #[inline]
    pub fn insert(&self, hash: u64) {
        let (block, bits) = self.probes(hash);
        for (word, bit) in bits {
            // Skip the read-modify-write when the bit is already set: most inserts of a
            // key seen before write nothing, so the line stays shared between cores.
            if block.0[word].load(Ordering::Relaxed) & bit == 0 {
                block.0[word].fetch_or(bit, Ordering::Release);
            }
        }
    }

    /// Whether a key with this [`key_hash`] may have been added. `false` is exact.
    #[inline]
    pub fn may_contain(&self, hash: u64) -> bool {
        let (block, mut bits) = self.probes(hash);
        bits.all(|(word, bit)| block.0[word].load(Ordering::Acquire) & bit != 0)
    }

    /// The bytes the filter holds.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.blocks)
    }
}

/// A 64-bit hash of a key for [`Bloom`] and for choosing a writer's lock stripe: eight bytes
/// at a time, multiply-rotate mixing, and the MurmurHash3 finaliser, so every input bit
/// affects every output bit.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        h = (h ^ word).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(tail))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_keys_are_always_found() {
        let bloom = Bloom::new(10_000, 10);
        for i in 0u64..10_000 {
            bloom.insert(key_hash(&i.to_be_bytes()));
        }
        for i in 0u64..10_000 {
            assert!(bloom.may_contain(key_hash(&i.to_be_bytes())));
        }
    }

    #[test]
    fn false_positive_rate_is_near_one_percent() {
        let bloom = Bloom::new(100_000, 10);
        for i in 0u64..100_000 {
            bloom.insert(key_hash(&i.to_be_bytes()));
        }
        let false_hits = (100_000u64..200_000)
            .filter(|i| bloom.may_contain(key_hash(&i.to_be_bytes())))
            .count();
        let rate = false_hits as f64 / 100_000.0;
        assert!(rate < 0.025, "false-positive rate {rate}");
    }

    #[test]
    fn hashes_of_near_keys_differ_in_many_bits() {
        let a = key_hash(b"user1000@example.com");
        let b = key_hash(b"user1001@example.com");
        assert!((a ^ b).count_ones() > 16);
        assert_ne!(key_hash(b""), key_hash(b"\0"));
    }
}
