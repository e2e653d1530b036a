//! The data layer: the chain of data blocks in key order, its search layer, and the
//! operations on blocks: finding a position's block, point reads, writes of delayed entries
//! (in a block's late area, or by rewriting its body, splitting it when full), deletes, and
//! the conversion's append of sorted entries at the end.
//!
//! A writer locks exactly one block, the one its position belongs to; a split creates the
//! new blocks privately and links them under that one lock. Replaced bodies and unlinked
//! blocks go to the epoch collector.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_epoch::Guard;

use super::block::Block;
use super::body::{build, plan, Body, Reach};
use super::key::{Pos, SbKey};
use super::search::SearchLayer;
use super::segment::Captured;
use super::{Geometry, Resources};
use crate::counter::StripedCount;
use crate::sync::{Optimistic, Restart};

/// A write to the data layer.
#[derive(Debug, Clone, Copy)]
pub enum Write {
    /// Insert the entry; `replace`: a unique index replaces a present key's tid.
    Insert {
        /// The tid.
        tid: u64,
        /// Replace the tid of a present key (unique index).
        replace: bool,
    },
    /// Remove the entry at the position, if its tid is `tid` when given.
    Remove {
        /// The tid the entry must have.
        tid: Option<u64>,
    },
}

/// See the module docs.
pub struct DataLayer<K: SbKey> {
    head: AtomicPtr<Block<K>>,
    /// A block at or before the last one (appends walk right from it).
    tail: AtomicPtr<Block<K>>,
    search: AtomicPtr<SearchLayer<K>>,
    /// The allocator and byte counts, shared with the epoch collector's deferred frees.
    pub res: Arc<Resources>,
    /// Sizes and settings.
    pub geo: Geometry,
    len: StripedCount,
    /// Blocks linked into the middle of the chain (by splits) that the search layer has not
    /// indexed: the maintenance thread rebuilds the layer when they add up.
    pub unindexed: AtomicUsize,
    /// The lowest low fence of a block split since the search layer was last rebuilt: the
    /// layer's entries below it are still right, so a rebuild keeps them.
    pub split_low: Mutex<Option<Pos<K>>>,
    /// The late level of the bodies appends build (see [`Geometry::late_level`]): set by
    /// the conversions from the share of entries that arrive below the frontier.
    pub late_level: AtomicUsize,
}

// SAFETY: all shared state is atomics; blocks are accessed under the version-lock protocol
// and freed through the epoch collector.
unsafe impl<K: SbKey> Send for DataLayer<K> {}
// SAFETY: as above.
unsafe impl<K: SbKey> Sync for DataLayer<K> {}

impl<K: SbKey> DataLayer<K> {
    /// An empty data layer: one block without a body, holding every position.
    pub fn new(geo: Geometry, res: Arc<Resources>) -> Self {
        let head = Self::alloc_block(&res, Pos::MIN);
        let search = Box::new(SearchLayer::new(64, geo.fanout, geo.pairs));
        res.search
            .add(search.bytes() + std::mem::size_of::<SearchLayer<K>>());
        let layer = Self {
            head: AtomicPtr::new(head),
            tail: AtomicPtr::new(head),
            search: AtomicPtr::new(Box::into_raw(search)),
            res,
            geo,
            len: StripedCount::default(),
            unindexed: AtomicUsize::new(0),
            split_low: Mutex::new(None),
            late_level: AtomicUsize::new(0),
        };
        layer.search_layer_unguarded().push(
            Pos::MIN,
            head,
            std::ptr::null_mut(),
            Default::default(),
        );
        layer
    }

    fn alloc_block(res: &Resources, low: Pos<K>) -> *mut Block<K> {
        res.headers.add(std::mem::size_of::<Block<K>>());
        Box::into_raw(Box::new(Block::new(low)))
    }

    /// The first block.
    pub fn head(&self) -> *mut Block<K> {
        self.head.load(Ordering::Acquire)
    }

    /// Live entries in the data layer (exact when no writer runs).
    pub fn len(&self) -> usize {
        self.len.get()
    }

    /// The search layer, read under `guard`.
    pub fn search_layer<'g>(&self, _guard: &'g Guard) -> &'g SearchLayer<K> {
        // SAFETY: the pointer is never null; a replaced layer is retired to the epoch
        // collector, so it stays allocated while `guard` is pinned.
        unsafe { &*self.search.load(Ordering::Acquire) }
    }

    fn search_layer_unguarded(&self) -> &SearchLayer<K> {
        // SAFETY: only while the layer cannot be replaced (construction, or the caller holds
        // the maintenance mutex, which every replacement takes).
        unsafe { &*self.search.load(Ordering::Acquire) }
    }

    /// The search layer, for its single writer (the holder of the maintenance mutex, which
    /// also guards every replacement).
    pub fn search_layer_for_writer(&self) -> &SearchLayer<K> {
        self.search_layer_unguarded()
    }

    /// Replaces the search layer (maintenance mutex held), retiring the old one.
    pub fn replace_search_layer(&self, layer: SearchLayer<K>, guard: &Guard) {
        self.res
            .search
            .add(layer.bytes() + std::mem::size_of::<SearchLayer<K>>());
        let old = self
            .search
            .swap(Box::into_raw(Box::new(layer)), Ordering::AcqRel);
        let res = Arc::clone(&self.res);
        let old = SendPtr(old);
        // SAFETY: the old layer is unreachable for new readers; the collector frees it once
        // every thread pinned now has unpinned.
        unsafe {
            guard.defer_unchecked(move || {
                let old = Box::from_raw(old.into_inner());
                res.search
                    .sub(old.bytes() + std::mem::size_of::<SearchLayer<K>>());
            })
        };
    }

    /// The block to start a search for `pos` (below it if `strict`) from: the search layer's
    /// answer, or the first block; what the reader will take from there (`reach`) starts
    /// loading.
    #[inline]
    fn start<'g>(&self, pos: Pos<K>, strict: bool, reach: Reach, guard: &'g Guard) -> &'g Block<K> {
        let found = self
            .search_layer(guard)
            .find_hinted(pos, strict, self.geo.kernel);
        let ptr = match found {
            Some(hinted) => {
                hinted.prefetch(pos.key, self.geo.bucket, reach);
                hinted.block
            }
            None => self.head(),
        };
        // SAFETY: blocks in the search layer and the head are published blocks; unlinked ones
        // are retired through the epoch collector only after the layer stops referring to
        // them, so `guard` keeps this one allocated.
        unsafe { &*ptr }
    }

    /// From `block`, moves right to the block that holds `pos` (or, `strict`, the block
    /// holding the largest positions below `pos`) and returns it with the version read.
    #[inline]
    pub fn walk<'g>(
        &self,
        mut block: &'g Block<K>,
        pos: Pos<K>,
        strict: bool,
    ) -> (&'g Block<K>, Optimistic<'g>) {
        loop {
            let read = match block.lock.read_begin() {
                Ok(read) => read,
                Err(Restart) => {
                    // Obsolete: its range went to its successor (see `block`).
                    // SAFETY: an obsolete block keeps its successor, a published block that
                    // the epoch guard of the caller keeps allocated.
                    block = unsafe { &*block.next() };
                    continue;
                }
            };
            let next = block.next();
            let beyond = !next.is_null() && {
                let high = block.high();
                if strict {
                    pos > high
                } else {
                    pos >= high
                }
            };
            if beyond {
                if read.validate().is_ok() {
                    // SAFETY: read from a validated block: a published block, kept allocated
                    // by the caller's guard.
                    block = unsafe { &*next };
                }
                continue;
            }
            return (block, read);
        }
    }

    /// The block holding `pos` (or, `strict`, the largest positions below it) and its
    /// version, for a reader that takes `reach` from there.
    #[inline]
    pub fn locate<'g>(
        &self,
        pos: Pos<K>,
        strict: bool,
        reach: Reach,
        guard: &'g Guard,
    ) -> (&'g Block<K>, Optimistic<'g>) {
        self.walk(self.start(pos, strict, reach, guard), pos, strict)
    }

    /// The live tid at `pos`.
    pub fn get(&self, pos: Pos<K>, guard: &Guard) -> Option<u64> {
        let (mut block, mut read) = self.locate(pos, false, Reach::Up(1), guard);
        loop {
            let found = block
                .body(guard)
                .and_then(|body| body.get(pos, self.geo.pairs, self.geo.kernel));
            if read.validate().is_ok() {
                return found;
            }
            (block, read) = self.walk(block, pos, false);
        }
    }

    /// Applies `write` at the position of `(key, tid)`. Insert: the present tid (a unique
    /// index's previous tid, which `replace` replaced; a non-unique index's pair) or `None`
    /// when added. Remove: the removed tid.
    pub fn write(&self, key: K, write: Write, guard: &Guard) -> Option<u64> {
        let pairs = self.geo.pairs;
        let pos = match write {
            Write::Insert { tid, .. } => Pos::of(key, tid, pairs),
            Write::Remove { tid } => Pos::of(key, tid.unwrap_or(0), pairs),
        };
        let (mut block, mut read) = self.locate(pos, false, Reach::Up(1), guard);
        loop {
            if let Ok(lock) = read.upgrade() {
                let done = self.write_locked(block, key, pos, write, guard);
                drop(lock);
                return done;
            }
            (block, read) = self.walk(block, pos, false);
        }
    }

    /// Inserts `entries` (in position order; a unique index's replace a present tid) as
    /// [`DataLayer::write`] would one at a time, but with one descent and one lock per
    /// block they go to rather than per entry: a converted segment's spill, whose entries
    /// fall into the blocks just built from the segment, a few to each.
    pub fn insert_sorted(&self, entries: &[(K, u64)], guard: &Guard) {
        let pairs = self.geo.pairs;
        let at = |i: usize| Pos::of(entries[i].0, entries[i].1, pairs);
        let mut i = 0;
        while i < entries.len() {
            let (mut block, mut read) = self.locate(at(i), false, Reach::Up(1), guard);
            let lock = loop {
                if let Ok(lock) = read.upgrade() {
                    break lock;
                }
                (block, read) = self.walk(block, at(i), false);
            };
            // The block takes every next entry below its high fence (a rewrite that split
            // it moved the fence down, to the first new block's low).
            loop {
                let (key, tid) = entries[i];
                let write = Write::Insert { tid, replace: true };
                self.write_locked(block, key, at(i), write, guard);
                i += 1;
                if i == entries.len() || (!block.next().is_null() && at(i) >= block.high()) {
                    break;
                }
            }
            drop(lock);
        }
    }

    /// [`DataLayer::write`] on `block`, write-locked by the caller.
    fn write_locked(
        &self,
        block: &Block<K>,
        key: K,
        pos: Pos<K>,
        write: Write,
        guard: &Guard,
    ) -> Option<u64> {
        let (pairs, kernel) = (self.geo.pairs, self.geo.kernel);
        let body = block.body(guard);
        match write {
            Write::Insert { tid, replace } => {
                let Some(body) = body else {
                    self.rewrite_balanced(block, &[(key, tid)], guard);
                    self.len.add(1);
                    return None;
                };
                match body.find(pos, pairs, kernel) {
                    Ok(i) if !body.is_dead(i) => {
                        let present = body.tid(i);
                        if pairs || !replace {
                            return Some(present);
                        }
                        if !body.set_tid(i, tid) {
                            let entries = with_tid(&body, pairs, pos, tid);
                            self.rewrite_balanced(block, &entries, guard);
                        }
                        return Some(present);
                    }
                    Ok(i) => {
                        if body.set_tid(i, tid) {
                            body.set_dead(i, false);
                        } else {
                            let mut entries = Vec::new();
                            body.live_entries(pairs, &mut entries);
                            insert_sorted(&mut entries, key, tid, pairs);
                            self.rewrite_balanced(block, &entries, guard);
                        }
                        self.len.add(1);
                        return None;
                    }
                    Err(_) => {}
                }
                let (j, found) = body.late_find(pos, pairs);
                if found {
                    let present = body.late(j).1;
                    if !pairs && replace {
                        body.late_set_tid(j, tid);
                    }
                    return Some(present);
                }
                if !body.late_insert(j, key, tid) {
                    let mut entries = Vec::with_capacity(body.live() + 1);
                    body.live_entries(pairs, &mut entries);
                    insert_sorted(&mut entries, key, tid, pairs);
                    self.rewrite_balanced(block, &entries, guard);
                }
                self.len.add(1);
                None
            }
            Write::Remove { tid: wanted } => {
                let body = body?;
                let matches = |t: u64| wanted.is_none_or(|w| w == t);
                let removed = match body.find(pos, pairs, kernel) {
                    Ok(i) if !body.is_dead(i) && matches(body.tid(i)) => {
                        body.set_dead(i, true);
                        Some(body.tid(i))
                    }
                    Ok(_) => None,
                    Err(_) => match body.late_find(pos, pairs) {
                        (j, true) if matches(body.late(j).1) => {
                            let t = body.late(j).1;
                            body.late_remove(j);
                            Some(t)
                        }
                        _ => None,
                    },
                };
                if removed.is_some() {
                    self.len.add(-1);
                    // Compact once half the main entries are dead; drop an empty body.
                    if body.live() == 0 || 2 * body.dead() > body.count() {
                        let mut entries = Vec::with_capacity(body.live());
                        body.live_entries(pairs, &mut entries);
                        self.rewrite_balanced(block, &entries, guard);
                    }
                }
                removed
            }
        }
    }

    /// [`Self::rewrite`] of a write: `entries` spread evenly, with the late area writes want.
    fn rewrite_balanced(&self, block: &Block<K>, entries: &[(K, u64)], guard: &Guard) {
        self.rewrite(block, entries, self.late_level_for_writes(), true, guard);
    }

    /// Replaces the body of the write-locked `block` with bodies holding `entries` (in
    /// position order, within the block's range): the first stays in `block`, the others
    /// become new blocks linked after it. `balanced` spreads the entries evenly over as few
    /// bodies as hold them (a split); otherwise each body is filled in turn.
    fn rewrite(
        &self,
        block: &Block<K>,
        entries: &[(K, u64)],
        late_level: usize,
        balanced: bool,
        guard: &Guard,
    ) {
        let geo = &self.geo;
        let pieces = if balanced {
            split_even(entries, late_level, geo)
        } else {
            split_greedy(entries, late_level, geo)
        };
        let bodies = pieces
            .iter()
            .map(|&(start, shape)| {
                let body = build(
                    &self.res.blocks,
                    shape,
                    &entries[start..start + shape.count],
                );
                let low = Pos::of(entries[start].0, entries[start].1, geo.pairs);
                (low, body.as_ptr())
            })
            .collect();
        self.install(block, bodies, guard);
    }

    /// Gives the write-locked `block` the first of `bodies` (each with its lowest position,
    /// in position order, within the block's range; none: no body) and links new blocks
    /// holding the others after it, B-link style: they are built privately and published by
    /// `block`'s link to the first of them.
    fn install(&self, block: &Block<K>, bodies: Vec<(Pos<K>, *mut u8)>, guard: &Guard) {
        let first = bodies
            .first()
            .map_or(std::ptr::null_mut(), |&(_, body)| body);
        // New blocks for the other bodies, unpublished until `block` links the first.
        let fresh: Vec<(*mut Block<K>, Pos<K>)> = bodies
            .iter()
            .skip(1)
            .map(|&(low, body)| {
                let new = Self::alloc_block(&self.res, low);
                // SAFETY: freshly allocated, not yet shared.
                unsafe { &*new }.set_body(body);
                (new, low)
            })
            .collect();
        let old_next = block.next();
        // Link back to front: each new block points at the next one (or the old successor).
        let mut next = old_next;
        let mut next_low = block.high();
        for &(new, low) in fresh.iter().rev() {
            // SAFETY: as above.
            let new_ref = unsafe { &*new };
            new_ref.set_next(next);
            if !next.is_null() {
                new_ref.set_high(next_low);
            }
            next = new;
            next_low = low;
        }
        if let Some(&(first_new, low)) = fresh.first() {
            block.set_high(low);
            block.set_next(first_new);
            if old_next.is_null() {
                let last = fresh.last().expect("a new block").0;
                self.tail.store(last, Ordering::Release);
            } else {
                let low = block.low();
                let mut split_low = super::lock(&self.split_low);
                *split_low = Some(split_low.map_or(low, |s| s.min(low)));
                self.unindexed.fetch_add(fresh.len(), Ordering::Relaxed);
            }
        }
        let old = block.set_body(first);
        self.retire_body(old, guard);
    }

    /// Appends the entries of `source` (in position order, all above every position in the
    /// layer) at the end of the chain and returns how many: the last block's body is
    /// refilled with its entries and the first new ones, the rest go to new blocks, each
    /// body filled in turn. The bodies are built from a buffer of about one body's entries,
    /// topped up from `source` as they are used: the segment is read once, in place when
    /// it can be ([`Captured`]), and never copied whole.
    pub fn append(&self, source: &mut Captured<'_, K>, guard: &Guard) -> usize {
        if source.remaining() == 0 {
            return 0;
        }
        // SAFETY: the tail hint is a published block, and the last blocks are never unlinked.
        let tail: &Block<K> = unsafe { &*self.tail.load(Ordering::Acquire) };
        let beyond = Pos::MAX;
        let (mut block, mut read) = self.walk(tail, beyond, false);
        loop {
            // The walk ends at the last block: nothing is at or above its (absent) high fence.
            let Ok(_lock) = read.upgrade() else {
                (block, read) = self.walk(block, beyond, false);
                continue;
            };
            let geo = &self.geo;
            let (late_cap, capacities) = geo.late(self.late_level.load(Ordering::Relaxed));
            // A body holds at most this many entries: the buffer's target.
            let window = capacities.iter().copied().max().unwrap_or(0).max(1);
            let mut buf = Vec::with_capacity(2 * window);
            if let Some(body) = block.body(guard) {
                body.live_entries(geo.pairs, &mut buf);
            }
            let mut added = 0;
            let mut start = 0;
            let mut bodies = Vec::new();
            loop {
                let held = buf.len() - start;
                if held < window && source.remaining() > 0 {
                    buf.drain(..start);
                    start = 0;
                    source.fill(&mut buf, window - held);
                    added += buf.len() - held;
                    continue;
                }
                if held == 0 {
                    break;
                }
                let shape = plan(&buf[start..], capacities, late_cap, geo.bucket);
                assert!(shape.count > 0, "a body holds at least one entry");
                let entries = &buf[start..start + shape.count];
                let low = Pos::of(entries[0].0, entries[0].1, geo.pairs);
                bodies.push((low, build(&self.res.blocks, shape, entries).as_ptr()));
                start += shape.count;
            }
            self.install(block, bodies, guard);
            self.len.add(added as isize);
            return added;
        }
    }

    /// The late level of a body rewritten for a delayed entry: the appends' level, at least
    /// the first.
    fn late_level_for_writes(&self) -> usize {
        self.late_level.load(Ordering::Relaxed).max(1)
    }

    /// Hands a replaced body to the epoch collector (nothing for null).
    fn retire_body(&self, body: *mut u8, guard: &Guard) {
        let Some(body) = NonNull::new(body) else {
            return;
        };
        let res = Arc::clone(&self.res);
        let body = SendPtr(body.as_ptr());
        // SAFETY: the body is no longer published (its block points elsewhere); readers that
        // loaded it are pinned, and the collector runs this once they have all unpinned.
        unsafe {
            guard.defer_unchecked(move || {
                res.blocks.free(NonNull::new_unchecked(body.into_inner()));
            })
        };
    }

    /// Frees every block and body and the search layer; the caller has exclusive access.
    pub fn free_all(&mut self) {
        let mut block = *self.head.get_mut();
        while !block.is_null() {
            // SAFETY: exclusive access: every block in the chain is ours to free.
            let owned = unsafe { Box::from_raw(block) };
            if let Some(body) = NonNull::new(owned.body_ptr()) {
                // SAFETY: the body is no longer reachable.
                unsafe { self.res.blocks.free(body) };
            }
            self.res.headers.sub(std::mem::size_of::<Block<K>>());
            block = owned.next();
        }
        *self.head.get_mut() = std::ptr::null_mut();
        let search = std::mem::replace(self.search.get_mut(), std::ptr::null_mut());
        if !search.is_null() {
            // SAFETY: exclusive access; the layer is no longer reachable.
            let layer = unsafe { Box::from_raw(search) };
            self.res
                .search
                .sub(layer.bytes() + std::mem::size_of::<SearchLayer<K>>());
        }
    }
}

/// A raw pointer moved into a deferred closure.
pub(super) struct SendPtr<T>(pub(super) *mut T);

impl<T> SendPtr<T> {
    /// The pointer (a method, so a closure captures the whole wrapper).
    pub(super) fn into_inner(self) -> *mut T {
        self.0
    }
}

// SAFETY: the pointee is handed over to the closure alone (it is unreachable for others).
unsafe impl<T> Send for SendPtr<T> {}

/// The live entries of `body` with the entry at `pos` given tid `tid`.
fn with_tid<K: SbKey>(body: &Body<'_, K>, pairs: bool, pos: Pos<K>, tid: u64) -> Vec<(K, u64)> {
    let mut entries = Vec::with_capacity(body.live());
    body.live_entries(pairs, &mut entries);
    for entry in entries.iter_mut() {
        if Pos::of(entry.0, entry.1, pairs) == pos {
            entry.1 = tid;
        }
    }
    entries
}

/// Inserts `(key, tid)` into the sorted `entries`.
fn insert_sorted<K: SbKey>(entries: &mut Vec<(K, u64)>, key: K, tid: u64, pairs: bool) {
    let pos = Pos::of(key, tid, pairs);
    let at = entries.partition_point(|&(k, t)| Pos::of(k, t, pairs) < pos);
    entries.insert(at, (key, tid));
}

/// Cuts `entries` into as few bodies as hold them, filling each in turn: (start, shape).
fn split_greedy<K: SbKey>(
    entries: &[(K, u64)],
    late_level: usize,
    geo: &Geometry,
) -> Vec<(usize, super::body::Shape)> {
    let (late_cap, capacities) = geo.late(late_level);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let shape = plan(&entries[start..], capacities, late_cap, geo.bucket);
        assert!(shape.count > 0, "a body holds at least one entry");
        pieces.push((start, shape));
        start += shape.count;
    }
    pieces
}

/// Cuts `entries` into as few bodies as hold them, of equal sizes (within one).
fn split_even<K: SbKey>(
    entries: &[(K, u64)],
    late_level: usize,
    geo: &Geometry,
) -> Vec<(usize, super::body::Shape)> {
    let (late_cap, capacities) = geo.late(late_level);
    let n = entries.len();
    let mut parts = split_greedy(entries, late_level, geo).len();
    loop {
        let mut pieces = Vec::with_capacity(parts);
        let mut fits = true;
        for p in 0..parts {
            let (start, end) = (p * n / parts, (p + 1) * n / parts);
            let shape = plan(&entries[start..end], capacities, late_cap, geo.bucket);
            if shape.count < end - start {
                fits = false;
                break;
            }
            pieces.push((start, shape));
        }
        if fits {
            return pieces;
        }
        parts += 1;
    }
}

#[cfg(test)]
mod tests {
    use crate::sbtree::key::Pos;
    use crate::sbtree::tree::SbTree;
    use crate::sbtree::{Geometry, SbTreeOptions};

    /// A sorted batch lands as single writes would: new positions between and beyond the
    /// blocks' (many into one block, which is rewritten and split on the way), and a
    /// unique index's present key gets its new tid; the tree checks and every key reads
    /// back.
    #[test]
    fn a_sorted_batch_inserts_across_blocks_and_their_splits() {
        for pairs in [false, true] {
            let geo = Geometry::new::<u64>(&SbTreeOptions::default(), pairs, Some(4), Some(4));
            let tree = SbTree::<u64>::new(geo);
            let mut model = std::collections::BTreeMap::new();
            for k in (0..400).step_by(10) {
                assert_eq!(tree.insert(k, k), None);
                model.insert((k, k), ());
            }
            tree.flush();
            // 20 into the block of 100..130, one into most others, 3 into the last block
            // (the data layer holds positions up to the frontier's bound, 390), and key 200
            // again with another tid.
            let mut batch: Vec<(u64, u64)> = (101..121).map(|k| (k, k + 1000)).collect();
            batch.extend((5..390).step_by(30).map(|k| (k, k + 1000)));
            batch.extend([(386, 1386), (387, 1387), (389, 1389), (200, 7)]);
            batch.sort_unstable_by_key(|&(k, t)| Pos::of(k, t, pairs));
            batch.dedup_by_key(|e| e.0);
            tree.data.insert_sorted(&batch, &crossbeam_epoch::pin());
            for &(k, t) in &batch {
                if !pairs {
                    model.retain(|&(key, _), _| key != k);
                }
                model.insert((k, t), ());
            }
            tree.check().expect("a valid tree");
            for &(k, t) in model.keys() {
                assert_eq!(
                    tree.get(Pos::of(k, t, pairs)),
                    Some(t),
                    "{k}: pairs {pairs}"
                );
            }
            assert_eq!(tree.len(), model.len(), "pairs {pairs}");
        }
    }
}
