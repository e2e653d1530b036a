//! A run's late run: the entries whose positions are in the segment but below the owner's
//! last append (a delayed key that still belongs to the newest data), kept sorted.
//!
//! Delayed keys arrive a few to thousands of keys late, so a segment's late entries spread
//! over its whole range and number up to about the delayed fraction of its entries. One
//! sorted block of them filled long before the append run did, and each fill sealed the
//! segment: at 20% delayed keys, a seal (and a conversion, and a wake-up of the maintenance
//! thread) every 1,800 keys instead of every 65,000. So the late run is a small two-level
//! B+-tree: a **directory** of small blocks in position order, each sorted and holding the
//! positions from its separator up to the next block's. An insert shifts the entries above
//! it within one block; a full block splits in half (or, when the insert is above all of
//! its entries, a new block starts with the insert), the directory shifting its later slots
//! up by one. A directory block is a [`SUBDIVIDE`]th of an allocator block (32 entries of
//! a 4 KiB block): an insert shifts an eighth as many entries as in a whole block, for a
//! directory eight times as long (searched from its end, where delayed keys land) and
//! eight times as many splits. Against a quarter (64 entries), 7% fewer instructions per
//! late insert at 20 and 50% delayed keys (1,012 -> 940 and 984 -> 943, everything a late
//! insert does).
//!
//! # Layout
//!
//! ```text
//! directory slot s < used:  block (entries 0..count, sorted, entry layout of run.rs),
//!                           count <= per_block, id (the block's dead bits: id * per_block..;
//!                           its place: piece id % pieces of allocator block id / pieces)
//! seps[s] (entry words):    slot s holds positions >= seps[s] (s >= 1) and < seps[s + 1]
//! ranks[s]:                 a run's late run: the number of the run's append entries below
//!                           seps[s] (0 for s = 0); a spill's: 0
//! ```
//!
//! A late entry is below the owner's last append when it goes in, and appends only go
//! above that, so a separator's rank never changes: an insert that finds its slot here
//! looks for its position among the append entries between two ranks only
//! ([`LateRun::rank_range`]): on average about 100 of them at 50% delayed keys and 350 at
//! 20% (measured with 64-entry directory blocks), instead of the whole append run.
//!
//! # Invariants
//!
//! Everything changes only under its owner's lock (the run's [`super::run::Run::mods`], or
//! for a sealed segment's spill, which is a late run too, the segment's spill lock), whose
//! version readers validate: a reader may see a directory or a block mid-change, so every index it
//! takes from them is clamped to the arrays it indexes and a null block reads as empty.
//! Blocks are never taken out of the directory or freed while the run lives, and block ids
//! are the slots' allocation order, so they are distinct and below `used`.

use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::bits::DeadBits;
use super::key::{
    entry_words, first_not_below, load_entry, load_pos, partition_point, store_entry, Pos, SbKey,
};
use super::Resources;

/// An entry and whether it is dead.
pub type Marked<K> = ((K, u64), bool);

/// Where an entry is (or would go) in a late run: directory slot and index in its block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatePlace {
    slot: usize,
    j: usize,
}

/// Directory blocks per allocator block (when a block holds at least twice as many entries).
pub const SUBDIVIDE: usize = 8;

/// One directory slot.
struct Slot {
    block: AtomicPtr<u8>,
    count: AtomicUsize,
    id: AtomicUsize,
}

/// See the module docs.
pub struct LateRun<K: SbKey> {
    /// Entries per directory block.
    per_block: usize,
    /// Directory blocks per allocator block.
    pieces: usize,
    /// The allocator blocks the directory blocks are cut from, in order.
    chunks: Box<[AtomicPtr<u8>]>,
    /// Directory slots in use.
    used: AtomicUsize,
    slots: Box<[Slot]>,
    /// Each slot's separator, [`entry_words`] words per slot (slot 0's unused).
    seps: Box<[AtomicU64]>,
    /// Each slot's rank (see the module docs; read and written under the owner's lock only).
    ranks: Box<[AtomicUsize]>,
    /// Dead bits, `per_block` per block id.
    dead: DeadBits,
    closed: AtomicBool,
    _keys: PhantomData<K>,
}

impl<K: SbKey> LateRun<K> {
    /// An empty late run of at most `blocks` allocator blocks of `block_entries` entries (a
    /// power of two, at least 2), cut into directory blocks.
    pub fn new(blocks: usize, block_entries: usize) -> Self {
        assert!(blocks > 0 && block_entries >= 2 && block_entries.is_power_of_two());
        let per_block = Self::per_block(block_entries);
        let pieces = block_entries / per_block;
        let slots = blocks * pieces;
        Self {
            per_block,
            pieces,
            chunks: (0..blocks)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            used: AtomicUsize::new(0),
            slots: (0..slots)
                .map(|_| Slot {
                    block: AtomicPtr::new(std::ptr::null_mut()),
                    count: AtomicUsize::new(0),
                    id: AtomicUsize::new(0),
                })
                .collect(),
            seps: (0..slots * entry_words::<K>())
                .map(|_| AtomicU64::new(0))
                .collect(),
            ranks: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
            dead: DeadBits::new(blocks * block_entries),
            closed: AtomicBool::new(false),
            _keys: PhantomData,
        }
    }

    /// Entries per directory block, for allocator blocks of `block_entries`.
    fn per_block(block_entries: usize) -> usize {
        if block_entries >= 2 * SUBDIVIDE {
            block_entries / SUBDIVIDE
        } else {
            block_entries
        }
    }

    /// Bytes a late run of these sizes holds besides its blocks and its own struct.
    pub fn bytes(blocks: usize, block_entries: usize) -> usize {
        let slots = blocks * block_entries / Self::per_block(block_entries);
        slots * (std::mem::size_of::<Slot>() + entry_words::<K>() * 8 + 8)
            + blocks * std::mem::size_of::<AtomicPtr<u8>>()
            + DeadBits::bytes(blocks * block_entries)
    }

    /// Owner, under the run's lock: the directory block with id `id` (the number of blocks
    /// before it), cutting a new allocator block when `id` starts one.
    fn carve(&self, id: usize, res: &Resources) -> *mut u8 {
        let chunk = &self.chunks[id / self.pieces];
        if id.is_multiple_of(self.pieces) {
            res.run_blocks.add(res.blocks.block_bytes());
            chunk.store(res.blocks.alloc().as_ptr(), Ordering::Release);
        }
        let bytes = self.per_block * entry_words::<K>() * 8;
        // SAFETY: the allocator block holds `pieces` directory blocks of `bytes` bytes.
        unsafe { chunk.load(Ordering::Relaxed).add(id % self.pieces * bytes) }
    }

    fn used(&self) -> usize {
        self.used.load(Ordering::Acquire).min(self.slots.len())
    }

    fn count(&self, slot: usize) -> usize {
        self.slots[slot]
            .count
            .load(Ordering::Acquire)
            .min(self.per_block)
    }

    fn block(&self, slot: usize) -> *mut u8 {
        self.slots[slot].block.load(Ordering::Acquire)
    }

    /// The words of entry `j` of `block`, a block of this late run (not null).
    #[inline]
    fn words(&self, block: *mut u8, j: usize) -> &[AtomicU64] {
        debug_assert!(!block.is_null());
        let w = entry_words::<K>();
        let j = j.min(self.per_block - 1);
        // SAFETY: `block` is one of this run's blocks, which hold `per_block` entries of `w`
        // words (8-aligned) and stay allocated while the run does; `j < per_block`.
        unsafe { std::slice::from_raw_parts(block.cast::<AtomicU64>().add(j * w), w) }
    }

    fn sep_words(&self, slot: usize) -> &[AtomicU64] {
        let w = entry_words::<K>();
        &self.seps[slot * w..(slot + 1) * w]
    }

    fn sep(&self, slot: usize, pairs: bool) -> Pos<K> {
        load_pos(self.sep_words(slot), pairs)
    }

    /// The dead bit of entry `j` of the block in `slot`.
    fn bit(&self, slot: usize, j: usize) -> usize {
        let id = self.slots[slot]
            .id
            .load(Ordering::Relaxed)
            .min(self.slots.len() - 1);
        id * self.per_block + j.min(self.per_block - 1)
    }

    /// The slot whose positions take `pos` (of the first `used`, at least one).
    ///
    /// It gallops down from the last slot: a delayed key is delayed by a few to thousands of
    /// keys, so it lands in one of the last few slots of a directory that spans the whole
    /// segment, and the search costs a probe or three instead of a halving of the directory.
    fn route(&self, pos: Pos<K>, pairs: bool, used: usize) -> usize {
        // Slot `s` starts at or below `pos`.
        let starts_below = |s: usize| !pos.below(self.sep(s, pairs), pairs);
        // Slots from `hi` on hold positions above `pos`; the place is in `lo - 1..hi`.
        let (mut lo, mut hi) = (1, used);
        let mut step = 1;
        while hi > lo {
            let probe = hi - step.min(hi - lo);
            if starts_below(probe) {
                lo = probe + 1;
                break;
            }
            hi = probe;
            step *= 2;
        }
        // The first slot above `pos` is in `lo..hi`: the first whose separator is not at or
        // below it.
        partition_point((lo, hi), starts_below) - 1
    }

    /// Where `pos` is: `Ok` at the entry that has it, else `Err` where it would go.
    pub fn find(&self, pos: Pos<K>, pairs: bool) -> Result<LatePlace, LatePlace> {
        let used = self.used();
        if used == 0 {
            return Err(LatePlace { slot: 0, j: 0 });
        }
        let slot = self.route(pos, pairs, used);
        let block = self.block(slot);
        let n = if block.is_null() { 0 } else { self.count(slot) };
        let w = entry_words::<K>();
        // The block's entries as one slice, indexed without the clamp of `words` (whose
        // branch would stop the search's selects from staying conditional moves).
        // SAFETY: as in `words`: a block of this run holds `per_block >= n` entries of `w`
        // words; a null block has no entries (`n == 0`, nothing read).
        let words = match n {
            0 => &[][..],
            _ => unsafe { std::slice::from_raw_parts(block.cast::<AtomicU64>(), n * w) },
        };
        let at = |j: usize| load_pos(&words[j * w..(j + 1) * w], pairs);
        let j = first_not_below((0, n), pos, pairs, at);
        if j < n && at(j) == pos {
            Ok(LatePlace { slot, j })
        } else {
            Err(LatePlace { slot, j })
        }
    }

    /// The entry at `at` (from [`LateRun::find`] in the same read).
    pub fn entry(&self, at: LatePlace) -> (K, u64) {
        let block = self.block(at.slot.min(self.slots.len() - 1));
        if block.is_null() {
            return (K::MIN, 0);
        }
        load_entry(self.words(block, at.j))
    }

    /// Whether the entry at `at` is deleted.
    pub fn is_dead(&self, at: LatePlace) -> bool {
        self.dead
            .get(self.bit(at.slot.min(self.slots.len() - 1), at.j))
    }

    /// Under the run's lock: sets the tid of the entry at `at`, returning the old one.
    pub fn set_tid(&self, at: LatePlace, tid: u64) -> u64 {
        let words = self.words(self.block(at.slot), at.j);
        words[entry_words::<K>() - 1].swap(tid, Ordering::Relaxed)
    }

    /// Under the run's lock: marks the entry at `at` deleted or live.
    pub fn set_dead(&self, at: LatePlace, dead: bool) {
        self.dead.set(self.bit(at.slot, at.j), dead);
    }

    /// Under the run's lock: no insert succeeds from now on.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    /// Whether [`LateRun::close`] was called (under the run's lock).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Under the run's lock: the ranks of the separators around `at.slot` (from
    /// [`LateRun::find`] under the same lock), its own and the next slot's (`None` for the
    /// last slot): a position that slot takes has its place among the append entries
    /// between the two (the module docs).
    pub fn rank_range(&self, at: LatePlace) -> (usize, Option<usize>) {
        let slot = at.slot.min(self.slots.len() - 1);
        let next = (slot + 1 < self.used()).then(|| self.ranks[slot + 1].load(Ordering::Relaxed));
        (self.ranks[slot].load(Ordering::Relaxed), next)
    }

    /// Under the run's lock: inserts `(key, tid)` at `at` (from [`LateRun::find`] under
    /// the same lock); `false` if the late run is closed, or full where it goes. A split
    /// asks `rank_of` for the rank of its new separator (an entry), given the split slot's
    /// [`LateRun::rank_range`] (a spill's answers 0).
    pub fn insert(
        &self,
        at: LatePlace,
        key: K,
        tid: u64,
        res: &Resources,
        rank_of: impl FnOnce((K, u64), (usize, Option<usize>)) -> usize,
    ) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let mut at = at;
        if self.used.load(Ordering::Relaxed) == 0 {
            self.slots[0]
                .block
                .store(self.carve(0, res), Ordering::Release);
            self.used.store(1, Ordering::Release);
            at = LatePlace { slot: 0, j: 0 };
        }
        if self.count(at.slot) == self.per_block {
            if self.used() == self.slots.len() {
                return false;
            }
            // The new separator is one of the split slot's positions: ranked within
            // the slot's range.
            let (range, new) = (self.rank_range(at), at.slot + 1);
            at = self.split(at, key, tid, res);
            let rank = rank_of(load_entry(self.sep_words(new)), range);
            self.ranks[new].store(rank, Ordering::Relaxed);
        }
        let block = self.block(at.slot);
        let n = self.count(at.slot);
        let w = entry_words::<K>();
        // SAFETY: as in `words`: the block holds `per_block > n` entries of `w` words.
        let all =
            unsafe { std::slice::from_raw_parts(block.cast::<AtomicU64>(), self.per_block * w) };
        // Entries `j..n` move up one place, word by word from the top.
        let moving = &all[at.j * w..(n + 1) * w];
        for x in (0..moving.len() - w).rev() {
            moving[x + w].store(moving[x].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let bit = self.bit(at.slot, at.j);
        self.dead.move_range(bit, bit + 1, n - at.j);
        store_entry(self.words(block, at.j), key, tid);
        self.dead.set(bit, false);
        self.slots[at.slot].count.store(n + 1, Ordering::Release);
        true
    }

    /// Under the run's lock: splits the full block of `at.slot` (the directory has a free
    /// slot) and returns where `(key, tid)`, to go at `at`, goes now. An insert above all of
    /// the block's entries starts a new block; any other moves the upper half to a new block.
    /// The new slot's rank is the caller's to set.
    fn split(&self, at: LatePlace, key: K, tid: u64, res: &Resources) -> LatePlace {
        let used = self.used();
        let keep = if at.j == self.per_block {
            self.per_block
        } else {
            self.per_block / 2
        };
        let moved = self.per_block - keep;
        // Ids are the blocks' order of allocation: the new one is the `used`th.
        let id = used;
        let (old, new) = (self.block(at.slot), self.carve(id, res));
        for j in 0..moved {
            let from = self.words(old, keep + j);
            let to = self.words(new, j);
            for (t, f) in to.iter().zip(from) {
                t.store(f.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        self.dead
            .move_range(self.bit(at.slot, keep), id * self.per_block, moved);
        for s in (at.slot + 1..used).rev() {
            let (from, to) = (&self.slots[s], &self.slots[s + 1]);
            to.block
                .store(from.block.load(Ordering::Relaxed), Ordering::Release);
            to.count
                .store(from.count.load(Ordering::Relaxed), Ordering::Release);
            to.id
                .store(from.id.load(Ordering::Relaxed), Ordering::Relaxed);
            self.ranks[s + 1].store(self.ranks[s].load(Ordering::Relaxed), Ordering::Relaxed);
            for (t, f) in self.sep_words(s + 1).iter().zip(self.sep_words(s)) {
                t.store(f.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        let (sep_key, sep_tid) = if moved > 0 {
            load_entry(self.words(new, 0))
        } else {
            (key, tid)
        };
        store_entry(self.sep_words(at.slot + 1), sep_key, sep_tid);
        let right = &self.slots[at.slot + 1];
        right.block.store(new, Ordering::Release);
        right.count.store(moved, Ordering::Release);
        right.id.store(id, Ordering::Relaxed);
        self.slots[at.slot].count.store(keep, Ordering::Release);
        self.used.store(used + 1, Ordering::Release);
        if at.j <= keep && moved > 0 {
            at
        } else {
            LatePlace {
                slot: at.slot + 1,
                j: at.j - keep,
            }
        }
    }

    /// Calls `f` with each entry (and whether it is dead) in position order from the first
    /// above `from` (descending: in reverse order from the last below it), until it returns
    /// `false`.
    pub fn visit(
        &self,
        from: Bound<Pos<K>>,
        descending: bool,
        pairs: bool,
        mut f: impl FnMut((K, u64), bool) -> bool,
    ) {
        let used = self.used();
        if used == 0 {
            return;
        }
        let found = |p| self.find(p, pairs);
        let after = |at: LatePlace| LatePlace {
            slot: at.slot,
            j: at.j + 1,
        };
        let mut at = match (from, descending) {
            (Bound::Unbounded, false) => LatePlace { slot: 0, j: 0 },
            (Bound::Unbounded, true) => LatePlace {
                slot: used - 1,
                j: self.count(used - 1),
            },
            (Bound::Included(p), false) => found(p).unwrap_or_else(|at| at),
            (Bound::Excluded(p), false) => found(p).map_or_else(|at| at, after),
            (Bound::Included(p), true) => found(p).map_or_else(|at| at, after),
            (Bound::Excluded(p), true) => found(p).unwrap_or_else(|at| at),
        };
        // Ascending: `at` is the next entry; descending: the one after the next.
        loop {
            let block = self.block(at.slot);
            let n = if block.is_null() {
                0
            } else {
                self.count(at.slot)
            };
            if descending {
                for j in (0..at.j.min(n)).rev() {
                    let e = load_entry(self.words(block, j));
                    if !f(e, self.dead.get(self.bit(at.slot, j))) {
                        return;
                    }
                }
                if at.slot == 0 {
                    return;
                }
                at.slot -= 1;
                at.j = self.per_block;
            } else {
                for j in at.j..n {
                    let e = load_entry(self.words(block, j));
                    if !f(e, self.dead.get(self.bit(at.slot, j))) {
                        return;
                    }
                }
                at = LatePlace {
                    slot: at.slot + 1,
                    j: 0,
                };
                if at.slot >= used {
                    return;
                }
            }
        }
    }

    /// Live entries.
    pub fn live(&self) -> usize {
        let mut live = 0;
        self.visit(Bound::Unbounded, false, false, |_, dead| {
            live += usize::from(!dead);
            true
        });
        live
    }

    /// Appends the live entries to `out`, in position order.
    pub fn live_entries(&self, out: &mut Vec<(K, u64)>) {
        self.visit(Bound::Unbounded, false, false, |e, dead| {
            if !dead {
                out.push(e);
            }
            true
        });
    }

    /// The late run as it stands, for a reader with no writer about (after
    /// [`LateRun::close`] and the capture): entries by rank.
    pub fn frozen(&self) -> Frozen<'_, K> {
        let used = self.used();
        let mut starts = Vec::with_capacity(used + 1);
        let mut total = 0;
        for slot in 0..used {
            starts.push(total);
            total += self.count(slot);
        }
        starts.push(total);
        Frozen { late: self, starts }
    }

    /// Checks the directory and returns every entry with its dead bit, in order.
    pub fn check(&self, pairs: bool) -> Result<Vec<Marked<K>>, String> {
        let used = self.used();
        let mut ids = vec![false; self.slots.len()];
        let mut all: Vec<Marked<K>> = Vec::new();
        for slot in 0..used {
            let id = self.slots[slot].id.load(Ordering::Relaxed);
            if id >= used || std::mem::replace(&mut ids[id], true) {
                return Err(format!(
                    "late slot {slot}: block id {id} repeated or unused"
                ));
            }
            if self.block(slot).is_null() {
                return Err(format!("late slot {slot} has no block"));
            }
            let (low, high) = (
                (slot > 0).then(|| self.sep(slot, pairs)),
                (slot + 1 < used).then(|| self.sep(slot + 1, pairs)),
            );
            if let (Some(l), Some(h)) = (low, high) {
                if l >= h {
                    return Err(format!(
                        "late slots {slot} and {}: separators out of order",
                        slot + 1
                    ));
                }
            }
            for j in 0..self.count(slot) {
                let e = load_entry(self.words(self.block(slot), j));
                let pos = Pos::of(e.0, e.1, pairs);
                if low.is_some_and(|l| pos < l) || high.is_some_and(|h| pos >= h) {
                    return Err(format!("late entry {pos:?} outside its block's separators"));
                }
                if let Some(&((k, t), _)) = all.last() {
                    if Pos::of(k, t, pairs) >= pos {
                        return Err(format!("late entry {pos:?} out of order"));
                    }
                }
                all.push((e, self.dead.get(self.bit(slot, j))));
            }
        }
        Ok(all)
    }

    /// The separators of slots 1 and on with their ranks (for checks, with no writer).
    pub fn ranked_separators(&self, pairs: bool) -> Vec<(Pos<K>, usize)> {
        (1..self.used())
            .map(|slot| {
                (
                    self.sep(slot, pairs),
                    self.ranks[slot].load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Gives every block back (exclusive access: the run is unreachable).
    pub fn free_blocks(&self, res: &Resources) {
        for slot in self.slots.iter() {
            slot.block.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
        for chunk in self.chunks.iter() {
            if let Some(b) =
                std::ptr::NonNull::new(chunk.swap(std::ptr::null_mut(), Ordering::Relaxed))
            {
                // SAFETY: the run is unreachable (the caller's promise), so nothing reads or
                // writes its blocks any more.
                unsafe { res.blocks.free(b) };
                res.run_blocks.sub(res.blocks.block_bytes());
            }
        }
    }
}

/// A late run no one changes any more, its entries by rank (see [`LateRun::frozen`]).
pub struct Frozen<'r, K: SbKey> {
    late: &'r LateRun<K>,
    /// The rank of each slot's first entry, then the number of entries.
    starts: Vec<usize>,
}

impl<K: SbKey> Frozen<'_, K> {
    /// Entries, dead ones included.
    pub fn len(&self) -> usize {
        *self.starts.last().expect("a total")
    }

    /// The place of the entry of rank `i < len`.
    #[inline]
    pub fn place(&self, i: usize) -> LatePlace {
        let slot = self.starts.partition_point(|&s| s <= i) - 1;
        LatePlace {
            slot,
            j: i - self.starts[slot],
        }
    }

    /// The entry of rank `i`.
    #[inline]
    pub fn entry(&self, i: usize) -> (K, u64) {
        self.late.entry(self.place(i))
    }

    /// The place of the entry ranked one above the one at `at` (past the last slot's end
    /// after the last entry): a sequential read's step, where [`Frozen::place`] halves.
    #[inline]
    pub fn step(&self, at: LatePlace) -> LatePlace {
        let last = self.starts.len().saturating_sub(2);
        let mut next = LatePlace {
            slot: at.slot,
            j: at.j + 1,
        };
        while next.slot < last && self.starts[next.slot] + next.j >= self.starts[next.slot + 1] {
            next = LatePlace {
                slot: next.slot + 1,
                j: 0,
            };
        }
        next
    }

    /// The entry at `at` (a place of [`Frozen::place`] or [`Frozen::step`] below `len`)
    /// and whether it is dead.
    #[inline]
    pub fn marked_at(&self, at: LatePlace) -> Marked<K> {
        (self.late.entry(at), self.late.is_dead(at))
    }

    /// Appends the live entries of ranks `from..to` to `out` (the first place halved for,
    /// the others stepped to).
    pub fn copy(&self, from: usize, to: usize, out: &mut Vec<(K, u64)>) {
        if from >= to {
            return;
        }
        let mut at = self.place(from);
        for _ in from..to {
            if !self.late.is_dead(at) {
                out.push(self.late.entry(at));
            }
            at = self.step(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic shuffle's worth of keys.
    fn keys(pattern: u64, n: u64) -> Vec<u64> {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|c| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                match pattern {
                    0 => 1000 + c,
                    1 => 100_000 - c,
                    _ => (rng % 1000) * 1024 + c,
                }
            })
            .collect()
    }

    /// Inserts ascending, descending and at random keep every entry in order across
    /// splits until the directory is full; finds, dead bits, visits both ways and the
    /// frozen ranks agree with a sorted model at every step. Separator ranks (here a
    /// separator's key: any order-keeping rank) move with their slots, and a slot's rank
    /// range brackets the rank of every position it takes.
    #[test]
    fn inserts_split_blocks_and_keep_everything_in_order() {
        let res = Resources::new(4096);
        for pattern in 0..3u64 {
            let late = LateRun::<u64>::new(4, 8);
            let mut model: Vec<(u64, bool)> = Vec::new();
            for (c, key) in keys(pattern, 64).into_iter().enumerate() {
                let pos = Pos::of(key, 0, false);
                let Err(at) = late.find(pos, false) else {
                    panic!("{key} found before its insert");
                };
                let rank_of = |(k, _): (u64, u64), (lo, hi): (usize, Option<usize>)| {
                    let k = k as usize;
                    assert!(lo <= k && hi.is_none_or(|hi| k < hi), "{k} in {lo}..{hi:?}");
                    k
                };
                if !late.insert(at, key, key + 1, &res, rank_of) {
                    assert!(model.len() > 16, "full with {} entries", model.len());
                    break;
                }
                for (sep, rank) in late.ranked_separators(false) {
                    assert_eq!(rank, sep.key as usize, "pattern {pattern} step {c}");
                }
                let i = model.partition_point(|&(k, _)| k < key);
                model.insert(i, (key, false));
                if c % 5 == 0 {
                    let v = c % model.len();
                    let at = late.find(Pos::of(model[v].0, 0, false), false).unwrap();
                    late.set_dead(at, true);
                    model[v].1 = true;
                }
                let all = late.check(false).unwrap();
                let expect: Vec<_> = model.iter().map(|&(k, d)| ((k, k + 1), d)).collect();
                assert_eq!(all, expect, "pattern {pattern} step {c}");
                for &(k, d) in &model {
                    let at = late.find(Pos::of(k, 0, false), false).unwrap();
                    assert_eq!((late.entry(at), late.is_dead(at)), ((k, k + 1), d));
                    let (lo, hi) = late.rank_range(at);
                    let k = k as usize;
                    assert!(lo <= k && hi.is_none_or(|hi| k < hi), "{k} in {lo}..{hi:?}");
                }
                let frozen = late.frozen();
                assert_eq!(frozen.len(), model.len());
                let mut stepped = frozen.place(0);
                for (i, &(k, d)) in model.iter().enumerate() {
                    assert_eq!(stepped, frozen.place(i), "a step to rank {i}");
                    assert_eq!(frozen.marked_at(stepped), ((k, k + 1), d));
                    assert_eq!(frozen.entry(i), (k, k + 1));
                    stepped = frozen.step(stepped);
                }
                let mut live = Vec::new();
                frozen.copy(0, frozen.len(), &mut live);
                let want: Vec<_> = model
                    .iter()
                    .filter(|e| !e.1)
                    .map(|&(k, _)| (k, k + 1))
                    .collect();
                assert_eq!(live, want);
            }
            assert_eq!(
                late.used(),
                late.slots.len(),
                "pattern {pattern}: every slot used"
            );
            late.free_blocks(&res);
        }
    }

    /// Inserts in ascending order fill their blocks: a new block starts with an insert
    /// above everything instead of splitting the last one in half.
    #[test]
    fn ascending_inserts_fill_blocks() {
        let res = Resources::new(4096);
        let late = LateRun::<u64>::new(4, 8);
        for key in 0..32u64 {
            let at = late.find(Pos::of(key, 0, false), false).unwrap_err();
            assert!(late.insert(at, key, key, &res, |_, _| 0), "room for {key}");
        }
        let per_block = LateRun::<u64>::per_block(8);
        assert_eq!(
            late.slots.len(),
            32 / per_block,
            "4 blocks of 8 entries, cut"
        );
        let at = late.find(Pos::of(99, 0, false), false).unwrap_err();
        assert!(
            !late.insert(at, 99, 99, &res, |_, _| 0),
            "32 entries fill them"
        );
        late.free_blocks(&res);
    }

    /// Visits from every bound, both ways, hand out exactly the model's entries beyond it.
    #[test]
    fn visits_start_at_their_bound_in_both_directions() {
        let res = Resources::new(4096);
        let late = LateRun::<u64>::new(10, 4);
        let model: Vec<u64> = (0..20).map(|i| 10 * i + 5).collect();
        for &key in model.iter().rev() {
            let at = late.find(Pos::of(key, 0, false), false).unwrap_err();
            assert!(late.insert(at, key, key, &res, |_, _| 0));
        }
        late.check(false).unwrap();
        let visit = |from: Bound<Pos<u64>>, descending: bool, stop: usize| {
            let mut seen = Vec::new();
            late.visit(from, descending, false, |(k, _), _| {
                seen.push(k);
                seen.len() < stop
            });
            seen
        };
        for probe in 0..210u64 {
            let p = Pos::of(probe, 0, false);
            let up_in: Vec<u64> = model.iter().copied().filter(|&k| k >= probe).collect();
            let up_ex: Vec<u64> = model.iter().copied().filter(|&k| k > probe).collect();
            let down_in: Vec<u64> = model
                .iter()
                .rev()
                .copied()
                .filter(|&k| k <= probe)
                .collect();
            let down_ex: Vec<u64> = model.iter().rev().copied().filter(|&k| k < probe).collect();
            assert_eq!(
                visit(Bound::Included(p), false, 99),
                up_in,
                "from {probe} up"
            );
            assert_eq!(visit(Bound::Excluded(p), false, 99), up_ex);
            assert_eq!(
                visit(Bound::Included(p), true, 99),
                down_in,
                "from {probe} down"
            );
            assert_eq!(visit(Bound::Excluded(p), true, 99), down_ex);
            assert_eq!(
                visit(Bound::Included(p), false, 3),
                up_in[..up_in.len().min(3)]
            );
        }
        assert_eq!(visit(Bound::Unbounded, false, 99), model);
        let mut reversed = model.clone();
        reversed.reverse();
        assert_eq!(visit(Bound::Unbounded, true, 99), reversed);
        late.free_blocks(&res);
    }

    /// A closed late run takes no insert.
    #[test]
    fn a_closed_late_run_refuses_inserts() {
        let res = Resources::new(4096);
        let late = LateRun::<u64>::new(2, 4);
        late.close();
        assert!(!late.insert(LatePlace { slot: 0, j: 0 }, 1, 1, &res, |_, _| 0));
        assert_eq!(late.frozen().len(), 0);
    }
}
