//! The decoded-block cache of a compressed stage: CLOCK replacement (a reference bit per
//! slot and a hand that clears bits until it finds a slot whose bit is clear), sharded over
//! [`SHARDS`] mutexes so that readers on different blocks rarely meet.
//!
//! Keys are (segment id, block index); segment ids are unique for the life of the process
//! (never reused, unlike addresses), so a cached block can never be mistaken for another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Shards of the cache; a power of two. 16 keeps lock contention low on the machines this
/// runs on without making small caches uselessly fragmented.
const SHARDS: usize = 16;

type Key = (u64, u32);

#[derive(Debug)]
struct Slot {
    key: Key,
    data: Arc<[u8]>,
    referenced: bool,
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Key, usize>,
    slots: Vec<Slot>,
    hand: usize,
    /// Bytes of the cached blocks' allocations.
    data_bytes: usize,
}

/// A CLOCK cache of up to `capacity` decoded blocks.
#[derive(Debug)]
pub(crate) struct BlockCache {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
}

/// The allocation of an `Arc<[u8]>` of `len` bytes.
fn arc_bytes(len: usize) -> usize {
    crate::mem::arc_bytes_of(std::alloc::Layout::array::<u8>(len).expect("a block's layout"))
}

impl BlockCache {
    pub(crate) fn new(capacity: usize) -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        Self {
            shards,
            per_shard: capacity.div_ceil(SHARDS),
        }
    }

    /// The decoded block `key`, decoding it with `decode` (outside the lock) on a miss;
    /// `None` if `decode` fails.
    pub(crate) fn get(
        &self,
        key: Key,
        decode: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<Arc<[u8]>> {
        if self.per_shard == 0 {
            return decode().map(Arc::from);
        }
        let h = key
            .0
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(u64::from(key.1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
        let shard = &self.shards[(h >> 59) as usize % SHARDS];
        {
            let mut s = shard.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(&i) = s.map.get(&key) {
                s.slots[i].referenced = true;
                return Some(s.slots[i].data.clone());
            }
        }
        let data: Arc<[u8]> = Arc::from(decode()?);
        let mut s = shard.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&i) = s.map.get(&key) {
            // Another reader decoded it meanwhile.
            return Some(s.slots[i].data.clone());
        }
        if s.slots.capacity() == 0 {
            s.slots.reserve_exact(self.per_shard);
            s.map.reserve(self.per_shard);
        }
        s.data_bytes += arc_bytes(data.len());
        let slot = Slot {
            key,
            data: data.clone(),
            referenced: false,
        };
        if s.slots.len() < self.per_shard {
            let i = s.slots.len();
            s.slots.push(slot);
            s.map.insert(key, i);
        } else {
            let n = s.slots.len();
            loop {
                let hand = s.hand;
                s.hand = (hand + 1) % n;
                if s.slots[hand].referenced {
                    s.slots[hand].referenced = false;
                    continue;
                }
                let old = std::mem::replace(&mut s.slots[hand], slot);
                s.data_bytes -= arc_bytes(old.data.len());
                s.map.remove(&old.key);
                s.map.insert(key, hand);
                break;
            }
        }
        Some(data)
    }

    /// Bytes held: the shards, their slot arrays and maps, and the cached blocks.
    pub(crate) fn memory(&self) -> usize {
        let mut total = std::mem::size_of_val(&*self.shards);
        for shard in self.shards.iter() {
            let s = shard.lock().unwrap_or_else(|e| e.into_inner());
            total += s.slots.capacity() * std::mem::size_of::<Slot>() + s.data_bytes;
            total += hash_map_bytes::<Key, usize>(s.map.capacity());
        }
        total
    }
}

/// The allocation of a std `HashMap` of `capacity` (SwissTable: a power-of-two number of
/// buckets, 7/8 usable from 8 on; one entry and one control byte per bucket plus a group of
/// 16 trailing control bytes).
fn hash_map_bytes<K, V>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        capacity + 1
    } else {
        capacity * 8 / 7
    }
    .next_power_of_two();
    let entries = (buckets * std::mem::size_of::<(K, V)>()).next_multiple_of(16);
    entries + buckets + 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_keeps_capacity_and_returns_what_was_decoded() {
        let cache = BlockCache::new(SHARDS * 2);
        for round in 0..3u64 {
            for b in 0..200u32 {
                let got = cache.get((round, b), || Some(vec![b as u8; 10])).unwrap();
                assert_eq!(&*got, &[b as u8; 10][..]);
            }
        }
        for shard in cache.shards.iter() {
            assert!(shard.lock().unwrap().slots.len() <= 2);
        }
        // A hit does not decode.
        let got = cache.get((2, 199), || panic!("decoded")).unwrap();
        assert_eq!(got[0], 199);
        assert!(cache.get((9, 9), || None).is_none());
    }
}
