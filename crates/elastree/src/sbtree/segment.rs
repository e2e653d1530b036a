//! Segments: the paper's segmented block. The newest segment (the *frontier*) takes every
//! entry above its lower bound, each thread appending to its own run; when a run fills, the
//! segment is sealed, a new segment whose lower bound is the sealed one's largest position
//! takes over, and the sealed segment is merged, sorted and cut into data blocks appended
//! to the data layer.
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
//! # Lifetime
//!
//! A segment is freed (through the epoch collector, by the maintenance pass) once it is
//! converted and every thread that had a run in it has let go of the run: the thread's next
//! insert after the seal, or its exit ([`Segment::release`] counts them down); the tree's
//! drop frees the rest.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

use super::key::{Pos, SbKey};
use super::protocol::SegmentHead;
use super::run::Run;
use super::{Geometry, Resources};
use crate::sync::atomic::SpinWait;
use crate::sync::WriterGate;

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
        res.aux.add(Self::bytes());
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
            res: Arc::clone(res),
            run_blocks: geo.run_blocks,
            per_block: geo.run_entries,
        })
    }

    /// Bytes of a segment besides its runs.
    fn bytes() -> usize {
        std::mem::size_of::<Self>() + MAX_RUNS * 8
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

    /// Every live captured entry, sorted (after [`Segment::seal`]).
    pub fn captured_entries(&self, pairs: bool) -> Vec<(K, u64)> {
        let runs: Vec<&Run<K>> = (0..self.used()).filter_map(|slot| self.run(slot)).collect();
        let total = runs.iter().map(|r| r.captured_len()).sum();
        let mut entries = Vec::with_capacity(total);
        // Each part of each run (append, late) is sorted: copy them one after the other,
        // noting where each starts, then merge.
        let mut starts = vec![0];
        for run in runs {
            run.captured_entries(&mut entries, &mut starts);
        }
        merge_sorted(entries, &starts, pairs)
    }

    /// The captured entries in position order, for the conversion to read in chunks
    /// (after [`Segment::seal`]): read in place when one part of one run holds them all
    /// (a segment one thread filled in order), else merged into one vector.
    pub fn captured(&self, pairs: bool) -> Captured<'_, K> {
        let mut parts = (0..self.used())
            .filter_map(|slot| self.run(slot))
            .flat_map(|run| {
                let append = run.head.captured().unwrap_or(0) as usize;
                let late = run.late_head.captured().unwrap_or(0) as usize;
                [(run, false, append), (run, true, late)]
            })
            .filter(|&(_, _, len)| len > 0);
        match (parts.next(), parts.next()) {
            (None, _) => Captured::Merged {
                entries: Vec::new(),
                next: 0,
            },
            (Some((run, late, end)), None) => Captured::Part {
                run,
                late,
                next: 0,
                end,
            },
            (Some(_), Some(_)) => Captured::Merged {
                entries: self.captured_entries(pairs),
                next: 0,
            },
        }
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
    /// [`Segment::committed_lengths`]), with its tid. A late place is valid only while the
    /// run's version is unchanged; modifiers re-find it under the run's lock.
    pub fn find(
        &self,
        pos: Pos<K>,
        lengths: &[(usize, usize)],
        pairs: bool,
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
            if run.late_head.published() == 0 || !run.late_head.covers(key) {
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
            live += run.read_late(|run| {
                (0..run.late_len())
                    .filter(|&j| !run.late_is_dead(j))
                    .count()
            });
        }
        live
    }
}

/// A sealed segment's captured entries in position order, handed out in chunks
/// ([`Captured::fill`]) so that the conversion builds bodies from a small buffer instead of
/// a copy of the whole segment.
pub enum Captured<'s, K: SbKey> {
    /// Every captured entry is in one part of one run (its append run, or `late`: its late
    /// run), entries `next..end` still to hand out (dead ones skipped).
    Part {
        /// The run.
        run: &'s Run<K>,
        /// Whether the part is the late run.
        late: bool,
        /// The next entry of the part to hand out.
        next: usize,
        /// The part's captured length.
        end: usize,
    },
    /// Several parts, merged: `entries[next..]` still to hand out.
    Merged {
        /// Every live captured entry, sorted.
        entries: Vec<(K, u64)>,
        /// The next one to hand out.
        next: usize,
    },
}

impl<K: SbKey> Captured<'_, K> {
    /// Entries left to hand out (dead ones of an unmerged part included).
    pub fn remaining(&self) -> usize {
        match self {
            Self::Part { next, end, .. } => end - next,
            Self::Merged { entries, next } => entries.len() - next,
        }
    }

    /// Appends the next live entries, from at most `want` captured ones, to `out`.
    pub fn fill(&mut self, out: &mut Vec<(K, u64)>, want: usize) {
        match self {
            Self::Part {
                run,
                late,
                next,
                end,
            } => {
                let to = (*next + want).min(*end);
                if *late {
                    run.copy_late(*next, to, out);
                } else {
                    run.copy_append(*next, to, out);
                }
                *next = to;
            }
            Self::Merged { entries, next } => {
                let to = (*next + want).min(entries.len());
                out.extend_from_slice(&entries[*next..to]);
                *next = to;
            }
        }
    }
}

/// Merges the sorted stretches of `entries` that begin at `starts` (ascending, the first 0)
/// into one sorted vector: adjacent stretches pairwise, pass after pass.
fn merge_sorted<K: SbKey>(
    mut entries: Vec<(K, u64)>,
    starts: &[usize],
    pairs: bool,
) -> Vec<(K, u64)> {
    let len = entries.len();
    let mut bounds: Vec<usize> = starts.iter().copied().filter(|&s| s < len).collect();
    bounds.dedup();
    let at = |e: &(K, u64)| Pos::of(e.0, e.1, pairs);
    let mut other = Vec::with_capacity(len);
    while bounds.len() > 1 {
        other.clear();
        let end_of = |k: usize| bounds.get(k).copied().unwrap_or(len);
        let mut merged = Vec::with_capacity(bounds.len().div_ceil(2));
        for k in (0..bounds.len()).step_by(2) {
            merged.push(other.len());
            let (mut i, a_end) = (bounds[k], end_of(k + 1));
            let (mut j, b_end) = (a_end, end_of(k + 2));
            // Stretches taken whole: the entries of one side below the other's next one,
            // found by galloping (threads' runs interleave in long stretches).
            while i < a_end && j < b_end {
                if at(&entries[j]) < at(&entries[i]) {
                    let next = at(&entries[i]);
                    let to = gallop(&entries[j..b_end], |e| at(e) < next) + j;
                    other.extend_from_slice(&entries[j..to]);
                    j = to;
                } else {
                    let next = at(&entries[j]);
                    let to = gallop(&entries[i..a_end], |e| at(e) <= next) + i;
                    other.extend_from_slice(&entries[i..to]);
                    i = to;
                }
            }
            other.extend_from_slice(&entries[i..a_end]);
            other.extend_from_slice(&entries[j..b_end]);
        }
        std::mem::swap(&mut entries, &mut other);
        bounds = merged;
    }
    entries
}

/// The length of the prefix of `items` whose items satisfy `below` (true on a prefix, at
/// least on the first item): probes 1, 2, 4, ... items ahead, then bisects the last step,
/// so a short prefix costs a few comparisons and a long one its logarithm.
fn gallop<T>(items: &[T], below: impl Fn(&T) -> bool) -> usize {
    let mut lo = 1;
    let mut step = 1;
    while lo < items.len() && below(&items[lo]) {
        lo += step;
        step *= 2;
    }
    // The prefix ends in (lo - step / 2 .. lo] (clamped); the first item is below.
    let from = lo.saturating_sub(step / 2).max(1).min(items.len());
    let to = lo.min(items.len());
    from + items[from..to].partition_point(&below)
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
        self.res.aux.sub(Self::bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_stretches_merge_into_one() {
        for stretches in [
            vec![],
            vec![vec![1u64, 5, 9]],
            vec![vec![2, 4], vec![1, 3, 5], vec![], vec![0, 6]],
            // Long stretches interleaved (two threads' runs), and a duplicate across them.
            (0..3)
                .map(|r| {
                    (0..40)
                        .flat_map(|b| (0..7).map(move |i| b * 100 + r * 10 + i))
                        .collect()
                })
                .chain([vec![5, 5 + 7 * 100, 3999]])
                .collect(),
        ] {
            let mut entries = Vec::new();
            let mut starts = vec![0];
            for s in &stretches {
                entries.extend(s.iter().map(|&k| (k, k)));
                starts.push(entries.len());
            }
            let mut expected = entries.clone();
            expected.sort_unstable();
            assert_eq!(merge_sorted(entries, &starts, false), expected);
        }
    }
}
