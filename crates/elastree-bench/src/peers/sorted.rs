//! A sorted array: the compactness bound.

use super::{reads_only, width_check, BenchIndex, Peer};
use crate::keys::{Key, KeyData, KeySet, KeySetKind, KeyWidth};
use crate::workload::Workload;

enum SortedData {
    Empty,
    /// `(key, tid)` pairs sorted by key.
    Fixed(Vec<(u64, u64)>),
    /// Keys sorted and packed in one buffer: key `i` is `data[offsets[i]..offsets[i + 1]]`
    /// with tid `tids[i]`.
    Var {
        data: Vec<u8>,
        offsets: Vec<u32>,
        tids: Vec<u64>,
    },
}

/// A sorted array built by one bulk sort: `Vec<(u64, u64)>` for 8-byte keys; for
/// byte-string keys (fixed or variable length) the sorted key bytes packed in one buffer with 4-byte offsets and a
/// tid array. The compactness bound: read-only (lookups and scans by binary search), no
/// inserts or deletes.
pub struct SortedArray {
    width: KeyWidth,
    data: SortedData,
}

impl SortedArray {
    /// An empty array for keys of `width`; fill it with [`BenchIndex::bulk_load`].
    pub fn new(width: KeyWidth) -> Self {
        Self {
            width,
            data: SortedData::Empty,
        }
    }

    /// The position of the first key `>= key`.
    #[inline]
    fn lower_bound(&self, key: Key<'_>) -> usize {
        match (&self.data, key) {
            (SortedData::Empty, _) => 0,
            (SortedData::Fixed(pairs), Key::U64(k)) => pairs.partition_point(|&(x, _)| x < k),
            (
                SortedData::Var {
                    data,
                    offsets,
                    tids,
                },
                Key::Bytes(k),
            ) => {
                let key_at = |i: usize| &data[offsets[i] as usize..offsets[i + 1] as usize];
                let (mut lo, mut hi) = (0, tids.len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if key_at(mid) < k {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
            _ => panic!("sorted array got a key of the wrong width"),
        }
    }

    #[inline]
    fn entry(&self, i: usize) -> Option<(Key<'_>, u64)> {
        match &self.data {
            SortedData::Empty => None,
            SortedData::Fixed(pairs) => pairs.get(i).map(|&(k, v)| (Key::U64(k), v)),
            SortedData::Var {
                data,
                offsets,
                tids,
            } => tids.get(i).map(|&tid| {
                (
                    Key::Bytes(&data[offsets[i] as usize..offsets[i + 1] as usize]),
                    tid,
                )
            }),
        }
    }
}

impl BenchIndex for SortedArray {
    fn name(&self) -> &str {
        Peer::Sorted.name()
    }

    /// Reads are safe from many threads; the bulk load runs on one.
    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        width_check(self.name(), self.width, keys)
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        reads_only(
            workload,
            "sorted array is read-only (built by one bulk sort)",
        )
    }

    fn loads_in_bulk(&self) -> bool {
        true
    }

    fn bulk_load(&mut self, keys: &KeySet) -> Result<(), String> {
        self.data = match &*keys.data {
            KeyData::U64(ks) => {
                let mut pairs: Vec<(u64, u64)> =
                    ks.iter().zip(0u64..).map(|(&k, i)| (k, i)).collect();
                pairs.sort_unstable_by_key(|&(k, _)| k);
                SortedData::Fixed(pairs)
            }
            KeyData::Fixed(_) | KeyData::Var(_) => {
                let total_bytes: usize = match &*keys.data {
                    KeyData::Fixed(ks) => ks.len() * ks.key_len(),
                    KeyData::Var(ks) => ks.total_bytes(),
                    KeyData::U64(_) => unreachable!("handled above"),
                };
                if u32::try_from(total_bytes).is_err() {
                    return Err("sorted array: key bytes exceed 4 GiB (4-byte offsets)".to_string());
                }
                let order = keys.sorted_order();
                let mut data = Vec::with_capacity(total_bytes);
                let mut offsets = Vec::with_capacity(order.len() + 1);
                offsets.push(0u32);
                let tids: Vec<u64> = order.iter().map(|&i| u64::from(i)).collect();
                for &i in &order {
                    match keys.key(i as usize) {
                        Key::Bytes(bytes) => data.extend_from_slice(bytes),
                        Key::U64(_) => unreachable!("byte-string key sets hold byte keys"),
                    }
                    offsets.push(data.len() as u32);
                }
                SortedData::Var {
                    data,
                    offsets,
                    tids,
                }
            }
        };
        Ok(())
    }

    fn insert(&self, _key: Key<'_>, _value: u64) {
        panic!("the sorted array is read-only: it is built by bulk_load");
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let pos = self.lower_bound(key);
        match self.entry(pos) {
            Some((k, tid)) if k == key => Some(tid),
            _ => None,
        }
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let pos = self.lower_bound(start);
        let mut count = 0;
        while count < n {
            match self.entry(pos + count) {
                Some((k, tid)) => visit(k, tid),
                None => break,
            }
            count += 1;
        }
        count
    }

    /// From the last key `<= start` back towards the first.
    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let pos = self.lower_bound(start);
        // One past the last key `<= start`.
        let end = match self.entry(pos) {
            Some((k, _)) if k == start => pos + 1,
            _ => pos,
        };
        let mut count = 0;
        for i in (0..end).rev().take(n) {
            let (k, tid) = self.entry(i).expect("below the end");
            visit(k, tid);
            count += 1;
        }
        count
    }

    fn remove(&self, _key: Key<'_>) -> bool {
        panic!("the sorted array is read-only");
    }

    fn self_reported_bytes(&self) -> Option<usize> {
        Some(match &self.data {
            SortedData::Empty => 0,
            SortedData::Fixed(pairs) => pairs.capacity() * std::mem::size_of::<(u64, u64)>(),
            SortedData::Var {
                data,
                offsets,
                tids,
            } => data.capacity() + offsets.capacity() * 4 + tids.capacity() * 8,
        })
    }
}
