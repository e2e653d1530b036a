//! The invariant walker: every structural property the SB-tree relies on, checked with no
//! writer running (conversions and the maintenance thread are held off by taking their
//! mutexes).

use std::sync::atomic::Ordering;

use crossbeam_epoch as epoch;

use super::block::Block;
use super::body::{Body, Form};
use super::key::{Pos, SbKey};
use super::segment::Segment;
use super::tree::SbTree;

impl<K: SbKey> SbTree<K> {
    /// Checks, with no writer running: the data blocks' fences ascend and chain (each high
    /// fence is the next block's low fence); every body is sorted, its N-ary table is every
    /// bucket's first key, its forms hold its keys and tids, its dead count matches its bits,
    /// its late area is sorted and holds no main position, and every entry lies within its
    /// block's fences; the search layer is a well-formed packed tree whose entries are chain
    /// blocks, in chain order, under their low fences; segments' lower bounds descend from
    /// the frontier and every data entry is at or below the oldest; every run is sorted, in
    /// its segment's range and its own key range; no position is live twice in a segment;
    /// the entry counts add up to `len()`.
    pub fn check(&self) -> Result<(), String> {
        // No conversion either: one writes into the data layer as it ends.
        let _converting = super::lock(&self.converting);
        let _maintenance = super::lock(&self.maintenance);
        let guard = &epoch::pin();
        let pairs = self.geo.pairs;
        let mut chain: Vec<*mut Block<K>> = Vec::new();
        let mut data_entries = 0usize;
        let mut last: Option<Pos<K>> = None;
        let mut block_ptr = self.data.head();
        let mut prev_low: Option<Pos<K>> = None;
        while !block_ptr.is_null() {
            // SAFETY: a linked block; the guard keeps it allocated.
            let block = unsafe { &*block_ptr };
            let at = |what: String| format!("data block {} ({block_ptr:p}): {what}", chain.len());
            if block.lock.is_locked() || block.lock.is_obsolete() {
                return Err(at("locked or obsolete".into()));
            }
            let low = block.low();
            if prev_low.is_some_and(|p| p >= low) {
                return Err(at(format!(
                    "low fence {low:?} not above the previous block's"
                )));
            }
            if chain.is_empty() && low != Pos::MIN {
                return Err(at(format!("the first block's low fence is {low:?}")));
            }
            let next = block.next();
            let high = (!next.is_null()).then(|| block.high());
            if let Some(high) = high {
                // SAFETY: a linked block.
                let next_low = unsafe { &*next }.low();
                if high != next_low {
                    return Err(at(format!(
                        "high fence {high:?} but the next block's low is {next_low:?}"
                    )));
                }
            }
            if let Some(body) = block.body(guard) {
                check_body(&body, pairs, self.geo.bucket).map_err(at)?;
                let mut entries = Vec::new();
                body.live_entries(pairs, &mut entries);
                for &(k, t) in &entries {
                    let pos = Pos::of(k, t, pairs);
                    if pos < low || high.is_some_and(|h| pos >= h) {
                        return Err(at(format!(
                            "entry {pos:?} outside the fences {low:?}..{high:?}"
                        )));
                    }
                    if last.is_some_and(|l| l >= pos) {
                        return Err(at(format!("entry {pos:?} not above the previous {last:?}")));
                    }
                    last = Some(pos);
                }
                data_entries += entries.len();
            }
            chain.push(block_ptr);
            prev_low = Some(low);
            block_ptr = next;
        }
        if data_entries != self.data.len() {
            return Err(format!(
                "the data blocks hold {data_entries} entries, the count says {}",
                self.data.len()
            ));
        }
        self.check_search_layer(&chain, guard)?;
        let segments = self.segments(guard);
        let mut segment_entries = 0;
        let mut top: Option<Pos<K>> = None;
        for (n, segment) in segments.iter().enumerate() {
            let at = |what: String| format!("segment {} (newest is 0: {n}): {what}", segment.seq);
            if let (Some(lower), Some(t)) = (segment.lower, top) {
                if lower >= t {
                    return Err(at(format!(
                        "lower bound {lower:?} not below the newer segment's {t:?}"
                    )));
                }
            }
            if n > 0 && top.is_none() {
                return Err(at(
                    "an older segment behind one that takes every position".into()
                ));
            }
            segment_entries += check_segment(segment, top, pairs).map_err(at)?;
            top = segment.lower;
        }
        let oldest = segments.last().expect("the frontier").lower;
        if let Some(max) = last {
            if oldest.is_none_or(|o| max > o) {
                return Err(format!(
                    "data entry {max:?} above the oldest segment's bound {oldest:?}"
                ));
            }
        }
        let len = self.len_unconverting();
        if data_entries + segment_entries != len {
            return Err(format!(
                "{data_entries} data and {segment_entries} segment entries but len() is {len}"
            ));
        }
        Ok(())
    }

    fn check_search_layer(
        &self,
        chain: &[*mut Block<K>],
        guard: &epoch::Guard,
    ) -> Result<(), String> {
        let layer = self.data.search_layer(guard);
        layer.check()?;
        let mut at = 0;
        for (i, (low, block)) in layer.entries().into_iter().enumerate() {
            let Some(found) = chain[at..].iter().position(|&b| b == block) else {
                return Err(format!(
                    "search layer entry {i} points at no block of the chain (or out of order)"
                ));
            };
            at += found;
            // SAFETY: a block of the chain.
            let fence = unsafe { &*block }.low();
            if fence != low {
                return Err(format!(
                    "search layer entry {i} has {low:?}, its block's low fence is {fence:?}"
                ));
            }
        }
        Ok(())
    }
}

/// A body's own invariants.
fn check_body<K: SbKey>(body: &Body<'_, K>, pairs: bool, bucket: usize) -> Result<(), String> {
    let count = body.count();
    let shape = body.shape();
    if shape.bucket != bucket {
        return Err(format!("bucket {} (the tree's is {bucket})", shape.bucket));
    }
    let mut dead = 0;
    for i in 0..count {
        if i > 0 && body.pos(i - 1, pairs) >= body.pos(i, pairs) {
            return Err(format!("main entries {} and {i} out of order", i - 1));
        }
        dead += usize::from(body.is_dead(i));
    }
    if dead != body.dead() {
        return Err(format!("{dead} dead bits, the count says {}", body.dead()));
    }
    if shape.keys == Form::Compact
        && count > 0
        && body.key(count - 1).offset_from(body.key(0)).is_none()
    {
        return Err("compact keys span more than 32 bits".into());
    }
    let late = body.late_len();
    for j in 0..late {
        let (k, t) = body.late(j);
        let pos = Pos::of(k, t, pairs);
        if j > 0 {
            let (pk, pt) = body.late(j - 1);
            if Pos::of(pk, pt, pairs) >= pos {
                return Err(format!("late entries {} and {j} out of order", j - 1));
            }
        }
        if body.find(pos, pairs, super::simd::Kernel::Portable).is_ok() {
            return Err(format!("late entry {pos:?} also among the main entries"));
        }
    }
    for i in (0..count).step_by(bucket) {
        if body.rank(body.key(i), true, super::simd::Kernel::Portable) > i {
            return Err(format!("the N-ary table misranks entry {i}"));
        }
    }
    Ok(())
}

/// A segment's invariants; returns its live entries. `top` is the newer segment's lower
/// bound (none for the frontier).
fn check_segment<K: SbKey>(
    segment: &Segment<K>,
    top: Option<Pos<K>>,
    pairs: bool,
) -> Result<usize, String> {
    let mut live = Vec::new();
    for (slot, n) in segment.committed_lengths() {
        let run = segment.run(slot).expect("a stored run");
        let at = |what: String| format!("run {slot}: {what}");
        let (floor, ceiling) = run.head.range();
        let mut appended: Vec<Pos<K>> = Vec::with_capacity(n);
        for i in 0..n {
            let (k, t) = run.entry(i);
            let pos = Pos::of(k, t, pairs);
            if appended.last().is_some_and(|&p| p >= pos) {
                return Err(at(format!("append entries {} and {i} out of order", i - 1)));
            }
            appended.push(pos);
            if !segment.holds(pos) || top.is_some_and(|t| pos > t) {
                return Err(at(format!("entry {pos:?} outside the segment")));
            }
            let words = k.to_words();
            if words < floor || words > ceiling {
                return Err(at(format!("entry {pos:?} outside the run's key range")));
            }
            if !run.is_dead(i) {
                live.push(pos);
            }
        }
        let late = run.read_late(|r| r.late().check(pairs)).map_err(at)?;
        if late.len() != run.late_len() {
            return Err(at(format!(
                "{} late entries, the count says {}",
                late.len(),
                run.late_len()
            )));
        }
        for (sep, rank) in run.read_late(|r| r.late().ranked_separators(pairs)) {
            let below = appended.partition_point(|&p| p < sep);
            if rank != below {
                return Err(at(format!(
                    "late separator {sep:?} ranked {rank}, {below} append entries below it"
                )));
            }
        }
        for &((k, t), dead) in &late {
            let pos = Pos::of(k, t, pairs);
            if !segment.holds(pos) || top.is_some_and(|t| pos > t) {
                return Err(at(format!("late entry {pos:?} outside the segment")));
            }
            if !run.late_head.covers(k.to_words()) {
                return Err(at(format!(
                    "late entry {pos:?} outside the late run's key range"
                )));
            }
            if !dead {
                live.push(pos);
            }
        }
    }
    let spill = segment
        .read_spill(|spill| spill.check(pairs))
        .map_err(|e| format!("spill: {e}"))?;
    for ((k, t), dead) in spill {
        let pos = Pos::of(k, t, pairs);
        if !segment.holds(pos) || top.is_some_and(|t| pos > t) {
            return Err(format!("spilled entry {pos:?} outside the segment"));
        }
        if !dead {
            live.push(pos);
        }
    }
    let n = live.len();
    live.sort_unstable();
    live.dedup();
    if live.len() != n {
        return Err("a position is live twice".into());
    }
    if segment.converted.load(Ordering::Acquire) {
        return Err("a converted segment is still linked".into());
    }
    Ok(n)
}
