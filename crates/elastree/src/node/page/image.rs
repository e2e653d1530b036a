//! Pages built whole and never edited in place, for trees that replace a page instead of
//! changing it (the Bw-tree's consolidation): [`PageImage`] collects sorted entries and
//! fences and builds a page of exactly the bytes they need, chooses split points with the
//! page's own rule, and reads a built page's fences without copying them.

use std::cmp::Ordering as CmpOrdering;
use std::ops::Range;
use std::ptr::NonNull;

use super::super::slotted::{VarKey, VarProbe};
use super::super::{NodeHeader, SearchResult};
use super::build::{needed, write, Content};
use super::layout::{Form, Page};
use super::split::{choose_split, shortest_separator};
use super::{alloc_built_page, PageConfig};

/// Sorted entries with the fences of the page (or pages) to be built from them. Entries are
/// pushed in ascending (key, tid) order; the image keeps their bytes in one buffer.
#[derive(Default)]
pub struct PageImage {
    content: Content,
}

impl PageImage {
    /// Drops every entry and fence, keeping the buffers.
    pub fn clear(&mut self) {
        self.content.clear();
    }

    /// Makes room for `entries` more entries with `key_bytes` more key bytes in all.
    pub fn reserve(&mut self, entries: usize, key_bytes: usize) {
        self.content.reserve(entries, key_bytes);
    }

    /// Appends an entry; `tid` is 0 in unique trees.
    #[inline]
    pub fn push(&mut self, key: &[u8], tid: u64, value: u64) {
        self.content.push(key, tid, value);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.content.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.content.len() == 0
    }

    /// Entry `i`'s key bytes.
    pub fn key(&self, i: usize) -> &[u8] {
        self.content.key(i)
    }

    /// Entry `i`'s tid (0 in unique trees).
    pub fn tid(&self, i: usize) -> u64 {
        self.content.tid(i)
    }

    /// Entry `i`'s value.
    pub fn value(&self, i: usize) -> u64 {
        self.content.value(i)
    }

    /// Entry `i` as an owned key (with its tid when `config` keeps tids).
    pub fn owned(&self, i: usize, config: &PageConfig) -> VarKey {
        self.content.owned(i, config.with_tid)
    }

    /// Whether entries `range` with fences `low`/`high` fit one page at `level`.
    pub fn fits(
        &mut self,
        config: &PageConfig,
        level: u16,
        range: Range<usize>,
        (low, high): (Option<&VarKey>, Option<&VarKey>),
    ) -> bool {
        if range.len() > config.max_entries(level) {
            return false;
        }
        self.content.low = low.cloned();
        self.content.high = high.cloned();
        self.content.needed_bytes(range, config.form) <= config.max_bytes(level)
    }

    /// Builds a page at `level` holding entries `range` (which fit, see [`Self::fits`]) with
    /// fences `low`/`high`, of exactly the bytes they need (rounded to words): it is never
    /// inserted into. Returns it unpublished, with its size.
    pub fn build(
        &mut self,
        config: &PageConfig,
        level: u16,
        range: Range<usize>,
        (low, high): (Option<&VarKey>, Option<&VarKey>),
    ) -> (NonNull<NodeHeader>, usize) {
        self.content.low = low.cloned();
        self.content.high = high.cloned();
        let bytes = self
            .content
            .needed_bytes(range.clone(), config.form)
            .max(needed(0, 0, config.form))
            .next_multiple_of(8)
            .min(config.max_bytes(level));
        let (node, size) = alloc_built_page(config, level, bytes);
        // SAFETY: freshly allocated, not yet shared.
        let header = unsafe { node.as_ref() };
        write(header, config, &mut self.content, range);
        Page::of(header, config.form).finish_build();
        (node, size)
    }

    /// A copy of `base` (an immutable page) with `edits` applied (sorted by key and tid,
    /// each key once), built without decoding `base`'s keys (see `patch`);
    /// `None` when that cannot be done (a key outside the page prefix, no entry left, or a
    /// result that does not fit one page: then collect the entries and [`Self::build`]).
    /// The image's entries are not used; its buffers serve as scratch.
    pub fn patch(
        &mut self,
        config: &PageConfig,
        base: &NodeHeader,
        edits: &[super::Edit<'_>],
    ) -> Option<super::Patched> {
        super::patch::patch(config, base, edits, self.content.image())
    }

    /// Splits leaf `base` (an immutable page with at least 2 entries: published and never
    /// changed, or not shared) in two new pages by moving its entries as they are
    /// (`cut`'s `split_moved`: the split point chosen from the page itself,
    /// only the two keys around it decoded), with the separator between them. `None`, with
    /// nothing allocated, when a half would get a longer prefix than `base` has or would
    /// not fit one page: then collect the entries and rebuild. The halves may have more
    /// bytes than their entries need (they are sized to take inserts); the image's entries
    /// are not used, its buffers serve as scratch.
    pub fn split_moved(
        &mut self,
        config: &PageConfig,
        base: &NodeHeader,
    ) -> Option<(NonNull<NodeHeader>, VarKey, NonNull<NodeHeader>)> {
        let page = Page::of(base, config.form);
        if base.level() != 0 || page.count() < 2 {
            return None;
        }
        super::cut::split_moved(&page, config, self.content.image())
            .map(|(left, separator, right, _)| (left, separator, right))
    }

    /// Where to split the image's entries (at least 2) with the page's rule (the middle, or
    /// with short splits the point of section II-C), and the separator the right half starts
    /// at (see [`Self::separator`]).
    pub fn split(&self, config: &PageConfig, leaf: bool) -> (usize, VarKey) {
        let at = choose_split(&self.content, leaf, config.short_splits).clamp(1, self.len() - 1);
        (at, self.separator(config, leaf, at))
    }

    /// The separator of a split before entry `at` (`1 <= at < len`): for a leaf the shortest
    /// key between the halves (with short splits), for an inner page entry `at`'s key.
    pub fn separator(&self, config: &PageConfig, leaf: bool, at: usize) -> VarKey {
        let right = self.owned(at, config);
        if leaf {
            shortest_separator(&self.owned(at - 1, config), right, config.short_splits)
        } else {
            right
        }
    }
}

/// How page `node`'s low fence (`low`) or high fence compares with `(key, tid)` (the tid
/// only when the page keeps tids): `None` when that side is unbounded. Reads no more than the
/// fence's bytes; tolerant of torn contents (clamped like every page read).
#[inline]
pub fn fence_cmp(
    node: &NodeHeader,
    config: &PageConfig,
    low: bool,
    key: &[u8],
    tid: u64,
) -> Option<CmpOrdering> {
    fence_cmp_in(node, config.form, low, key, tid)
}

/// One page's layout located once, for a walk that asks it several things (its fences, a
/// search, a value): each of [`PageRepr`](super::PageRepr)'s functions locates it again.
/// Tolerant of torn contents like every page read.
pub struct PageView<'n> {
    page: Page<'n>,
}

impl<'n> PageView<'n> {
    /// The view of `node`, a page of `config`.
    #[inline]
    pub fn of(node: &'n NodeHeader, config: &PageConfig) -> Self {
        PageView {
            page: Page::of(node, config.form),
        }
    }

    /// Entries on the page.
    #[inline]
    pub fn count(&self) -> usize {
        self.page.count()
    }

    /// Searches for `probe`.
    #[inline]
    pub fn search(&self, probe: VarProbe<'_>) -> SearchResult {
        self.page.search(probe)
    }

    /// [`Self::search`] inlined into the caller (see `Page::search_inline`).
    #[inline(always)]
    pub fn search_inline(&self, probe: VarProbe<'_>) -> SearchResult {
        self.page.search_inline(probe)
    }

    /// [`Self::search_inline`] without loading the mid-keys first (see
    /// `Page::search_loading`).
    #[inline(always)]
    pub fn search_loaded(&self, probe: VarProbe<'_>) -> SearchResult {
        self.page.search_loading(probe, false, false)
    }

    /// [`Self::search_loaded`] for a caller that reads the found entry's child hint next
    /// ([`Self::child_hint`]): the hints of the last candidates start loading with their
    /// values.
    #[inline(always)]
    pub fn search_routing(&self, probe: VarProbe<'_>) -> SearchResult {
        self.page.search_loading(probe, false, true)
    }

    /// Entry `i`'s value (0 past the capacity).
    #[inline]
    pub fn value(&self, i: usize) -> u64 {
        self.page.value(i)
    }

    /// Entry `i`'s child hint, in an inner page of a tree that keeps them (see
    /// [`PageConfig::with_child_hints`](super::PageConfig::with_child_hints)).
    #[inline]
    pub fn child_hint(&self, i: usize) -> Option<&'n std::sync::atomic::AtomicU64> {
        self.page.hint(i)
    }

    /// Entry `i`'s key (with its tid when the page keeps tids) into `out`, reusing its buffer.
    #[inline]
    pub fn key_into(&self, i: usize, out: &mut VarKey) {
        self.page.var_key_into(i, out)
    }

    /// How the low fence (`low`) or high fence compares with `(key, tid)` (the tid only when
    /// the page keeps tids): `None` when that side is unbounded.
    ///
    /// Out of line, from the page's address alone: a hot path reads a fence only at a
    /// page's edges, and a view passed by reference would have to be spelled out in memory
    /// on every path (the view's fields are its page's located vectors).
    #[inline]
    pub fn fence_cmp(&self, low: bool, key: &[u8], tid: u64) -> Option<CmpOrdering> {
        fence_cmp_in(self.page.node, self.page.form, low, key, tid)
    }
}

/// [`PageView::fence_cmp`] of page `node`, whose pages have `form`.
#[inline(never)]
fn fence_cmp_in(
    node: &NodeHeader,
    form: Form,
    low: bool,
    key: &[u8],
    tid: u64,
) -> Option<CmpOrdering> {
    let page = &Page::of(node, form);
    let (offset, len) = page.fence_span(low)?;
    Some(match page.bin.compare(offset, len, key) {
        CmpOrdering::Equal if page.with_tid() => page.bin.window(offset + len).cmp(&tid),
        other => other,
    })
}

/// Page `node`'s low fence (`low`) or high fence, `None` when unbounded.
pub fn fence(node: &NodeHeader, config: &PageConfig, low: bool) -> Option<VarKey> {
    Page::of(node, config.form).fence(low)
}

/// What a page takes: see [`footprint`].
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    /// Its bytes (the sidecar's included).
    pub bytes: usize,
    /// Its entries.
    pub count: usize,
    /// The length of the prefix its keys share, stored once.
    pub prefix_len: usize,
}

/// Page `node`'s bytes, entries and stored prefix: what a merge needs to bound the page it
/// would make (each entry moved into a page without that prefix takes it back).
pub fn footprint(node: &NodeHeader, config: &PageConfig) -> Footprint {
    let bytes = Page::bytes_of(node);
    let meta = Page::meta_of(node);
    Footprint {
        bytes: bytes + config.form.sidecar_bytes(bytes, node.level()),
        count: Page::of(node, config.form).count(),
        prefix_len: meta.prefix_len,
    }
}

/// Copies page `node`'s low fence (`low`) or high fence into `out` (reusing its buffer);
/// `false` when that side is unbounded (`out` then unchanged).
pub fn fence_into(node: &NodeHeader, config: &PageConfig, low: bool, out: &mut VarKey) -> bool {
    let page = Page::of(node, config.form);
    let Some((offset, len)) = page.fence_span(low) else {
        return false;
    };
    out.bytes.clear();
    page.bin.extend_into(offset, len, &mut out.bytes);
    out.tid = config.with_tid.then(|| page.bin.window(offset + len));
    true
}
