//! `std::collections::BTreeMap`, the single-threaded reference.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Mutex;

use super::{lock_unpoisoned, visit_entries, BenchIndex, Peer, PeerKey};
use crate::keys::{Key, KeySetKind};

/// `std::collections::BTreeMap` behind a mutex. Single-threaded only: the mutex is always
/// uncontended and costs one lock/unlock pair per operation.
pub struct StdBTreeMap<K: PeerKey> {
    map: Mutex<BTreeMap<K, u64>>,
}

impl<K: PeerKey> StdBTreeMap<K> {
    /// An empty map.
    pub fn new() -> Self {
        Self {
            map: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<K, u64>> {
        lock_unpoisoned(&self.map)
    }
}

impl<K: PeerKey> Default for StdBTreeMap<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for StdBTreeMap<K> {
    generic_peer_basics!(Peer::BTreeMap, concurrent: false);

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.lock().insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let map = self.lock();
        K::with_ref(key, |k| map.get(k).copied())
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let map = self.lock();
        K::with_ref(start, |k| {
            visit_entries(
                map.range::<K::Ref, _>((Bound::Included(k), Bound::Unbounded)),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let map = self.lock();
        K::with_ref(start, |k| {
            visit_entries(
                map.range::<K::Ref, _>((Bound::Unbounded, Bound::Included(k)))
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        let mut map = self.lock();
        K::with_ref(key, |k| map.remove(k).is_some())
    }
}
