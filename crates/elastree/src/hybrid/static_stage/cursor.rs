//! Cursors: ordered iteration from a bound, in either direction.
//!
//! Bound semantics: an ascending cursor starts at the first pair whose key is `>= k`
//! (`Included(k)`) or `> k` (`Excluded(k)`); a descending one at the last pair whose key is
//! `<= k` or `< k`; `Unbounded` starts at the first or last pair. Pairs come in (key, tid)
//! order, or its reverse for descending cursors (largest key first, and within a key the
//! largest tid first).

use std::ops::Bound;

use super::keys::{KeyMode, Target};
use super::{Loaded, StaticStage};
use crate::Direction;

/// An ordered cursor over a [`StaticStage`]; see the module documentation.
pub struct StaticCursor<'a> {
    stage: &'a StaticStage,
    direction: Direction,
    seg: usize,
    block: usize,
    /// The next pair to yield in the current block.
    pair: usize,
    /// The key holding `pair`.
    key: usize,
    /// The current block; `None` once exhausted.
    current: Option<Loaded<'a>>,
}

/// A bound key rewritten to the stage's fixed length, which selects the same keys of that
/// length: for a lower bound, a shorter key `b` becomes `Included(b ++ zeros)` and a longer
/// one `Excluded(b[..n])`; for an upper bound, `Excluded(b ++ zeros)` and `Included(b[..n])`.
fn normalize(bound: Bound<&[u8]>, mode: KeyMode, lower: bool) -> Bound<Vec<u8>> {
    let (key, included) = match bound {
        Bound::Unbounded => return Bound::Unbounded,
        Bound::Included(k) => (k, true),
        Bound::Excluded(k) => (k, false),
    };
    match mode.fixed_len() {
        Some(n) if key.len() < n => {
            let mut padded = key.to_vec();
            padded.resize(n, 0);
            if lower {
                Bound::Included(padded)
            } else {
                Bound::Excluded(padded)
            }
        }
        Some(n) if key.len() > n => {
            let cut = key[..n].to_vec();
            if lower {
                Bound::Excluded(cut)
            } else {
                Bound::Included(cut)
            }
        }
        _ if included => Bound::Included(key.to_vec()),
        _ => Bound::Excluded(key.to_vec()),
    }
}

impl StaticStage {
    /// A cursor at the first pair at or after (`Ascending`) or at or before (`Descending`)
    /// `start`; see [`StaticCursor`].
    pub fn cursor(&self, start: Bound<&[u8]>, direction: Direction) -> StaticCursor<'_> {
        let mut cursor = StaticCursor {
            stage: self,
            direction,
            seg: 0,
            block: 0,
            pair: 0,
            key: 0,
            current: None,
        };
        if self.segments.is_empty() {
            return cursor;
        }
        let ascending = direction == Direction::Ascending;
        let bound = normalize(start, self.config.mode, ascending);
        let (key, after_key) = match (&bound, ascending) {
            (Bound::Unbounded, true) => {
                cursor.enter(0, 0, true);
                return cursor;
            }
            (Bound::Unbounded, false) => {
                let s = self.segments.len() - 1;
                cursor.enter(s, self.segments[s].nblocks() - 1, false);
                return cursor;
            }
            (Bound::Included(k), true) | (Bound::Excluded(k), false) => (k, false),
            (Bound::Excluded(k), true) | (Bound::Included(k), false) => (k, true),
        };
        let target = Target {
            key: self.probe(key),
            tid: 0,
            after_key,
        };
        let Some(pos) = self.seek(&target) else {
            return cursor;
        };
        let npairs = pos.loaded.block.npairs();
        if ascending {
            if pos.pair < npairs {
                cursor.place(pos.seg, pos.block, pos.pair, pos.loaded);
            } else if let Some((s, b)) = self.next_block(pos.seg, pos.block) {
                cursor.enter(s, b, true);
            }
        } else if pos.pair > 0 {
            cursor.place(pos.seg, pos.block, pos.pair - 1, pos.loaded);
        } else if let Some((s, b)) = self.prev_block(pos.seg, pos.block) {
            cursor.enter(s, b, false);
        }
        cursor
    }
}

impl<'a> StaticCursor<'a> {
    /// Makes pair `pair` of the loaded block the next one.
    fn place(&mut self, seg: usize, block: usize, pair: usize, loaded: Loaded<'a>) {
        self.seg = seg;
        self.block = block;
        self.pair = pair;
        self.key = loaded.block.key_of_pair(&loaded.bytes, pair);
        self.current = Some(loaded);
    }

    /// Loads block `block` of segment `seg` and places the cursor at its first (`first`) or
    /// last pair. A malformed block ends the iteration (`check` reports it).
    fn enter(&mut self, seg: usize, block: usize, first: bool) {
        match self.stage.load(seg, block) {
            Some(loaded) => {
                let pair = if first { 0 } else { loaded.block.npairs() - 1 };
                self.place(seg, block, pair, loaded);
            }
            None => self.current = None,
        }
    }

    /// The next pair: clears `key` and fills it with the pair's key, and returns the tid;
    /// `None` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self, key: &mut Vec<u8>) -> Option<u64> {
        let l = self.current.as_ref()?;
        key.clear();
        l.block.write_key(&l.bytes, l.fence, self.key, key);
        let tid = l.block.tid(&l.bytes, self.pair);
        let npairs = l.block.npairs();
        match self.direction {
            Direction::Ascending => {
                let next_key_start = l.block.start(&l.bytes, self.key + 1);
                self.pair += 1;
                if self.pair == npairs {
                    match self.stage.next_block(self.seg, self.block) {
                        Some((s, b)) => self.enter(s, b, true),
                        None => self.current = None,
                    }
                } else if self.pair >= next_key_start {
                    self.key += 1;
                }
            }
            Direction::Descending => {
                let key_start = l.block.start(&l.bytes, self.key);
                if self.pair == 0 {
                    match self.stage.prev_block(self.seg, self.block) {
                        Some((s, b)) => self.enter(s, b, false),
                        None => self.current = None,
                    }
                } else {
                    self.pair -= 1;
                    if self.pair < key_start {
                        self.key -= 1;
                    }
                }
            }
        }
        Some(tid)
    }
}
