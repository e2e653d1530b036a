//! A data block's header: the part of a data block that the data layer links, that readers
//! validate and writers lock. The entries are in the block's body ([`super::body`]), which a
//! writer replaces whole (copy on write) when the keys change; the header stays in place, so
//! the chain is never relinked for an ordinary write.
//!
//! # Layout
//!
//! ```text
//! offset 0   lock   VersionLock: the block's optimistic version lock
//! offset 8   next   the next block in key order (null for the last)
//! offset 16  body   the body block (null: the block holds no entry)
//! offset 24  low    the low fence (3 words: key high, key low, tid)
//! offset 48  high   the high fence, equal to next's low fence (meaningless when next is null)
//! ```
//!
//! # Invariants
//!
//! The block holds exactly the positions `p` with `low <= p < high` (no upper bound for the
//! last block) that are in the data layer. `low` never rises: a split gives the upper part
//! of a block to a new block on its right, and a block emptied by the maintenance thread
//! hands its range to its right neighbour, lowering that one's `low`. So a reader that
//! reached a block whose `low` is at or below its probe finds the probe's block by following
//! `next` while the probe is at or above `high`. An obsolete block (unlinked) keeps its
//! `next`, which leads to the block that took over its range.
//!
//! `next`, `body`, `low` and `high` change only under the write lock; readers read them
//! between [`VersionLock::read_begin`] and a validation. The body pointer is stored with
//! release and loaded with acquire ordering, publishing the body's immutable contents.

use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

use crossbeam_epoch::Guard;

use super::body::Body;
use super::key::{Pos, PosCell, SbKey};
use crate::sync::VersionLock;

/// See the module docs.
#[repr(C)]
pub struct Block<K: SbKey> {
    /// The block's version lock.
    pub lock: VersionLock,
    next: AtomicPtr<Block<K>>,
    body: AtomicPtr<u8>,
    low: PosCell,
    high: PosCell,
    _key: PhantomData<K>,
}

const _: () = assert!(size_of::<Block<u64>>() == 72);

impl<K: SbKey> Block<K> {
    /// A block holding positions from `low` on, with no body and no successor.
    pub fn new(low: Pos<K>) -> Self {
        Self {
            lock: VersionLock::new(),
            next: AtomicPtr::new(std::ptr::null_mut()),
            body: AtomicPtr::new(std::ptr::null_mut()),
            low: PosCell::new(low),
            high: PosCell::new(low),
            _key: PhantomData,
        }
    }

    /// The next block (null for the last).
    #[inline]
    pub fn next(&self) -> *mut Block<K> {
        self.next.load(Ordering::Acquire)
    }

    /// The low fence.
    #[inline]
    pub fn low(&self) -> Pos<K> {
        self.low.load()
    }

    /// The high fence (meaningful when `next` is not null).
    #[inline]
    pub fn high(&self) -> Pos<K> {
        self.high.load()
    }

    /// The body's address (null: no entries).
    #[inline]
    pub fn body_ptr(&self) -> *mut u8 {
        self.body.load(Ordering::Acquire)
    }

    /// The body, read under `guard` (bodies are freed through the epoch collector).
    #[inline]
    pub fn body<'g>(&self, _guard: &'g Guard) -> Option<Body<'g, K>> {
        // SAFETY: a non-null body pointer was published by `set_body` (release store, loaded
        // with acquire here) after its block was built, and a replaced body is retired to the
        // epoch collector, so it stays allocated while `guard` is pinned.
        NonNull::new(self.body_ptr()).map(|p| unsafe { Body::at(p) })
    }

    // ----- writes: under the write lock, or before the block is published -----------------

    /// Sets the next block.
    pub fn set_next(&self, next: *mut Block<K>) {
        self.next.store(next, Ordering::Release);
    }

    /// Sets the high fence.
    pub fn set_high(&self, high: Pos<K>) {
        self.high.store(high);
    }

    /// Publishes `body` (null: no entries) and returns the previous one.
    pub fn set_body(&self, body: *mut u8) -> *mut u8 {
        self.body.swap(body, Ordering::AcqRel)
    }
}
