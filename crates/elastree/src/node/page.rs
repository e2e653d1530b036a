//! The optimized page for variable-length keys (the Bw-tree paper's page organization,
//! sections III and IV): the keys' common prefix factored out, a fixed-width 4-byte mid-key
//! vector compared as big-endian integers, and the rest of each key in a suffix bin.
//!
//! # Layout
//!
//! One allocation per node, sized by the node's capacity `cap` (entries) and bin size `bin`
//! (bytes), both fixed per level by [`PageConfig`]:
//!
//! ```text
//! bytes 0..24    NodeHeader (lock, count, level, format, link)
//! bytes 24..32   meta: prefix offset | prefix length | bin top | bin live   (4 x u16)
//! then           mids:     cap x u32   the 4 key bytes after the prefix, encoded (below)
//!                suffixes: cap x u32   suffix offset in the bin (high 16) | length (low 16)
//!                values:   cap x u64   tid (leaf) or child pointer (inner)
//!                tids:     cap x u64   non-unique trees only: the tid part of the key
//!                bin:      bin bytes   the prefix and the suffixes, handed out from the end
//! ```
//!
//! Everything a search touches first (the lock, the count, the prefix's place and the first
//! mid-keys) lies in the node's first 64 bytes; mid-keys, suffix locations and values are
//! separate vectors, so a search reads only the mid-keys until it needs more.
//!
//! # Keys
//!
//! Every key on the page starts with the page prefix: a common prefix of the keys actually on
//! the page (not of the key space the page covers), stored once in the bin. The *remainder*
//! of a key after the prefix is split into its mid-key and its suffix:
//!
//! * a remainder of `n < 4` bytes: its bytes, zero-padded to three, then `n` in the fourth
//!   byte; no suffix;
//! * a remainder of 4 bytes or more whose fourth byte is above 3: its first four bytes; the
//!   suffix is the rest;
//! * otherwise: its first three bytes, then 3; the suffix is the rest from the fourth byte on.
//!
//! So the mid-keys compared as big-endian `u32`s order keys as their bytes do, a shorter key
//! first, and two keys tie on their mid-keys only if their suffixes (compared as byte strings)
//! decide. Non-unique trees compare the tid after the key.
//!
//! Invariants (when no writer holds the lock): `count <= cap`; entries `0..count` strictly
//! ascending by (key, tid); every key starts with the prefix and its mid-key and suffix are
//! its remainder's encoding; every suffix and the prefix lie in `bin - top .. bin`; `live` is
//! the prefix length plus the live suffixes' lengths. A removed entry's suffix bytes stay
//! dead until an insert that lacks contiguous room compacts the bin. An insert whose key does
//! not start with the prefix rebuilds the page with the shorter common prefix; a split
//! rebuilds both halves, so each gets the longest prefix of its own keys.
//!
//! # Concurrency
//!
//! Every field is an atomic read with relaxed loads; readers clamp every offset and length
//! they derive from the page, so a torn read gives a wrong answer that the version check
//! rejects, never an out-of-bounds access.

use std::alloc::Layout;
use std::cmp::Ordering as CmpOrdering;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::bytes::{words_for, WordBytes};
use super::slotted::{VarKey, VarProbe};
use super::{NodeHeader, NodeRepr, SearchResult};

/// Bytes of the node header.
const HEADER_BYTES: usize = std::mem::size_of::<NodeHeader>();
/// Bytes before the mid-key vector: the node header and the meta word.
const FIXED_BYTES: usize = HEADER_BYTES + 8;
const _: () = assert!(HEADER_BYTES == 24 && FIXED_BYTES == 32);

/// The largest bin a page may have: offsets and lengths are 16 bits.
pub const MAX_BIN_BYTES: usize = u16::MAX as usize;

/// The longest key a page tree accepts: a bin must hold two of the longest keys.
pub const MAX_PAGE_KEY_LEN: usize = 16 * 1024;

/// Settings of the pages of one tree, and the geometry of its leaf and inner pages derived
/// from them once (a search reads it on every node).
#[derive(Debug, Clone, Copy)]
pub struct PageConfig {
    /// The longest key, in bytes (at most [`MAX_PAGE_KEY_LEN`]).
    pub max_key_len: usize,
    /// Whether every key carries a tid (non-unique trees), compared after the key.
    pub with_tid: bool,
    /// Whether splits choose their point for long prefixes and short separators and post
    /// the shortest separator of a leaf split (the paper's Prefix+Split), or split in the
    /// middle and post the right half's first key.
    pub short_splits: bool,
    /// Leaf pages (index 0) and inner pages (index 1).
    geometry: [Geometry; 2],
}

/// The geometry of a page: how many entries, how large a bin, how many bytes in all.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    cap: usize,
    bin_bytes: usize,
    layout: Layout,
}

impl PageConfig {
    /// Pages of `leaf_bytes` and `inner_bytes` bytes holding at most `leaf_capacity` and
    /// `inner_capacity` entries. The vectors take at most half of a page (at least 4
    /// entries); the bin gets the rest, but at least two of the longest keys (so that any
    /// split makes progress) and at most [`MAX_BIN_BYTES`].
    pub fn new(
        (leaf_capacity, inner_capacity): (usize, usize),
        (leaf_bytes, inner_bytes): (usize, usize),
        max_key_len: usize,
        (with_tid, short_splits): (bool, bool),
    ) -> Self {
        let slot = 16 + if with_tid { 8 } else { 0 };
        let geometry = |configured: usize, page: usize| {
            let half = page.saturating_sub(FIXED_BYTES) / (2 * slot);
            let cap = configured.min(half.max(4));
            let vectors = FIXED_BYTES + cap * slot;
            let bin_bytes = page
                .saturating_sub(vectors)
                .max(2 * max_key_len + 8)
                .min(MAX_BIN_BYTES);
            let bytes = vectors + 8 * words_for(bin_bytes);
            let layout = Layout::from_size_align(bytes, 8).expect("page layout");
            Geometry {
                cap,
                bin_bytes,
                layout,
            }
        };
        Self {
            max_key_len,
            with_tid,
            short_splits,
            geometry: [
                geometry(leaf_capacity, leaf_bytes),
                geometry(inner_capacity, inner_bytes),
            ],
        }
    }

    #[inline]
    fn geometry(&self, level: u16) -> &Geometry {
        &self.geometry[usize::from(level > 0)]
    }

    /// Entries of a page at `level`.
    #[inline]
    fn capacity(&self, level: u16) -> usize {
        self.geometry(level).cap
    }

    fn layout(&self, level: u16) -> Layout {
        self.geometry(level).layout
    }
}

/// The mid-key of a key remainder and how many of its bytes the mid-key holds (the suffix is
/// the rest).
#[inline]
fn encode(rest: &[u8]) -> (u32, usize) {
    match *rest {
        [] => (0, 0),
        [a] => (u32::from_be_bytes([a, 0, 0, 1]), 1),
        [a, b] => (u32::from_be_bytes([a, b, 0, 2]), 2),
        [a, b, c] => (u32::from_be_bytes([a, b, c, 3]), 3),
        [a, b, c, d, ..] if d > 3 => (u32::from_be_bytes([a, b, c, d]), 4),
        [a, b, c, ..] => (u32::from_be_bytes([a, b, c, 3]), 3),
    }
}

/// The remainder bytes a mid-key holds.
#[inline]
fn decode(mid: u32, out: &mut Vec<u8>) {
    let b = mid.to_be_bytes();
    let held = match b[3] {
        n @ 0..=3 => n as usize,
        _ => 4,
    };
    out.extend_from_slice(&b[..held]);
}

/// How much of `a` and `b` is the same from the start.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The meta word: where the prefix is and how much of the bin is handed out and live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    prefix_offset: usize,
    prefix_len: usize,
    /// Bytes handed out from the bin's end.
    top: usize,
    /// Bytes of the prefix and the live suffixes.
    live: usize,
}

impl Meta {
    fn pack(self) -> u64 {
        (self.prefix_offset as u64) << 48
            | (self.prefix_len as u64) << 32
            | (self.top as u64) << 16
            | self.live as u64
    }

    fn unpack(word: u64) -> Self {
        Meta {
            prefix_offset: (word >> 48) as u16 as usize,
            prefix_len: (word >> 32) as u16 as usize,
            top: (word >> 16) as u16 as usize,
            live: word as u16 as usize,
        }
    }
}

/// One entry of [`Entries`]: where its key is, its tid (non-unique trees) and its value.
struct Entry {
    start: usize,
    len: usize,
    tid: Option<u64>,
    value: u64,
}

/// Entries copied out of pages, their keys in one buffer: what a rebuild writes back.
#[derive(Default)]
struct Entries {
    bytes: Vec<u8>,
    items: Vec<Entry>,
}

impl Entries {
    fn key(&self, i: usize) -> &[u8] {
        let e = &self.items[i];
        &self.bytes[e.start..e.start + e.len]
    }

    fn push(&mut self, key: &[u8], tid: Option<u64>, value: u64) {
        self.items.push(Entry {
            start: self.bytes.len(),
            len: key.len(),
            tid,
            value,
        });
        self.bytes.extend_from_slice(key);
    }

    /// Bin bytes the entries take in one page: the longest prefix they all share and every
    /// suffix. Entries copied under an optimistic read may be torn (unsorted), so the prefix
    /// is what every key shares with the first, not just the last.
    fn bin_bytes(&self) -> usize {
        let count = self.items.len();
        if count == 0 {
            return 0;
        }
        let first = self.key(0);
        let prefix = (1..count).fold(first.len(), |shared, i| {
            shared.min(common_prefix(first, self.key(i)))
        });
        let suffixes: usize = (0..count)
            .map(|i| {
                let rest = &self.key(i)[prefix..];
                rest.len() - encode(rest).1
            })
            .sum();
        prefix + suffixes
    }
}

/// The optimized page representation.
#[derive(Debug)]
pub struct PageRepr;

/// A node's vectors and bin.
struct Page<'n> {
    node: &'n NodeHeader,
    meta: &'n AtomicU64,
    mids: &'n [AtomicU32],
    suffixes: &'n [AtomicU32],
    values: &'n [AtomicU64],
    tids: &'n [AtomicU64],
    bin: WordBytes<'n>,
    /// Bytes of the bin.
    bin_len: usize,
}

impl<'n> Page<'n> {
    #[inline]
    fn of(node: &'n NodeHeader, config: &PageConfig) -> Self {
        let geometry = config.geometry(node.level());
        let cap = geometry.cap;
        let tids = if config.with_tid { cap } else { 0 };
        let bin_words = words_for(geometry.bin_bytes);
        // SAFETY: `node` was allocated by `PageRepr::alloc` with `config.layout(level)`: the
        // header, the meta word, `cap` u32 mid-keys, `cap` u32 suffix locations, `cap` (plus
        // `tids`) u64 values and the bin's words, in that order, each 8-byte aligned where a
        // u64 is (32 + 8 * cap is a multiple of 8), within the layout's size. Every field is used
        // only through atomics, so shared references are sound under concurrent access.
        unsafe {
            let base = node as *const NodeHeader as *const u8;
            let mids = base.add(FIXED_BYTES);
            let suffixes = mids.add(4 * cap);
            let values = suffixes.add(4 * cap);
            let tid_base = values.add(8 * cap);
            let bin_base = tid_base.add(8 * tids);
            Page {
                node,
                meta: &*(base.add(HEADER_BYTES) as *const AtomicU64),
                mids: std::slice::from_raw_parts(mids as *const AtomicU32, cap),
                suffixes: std::slice::from_raw_parts(suffixes as *const AtomicU32, cap),
                values: std::slice::from_raw_parts(values as *const AtomicU64, cap),
                tids: std::slice::from_raw_parts(tid_base as *const AtomicU64, tids),
                bin_len: geometry.bin_bytes,
                bin: WordBytes::new(std::slice::from_raw_parts(
                    bin_base as *const AtomicU64,
                    bin_words,
                )),
            }
        }
    }

    fn cap(&self) -> usize {
        self.mids.len()
    }

    /// The count, clamped to the capacity.
    #[inline]
    fn count(&self) -> usize {
        self.node.count().min(self.cap())
    }

    #[inline]
    fn meta(&self) -> Meta {
        Meta::unpack(self.meta.load(Ordering::Relaxed))
    }

    fn set_meta(&self, meta: Meta) {
        self.meta.store(meta.pack(), Ordering::Relaxed);
    }

    #[inline]
    fn mid(&self, i: usize) -> u32 {
        self.mids[i.min(self.cap() - 1)].load(Ordering::Relaxed)
    }

    /// Suffix location of entry `i`: (offset, length).
    #[inline]
    fn suffix_at(&self, i: usize) -> (usize, usize) {
        let word = self.suffixes[i.min(self.cap() - 1)].load(Ordering::Relaxed);
        ((word >> 16) as usize, (word & 0xffff) as usize)
    }

    /// Whether `key` starts with the prefix of `meta`, or how it compares with every key
    /// that does: `Less` if it sorts before them all, `Greater` if after.
    #[inline]
    fn against_prefix(&self, meta: Meta, key: &[u8]) -> CmpOrdering {
        let n = meta.prefix_len.min(key.len());
        match self.bin.compare(meta.prefix_offset, n, &key[..n]) {
            // The prefix sorts before the key: so does every key on the page.
            CmpOrdering::Less => CmpOrdering::Greater,
            CmpOrdering::Greater => CmpOrdering::Less,
            // The key is a proper prefix of the page prefix: it sorts first.
            CmpOrdering::Equal if key.len() < meta.prefix_len => CmpOrdering::Less,
            CmpOrdering::Equal => CmpOrdering::Equal,
        }
    }

    /// How many bytes of the prefix of `meta` start `key` too.
    #[inline]
    fn shared_prefix(&self, meta: Meta, key: &[u8]) -> usize {
        self.bin.shared(meta.prefix_offset, meta.prefix_len, key)
    }

    #[inline]
    fn tid(&self, i: usize) -> u64 {
        self.tids
            .get(i.min(self.cap() - 1))
            .map_or(0, |t| t.load(Ordering::Relaxed))
    }

    /// Compares entry `i` with a probe whose mid-key equals the entry's: by suffix, then
    /// (non-unique trees) by tid.
    #[inline]
    fn compare_tail(&self, i: usize, suffix: &[u8], tid: Option<u64>) -> CmpOrdering {
        let (offset, len) = self.suffix_at(i);
        match self.bin.compare(offset, len, suffix) {
            CmpOrdering::Equal => {}
            other => return other,
        }
        match tid {
            Some(tid) if !self.tids.is_empty() => self.tid(i).cmp(&tid),
            _ => CmpOrdering::Equal,
        }
    }

    /// Compares entry `i` with the probe's encoded remainder.
    #[inline]
    fn compare(&self, i: usize, mid: u32, suffix: &[u8], tid: Option<u64>) -> CmpOrdering {
        match self.mid(i).cmp(&mid) {
            CmpOrdering::Equal => self.compare_tail(i, suffix, tid),
            other => other,
        }
    }

    /// Entry `i`'s whole key, appended to `out` (prefix, mid-key bytes, suffix).
    fn key_into(&self, i: usize, out: &mut Vec<u8>) {
        let meta = self.meta();
        let (offset, len) = self.suffix_at(i);
        out.reserve(meta.prefix_len + 4 + len);
        self.bin
            .extend_into(meta.prefix_offset, meta.prefix_len, out);
        decode(self.mid(i), out);
        self.bin.extend_into(offset, len, out);
    }

    fn key(&self, i: usize) -> VarKey {
        let mut key = VarKey::default();
        self.var_key_into(i, &mut key);
        key
    }

    /// Entry `i`'s key into `out`, reusing its buffer.
    #[inline]
    fn var_key_into(&self, i: usize, out: &mut VarKey) {
        out.bytes.clear();
        self.key_into(i, &mut out.bytes);
        out.tid = (!self.tids.is_empty()).then(|| self.tid(i));
    }

    /// Appends entries `from..to` to `entries`.
    fn entries_into(&self, from: usize, to: usize, entries: &mut Entries) {
        for i in from..to.min(self.count()) {
            let start = entries.bytes.len();
            self.key_into(i, &mut entries.bytes);
            entries.items.push(Entry {
                start,
                len: entries.bytes.len() - start,
                tid: (!self.tids.is_empty()).then(|| self.tid(i)),
                value: self.values[i].load(Ordering::Relaxed),
            });
        }
    }

    /// Hands out `len` bytes at the bin's end, fills them with `bytes` and returns their
    /// offset. Write lock held; the bin has `len` contiguous free bytes.
    fn put(&self, meta: &mut Meta, bytes: &[u8]) -> usize {
        let offset = self.bin_len - meta.top - bytes.len();
        self.bin.write(offset, bytes);
        meta.top += bytes.len();
        meta.live += bytes.len();
        offset
    }

    /// Writes entry `i` (its key's remainder after a prefix of `prefix_len`). Write lock
    /// held; the bin has room for the suffix.
    fn write(&self, meta: &mut Meta, i: usize, key: &[u8], tid: Option<u64>, value: u64) {
        let rest = &key[meta.prefix_len.min(key.len())..];
        let (mid, held) = encode(rest);
        let suffix = &rest[held..];
        let offset = self.put(meta, suffix);
        self.mids[i].store(mid, Ordering::Relaxed);
        self.suffixes[i].store(
            ((offset as u32) << 16) | suffix.len() as u32,
            Ordering::Relaxed,
        );
        if let Some(slot) = self.tids.get(i) {
            slot.store(tid.unwrap_or(0), Ordering::Relaxed);
        }
        self.values[i].store(value, Ordering::Release);
    }

    /// Rewrites the page to hold exactly `entries` (sorted), under the longest prefix they
    /// share. Write lock held (or the page unpublished); they fit (see [`Self::fits`]).
    fn rebuild(&self, entries: &Entries) {
        let count = entries.items.len();
        let prefix_len = match count {
            0 => 0,
            _ => common_prefix(entries.key(0), entries.key(count - 1)),
        };
        let mut meta = Meta {
            prefix_offset: 0,
            prefix_len,
            top: 0,
            live: 0,
        };
        if count > 0 {
            meta.prefix_offset = self.put(&mut meta, &entries.key(0)[..prefix_len]);
        }
        for (i, e) in entries.items.iter().enumerate() {
            self.write(&mut meta, i, entries.key(i), e.tid, e.value);
        }
        self.set_meta(meta);
        self.node.set_count(count);
    }

    /// Rewrites the bin so that the prefix and the live suffixes are contiguous at its end.
    fn compact(&self) {
        let mut meta = self.meta();
        let count = self.count();
        // The prefix, then every suffix, copied out before the bin is rewritten.
        let mut saved = Vec::with_capacity(meta.live);
        self.bin
            .extend_into(meta.prefix_offset, meta.prefix_len, &mut saved);
        let mut ends = Vec::with_capacity(count);
        for i in 0..count {
            let (offset, len) = self.suffix_at(i);
            self.bin.extend_into(offset, len, &mut saved);
            ends.push(saved.len());
        }
        meta.top = 0;
        meta.live = 0;
        let prefix_len = meta.prefix_len;
        meta.prefix_offset = self.put(&mut meta, &saved[..prefix_len]);
        let mut start = prefix_len;
        for (i, &end) in ends.iter().enumerate() {
            let offset = self.put(&mut meta, &saved[start..end]);
            self.suffixes[i].store(
                ((offset as u32) << 16) | (end - start) as u32,
                Ordering::Relaxed,
            );
            start = end;
        }
        self.set_meta(meta);
    }
}

// SAFETY: `alloc` returns nodes that begin with a `NodeHeader` and are freed only by `free`;
// `Page` clamps every index, offset and length it derives from node contents, so torn
// contents can produce wrong answers (rejected by validation) but never out-of-bounds reads,
// panics or unbounded loops.
unsafe impl NodeRepr for PageRepr {
    type Config = PageConfig;
    type Probe<'a> = VarProbe<'a>;
    type Owned = VarKey;

    const NAME: &'static str = "page";

    #[inline]
    fn probe(key: &VarKey) -> VarProbe<'_> {
        VarProbe::new(&key.bytes, key.tid)
    }

    fn compare(_: &PageConfig, a: &VarKey, b: &VarKey) -> CmpOrdering {
        a.cmp(b)
    }

    fn alloc(config: &PageConfig, level: u16) -> (NonNull<NodeHeader>, usize) {
        // A zeroed page is an empty page with an empty prefix.
        super::alloc_zeroed_node(config.layout(level), level)
    }

    unsafe fn free(config: &PageConfig, node: NonNull<NodeHeader>) -> usize {
        // SAFETY: the caller guarantees exclusive access to a node from `alloc`, which used
        // this layout (the level never changes).
        unsafe { super::free_node(node, config.layout(node.as_ref().level())) }
    }

    #[inline]
    fn capacity(node: &NodeHeader, config: &PageConfig) -> usize {
        config.capacity(node.level())
    }

    fn search(node: &NodeHeader, config: &PageConfig, probe: VarProbe<'_>) -> SearchResult {
        let page = Page::of(node, config);
        let count = page.count();
        // Start loading the mid-keys the binary search will touch, in parallel.
        super::prefetch(&page.mids[..count]);
        let meta = page.meta();
        let key = probe.bytes();
        match page.against_prefix(meta, key) {
            CmpOrdering::Less => {
                return SearchResult {
                    pos: 0,
                    found: false,
                }
            }
            CmpOrdering::Greater => {
                return SearchResult {
                    pos: count,
                    found: false,
                }
            }
            CmpOrdering::Equal => {}
        }
        if count == 0 {
            return SearchResult {
                pos: 0,
                found: false,
            };
        }
        let rest = &key[meta.prefix_len.min(key.len())..];
        let (mid, held) = encode(rest);
        let suffix = &rest[held..];
        let tid = probe.tid();
        // The search of the paper's Figure 7: `lower` ends at the last entry not above the
        // probe (or at 0); a mid-key tie compares the tails, and an equal tail ends it.
        let (mut lower, mut n) = (0, count);
        while n > 1 {
            let half = n / 2;
            let middle = lower + half;
            let at = page.mid(middle);
            if at != mid {
                lower = if mid < at { lower } else { middle };
            } else {
                match page.compare_tail(middle, suffix, tid) {
                    CmpOrdering::Less => lower = middle,
                    CmpOrdering::Greater => {}
                    CmpOrdering::Equal => {
                        return SearchResult {
                            pos: middle,
                            found: true,
                        }
                    }
                }
            }
            n -= half;
        }
        match page.compare(lower, mid, suffix, tid) {
            CmpOrdering::Less => SearchResult {
                pos: lower + 1,
                found: false,
            },
            CmpOrdering::Equal => SearchResult {
                pos: lower,
                found: true,
            },
            CmpOrdering::Greater => SearchResult {
                pos: lower,
                found: false,
            },
        }
    }

    fn key_at(node: &NodeHeader, config: &PageConfig, i: usize) -> VarKey {
        Page::of(node, config).key(i)
    }

    #[inline]
    fn key_into(node: &NodeHeader, config: &PageConfig, i: usize, out: &mut VarKey) {
        Page::of(node, config).var_key_into(i, out)
    }

    #[inline]
    fn value_at(node: &NodeHeader, config: &PageConfig, i: usize) -> u64 {
        let page = Page::of(node, config);
        page.values[i.min(page.cap() - 1)].load(Ordering::Relaxed)
    }

    fn set_value(node: &NodeHeader, config: &PageConfig, i: usize, value: u64) {
        Page::of(node, config).values[i].store(value, Ordering::Release);
    }

    fn has_room(node: &NodeHeader, config: &PageConfig, probe: Option<VarProbe<'_>>) -> bool {
        let page = Page::of(node, config);
        let count = node.count();
        if count >= page.cap() {
            return false;
        }
        let meta = page.meta();
        // A key that does not share the prefix shortens it by `lost` bytes, which makes each
        // entry's suffix longer by at most `lost + 1` (the mid-key may then hold one byte
        // less). An inner node makes room for the longest key and for losing its prefix.
        let (key_len, lost) = match probe {
            None => (config.max_key_len, meta.prefix_len),
            Some(probe) if count == 0 => (probe.bytes().len(), 0),
            Some(probe) => {
                let shared = page.shared_prefix(meta, probe.bytes());
                (probe.bytes().len() - shared, meta.prefix_len - shared)
            }
        };
        let growth = if lost > 0 { count * (lost + 1) } else { 0 };
        meta.live.saturating_sub(lost) + growth + key_len <= page.bin_len
    }

    fn insert_at(node: &NodeHeader, config: &PageConfig, i: usize, key: VarProbe<'_>, value: u64) {
        let page = Page::of(node, config);
        let count = node.count();
        debug_assert!(count < page.cap() && i <= count);
        let meta = page.meta();
        let bytes = key.bytes();
        if count == 0 || page.against_prefix(meta, bytes) != CmpOrdering::Equal {
            // The key does not share the prefix (or the page is empty): rebuild the page
            // under the prefix all its keys share.
            let mut entries = Entries::default();
            page.entries_into(0, i, &mut entries);
            entries.push(bytes, key.tid(), value);
            page.entries_into(i, count, &mut entries);
            page.rebuild(&entries);
            return;
        }
        let rest = &bytes[meta.prefix_len..];
        let suffix_len = rest.len() - encode(rest).1;
        if meta.top + suffix_len > page.bin_len {
            page.compact();
        }
        for j in (i..count).rev() {
            page.mids[j + 1].store(page.mids[j].load(Ordering::Relaxed), Ordering::Relaxed);
            page.suffixes[j + 1].store(page.suffixes[j].load(Ordering::Relaxed), Ordering::Relaxed);
            page.values[j + 1].store(page.values[j].load(Ordering::Relaxed), Ordering::Relaxed);
            if !page.tids.is_empty() {
                page.tids[j + 1].store(page.tids[j].load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        let mut meta = page.meta();
        page.write(&mut meta, i, bytes, key.tid(), value);
        page.set_meta(meta);
        node.set_count(count + 1);
    }

    fn remove_at(node: &NodeHeader, config: &PageConfig, i: usize) {
        let page = Page::of(node, config);
        let count = node.count();
        debug_assert!(i < count);
        let mut meta = page.meta();
        meta.live -= page.suffix_at(i).1;
        for j in i + 1..count {
            page.mids[j - 1].store(page.mids[j].load(Ordering::Relaxed), Ordering::Relaxed);
            page.suffixes[j - 1].store(page.suffixes[j].load(Ordering::Relaxed), Ordering::Relaxed);
            page.values[j - 1].store(page.values[j].load(Ordering::Relaxed), Ordering::Relaxed);
            if !page.tids.is_empty() {
                page.tids[j - 1].store(page.tids[j].load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        page.set_meta(meta);
        node.set_count(count - 1);
    }

    fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, config: &PageConfig) {
        let (src_page, dst_page) = (Page::of(src, config), Page::of(dst, config));
        let mut moved = Entries::default();
        dst_page.entries_into(0, dst_page.count(), &mut moved);
        src_page.entries_into(from, src_page.count(), &mut moved);
        let mut kept = Entries::default();
        src_page.entries_into(0, from, &mut kept);
        dst_page.rebuild(&moved);
        src_page.rebuild(&kept);
    }

    /// The prefix once, and per entry its mid-key, its suffix location and its suffix.
    fn key_bytes(node: &NodeHeader, config: &PageConfig) -> usize {
        let page = Page::of(node, config);
        let count = page.count();
        let suffixes: usize = (0..count).map(|i| page.suffix_at(i).1).sum();
        let prefix = if count > 0 { page.meta().prefix_len } else { 0 };
        prefix + 8 * count + suffixes
    }

    /// The middle, or with short splits the point between the .33 and the .67 entry that
    /// maximizes `Saved(L|R) - 4 * TSize(L|R)` (section II-C): the bytes the two halves'
    /// prefixes save, less four times the separator the parent gets (the shortest
    /// separator for a leaf, the entry that moves up for an inner node), since that one is
    /// compared by every search that passes the parent. Ties go to the point nearest the
    /// middle.
    fn split_point(node: &NodeHeader, config: &PageConfig) -> usize {
        let count = node.count();
        if !config.short_splits || count < 3 {
            return count / 2;
        }
        let page = Page::of(node, config);
        let mut entries = Entries::default();
        page.entries_into(0, count, &mut entries);
        let key = |i: usize| entries.key(i);
        let leaf = node.is_leaf();
        let prefix_bytes = |from: usize, to: usize| match to.checked_sub(from) {
            Some(n) if n > 0 => n * common_prefix(key(from), key(to - 1)),
            _ => 0,
        };
        let (lo, hi) = ((count / 3).max(1), (2 * count).div_ceil(3).min(count - 1));
        let score = |at: usize| -> (i64, i64) {
            // An inner split moves entry `at` up: it is in neither half.
            let right = if leaf { at } else { at + 1 };
            let saved = prefix_bytes(0, at) + prefix_bytes(right, count);
            let term = if leaf {
                (common_prefix(key(at - 1), key(at)) + 1).min(key(at).len())
            } else {
                key(at).len()
            };
            let off_middle = (at as i64 - (count / 2) as i64).abs();
            (saved as i64 - 4 * term as i64, -off_middle)
        };
        (lo..=hi).max_by_key(|&at| score(at)).unwrap_or(count / 2)
    }

    /// With short splits, the shortest `s` with `key(at - 1) < s <= key(at)`: the right
    /// key's bytes up to and including the first that differs from the left key's (tid 0
    /// in a non-unique tree); the right key itself when only the tids differ.
    fn separator(node: &NodeHeader, config: &PageConfig, at: usize) -> VarKey {
        let page = Page::of(node, config);
        let right = page.key(at);
        if !config.short_splits || at == 0 {
            return right;
        }
        let left = page.key(at - 1);
        if left.bytes == right.bytes {
            return right;
        }
        let keep = (common_prefix(&left.bytes, &right.bytes) + 1).min(right.bytes.len());
        VarKey {
            bytes: right.bytes[..keep].to_vec(),
            tid: right.tid.map(|_| 0),
        }
    }

    fn fits_merge(
        left: &NodeHeader,
        right: &NodeHeader,
        extra: usize,
        config: &PageConfig,
    ) -> bool {
        let (l, r) = (Page::of(left, config), Page::of(right, config));
        if left.count() + right.count() + extra > l.cap() {
            return false;
        }
        let mut keys = Entries::default();
        l.entries_into(0, l.count(), &mut keys);
        r.entries_into(0, r.count(), &mut keys);
        // A separator pulled down from the parent lies between the two nodes' keys, so it
        // shares their prefix; it needs at most its own length.
        let reserve = extra * config.max_key_len;
        keys.bin_bytes() + reserve <= l.bin_len
    }

    fn is_underfull(node: &NodeHeader, config: &PageConfig) -> bool {
        let page = Page::of(node, config);
        node.count() < page.cap() / 4 && page.meta().live < page.bin_len / 4
    }

    fn check_node(node: &NodeHeader, config: &PageConfig) -> Result<(), String> {
        let page = Page::of(node, config);
        let count = node.count();
        if count > page.cap() {
            return Err(format!("count {count} exceeds capacity {}", page.cap()));
        }
        let meta = page.meta();
        let bin = page.bin_len;
        if meta.top > bin || meta.live > meta.top {
            return Err(format!(
                "bin top {} / live {} exceed bin {bin}",
                meta.top, meta.live
            ));
        }
        let low = bin - meta.top;
        let in_bin = |offset: usize, len: usize| offset >= low && offset + len <= bin;
        if count > 0 && !in_bin(meta.prefix_offset, meta.prefix_len) {
            return Err("prefix outside the bin's handed-out bytes".into());
        }
        let mut prefix = Vec::new();
        page.bin
            .extend_into(meta.prefix_offset, meta.prefix_len, &mut prefix);
        let mut live = if count > 0 { meta.prefix_len } else { 0 };
        let mut previous: Option<VarKey> = None;
        for i in 0..count {
            let (offset, len) = page.suffix_at(i);
            if !in_bin(offset, len) {
                return Err(format!("entry {i}: suffix {offset}+{len} outside the bin"));
            }
            live += len;
            let key = page.key(i);
            if key.bytes.len() > config.max_key_len {
                return Err(format!("entry {i}: key longer than the maximum"));
            }
            if !key.bytes.starts_with(&prefix) {
                return Err(format!(
                    "entry {i}: key does not start with the page prefix"
                ));
            }
            let rest = &key.bytes[prefix.len()..];
            let (mid, held) = encode(rest);
            if mid != page.mid(i) || len != rest.len() - held {
                return Err(format!(
                    "entry {i}: mid-key or suffix disagrees with the key"
                ));
            }
            if previous.as_ref().is_some_and(|p| *p >= key) {
                return Err(format!("keys out of order at {i}"));
            }
            previous = Some(key);
        }
        if count > 0 && live != meta.live {
            return Err(format!("bin live {} but the entries use {live}", meta.live));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remainder_order(a: &[u8], b: &[u8]) -> CmpOrdering {
        let (ma, ha) = encode(a);
        let (mb, hb) = encode(b);
        ma.cmp(&mb).then_with(|| a[ha..].cmp(&b[hb..]))
    }

    #[test]
    fn mid_keys_order_remainders_as_bytes() {
        // Every remainder of up to 5 bytes over an alphabet with the encoding's edge values.
        let alphabet = [0u8, 1, 2, 3, 4, 0x7f, 0xff];
        let mut all: Vec<Vec<u8>> = vec![vec![]];
        let mut frontier = vec![vec![]];
        for _ in 0..5 {
            let mut next = Vec::new();
            for prefix in &frontier {
                for &b in &alphabet {
                    let mut k: Vec<u8> = prefix.clone();
                    k.push(b);
                    next.push(k);
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        for a in &all {
            let mut decoded = Vec::new();
            let (mid, held) = encode(a);
            decode(mid, &mut decoded);
            decoded.extend_from_slice(&a[held..]);
            assert_eq!(&decoded, a, "decode(encode({a:?}))");
        }
        for a in all.iter().step_by(7) {
            for b in &all {
                assert_eq!(remainder_order(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    fn config(with_tid: bool) -> PageConfig {
        PageConfig::new((8, 8), (256, 256), 40, (with_tid, false))
    }

    /// A page holding `keys` (inserted in the given order) and its check.
    fn page_of(config: &PageConfig, keys: &[&[u8]]) -> NonNull<NodeHeader> {
        let (node, _) = PageRepr::alloc(config, 0);
        // SAFETY: freshly allocated, owned by this test.
        let leaf = unsafe { node.as_ref() };
        for (value, key) in keys.iter().enumerate() {
            let probe = VarProbe::new(key, None);
            let hit = PageRepr::search(leaf, config, probe);
            assert!(!hit.found);
            assert!(PageRepr::has_room(leaf, config, Some(probe)));
            PageRepr::insert_at(leaf, config, hit.pos, probe, value as u64);
            PageRepr::check_node(leaf, config).unwrap();
        }
        node
    }

    #[test]
    fn inserts_shrink_the_prefix_and_searches_find_every_key() {
        let config = config(false);
        let keys: [&[u8]; 6] = [
            b"user/alice/mail",
            b"user/alice/mai",
            b"user/alice/mail\x00",
            b"user/bob",
            b"user/alice/ma\x02x",
            b"usr",
        ];
        let node = page_of(&config, &keys);
        // SAFETY: owned by this test.
        let leaf = unsafe { node.as_ref() };
        let mut sorted: Vec<&[u8]> = keys.to_vec();
        sorted.sort();
        for (pos, key) in sorted.iter().enumerate() {
            let hit = PageRepr::search(leaf, &config, VarProbe::new(key, None));
            assert_eq!((hit.pos, hit.found), (pos, true), "{key:?}");
            assert_eq!(PageRepr::key_at(leaf, &config, pos).bytes, key.to_vec());
        }
        for (probe, pos) in [
            (&b"a"[..], 0),
            (b"user/alice/m", 0),
            (b"user/c", 5),
            (b"z", 6),
        ] {
            let hit = PageRepr::search(leaf, &config, VarProbe::new(probe, None));
            assert_eq!((hit.pos, hit.found), (pos, false), "{probe:?}");
        }
        // SAFETY: unpublished, owned by this test.
        unsafe { PageRepr::free(&config, node) };
    }

    #[test]
    fn a_split_gives_each_half_its_own_longer_prefix() {
        let config = config(false);
        let keys: [&[u8]; 4] = [b"aaaa/1/x", b"aaaa/1/y", b"aaaa/2/x", b"aaaa/2/y"];
        let left = page_of(&config, &keys);
        let (right, _) = PageRepr::alloc(&config, 0);
        // SAFETY: both owned by this test.
        let (l, r) = unsafe { (left.as_ref(), right.as_ref()) };
        PageRepr::move_tail(l, 2, r, &config);
        for node in [l, r] {
            PageRepr::check_node(node, &config).unwrap();
            assert_eq!(Page::of(node, &config).meta().prefix_len, 7);
        }
        assert!(PageRepr::fits_merge(l, r, 0, &config));
        PageRepr::move_tail(r, 0, l, &config);
        PageRepr::check_node(l, &config).unwrap();
        assert_eq!(l.count(), 4);
        assert_eq!(Page::of(l, &config).meta().prefix_len, 5);
        // SAFETY: unpublished, owned by this test.
        unsafe {
            PageRepr::free(&config, left);
            PageRepr::free(&config, right);
        }
    }

    #[test]
    fn short_splits_pick_long_prefixes_and_post_short_separators() {
        let config = PageConfig::new((8, 8), (256, 256), 40, (false, true));
        // Two clusters: the split between them gives both halves a long prefix and the
        // parent a one-byte separator.
        let keys: [&[u8]; 6] = [
            b"apple/orchard/1",
            b"apple/orchard/2",
            b"apple/orchard/3",
            b"apple/orchard/4",
            b"banana/grove/1",
            b"banana/grove/2",
        ];
        let node = page_of(&config, &keys);
        // SAFETY: owned by this test.
        let leaf = unsafe { node.as_ref() };
        let at = PageRepr::split_point(leaf, &config);
        assert_eq!(at, 4, "the split falls between the clusters");
        let separator = PageRepr::separator(leaf, &config, at);
        assert_eq!(separator.bytes, b"b");
        assert!(PageRepr::key_at(leaf, &config, at - 1) < separator);
        assert!(separator <= PageRepr::key_at(leaf, &config, at));
        // Without short splits: the middle, and the right key itself.
        let plain = PageConfig::new((8, 8), (256, 256), 40, (false, false));
        assert_eq!(PageRepr::split_point(leaf, &plain), 3);
        assert_eq!(PageRepr::separator(leaf, &plain, 3).bytes, keys[3]);
        // SAFETY: unpublished, owned by this test.
        unsafe { PageRepr::free(&config, node) };
    }

    #[test]
    fn torn_entries_size_without_panicking() {
        // A merge check copies two pages under optimistic reads: a concurrent writer can
        // leave the copy unsorted, and sizing it must still not panic.
        let mut entries = Entries::default();
        for key in [&b"abcdef"[..], b"x", b"abcxyz", b""] {
            entries.push(key, None, 0);
        }
        // No shared prefix (the empty key); the mid-keys hold 4, 1, 4 and 0 bytes.
        assert_eq!(entries.bin_bytes(), 4);
    }

    #[test]
    fn tids_order_equal_keys() {
        let config = config(true);
        let (node, _) = PageRepr::alloc(&config, 0);
        // SAFETY: owned by this test.
        let leaf = unsafe { node.as_ref() };
        for tid in [5u64, 1, 9, 3] {
            let probe = VarProbe::new(b"same key", Some(tid));
            let hit = PageRepr::search(leaf, &config, probe);
            PageRepr::insert_at(leaf, &config, hit.pos, probe, tid);
        }
        PageRepr::check_node(leaf, &config).unwrap();
        let tids: Vec<u64> = (0..4)
            .map(|i| PageRepr::key_at(leaf, &config, i).tid.unwrap())
            .collect();
        assert_eq!(tids, [1, 3, 5, 9]);
        let hit = PageRepr::search(leaf, &config, VarProbe::new(b"same key", Some(5)));
        assert_eq!((hit.pos, hit.found), (2, true));
        // SAFETY: unpublished, owned by this test.
        unsafe { PageRepr::free(&config, node) };
    }
}
