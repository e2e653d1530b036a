//! Segments: the unit of allocation, sharing and merging of a static stage.
//!
//! # Layout
//!
//! A segment holds up to `segment_entries` pairs in blocks of `block_entries` pairs (the
//! last block may be shorter):
//!
//! * `fences`: the first key of every block, contiguous (block `b`'s fence is key `b`);
//!   `fence_tids[b]` is block `b`'s first tid (non-unique stages only, empty otherwise).
//! * `offsets`: `nblocks + 1` byte offsets into `data`; block `b` is stored in
//!   `data[offsets[b]..offsets[b + 1]]`.
//! * `data`: the stored blocks back to back. Uncompressed stage: each is the block encoding
//!   of [`super::block`]. Compressed stage: a tag byte, then either (tag 0) the encoding as
//!   is, when LZ4 would not shrink it, or (tag 1) the encoding's length as a varint followed
//!   by its LZ4 block-format compression.
//! * `last_key`/`last_tid`: the segment's last pair, so that a stage assembled from shared
//!   segments can count keys that straddle a segment boundary.
//!
//! # Invariants
//!
//! Pairs are strictly ascending by (key, tid) across the segment's blocks; `pairs` is the
//! sum of the blocks' pairs; `keys` counts the distinct keys of the segment; every buffer is
//! allocated at its exact size (the Compaction rule). A segment is immutable and shared
//! (`Arc`) by every stage that contains it.

use std::sync::atomic::{AtomicU64, Ordering};

use super::bits;
use super::block::{self, Block, Pairs};
use super::keys::{FenceBuilder, FenceKey, Fences, KeyMode};
use super::Compression;

/// Segment ids: unique for the process, so the block cache never confuses a freed
/// segment's blocks with a new one's.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Tag of a stored block kept as is (compressed stage).
const TAG_RAW: u8 = 0;
/// Tag of an LZ4-compressed stored block.
const TAG_LZ4: u8 = 1;

/// The configuration every segment of a stage shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) mode: KeyMode,
    pub(crate) unique: bool,
    pub(crate) compression: Compression,
    pub(crate) block_entries: usize,
    pub(crate) segment_entries: usize,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) id: u64,
    pub(crate) pairs: u32,
    pub(crate) keys: u32,
    pub(crate) fences: Fences,
    pub(crate) fence_tids: Box<[u64]>,
    pub(crate) offsets: Box<[u32]>,
    pub(crate) data: Box<[u8]>,
    pub(crate) last_key: Box<[u8]>,
    pub(crate) last_tid: u64,
}

/// A stored block as read from a segment.
pub(crate) enum Stored<'a> {
    /// The block encoding, in place.
    Plain(&'a [u8]),
    /// LZ4-compressed: the encoding's length and the compressed bytes.
    Lz4(usize, &'a [u8]),
}

impl Segment {
    pub(crate) fn nblocks(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Block `b` as stored; `None` if its bytes are malformed.
    #[inline]
    pub(crate) fn stored(&self, compression: Compression, b: usize) -> Option<Stored<'_>> {
        let bytes = self
            .data
            .get(*self.offsets.get(b)? as usize..*self.offsets.get(b + 1)? as usize)?;
        match compression {
            Compression::None => Some(Stored::Plain(bytes)),
            Compression::Lz4 => match *bytes.first()? {
                TAG_RAW => Some(Stored::Plain(&bytes[1..])),
                TAG_LZ4 => {
                    let mut at = 1;
                    let len = bits::get_varint(bytes, &mut at)? as usize;
                    Some(Stored::Lz4(len, &bytes[at..]))
                }
                _ => None,
            },
        }
    }

    /// The fence (first key) of block `b`.
    #[inline]
    pub(crate) fn fence(&self, b: usize) -> FenceKey<'_> {
        self.fences.key(b)
    }

    /// The first tid of block `b` (0 in a unique stage, where it is not stored).
    #[inline]
    pub(crate) fn fence_tid(&self, b: usize) -> u64 {
        self.fence_tids.get(b).copied().unwrap_or(0)
    }

    /// Heap bytes of the segment's routing part (fences and block offsets).
    pub(crate) fn inner_bytes(&self) -> usize {
        self.fences.heap_bytes()
            + std::mem::size_of_val(&*self.fence_tids)
            + std::mem::size_of_val(&*self.offsets)
    }

    /// Bytes of the segment's leaf part: its `Arc` allocation, the blocks and the last key.
    pub(crate) fn leaf_bytes(&self) -> usize {
        crate::mem::arc_bytes::<Segment>() + self.data.len() + self.last_key.len()
    }
}

/// Decodes a stored block into its encoding, for the cache.
pub(crate) fn decompress(len: usize, compressed: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    match lz4_flex::block::decompress_into(compressed, &mut out) {
        Ok(n) if n == len => Some(out),
        _ => None,
    }
}

/// Accumulates up to `segment_entries` pairs and encodes them as a [`Segment`].
#[derive(Debug)]
pub(crate) struct SegmentWriter {
    pub(crate) config: Config,
    pub(crate) pending: Pairs,
    fences: FenceBuilder,
    raw: Vec<u8>,
    packed: Vec<u8>,
}

impl SegmentWriter {
    pub(crate) fn new(config: Config) -> Self {
        Self {
            config,
            pending: Pairs::default(),
            fences: FenceBuilder::new(config.mode),
            raw: Vec::new(),
            packed: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.pending.npairs()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.pending.npairs() >= self.config.segment_entries
    }

    /// Appends a pair, which must follow the last one in (key, tid) order.
    #[inline]
    pub(crate) fn push(&mut self, key: &[u8], tid: u64) {
        let same = !self.config.unique && self.pending.last_key() == Some(key);
        self.pending.push(key, tid, same);
    }

    /// Encodes the pending pairs (at least one) as a segment and empties the writer.
    pub(crate) fn finish(&mut self) -> Segment {
        let c = self.config;
        let p = &self.pending;
        let n = p.npairs();
        assert!(n > 0, "a segment holds at least one pair");
        let nblocks = n.div_ceil(c.block_entries);
        let mut offsets = Vec::with_capacity(nblocks + 1);
        let mut fence_tids = Vec::with_capacity(if c.unique { 0 } else { nblocks });
        self.packed.clear();
        let mut ka = 0;
        for b in 0..nblocks {
            let pa = b * c.block_entries;
            let pb = (pa + c.block_entries).min(n);
            while ka + 1 < p.nkeys() && p.key_starts[ka + 1] as usize <= pa {
                ka += 1;
            }
            self.fences.push(p.key(ka));
            if !c.unique {
                fence_tids.push(p.tids[pa]);
            }
            offsets.push(self.packed.len() as u32);
            match c.compression {
                Compression::None => {
                    block::encode(p, c.mode, c.unique, ka, pa, pb, &mut self.packed);
                }
                Compression::Lz4 => {
                    self.raw.clear();
                    block::encode(p, c.mode, c.unique, ka, pa, pb, &mut self.raw);
                    let bound = lz4_flex::block::get_maximum_output_size(self.raw.len());
                    let at = self.packed.len();
                    self.packed.push(TAG_LZ4);
                    bits::put_varint(&mut self.packed, self.raw.len() as u64);
                    let header = self.packed.len();
                    self.packed.resize(header + bound, 0);
                    let written =
                        lz4_flex::block::compress_into(&self.raw, &mut self.packed[header..])
                            .expect("the output holds the maximum compressed size");
                    if header - at + written < 1 + self.raw.len() {
                        self.packed.truncate(header + written);
                    } else {
                        self.packed.truncate(at);
                        self.packed.push(TAG_RAW);
                        self.packed.extend_from_slice(&self.raw);
                    }
                }
            }
        }
        offsets.push(self.packed.len() as u32);
        let last = p.nkeys() - 1;
        let segment = Segment {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            pairs: n as u32,
            keys: p.nkeys() as u32,
            fences: self.fences.finish(),
            fence_tids: fence_tids.into_boxed_slice(),
            offsets: offsets.into_boxed_slice(),
            data: self.packed.as_slice().into(),
            last_key: p.key(last).into(),
            last_tid: p.tids[n - 1],
        };
        self.pending.clear();
        segment
    }
}

/// Parses block `b` of `segment` from its encoding `buf`.
#[inline]
pub(crate) fn parse_block(
    config: &Config,
    segment: &Segment,
    b: usize,
    buf: &[u8],
) -> Option<Block> {
    let fence_len = match config.mode {
        KeyMode::Int(_) => 0,
        _ => match segment.fence(b) {
            FenceKey::Bytes(f) => f.len(),
            FenceKey::Int(_) => 0,
        },
    };
    // The stored bytes hold exactly one encoding.
    Block::parse(buf, config.mode, config.unique, fence_len)
        .filter(|block| block.end() == buf.len())
}
