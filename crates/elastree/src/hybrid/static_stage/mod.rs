//! The static stage of the hybrid index: a compact, read-only B+-tree built from a sorted
//! stream (the paper's Compaction and Structural Reduction rules, optionally Compression).
//!
//! # Structure
//!
//! ```text
//! StaticStage
//!   directory: first key (and, non-unique, first tid) of every segment, contiguous
//!   segments:  Vec<Arc<Segment>>            segment i is routed to by directory key i
//!     Segment (see `segment`)
//!       fences: first key of every block, contiguous; block b is routed to by fence b
//!       data:   encoded blocks back to back  (see `block` for the encoding)
//! ```
//!
//! No child pointer is stored anywhere: a child's position is its index (the Structural
//! Reduction rule). Every buffer is allocated at its exact size and every segment is full
//! (`segment_entries` pairs) except the last one and at most one per `publish` boundary of
//! the merge that made it (the Compaction rule).
//!
//! A lookup binary-searches the directory, then the segment's fences, then the block's
//! packed keys in place: no block is decoded, except that a compressed stage
//! decompresses the one block (through the CLOCK cache).
//!
//! # Invariants (checked by [`StaticStage::check`])
//!
//! Pairs are strictly ascending by (key, tid) over the whole stage; a unique stage has
//! distinct keys; directory key `i` equals segment `i`'s first key and fence `b` equals
//! block `b`'s first key; `len` and `key_count` are the sums over the segments.

mod bits;
mod block;
mod build;
mod cache;
mod check;
mod cursor;
mod keys;
mod merge;
mod segment;

use std::ops::Deref;
use std::sync::Arc;

use crate::mem::MemoryUsage;
use crate::{Error, KeyLen};

use block::Block;
use cache::BlockCache;
use keys::{FenceBuilder, FenceKey, Fences, KeyMode, Probe, Target};
use segment::{Config, Segment, Stored};

pub use cursor::StaticCursor;

/// Pairs per segment by default. A segment is the unit of sharing between the stages that
/// a rolling merge publishes, so it bounds a merge's temporary memory (about
/// `publish_every` segments); 4096 pairs (a few tens of KiB) keeps that small while the
/// directory stays tiny (one key per 4096 pairs).
pub const SEGMENT_ENTRIES: usize = 4096;

/// Pairs per block by default. Measured at 1M unique 8-byte keys (tids a permutation):
/// 32 / 48 / 64 / 96 pairs cost 9.28 / 9.16 / 9.14 / 9.10 B/key for random keys and
/// 3.72 / 3.66 / 3.56 / 3.60 for sequential ones, while a lookup took about the same
/// instructions (callgrind: 983 / 991 / 995 per get for 32 / 48 / 64): 64 is the smallest
/// block at the memory floor. Larger blocks lengthen the in-block search and, compressed,
/// every decompression. At most 255 (the block header counts pairs in a byte).
pub const BLOCK_ENTRIES: usize = 64;

/// Whether blocks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Blocks are searched in place.
    None,
    /// Every block's encoding is LZ4-compressed (when that shrinks it); a lookup
    /// decompresses one block through a CLOCK cache of decoded blocks.
    Lz4,
}

/// Options of a static stage.
#[derive(Debug, Clone)]
pub struct StaticOptions {
    /// Unique keys (one tid each) or non-unique (a list of tids per key).
    pub unique: bool,
    /// Fixed or variable key length.
    pub key_len: KeyLen,
    /// Block compression.
    pub compression: Compression,
    /// Capacity of the decoded-block cache, in blocks (compressed stages only).
    pub cache_blocks: usize,
    /// Pairs per segment ([`SEGMENT_ENTRIES`]); small values let tests exercise many
    /// segments.
    #[doc(hidden)]
    pub segment_entries: usize,
    /// Pairs per block ([`BLOCK_ENTRIES`], 1 to 255).
    #[doc(hidden)]
    pub block_entries: usize,
}

impl StaticOptions {
    /// Uncompressed, a 1024-block cache for when compression is turned on, default segment
    /// and block sizes.
    pub fn new(unique: bool, key_len: KeyLen) -> Self {
        Self {
            unique,
            key_len,
            compression: Compression::None,
            cache_blocks: 1024,
            segment_entries: SEGMENT_ENTRIES,
            block_entries: BLOCK_ENTRIES,
        }
    }

    fn config(&self) -> Result<Config, Error> {
        if !(1..=255).contains(&self.block_entries) {
            return Err(Error::InvalidConfig(format!(
                "static stage block entries must be between 1 and 255, not {}",
                self.block_entries
            )));
        }
        if self.segment_entries == 0 || self.segment_entries > u32::MAX as usize / 2 {
            return Err(Error::InvalidConfig(format!(
                "static stage segment entries must be between 1 and {}, not {}",
                u32::MAX / 2,
                self.segment_entries
            )));
        }
        if self.key_len == KeyLen::Fixed(0) {
            return Err(Error::InvalidConfig(
                "static stage fixed key length must be at least 1".into(),
            ));
        }
        Ok(Config {
            mode: KeyMode::new(self.key_len),
            unique: self.unique,
            compression: self.compression,
            block_entries: self.block_entries,
            segment_entries: self.segment_entries,
        })
    }
}

/// A kind of update applied by [`StaticStage::merge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Insert or replace (unique), add the pair (non-unique).
    Put,
    /// Remove the key (unique) or the pair (non-unique).
    Delete,
}

/// A compact, read-only, ordered map from keys to tids; see the module documentation.
///
/// Immutable after build except for the decoded-block cache of a compressed stage, which is
/// internally synchronized: every method takes `&self` and may run from many threads.
#[derive(Debug)]
pub struct StaticStage {
    options: StaticOptions,
    config: Config,
    segments: Vec<Arc<Segment>>,
    /// First key of each segment.
    directory: Fences,
    /// First tid of each segment (non-unique only).
    directory_tids: Box<[u64]>,
    len: usize,
    key_count: usize,
    cache: Option<BlockCache>,
}

// Readers run from many threads: the stage must stay shareable.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<StaticStage>();
};

/// A block's encoding: in place in its segment, or decoded in the cache.
pub(crate) enum BlockBytes<'a> {
    Borrowed(&'a [u8]),
    Shared(Arc<[u8]>),
}

impl Deref for BlockBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            BlockBytes::Borrowed(b) => b,
            BlockBytes::Shared(b) => b,
        }
    }
}

/// A block ready to read: its bytes, parsed header and fence.
pub(crate) struct Loaded<'a> {
    pub(crate) bytes: BlockBytes<'a>,
    pub(crate) block: Block,
    pub(crate) fence: FenceKey<'a>,
}

/// Where a search ended: pair `pair` of block `block` of segment `seg` (`pair` may equal the
/// block's pair count: the position is then the next block's first pair).
pub(crate) struct Pos<'a> {
    pub(crate) seg: usize,
    pub(crate) block: usize,
    pub(crate) pair: usize,
    /// Whether the pair at the position has the target's key.
    pub(crate) matched: bool,
    pub(crate) loaded: Loaded<'a>,
}

impl StaticStage {
    /// A stage without pairs.
    pub fn empty(options: StaticOptions) -> Self {
        let config = options.config().unwrap_or(Config {
            mode: KeyMode::new(options.key_len),
            unique: options.unique,
            compression: options.compression,
            block_entries: BLOCK_ENTRIES,
            segment_entries: SEGMENT_ENTRIES,
        });
        Self::from_segments(options, config, Vec::new())
    }

    /// Builds a stage from `pairs`, strictly ascending by (key, tid) (unique: keys strictly
    /// ascending). Returns [`Error::InvalidConfig`] if the input is out of order, duplicated
    /// or has a fixed-length key of the wrong length, or if the options are invalid.
    pub fn build(
        options: StaticOptions,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Self, Error> {
        let config = options.config()?;
        let mut builder = build::StageBuilder::new(config);
        for (key, tid) in pairs {
            builder.push_checked(&key, tid)?;
        }
        Ok(Self::from_segments(options, config, builder.finish()))
    }

    /// Another handle on the same pairs: a stage sharing this one's segments (nothing is
    /// copied but the directory), for merging while this one stays readable.
    pub fn share(&self) -> Arc<StaticStage> {
        Arc::new(Self::from_segments(
            self.options.clone(),
            self.config,
            self.segments.clone(),
        ))
    }

    /// The stage made of `segments` (in order, covering ascending disjoint pair ranges).
    fn from_segments(options: StaticOptions, config: Config, segments: Vec<Arc<Segment>>) -> Self {
        let mut directory = FenceBuilder::new(config.mode);
        let mut directory_tids = Vec::with_capacity(if config.unique { 0 } else { segments.len() });
        let (mut len, mut key_count) = (0usize, 0usize);
        for (i, s) in segments.iter().enumerate() {
            directory.push_fence(s.fence(0));
            if !config.unique {
                directory_tids.push(s.fence_tid(0));
            }
            len += s.pairs as usize;
            key_count += s.keys as usize;
            if i > 0 && !config.unique {
                let mut first = Vec::new();
                s.fence(0).write(config.mode, &mut first);
                if *first == *segments[i - 1].last_key {
                    key_count -= 1;
                }
            }
        }
        let cache =
            (config.compression == Compression::Lz4).then(|| BlockCache::new(options.cache_blocks));
        Self {
            options,
            config,
            segments,
            directory: directory.finish(),
            directory_tids: directory_tids.into_boxed_slice(),
            len,
            key_count,
            cache,
        }
    }

    /// The options the stage was built with.
    pub fn options(&self) -> &StaticOptions {
        &self.options
    }

    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The number of distinct keys.
    pub fn key_count(&self) -> usize {
        self.key_count
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `key` can be in the stage at all (fixed-length stages hold one length).
    #[inline]
    fn key_fits(&self, key: &[u8]) -> bool {
        self.config.mode.fixed_len().is_none_or(|n| n == key.len())
    }

    /// Block `b` of segment `s`, ready to read; `None` if it is malformed.
    #[inline(always)]
    pub(crate) fn load(&self, s: usize, b: usize) -> Option<Loaded<'_>> {
        let segment = &self.segments[s];
        let bytes = match segment.stored(self.config.compression, b)? {
            Stored::Plain(bytes) => {
                prefetch(bytes);
                BlockBytes::Borrowed(bytes)
            }
            Stored::Lz4(len, compressed) => {
                let cache = self.cache.as_ref()?;
                BlockBytes::Shared(cache.get((segment.id, b as u32), || {
                    segment::decompress(len, compressed)
                })?)
            }
        };
        let block = segment::parse_block(&self.config, segment, b, &bytes)?;
        Some(Loaded {
            bytes,
            block,
            fence: segment.fence(b),
        })
    }

    /// How fences equal to the target key count in [`Fences::count_before`]: all before it
    /// in a unique stage (one pair per key, so such a fence starts the child holding the
    /// key) or for a search for the next key; otherwise by their tids.
    #[inline]
    fn equal_tids<'t>(&self, target: &Target<'_>, tids: &'t [u64]) -> Option<(&'t [u64], u64)> {
        (!self.config.unique && !target.after_key).then_some((tids, target.tid))
    }

    /// The first pair not before `target`; `None` for an empty stage or a malformed block.
    #[inline(always)]
    pub(crate) fn seek(&self, target: &Target<'_>) -> Option<Pos<'_>> {
        if self.segments.is_empty() {
            return None;
        }
        let s = self
            .directory
            .count_before(target.key, self.equal_tids(target, &self.directory_tids))
            .saturating_sub(1);
        let segment = &self.segments[s];
        let b = segment
            .fences
            .count_before(target.key, self.equal_tids(target, &segment.fence_tids))
            .saturating_sub(1);
        let loaded = self.load(s, b)?;
        let (pair, mut matched) = loaded.block.seek(&loaded.bytes, loaded.fence, target);
        if pair == loaded.block.npairs() && !target.after_key {
            // The answer is the next block's first pair: its fence.
            if let Some((ns, nb)) = self.next_block(s, b) {
                matched = self.segments[ns].fence(nb).cmp_probe(target.key).is_eq();
            }
        }
        Some(Pos {
            seg: s,
            block: b,
            pair,
            matched,
            loaded,
        })
    }

    /// The block after block `b` of segment `s`.
    #[inline]
    pub(crate) fn next_block(&self, s: usize, b: usize) -> Option<(usize, usize)> {
        if b + 1 < self.segments[s].nblocks() {
            Some((s, b + 1))
        } else if s + 1 < self.segments.len() {
            Some((s + 1, 0))
        } else {
            None
        }
    }

    /// The block before block `b` of segment `s`.
    #[inline]
    pub(crate) fn prev_block(&self, s: usize, b: usize) -> Option<(usize, usize)> {
        if b > 0 {
            Some((s, b - 1))
        } else if s > 0 {
            Some((s - 1, self.segments[s - 1].nblocks() - 1))
        } else {
            None
        }
    }

    /// Unique stage: the key's tid. Non-unique: the key's smallest tid.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        if !self.key_fits(key) {
            return None;
        }
        let target = Target {
            key: self.config.mode.probe(key),
            tid: 0,
            after_key: false,
        };
        let pos = self.seek(&target)?;
        if !pos.matched {
            return None;
        }
        if pos.pair < pos.loaded.block.npairs() {
            Some(pos.loaded.block.tid(&pos.loaded.bytes, pos.pair))
        } else {
            let (s, b) = self.next_block(pos.seg, pos.block)?;
            Some(self.segments[s].fence_tid(b))
        }
    }

    /// Appends every tid of `key` to `out`, ascending.
    pub fn get_all(&self, key: &[u8], out: &mut Vec<u64>) {
        if !self.key_fits(key) {
            return;
        }
        let probe = self.config.mode.probe(key);
        let target = Target {
            key: probe,
            tid: 0,
            after_key: false,
        };
        let Some(pos) = self.seek(&target) else {
            return;
        };
        if !pos.matched {
            return;
        }
        let (mut s, mut b, mut p) = (pos.seg, pos.block, pos.pair);
        let mut loaded = Some(pos.loaded);
        loop {
            let l = match loaded.take() {
                Some(l) => l,
                None => match self.load(s, b) {
                    Some(l) => l,
                    None => return,
                },
            };
            if p < l.block.npairs() {
                let j = l.block.key_of_pair(&l.bytes, p);
                let end = l.block.start(&l.bytes, j + 1);
                out.extend((p..end).map(|q| l.block.tid(&l.bytes, q)));
                if end < l.block.npairs() || self.config.unique {
                    return;
                }
            }
            // The key may continue in the next block.
            match self.next_block(s, b) {
                Some((ns, nb)) if self.segments[ns].fence(nb).cmp_probe(probe).is_eq() => {
                    (s, b, p) = (ns, nb, 0);
                }
                _ => return,
            }
        }
    }

    /// Whether the pair (`key`, `tid`) is present.
    pub fn contains_pair(&self, key: &[u8], tid: u64) -> bool {
        if self.config.unique {
            return self.get(key) == Some(tid);
        }
        if !self.key_fits(key) {
            return false;
        }
        let target = Target {
            key: self.config.mode.probe(key),
            tid,
            after_key: false,
        };
        let Some(pos) = self.seek(&target) else {
            return false;
        };
        if !pos.matched {
            return false;
        }
        if pos.pair < pos.loaded.block.npairs() {
            pos.loaded.block.tid(&pos.loaded.bytes, pos.pair) == tid
        } else {
            self.next_block(pos.seg, pos.block)
                .is_some_and(|(s, b)| self.segments[s].fence_tid(b) == tid)
        }
    }

    /// The bytes held: `inner` = directory, block fences and block offsets; `leaves` =
    /// segments and their blocks; `aux` = the stage object, its segment list and the cache.
    /// Segments shared with other stages are counted in each.
    pub fn memory(&self) -> MemoryUsage {
        let mut usage = MemoryUsage {
            inner: self.directory.heap_bytes() + std::mem::size_of_val(&*self.directory_tids),
            leaves: 0,
            aux: std::mem::size_of::<Self>()
                + self.segments.capacity() * std::mem::size_of::<Arc<Segment>>()
                + self.cache.as_ref().map_or(0, BlockCache::memory),
        };
        for s in &self.segments {
            usage.inner += s.inner_bytes();
            usage.leaves += s.leaf_bytes();
        }
        usage
    }

    /// The probe of a key of the stage's representation.
    #[inline]
    pub(crate) fn probe<'k>(&self, key: &'k [u8]) -> Probe<'k> {
        self.config.mode.probe(key)
    }
}

/// Asks the CPU to start loading every cache line of `bytes` at once. A block search
/// touches its header, a handful of lines of packed keys (binary search) and a line of tids,
/// each depending on the one before; issued together the misses overlap instead of
/// queueing (measured: about 10% off an uncompressed lookup at 1M random 8-byte keys, with
/// the same instruction count).
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let end = bytes.len().min(16 * LINE);
        let mut offset = 0;
        while offset < end {
            // SAFETY: a prefetch is only a hint: it never faults and has no effect on the
            // program's state; the address is inside `bytes` anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(offset).cast()) };
            offset += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
