//! The hybrid index (Zhang et al., SIGMOD 2016, "dual-stage transformation"): a small
//! dynamic stage that takes every write, in front of a compact, read-optimized static stage
//! that holds the bulk of the entries, merged periodically.
//!
//! # Layers
//!
//! The index is a stack of layers, read from the top: the **active** dynamic stage (an OLC
//! B+-tree, [`dynamic`]) takes every write; while a merge runs, the stage it is merging sits
//! below it, **frozen**; at the bottom is the **static** stage ([`static_stage`]), a packed,
//! read-only B+-tree. An entry in a higher layer overrides the same key (unique) or pair
//! (non-unique) below it, and a tombstone hides it: so an update of a static key inserts into
//! the dynamic stage, shadowing the old entry, and a delete of a static key leaves a
//! tombstone; the merge applies both to the static stage and drops them. A Bloom filter over
//! each dynamic stage's keys lets most point reads of static keys skip the dynamic stages.
//!
//! # Merging without stopping the world
//!
//! When the active stage reaches the trigger (by default a tenth of the static stage's
//! entries), a merge freezes it behind a fresh active stage, waits for the writers already
//! inside it to leave (one tree operation each), and builds the next static stage from the
//! old one and the frozen stage, in key order, segment by segment. Readers and writers carry
//! on meanwhile: every operation reads one consistent *view* (the layer stack at some
//! instant, pinned by an epoch), and since a frozen stage's content is also in any static
//! stage built from it, every view gives the same answers. Intermediate static stages are
//! published as the merge goes, so old segments are freed as they are consumed and the
//! merge's temporary memory stays near the size of the dynamic stage. [`MergeMode::Blocking`]
//! is the paper's merge: it runs on the writer that hit the trigger while every other
//! operation waits.
//!
//! # Consistency
//!
//! Every single-key operation is linearizable: each write is one atomic operation on the
//! active stage's tree (writers of one key serialise on a lock stripe so that
//! read-check-write sequences such as `remove_pair` are atomic), and the layers below the
//! active stage never change while it is active. Scans keep the crate-wide scan contract.

pub mod bloom;
pub mod dynamic;
mod index;
pub mod layers;
mod merge;
pub mod static_index;
pub mod static_stage;

pub use index::{HybridIndex, HybridStats, MergeRecord};
pub use static_stage::Compression;

/// When a merge starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MergeTrigger {
    /// When the static stage holds at most this many times the active dynamic stage's
    /// entries (the paper's ratio-based trigger; default 10).
    Ratio(f64),
    /// When the active dynamic stage holds this many entries.
    Constant(usize),
}

/// Which entries of the dynamic stage a merge moves to the static stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStrategy {
    /// Every entry (the paper's default).
    All,
    /// Entries not read or written since the previous merge; recently used ones stay in a
    /// dynamic stage (deletes are always merged).
    Cold,
}

/// How a merge runs relative to other operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMode {
    /// On a background thread while reads and writes go on (default).
    Background,
    /// On the writer that hit the trigger, with every other operation waiting (the paper's
    /// merge).
    Blocking,
}

/// Options of the hybrid index; [`HybridOptions::default`] has the paper's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridOptions {
    /// When a merge starts.
    pub trigger: MergeTrigger,
    /// No merge starts while the active stage holds fewer entries than this (default 4096),
    /// so a small index does not merge on every write.
    pub min_merge: usize,
    /// What a merge moves.
    pub strategy: MergeStrategy,
    /// How a merge runs.
    pub mode: MergeMode,
    /// Whether the static stage's leaf blocks are LZ4-compressed.
    pub compression: Compression,
    /// Decompressed blocks cached (CLOCK) when compressed.
    pub cache_blocks: usize,
    /// Bloom filter bits per expected dynamic-stage key (default 10, about 1% false
    /// positives).
    pub bloom_bits_per_key: usize,
    /// A merge publishes its progress after this many new static segments (default 16).
    pub publish_every: usize,
}

impl Default for HybridOptions {
    fn default() -> Self {
        Self {
            trigger: MergeTrigger::Ratio(10.0),
            min_merge: 4096,
            strategy: MergeStrategy::All,
            mode: MergeMode::Background,
            compression: Compression::None,
            cache_blocks: 1024,
            bloom_bits_per_key: 10,
            publish_every: 16,
        }
    }
}

impl HybridOptions {
    /// The defaults with LZ4-compressed static leaf blocks (the `hybrid-compressed` kind).
    pub fn compressed() -> Self {
        Self::default().for_kind(crate::IndexKind::HybridCompressed)
    }

    /// These options for the hybrid `kind`: LZ4-compressed static leaf blocks for
    /// `hybrid-compressed`, uncompressed ones for every other kind.
    pub fn for_kind(self, kind: crate::IndexKind) -> Self {
        let compression = match kind {
            crate::IndexKind::HybridCompressed => Compression::Lz4,
            _ => Compression::None,
        };
        Self {
            compression,
            ..self
        }
    }

    /// Checks that the options can be honoured.
    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |msg: String| Err(crate::Error::InvalidConfig(msg));
        match self.trigger {
            MergeTrigger::Ratio(r) if !(r.is_finite() && (1e-3..=1e9).contains(&r)) => {
                return bad(format!(
                    "merge ratio must be a positive number between 0.001 and 1e9, not {r}"
                ))
            }
            MergeTrigger::Constant(0) => {
                return bad("constant merge trigger must be at least 1 entry".into())
            }
            _ => {}
        }
        if self.publish_every == 0 {
            return bad("publish_every must be at least 1 segment".into());
        }
        if self.bloom_bits_per_key == 0 || self.bloom_bits_per_key > 64 {
            return bad(format!(
                "Bloom filter bits per key must be between 1 and 64, not {}",
                self.bloom_bits_per_key
            ));
        }
        if self.compression == Compression::Lz4 && self.cache_blocks == 0 {
            return bad("a compressed static stage needs a cache of at least 1 block".into());
        }
        Ok(())
    }

    /// Keys a new active stage's Bloom filter is sized for, given the static stage's
    /// entries: twice the merge threshold (merges can lag behind writers), but no more than
    /// the static stage plus 64Ki, so a huge constant trigger does not allocate a huge filter
    /// (a filter holding more keys than it was sized for only answers "maybe" more often).
    pub fn filter_keys(&self, static_len: usize) -> usize {
        self.merge_threshold(static_len)
            .saturating_mul(2)
            .min(static_len.saturating_add(65_536))
    }

    /// Active-stage entries at which a merge starts, given the static stage's entries.
    pub fn merge_threshold(&self, static_len: usize) -> usize {
        let by_trigger = match self.trigger {
            MergeTrigger::Ratio(r) => (static_len as f64 / r) as usize,
            MergeTrigger::Constant(n) => n,
        };
        by_trigger.max(self.min_merge).max(1)
    }
}
