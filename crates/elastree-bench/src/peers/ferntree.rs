//! The `ferntree` crate.

use std::borrow::Borrow;

use super::raw_iter::{drain_ascending, raw_scan_ascending, raw_scan_descending};
use super::{BenchIndex, Peer, PeerKey};
use crate::keys::{Key, KeySetKind};

/// `ferntree::Tree` (OLC B+-tree, default node capacities). Point reads use the optimistic fast
/// path (`get_optimistic`) that its docs recommend for `Copy` values; scans use its raw shared
/// iterator.
pub struct Fern<K: PeerKey + ferntree::OptimisticRead> {
    tree: ferntree::Tree<K, u64>,
}

impl<K: PeerKey + ferntree::OptimisticRead> Fern<K> {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: ferntree::Tree::new(),
        }
    }
}

impl<K: PeerKey + ferntree::OptimisticRead> Default for Fern<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// ferntree 0.7 has no `Drop` for its tree either (and `clear` retires only the root node), so
/// dropping it leaks every node; emptying it first frees them through its merges.
impl<K: PeerKey + ferntree::OptimisticRead> Drop for Fern<K> {
    fn drop(&mut self) {
        drain_ascending!(self.tree);
    }
}

impl<K: PeerKey + ferntree::OptimisticRead + Borrow<K::Ref>> BenchIndex for Fern<K> {
    generic_peer_basics!(Peer::FernTree, concurrent: true);

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.tree.insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| self.tree.get_optimistic(k))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        raw_scan_ascending!(self.tree, start, n, visit)
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        raw_scan_descending!(self.tree, start, n, visit)
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.tree.remove(k).is_some())
    }
}
