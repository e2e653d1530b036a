//! A representation mixing standard leaves and SeqTree leaves in one tree: the elastic
//! B+-tree (`elastic`) and the fully compact tree (`seqtree`).
//!
//! [`Mixed<R>`] is a [`NodeRepr`] whose inner nodes are always `R`'s and whose leaves are
//! either `R`'s standard leaves or [`SeqTree`] leaves, told apart by
//! [`NodeHeader::format`] (set before a node is published, never changed). Every ADT
//! operation dispatches on it, so the tree algorithm is the B+-tree's; the elasticity
//! algorithm ([`crate::elastic`]) enters through the tree's leaf policy ([`LeafPolicy`]:
//! `overflow`, `after_remove`, `after_lookup`, `replacement`, the sweep).
//!
//! Leaves of different forms are never merged with each other (a standard leaf between two
//! SeqTree leaves may stay underfull); SeqTree leaves of the elastic tree never merge at
//! all, they shrink or turn back into standard leaves instead (the paper's underflow rule).

use std::cmp::Ordering as CmpOrdering;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::blind::BlindKeys;
use super::seqtree::{SeqShared, SeqTree, FORMAT_COMPACT};
use super::{NodeHeader, NodeRepr, SearchResult};
use crate::btree::{LeafPolicy, Overflow, Replacement, Underflow};
use crate::elastic::{ElasticPolicy, ElasticState, Event, SweepCursor};

/// How a mixed tree uses SeqTree leaves.
#[derive(Debug, Clone)]
pub enum LeafMode {
    /// Every leaf is a SeqTree leaf of one capacity (the paper's "SeqTree128").
    AllCompact {
        /// The capacity of every leaf.
        capacity: usize,
    },
    /// Standard leaves, compacted and expanded by the elasticity algorithm.
    Elastic(Arc<ElasticPolicy>),
}

/// Settings of a mixed tree.
pub struct MixedConfig<R: NodeRepr> {
    /// The standard representation's settings.
    pub base: R::Config,
    /// The SeqTree leaves' settings, key source and body byte count.
    pub seq: Arc<SeqShared>,
    /// How leaves are chosen.
    pub mode: LeafMode,
    /// The elastic sweep's position (unused by `AllCompact` trees).
    pub sweep: Arc<SweepCursor<R::Owned>>,
}

impl<R: NodeRepr> Clone for MixedConfig<R> {
    fn clone(&self) -> Self {
        Self {
            base: self.base.clone(),
            seq: Arc::clone(&self.seq),
            mode: self.mode.clone(),
            sweep: Arc::clone(&self.sweep),
        }
    }
}

impl<R: NodeRepr> fmt::Debug for MixedConfig<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixedConfig")
            .field("base", &self.base)
            .field("seq", &self.seq)
            .field("mode", &self.mode)
            .finish()
    }
}

/// The mixed representation over standard representation `R`.
#[derive(Debug)]
pub struct Mixed<R>(std::marker::PhantomData<R>);

/// The forms a leaf of a mixed tree takes, told apart by [`NodeHeader::format`] (set before a
/// node is published, never changed). Every ADT operation below matches on it, so a new leaf
/// form is its own file plus one arm in each match here (the compiler lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `R`'s standard node (every inner node, and standard leaves).
    Standard,
    /// A SeqTree leaf ([`SeqTree`]).
    Compact,
}

/// The form of `node`.
#[inline]
fn form(node: &NodeHeader) -> Form {
    if node.format.load(Ordering::Relaxed) == FORMAT_COMPACT {
        Form::Compact
    } else {
        Form::Standard
    }
}

/// Whether `node` is a SeqTree leaf.
#[inline]
fn is_compact(node: &NodeHeader) -> bool {
    form(node) == Form::Compact
}

impl<R: BlindKeys> Mixed<R> {
    /// Copies the entries `from..` of any leaf with their keys.
    fn entries(node: &NodeHeader, config: &MixedConfig<R>, from: usize) -> Vec<(R::Owned, u64)> {
        let count = Self::count(node, config);
        (from..count)
            .map(|i| {
                (
                    Self::key_at(node, config, i),
                    Self::value_at(node, config, i),
                )
            })
            .collect()
    }

    /// Drops the entries from `len` on of any leaf (write lock held).
    fn truncate(node: &NodeHeader, config: &MixedConfig<R>, len: usize) {
        while Self::count(node, config) > len {
            let last = Self::count(node, config) - 1;
            Self::remove_at(node, config, last);
        }
    }

    /// A new standard leaf holding `entries`, or `None` if they do not fit.
    fn standard_leaf(
        config: &MixedConfig<R>,
        entries: &[(R::Owned, u64)],
    ) -> Option<(NonNull<NodeHeader>, usize)> {
        let (node, bytes) = R::alloc(&config.base, 0);
        // SAFETY: freshly allocated, unpublished.
        let leaf = unsafe { node.as_ref() };
        for (i, (key, tid)) in entries.iter().enumerate() {
            if !R::has_room(leaf, &config.base, Some(R::probe(key))) {
                // SAFETY: never published.
                unsafe { R::free(&config.base, node) };
                return None;
            }
            R::insert_at(leaf, &config.base, i, R::probe(key), *tid);
        }
        Some((node, bytes))
    }

    fn policy(config: &MixedConfig<R>) -> Option<&ElasticPolicy> {
        match &config.mode {
            LeafMode::Elastic(policy) => Some(policy),
            LeafMode::AllCompact { .. } => None,
        }
    }

    /// The SeqTree capacity for `total` entries of a swept pair of standard leaves: the
    /// smallest of the doubling capacities (`compact_start`, twice that, ... up to
    /// `compact_max`) that holds them, if the entries also fill more than half of it (the
    /// `k + 1` rule).
    fn pair_capacity(total: usize, policy: &ElasticPolicy) -> Option<usize> {
        let mut capacity = policy.compact_start;
        while capacity < total {
            capacity *= 2;
        }
        (capacity <= policy.compact_max && total > capacity / 2).then_some(capacity)
    }

    /// What to do with a full or chosen SeqTree leaf when not shrinking: split it into two
    /// leaves of half its capacity, standard ones when that is the standard capacity.
    fn expansion(node: &NodeHeader, policy: &ElasticPolicy) -> Overflow {
        if SeqTree::<R>::capacity(node) / 2 > policy.leaf_capacity {
            Overflow::SplitHalving
        } else {
            Overflow::Replace
        }
    }
}

// SAFETY: inner nodes and standard leaves are `R`'s nodes (whose guarantees `R` gives);
// SeqTree leaves start with a `NodeHeader`, are freed only by `free`, and their read methods
// clamp every position to the body they read. The format field is set before publication and
// never changes, so a dispatch always reaches the representation that allocated the node.
unsafe impl<R: BlindKeys> NodeRepr for Mixed<R> {
    type Config = MixedConfig<R>;
    type Probe<'a> = R::Probe<'a>;
    type Owned = R::Owned;
    type Batch = super::batch::SlotBatch<Self::Owned>;

    const NAME: &'static str = "mixed";

    #[inline]
    fn probe(key: &R::Owned) -> R::Probe<'_> {
        R::probe(key)
    }

    fn compare(config: &MixedConfig<R>, a: &R::Owned, b: &R::Owned) -> CmpOrdering {
        R::compare(&config.base, a, b)
    }

    fn alloc(config: &MixedConfig<R>, level: u16) -> (NonNull<NodeHeader>, usize) {
        match (&config.mode, level) {
            (LeafMode::AllCompact { capacity }, 0) => SeqTree::<R>::alloc(&config.seq, *capacity),
            _ => R::alloc(&config.base, level),
        }
    }

    fn alloc_sibling(config: &MixedConfig<R>, node: &NodeHeader) -> (NonNull<NodeHeader>, usize) {
        match form(node) {
            Form::Standard => R::alloc(&config.base, node.level()),
            Form::Compact => SeqTree::<R>::alloc(&config.seq, SeqTree::<R>::capacity(node)),
        }
    }

    unsafe fn free(config: &MixedConfig<R>, node: NonNull<NodeHeader>) -> usize {
        // SAFETY: the caller's guarantee, passed on to the representation that allocated it.
        unsafe {
            match form(node.as_ref()) {
                Form::Standard => R::free(&config.base, node),
                Form::Compact => SeqTree::<R>::free(&config.seq, node),
            }
        }
    }

    #[inline]
    fn capacity(node: &NodeHeader, config: &MixedConfig<R>) -> usize {
        match form(node) {
            Form::Standard => R::capacity(node, &config.base),
            Form::Compact => SeqTree::<R>::capacity(node),
        }
    }

    #[inline]
    fn count(node: &NodeHeader, config: &MixedConfig<R>) -> usize {
        match form(node) {
            Form::Standard => R::count(node, &config.base),
            Form::Compact => SeqTree::<R>::count(node),
        }
    }

    #[inline]
    fn search(node: &NodeHeader, config: &MixedConfig<R>, probe: R::Probe<'_>) -> SearchResult {
        match form(node) {
            Form::Standard => R::search(node, &config.base, probe),
            Form::Compact => SeqTree::<R>::search(node, &config.seq, probe),
        }
    }

    #[inline]
    fn key_at(node: &NodeHeader, config: &MixedConfig<R>, i: usize) -> R::Owned {
        match form(node) {
            Form::Standard => R::key_at(node, &config.base, i),
            Form::Compact => SeqTree::<R>::key_at(node, &config.seq, i),
        }
    }

    #[inline]
    fn key_into(node: &NodeHeader, config: &MixedConfig<R>, i: usize, out: &mut R::Owned) {
        match form(node) {
            Form::Standard => R::key_into(node, &config.base, i, out),
            Form::Compact => SeqTree::<R>::key_into(node, &config.seq, i, out),
        }
    }

    #[inline]
    fn value_at(node: &NodeHeader, config: &MixedConfig<R>, i: usize) -> u64 {
        match form(node) {
            Form::Standard => R::value_at(node, &config.base, i),
            Form::Compact => SeqTree::<R>::value_at(node, i),
        }
    }

    fn set_value(node: &NodeHeader, config: &MixedConfig<R>, i: usize, value: u64) {
        match form(node) {
            Form::Standard => R::set_value(node, &config.base, i, value),
            Form::Compact => SeqTree::<R>::set_value(node, i, value),
        }
    }

    #[inline]
    fn has_room(node: &NodeHeader, config: &MixedConfig<R>, probe: Option<R::Probe<'_>>) -> bool {
        match form(node) {
            Form::Standard => R::has_room(node, &config.base, probe),
            Form::Compact => SeqTree::<R>::has_room(node),
        }
    }

    fn insert_at(
        node: &NodeHeader,
        config: &MixedConfig<R>,
        i: usize,
        key: R::Probe<'_>,
        value: u64,
    ) {
        match form(node) {
            Form::Standard => R::insert_at(node, &config.base, i, key, value),
            Form::Compact => SeqTree::<R>::insert_at(node, &config.seq, i, key, value),
        }
    }

    fn remove_at(node: &NodeHeader, config: &MixedConfig<R>, i: usize) {
        match form(node) {
            Form::Standard => R::remove_at(node, &config.base, i),
            Form::Compact => SeqTree::<R>::remove_at(node, &config.seq, i),
        }
    }

    fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, config: &MixedConfig<R>) {
        match (form(src), form(dst)) {
            (Form::Compact, Form::Compact) => SeqTree::<R>::move_tail(src, from, dst, &config.seq),
            (Form::Standard, Form::Standard) => R::move_tail(src, from, dst, &config.base),
            (_, dst_form) => {
                let entries = Self::entries(src, config, from);
                if dst_form == Form::Compact {
                    SeqTree::<R>::append_entries(dst, &config.seq, &entries);
                } else {
                    for (key, tid) in &entries {
                        let at = R::count(dst, &config.base);
                        R::insert_at(dst, &config.base, at, R::probe(key), *tid);
                    }
                }
                Self::truncate(src, config, from);
            }
        }
    }

    /// A standard node's key bytes; a SeqTree leaf stores no keys (they are in the table).
    fn key_bytes(node: &NodeHeader, config: &MixedConfig<R>) -> usize {
        match form(node) {
            Form::Standard => R::key_bytes(node, &config.base),
            Form::Compact => 0,
        }
    }

    fn split_point(node: &NodeHeader, config: &MixedConfig<R>) -> usize {
        match form(node) {
            Form::Standard => R::split_point(node, &config.base),
            Form::Compact => SeqTree::<R>::count(node) / 2,
        }
    }

    fn fits_merge(
        left: &NodeHeader,
        right: &NodeHeader,
        extra: usize,
        config: &MixedConfig<R>,
    ) -> bool {
        match (form(left), form(right)) {
            (Form::Standard, Form::Standard) => R::fits_merge(left, right, extra, &config.base),
            (Form::Compact, Form::Compact) => {
                SeqTree::<R>::count(left) + SeqTree::<R>::count(right)
                    <= SeqTree::<R>::capacity(left)
            }
            _ => false,
        }
    }

    fn is_underfull(node: &NodeHeader, config: &MixedConfig<R>) -> bool {
        match (form(node), &config.mode) {
            (Form::Standard, _) => R::is_underfull(node, &config.base),
            (Form::Compact, LeafMode::AllCompact { .. }) => {
                SeqTree::<R>::count(node) < SeqTree::<R>::capacity(node) / 4
            }
            // Elastic SeqTree leaves shrink in `after_remove` instead of merging.
            (Form::Compact, LeafMode::Elastic(_)) => false,
        }
    }

    fn check_node(node: &NodeHeader, config: &MixedConfig<R>) -> Result<(), String> {
        match form(node) {
            Form::Standard => R::check_node(node, &config.base),
            Form::Compact if !node.is_leaf() => Err("a SeqTree node above the leaf level".into()),
            Form::Compact => SeqTree::<R>::check_node(node, &config.seq),
        }
    }

    #[inline]
    fn prefetch_keys(node: &NodeHeader, config: &MixedConfig<R>, from: usize, to: usize) {
        match form(node) {
            // A standard node's keys are inside it.
            Form::Standard => {}
            Form::Compact => SeqTree::<R>::prefetch_keys(node, &config.seq, from, to),
        }
    }

    fn extra_leaf_bytes(config: &MixedConfig<R>) -> usize {
        config.seq.body_bytes.get()
    }
}

/// The elasticity algorithm's decisions (see [`crate::elastic`]); an `AllCompact` tree takes
/// the plain B+-tree's.
impl<R: BlindKeys> LeafPolicy for Mixed<R> {
    fn overflow(node: &NodeHeader, config: &MixedConfig<R>, index_bytes: usize) -> Overflow {
        let Some(policy) = Self::policy(config) else {
            return Overflow::Split;
        };
        let state = policy.observe(index_bytes);
        match (is_compact(node), state) {
            (false, ElasticState::Shrinking) => Overflow::Replace,
            (false, ElasticState::Expanding) => Overflow::Split,
            (true, ElasticState::Shrinking) => {
                if SeqTree::<R>::capacity(node) < policy.compact_max {
                    Overflow::Grow
                } else {
                    Overflow::Split
                }
            }
            (true, ElasticState::Expanding) => Self::expansion(node, policy),
        }
    }

    fn grow(node: &NodeHeader, config: &MixedConfig<R>) {
        if let (true, Some(policy)) = (is_compact(node), Self::policy(config)) {
            let doubled = (2 * SeqTree::<R>::capacity(node)).min(policy.compact_max);
            SeqTree::<R>::set_capacity(node, doubled);
            policy.record(Event::Grew);
        }
    }

    fn halve_capacity(node: &NodeHeader, config: &MixedConfig<R>) {
        if is_compact(node) {
            let cap = SeqTree::<R>::capacity(node);
            let half = (cap / 2).max(SeqTree::<R>::count(node));
            SeqTree::<R>::set_capacity(node, half);
            if let Some(policy) = Self::policy(config) {
                policy.record(Event::Expanded);
            }
        }
    }

    fn after_remove(node: &NodeHeader, config: &MixedConfig<R>) -> Underflow {
        let (true, Some(policy)) = (is_compact(node), Self::policy(config)) else {
            return if Self::is_underfull(node, config) {
                Underflow::Merge
            } else {
                Underflow::Keep
            };
        };
        // The k + 1 rule for a SeqTree leaf of capacity 2k.
        let count = SeqTree::<R>::count(node);
        let half = SeqTree::<R>::capacity(node) / 2;
        if count > half {
            Underflow::Keep
        } else if half > policy.leaf_capacity {
            SeqTree::<R>::set_capacity(node, half);
            Underflow::Keep
        } else {
            Underflow::Replace
        }
    }

    fn after_lookup(node: &NodeHeader, config: &MixedConfig<R>) -> Option<Overflow> {
        if !is_compact(node) {
            return None;
        }
        let policy = Self::policy(config)?;
        (policy.state() == ElasticState::Expanding && policy.roll_expansion())
            .then(|| Self::expansion(node, policy))
    }

    fn sweep_quota(node: &NodeHeader, config: &MixedConfig<R>, index_bytes: usize) -> usize {
        match Self::policy(config) {
            Some(policy) => policy.sweep_quota(index_bytes, Self::capacity(node, config)),
            None => 0,
        }
    }

    fn sweep_wanted(config: &MixedConfig<R>, index_bytes: usize) -> bool {
        Self::policy(config).is_some_and(|policy| policy.sweep_wanted(index_bytes))
    }

    fn sweep_cursor(config: &MixedConfig<R>) -> Option<&SweepCursor<R::Owned>> {
        Self::policy(config).map(|_| &*config.sweep)
    }

    fn pair_compactable(left: &NodeHeader, right: &NodeHeader, config: &MixedConfig<R>) -> bool {
        let Some(policy) = Self::policy(config) else {
            return false;
        };
        !is_compact(left)
            && !is_compact(right)
            && Self::pair_capacity(
                Self::count(left, config) + Self::count(right, config),
                policy,
            )
            .is_some()
    }

    fn pair_replacement(
        left: &NodeHeader,
        right: &NodeHeader,
        config: &MixedConfig<R>,
    ) -> Option<(NonNull<NodeHeader>, usize)> {
        if !Self::pair_compactable(left, right, config) {
            return None;
        }
        let policy = Self::policy(config)?;
        let mut entries = Self::entries(left, config, 0);
        entries.extend(Self::entries(right, config, 0));
        let capacity = Self::pair_capacity(entries.len(), policy)?;
        let (first, bytes) = SeqTree::<R>::alloc(&config.seq, capacity);
        // SAFETY: freshly allocated, unpublished.
        SeqTree::<R>::append_entries(unsafe { first.as_ref() }, &config.seq, &entries);
        policy.record(Event::Swept);
        Some((first, bytes))
    }

    fn replacement(
        node: &NodeHeader,
        config: &MixedConfig<R>,
        _index_bytes: usize,
    ) -> Option<Replacement<Self>> {
        let policy = Self::policy(config)?;
        let entries = Self::entries(node, config, 0);
        if !is_compact(node) {
            // A standard leaf becomes a SeqTree leaf of the start capacity.
            let (first, bytes) = SeqTree::<R>::alloc(&config.seq, policy.compact_start);
            // SAFETY: freshly allocated, unpublished.
            SeqTree::<R>::append_entries(unsafe { first.as_ref() }, &config.seq, &entries);
            policy.record(Event::Compacted);
            return Some(Replacement {
                first,
                second: None,
                bytes,
            });
        }
        // A SeqTree leaf goes back to one or two standard leaves.
        let (left, right) = if entries.len() <= policy.leaf_capacity {
            (&entries[..], &[][..])
        } else {
            entries.split_at(entries.len() / 2)
        };
        let (first, first_bytes) = Self::standard_leaf(config, left)?;
        let second = if right.is_empty() {
            None
        } else {
            match Self::standard_leaf(config, right) {
                Some((node, bytes)) => Some((right[0].0.clone(), node, bytes)),
                None => {
                    // SAFETY: never published.
                    unsafe { R::free(&config.base, first) };
                    return None;
                }
            }
        };
        policy.record(Event::Expanded);
        let bytes = first_bytes + second.as_ref().map_or(0, |s| s.2);
        Some(Replacement {
            first,
            second: second.map(|(key, node, _)| (key, node)),
            bytes,
        })
    }
}
