//! The SB-tree (Jung et al., "SB-Tree: A B+-Tree for In-Memory Time Series Databases With
//! Segmented Block", IEEE Access 2025): an ordered index for data whose keys mostly arrive
//! in increasing order (a timestamp followed by a sensor id), some of them late.
//!
//! # Structure
//!
//! ```text
//!  search layer   packed B+-tree over the data blocks' low fences     (search.rs)
//!       |           built bottom up by the maintenance thread, read without locks;
//!       v           it may lag: readers move right along the data layer
//!  data layer     data blocks in key order, each a header (lock, next, fences) and a
//!                 4 KiB body: N-ary search table, keys, tids, late slots  (block.rs, body.rs)
//!       ^
//!       | conversion: merge the runs' sorted parts, cut into data blocks, append at the end
//!       |
//!  segments       the frontier takes every entry above its lower bound; sealed ones wait
//!                 for their conversion. A segment is a set of runs, one per thread:
//!                 an append run (the shortcut) and a sorted late run   (run.rs, late.rs)
//! ```
//!
//! Keys are fixed-width integers (`key::SbKey`: 8-byte keys as `u64`, 16-byte keys as
//! `u128`); a non-unique index orders entries by (key, tid) (`key::Pos`).
//!
//! # Inserts
//!
//! * **The shortcut** (`shortcut`): an entry above the frontier's lower bound and above its
//!   thread's last append is appended to the thread's run: no lock, no shared write, one
//!   fence, then a look at the other threads' runs whose key ranges cover the key (see
//!   [`protocol`] for why two inserts of one key always meet).
//! * **Late entries in the frontier** (above its lower bound, below the thread's last
//!   append) go into the thread's late run (`late`), sorted blocks under the run's lock.
//! * **Entries for a sealed segment** (below the frontier, above the next older segment's
//!   lower bound) go into its spill while it converts (`segment`), unless they replace a
//!   tid it holds (those wait for the conversion, then go on as below).
//! * **Delayed entries** (below every segment) go through the search layer to their data
//!   block, under its version lock: into the block's late slots while there are some, else
//!   the block's body is rewritten with them, and split when it no longer fits one body.
//!   Rewrites and splits take one lock: new blocks are linked to the right, B-link style.
//! * **The seal**: when a run fills (or every run slot of the segment is taken), its thread
//!   seals the segment ([`protocol`]), installs a new frontier whose lower bound is the sealed
//!   segment's largest position, and queues the sealed one for its conversion: its runs are
//!   read in place, their sorted parts merged as the bodies are built, and appended to the
//!   data layer as full blocks (keys as 32-bit offsets when they fit). The maintenance
//!   thread converts, so an inserting thread keeps appending meanwhile; inserts that leave
//!   the shortcut convert too while more than two segments wait, and whoever converts
//!   extends the search layer over the new blocks.
//!
//! # Reads
//!
//! A position's place is the newest segment whose lower bound is below it, else the data
//! layer (`tree::SbTree::route`). In a segment, a reader searches every run whose key
//! range covers the position; in the data layer it searches the search layer (the newest
//! 128 blocks' fences first, where delayed keys land, then a descent from the top), then moves
//! right while the position is at or above the block's high fence, then searches the
//! block's N-ary table, one bucket of its keys (vector compares: `simd`) and its late slots,
//! and validates the block's version. Scans (`scan`) walk data blocks left to right (or
//! re-descend block by block for descending scans) and merge the runs of the segments.
//!
//! # Memory
//!
//! Every block comes from the tree's block allocator (`alloc`), which keeps freed blocks
//! on per-thread free lists, and whose next huge-page chunk the maintenance thread faults in
//! ahead of need; every byte (blocks, headers, the search layer, runs, segments, that
//! reserve) is counted ([`crate::Index::memory`]).

mod alloc;
mod bits;
mod block;
mod body;
mod check;
mod data;
mod index;
mod key;
mod late;
mod maintain;
pub mod protocol;
mod run;
mod scan;
mod search;
mod segment;
mod shortcut;
mod simd;
mod stats;
mod tree;

use std::sync::{Mutex, MutexGuard};

pub use index::{SbTreeIndex, SbTreeOptions};
pub use stats::SbTreeStats;

use alloc::{BlockAlloc, BLOCK_ALIGN};
use body::{Form, Shape};
use key::SbKey;
use simd::Kernel;

use crate::mem::ByteCounter;

/// The sizes and settings of one tree, resolved from its options.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// Bytes of every block (bodies and run blocks).
    pub block_bytes: usize,
    /// Keys per bucket of the N-ary table.
    pub bucket: usize,
    /// The most main entries a body holds.
    pub cap: usize,
    /// Late slots of the first late level (see [`Geometry::late_levels`]).
    pub late_slots: usize,
    /// Non-unique: entries ordered by (key, tid).
    pub pairs: bool,
    /// The counting kernel of searches.
    pub kernel: Kernel,
    /// Fan-out of the search layer.
    pub fanout: usize,
    /// Entries per run block (of an append run; a late run cuts its blocks in four).
    pub run_entries: usize,
    /// Blocks of an append run.
    pub run_blocks: usize,
    /// Late slots of a body at each late level: none (no delayed entries expected), then
    /// `late_slots` times 1, 2, 4 and 8, in at most half a block (see
    /// [`Geometry::late_level`]).
    pub late_levels: [usize; LATE_LEVELS],
    /// The capacities of a body in each form (`body::FORMS`) at each late level.
    pub capacities: [[usize; 4]; LATE_LEVELS],
}

/// Late levels of a body (see [`Geometry::late_levels`]).
pub const LATE_LEVELS: usize = 5;

impl Geometry {
    /// The geometry for keys `K` from the options (already validated).
    pub fn new<K: SbKey>(
        own: &SbTreeOptions,
        pairs: bool,
        leaf_capacity: Option<usize>,
        inner_capacity: Option<usize>,
    ) -> Self {
        let entry = K::BYTES + 8;
        let (block_bytes, cap, late_slots) = match leaf_capacity {
            None => (own.block_bytes, usize::MAX, own.late_slots),
            Some(cap) => {
                // The smallest block that holds `cap` full entries with a few late slots.
                let late = own.late_slots.min(cap.div_ceil(2)).max(1);
                let mut bytes = BLOCK_ALIGN * 4;
                while Shape::capacity::<K>(Form::Full, Form::Full, late, own.bucket, bytes, cap)
                    < cap
                {
                    bytes += BLOCK_ALIGN;
                }
                (bytes, cap, late)
            }
        };
        let caps = |late| body::capacities::<K>(late, own.bucket, block_bytes, cap);
        let per_block = (block_bytes / entry).min(cap);
        // A late slot holds a full key and tid: at most half the block goes to them.
        let most = (block_bytes / 2 / entry).max(1);
        let late_levels = [0, 1, 2, 4, 8].map(|times| (times * late_slots).min(most));
        Self {
            block_bytes,
            bucket: own.bucket,
            cap,
            late_slots,
            pairs,
            kernel: if own.simd {
                Kernel::detect()
            } else {
                Kernel::Portable
            },
            fanout: inner_capacity.unwrap_or(own.fanout),
            // A power of two, so an entry's block and slot are a shift and a mask away.
            run_entries: 1 << per_block.ilog2(),
            run_blocks: own.run_blocks,
            late_levels,
            capacities: late_levels.map(caps),
        }
    }

    /// The late slots and capacities at late level `level`.
    pub fn late(&self, level: usize) -> (usize, [usize; 4]) {
        (self.late_levels[level], self.capacities[level])
    }

    /// The lowest late level whose share of late slots in a full compact body is at least
    /// `share` (of the body's entries that will arrive late), or the highest.
    pub fn late_level(&self, share: f64) -> usize {
        (0..LATE_LEVELS)
            .find(|&level| {
                let late = self.late_levels[level] as f64;
                let main = self.capacities[level][0] as f64;
                late >= share * (late + main)
            })
            .unwrap_or(LATE_LEVELS - 1)
    }
}

/// What deferred frees need: the block allocator and the byte counts, shared by the tree
/// and the epoch collector's closures.
pub struct Resources {
    /// Every block.
    pub blocks: BlockAlloc,
    /// Data block headers.
    pub headers: ByteCounter,
    /// Search layers.
    pub search: ByteCounter,
    /// Blocks held by runs.
    pub run_blocks: ByteCounter,
    /// Runs and segments (besides their blocks).
    pub aux: ByteCounter,
}

impl Resources {
    fn new(block_bytes: usize) -> Self {
        Self {
            blocks: BlockAlloc::new(block_bytes),
            headers: ByteCounter::new(),
            search: ByteCounter::new(),
            run_blocks: ByteCounter::new(),
            aux: ByteCounter::new(),
        }
    }
}

/// Locks a mutex whether or not a panic poisoned it (the tree's mutexes guard state that a
/// panic leaves consistent: lists and the maintenance cursor).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
