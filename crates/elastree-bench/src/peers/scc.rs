//! `scc::TreeIndex`.

use std::borrow::Borrow;
use std::ops::Bound;

use super::{visit_entries, BenchIndex, Peer, PeerKey};
use crate::keys::{Key, KeySetKind};

/// `scc::TreeIndex` through its synchronous API: `insert_sync`, lock-free `peek_with`, `range`
/// under a `Guard`, `remove_sync`.
pub struct SccTree<K: PeerKey> {
    tree: scc::TreeIndex<K, u64>,
}

impl<K: PeerKey> SccTree<K> {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: scc::TreeIndex::new(),
        }
    }
}

impl<K: PeerKey> Default for SccTree<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for SccTree<K> {
    generic_peer_basics!(Peer::Scc, concurrent: true);

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.tree.upsert_sync(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| self.tree.peek_with(k, |_, v| *v))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            let guard = scc::Guard::new();
            visit_entries(
                self.tree
                    .range::<K::Ref, _>((Bound::Included(k), Bound::Unbounded), &guard),
                n,
                visit,
            )
        })
    }

    /// `range(..=start)` iterated from the back: scc's `Range` is double-ended and starts its
    /// backward walk at the range's upper bound.
    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            let guard = scc::Guard::new();
            visit_entries(
                self.tree
                    .range::<K::Ref, _>((Bound::Unbounded, Bound::Included(k)), &guard)
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.tree.remove_sync(k))
    }
}
