//! The elastic tree and the all-SeqTree tree as a [`Family`] of [`Mixed`] representations.

use std::sync::Arc;

use super::index::{Family, TreeIndex};
use crate::elastic::{default_levels, ElasticPolicy, ElasticStats, SweepCursor};
use crate::mem::ByteCounter;
use crate::node::blind::BlindKeys;
use crate::node::mixed::{LeafMode, Mixed, MixedConfig};
use crate::node::seqtree::{SeqShared, MAX_LEVELS, MAX_SEQ_CAPACITY};
use crate::node::slotted::{Slotted, SlottedConfig};
use crate::node::sorted::{Sorted, SortedConfig};
use crate::table::KeySource;
use crate::{ElasticOptions, Error, IndexKind, IndexOptions, KindStats, SeqTreeOptions};

/// The capacity of every leaf of a `seqtree` index unless `leaf_capacity` says otherwise
/// (the paper's SeqTree128).
pub const SEQTREE_LEAF_CAPACITY: usize = 128;

/// The representations of the `elastic` and `seqtree` kinds.
pub struct Elastic;

/// The own options of the two kinds the [`Elastic`] family builds.
#[derive(Debug, Clone)]
pub enum ElasticForm {
    /// The `elastic` kind.
    Elastic(ElasticOptions),
    /// The `seqtree` kind.
    SeqTree(SeqTreeOptions),
}

/// What an elastic or seqtree index keeps beside its tree.
pub struct ElasticExtra {
    kind: IndexKind,
    keys: Arc<dyn KeySource>,
    levels: u8,
    breathing: usize,
    mode: LeafMode,
}

impl ElasticExtra {
    fn mixed<R: BlindKeys>(&self, base: R::Config, composite: bool) -> MixedConfig<R> {
        MixedConfig {
            base,
            seq: Arc::new(SeqShared {
                keys: Arc::clone(&self.keys),
                composite,
                levels: self.levels,
                breathing: self.breathing,
                body_bytes: ByteCounter::new(),
            }),
            mode: self.mode.clone(),
            sweep: Arc::new(SweepCursor::new()),
        }
    }
}

impl Family for Elastic {
    type U64 = Mixed<Sorted<u64>>;
    type U128 = Mixed<Sorted<u128>>;
    type Var = Mixed<Slotted>;
    type Options = ElasticForm;
    type Extra = ElasticExtra;

    fn extra(
        options: &IndexOptions,
        own: &ElasticForm,
        leaf_capacity: usize,
    ) -> Result<ElasticExtra, Error> {
        let invalid = |what: String| Error::InvalidConfig(what);
        let kind = match own {
            ElasticForm::Elastic(_) => IndexKind::Elastic,
            ElasticForm::SeqTree(_) => IndexKind::SeqTree,
        };
        if !Slotted::positions_fit(options.max_key_len, !options.unique) {
            return Err(invalid(format!(
                "the {kind} kind takes keys of at most 7,000 bytes (bit positions are 16-bit), \
                 not {}",
                options.max_key_len
            )));
        }
        // The leaf mode, the largest SeqTree capacity (which sets the default BlindiTree
        // levels), the options' own tree levels and breathing, and the key source.
        let (mode, capacity, levels, breathing, keys) = match own {
            ElasticForm::SeqTree(seq) => {
                let capacity = options.leaf_capacity.unwrap_or(SEQTREE_LEAF_CAPACITY);
                if !(4..=MAX_SEQ_CAPACITY).contains(&capacity) {
                    return Err(invalid(format!(
                        "SeqTree leaf capacity must be between 4 and {MAX_SEQ_CAPACITY}, not \
                         {capacity}"
                    )));
                }
                let mode = LeafMode::AllCompact { capacity };
                (
                    mode,
                    capacity,
                    seq.tree_levels,
                    seq.breathing,
                    &seq.key_source,
                )
            }
            ElasticForm::Elastic(elastic) => {
                elastic.validate(leaf_capacity)?;
                let policy = ElasticPolicy::new(elastic, leaf_capacity);
                let max = policy.compact_max;
                let mode = LeafMode::Elastic(Arc::new(policy));
                let keys = &elastic.key_source;
                (mode, max, elastic.tree_levels, elastic.breathing, keys)
            }
        };
        if levels.is_some_and(|l| l > MAX_LEVELS) {
            return Err(invalid(format!("at most {MAX_LEVELS} BlindiTree levels")));
        }
        Ok(ElasticExtra {
            kind,
            keys: Arc::clone(keys),
            levels: levels.unwrap_or_else(|| default_levels(capacity)),
            breathing: breathing.max(1),
            mode,
        })
    }

    fn kind(extra: &ElasticExtra) -> IndexKind {
        extra.kind
    }

    fn u64_config(base: SortedConfig, extra: &ElasticExtra) -> MixedConfig<Sorted<u64>> {
        extra.mixed(base, false)
    }

    fn u128_config(
        base: SortedConfig,
        extra: &ElasticExtra,
        composite: bool,
    ) -> MixedConfig<Sorted<u128>> {
        extra.mixed(base, composite)
    }

    fn var_config(base: SlottedConfig, extra: &ElasticExtra) -> MixedConfig<Slotted> {
        let composite = base.with_tid;
        extra.mixed(base, composite)
    }

    fn stats(extra: &ElasticExtra) -> Option<Box<dyn KindStats>> {
        Some(Box::new(Self::elastic_stats(extra)?))
    }

    fn extra_bytes(extra: &ElasticExtra) -> usize {
        // The policy and the per-tree SeqTree settings, each in an Arc.
        let policy = match extra.mode {
            LeafMode::Elastic(_) => std::mem::size_of::<ElasticPolicy>() + 16,
            LeafMode::AllCompact { .. } => 0,
        };
        // The sweep cursor's Arc, sized for the largest key type; the heap bytes of a
        // variable-length key it holds (one key) are not counted.
        let cursor = std::mem::size_of::<SweepCursor<crate::node::slotted::VarKey>>()
            .max(std::mem::size_of::<SweepCursor<u128>>())
            + 16;
        policy + std::mem::size_of::<SeqShared>() + 16 + cursor
    }
}

impl Elastic {
    fn elastic_stats(extra: &ElasticExtra) -> Option<ElasticStats> {
        match &extra.mode {
            LeafMode::Elastic(policy) => Some(policy.stats()),
            LeafMode::AllCompact { .. } => None,
        }
    }
}

/// The elastic B+-tree (and the all-SeqTree tree) as an [`crate::Index`].
pub type ElasticIndex = TreeIndex<Elastic>;

impl ElasticIndex {
    /// An empty `elastic` index with these options.
    pub fn elastic(options: &IndexOptions, elastic: &ElasticOptions) -> Result<Self, Error> {
        Self::with_options(options, &ElasticForm::Elastic(elastic.clone()))
    }

    /// An empty `seqtree` index with these options.
    pub fn seqtree(options: &IndexOptions, seqtree: &SeqTreeOptions) -> Result<Self, Error> {
        Self::with_options(options, &ElasticForm::SeqTree(seqtree.clone()))
    }

    /// What the elasticity algorithm has done (`None` for the `seqtree` kind).
    pub fn elastic_stats(&self) -> Option<ElasticStats> {
        Elastic::elastic_stats(&self.extra)
    }
}
