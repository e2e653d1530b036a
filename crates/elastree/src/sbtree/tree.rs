//! [`SbTree`]: the data layer, the chain of segments and the maintenance state of one
//! index, and its point operations: where a position goes ([`SbTree::route`]), inserts,
//! lookups and removes, the seal and the conversion.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

use crossbeam_epoch::{self as epoch, Guard};
use smallvec::SmallVec;

use super::data::{DataLayer, Write};
use super::key::{Pos, SbKey};
use super::maintain::Maintenance;
use super::segment::Segment;
use super::shortcut::{self, Inserted};
use super::stats::Counters;
use super::{Geometry, Resources};
use crate::sync::atomic::SpinWait;

/// Where a position belongs.
pub enum Route<'g, K: SbKey> {
    /// The frontier segment.
    Active(&'g Segment<K>),
    /// A sealed segment not yet converted.
    Sealed(&'g Segment<K>),
    /// The data layer.
    Data,
}

/// One SB-tree. See the module docs of [`super`].
pub struct SbTree<K: SbKey> {
    /// The data layer.
    pub data: DataLayer<K>,
    frontier: AtomicPtr<Segment<K>>,
    /// The number of the last segment converted (conversions go in sealing order).
    converted: AtomicU64,
    /// The tree's process-wide id (the key of threads' runs).
    pub id: u64,
    /// Sizes and settings.
    pub geo: Geometry,
    /// The allocator and byte counts.
    pub res: Arc<Resources>,
    /// The search layer's writer state; whoever holds it maintains the layer.
    pub maintenance: Mutex<Maintenance<K>>,
    /// The maintenance thread, woken after conversions and splits.
    pub maintainer: OnceLock<Thread>,
    /// What the tree has done.
    pub counters: Counters,
    /// Converted segments some thread may still hold a run of.
    pub lingering: Mutex<Vec<SegmentPtr<K>>>,
    /// The recent share of entries written below the frontier (see `adapt_late_level`).
    late_rate: Mutex<LateRate>,
    /// Sealed segments waiting for their conversion, in sealing order, each with the segment
    /// sealed after it (see [`SbTree::seal`]).
    pending: Mutex<VecDeque<(SegmentPtr<K>, SegmentPtr<K>)>>,
    /// Held by the thread converting: conversions go one at a time, in sealing order, and a
    /// thread that must wait for one blocks here instead of spinning (on two cores, a
    /// spinning waiter took the core the converter needed).
    pub converting: Mutex<()>,
    /// The length of `pending` (written under its lock): read without the lock, so the
    /// check every slow-path insert makes touches no lock while few segments wait.
    pending_len: AtomicUsize,
}

/// Sealed segments left to the maintenance thread before inserts that leave the shortcut
/// convert the oldest themselves: enough to keep inserting while the maintenance thread
/// converts, few enough that readers and late inserts rarely meet an unconverted segment
/// and memory stays bounded.
const MAX_PENDING: usize = 2;

/// Late slots a conversion leaves per expected late entry: a little more than expected, as
/// the share varies from block to block.
const LATE_MARGIN: f64 = 1.25;

/// The share of entries that arrive below the frontier, per entry converted.
#[derive(Default)]
struct LateRate {
    /// The count of such entries at the last conversion.
    delayed: usize,
    /// Their recent share (halved at every conversion, plus half the new sample).
    share: f64,
}

/// A converted segment waiting to be freed.
pub struct SegmentPtr<K: SbKey>(pub *mut Segment<K>);

// SAFETY: the segment is freed by whoever takes it off the tree's list, once.
unsafe impl<K: SbKey> Send for SegmentPtr<K> {}

/// Ids of trees, for the threads' run lists.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl<K: SbKey> SbTree<K> {
    /// An empty tree.
    pub fn new(geo: Geometry) -> Self {
        let res = Arc::new(Resources::new(geo.block_bytes));
        let data = DataLayer::new(geo, Arc::clone(&res));
        let first = Segment::new(1, None, &geo, &res);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        shortcut::register(id);
        let head = data.head();
        Self {
            data,
            frontier: AtomicPtr::new(Box::into_raw(first)),
            converted: AtomicU64::new(0),
            id,
            geo,
            res,
            maintenance: Mutex::new(Maintenance::new(head)),
            maintainer: OnceLock::new(),
            counters: Counters::default(),
            lingering: Mutex::new(Vec::new()),
            late_rate: Mutex::new(LateRate::default()),
            pending: Mutex::new(VecDeque::new()),
            converting: Mutex::new(()),
            pending_len: AtomicUsize::new(0),
        }
    }

    /// The frontier segment, read under `guard`.
    #[inline]
    pub fn frontier<'g>(&self, _guard: &'g Guard) -> &'g Segment<K> {
        // SAFETY: never null; a segment is freed only after it is converted (no longer the
        // frontier) and through the epoch collector.
        unsafe { &*self.frontier.load(Ordering::Acquire) }
    }

    /// Where `pos` belongs now.
    pub fn route<'g>(&self, pos: Pos<K>, guard: &'g Guard) -> Route<'g, K> {
        let frontier = self.frontier(guard);
        if frontier.holds(pos) {
            return Route::Active(frontier);
        }
        let mut segment = frontier;
        loop {
            let prev = segment.prev.load(Ordering::Acquire);
            if prev.is_null() {
                return Route::Data;
            }
            // SAFETY: a linked segment is not converted yet, so not freed; the guard keeps an
            // unlinked one allocated.
            segment = unsafe { &*prev };
            if segment.holds(pos) {
                return Route::Sealed(segment);
            }
        }
    }

    /// Waits until the segment numbered `seq` is converted (its entries are in the data
    /// layer), converting pending segments meanwhile. Called unpinned: a thread that waits
    /// pinned holds back the epoch, and with it the freeing of every converted segment.
    fn await_conversion(&self, seq: u64) {
        let wait = SpinWait::new();
        while self.converted.load(Ordering::Acquire) < seq {
            self.convert_pending(0);
            if self.converted.load(Ordering::Acquire) >= seq {
                return;
            }
            // Another thread is converting it (or the one before it): wait for its turn to
            // end, parked; or its sealer has yet to queue it: a moment.
            drop(super::lock(&self.converting));
            wait.wait();
        }
    }

    /// Waits until `segment` is no longer the frontier (its sealer installed the next).
    fn wait_replaced(&self, segment: &Segment<K>) {
        let wait = SpinWait::new();
        while std::ptr::eq(self.frontier.load(Ordering::Acquire), segment) {
            wait.wait();
        }
    }

    /// Unique index: inserts or replaces, returning the previous tid. Non-unique: adds the
    /// pair, returning `Some(tid)` if it was present.
    #[inline]
    pub fn insert(&self, key: K, tid: u64) -> Option<u64> {
        if let Some(done) = self.append_fast(key, tid) {
            return done;
        }
        self.insert_routed(key, tid)
    }

    /// An insert the shortcut did not take: into this thread's late run if the late
    /// shortcut takes it ([`SbTree::late_fast`]), else routed by position to the frontier, a
    /// sealed segment or the data layer. Kept out of line so that the shortcut's caller saves no
    /// registers for it.
    #[inline(never)]
    fn insert_routed(&self, key: K, tid: u64) -> Option<u64> {
        if let Some(done) = self.late_fast(key, tid) {
            return done;
        }
        let pairs = self.geo.pairs;
        let pos = Pos::of(key, tid, pairs);
        loop {
            // Sealed segments beyond the few left to the maintenance thread are converted
            // here, unpinned (see `await_conversion`).
            self.convert_pending(MAX_PENDING);
            let guard = epoch::pin();
            let sealed = match self.route(pos, &guard) {
                Route::Data => {
                    self.counters.delayed.add(1);
                    return self
                        .data
                        .write(key, Write::Insert { tid, replace: true }, &guard);
                }
                Route::Sealed(segment) => match segment.spill_insert(pos, key, tid, pairs) {
                    Some(done) => {
                        self.counters.spilled.add(1);
                        return done;
                    }
                    None => segment.seq,
                },
                Route::Active(segment) => match self.insert_into(segment, key, tid) {
                    Some(done) => return done,
                    None => continue,
                },
            };
            drop(guard);
            self.await_conversion(sealed);
        }
    }

    /// The slow path of an insert into the frontier `segment`: `None` to route again.
    fn insert_into(&self, segment: &Segment<K>, key: K, tid: u64) -> Option<Option<u64>> {
        let pairs = self.geo.pairs;
        let pos = Pos::of(key, tid, pairs);
        if segment.head.is_closed() {
            self.wait_replaced(segment);
            return None;
        }
        let lengths = segment.committed_lengths();
        // Not in this thread's own late run: an insert into it searches it under its lock
        // (and replaces a live entry it finds there), so this search would be a second one.
        let own = self.held_slot(segment);
        if let Some((place, present)) = segment.find(pos, &lengths, pairs, own) {
            if pairs {
                return Some(Some(present));
            }
            let Some(_inside) = segment.gate.enter() else {
                self.wait_replaced(segment);
                return None;
            };
            return segment.modify(place, pos, pairs, None, Some(tid)).map(Some);
        }
        let Some(run) = self.run_in(segment) else {
            if !segment.head.is_closed() {
                // Every run slot is taken.
                self.seal(segment);
            } else {
                self.wait_replaced(segment);
            }
            return None;
        };
        // SAFETY: this thread owns the run it got from `run_in`.
        let owner = unsafe { run.owner() };
        // Above the run's last append (any position in the segment before the first one).
        let inserted = if owner.count == 0 || pos > owner.floor {
            let c = owner.count as usize;
            if run.make_room(c, &self.res) {
                owner.limit = run.room_end(c);
                owner.next = run.slot_ptr(c);
                self.append(segment, run, owner, key, tid)
            } else {
                Inserted::Full
            }
        } else {
            self.insert_late(segment, run, owner, key, tid)
        };
        match inserted {
            Inserted::Done(result) => Some(result),
            Inserted::Full => {
                self.seal(segment);
                None
            }
            Inserted::Dropped => {
                self.wait_replaced(segment);
                None
            }
            // The look at the segment above found no live entry in this thread's run.
            Inserted::Present => None,
        }
    }

    /// The live tid at `pos` (a unique index's key, or an exact pair).
    pub fn get(&self, pos: Pos<K>) -> Option<u64> {
        let guard = &epoch::pin();
        match self.route(pos, guard) {
            Route::Data => self.data.get(pos, guard),
            Route::Active(segment) | Route::Sealed(segment) => {
                let lengths = segment.committed_lengths();
                segment
                    .find(pos, &lengths, self.geo.pairs, None)
                    .map(|(_, tid)| tid)
                    .or_else(|| segment.spill_find(pos, self.geo.pairs))
            }
        }
    }

    /// Removes the entry at `pos` if its tid is `expect` (when given); returns its tid.
    pub fn remove(&self, key: K, expect: Option<u64>) -> Option<u64> {
        let pairs = self.geo.pairs;
        let pos = Pos::of(key, expect.unwrap_or(0), pairs);
        loop {
            let guard = epoch::pin();
            let sealed = match self.route(pos, &guard) {
                Route::Data => return self.data.write(key, Write::Remove { tid: expect }, &guard),
                Route::Sealed(segment) => segment.seq,
                Route::Active(segment) => {
                    let Some(_inside) = segment.gate.enter() else {
                        self.wait_replaced(segment);
                        continue;
                    };
                    let lengths = segment.committed_lengths();
                    let (place, tid) = segment.find(pos, &lengths, pairs, None)?;
                    if expect.is_some_and(|e| e != tid) {
                        return None;
                    }
                    if let Some(removed) = segment.modify(place, pos, pairs, expect, None) {
                        return Some(removed);
                    }
                    continue;
                }
            };
            drop(guard);
            self.await_conversion(sealed);
        }
    }

    /// Seals the frontier `segment` (or waits for the thread that does): installs the next
    /// frontier and has the sealed segment converted into data blocks.
    ///
    /// With a maintenance thread, the conversion is queued for it and the sealer goes back
    /// to inserting (on another core, the conversion then costs the inserting threads
    /// nothing); inserts that leave the shortcut convert the oldest queued segments
    /// themselves while more than [`MAX_PENDING`] wait. Without one (a tree used on its
    /// own, in tests), the sealer converts.
    pub fn seal(&self, segment: &Segment<K>) {
        if !segment.try_start_seal() {
            self.wait_replaced(segment);
            return;
        }
        let pairs = self.geo.pairs;
        let max = segment.seal(pairs);
        let lower = max.or(segment.lower);
        let next = Segment::new(segment.seq + 1, lower, &self.geo, &self.res);
        next.prev
            .store(segment as *const _ as *mut _, Ordering::Release);
        let next: &Segment<K> = Box::leak(next);
        self.frontier
            .store(next as *const _ as *mut _, Ordering::Release);
        self.counters.seals.add(1);
        if self.maintainer.get().is_none() {
            self.convert(segment, next);
            return;
        }
        let queued = (
            SegmentPtr(segment as *const _ as *mut _),
            SegmentPtr(next as *const _ as *mut _),
        );
        {
            // In sealing order: a sealer that installed the next frontier may be overtaken by
            // that frontier's sealer before it queues its own segment.
            let mut pending = super::lock(&self.pending);
            let seq = segment.seq;
            // SAFETY: queued segments are freed only after their conversion, which takes
            // them off the queue first.
            let at = pending.partition_point(|(s, _)| unsafe { &*s.0 }.seq < seq);
            pending.insert(at, queued);
            self.pending_len.store(pending.len(), Ordering::Relaxed);
        }
        self.wake_maintainer();
    }

    /// Converts the oldest pending segments until at most `keep` wait.
    pub fn convert_pending(&self, keep: usize) {
        while self.convert_oldest(keep) {}
    }

    /// Converts the oldest pending segment if more than `keep` wait, then runs a
    /// maintenance pass if no one else is; whether it converted. Waits (parked) while
    /// another thread converts: that is the back pressure on inserts that find more than
    /// `keep` segments waiting.
    pub fn convert_oldest(&self, keep: usize) -> bool {
        if self.pending_len.load(Ordering::Relaxed) <= keep {
            return false;
        }
        let turn = super::lock(&self.converting);
        let (segment, next) = {
            let mut pending = super::lock(&self.pending);
            if pending.len() <= keep {
                return false;
            }
            let (SegmentPtr(first), _) = pending.front().expect("more than `keep` pending");
            // SAFETY: queued, so not freed (see `seal`).
            if unsafe { &**first }.seq != self.converted.load(Ordering::Acquire) + 1 {
                // The segment sealed before it is not queued yet: its sealer converts it
                // or wakes the maintenance thread.
                return false;
            }
            let (SegmentPtr(segment), SegmentPtr(next)) =
                pending.pop_front().expect("more than `keep` pending");
            self.pending_len.store(pending.len(), Ordering::Relaxed);
            (segment, next)
        };
        // SAFETY: a sealed segment is freed only after its conversion, and the segment
        // sealed after it only after its own, later one; taken off the queue, this
        // conversion is ours alone.
        unsafe { self.convert(&*segment, &*next) };
        drop(turn);
        // Index the new blocks now, unless someone else is at it: delayed keys land in
        // the newest blocks and, unindexed, reach them by walking the chain.
        if let Ok(mut state) = self.maintenance.try_lock() {
            self.maintain(&mut state);
        }
        true
    }

    /// Moves the sealed `segment`'s entries to the data layer (after the segments sealed
    /// before it) and unlinks it from `next`, the segment sealed after it.
    ///
    /// It waits for the earlier conversions before it pins: a caller that is not pinned
    /// does not hold back the epoch while it waits.
    fn convert(&self, segment: &Segment<K>, next: &Segment<K>) {
        let mut entries = segment.captured(self.geo.pairs);
        let wait = SpinWait::new();
        while self.converted.load(Ordering::Acquire) + 1 != segment.seq {
            wait.wait();
        }
        self.adapt_late_level(entries.remaining());
        let guard = &epoch::pin();
        let added = self.data.append(&mut entries, guard);
        self.counters.converted.add(added as isize);
        // The spill's entries after the runs': readers search the spill until the segment
        // is marked converted, and the data layer from then on.
        self.data.insert_sorted(&segment.close_spill(), guard);
        segment.converted.store(true, Ordering::Release);
        self.converted.store(segment.seq, Ordering::Release);
        next.prev.store(std::ptr::null_mut(), Ordering::Release);
        // The tree's reference: the maintenance pass frees the segment once its threads
        // have let go of their runs.
        segment.release();
        super::lock(&self.lingering).push(SegmentPtr(segment as *const _ as *mut _));
        self.wake_maintainer();
    }

    /// Sets the late level of the bodies the conversions build from the share of entries
    /// that arrived below the frontier (into data blocks) per entry converted since the last
    /// conversion, smoothed: each block a conversion builds receives about that share of its
    /// entries later, so it leaves that much room and stays whole instead of splitting.
    fn adapt_late_level(&self, converting: usize) {
        let mut rate = super::lock(&self.late_rate);
        // Spilled entries, too, go into the newest blocks at the end of their conversion.
        let delayed = self.counters.delayed.get() + self.counters.spilled.get();
        let sample = (delayed - rate.delayed) as f64 / converting.max(1) as f64;
        rate.delayed = delayed;
        rate.share = (rate.share + sample) / 2.0;
        let level = self.geo.late_level(rate.share * LATE_MARGIN);
        self.data.late_level.store(level, Ordering::Relaxed);
    }

    /// Wakes the maintenance thread (cheap when it is not parked).
    pub fn wake_maintainer(&self) {
        if let Some(thread) = self.maintainer.get() {
            thread.unpark();
        }
    }

    /// Seals the frontier if it holds anything, so every entry is in the data layer (waits
    /// for the conversions to finish).
    pub fn flush(&self) {
        {
            let guard = &epoch::pin();
            let frontier = self.frontier(guard);
            if frontier.used() > 0 {
                self.seal(frontier);
            }
        }
        self.convert_pending(0);
        let guard = &epoch::pin();
        let frontier = self.frontier(guard);
        let wait = SpinWait::new();
        while self.converted.load(Ordering::Acquire) + 1 < frontier.seq {
            wait.wait();
        }
    }

    /// Pairs held (exact when no writer runs). Waits for a conversion in progress: one
    /// counts its entries in the data layer before it unlinks their segment (the maintenance
    /// thread converts while the caller's writers are quiet).
    pub fn len(&self) -> usize {
        let _converting = super::lock(&self.converting);
        self.len_unconverting()
    }

    /// [`SbTree::len`] for a caller that holds [`SbTree::converting`].
    pub fn len_unconverting(&self) -> usize {
        let guard = &epoch::pin();
        let mut total = self.data.len();
        let mut segment = self.frontier(guard) as *const Segment<K>;
        while !segment.is_null() {
            // SAFETY: linked segments are alive; the guard keeps them so.
            let s = unsafe { &*segment };
            total += s.live();
            segment = s.prev.load(Ordering::Acquire);
        }
        total
    }

    /// The segments from the frontier back, under `guard`.
    pub fn segments<'g>(&self, guard: &'g Guard) -> SmallVec<[&'g Segment<K>; 4]> {
        let mut out: SmallVec<[&'g Segment<K>; 4]> = SmallVec::new();
        out.push(self.frontier(guard));
        loop {
            let prev = out
                .last()
                .expect("the frontier")
                .prev
                .load(Ordering::Acquire);
            if prev.is_null() {
                return out;
            }
            // SAFETY: as in `route`.
            out.push(unsafe { &*prev });
        }
    }
}

impl<K: SbKey> Drop for SbTree<K> {
    fn drop(&mut self) {
        // After this no thread-local destructor touches the tree's runs.
        shortcut::deregister(self.id);
        let mut segment = *self.frontier.get_mut();
        while !segment.is_null() {
            // SAFETY: exclusive access: no operation runs, every thread's hold is void.
            let owned = unsafe { Box::from_raw(segment) };
            segment = owned.prev.load(Ordering::Relaxed);
        }
        let lingering = std::mem::take(self.lingering.get_mut().unwrap_or_else(|e| e.into_inner()));
        for SegmentPtr(segment) in lingering {
            // SAFETY: converted segments leave the list only when freed; exclusive access.
            drop(unsafe { Box::from_raw(segment) });
        }
        self.data.free_all();
    }
}
