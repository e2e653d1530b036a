//! The slotted node for variable-length keys.
//!
//! # Layout
//!
//! One allocation of 64-bit atomic words, sized by the node's capacity `cap` (entries) and
//! heap size `heap` (words), both fixed per level by [`SlottedConfig`]:
//!
//! ```text
//! bytes 0..24        NodeHeader (lock, count, level, link)
//! then, in words:
//! word 0             heap_top:   words of the heap handed out, growing down from the end
//! word 1             heap_live:  words of the heap still referenced by live slots
//! word 2 + 3i        slot i head:  the first 8 key bytes, big-endian, zero-padded
//! word 2 + 3i + 1    slot i value: tid (leaf) or child pointer (inner)
//! word 2 + 3i + 2    slot i meta:  key length (low 32 bits) | heap offset (high 32 bits)
//! word 2 + 3cap ..   heap: per slot, the key bytes after the first 8 as big-endian
//!                    zero-padded words, then (non-unique trees) the tid word
//! ```
//!
//! A key's order is decided by its head word in one integer comparison unless the heads are
//! equal; only then are the heap words compared (still 8 bytes at a time).
//!
//! Invariants (when no writer holds the lock): `count <= cap`; slots `0..count` strictly
//! ascending by (key, tid); every slot's heap words lie in `heap - heap_top .. heap`;
//! `heap_live` is the sum of the live slots' heap words. Removing a slot leaves its heap
//! words dead until an insert that lacks contiguous room compacts the heap.

use std::alloc::Layout;
use std::cmp::Ordering as CmpOrdering;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::bytes::key_word;
use super::{NodeHeader, NodeRepr, SearchResult};

/// Up to 8 bytes as the top bytes of a big-endian word, zero below.
#[inline]
fn word_of(bytes: &[u8]) -> u64 {
    key_word(bytes, 0)
}

/// Bytes of the header that precedes the words.
const HEADER_BYTES: usize = std::mem::size_of::<NodeHeader>();
/// Words before the slots: `heap_top` and `heap_live`.
const PREFIX_WORDS: usize = 2;
/// Index of `heap_top` and `heap_live` in the words.
const HEAP_TOP: usize = 0;
const HEAP_LIVE: usize = 1;
const SLOT_WORDS: usize = 3;
const _: () = assert!(HEADER_BYTES == 3 * 8);

/// Settings of the slotted nodes of one tree.
#[derive(Debug, Clone, Copy)]
pub struct SlottedConfig {
    /// Most entries in a leaf.
    pub leaf_capacity: usize,
    /// Most separators in an inner node.
    pub inner_capacity: usize,
    /// The longest key part, in bytes.
    pub max_key_len: usize,
    /// Whether every key carries a tid suffix (non-unique trees), compared after the key.
    pub with_tid: bool,
}

impl SlottedConfig {
    fn capacity(&self, level: u16) -> usize {
        if level == 0 {
            self.leaf_capacity
        } else {
            self.inner_capacity
        }
    }

    /// Heap words of the longest entry.
    fn max_entry_words(&self) -> usize {
        heap_words(self.max_key_len, self.with_tid)
    }

    /// Heap words of a node at `level`: room for the average entry of about 32 bytes in every
    /// slot, and at least two of the longest entries so that any split makes progress.
    fn heap_words(&self, level: u16) -> usize {
        (self.capacity(level) * 3).max(2 * self.max_entry_words())
    }

    fn layout(&self, level: u16) -> Layout {
        let words = PREFIX_WORDS + SLOT_WORDS * self.capacity(level) + self.heap_words(level);
        Layout::from_size_align(HEADER_BYTES + words * 8, 8).expect("node layout")
    }
}

/// Heap words of an entry with a key of `len` bytes.
fn heap_words(len: usize, with_tid: bool) -> usize {
    len.saturating_sub(8).div_ceil(8) + usize::from(with_tid)
}

/// An owned variable-length key: the key bytes and, in non-unique trees, the tid.
#[derive(PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct VarKey {
    /// The key bytes.
    pub bytes: Vec<u8>,
    /// The tid suffix of non-unique trees.
    pub tid: Option<u64>,
}

impl Clone for VarKey {
    fn clone(&self) -> Self {
        Self {
            bytes: self.bytes.clone(),
            tid: self.tid,
        }
    }

    /// Reuses `self`'s buffer (scans move their resume key this way, leaf after leaf).
    fn clone_from(&mut self, source: &Self) {
        self.bytes.clone_from(&source.bytes);
        self.tid = source.tid;
    }
}

impl std::fmt::Debug for VarKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.bytes {
            write!(f, "{b:02x}")?;
        }
        if let Some(tid) = self.tid {
            write!(f, "#{tid}")?;
        }
        Ok(())
    }
}

/// A key prepared for searching.
#[derive(Debug, Clone, Copy)]
pub struct VarProbe<'a> {
    head: u64,
    bytes: &'a [u8],
    tid: Option<u64>,
}

impl<'a> VarProbe<'a> {
    /// Prepares `bytes` (and the tid of non-unique trees) for searching.
    #[inline]
    pub fn new(bytes: &'a [u8], tid: Option<u64>) -> Self {
        Self {
            head: word_of(bytes),
            bytes,
            tid,
        }
    }

    /// The key bytes.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The tid part of a non-unique tree's key.
    #[inline]
    pub fn tid(&self) -> Option<u64> {
        self.tid
    }
}

/// The slotted node representation.
#[derive(Debug)]
pub struct Slotted;

/// A node's words, its capacity and heap size.
struct Page<'n> {
    words: &'n [AtomicU64],
    cap: usize,
    heap: usize,
    with_tid: bool,
}

impl<'n> Page<'n> {
    #[inline]
    fn of(node: &'n NodeHeader, config: &SlottedConfig) -> Self {
        let level = node.level();
        let cap = config.capacity(level);
        let heap = config.heap_words(level);
        let total = PREFIX_WORDS + SLOT_WORDS * cap + heap;
        // SAFETY: `node` was allocated by `Slotted::alloc` with `config.layout(level)`:
        // the header followed by exactly `total` 8-byte aligned words, all used only as
        // atomics, so shared references to them are sound under concurrent access.
        let words = unsafe {
            let base = (node as *const NodeHeader as *const u8).add(HEADER_BYTES);
            std::slice::from_raw_parts(base as *const AtomicU64, total)
        };
        Page {
            words,
            cap,
            heap,
            with_tid: config.with_tid,
        }
    }

    #[inline]
    fn load(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Relaxed)
    }

    #[inline]
    fn store(&self, i: usize, value: u64) {
        self.words[i].store(value, Ordering::Relaxed)
    }

    #[inline]
    fn slot(&self, i: usize) -> usize {
        PREFIX_WORDS + SLOT_WORDS * i.min(self.cap - 1)
    }

    #[inline]
    fn heap_base(&self) -> usize {
        PREFIX_WORDS + SLOT_WORDS * self.cap
    }

    fn heap_top(&self) -> usize {
        (self.load(HEAP_TOP) as usize).min(self.heap)
    }

    fn heap_live(&self) -> usize {
        self.load(HEAP_LIVE) as usize
    }

    /// Key length and heap offset of slot `i`, clamped so that torn values stay in bounds.
    #[inline]
    fn meta(&self, i: usize) -> (usize, usize) {
        let meta = self.load(self.slot(i) + 2);
        let len = (meta as u32 as usize).min(u16::MAX as usize);
        let words = heap_words(len, self.with_tid);
        let offset = ((meta >> 32) as usize).min(self.heap - words.min(self.heap));
        (len, offset)
    }

    /// The heap words of slot `i` (key bytes after the first 8, then the tid).
    #[inline]
    fn entry_heap(&self, i: usize) -> &'n [AtomicU64] {
        let (len, offset) = self.meta(i);
        let words = heap_words(len, self.with_tid).min(self.heap);
        let start = self.heap_base() + offset;
        &self.words[start..start + words]
    }

    /// Compares slot `i` with the probe.
    #[inline]
    fn compare(&self, i: usize, probe: &VarProbe<'_>) -> CmpOrdering {
        let head = self.load(self.slot(i));
        match head.cmp(&probe.head) {
            CmpOrdering::Equal => {}
            other => return other,
        }
        let (len, _) = self.meta(i);
        let heap = self.entry_heap(i);
        let key_words = len.saturating_sub(8).div_ceil(8).min(heap.len());
        let rest = probe.bytes.get(8..).unwrap_or(&[]);
        for (w, chunk) in heap[..key_words].iter().zip(rest.chunks(8)) {
            match w.load(Ordering::Relaxed).cmp(&word_of(chunk)) {
                CmpOrdering::Equal => {}
                other => return other,
            }
        }
        match len.cmp(&probe.bytes.len()) {
            CmpOrdering::Equal => {}
            other => return other,
        }
        match (self.with_tid, probe.tid) {
            (true, Some(tid)) => heap
                .get(key_words)
                .map_or(0, |w| w.load(Ordering::Relaxed))
                .cmp(&tid),
            _ => CmpOrdering::Equal,
        }
    }

    /// Copies slot `i`'s key out.
    fn key(&self, i: usize) -> VarKey {
        let mut key = VarKey::default();
        self.key_into(i, &mut key);
        key
    }

    /// Copies slot `i`'s key into `out`, reusing its buffer.
    fn key_into(&self, i: usize, out: &mut VarKey) {
        let head = self.load(self.slot(i)).to_be_bytes();
        let (len, _) = self.meta(i);
        let heap = self.entry_heap(i);
        let bytes = &mut out.bytes;
        bytes.clear();
        bytes.reserve(len);
        bytes.extend_from_slice(&head[..len.min(8)]);
        let key_words = len.saturating_sub(8).div_ceil(8).min(heap.len());
        for w in &heap[..key_words] {
            let chunk = w.load(Ordering::Relaxed).to_be_bytes();
            let take = (len - bytes.len().min(len)).min(8);
            bytes.extend_from_slice(&chunk[..take]);
        }
        out.tid = self
            .with_tid
            .then(|| heap.get(key_words).map_or(0, |w| w.load(Ordering::Relaxed)));
    }

    /// Writes an entry's slot words and allocates and fills its heap words. Write lock held;
    /// the heap must have `heap_words` contiguous free words.
    fn write_entry(&self, i: usize, key: &VarProbe<'_>, value: u64) {
        let words = heap_words(key.bytes.len(), self.with_tid);
        let top = self.heap_top() + words;
        let offset = self.heap - top;
        let base = self.heap_base() + offset;
        let rest = key.bytes.get(8..).unwrap_or(&[]);
        for (j, chunk) in rest.chunks(8).enumerate() {
            self.store(base + j, word_of(chunk));
        }
        if self.with_tid {
            self.store(base + words - 1, key.tid.unwrap_or(0));
        }
        self.store(HEAP_TOP, top as u64);
        self.store(HEAP_LIVE, (self.heap_live() + words) as u64);
        let slot = self.slot(i);
        self.store(slot, key.head);
        self.words[slot + 1].store(value, Ordering::Release);
        self.store(slot + 2, ((offset as u64) << 32) | key.bytes.len() as u64);
    }

    /// Rewrites the heap so that the live entries' words are contiguous at its end.
    fn compact(&self, count: usize) {
        let mut saved: Vec<(usize, Vec<u64>)> = Vec::with_capacity(count);
        for i in 0..count {
            let words = self.entry_heap(i).iter().map(|w| w.load(Ordering::Relaxed));
            saved.push((i, words.collect()));
        }
        let mut top = 0;
        for (i, words) in saved {
            top += words.len();
            let offset = self.heap - top;
            for (j, w) in words.iter().enumerate() {
                self.store(self.heap_base() + offset + j, *w);
            }
            let slot = self.slot(i);
            let len = self.load(slot + 2) as u32 as u64;
            self.store(slot + 2, ((offset as u64) << 32) | len);
        }
        self.store(HEAP_TOP, top as u64);
        self.store(HEAP_LIVE, top as u64);
    }
}

// SAFETY: `alloc` returns nodes that begin with a `NodeHeader` and are freed only by `free`;
// `Page` clamps every slot index, length and heap offset it derives from node contents, so
// torn contents can produce wrong answers (rejected by validation) but never out-of-bounds
// reads, panics or unbounded loops.
unsafe impl NodeRepr for Slotted {
    type Config = SlottedConfig;
    type Probe<'a> = VarProbe<'a>;
    type Owned = VarKey;
    type Batch = super::batch::SlotBatch<Self::Owned>;

    const NAME: &'static str = "slotted";

    #[inline]
    fn probe(key: &VarKey) -> VarProbe<'_> {
        VarProbe::new(&key.bytes, key.tid)
    }

    fn compare(_: &SlottedConfig, a: &VarKey, b: &VarKey) -> CmpOrdering {
        a.cmp(b)
    }

    fn alloc(config: &SlottedConfig, level: u16) -> (NonNull<NodeHeader>, usize) {
        super::alloc_zeroed_node(config.layout(level), level)
    }

    unsafe fn free(config: &SlottedConfig, node: NonNull<NodeHeader>) -> usize {
        // SAFETY: the caller guarantees exclusive access to a node from `alloc`, which used
        // this layout (the level never changes).
        unsafe { super::free_node(node, config.layout(node.as_ref().level())) }
    }

    #[inline]
    fn capacity(node: &NodeHeader, config: &SlottedConfig) -> usize {
        config.capacity(node.level())
    }

    fn search(node: &NodeHeader, config: &SlottedConfig, probe: VarProbe<'_>) -> SearchResult {
        let page = Page::of(node, config);
        let count = node.count().min(page.cap);
        super::prefetch(&page.words[PREFIX_WORDS..PREFIX_WORDS + SLOT_WORDS * count]);
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match page.compare(mid, &probe) {
                CmpOrdering::Less => lo = mid + 1,
                CmpOrdering::Equal => {
                    return SearchResult {
                        pos: mid,
                        found: true,
                    }
                }
                CmpOrdering::Greater => hi = mid,
            }
        }
        SearchResult {
            pos: lo,
            found: false,
        }
    }

    fn key_at(node: &NodeHeader, config: &SlottedConfig, i: usize) -> VarKey {
        Page::of(node, config).key(i)
    }

    #[inline]
    fn key_into(node: &NodeHeader, config: &SlottedConfig, i: usize, out: &mut VarKey) {
        Page::of(node, config).key_into(i, out)
    }

    fn value_at(node: &NodeHeader, config: &SlottedConfig, i: usize) -> u64 {
        let page = Page::of(node, config);
        page.load(page.slot(i) + 1)
    }

    fn set_value(node: &NodeHeader, config: &SlottedConfig, i: usize, value: u64) {
        let page = Page::of(node, config);
        page.words[page.slot(i) + 1].store(value, Ordering::Release);
    }

    fn has_room(node: &NodeHeader, config: &SlottedConfig, probe: Option<VarProbe<'_>>) -> bool {
        let page = Page::of(node, config);
        let needed = probe.map_or(config.max_entry_words(), |p| {
            heap_words(p.bytes.len(), config.with_tid)
        });
        node.count() < page.cap && page.heap_live() + needed <= page.heap
    }

    fn insert_at(
        node: &NodeHeader,
        config: &SlottedConfig,
        i: usize,
        key: VarProbe<'_>,
        value: u64,
    ) {
        let page = Page::of(node, config);
        let count = node.count();
        debug_assert!(count < page.cap && i <= count);
        if page.heap_top() + heap_words(key.bytes.len(), config.with_tid) > page.heap {
            page.compact(count);
        }
        for j in (i..count).rev() {
            let (from, to) = (page.slot(j), page.slot(j + 1));
            for w in 0..SLOT_WORDS {
                page.store(to + w, page.load(from + w));
            }
        }
        page.write_entry(i, &key, value);
        node.set_count(count + 1);
    }

    fn remove_at(node: &NodeHeader, config: &SlottedConfig, i: usize) {
        let page = Page::of(node, config);
        let count = node.count();
        debug_assert!(i < count);
        let freed = page.entry_heap(i).len();
        for j in i + 1..count {
            let (from, to) = (page.slot(j), page.slot(j - 1));
            for w in 0..SLOT_WORDS {
                page.store(to + w, page.load(from + w));
            }
        }
        page.store(HEAP_LIVE, (page.heap_live() - freed) as u64);
        node.set_count(count - 1);
    }

    fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, config: &SlottedConfig) {
        let count = src.count();
        let src_page = Page::of(src, config);
        for i in from..count {
            let key = src_page.key(i);
            let value = src_page.load(src_page.slot(i) + 1);
            let at = dst.count();
            Self::insert_at(dst, config, at, Self::probe(&key), value);
        }
        let moved: usize = (from..count).map(|i| src_page.entry_heap(i).len()).sum();
        src_page.store(HEAP_LIVE, (src_page.heap_live() - moved) as u64);
        src.set_count(from);
    }

    /// Per entry: the head word, the length and heap offset word, and the key's heap words.
    fn key_bytes(node: &NodeHeader, config: &SlottedConfig) -> usize {
        let page = Page::of(node, config);
        let count = node.count().min(page.cap);
        (0..count)
            .map(|i| {
                let (len, _) = page.meta(i);
                16 + 8 * len.saturating_sub(8).div_ceil(8)
            })
            .sum()
    }

    fn split_point(node: &NodeHeader, _: &SlottedConfig) -> usize {
        node.count() / 2
    }

    fn fits_merge(
        left: &NodeHeader,
        right: &NodeHeader,
        extra: usize,
        config: &SlottedConfig,
    ) -> bool {
        let (l, r) = (Page::of(left, config), Page::of(right, config));
        left.count() + right.count() + extra <= l.cap
            && l.heap_live() + r.heap_live() + extra * config.max_entry_words() <= l.heap
    }

    fn is_underfull(node: &NodeHeader, config: &SlottedConfig) -> bool {
        let page = Page::of(node, config);
        node.count() < page.cap / 4 && page.heap_live() < page.heap / 4
    }

    fn check_node(node: &NodeHeader, config: &SlottedConfig) -> Result<(), String> {
        let page = Page::of(node, config);
        let count = node.count();
        if count > page.cap {
            return Err(format!("count {count} exceeds capacity {}", page.cap));
        }
        let (top, live) = (page.load(HEAP_TOP) as usize, page.heap_live());
        if top > page.heap || live > top {
            return Err(format!(
                "heap top {top} / live {live} exceed heap {}",
                page.heap
            ));
        }
        let mut sum = 0;
        for i in 0..count {
            let meta = page.load(page.slot(i) + 2);
            let (len, offset) = (meta as u32 as usize, (meta >> 32) as usize);
            let words = heap_words(len, config.with_tid);
            if len > config.max_key_len || offset < page.heap - top || offset + words > page.heap {
                return Err(format!(
                    "slot {i}: length {len} / heap offset {offset} out of bounds"
                ));
            }
            sum += words;
            let key = page.key(i);
            if config.with_tid != key.tid.is_some() {
                return Err(format!("slot {i}: tid suffix mismatch"));
            }
            if key.bytes.len() >= 8 && word_of(&key.bytes) != page.load(page.slot(i)) {
                return Err(format!("slot {i}: head word disagrees with the key"));
            }
            if i > 0 && page.key(i - 1) >= key {
                return Err(format!("keys out of order at {i}"));
            }
        }
        if sum != live {
            return Err(format!("heap_live {live} but live slots use {sum} words"));
        }
        Ok(())
    }
}
