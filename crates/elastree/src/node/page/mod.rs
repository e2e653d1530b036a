//! The optimized page for variable-length keys (the Bw-tree paper's page organization,
//! sections II to IV): the keys' common prefix factored out, a fixed-width 4-byte mid-key
//! vector compared as big-endian integers, the rest of each key in a suffix bin, and the
//! page's low and high fence keys.
//!
//! * `layout.rs`: the byte layout, its invariants, and the view that reads it through atomics;
//! * `encode.rs`: the mid-key encoding;
//! * `search.rs`: the prefix check and the binary search of the paper's Figure 7;
//! * `edit.rs`: inserts and removes in place;
//! * `build.rs`: rebuilding a page from copied entries, and sizing pages;
//! * `split.rs`: the split point and short separators of section II-C, splits, merges and
//!   growth;
//! * `cut.rs`: leaf splits that move entries when the halves keep the page prefix;
//! * `image.rs`: pages built whole from sorted entries and never edited (the Bw-tree's);
//! * `patch.rs`: such a page rebuilt with a few changes, its entries moved without decoding;
//! * `check.rs`: the invariant walk.
//!
//! # Keys
//!
//! Every key on a page starts with the page prefix: the common prefix of the keys actually
//! on the page (not of the key space the page covers). An insert whose key does not start
//! with it rebuilds the page under the shorter prefix; a split builds both halves, so each
//! gets the longest prefix of its own keys. Non-unique trees compare the tid after the key.
//!
//! # Sizes
//!
//! Pages are not all the same size. A leaf page is built with half again the bytes its
//! entries need; when it is full it is replaced by one half again as large, until it reaches
//! the largest page size, and then by two pages that each hold half of its entries, again
//! with half to spare (a leaf's entries therefore fill between about a third and all of its
//! bytes, most of the time above two thirds). Within a page, the bytes after the header are
//! shared between the entry slots and the bin in the proportion the entries need them,
//! re-partitioned whenever the page is rebuilt, so a page is full only when all of its bytes
//! are used. Inner pages have the largest size; a separator that does not fit makes the tree
//! split the page.

mod batch;
mod build;
mod check;
mod cut;
mod edit;
mod encode;
mod image;
mod layout;
mod patch;
mod policy;
mod search;
mod split;
#[cfg(test)]
mod tests;

use std::alloc::Layout;
use std::cmp::Ordering as CmpOrdering;
use std::ptr::NonNull;

use super::slotted::{VarKey, VarProbe};
use super::{NodeHeader, NodeRepr, SearchResult};
pub use batch::PageBatch;
use build::needed;
pub use encode::MidWidth;
pub use image::{fence, fence_cmp, fence_into, footprint, Footprint, PageImage, PageView};
use layout::{FenceSpots, Form, Page, NO_FENCE};
pub use patch::{Edit, Patched};

/// Where a page's mid-key vector starts: the bytes of its header, which every search reads
/// first (see `layout.rs`).
pub const MIDS_AT: usize = layout::VECTORS_AT;

/// The largest bin a page may have: offsets and lengths are 16 bits.
pub const MAX_BIN_BYTES: usize = u16::MAX as usize;

/// The longest key a page tree accepts: a page must hold two of the longest keys and two
/// fences of that length in a bin of at most [`MAX_BIN_BYTES`].
pub const MAX_PAGE_KEY_LEN: usize = 8 * 1024;

/// Bytes of the first leaf page of a tree: a small index stays small.
const FIRST_LEAF_BYTES: usize = 512;

/// Settings of the pages of one tree.
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
    /// The largest leaf page (index 0) and inner page (index 1), in bytes.
    max_bytes: [usize; 2],
    /// The most entries of a leaf page and of an inner page.
    max_entries: [usize; 2],
    /// What every page's layout depends on: tids, and the mid-keys' width.
    form: Form,
}

impl PageConfig {
    /// Leaf pages of at most `leaf_bytes` and inner pages of `inner_bytes` bytes, holding at
    /// most `leaf_capacity` and `inner_capacity` entries, with mid-keys of `mid` width. A page
    /// is made large enough to hold two of the longest keys and two fences of that length,
    /// whatever its configured size, so that a split always makes progress.
    pub fn new(
        (leaf_capacity, inner_capacity): (usize, usize),
        (leaf_bytes, inner_bytes): (usize, usize),
        max_key_len: usize,
        (with_tid, short_splits, mid): (bool, bool, MidWidth),
    ) -> Self {
        let form = Form {
            with_tid,
            mid,
            factor_prefix: true,
            child_hints: false,
        };
        let tid = if with_tid { 8 } else { 0 };
        // Two keys under a shared prefix, two fences with their tids, and the byte that a
        // key sharing less of the prefix may add to the mid-key encoding.
        let smallest = needed(2, 4 * max_key_len + 2 * tid + 1, form).next_multiple_of(64);
        let size = |configured: usize| configured.max(smallest).next_multiple_of(64);
        let entries = |configured: usize, bytes: usize| configured.clamp(2, form.max_cap(bytes));
        let max_bytes = [size(leaf_bytes), size(inner_bytes)];
        Self {
            max_key_len,
            with_tid,
            short_splits,
            max_bytes,
            max_entries: [
                entries(leaf_capacity, max_bytes[0]),
                entries(inner_capacity, max_bytes[1]),
            ],
            form,
        }
    }

    /// The same settings with pages that keep whole keys: no prefix is ever factored out
    /// (the paper's Base organization, with the mid-key vector kept: the B+-tree's Base
    /// slotted node keeps an 8-byte head per key likewise). Combine with `short_splits`
    /// false for splits in the middle that post whole keys.
    pub fn whole_keys(mut self) -> Self {
        self.form.factor_prefix = false;
        self
    }

    /// The same settings with a child-hint sidecar after every inner page (see
    /// [`PageView::child_hint`]).
    pub fn with_child_hints(mut self) -> Self {
        self.form.child_hints = true;
        self
    }

    /// Whether pages factor out their keys' common prefix (see [`PageConfig::whole_keys`]).
    pub fn factors_prefix(&self) -> bool {
        self.form.factor_prefix
    }

    /// The mid-keys' width.
    pub fn mid_width(&self) -> MidWidth {
        self.form.mid
    }

    /// The largest page at `level`, in bytes.
    #[inline]
    pub fn max_bytes(&self, level: u16) -> usize {
        self.max_bytes[usize::from(level > 0)]
    }

    /// The most entries a page at `level` holds.
    #[inline]
    pub fn max_entries(&self, level: u16) -> usize {
        self.max_entries[usize::from(level > 0)]
    }

    /// These settings, when their pages have the most common form (8-byte mid-keys, no
    /// tids), with that form written as constants: a hot path that reads pages with the
    /// copy, inlined into a branch of its own, makes none of the layout's choices (the
    /// vectors' order and widths) at run time. `None` for other forms.
    ///
    /// Each hot path spells out its own `match` on this (`PageRepr`'s search, value, room and
    /// insert; the Bw-tree's walk, route and lookup). One helper taking the path as a closure
    /// was tried: the constants no longer reached the inlined code (`bw_ops` lookups at 1M
    /// keys 1,299.9M -> 1,432.6M instructions, `page_paths prefix28` loads 599.0M -> 630.8M).
    #[inline(always)]
    pub fn common_form(&self) -> Option<PageConfig> {
        let common = !self.form.with_tid && self.form.mid == MidWidth::Eight;
        common.then_some(PageConfig {
            form: Form {
                with_tid: false,
                mid: MidWidth::Eight,
                factor_prefix: self.form.factor_prefix,
                child_hints: self.form.child_hints,
            },
            ..*self
        })
    }
}

/// Allocates an empty page of `bytes` bytes at `level`: no entries, no fences (unbounded),
/// its bytes shared evenly between slots and bin. Returns it and its size.
pub(super) fn alloc_page(
    config: &PageConfig,
    level: u16,
    bytes: usize,
) -> (NonNull<NodeHeader>, usize) {
    let (node, size) = allocate(config, level, bytes, true);
    // SAFETY: freshly allocated, not yet shared.
    let header = unsafe { node.as_ref() };
    let max_cap = config.form.max_cap(bytes);
    let cap = (max_cap / 2)
        .min(config.max_entries(level))
        .max(2.min(max_cap));
    Page::set_shape(header, bytes, cap, config.form);
    let page = Page::of(header, config.form);
    page.set_fence_spots(FenceSpots {
        low: (0, NO_FENCE),
        high: (0, NO_FENCE),
    });
    page.mark_suffix_free();
    (node, size)
}

/// Allocates a page of `bytes` bytes at `level` for a build that lays out all of it before it
/// is shared ([`PageImage::build`], [`patch`](patch::patch), the pages of a split and a grown
/// page): only its header and shape word are written here (the size, a capacity of 0); the
/// build sets the shape again, writes the meta word, the inline prefix words, the fence word,
/// every vector slot below the count and the bin from its first byte in use, then
/// [`Page::finish_build`] zeroes the rest. Unlike [`alloc_page`]'s, the page's bytes are not
/// zeroed first (a page is most of a consolidation's allocation, and the build overwrites
/// nearly all of it). Returns it and its size.
pub(super) fn alloc_built_page(
    config: &PageConfig,
    level: u16,
    bytes: usize,
) -> (NonNull<NodeHeader>, usize) {
    let (node, size) = allocate(config, level, bytes, false);
    // SAFETY: freshly allocated, not yet shared.
    Page::set_shape(unsafe { node.as_ref() }, bytes, 0, config.form);
    (node, size)
}

/// A page of `bytes` bytes (at most the largest at `level`) with its header written, its
/// other bytes `zeroed` or not.
fn allocate(
    config: &PageConfig,
    level: u16,
    bytes: usize,
    zeroed: bool,
) -> (NonNull<NodeHeader>, usize) {
    debug_assert!(
        bytes <= config.max_bytes(level),
        "page of {bytes} bytes exceeds the largest"
    );
    let sidecar = config.form.sidecar_bytes(bytes, level);
    let layout = Layout::from_size_align(bytes + sidecar, 8).expect("page layout");
    if zeroed {
        super::alloc_zeroed_node(layout, level)
    } else {
        let (node, size) = super::alloc_uninit_node(layout, level);
        if sidecar > 0 {
            // SAFETY: the sidecar is the allocation's last `sidecar` bytes, after the page's
            // `bytes`; the node is not shared yet. Zero hints are no hints.
            unsafe {
                (node.as_ptr() as *mut u8)
                    .add(bytes)
                    .write_bytes(0, sidecar)
            };
        }
        (node, size)
    }
}

/// The optimized page representation.
#[derive(Debug)]
pub struct PageRepr;

// SAFETY: `alloc` returns nodes that begin with a `NodeHeader` and are freed only by `free`;
// `Page` clamps every index, offset and length it derives from node contents, so torn
// contents can produce wrong answers (rejected by validation) but never out-of-bounds reads,
// panics or unbounded loops.
unsafe impl NodeRepr for PageRepr {
    type Config = PageConfig;
    type Probe<'a> = VarProbe<'a>;
    type Owned = VarKey;
    type Batch = batch::PageBatch;

    const NAME: &'static str = "page";

    #[inline]
    fn probe(key: &VarKey) -> VarProbe<'_> {
        VarProbe::new(&key.bytes, key.tid)
    }

    fn compare(_: &PageConfig, a: &VarKey, b: &VarKey) -> CmpOrdering {
        a.cmp(b)
    }

    fn alloc(config: &PageConfig, level: u16) -> (NonNull<NodeHeader>, usize) {
        let bytes = match level {
            // The first leaf: small, it grows.
            0 => FIRST_LEAF_BYTES,
            _ => config.max_bytes(level),
        };
        alloc_page(
            config,
            level,
            bytes.next_multiple_of(64).min(config.max_bytes(level)),
        )
    }

    unsafe fn free(config: &PageConfig, node: NonNull<NodeHeader>) -> usize {
        // SAFETY: the caller guarantees exclusive access to a node from `alloc_page`, whose
        // size its shape word keeps (the sidecar's follows from its level).
        unsafe {
            let header = node.as_ref();
            let bytes = Page::bytes_of(header);
            let bytes = bytes + config.form.sidecar_bytes(bytes, header.level());
            super::free_node(
                node,
                Layout::from_size_align(bytes, 8).expect("page layout"),
            )
        }
    }

    #[inline]
    fn capacity(node: &NodeHeader, config: &PageConfig) -> usize {
        Page::of(node, config.form).cap
    }

    /// The hot paths (search, value, room, insert) read the page with the form as constants
    /// when the tree's pages have the common one ([`PageConfig::common_form`]).
    #[inline]
    fn search(node: &NodeHeader, config: &PageConfig, probe: VarProbe<'_>) -> SearchResult {
        match config.common_form() {
            Some(common) => Page::of(node, common.form).search_inline(probe),
            None => Page::of(node, config.form).search(probe),
        }
    }

    fn key_at(node: &NodeHeader, config: &PageConfig, i: usize) -> VarKey {
        Page::of(node, config.form).key(i)
    }

    #[inline]
    fn key_into(node: &NodeHeader, config: &PageConfig, i: usize, out: &mut VarKey) {
        Page::of(node, config.form).var_key_into(i, out)
    }

    #[inline]
    fn value_at(node: &NodeHeader, config: &PageConfig, i: usize) -> u64 {
        match config.common_form() {
            Some(common) => Page::of(node, common.form).value(i),
            None => Page::of(node, config.form).value(i),
        }
    }

    fn set_value(node: &NodeHeader, config: &PageConfig, i: usize, value: u64) {
        Page::of(node, config.form).values[i].store(value, std::sync::atomic::Ordering::Release);
    }

    const INSERT_FINGER: bool = true;

    fn below_high_fence(node: &NodeHeader, config: &PageConfig, probe: VarProbe<'_>) -> bool {
        let (key, tid) = (probe.bytes(), probe.tid().unwrap_or(0));
        image::fence_cmp(node, config, false, key, tid)
            .is_none_or(|high| high == CmpOrdering::Greater)
    }

    fn has_room(node: &NodeHeader, config: &PageConfig, probe: Option<VarProbe<'_>>) -> bool {
        match config.common_form() {
            Some(common) => edit::has_room(node, &common, probe),
            None => edit::has_room(node, config, probe),
        }
    }

    fn insert_at(node: &NodeHeader, config: &PageConfig, i: usize, key: VarProbe<'_>, value: u64) {
        match config.common_form() {
            Some(common) => edit::insert_at(node, &common, i, key, value),
            None => edit::insert_at(node, config, i, key, value),
        }
    }

    fn remove_at(node: &NodeHeader, config: &PageConfig, i: usize) {
        edit::remove_at(node, config, i)
    }

    /// Entries `from..` of `src` go after `dst`'s own. Fences follow a split or a merge: `dst`
    /// keeps its low fence (an empty `dst` starts at the first moved key) and takes `src`'s
    /// high one; `src` ends below the first moved key. (The tree splits and merges pages with
    /// `split_off` and `merge_from`, which post exact separators as fences.)
    fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, config: &PageConfig) {
        build::with_content(|content| {
            let (s, d) = (Page::of(src, config.form), Page::of(dst, config.form));
            let first_moved = (from < s.count()).then(|| s.key(from));
            content.load(&d, 0, d.count());
            content.load(&s, from, s.count());
            content.low = match d.count() {
                0 => first_moved.clone().or_else(|| d.fence(true)),
                _ => d.fence(true),
            };
            content.high = s.fence(false);
            let moved = content.len();
            build::write(dst, config, content, 0..moved);
            content.clear();
            content.load(&s, 0, from);
            content.low = s.fence(true);
            content.high = first_moved.or_else(|| s.fence(false));
            let kept = content.len();
            build::write(src, config, content, 0..kept);
        })
    }

    fn split_off(
        node: &NodeHeader,
        config: &PageConfig,
        at: usize,
        separator: &VarKey,
        appending: bool,
    ) -> (NonNull<NodeHeader>, usize) {
        split::split_off(node, config, at, separator, appending)
    }

    fn merge_from(
        left: &NodeHeader,
        right: &NodeHeader,
        config: &PageConfig,
        separator: Option<&VarKey>,
    ) {
        split::merge_from(left, right, config, separator)
    }

    /// The prefix once, the fences, and per entry its mid-key, its suffix location and its
    /// suffix.
    fn key_bytes(node: &NodeHeader, config: &PageConfig) -> usize {
        let per_entry = config.form.mid.bytes() + 4;
        let page = Page::of(node, config.form);
        let count = page.count();
        let suffixes: usize = (0..count).map(|i| page.suffix_at(i).1).sum();
        let fences: usize = [page.fence(true), page.fence(false)]
            .iter()
            .flatten()
            .map(|f| f.bytes.len())
            .sum();
        page.meta().prefix_len + fences + per_entry * count + suffixes
    }

    fn split_point(node: &NodeHeader, config: &PageConfig) -> usize {
        split::split_point(node, config)
    }

    /// With short splits, the shortest `s` with `key(at - 1) < s <= key(at)`.
    fn separator(node: &NodeHeader, config: &PageConfig, at: usize) -> VarKey {
        let page = Page::of(node, config.form);
        let right = page.key(at);
        if at == 0 {
            return right;
        }
        split::shortest_separator(&page.key(at - 1), right, config.short_splits)
    }

    fn fits_merge(
        left: &NodeHeader,
        right: &NodeHeader,
        extra: usize,
        config: &PageConfig,
    ) -> bool {
        split::fits_merge(left, right, extra, config)
    }

    /// Less than a quarter of the page's bytes in use.
    fn is_underfull(node: &NodeHeader, config: &PageConfig) -> bool {
        let page = Page::of(node, config.form);
        4 * needed(page.count(), page.meta().live, config.form) < page.bytes
    }

    fn check_node(node: &NodeHeader, config: &PageConfig) -> Result<(), String> {
        check::check_page(node, config)
    }

    fn check_fences(
        node: &NodeHeader,
        config: &PageConfig,
        low: Option<&VarKey>,
        high: Option<&VarKey>,
    ) -> Result<(), String> {
        check::check_fences(node, config, low, high)
    }
}
