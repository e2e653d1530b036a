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

/// The current entry of a stream.
#[derive(Debug, Default, Clone)]
pub struct Head {
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
    fn head(&self) -> Option<&Head> {
        match self {
            Stream::Dynamic(s) => s.head(),
            Stream::Static(s) => s.head.as_ref(),
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
/// for short scans, and each next one twice as large up to [`MAX_BATCH`]. Between batches
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
    head: Head,
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
            head: Head::default(),
            batch: first_batch.clamp(1, MAX_BATCH),
            exhausted: false,
        };
        stream.refill();
        stream
    }

    fn head(&self) -> Option<&Head> {
        (self.pos < self.entries.len()).then_some(&self.head)
    }

    fn load_head(&mut self) {
        if let Some(&(start, end, tid, live)) = self.entries.get(self.pos) {
            self.head.key.clear();
            self.head.key.extend_from_slice(&self.keys[start..end]);
            self.head.tid = tid;
            self.head.live = live;
        }
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
        let mut last = Vec::new();
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
                last.clear();
                last.extend_from_slice(tree_key);
            },
        );
        if seen < self.batch {
            self.exhausted = true;
        } else {
            self.from = (last, Bound::Excluded(()));
            self.batch = (self.batch * 2).min(MAX_BATCH);
        }
        self.load_head();
    }

    fn advance(&mut self) {
        self.pos += 1;
        if self.pos >= self.entries.len() {
            self.refill()
        } else {
            self.load_head();
        }
    }
}

/// Streams merged by precedence: `streams[0]` is the highest layer.
pub struct Layered<'a> {
    streams: Vec<Stream<'a>>,
    direction: Direction,
    /// Whether entries are identified by key alone (unique) or by (key, tid).
    unique: bool,
    out: Head,
}

impl<'a> Layered<'a> {
    /// Merges `streams`, highest layer first.
    pub fn new(streams: Vec<Stream<'a>>, direction: Direction, unique: bool) -> Self {
        Self {
            streams,
            direction,
            unique,
            out: Head::default(),
        }
    }

    /// The next winning entry (live or dead), or `None` at the end of every stream.
    pub fn next_entry(&mut self) -> Option<&Head> {
        // Pick the smallest identity (largest when descending); among equals the highest
        // layer, which comes first.
        let mut best: Option<usize> = None;
        for (i, stream) in self.streams.iter().enumerate() {
            let Some(head) = stream.head() else { continue };
            let better = match best {
                None => true,
                Some(b) => {
                    let current = self.streams[b].head().expect("best has a head");
                    let order = if self.unique {
                        head.key.cmp(&current.key)
                    } else {
                        (&head.key, head.tid).cmp(&(&current.key, current.tid))
                    };
                    match self.direction {
                        Direction::Ascending => order.is_lt(),
                        Direction::Descending => order.is_gt(),
                    }
                }
            };
            if better {
                best = Some(i);
            }
        }
        let best = best?;
        let winner = self.streams[best].head().expect("best has a head");
        self.out.key.clear();
        self.out.key.extend_from_slice(&winner.key);
        self.out.tid = winner.tid;
        self.out.live = winner.live;
        // Advance every stream positioned on the same identity.
        for stream in &mut self.streams {
            let same = stream
                .head()
                .is_some_and(|h| h.key == self.out.key && (self.unique || h.tid == self.out.tid));
            if same {
                stream.advance();
            }
        }
        Some(&self.out)
    }
}
