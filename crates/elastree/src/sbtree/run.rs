//! A run: one thread's share of a segment, the paper's per-thread data blocks. Entries are
//! key-tid pairs side by side (an append writes one place), in blocks of the block allocator.
//!
//! A run has two parts:
//!
//! * the **append run**: entries in ascending position order, each above the previous one,
//!   written only by the owner at the end and published by the count of
//!   [`super::protocol::RunHead`]; up to `run_blocks` blocks, allocated as it grows;
//! * the **late run**: one block of entries whose positions are in the segment but below the
//!   owner's last append (a delayed key that still belongs to the newest data), kept sorted;
//!   the owner inserts into it under the run's lock.
//!
//! # Layout of an entry
//!
//! ```text
//! 8-byte keys:   word 0 key,                    word 1 tid
//! 16-byte keys:  word 0 key high, word 1 low,    word 2 tid
//! ```
//!
//! # Invariants
//!
//! Entries below the published count of the append run never move; their keys never change,
//! their tids and dead bits change only under [`Run::mods`]. The late run changes only under
//! [`Run::mods`] (readers validate its version). Every entry's key lies within its part's
//! floor and ceiling ([`super::protocol::RunHead::covers`]). An entry whose dead bit is set
//! is not in the index. Only the owner thread touches [`Owner`].

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use super::key::{entry_words, load_entry, store_entry, Pos, SbKey};
use super::protocol::RunHead;
use super::Resources;
use crate::sync::{VersionLock, WriteGuard};

/// What only the owner thread reads and writes: the shortcut's state. An append is taken
/// by the shortcut when its position is above `floor` and `count < limit`; it then writes
/// its entry at `next` and tests its key against `ceiling`, with no other look at the run.
pub struct Owner<K: SbKey> {
    /// Entries appended (the owner's copy of the published count).
    pub count: u64,
    /// Appends go above this: the position of the last append, or before the first one the
    /// segment's lower bound (`Pos::MIN` for none; the first append takes the slow path).
    pub floor: Pos<K>,
    /// The first appended key (the ceiling's projection measures gaps from it).
    pub first: K,
    /// Append entries below this have their block: the shortcut's one test for room
    /// (set by the slow path when it gives the run a block, [`Run::room_end`]; lowered to
    /// `count` when the segment is sealed without an append, so none follows).
    pub limit: u64,
    /// While `count < limit`: the first word of append entry `count`'s slot.
    pub next: *const AtomicU64,
    /// The owner's copy of the run's ceiling ([`RunHead::ceiling_int`]).
    pub ceiling: u128,
    /// Per peer slot: two published positions of the peer's append run with nothing of the
    /// peer's between them (its append run only grows at its end).
    pub gaps: Vec<Option<(Pos<K>, Pos<K>)>>,
}

/// See the module docs.
pub struct Run<K: SbKey> {
    /// The append run's protocol words.
    pub head: RunHead,
    /// The late run's count, captured count and key range (its in-flight mark is unused: the
    /// owner's inserts are marked on `head`).
    pub late_head: RunHead,
    /// Guards changes to published entries (tids, dead bits) and the whole late run; its
    /// version validates reads of the late run.
    pub mods: VersionLock,
    late_closed: AtomicBool,
    blocks: Box<[AtomicPtr<u8>]>,
    late: AtomicPtr<u8>,
    /// Dead bits: the append run's entries, then the late run's.
    dead: Box<[AtomicU64]>,
    /// Entries per block: a power of two, `1 << shift`.
    per_block: usize,
    shift: u32,
    /// The segment's slot this run sits in.
    pub slot: usize,
    owner: UnsafeCell<Owner<K>>,
}

// SAFETY: shared state is atomics under the protocol of the module docs; `owner` is touched
// only by the owner thread (`Run::owner`'s contract).
unsafe impl<K: SbKey> Sync for Run<K> {}
// SAFETY: as above.
unsafe impl<K: SbKey> Send for Run<K> {}

impl<K: SbKey> Run<K> {
    /// A run in slot `slot` of a segment for positions above `lower` (`None`: every
    /// position), with room for `run_blocks` blocks of `per_block` entries, and a late run
    /// of one block.
    pub fn new(
        slot: usize,
        lower: Option<Pos<K>>,
        run_blocks: usize,
        per_block: usize,
        peers: usize,
    ) -> Self {
        assert!(per_block.is_power_of_two());
        let entries = (run_blocks + 1) * per_block;
        Self {
            head: RunHead::new(),
            late_head: RunHead::new(),
            mods: VersionLock::new(),
            late_closed: AtomicBool::new(false),
            blocks: (0..run_blocks)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            late: AtomicPtr::new(std::ptr::null_mut()),
            dead: (0..entries.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            per_block,
            shift: per_block.ilog2(),
            slot,
            owner: UnsafeCell::new(Owner {
                count: 0,
                floor: lower.unwrap_or(Pos::MIN),
                first: K::MIN,
                limit: 0,
                next: std::ptr::null(),
                ceiling: 0,
                gaps: vec![None; peers],
            }),
        }
    }

    /// Bytes a run of these sizes holds besides its blocks.
    pub fn bytes(run_blocks: usize, per_block: usize, peers: usize) -> usize {
        std::mem::size_of::<Self>()
            + run_blocks * 8
            + ((run_blocks + 1) * per_block).div_ceil(64) * 8
            + peers * std::mem::size_of::<Option<(Pos<K>, Pos<K>)>>()
    }

    /// The owner's state.
    ///
    /// # Safety
    ///
    /// Only the run's owner thread may call it, and it must not hold two such references.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn owner(&self) -> &mut Owner<K> {
        // SAFETY: the caller is the owner, the only thread that touches this state.
        unsafe { &mut *self.owner.get() }
    }

    /// Takes [`Run::mods`] (a run is never obsolete, so the lock never refuses).
    pub fn lock(&self) -> WriteGuard<'_> {
        loop {
            if let Ok(lock) = self.mods.lock() {
                return lock;
            }
        }
    }

    /// Entries the append run has room for.
    pub fn capacity(&self) -> usize {
        self.blocks.len() * self.per_block
    }

    /// The block of append entry `i`.
    #[inline]
    pub fn block_of(&self, i: usize) -> usize {
        i >> self.shift
    }

    #[inline(always)]
    fn slot_words(&self, block: *mut u8, i: usize) -> &[AtomicU64] {
        let w = entry_words::<K>();
        // SAFETY: `block` is one of this run's blocks (allocated with room for `per_block`
        // entries of `w` words, 8-aligned) and `i < per_block`; blocks stay allocated while
        // the run is (the caller reads under the run's lifetime).
        unsafe { std::slice::from_raw_parts(block.cast::<AtomicU64>().add(i * w), w) }
    }

    #[inline(always)]
    fn append_slot(&self, i: usize) -> &[AtomicU64] {
        let block = self.blocks[i >> self.shift].load(Ordering::Acquire);
        self.slot_words(block, i & (self.per_block - 1))
    }

    fn late_slot(&self, j: usize) -> &[AtomicU64] {
        self.slot_words(self.late.load(Ordering::Acquire), j)
    }

    fn dead_bit(&self, bit: usize) -> bool {
        self.dead[bit / 64].load(Ordering::Relaxed) & (1 << (bit % 64)) != 0
    }

    /// Whether any of the dead bits `from..to` is set (a word at a time).
    fn any_dead(&self, from: usize, to: usize) -> bool {
        let mut bit = from;
        while bit < to {
            let (word, shift) = (bit / 64, bit % 64);
            let span = (64 - shift).min(to - bit);
            let mask = if span == 64 {
                u64::MAX
            } else {
                ((1u64 << span) - 1) << shift
            };
            if self.dead[word].load(Ordering::Relaxed) & mask != 0 {
                return true;
            }
            bit += span;
        }
        false
    }

    fn set_dead_bit(&self, bit: usize, dead: bool) {
        let word = &self.dead[bit / 64];
        let mask = 1 << (bit % 64);
        let was = word.load(Ordering::Relaxed);
        word.store(
            if dead { was | mask } else { was & !mask },
            Ordering::Relaxed,
        );
    }

    // ----- the append run -------------------------------------------------------------

    /// Append entry `i` (below the published count).
    #[inline]
    pub fn entry(&self, i: usize) -> (K, u64) {
        load_entry(self.append_slot(i))
    }

    /// Whether append entry `i` is deleted.
    #[inline]
    pub fn is_dead(&self, i: usize) -> bool {
        self.dead_bit(i)
    }

    /// Where `pos` is among the first `n` append entries: `Ok(i)` if entry `i` has it, else
    /// `Err(i)`, the first entry above it.
    pub fn find(&self, pos: Pos<K>, n: usize, pairs: bool) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (k, t) = self.entry(mid);
            match Pos::of(k, t, pairs).cmp(&pos) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// [`Run::find`], looking at the last of the `n` entries first: a position above it
    /// costs one comparison instead of a search. A peer's check meets that case whenever the
    /// run's ceiling (raised ahead of its appends) covers a key its owner has yet to reach:
    /// with two threads appending neighbouring batches, on most appends of the one ahead.
    #[inline]
    pub fn find_from_top(&self, pos: Pos<K>, n: usize, pairs: bool) -> Result<usize, usize> {
        let Some(last) = n.checked_sub(1) else {
            return Err(0);
        };
        let (k, t) = self.entry(last);
        match Pos::of(k, t, pairs).cmp(&pos) {
            std::cmp::Ordering::Less => Err(n),
            std::cmp::Ordering::Equal => Ok(last),
            std::cmp::Ordering::Greater => self.find(pos, last, pairs),
        }
    }

    /// Whether block `b` of the append run exists.
    pub fn has_block(&self, b: usize) -> bool {
        !self.blocks[b].load(Ordering::Relaxed).is_null()
    }

    /// Owner: whether the append run has room for its entry `c` (its count), giving it the
    /// block for that entry if it has none yet.
    pub fn make_room(&self, c: usize, res: &Resources) -> bool {
        if c == self.capacity() {
            return false;
        }
        let block = self.block_of(c);
        if !self.has_block(block) {
            self.add_block(block, res);
        }
        true
    }

    /// Owner, after [`Run::make_room`] for entry `c`: the end of the entries that have
    /// their block (the end of `c`'s block, or of the run).
    pub fn room_end(&self, c: usize) -> u64 {
        ((self.block_of(c) + 1) * self.per_block).min(self.capacity()) as u64
    }

    /// Owner: gives the append run its block `b`.
    #[cold]
    #[inline(never)]
    pub fn add_block(&self, b: usize, res: &Resources) {
        let block = res.blocks.alloc();
        res.run_blocks.add(res.blocks.block_bytes());
        self.blocks[b].store(block.as_ptr(), Ordering::Release);
    }

    /// Writes append entry `i` (tests: its block exists).
    #[cfg(test)]
    pub fn write_entry_for_test(&self, i: usize, key: K, tid: u64) {
        store_entry(self.append_slot(i), key, tid);
    }

    /// Owner, after [`Run::make_room`] for entry `c`: the first word of its slot (the
    /// entries of a block lie side by side, so the next one's is [`entry_words`] on).
    pub fn slot_ptr(&self, c: usize) -> *const AtomicU64 {
        self.append_slot(c).as_ptr()
    }

    /// Owner: writes the entry at `slot` (from [`Run::slot_ptr`], or words after it within
    /// its block: at the unpublished end).
    ///
    /// # Safety
    ///
    /// `slot` is the first word of an append slot of this run whose block exists.
    #[inline(always)]
    pub unsafe fn write_at(&self, slot: *const AtomicU64, key: K, tid: u64) {
        // SAFETY: the caller's promise: `entry_words` words of a live block of this run.
        store_entry(
            unsafe { std::slice::from_raw_parts(slot, entry_words::<K>()) },
            key,
            tid,
        );
    }

    /// Under [`Run::mods`]: sets the tid of append entry `i`, returning the old one.
    pub fn set_tid(&self, i: usize, tid: u64) -> u64 {
        let slot = self.append_slot(i);
        slot[entry_words::<K>() - 1].swap(tid, Ordering::Relaxed)
    }

    /// Under [`Run::mods`]: marks append entry `i` deleted.
    pub fn kill(&self, i: usize) {
        self.set_dead_bit(i, true);
    }

    // ----- the late run ---------------------------------------------------------------

    /// Entries in the late run (read under [`Run::mods`]'s version: validate after).
    pub fn late_len(&self) -> usize {
        (self.late_head.published() as usize).min(self.per_block)
    }

    /// Late entry `j` (under a version of [`Run::mods`]).
    pub fn late_entry(&self, j: usize) -> (K, u64) {
        load_entry(self.late_slot(j))
    }

    /// Whether late entry `j` is deleted (under a version of [`Run::mods`]).
    pub fn late_is_dead(&self, j: usize) -> bool {
        self.dead_bit(self.capacity() + j)
    }

    /// Where `pos` is in the late run (under a version of [`Run::mods`]).
    pub fn late_find(&self, pos: Pos<K>, pairs: bool) -> Result<usize, usize> {
        let n = self.late_len();
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (k, t) = self.late_entry(mid);
            match Pos::of(k, t, pairs).cmp(&pos) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Reads the late run with `read` under an optimistic version of [`Run::mods`], retrying
    /// until the read validates.
    pub fn read_late<R>(&self, mut read: impl FnMut(&Self) -> R) -> R {
        loop {
            let Ok(version) = self.mods.read_begin() else {
                continue;
            };
            let result = read(self);
            if version.validate().is_ok() {
                return result;
            }
        }
    }

    /// Owner, under [`Run::mods`]: inserts `(key, tid)` into the late run at `j`; `false` if
    /// the late run is full or closed.
    pub fn late_insert(&self, j: usize, key: K, tid: u64, res: &Resources) -> bool {
        let n = self.late_len();
        if n == self.per_block || self.late_closed.load(Ordering::Relaxed) {
            return false;
        }
        if self.late.load(Ordering::Relaxed).is_null() {
            res.run_blocks.add(res.blocks.block_bytes());
            self.late
                .store(res.blocks.alloc().as_ptr(), Ordering::Release);
        }
        let base = self.capacity();
        let w = entry_words::<K>();
        // SAFETY: the late block exists (allocated above or earlier) and holds `per_block`
        // entries of `w` words; it stays allocated while the run is.
        let words = unsafe {
            std::slice::from_raw_parts(
                self.late.load(Ordering::Relaxed).cast::<AtomicU64>(),
                self.per_block * w,
            )
        };
        // Entries `j..n` move up one place, word by word from the top (`n < per_block`).
        let moving = &words[j * w..(n + 1) * w];
        for x in (0..moving.len() - w).rev() {
            moving[x + w].store(moving[x].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        // Their dead bits too, where any is set (rarely: deletes of late entries).
        if self.any_dead(base + j, base + n) {
            for i in (j..n).rev() {
                self.set_dead_bit(base + i + 1, self.dead_bit(base + i));
            }
        }
        store_entry(&words[j * w..(j + 1) * w], key, tid);
        self.set_dead_bit(base + j, false);
        self.late_head.publish(n as u64 + 1);
        true
    }

    /// Under [`Run::mods`]: sets the tid of late entry `j`, returning the old one.
    pub fn late_set_tid(&self, j: usize, tid: u64) -> u64 {
        self.late_slot(j)[entry_words::<K>() - 1].swap(tid, Ordering::Relaxed)
    }

    /// Under [`Run::mods`]: marks late entry `j` deleted.
    pub fn late_kill(&self, j: usize) {
        self.set_dead_bit(self.capacity() + j, true);
    }

    /// Under [`Run::mods`]: marks late entry `j` live again.
    pub fn late_revive(&self, j: usize) {
        self.set_dead_bit(self.capacity() + j, false);
    }

    /// Sealer: closes the late run and captures its length.
    pub fn capture_late(&self) {
        let _lock = self.lock();
        self.late_closed.store(true, Ordering::Relaxed);
        self.late_head.set_captured(self.late_len() as u64);
    }

    /// Appends the live entries among append entries `from..to` (captured ones, after the
    /// drain) to `out`, in position order.
    pub fn copy_append(&self, from: usize, to: usize, out: &mut Vec<(K, u64)>) {
        if to - from <= 2 {
            // A stretch between late entries: an entry at a time costs less than the setup.
            for i in from..to {
                if !self.dead_bit(i) {
                    out.push(self.entry(i));
                }
            }
            return;
        }
        let w = entry_words::<K>();
        let mut i = from;
        while i < to {
            // A block at a time; its words of dead bits, most of them zero.
            let block = self.blocks[self.block_of(i)].load(Ordering::Acquire);
            let first = i & (self.per_block - 1);
            let end = to.min(i - first + self.per_block);
            // SAFETY: as in `slot_words`: the block holds `per_block` entries of `w` words
            // and `first + (end - i) <= per_block`.
            let words = unsafe {
                std::slice::from_raw_parts(block.cast::<AtomicU64>().add(first * w), (end - i) * w)
            };
            if self.any_dead(i, end) {
                for (j, slot) in (i..end).zip(words.chunks_exact(w)) {
                    if !self.dead_bit(j) {
                        out.push(load_entry(slot));
                    }
                }
            } else {
                // No deletes (the usual case): the whole stretch, without a test per entry.
                out.extend(words.chunks_exact(w).map(load_entry::<K>));
            }
            i = end;
        }
    }

    /// Appends the live entries among late entries `from..to` (captured ones, after the
    /// drain) to `out`, in position order.
    pub fn copy_late(&self, from: usize, to: usize, out: &mut Vec<(K, u64)>) {
        out.extend(
            (from..to)
                .filter(|&j| !self.late_is_dead(j))
                .map(|j| self.late_entry(j)),
        );
    }

    /// The largest captured position, dead entries included.
    pub fn captured_max(&self, pairs: bool) -> Option<Pos<K>> {
        let n = self.head.captured().unwrap_or(0) as usize;
        let late = self.late_head.captured().unwrap_or(0) as usize;
        let a = n.checked_sub(1).map(|i| self.entry(i));
        let b = late.checked_sub(1).map(|j| self.late_entry(j));
        a.into_iter()
            .chain(b)
            .map(|(k, t)| Pos::of(k, t, pairs))
            .max()
    }

    /// Gives every block back (exclusive access: the run is unreachable).
    pub fn free_blocks(&self, res: &Resources) {
        for block in self.blocks.iter().chain(std::iter::once(&self.late)) {
            if let Some(b) =
                std::ptr::NonNull::new(block.swap(std::ptr::null_mut(), Ordering::Relaxed))
            {
                // SAFETY: the run is unreachable (the caller's promise), so nothing reads or
                // writes its blocks any more.
                unsafe { res.blocks.free(b) };
                res.run_blocks.sub(res.blocks.block_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `find` and `find_from_top` find every entry and rank every position between entries,
    /// from the end of the run back to its start and across blocks.
    #[test]
    fn find_finds_every_entry_and_ranks_every_gap() {
        let res = Resources::new(4096);
        let run = Run::<u64>::new(0, None, 3, 64, 1);
        let n = 150;
        for c in 0..n {
            assert!(run.make_room(c, &res));
            run.write_entry_for_test(c, 10 + 2 * c as u64, c as u64);
        }
        for len in [0, 1, 2, 63, 64, 65, n] {
            for c in 0..len {
                let key = 10 + 2 * c as u64;
                assert_eq!(run.find(Pos::of(key, 0, false), len, false), Ok(c));
                assert_eq!(run.find(Pos::of(key + 1, 0, false), len, false), Err(c + 1));
                assert_eq!(run.find_from_top(Pos::of(key, 0, false), len, false), Ok(c));
                assert_eq!(
                    run.find_from_top(Pos::of(key + 1, 0, false), len, false),
                    Err(c + 1)
                );
            }
            assert_eq!(run.find_from_top(Pos::of(0, 0, false), len, false), Err(0));
            assert_eq!(
                run.find_from_top(Pos::of(u64::MAX, 0, false), len, false),
                Err(len)
            );
            assert_eq!(run.find(Pos::of(0, 0, false), len, false), Err(0));
            assert_eq!(run.find(Pos::of(u64::MAX, 0, false), len, false), Err(len));
        }
        run.free_blocks(&res);
    }

    /// Late inserts at the front, at the back and in between keep the late run sorted until
    /// it is full, and a dead bit moves with its entry.
    #[test]
    fn late_inserts_keep_order_and_dead_bits() {
        let res = Resources::new(4096);
        for pattern in 0..3u64 {
            let run = Run::<u64>::new(0, None, 1, 64, 1);
            let mut model: Vec<u64> = Vec::new();
            let mut dead_key = None;
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            for c in 0..64u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let key = match pattern {
                    0 => 1000 + c,
                    1 => 1000 - c,
                    _ => (rng % 1000) * 64 + c,
                };
                let j = model.partition_point(|&k| k < key);
                assert_eq!(run.late_find(Pos::of(key, 0, false), false), Err(j));
                assert!(run.late_insert(j, key, key + 1, &res));
                model.insert(j, key);
                if c == 10 {
                    run.late_kill(3);
                    dead_key = Some(model[3]);
                }
                assert_eq!(run.late_len(), model.len());
                for (j, &k) in model.iter().enumerate() {
                    assert_eq!(run.late_entry(j), (k, k + 1), "pattern {pattern} step {c}");
                    assert_eq!(run.late_is_dead(j), dead_key == Some(k));
                    assert_eq!(run.late_find(Pos::of(k, 0, false), false), Ok(j));
                }
            }
            assert!(!run.late_insert(0, 0, 0, &res), "the late run is full");
            run.free_blocks(&res);
        }
    }

    /// `any_dead` sees exactly the bits of its range, within a word and across words.
    #[test]
    fn any_dead_checks_exactly_its_range() {
        let run = Run::<u64>::new(0, None, 3, 64, 1);
        assert!(!run.any_dead(0, 256));
        for bit in [0, 63, 64, 130, 255] {
            run.set_dead_bit(bit, true);
            assert!(run.any_dead(bit, bit + 1), "bit {bit} alone");
            assert!(run.any_dead(0, 256), "bit {bit} in everything");
            assert!(!run.any_dead(0, bit), "bits below {bit}");
            assert!(!run.any_dead(bit + 1, 256), "bits above {bit}");
            assert!(!run.any_dead(bit, bit), "an empty range at {bit}");
            run.set_dead_bit(bit, false);
        }
    }
}
