//! The elastic tree and the all-SeqTree tree as a [`Family`] of [`Mixed`] representations.

use std::sync::Arc;

use super::index::{Family, TreeIndex};
use crate::elastic::{default_levels, ElasticPolicy, ElasticStats, SweepCursor};
use crate::index::{Error, IndexBuilder, IndexKind};
use crate::mem::ByteCounter;
use crate::node::blind::BlindKeys;
use crate::node::mixed::{LeafMode, Mixed, MixedConfig};
use crate::node::seqtree::{SeqShared, MAX_LEVELS, MAX_SEQ_CAPACITY};
use crate::node::slotted::{Slotted, SlottedConfig};
use crate::node::sorted::{Sorted, SortedConfig};
use crate::table::KeySource;

/// The capacity of every leaf of a `seqtree` index unless `leaf_capacity` says otherwise
/// (the paper's SeqTree128).
pub const SEQTREE_LEAF_CAPACITY: usize = 128;

/// The representations of the `elastic` and `seqtree` kinds.
pub struct Elastic;

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
    type Extra = ElasticExtra;

    fn extra(options: &IndexBuilder, leaf_capacity: usize) -> Result<ElasticExtra, Error> {
        let invalid = |what: String| Error::InvalidConfig(what);
        let kind = options.kind;
        let keys = options.key_source.clone().ok_or_else(|| {
            invalid(format!(
                "the {kind} kind loads keys from the table: give it a key source \
                 (IndexBuilder::key_source)"
            ))
        })?;
        if !Slotted::positions_fit(options.max_key_len, !options.unique) {
            return Err(invalid(format!(
                "the {kind} kind takes keys of at most 7,000 bytes (bit positions are 16-bit), \
                 not {}",
                options.max_key_len
            )));
        }
        // The leaf mode, the largest SeqTree capacity (which sets the default BlindiTree
        // levels), and the options' own tree levels and breathing, if any.
        let (mode, capacity, levels, breathing) = match kind {
            IndexKind::SeqTree => {
                if options.elastic.is_some() {
                    return Err(invalid("a budget applies to the elastic kind only".into()));
                }
                let capacity = options.leaf_capacity.unwrap_or(SEQTREE_LEAF_CAPACITY);
                if !(4..=MAX_SEQ_CAPACITY).contains(&capacity) {
                    return Err(invalid(format!(
                        "SeqTree leaf capacity must be between 4 and {MAX_SEQ_CAPACITY}, not \
                         {capacity}"
                    )));
                }
                (LeafMode::AllCompact { capacity }, capacity, None, None)
            }
            _ => {
                let elastic = options.elastic.as_ref().ok_or_else(|| {
                    invalid("the elastic kind needs a byte budget (IndexBuilder::budget)".into())
                })?;
                elastic.validate(leaf_capacity)?;
                let policy = ElasticPolicy::new(elastic, leaf_capacity);
                let max = policy.compact_max;
                let mode = LeafMode::Elastic(Arc::new(policy));
                (mode, max, elastic.tree_levels, Some(elastic.breathing))
            }
        };
        let levels = options.tree_levels.or(levels);
        if levels.is_some_and(|l| l > MAX_LEVELS) {
            return Err(invalid(format!("at most {MAX_LEVELS} BlindiTree levels")));
        }
        Ok(ElasticExtra {
            kind,
            keys: keys.0,
            levels: levels.unwrap_or_else(|| default_levels(capacity)),
            breathing: options.breathing.or(breathing).unwrap_or(4).max(1),
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

    fn stats(extra: &ElasticExtra) -> Option<ElasticStats> {
        match &extra.mode {
            LeafMode::Elastic(policy) => Some(policy.stats()),
            LeafMode::AllCompact { .. } => None,
        }
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

/// The elastic B+-tree (and the all-SeqTree tree) as an [`crate::Index`].
pub type ElasticIndex = TreeIndex<Elastic>;
