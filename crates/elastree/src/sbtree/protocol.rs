//! The hand-over protocol between a thread appending to its run, the thread that seals the
//! run's segment, the run's peers (the other runs of the segment) and its readers: the few
//! atomic words of a run ([`RunHead`]) and of a segment ([`SegmentHead`]) and the orderings
//! on them. It is kept apart from the entries' storage so that `tests/loom_sbtree.rs` model
//! checks exactly this code (its atomics are loom's under the `loom` feature).
//!
//! # The append (owner)
//!
//! 1. [`RunHead::begin`]: mark an insert in flight;
//! 2. write the entry at slot `c` and [`RunHead::widen`] the run's key range to cover it;
//! 3. [`RunHead::publish`]`(c + 1)`: a release store of the count;
//! 4. [`RunHead::settle`]: a light barrier ([`crate::sync::asymmetric::light`]), then read
//!    whether the segment is closed. Open: the entry is in the segment. Closed: wait for the
//!    sealer's captured count; the entry is in the sealed segment if `c` is below it, else it
//!    was not taken and the insert goes elsewhere;
//! 5. if the segment has other runs: a sequentially consistent fence, then check the peers
//!    ([`RunHead::covers`], then their entries) for the same position;
//! 6. [`RunHead::end`].
//!
//! A thread joining a segment claims a slot, stores its run, passes the heavy barrier and
//! reads `closed` ([`SegmentHead::join`]).
//!
//! # The seal
//!
//! 1. [`SegmentHead::close`]: store `closed`, then the heavy barrier
//!    ([`crate::sync::asymmetric::heavy`]);
//! 2. [`RunHead::capture`] every run: the count it reads is the run's captured length;
//! 3. [`RunHead::drain`] every run: wait until no insert is in flight;
//! 4. convert the captured entries.
//!
//! # Why it holds
//!
//! * *Every published entry is captured or its owner learns it was not.* The owner's count
//!   store precedes its light barrier, the sealer's `closed` store precedes its heavy one:
//!   the pair orders like two fences (see [`crate::sync::asymmetric`]), so either the
//!   sealer's count load sees the count, or the owner's `closed` load sees `closed` and it
//!   compares its slot with the captured count. A joiner's claim pairs the same way with the
//!   sealer's load of the slot count, and with the owners' loads of it: an owner that does
//!   not see a new run in its segment published before the joiner looks at its run.
//! * *Readers never see an entry that is later dropped.* A reader loads the count (acquire),
//!   reads the entries, then [`RunHead::committed`]: a fence and the `closed` load. If it sees
//!   the segment open, its fence precedes the sealer's, so the sealer's count load sees at
//!   least what the reader saw; if closed, it clamps to the captured count.
//! * *Two inserts of one position both published: at least one sees the other.* Each owner
//!   widens its range and publishes before its fence and reads the peers' ranges and counts
//!   after it, so of the two fences the later one's owner sees the other's entry. It resolves
//!   the pair under the runs' locks before its insert ends.
//! * *The sealer converts only after every such resolution.* An owner marks its insert in
//!   flight before publishing (the release store of the count carries the mark); a sealer
//!   whose captured count includes the entry therefore sees the mark, and [`RunHead::drain`]
//!   waits until the insert has ended.

use crate::sync::asymmetric::{heavy, light};
use crate::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering, SpinWait};

/// `captured` before the sealer has captured the run.
const NOT_CAPTURED: u64 = u64::MAX;

/// The protocol words of one run. Keys are two words (high, low), compared as one integer.
///
/// Layout: the words the owner writes on every append (`count`, `in_flight`) share the first
/// cache line; the rest (`RunBounds`) are on a line of their own, written rarely (a range
/// widens a few times per 64 appends), so that the peers that load them on every append of
/// their own find them in their caches (on one line with `count`, each such load missed).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct RunHead {
    count: AtomicU64,
    in_flight: AtomicBool,
    cold: RunBounds,
}

/// The rarely written words of a run: its captured count and its key range.
#[derive(Debug)]
#[repr(C, align(64))]
struct RunBounds {
    captured: AtomicU64,
    floor: [AtomicU64; 2],
    ceiling: [AtomicU64; 2],
}

/// Where an appended entry ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The segment is open: the entry is in it.
    Open,
    /// The segment was sealed and the sealer took the entry.
    Captured,
    /// The segment was sealed without the entry: insert it elsewhere.
    Dropped,
}

impl Default for RunHead {
    fn default() -> Self {
        Self::new()
    }
}

fn load_key(words: &[AtomicU64; 2]) -> [u64; 2] {
    [
        words[0].load(Ordering::Relaxed),
        words[1].load(Ordering::Relaxed),
    ]
}

/// A two-word key as the one integer it is (high word first): compared in one step where
/// an array comparison would loop over the words.
#[inline(always)]
pub fn int(key: [u64; 2]) -> u128 {
    (u128::from(key[0]) << 64) | u128::from(key[1])
}

fn store_key(words: &[AtomicU64; 2], key: [u64; 2]) {
    words[0].store(key[0], Ordering::Relaxed);
    words[1].store(key[1], Ordering::Relaxed);
}

impl RunHead {
    /// A run with no entries, covering no key.
    pub fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
            in_flight: AtomicBool::new(false),
            cold: RunBounds {
                captured: AtomicU64::new(NOT_CAPTURED),
                floor: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
                ceiling: [AtomicU64::new(0), AtomicU64::new(0)],
            },
        }
    }

    // ----- the owner ------------------------------------------------------------------

    /// Marks an insert in flight (before its entry is published).
    #[inline]
    pub fn begin(&self) {
        self.in_flight.store(true, Ordering::Relaxed);
    }

    /// Widens the run's key range to cover `key`: lowers the floor to it, or raises the
    /// ceiling to `ahead()` (at least `key`) when `key` is above it. Before the publication.
    #[inline(always)]
    pub fn widen(&self, key: [u64; 2], ahead: impl FnOnce() -> [u64; 2]) {
        let at = int(key);
        if at < int(load_key(&self.cold.floor)) {
            store_key(&self.cold.floor, key);
        }
        if at > int(load_key(&self.cold.ceiling)) {
            self.raise_ceiling(key, ahead());
        }
    }

    /// [`RunHead::widen`] for a key at or above the floor (an append after the run's first
    /// one): only the ceiling can move.
    #[inline(always)]
    pub fn widen_up(&self, key: [u64; 2], ahead: impl FnOnce() -> [u64; 2]) {
        if int(key) > int(load_key(&self.cold.ceiling)) {
            self.raise_ceiling(key, ahead());
        }
    }

    /// Raises the ceiling to `ahead`, at least to `key` (once per many appends: out of line).
    #[cold]
    #[inline(never)]
    fn raise_ceiling(&self, key: [u64; 2], ahead: [u64; 2]) {
        store_key(&self.cold.ceiling, ahead.max(key));
    }

    /// Publishes the first `count` entries (a release store).
    #[inline]
    pub fn publish(&self, count: u64) {
        self.count.store(count, Ordering::Release);
    }

    /// After [`RunHead::publish`] of the entry at `slot`: where it ended up.
    #[inline]
    pub fn settle(&self, segment: &SegmentHead, slot: u64) -> Settled {
        light();
        if !segment.closed.load(Ordering::Relaxed) {
            return Settled::Open;
        }
        self.settle_closed(slot)
    }

    /// [`RunHead::settle`] in a closed segment: whether the sealer took entry `slot`.
    #[cold]
    #[inline(never)]
    fn settle_closed(&self, slot: u64) -> Settled {
        if slot < self.wait_captured() {
            Settled::Captured
        } else {
            Settled::Dropped
        }
    }

    /// Ends the insert begun by [`RunHead::begin`].
    #[inline]
    pub fn end(&self) {
        self.in_flight.store(false, Ordering::Release);
    }

    // ----- readers and peers ----------------------------------------------------------

    /// The entries published (acquire: they may be read).
    #[inline]
    pub fn published(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Whether the run's key range covers `key` (after the caller's fence: see the module
    /// docs).
    #[inline]
    pub fn covers(&self, key: [u64; 2]) -> bool {
        let at = int(key);
        int(load_key(&self.cold.floor)) <= at && at <= int(load_key(&self.cold.ceiling))
    }

    /// The run's ceiling as one integer (high word first): for its owner, which keeps a
    /// copy to test its appends against without loading the shared words.
    pub fn ceiling_int(&self) -> u128 {
        int(load_key(&self.cold.ceiling))
    }

    /// The run's key range (floor, ceiling); empty when the floor is above the ceiling.
    pub fn range(&self) -> ([u64; 2], [u64; 2]) {
        (load_key(&self.cold.floor), load_key(&self.cold.ceiling))
    }

    /// Of the first `seen` entries (read after [`RunHead::published`] returned at least
    /// `seen`), how many are in the segment for good: all while it is open, else those the
    /// sealer captured.
    #[inline]
    pub fn committed(&self, segment: &SegmentHead, seen: u64) -> u64 {
        if segment.open_after_fence() {
            seen
        } else {
            seen.min(self.wait_captured())
        }
    }

    /// The captured count, waiting for the sealer (which captures every run right after
    /// closing the segment).
    pub fn wait_captured(&self) -> u64 {
        let wait = SpinWait::new();
        loop {
            let captured = self.cold.captured.load(Ordering::Acquire);
            if captured != NOT_CAPTURED {
                return captured;
            }
            wait.wait();
        }
    }

    /// The captured count, if the run was captured.
    pub fn captured(&self) -> Option<u64> {
        let captured = self.cold.captured.load(Ordering::Acquire);
        (captured != NOT_CAPTURED).then_some(captured)
    }

    // ----- the sealer -----------------------------------------------------------------

    /// Captures the run (after [`SegmentHead::close`]): its published count, from now on the
    /// run's length for every reader.
    pub fn capture(&self) -> u64 {
        let count = self.count.load(Ordering::Acquire);
        self.set_captured(count);
        count
    }

    /// Records `count` as the captured length (a run captured under its own lock: the late
    /// runs).
    pub fn set_captured(&self, count: u64) {
        self.cold.captured.store(count, Ordering::Release);
    }

    /// Waits until no insert into the run is in flight (after [`RunHead::capture`]).
    pub fn drain(&self) {
        let wait = SpinWait::new();
        while self.in_flight.load(Ordering::Acquire) {
            wait.wait();
        }
    }
}

/// The protocol words of one segment.
#[derive(Debug, Default)]
pub struct SegmentHead {
    closed: AtomicBool,
    used: AtomicUsize,
}

impl SegmentHead {
    /// An open segment with no run.
    pub fn new() -> Self {
        Self::default()
    }

    /// Claims the next run slot (a thread's first insert into the segment); its run must be
    /// stored in the slot, then [`SegmentHead::join`] called, before the thread publishes
    /// anything.
    pub fn claim(&self) -> usize {
        self.used.fetch_add(1, Ordering::AcqRel)
    }

    /// After a claim and storing the run: the heavy barrier, then whether the segment is
    /// still open (if not, the run takes nothing).
    pub fn join(&self) -> bool {
        heavy();
        !self.closed.load(Ordering::Relaxed)
    }

    /// Slots claimed so far (after the caller's fence, for peers).
    #[inline]
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the segment was closed (a plain load: callers that must know fence first).
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// A reader's check after reading entries: a fence, then whether the segment is still
    /// open. If it is, the sealer (whose `closed` store and barrier come later) captures at
    /// least what the reader saw; if not, the reader keeps only the captured entries.
    #[inline]
    pub fn open_after_fence(&self) -> bool {
        fence(Ordering::SeqCst);
        !self.closed.load(Ordering::Relaxed)
    }

    /// Closes the segment: no insert published after an owner sees this is taken.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        heavy();
    }
}
