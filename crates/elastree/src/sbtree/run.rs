//! A run: one thread's share of a segment, the paper's per-thread data blocks. Entries are
//! key-tid pairs side by side (an append writes one place), in blocks of the block allocator.
//!
//! A run has two parts:
//!
//! * the **append run**: entries in ascending position order, each above the previous one,
//!   written only by the owner at the end and published by the count of
//!   [`super::protocol::RunHead`]; up to `run_blocks` blocks, allocated as it grows;
//! * the **late run** ([`super::late`]): the entries whose positions are in the segment but
//!   below the owner's last append (a delayed key that still belongs to the newest data),
//!   kept sorted in blocks; the owner inserts into it under the run's lock.
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
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use super::bits::DeadBits;
use super::key::{
    entry_words, first_not_below, interpolate, load_entry, load_pos, store_entry, Pos, SbKey,
};
use super::late::{Frozen, LatePlace, LateRun};
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

/// Ranges of append entries at least this long that span more than two blocks start
/// from an interpolated guess ([`Run::find_in`]).
const INTERPOLATE_FROM: usize = 8;

/// The entries around its interpolated guess that [`search_near`] halves first.
const WINDOW: usize = 32;

/// Where `pos` is among entries `lo..hi` (`at(i)`: entry `i`'s position, ascending), known
/// to hold its place: `Ok(i)` at the entry that has it, else `Err(i)`, the first above it.
///
/// A range longer than [`WINDOW`] entries is narrowed to the window around where `pos`'s
/// key interpolates between its first and last keys, when the entries on either side of
/// the window say it holds the place (time-series keys are close to evenly spread, so it
/// nearly always does); the rest is a branch-free halving ([`first_not_below`]). Before,
/// a walk from the guess and the choice between the range's two blocks cost a late insert
/// at 20% delayed keys two to three mispredicted branches.
#[inline(always)]
fn search_near<K: SbKey>(
    (lo, hi): (usize, usize),
    pos: Pos<K>,
    pairs: bool,
    at: impl Fn(usize) -> Pos<K>,
) -> Result<usize, usize> {
    let (mut from, mut to) = (lo, hi);
    if hi - lo > WINDOW {
        if let Some(guess) = interpolate(at(lo).key, at(hi - 1).key, pos.key, hi - 1 - lo) {
            let start = (lo + guess).saturating_sub(WINDOW / 2).max(lo);
            let end = (start + WINDOW).min(hi);
            let below_start = start == lo || at(start - 1).below(pos, pairs);
            if below_start && (end == hi || !at(end).below(pos, pairs)) {
                (from, to) = (start, end);
            }
        }
    }
    let i = first_not_below((from, to), pos, pairs, &at);
    if i < hi && at(i) == pos {
        Ok(i)
    } else {
        Err(i)
    }
}

/// A range within `from..to` that holds the place of the position `cmp` compares against
/// (`cmp(i)`: entry `i` against it), when `from..=to` does: found by galloping from `guess`
/// (in `from..to`), probing 1, 2, 4, ... entries away in the direction the comparison at
/// `guess` points.
fn gallop_around(
    guess: usize,
    (from, to): (usize, usize),
    cmp: impl Fn(usize) -> std::cmp::Ordering,
) -> (usize, usize) {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match cmp(guess) {
        Equal => (guess, guess + 1),
        Less => {
            // Entries up to `guess` are below: look above.
            let (mut below, mut step) = (guess, 1);
            loop {
                let probe = below + step;
                if probe >= to {
                    return (below + 1, to);
                }
                if cmp(probe) == Less {
                    below = probe;
                    step *= 2;
                } else {
                    return (below + 1, probe + 1);
                }
            }
        }
        Greater => {
            // Entries from `guess` on are above: look below.
            let (mut above, mut step) = (guess, 1);
            loop {
                let probe = match above.checked_sub(step) {
                    Some(probe) if probe >= from => probe,
                    _ => return (from, above),
                };
                if cmp(probe) == Greater {
                    above = probe;
                    step *= 2;
                } else {
                    return (probe, above);
                }
            }
        }
    }
}

/// The most blocks of a late run beside an append run of `run_blocks` blocks: half as
/// many, so that the late run fills about when the append run does with a third of the
/// keys arriving late into the segment (its blocks are half to wholly full). Blocks are
/// taken as the late run grows, so the bound costs nothing where few keys are late; a
/// quarter as many sealed segments twice as often at half the keys late, and sent 13
/// times as many delayed keys to the data layer (`DELAY=0.5 sbtree_paths 4000000 sbtree
/// load`: 166 seals and 56,768 data-layer inserts, against 88 and 4,213).
pub fn late_blocks(run_blocks: usize) -> usize {
    run_blocks.div_ceil(2)
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
    blocks: Box<[AtomicPtr<u8>]>,
    late: LateRun<K>,
    /// Dead bits of the append run's entries.
    dead: DeadBits,
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
    /// of up to [`late_blocks`] blocks.
    pub fn new(
        slot: usize,
        lower: Option<Pos<K>>,
        run_blocks: usize,
        per_block: usize,
        peers: usize,
    ) -> Self {
        assert!(per_block.is_power_of_two());
        Self {
            head: RunHead::new(),
            late_head: RunHead::new(),
            mods: VersionLock::new(),
            blocks: (0..run_blocks)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            late: LateRun::new(late_blocks(run_blocks), per_block),
            dead: DeadBits::new(run_blocks * per_block),
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
            + DeadBits::bytes(run_blocks * per_block)
            + LateRun::<K>::bytes(late_blocks(run_blocks), per_block)
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
        self.mods.lock_live()
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

    // ----- the append run -------------------------------------------------------------

    /// Append entry `i` (below the published count).
    #[inline]
    pub fn entry(&self, i: usize) -> (K, u64) {
        load_entry(self.append_slot(i))
    }

    /// Whether append entry `i` is deleted.
    #[inline]
    pub fn is_dead(&self, i: usize) -> bool {
        self.dead.get(i)
    }

    /// Where `pos` is among the first `n` append entries: `Ok(i)` if entry `i` has it, else
    /// `Err(i)`, the first entry above it ([`Run::find_in`] over all of them).
    #[inline]
    pub fn find(&self, pos: Pos<K>, n: usize, pairs: bool) -> Result<usize, usize> {
        self.find_in(pos, (0, n), pairs)
    }

    /// [`Run::find`] among append entries `lo..hi`, known to hold the place of `pos`
    /// (entries below `lo` are below it, those from `hi` on above it): a late insert's
    /// search between the ranks of its late slot ([`LateRun::rank_range`]).
    ///
    /// A range within one or two blocks is searched around where the key interpolates
    /// ([`search_near`], after [`Run::find_in_blocks`] looks the one or two blocks up
    /// once). A longer one starts where `pos`'s key interpolates between its first and last keys
    /// and searches that entry's block, or a neighbour, the same way
    /// ([`Run::find_in_block_of`]): time-series keys are close to evenly spread, so the
    /// search touches a line or two of the run instead of one per halving (a late insert's
    /// look for its key in the append run missed the cache on most of them). When that
    /// fails, it gallops from the first guess: a poor guess costs at most twice a binary
    /// search's probes, plus the few of the first try.
    pub fn find_in(
        &self,
        pos: Pos<K>,
        (lo, hi): (usize, usize),
        pairs: bool,
    ) -> Result<usize, usize> {
        if hi > lo && self.block_of(hi - 1) - self.block_of(lo) <= 1 {
            return self.find_in_blocks(pos, (lo, hi), pairs);
        }
        let at = |i: usize| load_pos(self.append_slot(i), pairs);
        let mut range = (lo, hi);
        if hi - lo >= INTERPOLATE_FROM {
            let guess = interpolate(self.entry(lo).0, self.entry(hi - 1).0, pos.key, hi - 1 - lo);
            if let Some(guess) = guess.map(|g| lo + g) {
                if let Some(found) = self.find_in_block_of(guess, range, pos, pairs) {
                    return found;
                }
                range = gallop_around(guess, range, |i| at(i).cmp(&pos));
            }
        }
        // The entry at the end of a galloped range is above `pos` (or past the run's).
        search_near(range, pos, pairs, at)
    }

    /// [`Run::find_in`] when `lo..hi` (not empty) lies in one block or two, the usual
    /// range of a late insert (a few hundred entries at most): the blocks are looked up
    /// once, and a probe takes its block by a conditional move, then [`search_near`].
    #[inline]
    fn find_in_blocks(
        &self,
        pos: Pos<K>,
        (lo, hi): (usize, usize),
        pairs: bool,
    ) -> Result<usize, usize> {
        let (first, last) = (self.block_of(lo), self.block_of(hi - 1));
        let (low, high) = (
            self.blocks[first].load(Ordering::Acquire),
            self.blocks[last].load(Ordering::Acquire),
        );
        // Entries from `second` on are in the last block (in the first when they are one).
        let (base, second) = (first << self.shift, last << self.shift);
        let at = |i: usize| {
            let high_half = i >= second;
            let block = std::hint::select_unpredictable(high_half, high, low);
            let start = std::hint::select_unpredictable(high_half, second, base);
            load_pos::<K>(self.slot_words(block, i - start), pairs)
        };
        search_near((lo, hi), pos, pairs, at)
    }

    /// The part of block `block` within `lo..hi` (not empty: the block meets the range).
    #[inline]
    fn clip(&self, block: usize, (lo, hi): (usize, usize)) -> (usize, usize) {
        let start = (block << self.shift).max(lo);
        (start, ((block + 1) << self.shift).min(hi))
    }

    /// [`Run::find_in`]'s first try in a range that spans more than two blocks, from `guess`
    /// (in `lo..hi`): the block of `guess` or one of its neighbours, when one holds `pos`
    /// between its first and last entries (within the range), searched there
    /// ([`Run::find_in_blocks`]); `None` when that fails. On time-series keys, a search of
    /// the whole append run this way took 257 instructions per late insert at 50% delayed
    /// keys, where galloping from the first guess took 317.
    #[inline]
    fn find_in_block_of(
        &self,
        guess: usize,
        range: (usize, usize),
        pos: Pos<K>,
        pairs: bool,
    ) -> Option<Result<usize, usize>> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let mut block = self.block_of(guess);
        for _ in 0..3 {
            let (start, end) = self.clip(block, range);
            let (first, last) = (self.entry(start), self.entry(end - 1));
            match Pos::of(first.0, first.1, pairs).cmp(&pos) {
                Equal => return Some(Ok(start)),
                Greater if start == range.0 => return Some(Err(start)),
                Greater => {
                    block -= 1;
                    continue;
                }
                Less => {}
            }
            match Pos::of(last.0, last.1, pairs).cmp(&pos) {
                Equal => return Some(Ok(end - 1)),
                Less if end == range.1 => return Some(Err(end)),
                Less => {
                    block += 1;
                    continue;
                }
                Greater => {}
            }
            // First < pos < last: the place is inside the block's part of the range.
            return Some(self.find_in_blocks(pos, (start, end), pairs));
        }
        None
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
        match load_pos(self.append_slot(last), pairs).cmp(&pos) {
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
        self.dead.set(i, true);
    }

    // ----- the late run ---------------------------------------------------------------

    /// Entries in the late run (read under [`Run::mods`]'s version: validate after).
    pub fn late_len(&self) -> usize {
        self.late_head.published() as usize
    }

    /// The late entry at `at` (under a version of [`Run::mods`]).
    pub fn late_entry(&self, at: LatePlace) -> (K, u64) {
        self.late.entry(at)
    }

    /// Whether the late entry at `at` is deleted (under a version of [`Run::mods`]).
    pub fn late_is_dead(&self, at: LatePlace) -> bool {
        self.late.is_dead(at)
    }

    /// Where `pos` is in the late run (under a version of [`Run::mods`]).
    pub fn late_find(&self, pos: Pos<K>, pairs: bool) -> Result<LatePlace, LatePlace> {
        self.late.find(pos, pairs)
    }

    /// Owner, under [`Run::mods`]: where `pos` is in the late run (`Ok`), or where it would
    /// go there and where it is among the append entries (`Err`), found between the ranks
    /// of its late slot ([`LateRun::rank_range`]).
    pub fn late_locate(
        &self,
        pos: Pos<K>,
        pairs: bool,
    ) -> Result<LatePlace, (LatePlace, Result<usize, usize>)> {
        self.late
            .find(pos, pairs)
            .map_err(|at| (at, self.find_in(pos, self.append_range(at), pairs)))
    }

    /// Owner: the append entries between the ranks around late slot `at.slot`.
    fn append_range(&self, at: LatePlace) -> (usize, usize) {
        let (lo, hi) = self.late.rank_range(at);
        (lo, hi.unwrap_or(self.head.published() as usize))
    }

    /// The late run itself, for walks under a version of [`Run::mods`]
    /// ([`LateRun::visit`], [`LateRun::check`]).
    pub fn late(&self) -> &LateRun<K> {
        &self.late
    }

    /// Reads the late run with `read` under an optimistic version of [`Run::mods`], retrying
    /// until the read validates.
    pub fn read_late<R>(&self, mut read: impl FnMut(&Self) -> R) -> R {
        self.mods.read_validated(|| read(self))
    }

    /// Owner, under [`Run::mods`]: inserts `(key, tid)` into the late run at `at`; `false`
    /// if the late run is full there or closed.
    pub fn late_insert(
        &self,
        at: LatePlace,
        (key, tid): (K, u64),
        pairs: bool,
        res: &Resources,
    ) -> bool {
        // A split's new separator is one of the slot's entries: ranked between its ranks.
        let rank_of = |(k, t): (K, u64), (lo, hi): (usize, Option<usize>)| {
            let hi = hi.unwrap_or(self.head.published() as usize);
            self.find_in(Pos::of(k, t, pairs), (lo, hi), pairs)
                .unwrap_or_else(|i| i)
        };
        if !self.late.insert(at, key, tid, res, rank_of) {
            return false;
        }
        self.late_head.publish(self.late_head.published() + 1);
        true
    }

    /// Under [`Run::mods`]: sets the tid of the late entry at `at`, returning the old one.
    pub fn late_set_tid(&self, at: LatePlace, tid: u64) -> u64 {
        self.late.set_tid(at, tid)
    }

    /// Under [`Run::mods`]: marks the late entry at `at` deleted.
    pub fn late_kill(&self, at: LatePlace) {
        self.late.set_dead(at, true);
    }

    /// Under [`Run::mods`]: marks the late entry at `at` live again.
    pub fn late_revive(&self, at: LatePlace) {
        self.late.set_dead(at, false);
    }

    /// Sealer: closes the late run and captures its length.
    pub fn capture_late(&self) {
        let _lock = self.lock();
        self.late.close();
        self.late_head.set_captured(self.late_len() as u64);
    }

    /// The captured late run, by rank (after the capture: no writer changes it).
    pub fn captured_late(&self) -> Frozen<'_, K> {
        self.late.frozen()
    }

    /// Appends the live entries among append entries `from..to` (captured ones, after the
    /// drain) to `out`, in position order.
    pub fn copy_append(&self, from: usize, to: usize, out: &mut Vec<(K, u64)>) {
        if to - from <= 2 {
            // A stretch between late entries: an entry at a time costs less than the setup.
            for i in from..to {
                if !self.dead.get(i) {
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
            if self.dead.any(i, end) {
                for (j, slot) in (i..end).zip(words.chunks_exact(w)) {
                    if !self.dead.get(j) {
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

    /// The largest captured position, dead entries included.
    pub fn captured_max(&self, pairs: bool) -> Option<Pos<K>> {
        let n = self.head.captured().unwrap_or(0) as usize;
        let late = self.late_head.captured().unwrap_or(0) as usize;
        let a = n.checked_sub(1).map(|i| self.entry(i));
        let frozen = self.late.frozen();
        let b = late
            .min(frozen.len())
            .checked_sub(1)
            .map(|j| frozen.entry(j));
        a.into_iter()
            .chain(b)
            .map(|(k, t)| Pos::of(k, t, pairs))
            .max()
    }

    /// Gives every block back (exclusive access: the run is unreachable).
    pub fn free_blocks(&self, res: &Resources) {
        self.late.free_blocks(res);
        for block in self.blocks.iter() {
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

    /// Interpolated searches find every entry and rank every gap whatever the spread of the
    /// keys: even, skewed (cubes: guesses far too high), a jump (most keys at one end) and
    /// runs of one key (non-unique: ordered by tid).
    #[test]
    fn interpolated_find_is_exact_on_skewed_keys() {
        let res = Resources::new(4096);
        let n = 300usize;
        type Entry = fn(u64) -> (u64, u64);
        let patterns: [(&str, Entry); 4] = [
            ("even", |c| (1000 + 3 * c, 0)),
            ("cubes", |c| (c * c * c, 0)),
            ("jump", |c| (if c < 290 { c } else { 1 << 40 | c }, 0)),
            ("repeats", |c| (100 + c / 50, c)),
        ];
        // Blocks of 256 entries (on skewed keys the window around the interpolated guess
        // misses the place) and of 8 (searches start in the wrong block and move to its
        // neighbours, or give up).
        for ((name, entry), per_block) in patterns.into_iter().flat_map(|p| [(p, 256), (p, 8)]) {
            let pairs = name == "repeats";
            let run = Run::<u64>::new(0, None, n.div_ceil(per_block), per_block, 1);
            for c in 0..n {
                assert!(run.make_room(c, &res));
                let (k, t) = entry(c as u64);
                run.write_entry_for_test(c, k, t);
            }
            for len in [INTERPOLATE_FROM, 100, n] {
                for c in 0..len {
                    let (k, t) = entry(c as u64);
                    let pos = Pos::of(k, t, pairs);
                    assert_eq!(
                        run.find(pos, len, pairs),
                        Ok(c),
                        "{name}: entry {c} of {len}"
                    );
                    // Ranges around the place, as a late slot's ranks give them: within a
                    // block, across two and across many.
                    for (below, above) in [(0, 1), (1, 3), (9, 2), (40, 70), (300, 300)] {
                        let range = (c.saturating_sub(below), (c + above).min(len));
                        assert_eq!(
                            run.find_in(pos, range, pairs),
                            Ok(c),
                            "{name}: entry {c} in {range:?}"
                        );
                    }
                    let above = Pos::of(k, t + 1, true);
                    let next = entry(c as u64 + 1);
                    if pairs && Pos::of(next.0, next.1, true) != above {
                        assert_eq!(run.find(above, len, pairs), Err(c + 1), "{name}: after {c}");
                    }
                    if !pairs && next.0 > k + 1 {
                        let gap = Pos::of(k + 1, 0, false);
                        assert_eq!(run.find(gap, len, pairs), Err(c + 1), "{name}: gap {c}");
                        for (below, above) in [(0, 0), (2, 1), (30, 5), (200, 90)] {
                            let range = ((c + 1).saturating_sub(below), (c + 1 + above).min(len));
                            assert_eq!(
                                run.find_in(gap, range, pairs),
                                Err(c + 1),
                                "{name}: gap {c} in {range:?}"
                            );
                        }
                    }
                }
                let top = Pos::of(u64::MAX, 0, pairs);
                assert_eq!(run.find(top, len, pairs), Err(len), "{name}: above all");
            }
            run.free_blocks(&res);
        }
    }

    /// Late inserts count in the late run's head, stop at the capture, and the captured
    /// maximum is the larger of the append run's last entry and the late run's.
    #[test]
    fn late_inserts_are_counted_and_captured() {
        let res = Resources::new(4096);
        let run = Run::<u64>::new(0, None, 4, 64, 1);
        assert!(run.make_room(0, &res));
        run.write_entry_for_test(0, 500, 0);
        run.head.publish(1);
        for (c, key) in [300u64, 100, 200, 700, 600].into_iter().enumerate() {
            let _lock = run.lock();
            let at = run.late_find(Pos::of(key, 0, false), false).unwrap_err();
            assert!(run.late_insert(at, (key, key), false, &res));
            assert_eq!(run.late_len(), c + 1);
        }
        run.head.capture();
        run.capture_late();
        assert_eq!(run.late_head.captured(), Some(5));
        let at = run.late_find(Pos::of(50, 0, false), false).unwrap_err();
        assert!(
            !run.late_insert(at, (50, 50), false, &res),
            "closed by the capture"
        );
        assert_eq!(run.captured_max(false), Some(Pos::of(700, 0, false)));
        let frozen = run.captured_late();
        let keys: Vec<u64> = (0..frozen.len()).map(|i| frozen.entry(i).0).collect();
        assert_eq!(keys, [100, 200, 300, 600, 700]);
        run.free_blocks(&res);
    }
}
