//! Segments: the paper's segmented block. The newest segment (the *frontier*) takes every
//! entry above its lower bound, each thread appending to its own run; when a run fills, the
//! segment is sealed, a new segment whose lower bound is the sealed one's largest position
//! takes over, and the sealed segment's runs (each a sorted append part and a sorted late
//! part) are merged and cut into data blocks appended to the data layer.
//!
//! # The chain
//!
//! The frontier links to the older segments that are sealed but not yet converted (`prev`),
//! newest first, each with a lower bound below the one before: a position belongs to the
//! newest segment whose lower bound is below it, or to the data layer if there is none.
//! Conversions append to the data layer in the order the segments were sealed (a ticket:
//! the tree's count of converted segments); a converted segment is unlinked from the one
//! that followed it.
//!
//! # The spill
//!
//! A sealed segment's runs no longer change, but its conversion takes a while (a
//! millisecond or so for a full segment), and delayed keys keep arriving for its range: a
//! key delayed by a few thousand others lands there right after the seal. Rather than wait
//! for the conversion (on one core's worth of inserts, that wait was a quarter of their
//! time at 20% delayed keys), an insert of a new position goes into the segment's **spill**,
//! a late run of the segment's own under its own lock ([`Segment::spill_insert`]). Readers
//! search it beside the runs; the conversion, once it has appended the runs' entries to the
//! data layer, closes the spill and writes its entries there before it marks the segment
//! converted ([`Segment::close_spill`]). Inserts that would replace a tid of the runs', and
//! every delete or update, still wait for the conversion and change the data layer.
//!
//! # Lifetime
//!
//! A segment is freed (through the epoch collector, by the maintenance pass) once it is
//! converted and every thread that had a run in it has let go of the run: the thread's next
//! insert after the seal, or its exit ([`Segment::release`] counts them down); the tree's
//! drop frees the rest.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

use super::key::{partition_point, Pos, SbKey};
use super::late::{Frozen, LatePlace, LateRun};
use super::protocol::SegmentHead;
use super::run::{late_blocks, Run};
use super::{Geometry, Resources};
use crate::sync::atomic::SpinWait;
use crate::sync::{VersionLock, WriterGate};

/// The most runs (threads) one segment takes; a thread that finds every slot taken seals
/// the segment, so the next one has room. Each run costs its peers one range check per
/// append, so the bound also bounds the work of an append.
pub const MAX_RUNS: usize = 64;

/// `(slot, length)` of each stored run's committed append entries
/// ([`Segment::committed_lengths`]): inline for the usual few runs, no allocation per
/// operation.
pub type Lengths = smallvec::SmallVec<[(usize, usize); 4]>;

/// A live entry found in a segment.
#[derive(Debug, Clone, Copy)]
pub enum Place {
    /// Append entry `i` of the run in slot `slot`.
    Append {
        /// The run's slot.
        slot: usize,
        /// The entry.
        i: usize,
    },
    /// An entry of the late run of the run in slot `slot` (entries move: found again by
    /// position under the run's lock).
    Late {
        /// The run's slot.
        slot: usize,
    },
}

/// See the module docs.
pub struct Segment<K: SbKey> {
    /// The protocol words.
    pub head: SegmentHead,
    /// The segment's number: 1 for the first, one more for each next.
    pub seq: u64,
    /// Positions above this belong here (`None`: every position).
    pub lower: Option<Pos<K>>,
    sealing: AtomicBool,
    /// Writers that change entries already in the segment (updates, deletes) enter here; the
    /// sealer seals it before closing the segment.
    pub gate: WriterGate,
    slots: Box<[AtomicPtr<Run<K>>]>,
    /// The next older segment not yet converted (null when none).
    pub prev: AtomicPtr<Segment<K>>,
    /// Set once the segment's entries are in the data layer.
    pub converted: AtomicBool,
    /// Runs not let go of, plus one until the segment is converted.
    outstanding: AtomicUsize,
    /// Inserts of new positions after the seal, until the conversion closes it.
    spill: LateRun<K>,
    /// Guards the spill; its version validates reads of it.
    spill_lock: VersionLock,
    /// Entries in the spill (dead ones included).
    spill_len: AtomicUsize,
    res: Arc<Resources>,
    run_blocks: usize,
    per_block: usize,
}

// SAFETY: shared state is atomics under the protocol of `protocol.rs`; runs are freed only
// when the segment is (see the module docs).
unsafe impl<K: SbKey> Send for Segment<K> {}
// SAFETY: as above.
unsafe impl<K: SbKey> Sync for Segment<K> {}

impl<K: SbKey> Segment<K> {
    /// A new open segment for positions above `lower`, counted in `res`.
    pub fn new(seq: u64, lower: Option<Pos<K>>, geo: &Geometry, res: &Arc<Resources>) -> Box<Self> {
        res.aux.add(Self::bytes(geo.run_blocks, geo.run_entries));
        Box::new(Self {
            head: SegmentHead::new(),
            seq,
            lower,
            sealing: AtomicBool::new(false),
            gate: WriterGate::new(),
            slots: (0..MAX_RUNS)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            prev: AtomicPtr::new(std::ptr::null_mut()),
            converted: AtomicBool::new(false),
            outstanding: AtomicUsize::new(1),
            spill: LateRun::new(late_blocks(geo.run_blocks), geo.run_entries),
            spill_lock: VersionLock::new(),
            spill_len: AtomicUsize::new(0),
            res: Arc::clone(res),
            run_blocks: geo.run_blocks,
            per_block: geo.run_entries,
        })
    }

    /// Bytes of a segment besides its runs and its spill's blocks.
    fn bytes(run_blocks: usize, per_block: usize) -> usize {
        std::mem::size_of::<Self>()
            + MAX_RUNS * 8
            + LateRun::<K>::bytes(late_blocks(run_blocks), per_block)
    }

    /// Whether `pos` is above the lower bound.
    #[inline]
    pub fn holds(&self, pos: Pos<K>) -> bool {
        self.lower.is_none_or(|lower| pos > lower)
    }

    /// The run in `slot`, if stored (a claimed slot is stored right after its claim).
    #[inline]
    pub fn run(&self, slot: usize) -> Option<&Run<K>> {
        let run = self.slots[slot].load(Ordering::Acquire);
        // SAFETY: a stored run lives as long as its segment (see the module docs), and the
        // caller holds the segment.
        (!run.is_null()).then(|| unsafe { &*run })
    }

    /// Slots that may hold runs (claimed so far, at most [`MAX_RUNS`]).
    #[inline]
    pub fn used(&self) -> usize {
        self.head.used().min(MAX_RUNS)
    }

    /// Claims a run for the calling thread: `None` when every slot is taken or the segment
    /// is closed (the caller seals it or moves to the next one). A claimed run is the
    /// caller's until it lets go of it with [`Segment::release`].
    pub fn claim(&self) -> Option<&Run<K>> {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        let slot = self.head.claim();
        if slot >= MAX_RUNS {
            self.release();
            return None;
        }
        self.res
            .aux
            .add(Run::<K>::bytes(self.run_blocks, self.per_block, MAX_RUNS));
        let run = Box::into_raw(Box::new(Run::new(
            slot,
            self.lower,
            self.run_blocks,
            self.per_block,
            MAX_RUNS,
        )));
        self.slots[slot].store(run, Ordering::Release);
        // SAFETY: just stored; lives with the segment.
        let run = unsafe { &*run };
        if !self.head.join() {
            // Never published into: let it go at once; the sealer skips it or captured
            // nothing of it.
            run.head.set_captured(0);
            run.late_head.set_captured(0);
            self.release();
            return None;
        }
        Some(run)
    }

    /// Whether this thread won the right to seal the segment.
    pub fn try_start_seal(&self) -> bool {
        !self.sealing.swap(true, Ordering::AcqRel)
    }

    /// The sealer's work before the new frontier is installed: shuts the gate, closes the
    /// segment, captures every run and waits for the inserts in flight. Returns the largest
    /// captured position.
    pub fn seal(&self, pairs: bool) -> Option<Pos<K>> {
        self.gate.seal();
        self.head.close();
        let used = self.used();
        let wait = SpinWait::new();
        let mut runs = Vec::with_capacity(used);
        for slot in 0..used {
            // A claimed slot is stored right after the claim.
            loop {
                if let Some(run) = self.run(slot) {
                    runs.push(run);
                    break;
                }
                wait.wait();
            }
        }
        // Every append run first, without locks: an owner resolving a meeting holds run
        // locks while it waits for a peer's append run to be captured
        // ([`super::protocol::RunHead::committed`]), and the late runs are captured under
        // their locks.
        for run in &runs {
            run.head.capture();
        }
        for run in &runs {
            run.capture_late();
        }
        for run in &runs {
            run.head.drain();
        }
        runs.iter().filter_map(|run| run.captured_max(pairs)).max()
    }

    /// The captured entries in position order, for the conversion to read in chunks
    /// (after [`Segment::seal`]): every sorted part of every run (its append run and its
    /// late run) read in place and merged as they are handed out, never copied whole.
    pub fn captured(&self, pairs: bool) -> Captured<'_, K> {
        Captured::of_runs((0..self.used()).filter_map(|slot| self.run(slot)), pairs)
    }

    /// The published lengths of the runs' append parts, clamped to what is in the segment
    /// for good (one fence for all: see [`super::protocol::RunHead::committed`]).
    pub fn committed_lengths(&self) -> Lengths {
        let mut lengths = Lengths::new();
        for slot in 0..self.used() {
            if let Some(run) = self.run(slot) {
                lengths.push((slot, run.head.published() as usize));
            }
        }
        crate::sync::atomic::fence(crate::sync::atomic::Ordering::SeqCst);
        if self.head.is_closed() {
            for (slot, n) in lengths.iter_mut() {
                let run = self.run(*slot).expect("a stored run");
                *n = (*n).min(run.head.wait_captured() as usize);
            }
        }
        lengths
    }

    /// The live entry at `pos` among the committed entries (`lengths` from
    /// [`Segment::committed_lengths`]), with its tid, not looking in the late run of the run
    /// in slot `skip_late` (an inserting owner's, which its insert searches under the lock).
    /// A late place is valid only while the run's version is unchanged; modifiers re-find it
    /// under the run's lock.
    pub fn find(
        &self,
        pos: Pos<K>,
        lengths: &[(usize, usize)],
        pairs: bool,
        skip_late: Option<usize>,
    ) -> Option<(Place, u64)> {
        let key = pos.key.to_words();
        for &(slot, n) in lengths {
            let run = self.run(slot).expect("a stored run");
            if run.head.covers(key) {
                if let Ok(i) = run.find(pos, n, pairs) {
                    if !run.is_dead(i) {
                        return Some((Place::Append { slot, i }, run.entry(i).1));
                    }
                }
            }
            // The acquire load of the late count makes the range widened before it visible.
            if skip_late == Some(slot)
                || run.late_head.published() == 0
                || !run.late_head.covers(key)
            {
                continue;
            }
            let late = run.read_late(|run| match run.late_find(pos, pairs) {
                Ok(j) if !run.late_is_dead(j) => Some(run.late_entry(j).1),
                _ => None,
            });
            if let Some(tid) = late {
                return Some((Place::Late { slot }, tid));
            }
        }
        None
    }

    /// The live tid at `pos` in the spill (empty but in a sealed segment).
    pub fn spill_find(&self, pos: Pos<K>, pairs: bool) -> Option<u64> {
        if self.spill_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.read_spill(|spill| match spill.find(pos, pairs) {
            Ok(at) if !spill.is_dead(at) => Some(spill.entry(at).1),
            _ => None,
        })
    }

    /// Reads the spill with `read` under an optimistic version of its lock, retrying until
    /// the read validates.
    pub fn read_spill<R>(&self, mut read: impl FnMut(&LateRun<K>) -> R) -> R {
        self.spill_lock.read_validated(|| read(&self.spill))
    }

    /// Whether the spill holds anything (dead entries included).
    pub fn has_spill(&self) -> bool {
        self.spill_len.load(Ordering::Acquire) > 0
    }

    /// Inserts `(key, tid)` at `pos` into the sealed segment's spill (see the module
    /// docs): `Some(result)` as [`super::tree::SbTree::insert`] returns it, or `None` if the
    /// insert must wait for the conversion instead (the spill is closed or full there, or a
    /// unique index's runs hold the key: its tid changes in the data layer).
    pub fn spill_insert(&self, pos: Pos<K>, key: K, tid: u64, pairs: bool) -> Option<Option<u64>> {
        let _lock = self.spill_lock.lock_live();
        if self.spill.is_closed() {
            // Its entries are (being) written to the data layer: so is this one, after them.
            return None;
        }
        match self.spill.find(pos, pairs) {
            Ok(at) => {
                if self.spill.is_dead(at) {
                    self.spill.set_tid(at, tid);
                    self.spill.set_dead(at, false);
                    return Some(None);
                }
                let old = self.spill.set_tid(at, tid);
                Some(Some(if pairs { tid } else { old }))
            }
            Err(at) => {
                // The runs are captured and sealed: nothing changes them any more.
                let lengths = self.committed_lengths();
                if let Some((_, present)) = self.find(pos, &lengths, pairs, None) {
                    return pairs.then_some(Some(present));
                }
                // A spill has no append run: its ranks are all 0.
                if !self.spill.insert(at, key, tid, &self.res, |_, _| 0) {
                    return None;
                }
                self.spill_len.fetch_add(1, Ordering::Release);
                Some(None)
            }
        }
    }

    /// The conversion, after appending the runs' entries: closes the spill and returns its
    /// live entries, in position order.
    pub fn close_spill(&self) -> Vec<(K, u64)> {
        let _lock = self.spill_lock.lock_live();
        self.spill.close();
        let mut live = Vec::new();
        self.spill.live_entries(&mut live);
        live
    }

    /// Under the run's lock: if the entry at `pos` found at `place` is still live (with tid
    /// `expect`, when given), applies `change` to it (`Some(new tid)`: set the tid; `None`:
    /// delete it) and returns its old tid.
    pub fn modify(
        &self,
        place: Place,
        pos: Pos<K>,
        pairs: bool,
        expect: Option<u64>,
        change: Option<u64>,
    ) -> Option<u64> {
        let matches = |t: u64| expect.is_none_or(|e| e == t);
        let (slot, at) = match place {
            Place::Append { slot, i } => (slot, Some(i)),
            Place::Late { slot } => (slot, None),
        };
        let run = self.run(slot)?;
        let _lock = run.lock();
        match at {
            Some(i) => {
                if run.is_dead(i) || !matches(run.entry(i).1) {
                    return None;
                }
                Some(match change {
                    Some(tid) => run.set_tid(i, tid),
                    None => {
                        run.kill(i);
                        run.entry(i).1
                    }
                })
            }
            None => {
                let j = run.late_find(pos, pairs).ok()?;
                if run.late_is_dead(j) || !matches(run.late_entry(j).1) {
                    return None;
                }
                Some(match change {
                    Some(tid) => run.late_set_tid(j, tid),
                    None => {
                        run.late_kill(j);
                        run.late_entry(j).1
                    }
                })
            }
        }
    }

    /// Lets go of one reference (a run's owner, or the tree's until the conversion). The tree
    /// frees a converted segment once none is left ([`Segment::unreferenced`]).
    pub fn release(&self) {
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether every reference is let go of.
    pub fn unreferenced(&self) -> bool {
        self.outstanding.load(Ordering::Acquire) == 0
    }

    /// Live entries in the committed parts of the runs (for `len`; exact when no writer runs).
    pub fn live(&self) -> usize {
        let mut live = 0;
        for (slot, n) in self.committed_lengths() {
            let run = self.run(slot).expect("a stored run");
            live += (0..n).filter(|&i| !run.is_dead(i)).count();
            live += run.read_late(|run| run.late().live());
        }
        live + self.read_spill(LateRun::live)
    }
}

/// One sorted part of a sealed segment: the captured append run or late run of one run,
/// entries `next..end` still to hand out (dead ones included: they are skipped as copied).
pub struct Part<'s, K: SbKey> {
    run: &'s Run<K>,
    /// The captured late run, by rank, if this part is one.
    late: Option<Frozen<'s, K>>,
    /// For a late part, the place of entry `next` (while `next < end`).
    late_at: LatePlace,
    next: usize,
    end: usize,
    /// Entry `next`, its position and whether it is dead, while `next < end` (read once
    /// per entry or stretch taken, not once per part and stretch).
    head: ((K, u64), Pos<K>, bool),
}

impl<K: SbKey> Part<'_, K> {
    /// The part's entry `i` (dead or not).
    #[inline]
    fn entry(&self, i: usize) -> (K, u64) {
        match &self.late {
            Some(late) => late.entry(i),
            None => self.run.entry(i),
        }
    }

    /// The position of the part's entry `i` (dead or not).
    #[inline]
    fn pos(&self, i: usize, pairs: bool) -> Pos<K> {
        let (key, tid) = self.entry(i);
        Pos::of(key, tid, pairs)
    }

    /// Reads entry `next` into the head, if there is one; a late part finds its place by
    /// rank first.
    #[inline]
    fn read_head(&mut self, pairs: bool) {
        if let Some(late) = &self.late {
            if self.next < self.end {
                self.late_at = late.place(self.next);
            }
        }
        self.read_head_at(pairs);
    }

    /// [`Part::read_head`] where a late part's `late_at` is already entry `next`'s place.
    #[inline]
    fn read_head_at(&mut self, pairs: bool) {
        if self.next < self.end {
            let ((key, tid), dead) = match &self.late {
                Some(late) => late.marked_at(self.late_at),
                None => (self.run.entry(self.next), self.run.is_dead(self.next)),
            };
            self.head = ((key, tid), Pos::of(key, tid, pairs), dead);
        }
    }

    /// Appends entry `next` to `out` if it is live, moves past it and reads the next head
    /// (a late part steps to its place instead of halving the directory for it: the merge
    /// of a thread's two parts takes a late entry this way once for every late key).
    #[inline]
    fn take_one(&mut self, out: &mut Vec<(K, u64)>, pairs: bool) {
        if !self.head.2 {
            out.push(self.head.0);
        }
        self.next += 1;
        if let Some(late) = &self.late {
            self.late_at = late.step(self.late_at);
        }
        self.read_head_at(pairs);
    }

    /// Appends the live entries among `next..to` to `out`, moves past them and reads the
    /// next head.
    fn take(&mut self, to: usize, out: &mut Vec<(K, u64)>, pairs: bool) {
        match &self.late {
            Some(late) => late.copy(self.next, to, out),
            None => self.run.copy_append(self.next, to, out),
        }
        self.next = to;
        self.read_head(pairs);
    }
}

/// A sealed segment's captured entries in position order, handed out in chunks
/// ([`Captured::fill`]) so that the conversion builds bodies from a small buffer instead of
/// a copy of the whole segment. The sorted parts of the runs are read in place and merged
/// as they are handed out: a stretch of one part at a time, up to the next position of
/// the others (found by galloping: threads' runs interleave in long stretches).
pub struct Captured<'s, K: SbKey> {
    parts: smallvec::SmallVec<[Part<'s, K>; 4]>,
    pairs: bool,
}

impl<'s, K: SbKey> Captured<'s, K> {
    /// The captured entries of `runs`: each run's append part and late part, the empty
    /// ones left out.
    fn of_runs(runs: impl Iterator<Item = &'s Run<K>>, pairs: bool) -> Self {
        let parts = runs
            .flat_map(|run| {
                let append = run.head.captured().unwrap_or(0) as usize;
                let late = run.late_head.captured().unwrap_or(0) as usize;
                [(run, false, append), (run, true, late)]
            })
            .filter(|&(_, _, len)| len > 0)
            .map(|(run, late, end)| {
                let mut part = Part {
                    run,
                    late: late.then(|| run.captured_late()),
                    late_at: LatePlace::default(),
                    next: 0,
                    end,
                    head: ((K::MIN, 0), Pos::MIN, false),
                };
                part.read_head(pairs);
                part
            })
            .collect();
        Captured { parts, pairs }
    }

    /// Entries left to hand out (dead ones included).
    pub fn remaining(&self) -> usize {
        self.parts.iter().map(|p| p.end - p.next).sum()
    }

    /// Appends the next live entries, from at most `want` captured ones, to `out`.
    pub fn fill(&mut self, out: &mut Vec<(K, u64)>, want: usize) {
        let pairs = self.pairs;
        let mut left = want;
        out.reserve(want);
        while left > 0 {
            if let [a, b] = &mut self.parts[..] {
                // Two parts, an append run and a late run (one thread's): an entry at a
                // time. Their stretches are short when keys arrive late, and a comparison
                // of the heads costs less than finding a stretch's end and copying it. (Two
                // threads' append runs interleave in long stretches: copied below.)
                if a.late.is_some() != b.late.is_some() {
                    while left > 0 && a.next < a.end && b.next < b.end {
                        if a.head.1 <= b.head.1 {
                            a.take_one(out, pairs);
                        } else {
                            b.take_one(out, pairs);
                        }
                        left -= 1;
                    }
                    if left == 0 {
                        return;
                    }
                    // One of them is done: the other is copied in stretches below.
                    self.parts.retain(|p| p.next < p.end);
                    continue;
                }
            }
            // The part with the lowest head, and the lowest of the others' heads.
            let mut first: Option<(usize, Pos<K>)> = None;
            let mut bound: Option<Pos<K>> = None;
            for (p, part) in self.parts.iter().enumerate() {
                if part.next == part.end {
                    continue;
                }
                let pos = part.head.1;
                match first {
                    Some((_, low)) if pos >= low => {
                        bound = Some(bound.map_or(pos, |b| b.min(pos)));
                    }
                    _ => {
                        if let Some((_, low)) = first {
                            bound = Some(low);
                        }
                        first = Some((p, pos));
                    }
                }
            }
            let Some((p, _)) = first else {
                return;
            };
            let part = &mut self.parts[p];
            let limit = (part.next + left).min(part.end);
            // Its entries up to the others' lowest (a position in two runs is dead in one
            // of them: either order is right).
            let to = match bound {
                None => limit,
                Some(bound) => stretch(part.next, limit, |i| part.pos(i, pairs) <= bound),
            };
            left -= to - part.next;
            part.take(to, out, pairs);
            if part.next == part.end {
                // Done: two parts left go the two-part way.
                self.parts.remove(p);
            }
        }
    }
}

/// Probes of [`stretch`] one index at a time before it gallops: a late run's entries lie
/// among the append run's, so most stretches of a segment with delayed keys are this short.
const LINEAR_PROBES: usize = 4;

/// [`gallop`] after [`LINEAR_PROBES`] single steps: the end of a short prefix for a
/// comparison or two per entry, of a long one for its logarithm.
fn stretch(from: usize, end: usize, below: impl Fn(usize) -> bool) -> usize {
    let mut i = from + 1;
    let linear_end = (from + 1 + LINEAR_PROBES).min(end);
    while i < linear_end {
        if !below(i) {
            return i;
        }
        i += 1;
    }
    if i == end {
        return end;
    }
    gallop(i - 1, end, below)
}

/// The first index of `from..end` for which `below` is false (`end` if none), where
/// `below` is true on a prefix and on `from`: probes 1, 2, 4, ... indexes ahead, then
/// bisects the last step, so a short prefix costs a few probes and a long one its logarithm.
fn gallop(from: usize, end: usize, below: impl Fn(usize) -> bool) -> usize {
    let mut good = from;
    let mut step = 1;
    let mut hi = end;
    while good + step < end {
        if below(good + step) {
            good += step;
            step *= 2;
        } else {
            hi = good + step;
            break;
        }
    }
    partition_point(((good + 1).min(end), hi), below)
}

impl<K: SbKey> Drop for Segment<K> {
    fn drop(&mut self) {
        for slot in self.slots.iter_mut() {
            let run = std::mem::replace(slot.get_mut(), std::ptr::null_mut());
            if run.is_null() {
                continue;
            }
            // SAFETY: the segment is being dropped with exclusive access; its runs go with it.
            let run = unsafe { Box::from_raw(run) };
            run.free_blocks(&self.res);
            self.res
                .aux
                .sub(Run::<K>::bytes(self.run_blocks, self.per_block, MAX_RUNS));
        }
        self.spill.free_blocks(&self.res);
        self.res
            .aux
            .sub(Self::bytes(self.run_blocks, self.per_block));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed segment's parts (append runs interleaved in stretches, late runs, a
    /// position in two runs dead in one) come out in position order, live entries only,
    /// whatever the chunks asked for.
    #[test]
    fn captured_parts_merge_in_position_order() {
        for runs in [1, 2, 3] {
            merge_runs(runs);
        }
    }

    /// The case of [`captured_parts_merge_in_position_order`] with `n` runs (one run: its
    /// two parts take the two-part way from the start).
    fn merge_runs(n: usize) {
        let res = Resources::new(4096);
        // Blocks of 4 entries: the late runs (of up to 10 blocks) split as they fill.
        let runs: Vec<Run<u64>> = (0..n).map(|slot| Run::new(slot, None, 40, 4, 3)).collect();
        // The key in two runs: entry 3 of this run's append part, also late in the last run.
        let killed = if n == 3 { 1 } else { 0 };
        let met = 1000 + killed as u64 * 10 + 3;
        let mut expected = Vec::new();
        for (r, run) in runs.iter().enumerate() {
            // Stretches of 5 keys, the runs' stretches side by side: 1000 + 100 b + 10 r + i.
            let keys: Vec<u64> = (0..30)
                .flat_map(|b| (0..5).map(move |i| 1000 + b * 100 + r as u64 * 10 + i))
                .collect();
            for (c, &key) in keys.iter().enumerate() {
                assert!(run.make_room(c, &res));
                run.write_entry_for_test(c, key, key);
            }
            run.head.publish(keys.len() as u64);
            expected.extend(keys.iter().map(|&k| (k, k)));
            // Late entries below the stretches and between them, in position order.
            let mut late: Vec<u64> = (0..4).map(|j| r as u64 * 300 + j * 7 + 5).collect();
            late.extend((0..5).map(|b| 1000 + b * 100 + 90 + r as u64));
            if r == n - 1 {
                // Another run's key `met` too (with one run, its own): the pair met, and
                // the append run's copy was deleted (below).
                late.push(met);
            }
            // Inserted from the middle out, so that blocks split in half and at their end.
            late.sort_unstable();
            let middle = late.len() / 2;
            let order = late[middle..].iter().chain(late[..middle].iter().rev());
            for &key in order {
                let at = run.late_find(Pos::of(key, 0, false), false).unwrap_err();
                assert!(run.late_insert(at, (key, key), false, &res));
            }
            expected.extend(late.iter().map(|&k| (k, k)));
            run.head.capture();
            run.capture_late();
        }
        runs[killed].kill(3);
        let dead = expected
            .iter()
            .position(|&e| e == (met, met))
            .expect("the met key");
        expected.remove(dead);
        // A late entry deleted, too.
        let at = runs[0].late_find(Pos::of(12, 0, false), false).unwrap();
        runs[0].late_kill(at);
        let late_dead = expected
            .iter()
            .position(|&e| e == (12, 12))
            .expect("late key 12");
        expected.remove(late_dead);
        let mut fill_sizes = [1, 7, 64, 3, 200].into_iter().cycle();
        let mut captured = Captured::of_runs(runs.iter(), false);
        let mut out = Vec::new();
        while captured.remaining() > 0 {
            let before = captured.remaining();
            captured.fill(&mut out, fill_sizes.next().expect("cycled"));
            assert!(captured.remaining() < before, "every fill moves on");
        }
        expected.sort_unstable();
        assert_eq!(out, expected);
        for run in &runs {
            run.free_blocks(&res);
        }
    }

    /// `gallop` and `stretch` find the end of every prefix, from the first index to the
    /// whole range.
    #[test]
    fn gallop_finds_every_prefix_end() {
        for from in [0, 3] {
            for end in from + 1..from + 40 {
                for cut in from + 1..=end {
                    assert_eq!(gallop(from, end, |i| i < cut), cut, "{from} {end} {cut}");
                    assert_eq!(stretch(from, end, |i| i < cut), cut, "{from} {end} {cut}");
                }
            }
        }
    }

    /// A sealed segment's spill: new positions go in (in any order, across block splits),
    /// a second insert of one replaces its tid, a position the runs hold is left to the
    /// conversion (a unique index's) or reported (a pair); readers and `live` see the
    /// spill; closing it hands out every entry in order and refuses later inserts.
    #[test]
    fn a_sealed_segment_spills_new_positions_until_closed() {
        for pairs in [false, true] {
            let own = super::super::SbTreeOptions::default();
            let geo = Geometry::new::<u64>(&own, pairs, Some(8), Some(4));
            let res = Arc::new(Resources::new(geo.block_bytes));
            let segment = Segment::<u64>::new(1, None, &geo, &res);
            let run = segment.claim().expect("a run");
            assert!(run.make_room(0, &res));
            run.head.widen(1_000u64.to_words(), || 1_000u64.to_words());
            run.write_entry_for_test(0, 1_000, 7);
            run.head.publish(1);
            segment.seal(pairs);
            let at = |k: u64, t: u64| Pos::of(k, t, pairs);
            let ran = segment.spill_insert(at(1_000, 8), 1_000, 8, pairs);
            if pairs {
                assert_eq!(ran, Some(None), "a new pair of a key the runs hold");
            } else {
                assert_eq!(ran, None, "the runs hold the key: wait for the conversion");
            }
            let mut model: Vec<(u64, u64)> = if pairs { vec![(1_000, 8)] } else { vec![] };
            let mut rng = 0x2545_f491_4f6c_dd1du64;
            for c in 0..300u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let key = (rng % 5_000) * 2 + 1;
                if model.iter().any(|&(k, _)| k == key) {
                    continue;
                }
                assert_eq!(segment.spill_insert(at(key, c), key, c, pairs), Some(None));
                model.push((key, c));
            }
            model.sort_unstable();
            let (k, t) = model[5];
            if pairs {
                let again = segment.spill_insert(at(k, t), k, t, pairs);
                assert_eq!(again, Some(Some(t)), "the pair is there");
            } else {
                let again = segment.spill_insert(at(k, t), k, t + 1_000_000, pairs);
                assert_eq!(again, Some(Some(t)), "replaced");
                model[5].1 = t + 1_000_000;
            }
            for &(k, t) in &model {
                assert_eq!(segment.spill_find(at(k, t), pairs), Some(t));
            }
            assert_eq!(segment.spill_find(at(2, 0), pairs), None);
            segment
                .read_spill(|spill| spill.check(pairs))
                .expect("a sorted spill");
            assert_eq!(
                segment.live(),
                model.len() + 1,
                "the run's entry and the spill"
            );
            assert_eq!(segment.close_spill(), model);
            assert_eq!(segment.spill_insert(at(4, 0), 4, 0, pairs), None, "closed");
            assert_eq!(segment.spill_insert(at(k, t), k, t, pairs), None, "closed");
            segment.release();
        }
    }
}
