//! The shortcut: how a thread finds its own run without touching shared state, appends to it
//! ([`SbTree::append_fast`]: no lock, no epoch pin, one fence), inserts a late entry into it
//! ([`SbTree::late_fast`]: its lock, no epoch pin), and checks its peers for the same
//! position.
//!
//! # Which run is mine
//!
//! Each thread keeps, per tree, the run it holds and that run's segment (a thread-local list;
//! the last one used is checked first). A held run and its segment stay allocated until the
//! thread lets go of them: when it finds the segment sealed, when it exits (a thread-local
//! destructor), or when the tree is dropped. The destructor must not touch a dropped tree,
//! so trees register their ids in a process-wide set, and the destructor lets go of a run
//! only while holding that set's lock with the tree's id still in it (a tree takes its id
//! out under the same lock before it frees anything).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::sync::Mutex;

use super::key::entry_words;
use super::key::{Pos, SbKey};
use super::protocol::{int, Settled};
use super::run::{Owner, Run};
use super::segment::{Place, Segment};
use super::tree::SbTree;

/// A run this thread holds.
#[derive(Clone, Copy)]
struct Hold {
    tree: u64,
    run: *const (),
    segment: *const (),
    /// Lets go of the segment (its key type erased).
    release: unsafe fn(*const ()),
}

/// This thread's runs, one per tree it inserts into.
struct Holds(RefCell<Vec<Hold>>);

thread_local! {
    static HOLDS: Holds = const { Holds(RefCell::new(Vec::new())) };
    /// The hold used last (tree 0: none), a copy of one in `HOLDS`, checked first: a plain
    /// thread-local without a destructor costs one load to reach.
    static LAST: Cell<(u64, *const (), *const ())> = const { Cell::new((0, std::ptr::null(), std::ptr::null())) };
}

/// The ids of the trees alive (see the module docs).
static LIVE: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, BTreeSet<u64>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records that tree `id` is alive.
pub fn register(id: u64) {
    live().insert(id);
}

/// Records that tree `id` is being dropped: no thread-local destructor touches it after.
pub fn deregister(id: u64) {
    live().remove(&id);
}

impl Drop for Holds {
    fn drop(&mut self) {
        let holds = std::mem::take(self.0.get_mut());
        if holds.is_empty() {
            return;
        }
        let live = live();
        for hold in holds {
            if live.contains(&hold.tree) {
                // SAFETY: the tree is alive and cannot be dropped while we hold `LIVE` (it
                // deregisters under it first), and this thread has not let go of the segment.
                unsafe { (hold.release)(hold.segment) };
            }
        }
    }
}

/// Lets go of a held segment of key type `K`.
///
/// # Safety
///
/// `segment` is a `Segment<K>` the calling thread holds a reference of.
unsafe fn release<K: SbKey>(segment: *const ()) {
    // SAFETY: the caller's promise: the segment is alive while referenced.
    unsafe { &*segment.cast::<Segment<K>>() }.release();
}

/// The run this thread holds in tree `tree`, with its segment.
#[inline]
fn held(tree: u64) -> Option<(*const (), *const ())> {
    let (last, run, segment) = LAST.with(Cell::get);
    if last == tree {
        return Some((run, segment));
    }
    let found = HOLDS
        .try_with(|h| {
            let holds = h.0.borrow();
            holds
                .iter()
                .find(|h| h.tree == tree)
                .map(|h| (h.run, h.segment))
        })
        .ok()
        .flatten()?;
    LAST.with(|l| l.set((tree, found.0, found.1)));
    Some(found)
}

/// Forgets this thread's run in tree `tree` (returning its segment, which the caller lets
/// go of).
fn forget(tree: u64) -> Option<*const ()> {
    let _ = LAST.try_with(|l| {
        if l.get().0 == tree {
            l.set((0, std::ptr::null(), std::ptr::null()));
        }
    });
    HOLDS
        .try_with(|h| {
            let mut holds = h.0.borrow_mut();
            let at = holds.iter().position(|h| h.tree == tree)?;
            Some(holds.swap_remove(at).segment)
        })
        .ok()
        .flatten()
}

/// How an insert into a run went.
pub enum Inserted {
    /// Done: the present tid (unique: replaced; non-unique: the pair was there) or `None`.
    Done(Option<u64>),
    /// The run (its append part or its late part) is full: seal the segment.
    Full,
    /// The segment was sealed without the entry: insert it anew.
    Dropped,
    /// A late insert found its position live in the owner's append run, where the routed
    /// path replaces it (the late run is unchanged).
    Present,
}

/// Entries ahead of the last key to which a run raises its ceiling: a peer whose key is
/// above the ceiling needs no look at the run, and the ceiling moves (a store peers see
/// as a cache miss) once per this many appends.
const CEILING_AHEAD: u64 = 64;

impl<K: SbKey> SbTree<K> {
    /// The shortcut: appends `(key, tid)` to this thread's run if it has one in the
    /// frontier, the position is above the run's last (and the segment's lower bound) and
    /// the run's current block has room; `None` when the insert must take the slow path.
    /// Its tests read only the owner's state ([`Owner`]): one comparison of positions, one
    /// of counts.
    #[inline(always)]
    pub fn append_fast(&self, key: K, tid: u64) -> Option<Option<u64>> {
        let (run, segment) = held(self.id)?;
        // SAFETY: a held run and segment stay allocated until this thread lets go of them
        // (module docs); the types are this tree's.
        let (run, segment) = unsafe { (&*run.cast::<Run<K>>(), &*segment.cast::<Segment<K>>()) };
        // SAFETY: this thread owns the run.
        let owner = unsafe { run.owner() };
        let pos = Pos::of(key, tid, self.geo.pairs);
        // `floor` is the last append's position, above the segment's lower bound, or before
        // the first append the lower bound itself: one test for both.
        if pos <= owner.floor || owner.count >= owner.limit {
            return None;
        }
        match self.append(segment, run, owner, key, tid) {
            Inserted::Done(result) => Some(result),
            Inserted::Full | Inserted::Dropped | Inserted::Present => None,
        }
    }

    /// The late shortcut: inserts `(key, tid)` into this thread's late run if its position
    /// is in the segment of the run this thread holds but not above the run's last append,
    /// and the run's own append part does not hold it live; `None` when the insert must
    /// take the routed path (the position is elsewhere or in the append part, or the late
    /// run is full or captured).
    ///
    /// Like the append shortcut it needs no epoch pin (the held run and its segment stay
    /// allocated until this thread lets go of them), no routing and no look at the peers'
    /// published counts: the peers' runs are checked after the insert, as for an append
    /// ([`SbTree::check_peers`]), and a live copy found there is deleted and its tid
    /// returned, as the routed path's in-place replacement would return it.
    #[inline]
    pub fn late_fast(&self, key: K, tid: u64) -> Option<Option<u64>> {
        let (run, segment) = held(self.id)?;
        // SAFETY: as in `append_fast`.
        let (run, segment) = unsafe { (&*run.cast::<Run<K>>(), &*segment.cast::<Segment<K>>()) };
        // SAFETY: this thread owns the run.
        let owner = unsafe { run.owner() };
        let pairs = self.geo.pairs;
        let pos = Pos::of(key, tid, pairs);
        if owner.count == 0 || pos > owner.floor || !segment.holds(pos) {
            return None;
        }
        match self.insert_late(segment, run, owner, key, tid) {
            Inserted::Done(result) => Some(result),
            Inserted::Full | Inserted::Dropped | Inserted::Present => None,
        }
    }

    /// The slot of this thread's run in `segment`, if it holds one there (claims none).
    pub fn held_slot(&self, segment: &Segment<K>) -> Option<usize> {
        let (run, held_segment) = held(self.id)?;
        // SAFETY: as in `append_fast`: a held run stays allocated while it is held.
        std::ptr::eq(held_segment.cast(), segment).then(|| unsafe { &*run.cast::<Run<K>>() }.slot)
    }

    /// This thread's run in `segment` (the frontier), claiming one if it holds none there;
    /// `None` when the segment has no room for another run or is closed.
    pub fn run_in<'g>(&self, segment: &'g Segment<K>) -> Option<&'g Run<K>> {
        if let Some((run, held_segment)) = held(self.id) {
            if std::ptr::eq(held_segment.cast(), segment) {
                // SAFETY: as in `append_fast`.
                return Some(unsafe { &*run.cast::<Run<K>>() });
            }
            // The held run is in a sealed segment: let go of it.
            self.let_go();
        }
        let run = segment.claim()?;
        let hold = Hold {
            tree: self.id,
            run: (run as *const Run<K>).cast(),
            segment: (segment as *const Segment<K>).cast(),
            release: release::<K>,
        };
        let held = HOLDS.try_with(|h| h.0.borrow_mut().push(hold)).is_ok();
        if !held {
            // The thread is exiting: nothing can hold the run; give it back.
            segment.release();
            return None;
        }
        Some(run)
    }

    /// Lets go of this thread's run in this tree, if it holds one.
    pub fn let_go(&self) {
        if let Some(segment) = forget(self.id) {
            // SAFETY: this thread held the segment until now, so it is alive.
            unsafe { &*segment.cast::<Segment<K>>() }.release();
        }
    }

    /// Appends `(key, tid)`, whose position is above the run's last one, to the owner's
    /// run: the protocol of `protocol.rs`, then the peers' check. The run has room and the
    /// block for its next entry (`count < limit`, `next` its slot: [`Run::make_room`]).
    #[inline(always)]
    pub fn append(
        &self,
        segment: &Segment<K>,
        run: &Run<K>,
        owner: &mut Owner<K>,
        key: K,
        tid: u64,
    ) -> Inserted {
        let c = owner.count;
        let pos = Pos::of(key, tid, self.geo.pairs);
        run.head.begin();
        // SAFETY: `count < limit`, so `next` is entry `c`'s slot in a block of the run.
        unsafe { run.write_at(owner.next, key, tid) };
        let words = key.to_words();
        if c == 0 || int(words) > owner.ceiling {
            self.widen(run, owner, key);
        }
        run.head.publish(c + 1);
        if run.head.settle(&segment.head, c) == Settled::Dropped {
            // The segment is sealed: no append follows in it.
            owner.limit = c;
            run.head.end();
            return Inserted::Dropped;
        }
        owner.count = c + 1;
        owner.floor = pos;
        // Within the block (`c + 1 < limit`) or one past its end, which the shortcut does
        // not use (`count == limit`): the slow path sets it again with the next block.
        owner.next = owner.next.wrapping_add(entry_words::<K>());
        let result = self.check_peers(
            segment,
            run,
            owner,
            Place::Append {
                slot: run.slot,
                i: c as usize,
            },
            pos,
        );
        run.head.end();
        Inserted::Done(result)
    }

    /// Widens the run's key range to cover `key`, the run's first append or one above its
    /// ceiling (before the publication: see `protocol.rs`), and updates the owner's copy of
    /// the ceiling.
    #[cold]
    #[inline(never)]
    fn widen(&self, run: &Run<K>, owner: &mut Owner<K>, key: K) {
        let c = owner.count;
        if c == 0 {
            owner.first = key;
        }
        let (first, n) = (owner.first, c + 1);
        let ahead = || K::project(first, key, n, CEILING_AHEAD).to_words();
        if c == 0 {
            run.head.widen(key.to_words(), ahead);
        } else {
            // Appends ascend: past the first, only the ceiling can move.
            run.head.widen_up(key.to_words(), ahead);
        }
        owner.ceiling = run.head.ceiling_int();
    }

    /// Inserts `(key, tid)`, whose position is in the segment but not above the run's last
    /// one, into the owner's late run.
    pub fn insert_late(
        &self,
        segment: &Segment<K>,
        run: &Run<K>,
        owner: &mut Owner<K>,
        key: K,
        tid: u64,
    ) -> Inserted {
        let pos = Pos::of(key, tid, self.geo.pairs);
        run.head.begin();
        // `Ok(Some(present))`: a live late entry had the position (its tid replaced).
        let inserted = {
            let _lock = run.lock();
            if run.late().is_closed() {
                // Captured by a sealer: its entries are (being) converted as they are, and a
                // tid changed here now would be lost.
                return self.not_inserted(segment, run);
            }
            match run.late_locate(pos, self.geo.pairs) {
                // The slow path does not look in the thread's own late run: a dead entry here
                // is revived, a live one gets the new tid (a unique index's insert replaces).
                Ok(j) => {
                    let was_live = !run.late_is_dead(j);
                    let old = run.late_set_tid(j, tid);
                    run.late_revive(j);
                    Ok(was_live.then_some(if self.geo.pairs { tid } else { old }))
                }
                // Live in the owner's append run: replaced there (by the routed path).
                Err((_, Ok(i))) if !run.is_dead(i) => {
                    run.head.end();
                    return Inserted::Present;
                }
                Err((j, _)) => {
                    let key_words = key.to_words();
                    run.late_head.widen(key_words, || key_words);
                    if run.late_insert(j, (key, tid), self.geo.pairs, &self.res) {
                        Ok(None)
                    } else {
                        Err(())
                    }
                }
            }
        };
        let Ok(replaced) = inserted else {
            return self.not_inserted(segment, run);
        };
        self.counters.late.add(1);
        if let Some(present) = replaced {
            run.head.end();
            return Inserted::Done(Some(present));
        }
        // The late run is captured under its lock, so the entry is in the segment; the peers'
        // check fences (if there are peers) to order its publication before their entries.
        // Our publication precedes the load of the run count (the light side of a joiner's
        // barrier: see `protocol.rs`).
        crate::sync::asymmetric::light();
        let result = self.check_peers(segment, run, owner, Place::Late { slot: run.slot }, pos);
        run.head.end();
        Inserted::Done(result)
    }

    /// A late insert that found the late run full where the entry goes, or closed by a
    /// sealer (which captured it under the lock): ends the insert's mark and says which.
    #[cold]
    #[inline(never)]
    fn not_inserted(&self, segment: &Segment<K>, run: &Run<K>) -> Inserted {
        run.head.end();
        if segment.head.is_closed() {
            Inserted::Dropped
        } else {
            Inserted::Full
        }
    }

    /// After publishing the entry at `mine` (position `pos`) and a light barrier (the
    /// settle's, for an append: it orders the publication before the load of the run
    /// count, the light side of a joiner's barrier, see `protocol.rs`): if the segment has
    /// other runs, fences and looks for the same position in them, and if one has it live,
    /// resolves the pair (see [`SbTree::resolve`]). Returns the insert's result.
    ///
    /// The usual case of a peer, one other run with the position in a gap cached for it (or
    /// outside its range) and no late entry near it, is decided here, inline: an out-of-line
    /// call with this many arguments cost more than the checks. Always inlined: a thread
    /// alone in its segment pays one load and one comparison here (not inlined, the call
    /// cost it 20 instructions per append).
    #[inline(always)]
    fn check_peers(
        &self,
        segment: &Segment<K>,
        run: &Run<K>,
        owner: &mut Owner<K>,
        mine: Place,
        pos: Pos<K>,
    ) -> Option<u64> {
        let used = segment.used();
        if used < 2 {
            return None;
        }
        // Peers: a full fence after our publication (the store-buffering pattern with theirs).
        crate::sync::atomic::fence(crate::sync::atomic::Ordering::SeqCst);
        if used == 2 {
            // Our run is in slot 0 or 1; an unstored slot's owner fences after us and checks
            // our run.
            let slot = 1 - run.slot;
            let peer = segment.run(slot)?;
            let key = pos.key.to_words();
            let cached = owner.gaps[slot].is_some_and(|(lo, hi)| lo < pos && pos < hi);
            let append_clear = cached || !peer.head.covers(key);
            if append_clear && (peer.late_head.published() == 0 || !peer.late_head.covers(key)) {
                return None;
            }
        }
        self.check_peers_among(segment, run, owner, mine, pos, used)
    }

    /// [`SbTree::check_peers`] when the segment has `used` run slots, at least two, after
    /// its fence (out of line: a thread alone in its segment never comes here).
    #[inline(never)]
    fn check_peers_among(
        &self,
        segment: &Segment<K>,
        run: &Run<K>,
        owner: &mut Owner<K>,
        mine: Place,
        pos: Pos<K>,
        used: usize,
    ) -> Option<u64> {
        let pairs = self.geo.pairs;
        let key = pos.key.to_words();
        for slot in 0..used {
            if slot == run.slot {
                continue;
            }
            // An unstored slot's owner fences after us and checks our run.
            let Some(peer) = segment.run(slot) else {
                continue;
            };
            let cached = owner.gaps[slot].is_some_and(|(lo, hi)| lo < pos && pos < hi);
            if !cached && peer.head.covers(key) {
                let n = peer.head.published() as usize;
                match peer.find_from_top(pos, n, pairs) {
                    Ok(i) if !peer.is_dead(i) => {
                        return self.resolve(
                            segment,
                            run,
                            mine,
                            slot,
                            Place::Append { slot, i },
                            pos,
                        );
                    }
                    Ok(_) => {}
                    Err(i) if i > 0 && i < n => {
                        let (a, b) = (peer.entry(i - 1), peer.entry(i));
                        owner.gaps[slot] =
                            Some((Pos::of(a.0, a.1, pairs), Pos::of(b.0, b.1, pairs)));
                    }
                    Err(_) => {}
                }
            }
            if peer.late_head.published() > 0 && peer.late_head.covers(key) {
                let live = peer
                    .read_late(|p| matches!(p.late_find(pos, pairs), Ok(j) if !p.late_is_dead(j)));
                if live {
                    return self.resolve(segment, run, mine, slot, Place::Late { slot }, pos);
                }
            }
        }
        None
    }

    /// Two runs hold the live position `pos`: ours (at `mine`) and the peer's in `slot`.
    /// Under both runs' locks (in slot order): if ours is dead, another resolver took ours
    /// for the earlier insert, so ours was first (`None`); else the peer's, if still live and
    /// in the segment for good, was first: it is deleted and its tid returned.
    fn resolve(
        &self,
        segment: &Segment<K>,
        run: &Run<K>,
        mine: Place,
        slot: usize,
        theirs: Place,
        pos: Pos<K>,
    ) -> Option<u64> {
        self.counters.met.add(1);
        let pairs = self.geo.pairs;
        let peer = segment.run(slot).expect("a stored run");
        let (_first, _second) = if run.slot < slot {
            (run.lock(), peer.lock())
        } else {
            (peer.lock(), run.lock())
        };
        let mine_live = match mine {
            Place::Append { i, .. } => !run.is_dead(i),
            Place::Late { .. } => {
                matches!(run.late_find(pos, pairs), Ok(j) if !run.late_is_dead(j))
            }
        };
        if !mine_live {
            return None;
        }
        match theirs {
            Place::Append { i, .. } => {
                if peer.is_dead(i) || peer.head.committed(&segment.head, i as u64 + 1) <= i as u64 {
                    return None;
                }
                peer.kill(i);
                Some(peer.entry(i).1)
            }
            Place::Late { .. } => {
                let j = peer.late_find(pos, pairs).ok()?;
                if peer.late_is_dead(j) {
                    return None;
                }
                peer.late_kill(j);
                Some(peer.late_entry(j).1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sbtree::{Geometry, SbTreeOptions};

    fn tree(pairs: bool) -> SbTree<u64> {
        SbTree::new(Geometry::new::<u64>(
            &SbTreeOptions::default(),
            pairs,
            None,
            None,
        ))
    }

    /// A late insert of a position another thread's run holds live (the late shortcut
    /// reads no peer before it inserts) deletes the peer's entry after it and returns its
    /// tid, as the routed path's in-place replacement would: unique, the new tid stays;
    /// non-unique, the pair is there once.
    #[test]
    fn a_late_insert_of_a_key_a_peer_holds_replaces_it() {
        for pairs in [false, true] {
            let tree = tree(pairs);
            std::thread::scope(|s| {
                s.spawn(|| {
                    for k in 10..20 {
                        assert_eq!(tree.insert(k, k), None);
                    }
                });
            });
            let late_before = tree.counters.late.get();
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert_eq!(tree.insert(100, 100), None);
                    let tid = if pairs { 15 } else { 1015 };
                    assert_eq!(tree.insert(15, tid), Some(15), "pairs: {pairs}");
                    assert_eq!(tree.get(Pos::of(15, tid, pairs)), Some(tid));
                });
            });
            assert_eq!(
                tree.counters.late.get(),
                late_before + 1,
                "the late shortcut"
            );
            assert_eq!(tree.counters.met.get(), 1, "the peer's entry was met");
            assert_eq!(tree.len(), 11, "pairs: {pairs}");
            tree.flush();
            assert_eq!(tree.len(), 11, "pairs: {pairs}");
            let expect = if pairs { 15 } else { 1015 };
            assert_eq!(tree.get(Pos::of(15, expect, pairs)), Some(expect));
        }
    }

    /// Once the thread's segment is sealed, a late insert of a position its captured late
    /// run holds leaves that run alone (its entries are converted as captured) and replaces
    /// the tid where the entry went.
    #[test]
    fn a_late_insert_after_the_seal_replaces_in_the_data_layer() {
        let tree = tree(false);
        for k in [10, 20, 30] {
            assert_eq!(tree.insert(k, k), None);
        }
        assert_eq!(tree.insert(15, 1), None, "late");
        assert_eq!(tree.counters.late.get(), 1);
        tree.flush();
        assert_eq!(tree.insert(15, 2), Some(1));
        assert_eq!(tree.get(Pos::of(15, 0, false)), Some(2));
        assert_eq!(tree.len(), 4);
    }
}
