//! The `masstree` crate.

use masstree::{MassTree, RangeBound, RemoveError};

use super::{width_check, BenchIndex, Peer};
use crate::keys::{Key, KeySetKind, KeyWidth};
use crate::workload::Workload;

/// Why masstree skips descending scans on keys longer than 8 bytes.
const MASSTREE_NO_REVERSE: &str = "masstree 0.9.5's reverse scans miss keys on keys longer than \
     8 bytes (from an absent start key, the last key below it; across trie layers, others too); \
     it scans descending only on 8-byte key sets";

/// Why masstree skips every scan on key sets of other lengths than 8 and 16 bytes.
const MASSTREE_NO_SCAN: &str = "masstree 0.9.5's range scans miss keys when keys of several \
     lengths share prefixes over more than one trie layer (from present start keys too); it \
     scans only on 8- and 16-byte key sets";

/// `masstree::MassTree` (a trie of B+-trees, after Mao, Kohler and Morris's Masstree): each trie
/// layer is a concurrent B+-tree over the next 8 bytes of the key, with lock-free reads
/// validated by node versions and fine-grained leaf locks for writes. It takes byte-string keys
/// of up to 256 bytes (`masstree::MAX_KEY_LENGTH`, more than any key set's), so every key set
/// fits: 8-byte ones are stored as big-endian bytes, whose order is the numeric order, and
/// keys that are prefixes of others are ordinary keys to it. Values are stored inline
/// (`MassTree<u64>`, the crate's default tree).
///
/// Every operation enters the tree's `seize` collector (a guard) for its duration, as the
/// crate's docs describe. Scans use its batched visitors (`scan_intra_leaf_batch`,
/// `scan_rev_batch`), which the crate names its fastest. Only keys of the first trie layer scan
/// right in masstree 0.9.5 (checked against a model map): 8-byte key sets run every workload.
/// On 16-byte key sets (two layers) a forward scan from a present key in the second layer
/// starts after it, so a scan there looks its start key up first and skips what the tree's
/// scan gives up to the start (one extra lookup per scan), which makes it right; descending
/// scans there are refused. Other key sets (variable length, 20 and 28 bytes) refuse every
/// workload that scans (`scan`, `scan-desc`, `ycsb-e`): from present and absent start keys
/// alike the scans skip runs of keys.
///
/// Retired nodes wait in the collector, which is private to the tree (as scc's is);
/// [`BenchIndex::quiesce`] runs its `maintenance` (flushing the retired nodes and removing
/// emptied leaves) so that a memory reading sees the tree at rest. The crate does not count its
/// own memory.
pub struct Mass {
    tree: MassTree<u64>,
    width: KeyWidth,
}

impl Mass {
    /// An empty tree for keys of `width`.
    pub fn new(width: KeyWidth) -> Self {
        Self {
            tree: MassTree::new(),
            width,
        }
    }
}

impl BenchIndex for Mass {
    fn name(&self) -> &str {
        Peer::MassTree.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        width_check(self.name(), self.width, keys)
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        let scans = match workload {
            Workload::Scan | Workload::ScanDesc | Workload::Mixed => true,
            Workload::Ycsb(y) => y.scans(),
            Workload::Load | Workload::Lookup | Workload::LookupZipf | Workload::Delete => false,
        };
        match (self.width, workload) {
            (KeyWidth::Variable, _) if scans => Err(MASSTREE_NO_SCAN.to_string()),
            (KeyWidth::Fixed16, Workload::ScanDesc) => Err(MASSTREE_NO_REVERSE.to_string()),
            _ => Ok(()),
        }
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        let guard = self.tree.guard();
        key.with_bytes(|k| self.tree.insert_value_with_guard(k, value, &guard));
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let guard = self.tree.guard();
        key.with_bytes(|k| self.tree.get_with_guard(k, &guard))
    }

    /// On keys longer than 8 bytes, the start key is looked up first and the tree's scan skips
    /// up to it (see [`Mass`]). That makes scans right on 16-byte keys; on variable-length
    /// keys they may still miss keys, and only checks that need no more than an empty tree's
    /// answer (a removal workload's "nothing is left") call them: the workloads that scan are
    /// refused there.
    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        if n == 0 {
            return 0;
        }
        let width = self.width;
        let guard = self.tree.guard();
        let mut count = 0;
        let mut emit = |key: &[u8], value: u64| {
            visit(Key::from_bytes(width, key), value);
            count += 1;
            count < n
        };
        start.with_bytes(|start| {
            let first_layer = width == KeyWidth::Fixed8;
            if !first_layer {
                if let Some(value) = self.tree.get_with_guard(start, &guard) {
                    if !emit(start, value) {
                        return;
                    }
                }
            }
            self.tree.scan_intra_leaf_batch(
                RangeBound::Included(start),
                RangeBound::Unbounded,
                |key, value| (!first_layer && key <= start) || emit(key, value),
                &guard,
            );
        });
        count
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        assert_eq!(self.width, KeyWidth::Fixed8, "{MASSTREE_NO_REVERSE}");
        if n == 0 {
            return 0;
        }
        let guard = self.tree.guard();
        let mut count = 0;
        start.with_bytes(|start| {
            self.tree.scan_rev_batch(
                RangeBound::Unbounded,
                RangeBound::Included(start),
                |key, value| {
                    visit(Key::from_bytes(KeyWidth::Fixed8, key), value);
                    count += 1;
                    count < n
                },
                &guard,
            )
        });
        count
    }

    /// A removal that gives up under contention (`RetryLimitExceeded`, after 1,000 optimistic
    /// attempts) is tried again: the crate leaves retrying to its caller.
    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        let guard = self.tree.guard();
        key.with_bytes(|k| loop {
            match self.tree.remove_with_guard(k, &guard) {
                Ok(old) => return old.is_some(),
                Err(RemoveError::RetryLimitExceeded) => std::hint::spin_loop(),
            }
        })
    }

    fn quiesce(&self) {
        let mut guard = self.tree.guard();
        self.tree.maintenance(&mut guard);
    }
}
