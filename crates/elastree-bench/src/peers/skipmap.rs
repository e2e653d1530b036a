//! `crossbeam_skiplist::SkipMap`.

use std::borrow::Borrow;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BenchIndex, Peer, PeerKey};
use crate::keys::{Key, KeySetKind};

/// Visits the first `n` skip-list entries of `entries`; returns how many it visited.
#[inline]
fn visit_skip_entries<'a, K: PeerKey>(
    entries: impl Iterator<Item = crossbeam_skiplist::map::Entry<'a, K, AtomicU64>>,
    n: usize,
    visit: &mut dyn FnMut(Key<'_>, u64),
) -> usize {
    let mut count = 0;
    for entry in entries.take(n) {
        visit(entry.key().key(), entry.value().load(Ordering::Acquire));
        count += 1;
    }
    count
}

/// `crossbeam_skiplist::SkipMap` with `AtomicU64` values.
///
/// `SkipMap::insert` of a key that is present is not an atomic replacement: it unlinks the old
/// node, then links a new one, and a concurrent `get` in between finds no key at all. So values
/// are atomics, and an insert is `get_or_insert` (one search, as `insert` does) followed by a
/// store into the entry's value: an update of a present key never makes it disappear.
pub struct Skip<K: PeerKey> {
    map: crossbeam_skiplist::SkipMap<K, AtomicU64>,
}

impl<K: PeerKey> Skip<K> {
    /// An empty map.
    pub fn new() -> Self {
        Self {
            map: crossbeam_skiplist::SkipMap::new(),
        }
    }
}

impl<K: PeerKey> Default for Skip<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for Skip<K> {
    generic_peer_basics!(Peer::SkipMap, concurrent: true);

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.map
            .get_or_insert(K::owned(key), AtomicU64::new(value))
            .value()
            .store(value, Ordering::Release);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| {
            self.map
                .get(k)
                .map(|entry| entry.value().load(Ordering::Acquire))
        })
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            visit_skip_entries(
                self.map
                    .range::<K::Ref, _>((Bound::Included(k), Bound::Unbounded)),
                n,
                visit,
            )
        })
    }

    /// `range(..=start)` iterated from the back (`SkipMap`'s `Range` is double-ended).
    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            visit_skip_entries(
                self.map
                    .range::<K::Ref, _>((Bound::Unbounded, Bound::Included(k)))
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.map.remove(k).is_some())
    }
}
