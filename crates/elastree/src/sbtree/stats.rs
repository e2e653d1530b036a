//! What an SB-tree has done: [`Counters`] kept while it runs, [`SbTreeStats`] read from them
//! and from the structure (through [`crate::Index::stats`]).

use crate::counter::StripedCount;
use crate::stats::KindStats;

/// Counters bumped on the slow paths (the shortcut counts nothing). Striped, so threads do
/// not share a cache line to count.
#[derive(Default)]
pub struct Counters {
    /// Segments sealed.
    pub seals: StripedCount,
    /// Entries moved from sealed segments to data blocks.
    pub converted: StripedCount,
    /// Inserts below the frontier that went to a data block.
    pub delayed: StripedCount,
    /// Inserts in the frontier below their run's last append (into a late run).
    pub late: StripedCount,
    /// Inserts into a sealed segment's spill while it converted.
    pub spilled: StripedCount,
    /// Inserts that found their position live in another thread's run right after
    /// publishing it: two inserts of one key that met (see `protocol.rs`), or a late insert
    /// of a key a peer's run already held (the late shortcut looks at peers only after).
    pub met: StripedCount,
}

/// An SB-tree's statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SbTreeStats {
    /// Segments sealed and converted into data blocks.
    pub seals: usize,
    /// Entries the conversions moved to data blocks.
    pub converted: usize,
    /// Inserts below the frontier, written into a data block (delayed entries).
    pub delayed_inserts: usize,
    /// Inserts into the frontier below their thread's last key (into the thread's late run).
    pub late_inserts: usize,
    /// Inserts into a sealed segment's spill while it converted (moved to data blocks at
    /// the end of the conversion).
    pub spilled_inserts: usize,
    /// Inserts that found their position live in another thread's run after publishing
    /// it (and deleted the other entry).
    pub met: usize,
    /// Data blocks in the chain.
    pub data_blocks: usize,
    /// Blocks the search layer indexes.
    pub indexed_blocks: usize,
    /// Rebuilds of the search layer.
    pub search_rebuilds: usize,
    /// Entries in the data layer.
    pub data_entries: usize,
}

impl KindStats for SbTreeStats {}
