//! Sorted streams over the layers of a hybrid index and their merge by precedence.
//!
//! Scans and merges both read several layers at once — the active dynamic stage, frozen
//! dynamic stages, the static stage — each as a stream of entries in key order (pairs in
//! (key, tid) order for a non-unique index). [`Layered`] merges them: for each key (or pair)
//! the entry of the highest layer wins and the others are skipped, so a dead entry hides the
//! key below it and a newer tid shadows an older one.

use std::ops::Bound;

use super::dynamic::{with_key, Codec, Dynamic, LIVE, TOMBSTONE};
use super::static_stage::StaticCursor;
use crate::Direction;

/// An entry of a stream, borrowed from it.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'s> {
    /// The user key.
    pub key: &'s [u8],
    /// The tid.
    pub tid: u64,
    /// `false` for a tombstone (unique) or a deleted pair (non-unique).
    pub live: bool,
}

/// The current entry of the static stream, owned.
#[derive(Debug, Default, Clone)]
struct Head {
    /// The user key.
    pub key: Vec<u8>,
    /// The tid.
    pub tid: u64,
    /// `false` for a tombstone (unique) or a deleted pair (non-unique).
    pub live: bool,
}

/// One layer as a sorted stream.
pub enum Stream<'a> {
    /// A dynamic stage, read in batches.
    Dynamic(DynamicStream<'a>),
    /// The static stage.
    Static(StaticStream<'a>),
}

impl Stream<'_> {
    #[inline]
    fn head(&self) -> Option<Entry<'_>> {
        match self {
            Stream::Dynamic(s) => s.head(),
            Stream::Static(s) => s.head.as_ref().map(|h| Entry {
                key: &h.key,
                tid: h.tid,
                live: h.live,
            }),
        }
    }

    fn advance(&mut self) {
        match self {
            Stream::Dynamic(s) => s.advance(),
            Stream::Static(s) => s.advance(),
        }
    }
}

/// The static stage's cursor as a [`Stream`]; every entry is live.
pub struct StaticStream<'a> {
    cursor: StaticCursor<'a>,
    head: Option<Head>,
}

impl<'a> StaticStream<'a> {
    /// Starts at the cursor's first pair.
    pub fn new(cursor: StaticCursor<'a>) -> Self {
        let mut stream = Self {
            cursor,
            head: Some(Head::default()),
        };
        stream.advance();
        stream
    }

    fn advance(&mut self) {
        let Some(head) = self.head.as_mut() else {
            return;
        };
        match self.cursor.next(&mut head.key) {
            Some(tid) => {
                head.tid = tid;
                head.live = true;
            }
            None => self.head = None,
        }
    }
}

/// A dynamic stage read as a [`Stream`] in batches of tree entries: the first batch small,
/// for short scans, and each next one twice as large up to `MAX_BATCH`. Between batches
/// the stream resumes after the last tree key it saw, so concurrent writes never make it
/// repeat or go backwards.
pub struct DynamicStream<'a> {
    stage: &'a Dynamic,
    codec: Codec,
    direction: Direction,
    /// The far end of the range in tree keys, and its shape.
    end: (Vec<u8>, Bound<()>),
    /// Where the next batch starts: the range's near end, then the last tree key seen.
    from: (Vec<u8>, Bound<()>),
    /// Decoded entries of the current batch: user keys concatenated in `keys`.
    keys: Vec<u8>,
    entries: Vec<(usize, usize, u64, bool)>,
    pos: usize,
    batch: usize,
    exhausted: bool,
}

/// Largest batch a [`DynamicStream`] reads at once.
const MAX_BATCH: usize = 512;

impl<'a> DynamicStream<'a> {
    /// A stream over the entries of `stage` between the user-key bounds, in `direction`.
    pub fn new(
        stage: &'a Dynamic,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        first_batch: usize,
    ) -> Self {
        let codec = stage.codec();
        let (mut low, mut high) = (Vec::new(), Vec::new());
        let low_shape = codec.bound(lower, true, &mut low);
        let high_shape = codec.bound(upper, false, &mut high);
        let (from, end) = match direction {
            Direction::Ascending => ((low, low_shape), (high, high_shape)),
            Direction::Descending => ((high, high_shape), (low, low_shape)),
        };
        let mut stream = Self {
            stage,
            codec,
            direction,
            end,
            from,
            keys: Vec::new(),
            entries: Vec::new(),
            pos: 0,
            batch: first_batch.clamp(1, MAX_BATCH),
            exhausted: false,
        };
        stream.refill();
        stream
    }

    #[inline]
    fn head(&self) -> Option<Entry<'_>> {
        let &(start, end, tid, live) = self.entries.get(self.pos)?;
        Some(Entry {
            key: &self.keys[start..end],
            tid,
            live,
        })
    }

    fn refill(&mut self) {
        self.keys.clear();
        self.entries.clear();
        self.pos = 0;
        if self.exhausted {
            return;
        }
        let (from, end) = (
            with_key(self.from.1, &self.from.0),
            with_key(self.end.1, &self.end.0),
        );
        let (lower, upper) = match self.direction {
            Direction::Ascending => (from, end),
            Direction::Descending => (end, from),
        };
        let codec = self.codec;
        let (keys, entries) = (&mut self.keys, &mut self.entries);
        entries.reserve(self.batch);
        keys.reserve(self.batch * 16);
        let seen = self.stage.scan_tree(
            lower,
            upper,
            self.direction,
            self.batch,
            &mut |tree_key, value| {
                let start = keys.len();
                let (tid, live) = match codec {
                    Codec::Unique => {
                        keys.extend_from_slice(tree_key);
                        (value, value != TOMBSTONE)
                    }
                    _ => (codec.decode_pair(tree_key, keys), value == LIVE),
                };
                entries.push((start, keys.len(), tid, live));
            },
        );
        if seen < self.batch {
            self.exhausted = true;
        } else {
            // The next batch starts after the last tree key seen.
            let &(start, end, tid, _) = self.entries.last().expect("a full batch");
            let mut last = std::mem::take(&mut self.from.0);
            codec.encode(&self.keys[start..end], tid, &mut last);
            self.from = (last, Bound::Excluded(()));
            self.batch = (self.batch * 2).min(MAX_BATCH);
        }
    }

    #[inline]
    fn advance(&mut self) {
        self.pos += 1;
        if self.pos >= self.entries.len() {
            self.refill()
        }
    }
}

/// Streams merged by precedence: `streams[0]` is the highest layer.
pub struct Layered<'a> {
    streams: Vec<Stream<'a>>,
    direction: Direction,
    /// Whether entries are identified by key alone (unique) or by (key, tid).
    unique: bool,
    /// Streams positioned on the entry last returned (bit i: stream i), advanced at the
    /// next call so the returned entry can borrow from its stream.
    pending: u64,
}

impl<'a> Layered<'a> {
    /// Merges `streams`, highest layer first (at most 64).
    pub fn new(streams: Vec<Stream<'a>>, direction: Direction, unique: bool) -> Self {
        assert!(streams.len() <= 64, "at most 64 layers");
        Self {
            streams,
            direction,
            unique,
            pending: 0,
        }
    }

    /// The next winning entry (live or dead), or `None` at the end of every stream.
    pub fn next_entry(&mut self) -> Option<Entry<'_>> {
        while self.pending != 0 {
            let i = self.pending.trailing_zeros() as usize;
            self.pending &= self.pending - 1;
            self.streams[i].advance();
        }
        // Pick the smallest identity (largest when descending); among equals the highest
        // layer, which comes first. Remember every stream on the winning identity.
        let mut best: Option<(usize, Entry<'_>)> = None;
        let mut same = 0u64;
        for (i, stream) in self.streams.iter().enumerate() {
            let Some(head) = stream.head() else { continue };
            let Some((_, current)) = best else {
                best = Some((i, head));
                same = 1 << i;
                continue;
            };
            let order = if self.unique {
                head.key.cmp(current.key)
            } else {
                (head.key, head.tid).cmp(&(current.key, current.tid))
            };
            let order = match self.direction {
                Direction::Ascending => order,
                Direction::Descending => order.reverse(),
            };
            match order {
                std::cmp::Ordering::Less => {
                    best = Some((i, head));
                    same = 1 << i;
                }
                std::cmp::Ordering::Equal => same |= 1 << i,
                std::cmp::Ordering::Greater => {}
            }
        }
        let (_, winner) = best?;
        self.pending = same;
        Some(winner)
    }
}

/// The common case of [`Layered`] without its generality: at most one dynamic stage over
/// the static stage, merged with two comparisons and no per-stream dispatch.
pub struct PairMerge<'a> {
    dynamic: Option<DynamicStream<'a>>,
    cursor: StaticCursor<'a>,
    /// The static stage's current pair (`tid` is `None` at its end).
    key: Vec<u8>,
    tid: Option<u64>,
    direction: Direction,
    unique: bool,
    /// Which side the entry last returned came from (bit 0: dynamic, bit 1: static),
    /// advanced at the next call.
    pending: u8,
}

impl<'a> PairMerge<'a> {
    /// Merges `dynamic` (if any) over the static stage's `cursor`.
    pub fn new(
        dynamic: Option<DynamicStream<'a>>,
        mut cursor: StaticCursor<'a>,
        direction: Direction,
        unique: bool,
    ) -> Self {
        let mut key = Vec::with_capacity(32);
        let tid = cursor.next(&mut key);
        Self {
            dynamic,
            cursor,
            key,
            tid,
            direction,
            unique,
            pending: 0,
        }
    }

    /// The next winning entry (live or dead), or `None` at the end of both.
    #[inline]
    pub fn next_entry(&mut self) -> Option<Entry<'_>> {
        if self.pending & 1 != 0 {
            if let Some(d) = self.dynamic.as_mut() {
                d.advance();
            }
        }
        if self.pending & 2 != 0 {
            self.tid = self.cursor.next(&mut self.key);
        }
        let dynamic = self.dynamic.as_ref().and_then(DynamicStream::head);
        match (self.tid, dynamic) {
            (None, None) => {
                self.pending = 0;
                None
            }
            (Some(tid), None) => {
                self.pending = 2;
                Some(Entry {
                    key: &self.key,
                    tid,
                    live: true,
                })
            }
            (None, Some(d)) => {
                self.pending = 1;
                Some(d)
            }
            (Some(tid), Some(d)) => {
                let order = if self.unique {
                    self.key.as_slice().cmp(d.key)
                } else {
                    (self.key.as_slice(), tid).cmp(&(d.key, d.tid))
                };
                let order = match self.direction {
                    Direction::Ascending => order,
                    Direction::Descending => order.reverse(),
                };
                match order {
                    std::cmp::Ordering::Less => {
                        self.pending = 2;
                        Some(Entry {
                            key: &self.key,
                            tid,
                            live: true,
                        })
                    }
                    // The dynamic stage is the higher layer: its entry wins, both move on.
                    std::cmp::Ordering::Equal => {
                        self.pending = 3;
                        Some(d)
                    }
                    std::cmp::Ordering::Greater => {
                        self.pending = 1;
                        Some(d)
                    }
                }
            }
        }
    }
}

/// The merged layers of a scan: the two-layer fast path or the general merge.
// One lives on the stack per scan; boxing the larger variant would allocate per scan.
#[allow(clippy::large_enum_variant)]
pub enum Merged<'a> {
    /// At most one dynamic stage.
    Pair(PairMerge<'a>),
    /// Any number of layers.
    Layers(Layered<'a>),
}

impl Merged<'_> {
    /// The next winning entry (live or dead).
    #[inline]
    pub fn next_entry(&mut self) -> Option<Entry<'_>> {
        match self {
            Merged::Pair(m) => m.next_entry(),
            Merged::Layers(m) => m.next_entry(),
        }
    }
}
