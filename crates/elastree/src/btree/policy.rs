//! The tree's leaf policy: what the tree does with a leaf that overflows, underflows or is
//! read, and whether it sweeps cold leaves into a compact form.
//!
//! The node ADT ([`NodeRepr`]) says what a node *is*; this trait says what the tree *decides*
//! about leaves. Its defaults are the plain B+-tree's (split a full leaf, merge an underfull
//! one, never convert, never sweep) and compile away, so a plain representation implements it
//! with an empty `impl`. The elastic tree's representation (`crate::node::mixed`) overrides
//! the hooks to turn leaves into SeqTree leaves under a memory budget and back.

use std::ptr::NonNull;

use crate::elastic::SweepCursor;
use crate::node::slotted::Slotted;
use crate::node::sorted::{FixedKey, Sorted};
use crate::node::{NodeHeader, NodeRepr};

/// What the tree does with a leaf that has no room for an insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Split it in two (the B+-tree's answer, and every plain representation's).
    Split,
    /// Split it in two and halve both halves' capacity ([`LeafPolicy::halve_capacity`]).
    SplitHalving,
    /// Raise its capacity in place ([`LeafPolicy::grow`]) under its write lock.
    Grow,
    /// Replace it by nodes of another representation ([`LeafPolicy::replacement`]).
    Replace,
}

/// What the tree does with a leaf after a remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Underflow {
    /// Nothing.
    Keep,
    /// Merge it with a sibling (the B+-tree's repair).
    Merge,
    /// Replace it by a node of another representation ([`LeafPolicy::replacement`]).
    Replace,
}

/// New nodes that take a leaf's place: built by [`LeafPolicy::replacement`] from the leaf's
/// entries, and published by the tree in one step under the locks of the leaf, its parent
/// and its left sibling.
pub struct Replacement<R: NodeRepr> {
    /// The node taking the leaf's place (and its first entries).
    pub first: NonNull<NodeHeader>,
    /// A second node to the right of `first`, with the separator (its first key) the
    /// parent gets for it.
    pub second: Option<(R::Owned, NonNull<NodeHeader>)>,
    /// Bytes of the new nodes as the tree counts them.
    pub bytes: usize,
}

/// A node representation together with the tree's decisions about its leaves.
pub trait LeafPolicy: NodeRepr {
    /// What to do with a leaf that has no room; `index_bytes` is the tree's current size.
    /// Read under an optimistic version.
    #[inline]
    fn overflow(_node: &NodeHeader, _config: &Self::Config, _index_bytes: usize) -> Overflow {
        Overflow::Split
    }

    /// Raises the capacity of a leaf for which `overflow` said [`Overflow::Grow`]. Write
    /// lock held.
    #[inline]
    fn grow(_node: &NodeHeader, _config: &Self::Config) {}

    /// Halves a node's capacity after an [`Overflow::SplitHalving`] split. Write lock held.
    #[inline]
    fn halve_capacity(_node: &NodeHeader, _config: &Self::Config) {}

    /// Decides what a remove leaves to do; may adjust the leaf in place. Write lock held.
    #[inline]
    fn after_remove(node: &NodeHeader, config: &Self::Config) -> Underflow {
        if Self::is_underfull(node, config) {
            Underflow::Merge
        } else {
            Underflow::Keep
        }
    }

    /// Whether a lookup that ended on `node` should convert it (`Some` with the action).
    /// Read under an optimistic version.
    #[inline]
    fn after_lookup(_node: &NodeHeader, _config: &Self::Config) -> Option<Overflow> {
        None
    }

    /// Builds the nodes that replace leaf `node` (`None`: leave it as it is). Write locks
    /// held on the leaf, its parent and its left sibling.
    #[inline]
    fn replacement(
        _node: &NodeHeader,
        _config: &Self::Config,
        _index_bytes: usize,
    ) -> Option<Replacement<Self>> {
        None
    }

    // The elastic tree's sweep (see `crate::elastic`); the defaults never sweep.

    /// How many pairs of cold leaves the tree should compact after an overflow of `node`
    /// with the tree at `index_bytes` (0: none). Called only on the overflow path, after
    /// [`LeafPolicy::overflow`]. Read under an optimistic version.
    #[inline]
    fn sweep_quota(_node: &NodeHeader, _config: &Self::Config, _index_bytes: usize) -> usize {
        0
    }

    /// Whether a sweep under way should go on with the tree at `index_bytes`.
    #[inline]
    fn sweep_wanted(_config: &Self::Config, _index_bytes: usize) -> bool {
        false
    }

    /// The sweep's position, for representations that sweep.
    #[inline]
    fn sweep_cursor(_config: &Self::Config) -> Option<&SweepCursor<Self::Owned>> {
        None
    }

    /// Whether adjacent leaves `left` and `right` (same parent) look like a pair the sweep
    /// can merge into one node. Read under optimistic versions; a hint that
    /// [`LeafPolicy::pair_replacement`] decides under the locks.
    #[inline]
    fn pair_compactable(_left: &NodeHeader, _right: &NodeHeader, _config: &Self::Config) -> bool {
        false
    }

    /// Builds the one leaf that replaces adjacent leaves `left` and `right` with all their
    /// entries; returns it (unpublished, link unset) and its bytes as the tree counts them,
    /// or `None` to leave the pair as it is. Write locks held on both, their parent and
    /// `left`'s left sibling.
    #[inline]
    fn pair_replacement(
        _left: &NodeHeader,
        _right: &NodeHeader,
        _config: &Self::Config,
    ) -> Option<(NonNull<NodeHeader>, usize)> {
        None
    }
}

/// The plain B+-tree's policy.
impl LeafPolicy for Slotted {}

/// The plain B+-tree's policy.
impl<K: FixedKey> LeafPolicy for Sorted<K> {}
