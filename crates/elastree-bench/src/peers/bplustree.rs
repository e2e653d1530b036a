//! The `bplustree` crate.

use std::borrow::Borrow;

use super::raw_iter::{drain_ascending, raw_scan_ascending, raw_scan_descending};
use super::{BenchIndex, Peer, PeerKey};
use crate::keys::{Key, KeySetKind};

/// `bplustree::BPlusTree` (OLC B+-tree, default node capacities). Scans use its raw shared
/// iterator (`seek` then `next`), dropped right after, as its docs advise.
pub struct BPlus<K: PeerKey> {
    tree: bplustree::BPlusTree<K, u64>,
}

impl<K: PeerKey> BPlus<K> {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: bplustree::BPlusTree::new(),
        }
    }
}

impl<K: PeerKey> Default for BPlus<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// bplustree 0.1 has no `Drop` for its tree: dropping it frees the root pointer's latch but
/// none of the nodes. Removing every key first frees them through its merges, so a dropped tree
/// does not stay resident for the rest of the run (and inflate later RSS readings).
impl<K: PeerKey> Drop for BPlus<K> {
    fn drop(&mut self) {
        drain_ascending!(self.tree);
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for BPlus<K> {
    generic_peer_basics!(Peer::BPlusTree, concurrent: true);

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.tree.insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| self.tree.lookup(k, |v| *v))
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
