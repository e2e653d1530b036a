//! Range scans over both layers, ascending and descending.
//!
//! A scan takes the segment chain once: the data layer holds the positions at or below the
//! oldest segment's lower bound, each segment the positions above its lower bound and at or
//! below the next one's. Ascending, it walks the data blocks from its start (Algorithm 3:
//! copy a block's qualifying entries, validate the block's version, hand them out, follow
//! `next`), then merges the runs of each segment, oldest first. Descending, it merges the
//! segments' runs newest first, then walks the data blocks down, finding each block below
//! the last one through the search layer. Every visited pair was in the index when its
//! block validated (or when its run was read); a scan resumes after the last pair it handed
//! out, so positions never repeat or go backwards.

use std::ops::Bound;

use crossbeam_epoch::{self as epoch, Guard};
use smallvec::SmallVec;

use super::block::Block;
use super::body::{Body, Reach};
use super::key::{Pos, SbKey};
use super::late::LateRun;
use super::segment::Segment;
use super::tree::SbTree;

/// Whether `pos` is inside `bound` seen from below (`upper`: `pos` at or below it).
fn below<K: SbKey>(pos: Pos<K>, bound: Bound<Pos<K>>) -> bool {
    match bound {
        Bound::Unbounded => true,
        Bound::Included(b) => pos <= b,
        Bound::Excluded(b) => pos < b,
    }
}

/// Whether `pos` is inside `bound` seen from above (`lower`: `pos` at or above it).
fn above<K: SbKey>(pos: Pos<K>, bound: Bound<Pos<K>>) -> bool {
    match bound {
        Bound::Unbounded => true,
        Bound::Included(b) => pos >= b,
        Bound::Excluded(b) => pos > b,
    }
}

/// The live entries of `late` within `(lo, hi)`, at most `limit` of them from the bound a
/// scan starts at (`hi` for a descending one), in the scan's order.
fn late_within<K: SbKey>(
    late: &LateRun<K>,
    lo: Bound<Pos<K>>,
    hi: Bound<Pos<K>>,
    descending: bool,
    limit: usize,
    pairs: bool,
) -> Vec<(K, u64)> {
    let (from, to) = if descending { (hi, lo) } else { (lo, hi) };
    let mut out = Vec::new();
    late.visit(from, descending, pairs, |(k, t), dead| {
        let pos = Pos::of(k, t, pairs);
        let inside = if descending {
            above(pos, to)
        } else {
            below(pos, to)
        };
        if inside && !dead {
            out.push((k, t));
        }
        inside && out.len() < limit
    });
    out
}

/// The tighter of two upper bounds.
fn min_upper<K: SbKey>(a: Bound<Pos<K>>, b: Bound<Pos<K>>) -> Bound<Pos<K>> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y)),
        (Bound::Included(x), Bound::Excluded(y)) | (Bound::Excluded(y), Bound::Included(x)) => {
            if x < y {
                Bound::Included(x)
            } else {
                Bound::Excluded(y)
            }
        }
    }
}

/// The tighter of two lower bounds.
fn max_lower<K: SbKey>(a: Bound<Pos<K>>, b: Bound<Pos<K>>) -> Bound<Pos<K>> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y)),
        (Bound::Included(x), Bound::Excluded(y)) | (Bound::Excluded(y), Bound::Included(x)) => {
            if x > y {
                Bound::Included(x)
            } else {
                Bound::Excluded(y)
            }
        }
    }
}

/// Whether the range between two bounds is empty.
fn empty<K: SbKey>(lower: Bound<Pos<K>>, upper: Bound<Pos<K>>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u))
        | (Bound::Excluded(l), Bound::Excluded(u)) => l >= u,
        _ => false,
    }
}

/// A body's late entries, copied before its block validates (see [`SbTree::scan_data_up`]).
type LateCopy<K> = SmallVec<[(K, u64); 32]>;

/// `block`'s body, with its late entries copied into `late`: what a walk hands out once the
/// block's version validates.
fn load_body<'g, K: SbKey>(
    block: &Block<K>,
    late: &mut LateCopy<K>,
    guard: &'g Guard,
) -> Option<Body<'g, K>> {
    let body = block.body(guard);
    late.clear();
    if let Some(body) = body {
        body.copy_late(late);
    }
    body
}

/// A segment with the range of positions it holds: (its lower bound, the newer one's].
type SegmentRange<'g, K> = (Bound<Pos<K>>, Bound<Pos<K>>, &'g Segment<K>);

impl<K: SbKey> SbTree<K> {
    /// Visits up to `limit` entries within `(lower, upper)` in position order (descending if
    /// `descending`); returns how many it visited.
    pub fn scan(
        &self,
        lower: Bound<Pos<K>>,
        upper: Bound<Pos<K>>,
        descending: bool,
        limit: usize,
        visit: &mut impl FnMut(K, u64),
    ) -> usize {
        if limit == 0 || empty(lower, upper) {
            return 0;
        }
        let guard = &epoch::pin();
        let segments = self.segments(guard);
        // Each segment's range: (its lower bound, the next newer one's lower bound].
        let mut ranges: SmallVec<[SegmentRange<'_, K>; 4]> = SmallVec::new();
        let mut top = Bound::Unbounded;
        for &segment in &segments {
            let low = segment.lower.map_or(Bound::Unbounded, Bound::Excluded);
            ranges.push((low, top, segment));
            top = segment
                .lower
                .map_or(Bound::Excluded(Pos::MIN), Bound::Included);
        }
        // The data layer holds what is at or below the oldest segment's lower bound.
        let data_top = match segments.last().expect("the frontier").lower {
            Some(l) => Bound::Included(l),
            None => Bound::Excluded(Pos::MIN),
        };
        let mut out = Out::new(visit, limit);
        let mut segment_entries = Vec::new();
        if descending {
            let mut to = upper;
            for &(low, high, segment) in &ranges {
                let (lo, hi) = (max_lower(low, lower), min_upper(high, to));
                if !empty(lo, hi) {
                    self.collect_segment(
                        segment,
                        lo,
                        hi,
                        true,
                        limit - out.visited,
                        &mut segment_entries,
                    );
                    if out.emit_all(&segment_entries) {
                        return out.visited;
                    }
                }
                to = match low {
                    Bound::Excluded(l) => min_upper(to, Bound::Included(l)),
                    _ => return out.visited,
                };
            }
            let hi = min_upper(data_top, to);
            if !empty(lower, hi) {
                self.scan_data_down(lower, hi, &mut out, guard);
            }
        } else {
            let hi = min_upper(data_top, upper);
            if !empty(lower, hi) {
                self.scan_data_up(lower, hi, &mut out, guard);
                if out.visited == limit {
                    return out.visited;
                }
            }
            for &(low, high, segment) in ranges.iter().rev() {
                let (lo, hi) = (max_lower(low, lower), min_upper(high, upper));
                if empty(lo, hi) {
                    continue;
                }
                self.collect_segment(
                    segment,
                    lo,
                    hi,
                    false,
                    limit - out.visited,
                    &mut segment_entries,
                );
                if out.emit_all(&segment_entries) {
                    break;
                }
            }
        }
        out.visited
    }

    /// The live committed entries of `segment` within `(lo, hi)`, sorted (descending if
    /// `descending`), at most `limit` of them, into `out` (cleared first).
    fn collect_segment(
        &self,
        segment: &Segment<K>,
        lo: Bound<Pos<K>>,
        hi: Bound<Pos<K>>,
        descending: bool,
        limit: usize,
        out: &mut Vec<(K, u64)>,
    ) {
        let pairs = self.geo.pairs;
        out.clear();
        let at = |(k, t): (K, u64)| Pos::of(k, t, pairs);
        for (slot, n) in segment.committed_lengths() {
            let run = segment.run(slot).expect("a stored run");
            // The append run: from the first entry in range, up to `limit` live ones.
            let mut taken = 0;
            if descending {
                let mut i = match hi {
                    Bound::Unbounded => n,
                    Bound::Included(p) => run.find(p, n, pairs).map_or_else(|i| i, |i| i + 1),
                    Bound::Excluded(p) => run.find(p, n, pairs).unwrap_or_else(|i| i),
                };
                while i > 0 && taken < limit {
                    i -= 1;
                    let e = run.entry(i);
                    if !above(at(e), lo) {
                        break;
                    }
                    if !run.is_dead(i) {
                        out.push(e);
                        taken += 1;
                    }
                }
            } else {
                let mut i = match lo {
                    Bound::Unbounded => 0,
                    Bound::Included(p) => run.find(p, n, pairs).unwrap_or_else(|i| i),
                    Bound::Excluded(p) => run.find(p, n, pairs).map_or_else(|i| i, |i| i + 1),
                };
                while i < n && taken < limit {
                    let e = run.entry(i);
                    if !below(at(e), hi) {
                        break;
                    }
                    if !run.is_dead(i) {
                        out.push(e);
                        taken += 1;
                    }
                    i += 1;
                }
            }
            #[cfg(test)]
            hook::before_body([u64::MAX; 2]);
            // The late run, from the bound, up to `limit` live entries, under its version.
            let late = run.read_late(|r| late_within(r.late(), lo, hi, descending, limit, pairs));
            out.extend(late);
        }
        // A sealed segment's spill, the same way.
        if segment.has_spill() {
            let spill =
                segment.read_spill(|spill| late_within(spill, lo, hi, descending, limit, pairs));
            out.extend(spill);
        }
        out.sort_unstable_by_key(|&e| at(e));
        // One position twice: the append runs are read without a version, so a pair read
        // there, then removed and inserted again (into a late run, read after) while the
        // scan ran, is met in both. Either copy was in the index during the scan; hand out
        // one.
        out.dedup_by_key(|&mut e| at(e));
        if descending {
            out.reverse();
        }
        out.truncate(limit);
    }

    /// The ascending walk over data blocks within `(lo, hi)`.
    ///
    /// A body's late entries (which move under writers) are copied, then the block's version
    /// is validated, then the body is read straight to the visitor, its main entries merged
    /// with the copied late ones: the body is then the one of the version the walk read
    /// (with its fences and successor), its main entries are immutable and were in the
    /// index when it was published (and still, or not deleted yet, by their dead bits), the
    /// late ones were in it at that version, and nothing the visitor gets needs checking
    /// after.
    ///
    /// Validating first matters for the descending walk ([`SbTree::scan_data_down`]): a body
    /// loaded after the version was read may be what a split left in the block, the lower
    /// part of the range the walk located the block for; handing out its entries and
    /// resuming below the last one skipped the upper part, which the split moved to a new
    /// block on the right.
    fn scan_data_up(
        &self,
        lo: Bound<Pos<K>>,
        hi: Bound<Pos<K>>,
        out: &mut Out<'_, impl FnMut(K, u64)>,
        guard: &Guard,
    ) {
        let (pairs, kernel) = (self.geo.pairs, self.geo.kernel);
        // `from`: the smallest position not yet handed out that may qualify.
        let mut from = match lo {
            Bound::Unbounded => Pos::MIN,
            Bound::Included(p) => p,
            Bound::Excluded(p) => match p.succ(pairs) {
                Some(p) => p,
                None => return,
            },
        };
        // The first position past the range (none: unbounded).
        let stop = match hi {
            Bound::Unbounded => None,
            Bound::Excluded(p) => Some(p),
            Bound::Included(p) => p.succ(pairs),
        };
        let reach = Reach::Up(out.wanted());
        let (mut block, mut read) = self.data.locate(from, false, reach, guard);
        let mut late = LateCopy::new();
        loop {
            #[cfg(test)]
            hook::before_body(from.key.to_words());
            let body = load_body(block, &mut late, guard);
            let (next, high) = (block.next(), block.high());
            // The body, fences, successor and late entries of the version read (see the docs).
            if read.validate().is_err() {
                (block, read) = self.data.walk(block, from, false);
                continue;
            }
            let mut ended = false;
            if let Some(body) = body {
                body.for_each_from(from, (pairs, kernel), out.wanted(), &late, |k, t| {
                    if stop.is_some_and(|s| Pos::of(k, t, pairs) >= s) {
                        ended = true;
                        return false;
                    }
                    out.hand(k, t)
                });
            }
            if ended || out.is_full() {
                return;
            }
            if next.is_null() || !below(high, hi) {
                return;
            }
            from = high;
            // SAFETY: read from a validated block: published, kept allocated by the guard.
            (block, read) = self.data.walk(unsafe { &*next }, from, false);
        }
    }

    /// The descending walk over data blocks within `(lo, hi)`: each block's entries from the
    /// top down, then the block holding the positions below its low fence (each read
    /// straight to the visitor with its late entries copied, as in
    /// [`SbTree::scan_data_up`]).
    fn scan_data_down(
        &self,
        lo: Bound<Pos<K>>,
        hi: Bound<Pos<K>>,
        out: &mut Out<'_, impl FnMut(K, u64)>,
        guard: &Guard,
    ) {
        let (pairs, kernel) = (self.geo.pairs, self.geo.kernel);
        // Positions at or below `probe` (below it if `strict`) are still to come.
        let (mut probe, mut strict) = match hi {
            Bound::Included(p) => (p, false),
            Bound::Excluded(p) => (p, true),
            Bound::Unbounded => (Pos::MAX, false),
        };
        let mut late = LateCopy::new();
        loop {
            let reach = Reach::Down(out.wanted());
            let (mut block, mut read) = self.data.locate(probe, strict, reach, guard);
            loop {
                #[cfg(test)]
                hook::before_body(probe.key.to_words());
                let body = load_body(block, &mut late, guard);
                let low = block.low();
                // The body of the version the walk read, whose range reaches up to the probe:
                // a later one may be the lower part a split left here, without the positions
                // it moved to the new block on the right (see [`SbTree::scan_data_up`]).
                if read.validate().is_err() {
                    (block, read) = self.data.walk(block, probe, strict);
                    continue;
                }
                let mut ended = false;
                if let Some(body) = body {
                    let wanted = out.wanted();
                    body.for_each_down_from(probe, (pairs, kernel), wanted, &late, |k, t| {
                        let at = Pos::of(k, t, pairs);
                        if strict && at == probe {
                            return true;
                        }
                        if !above(at, lo) {
                            ended = true;
                            return false;
                        }
                        out.hand(k, t)
                    });
                }
                if ended || out.is_full() {
                    return;
                }
                if low == Pos::MIN || !above(low, lo) {
                    return;
                }
                (probe, strict) = (low, true);
                break;
            }
        }
    }
}

/// Where a scan's entries go: the caller's visitor, the count and the limit.
pub(super) struct Out<'v, V> {
    visit: &'v mut V,
    visited: usize,
    limit: usize,
}

impl<'v, V> Out<'v, V> {
    fn new(visit: &'v mut V, limit: usize) -> Self {
        Self {
            visit,
            visited: 0,
            limit,
        }
    }

    /// Hands one entry straight to the visitor; whether the scan wants more.
    #[inline]
    fn hand<K>(&mut self, key: K, tid: u64) -> bool
    where
        V: FnMut(K, u64),
    {
        (self.visit)(key, tid);
        self.visited += 1;
        self.visited < self.limit
    }

    /// How many more entries the scan takes.
    fn wanted(&self) -> usize {
        self.limit - self.visited
    }

    /// Whether the limit is reached.
    fn is_full(&self) -> bool {
        self.visited == self.limit
    }

    /// Hands out sorted entries (a segment's) up to the limit; whether the limit is reached.
    fn emit_all<K: Copy>(&mut self, entries: &[(K, u64)]) -> bool
    where
        V: FnMut(K, u64),
    {
        for &(k, t) in entries.iter().take(self.limit - self.visited) {
            (self.visit)(k, t);
            self.visited += 1;
        }
        self.visited == self.limit
    }
}

/// Test builds: a hook the data-layer walks run between finding a block (its version read)
/// and loading its body, the window in which a writer may rewrite or split the block; and
/// that a segment's collection runs (with the probe `[u64::MAX; 2]`) between reading a run's
/// append entries and its late ones.
#[cfg(test)]
pub(super) mod hook {
    use std::cell::RefCell;

    /// A test's action, given the key words of the walk's probe.
    type Hook = Box<dyn FnMut([u64; 2])>;

    thread_local! {
        static BEFORE_BODY: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Installs `hook` for this thread's walks (until [`clear`]).
    pub fn set(hook: impl FnMut([u64; 2]) + 'static) {
        BEFORE_BODY.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    }

    /// Removes this thread's hook.
    pub fn clear() {
        BEFORE_BODY.with(|h| *h.borrow_mut() = None);
    }

    /// Runs this thread's hook, if any (taken out while it runs, so that it may use the tree).
    pub fn before_body(probe: [u64; 2]) {
        let Some(mut hook) = BEFORE_BODY.with(|h| h.borrow_mut().take()) else {
            return;
        };
        hook(probe);
        BEFORE_BODY.with(|h| {
            let mut slot = h.borrow_mut();
            if slot.is_none() {
                *slot = Some(hook);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::Arc;

    use super::*;
    use crate::sbtree::{Geometry, SbTreeOptions};

    /// A tree of tiny data blocks (4 entries, no late slots at first) holding the keys
    /// 0, 10, .., 390, all converted into the data layer and indexed.
    fn tiny_tree() -> Arc<SbTree<u64>> {
        let geo = Geometry::new::<u64>(&SbTreeOptions::default(), false, Some(4), Some(4));
        let tree = Arc::new(SbTree::<u64>::new(geo));
        for k in (0..400).step_by(10) {
            assert_eq!(tree.insert(k, k), None);
        }
        tree.flush();
        tree.maintain(&mut crate::sbtree::lock(&tree.maintenance));
        tree
    }

    /// Scans `[0, end)` of `tree`, running `write` once from the hook when it meets
    /// `probe`; returns the keys visited, in ascending order.
    fn scan_with_write_at(
        tree: &Arc<SbTree<u64>>,
        probe: [u64; 2],
        descending: bool,
        end: u64,
        write: impl FnOnce(&SbTree<u64>) + 'static,
    ) -> Vec<u64> {
        let fired = Rc::new(Cell::new(false));
        {
            let (tree, fired) = (Arc::clone(tree), Rc::clone(&fired));
            let mut write = Some(write);
            hook::set(move |at| {
                if at == probe {
                    if let Some(write) = write.take() {
                        fired.set(true);
                        write(&tree);
                    }
                }
            });
        }
        let mut seen = Vec::new();
        let lower = Bound::Included(Pos { key: 0, tid: 0 });
        let upper = Bound::Excluded(Pos { key: end, tid: 0 });
        tree.scan(lower, upper, descending, usize::MAX, &mut |k, _| {
            seen.push(k)
        });
        hook::clear();
        assert!(fired.get(), "the write happened inside the scan");
        if descending {
            seen.reverse();
        }
        seen
    }

    /// Scans `[0, 400)` with a writer's split of the block holding 320..350 falling between
    /// the walk's look at that block and its read of the body (the hook inserts 335 there
    /// once, at the walk's probe `at`): every key loaded before must be visited, in order.
    fn scan_across_a_split(descending: bool, at: u64) {
        let tree = tiny_tree();
        // Below the frontier: a delayed insert into the full block 320..350, which has no
        // late slot, so the block is rewritten and split.
        let seen = scan_with_write_at(&tree, [0, at], descending, 400, |tree| {
            assert_eq!(tree.insert(335, 335), None);
        });
        assert!(
            seen.windows(2).all(|p| p[0] < p[1]),
            "in order, no repeats: {seen:?}"
        );
        let missed: Vec<u64> = (0..400).step_by(10).filter(|k| !seen.contains(k)).collect();
        assert!(missed.is_empty(), "missed {missed:?}; saw {seen:?}");
    }

    /// A pair read in a segment's append run, then removed and inserted again (into the
    /// run's late entries) before the scan reads those, is handed out once.
    #[test]
    fn a_pair_removed_and_inserted_again_under_a_segment_scan_is_visited_once() {
        for descending in [false, true] {
            let geo = Geometry::new::<u64>(&SbTreeOptions::default(), false, Some(4), Some(4));
            let tree = Arc::new(SbTree::<u64>::new(geo));
            for k in (0..100).step_by(10) {
                assert_eq!(tree.insert(k, k), None);
            }
            let seen = scan_with_write_at(&tree, [u64::MAX; 2], descending, 100, |tree| {
                assert_eq!(tree.remove(50, None), Some(50));
                assert_eq!(tree.insert(50, 50), None);
            });
            let all: Vec<u64> = (0..100).step_by(10).collect();
            assert_eq!(seen, all, "descending: {descending}");
        }
    }

    /// A descending walk that located the block 320..350 for the probe 360 and then read the
    /// body the split left there (320..335) must still visit 340 and 350, which moved to the
    /// split's new block.
    #[test]
    fn a_descending_scan_visits_the_upper_half_of_a_block_split_under_it() {
        scan_across_a_split(true, 360);
    }

    /// The ascending walk across the same split (its resumption after the last entry handed
    /// out follows the block's new high fence to the new block).
    #[test]
    fn an_ascending_scan_visits_the_upper_half_of_a_block_split_under_it() {
        scan_across_a_split(false, 320);
    }
}
