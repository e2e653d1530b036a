//! Building pages: the scratch buffer a rebuild copies entries into ([`Content`]), the shape
//! a page of given contents gets, and the writer that lays contents out in a page.
//!
//! Every change that is not a plain insert or remove goes through here: an insert whose key
//! does not share the page prefix or that finds a vector or the bin full (the page is
//! rebuilt in place, its capacity re-partitioned), splits, merges and growth (a page built
//! from the entries of one or two others). Entries are copied out once, with whole keys, into
//! a per-thread buffer, so a rebuild allocates nothing once the buffer has grown.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::Ordering;

use super::super::bytes::common_prefix;
use super::super::bytes::key_word;
use super::super::slotted::VarKey;
use super::super::NodeHeader;
use super::encode::MidWidth;
use super::layout::{
    FenceSpots, Form, Meta, Page, FIXED_BYTES, INLINE_BYTES, INLINE_WORDS, NO_FENCE,
};
use super::patch::copy_run;
use super::PageConfig;

/// How much room a new page gets beyond its contents: a half, so that a page split in two
/// grows about once before it splits again (each growth copies the page) while wasting at
/// most a third of it. Measured against a quarter (three growths per split) with
/// `valgrind --tool=callgrind --toggle-collect='page_paths::load'
/// target/release/examples/page_paths <set> 200000 prefix-split 1 8 none`: load
/// instructions 8-10% fewer (email 806.2M -> 737.3M, url 1,030.0M -> 935.5M, prefix28
/// 802.6M -> 741.5M), bytes per key 1-10% more (email 40.6 -> 44.5, sha1 37.8 -> 38.2).
pub(super) const GROWTH_DIVISOR: usize = 2;

/// Pages are sized in whole cache lines.
const LINE: usize = 64;

/// One entry of [`Content`]: where its key is, its tid (non-unique trees) and its value.
#[derive(Debug, Clone, Copy)]
struct Item {
    start: usize,
    len: usize,
    tid: u64,
    value: u64,
}

/// Entries copied out of pages, their keys in one buffer, with the fences that the page built
/// from them gets (`None`: unbounded).
#[derive(Default)]
pub(super) struct Content {
    keys: Vec<u8>,
    items: Vec<Item>,
    /// The low fence: the smallest key the page may hold.
    pub low: Option<VarKey>,
    /// The high fence: every key on the page is below it.
    pub high: Option<VarKey>,
    /// The bin's new contents, assembled before they are stored.
    image: Vec<u8>,
}

thread_local! {
    /// Each thread's rebuild buffer: it grows to the largest page the thread rebuilt and is
    /// reused from rebuild to rebuild.
    static SCRATCH: RefCell<Content> = RefCell::new(Content::default());
}

impl Content {
    /// The scratch buffer for a bin's new contents.
    pub fn image(&mut self) -> &mut Vec<u8> {
        &mut self.image
    }
}

/// Runs `f` with this thread's (cleared) rebuild buffer.
pub(super) fn with_content<T>(f: impl FnOnce(&mut Content) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut content) => {
            content.clear();
            f(&mut content)
        }
        // Only a rebuild inside a rebuild could get here; none does, but a fresh buffer is
        // correct anyway.
        Err(_) => f(&mut Content::default()),
    })
}

impl Content {
    /// Drops every entry and fence (keeps the buffers).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.items.clear();
        self.low = None;
        self.high = None;
    }

    /// Makes room for `entries` more entries with `key_bytes` more key bytes in all.
    pub fn reserve(&mut self, entries: usize, key_bytes: usize) {
        self.items.reserve(entries);
        self.keys.reserve(key_bytes);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Entry `i`'s key.
    pub fn key(&self, i: usize) -> &[u8] {
        let item = &self.items[i];
        &self.keys[item.start..item.start + item.len]
    }

    /// Entry `i`'s tid (0 in unique trees).
    pub fn tid(&self, i: usize) -> u64 {
        self.items[i].tid
    }

    /// Entry `i`'s value.
    pub fn value(&self, i: usize) -> u64 {
        self.items[i].value
    }

    /// Entry `i` as an owned key.
    pub fn owned(&self, i: usize, with_tid: bool) -> VarKey {
        VarKey {
            bytes: self.key(i).to_vec(),
            tid: with_tid.then(|| self.tid(i)),
        }
    }

    /// Appends an entry.
    pub fn push(&mut self, key: &[u8], tid: u64, value: u64) {
        self.items.push(Item {
            start: self.keys.len(),
            len: key.len(),
            tid,
            value,
        });
        self.keys.extend_from_slice(key);
    }

    /// Appends entries `from..to` of `page` (clamped to its count).
    pub fn load(&mut self, page: &Page<'_>, from: usize, to: usize) {
        // The prefix once, then each entry's remainder after a copy of it.
        let mut prefix = std::mem::take(&mut self.image);
        prefix.clear();
        page.prefix_into(page.meta(), &mut prefix);
        for i in from..to.min(page.count()) {
            let start = self.keys.len();
            self.keys.extend_from_slice(&prefix);
            page.rest_into(i, &mut self.keys);
            self.items.push(Item {
                start,
                len: self.keys.len() - start,
                tid: page.tid(i),
                value: page.value(i),
            });
        }
        self.image = prefix;
    }

    /// Takes `page`'s fences.
    pub fn load_fences(&mut self, page: &Page<'_>) {
        self.low = page.fence(true);
        self.high = page.fence(false);
    }

    /// The prefix every key in `range` shares: for sorted entries, the first and last
    /// keys' common prefix.
    pub fn prefix_len(&self, range: Range<usize>, form: Form) -> usize {
        match range.len() {
            _ if !form.factor_prefix => 0,
            0 => 0,
            _ => common_prefix(self.key(range.start), self.key(range.end - 1)),
        }
    }

    /// The prefix every key in `range` shares with its first key, for entries copied under
    /// an optimistic read: they may be torn and unsorted, so every key is compared, and
    /// sizing them never overruns a key.
    pub fn torn_prefix_len(&self, range: Range<usize>, form: Form) -> usize {
        let Some(first) = range.clone().next().filter(|_| form.factor_prefix) else {
            return 0;
        };
        let head = self.key(first);
        range.skip(1).fold(head.len(), |shared, i| {
            shared.min(common_prefix(&head[..shared], self.key(i)))
        })
    }

    /// Bin bytes a page holding entries `range` under a prefix of `prefix_len` bytes needs:
    /// the prefix, the fences and every suffix.
    pub fn bin_bytes(&self, range: Range<usize>, prefix_len: usize, form: Form) -> usize {
        let suffixes: usize = range
            .map(|i| {
                let key = self.key(i);
                let rest = &key[prefix_len.min(key.len())..];
                rest.len() - form.mid.encode(rest).1
            })
            .sum();
        prefix_len
            + fence_bytes(self.low.as_ref(), form.with_tid)
            + fence_bytes(self.high.as_ref(), form.with_tid)
            + suffixes
    }

    /// The bytes a page holding entries `range` needs at least.
    pub fn needed_bytes(&self, range: Range<usize>, form: Form) -> usize {
        let prefix = self.prefix_len(range.clone(), form);
        let bin = self.bin_bytes(range.clone(), prefix, form);
        needed(range.len(), bin, form)
    }
}

/// Bin bytes a fence takes.
fn fence_bytes(fence: Option<&VarKey>, with_tid: bool) -> usize {
    fence.map_or(0, |f| f.bytes.len() + if with_tid { 8 } else { 0 })
}

/// The bytes a page holding `count` entries and `bin` bytes in its bin needs at least.
pub(super) fn needed(count: usize, bin: usize, form: Form) -> usize {
    FIXED_BYTES + form.vector_bytes(count) + bin.next_multiple_of(8)
}

/// The capacity of a page of `bytes` bytes holding `count` entries and `bin` bin bytes: the
/// free bytes are shared between entry slots and the bin in the proportion the contents
/// have, so that both run out at about the same time.
pub(super) fn partition(
    bytes: usize,
    count: usize,
    bin: usize,
    form: Form,
    max_entries: usize,
) -> usize {
    let slot = form.slot_bytes();
    let free = bytes.saturating_sub(needed(count, bin, form));
    let slots = count * slot;
    let share = match count {
        0 => free / 2,
        _ => free * slots / (slots + bin),
    };
    (count + share / slot)
        .min(max_entries)
        .min(form.max_cap(bytes))
        .max(count)
}

/// The size of a new page for contents needing `needed` bytes, with room to grow by
/// [`GROWTH_DIVISOR`], in whole cache lines, at most `max_bytes` (and never below `needed`).
pub(super) fn grown_bytes(needed: usize, max_bytes: usize) -> usize {
    let target = (needed + needed / GROWTH_DIVISOR).next_multiple_of(LINE);
    target.min(max_bytes).max(needed.next_multiple_of(8))
}

/// Writes entries `range` of `content`, with its fences, into `node` (a page of `config`;
/// write lock held, or unpublished), choosing its prefix (the entries' common prefix) and
/// re-partitioning its bytes between entry slots and bin. The entries are sorted and fit
/// (`needed_bytes` at most the page's size).
pub(super) fn write(
    node: &NodeHeader,
    config: &PageConfig,
    content: &mut Content,
    range: Range<usize>,
) {
    let (form, with_tid) = (config.form, config.with_tid);
    let count = range.len();
    let prefix_len = content.prefix_len(range.clone(), form);
    let bin_need = content.bin_bytes(range.clone(), prefix_len, form);
    let bytes = Page::bytes_of(node);
    debug_assert!(
        needed(count, bin_need, form) <= bytes,
        "contents overflow the page"
    );
    let max_entries = config.max_entries(node.level());
    let cap = partition(bytes, count, bin_need, form, max_entries);
    Page::set_shape(node, bytes, cap, form);
    let page = Page::of(node, form);

    // The bin's contents, laid out up to its end: the suffixes in entry order, the fences,
    // the prefix. `image` starts at the word that holds the first of them.
    let start = page.bin_len - bin_need;
    let mut image = std::mem::take(&mut content.image);
    image.clear();
    image.resize(start % 8, 0);
    let at = |image: &Vec<u8>| start + image.len() - start % 8;
    for (slot, i) in range.clone().enumerate() {
        let key = content.key(i);
        let rest = &key[prefix_len..];
        let (mid, in_mid) = form.mid.encode(rest);
        let suffix = &rest[in_mid..];
        let offset = at(&image);
        image.extend_from_slice(suffix);
        page.set_entry(
            slot,
            mid,
            (offset, suffix.len()),
            content.tid(i),
            content.value(i),
        );
    }
    let spot = |fence: Option<&VarKey>, image: &mut Vec<u8>| match fence {
        None => (0, NO_FENCE),
        Some(f) => {
            let offset = at(image);
            image.extend_from_slice(&f.bytes);
            if with_tid {
                image.extend_from_slice(&f.tid.unwrap_or(0).to_be_bytes());
            }
            (offset, f.bytes.len())
        }
    };
    let spots = FenceSpots {
        low: spot(content.low.as_ref(), &mut image),
        high: spot(content.high.as_ref(), &mut image),
    };
    let prefix_offset = at(&image);
    if count > 0 {
        image.extend_from_slice(&content.key(range.start)[..prefix_len]);
    }
    debug_assert_eq!(at(&image), page.bin_len);
    page.bin.store_words(start / 8, &image);
    content.image = image;

    let prefix = if count > 0 {
        &content.key(range.start)[..prefix_len]
    } else {
        &[][..]
    };
    for w in 0..INLINE_WORDS {
        page.set_inline_word(
            w,
            key_word(&prefix[..prefix.len().min(INLINE_BYTES)], 8 * w),
        );
    }
    page.set_fence_spots(spots);
    page.set_meta(Meta {
        prefix_len,
        prefix_offset,
        top: bin_need,
        live: bin_need,
    });
    node.set_count(count);
    page.mark_suffix_free();
}

/// Copies page `src` into `dst`, an unpublished page with room for `src`'s live bytes
/// (allocated by `alloc_built_page`: what the copy does not write is zeroed after it): the
/// same prefix, entries and fences, its bytes re-partitioned between slots and bin, and the
/// bin rewritten with the suffixes in key order and without dead bytes (inserts append
/// suffixes where the bin has room, so a scan that reads neighbouring keys would otherwise
/// read bin words all over the page). No key is decoded: the mid-keys and suffixes move as
/// they are. `image` is scratch for the new bin. Write lock held on `src`.
pub(super) fn copy_grown(
    src: &NodeHeader,
    dst: &NodeHeader,
    config: &PageConfig,
    image: &mut Vec<u8>,
) {
    let form = config.form;
    let from = Page::of(src, form);
    let count = from.count();
    let meta = from.meta();
    let bytes = Page::bytes_of(dst);
    debug_assert!(needed(count, meta.live, form) <= bytes);
    let max_entries = config.max_entries(dst.level());
    let cap = partition(bytes, count, meta.live, form, max_entries);
    Page::set_shape(dst, bytes, cap, form);
    let to = Page::of(dst, form);
    // The new bin as `write` lays it out: suffixes in entry order, fences, prefix.
    let start = to.bin_len - meta.live;
    image.clear();
    image.resize(start % 8, 0);
    copy_run(&from, &to, 0..count, 0, image, start);
    finish_moved_bin(
        &from,
        &to,
        meta,
        meta.live,
        (start, image),
        [FenceFrom::Old; 2],
    );
    dst.set_count(count);
    to.finish_build();
}

/// Where the fence of a page moved from another comes from.
#[derive(Clone, Copy)]
pub(super) enum FenceFrom<'a> {
    /// The old page's fence, moved.
    Old,
    /// A new fence (`None`: unbounded), as a split sets the separator.
    New(Option<&'a VarKey>),
}

/// The end of a page copied, patched or split off from page `from` into `to` with the same
/// prefix: appends the low and high fences (`fences`) and `from`'s prefix to `image` (the
/// new bin laid out from bin byte `start` on, its suffixes already in), stores the bin, and
/// sets `to`'s inline prefix words, fence spots and meta (`meta` is `from`'s; `live`: the
/// new bin's bytes, all of them live).
pub(super) fn finish_moved_bin(
    from: &Page<'_>,
    to: &Page<'_>,
    meta: Meta,
    live: usize,
    (start, image): (usize, &mut Vec<u8>),
    fences: [FenceFrom<'_>; 2],
) {
    let at = |image: &Vec<u8>| start + image.len() - start % 8;
    let with_tid = to.form.with_tid;
    let tid_bytes = if with_tid { 8 } else { 0 };
    let old_spots = from.fence_spots();
    let mut place = |fence: FenceFrom<'_>, (offset, len): (usize, usize)| match fence {
        FenceFrom::Old if len == NO_FENCE => (0, NO_FENCE),
        FenceFrom::Old => {
            let new_offset = at(image);
            from.bin.extend_into(offset, len + tid_bytes, image);
            (new_offset, len)
        }
        FenceFrom::New(None) => (0, NO_FENCE),
        FenceFrom::New(Some(key)) => {
            let new_offset = at(image);
            image.extend_from_slice(&key.bytes);
            if with_tid {
                image.extend_from_slice(&key.tid.unwrap_or(0).to_be_bytes());
            }
            (new_offset, key.bytes.len())
        }
    };
    let [low, high] = fences;
    let spots = FenceSpots {
        low: place(low, old_spots.low),
        high: place(high, old_spots.high),
    };
    let prefix_offset = at(image);
    from.bin
        .extend_into(meta.prefix_offset, meta.prefix_len, image);
    debug_assert_eq!(at(image), to.bin_len);
    to.bin.store_words(start / 8, image);
    for w in 0..INLINE_WORDS {
        to.set_inline_word(w, from.inline_word(w));
    }
    to.set_fence_spots(spots);
    to.set_meta(Meta {
        prefix_offset,
        top: live,
        live,
        ..meta
    });
}

/// Gives `node` a capacity of `cap` entries in place, its bin taking or giving the bytes the
/// slots give or take: the vectors move (the mid-keys stay put), the bin's handed-out bytes
/// stay where they are at the page's end and every offset into them is shifted. No key is
/// decoded: an entry slot or bin bytes found short while the page still has room cost a move
/// of the vectors, not a rebuild. Write lock held; `count <= cap` and the new bin holds
/// everything handed out.
pub(super) fn relayout(node: &NodeHeader, config: &PageConfig, cap: usize) {
    let (form, with_tid) = (config.form, config.with_tid);
    let old = Page::of(node, form);
    let count = old.count();
    let meta = old.meta();
    let spots = old.fence_spots();
    let bytes = old.bytes;
    debug_assert!(count <= cap && cap <= form.max_cap(bytes));
    Page::set_shape(node, bytes, cap, form);
    let new = Page::of(node, form);
    debug_assert!(meta.top <= new.bin_len);
    // Offsets count from the bin's start, which moves by the bytes the slots gain.
    let shift = |offset: usize| offset + new.bin_len - old.bin_len;
    let loc = |i: usize| {
        let (offset, len) = old.suffix_at(i);
        ((shift(offset) as u32) << 16) | len as u32
    };
    // The vectors after the mid-keys, in address order (see `layout.rs`). Each moves away
    // from the mid-keys when the capacity grows (so the furthest moves first, each from its
    // end) and towards them when it shrinks (the nearest first, each from its start); either
    // way no vector is overwritten before it has moved.
    #[derive(Clone, Copy)]
    enum Vector {
        Locs,
        Values,
        Tids,
    }
    let order = match form.mid {
        MidWidth::Four => [Vector::Locs, Vector::Values, Vector::Tids],
        MidWidth::Eight => [Vector::Values, Vector::Tids, Vector::Locs],
    };
    let move_one = |vector: Vector, i: usize| match vector {
        Vector::Locs => new.locs[i].store(loc(i), Ordering::Relaxed),
        Vector::Values => new.values[i].store(old.value(i), Ordering::Relaxed),
        Vector::Tids if with_tid => new.tids[i].store(old.tid(i), Ordering::Relaxed),
        Vector::Tids => {}
    };
    if cap > old.cap {
        for &vector in order.iter().rev() {
            for i in (0..count).rev() {
                move_one(vector, i);
            }
        }
    } else {
        for &vector in &order {
            for i in 0..count {
                move_one(vector, i);
            }
        }
    }
    let moved = |(offset, len): (usize, usize)| match len {
        NO_FENCE => (0, NO_FENCE),
        _ => (shift(offset), len),
    };
    new.set_fence_spots(FenceSpots {
        low: moved(spots.low),
        high: moved(spots.high),
    });
    new.set_meta(Meta {
        prefix_offset: shift(meta.prefix_offset),
        ..meta
    });
    new.mark_suffix_free();
}

/// The capacity that shares the free bytes of `node` between slots and bin after one more
/// entry with a suffix of `suffix_len` bytes (see `partition`), if that entry then fits
/// without rebuilding the bin (its handed-out bytes, dead ones included, stay).
pub(super) fn capacity_for_one_more(
    node: &NodeHeader,
    config: &PageConfig,
    suffix_len: usize,
) -> Option<usize> {
    let page = Page::of(node, config.form);
    let count = page.count();
    let top = page.meta().top + suffix_len;
    if needed(count + 1, top, config.form) > page.bytes {
        return None;
    }
    let cap = partition(
        page.bytes,
        count + 1,
        top,
        config.form,
        config.max_entries(node.level()),
    );
    Some(cap)
}
