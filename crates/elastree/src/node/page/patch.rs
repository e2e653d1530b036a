//! Pages patched rather than rebuilt: a new page holding an immutable page's entries with a few
//! sorted changes applied (the Bw-tree's consolidation of a chain of inserts and deletes). No key
//! of the old page is decoded or compared: its prefix, fences, mid-keys and suffixes move as they
//! are, and only the changed keys are located (one search each, unless the caller knows where they
//! go) and encoded. The page prefix is kept, so every changed key must start with it; the result
//! has exactly the bytes it needs, like [`super::PageImage::build`]'s.

use std::cmp::Ordering as CmpOrdering;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use smallvec::SmallVec;

use super::super::slotted::VarProbe;
use super::super::{NodeHeader, SearchResult};
use super::build::{finish_moved_bin, needed, partition, FenceFrom};
use super::layout::{Mids, Page};
use super::{alloc_built_page, PageConfig};

/// One change to a page's entries: `key` (with `tid`, 0 unless the pages keep tids) gets
/// `value`, inserted or replacing the key's, or is removed (`None`; nothing if absent).
#[derive(Debug, Clone, Copy)]
pub struct Edit<'a> {
    /// The key bytes.
    pub key: &'a [u8],
    /// The tid (0 in unique trees).
    pub tid: u64,
    /// The new value, or `None` to remove the key.
    pub value: Option<u64>,
    /// What a search of the page for the key returns, if the caller knows it (its position,
    /// and whether the key is there): the patch then does not search. A wrong position
    /// makes a wrong page (never an out-of-bounds access).
    pub at: Option<(usize, bool)>,
}

/// A page built by `patch`, unpublished.
#[derive(Debug)]
pub struct Patched {
    /// The page.
    pub node: NonNull<NodeHeader>,
    /// Its size in bytes.
    pub size: usize,
    /// Its entries.
    pub count: usize,
}

/// Where an edit goes in the old page: the position of its key (`found`) or of the first
/// key above it, and its key's mid-key and the bytes the mid-key holds.
struct Spot {
    pos: usize,
    found: bool,
    mid: u64,
    in_mid: usize,
}

/// Builds a page at `base`'s level holding `base`'s entries with `edits` applied (sorted by
/// key and tid, each key once), `base`'s prefix and fences, and its bytes sized exactly as
/// [`super::PageImage::build`] sizes a page. `base` does not change meanwhile (it is
/// published and immutable, or not shared). `scratch` holds the new bin while it is laid
/// out. `None`, with nothing allocated, when an edit's key does not start with the page
/// prefix, when no entry would be left, or when the result would not fit one page (the
/// caller then rebuilds from whole keys, and splits).
pub(super) fn patch(
    config: &PageConfig,
    base: &NodeHeader,
    edits: &[Edit<'_>],
    scratch: &mut Vec<u8>,
) -> Option<Patched> {
    let form = config.form;
    let from = Page::of(base, form);
    let meta = from.meta();
    let count = from.count();
    let level = base.level();
    let mut spots: SmallVec<[Spot; 16]> = SmallVec::with_capacity(edits.len());
    // Entries and live bin bytes of the result.
    let (mut new_count, mut bin) = (count, meta.live);
    for edit in edits {
        if from.against_prefix(meta, edit.key) != CmpOrdering::Equal {
            return None;
        }
        let found = match edit.at {
            Some((pos, found)) => SearchResult {
                pos: pos.min(count),
                found: found && pos < count,
            },
            None => from.search(VarProbe::new(edit.key, form.with_tid.then_some(edit.tid))),
        };
        debug_assert!(
            spots.last().is_none_or(|s| s.pos <= found.pos),
            "edits out of order"
        );
        let rest = &edit.key[meta.prefix_len..];
        let (mid, in_mid) = form.mid.encode(rest);
        if found.found {
            new_count -= 1;
            bin -= from.suffix_at(found.pos).1;
        }
        if edit.value.is_some() {
            new_count += 1;
            bin += rest.len() - in_mid;
        }
        spots.push(Spot {
            pos: found.pos,
            found: found.found,
            mid,
            in_mid,
        });
    }
    if new_count == 0
        || new_count > config.max_entries(level)
        || needed(new_count, bin, form) > config.max_bytes(level)
    {
        return None;
    }
    let bytes = needed(new_count, bin, form)
        .max(needed(0, 0, form))
        .next_multiple_of(8)
        .min(config.max_bytes(level));
    let (node, size) = alloc_built_page(config, level, bytes);
    // SAFETY: freshly allocated, not yet shared.
    let header = unsafe { node.as_ref() };
    let cap = partition(bytes, new_count, bin, form, config.max_entries(level));
    Page::set_shape(header, bytes, cap, form);
    let to = Page::of(header, form);

    // The new bin as `build::write` lays it out: the suffixes in entry order, the fences,
    // the prefix, up to its end; `scratch` starts at the word that holds the first of them.
    let start = to.bin_len - bin;
    scratch.clear();
    scratch.reserve(to.bin_len + 8);
    scratch.resize(start % 8, 0);
    let at = |image: &Vec<u8>| start + image.len() - start % 8;
    let mut slot = 0;
    let mut next = 0;
    let copy = |range: Range<usize>, slot: &mut usize, image: &mut Vec<u8>| {
        copy_run(&from, &to, range.clone(), *slot, image, start);
        *slot += range.len();
    };
    for (edit, spot) in edits.iter().zip(&spots) {
        copy(next..spot.pos.max(next), &mut slot, scratch);
        next = next.max(spot.pos + usize::from(spot.found));
        if let Some(value) = edit.value {
            let suffix = &edit.key[meta.prefix_len + spot.in_mid..];
            let offset = at(scratch);
            scratch.extend_from_slice(suffix);
            to.set_entry(slot, spot.mid, (offset, suffix.len()), edit.tid, value);
            slot += 1;
        }
    }
    copy(next..count, &mut slot, scratch);
    debug_assert_eq!(slot, new_count);
    finish_moved_bin(&from, &to, meta, bin, (start, scratch), [FenceFrom::Old; 2]);
    header.set_count(new_count);
    to.finish_build();
    Some(Patched {
        node,
        size,
        count: new_count,
    })
}

/// Copies entries `range` of `from` to slots `slot..` of `to` (both of one tree; `from` not
/// changed by any thread meanwhile, `to` unpublished), appending their suffixes to `image`, the new bin from byte `start` on
/// (`image` starts at the word holding byte `start`). The vectors are copied as memory,
/// without decoding, and the suffixes a run at a time: entries whose suffixes lie
/// back to back in the old bin (all of them in a page that `build::write` or `patch` laid
/// out) are moved with one copy and their locations shifted.
pub(super) fn copy_run(
    from: &Page<'_>,
    to: &Page<'_>,
    range: Range<usize>,
    slot: usize,
    image: &mut Vec<u8>,
    start: usize,
) {
    let n = range.len();
    if n == 0 {
        return;
    }
    let dst = slot..slot + n;
    match (from.mids, to.mids) {
        (Mids::Four(a), Mids::Four(b)) => copy_slots(&a[range.clone()], &b[dst.clone()]),
        (Mids::Eight(a), Mids::Eight(b)) => copy_slots(&a[range.clone()], &b[dst.clone()]),
        _ => unreachable!("pages of one tree have one mid-key width"),
    }
    copy_slots(&from.values[range.clone()], &to.values[dst.clone()]);
    if from.with_tid() {
        copy_slots(&from.tids[range.clone()], &to.tids[dst.clone()]);
    }
    // Suffixes: `old` is where the current stretch of back-to-back suffixes starts in the old
    // bin, `end` where it ends; `shift` moves its offsets to the new bin's, added to the
    // location word as it is (offset in the high 16 bits, length in the low 16: adding
    // `shift << 16` modulo 2^32 moves the offset and keeps the length, the moved offset
    // being below 2^16).
    let at = |image: &Vec<u8>| start + image.len() - start % 8;
    let (src, dst) = (&from.locs[range], &to.locs[dst]);
    if let Some((first, end)) = back_to_back(src) {
        // The common case: one stretch, moved by one shift (both loops over plain words,
        // which the compiler vectorizes).
        let shift = (at(image) as u32).wrapping_sub(first as u32) << 16;
        from.bin.extend_into(first, end - first, image);
        add_slots(src, dst, shift);
        return;
    }
    let first = (src[0].load(Ordering::Relaxed) >> 16) as usize;
    let (mut old, mut end) = (first, first);
    let mut shift = (at(image) as u32).wrapping_sub(first as u32);
    for (s, d) in src.iter().zip(dst) {
        let word = s.load(Ordering::Relaxed);
        let offset = (word >> 16) as usize;
        if offset != end {
            from.bin.extend_into(old, end - old, image);
            old = offset;
            shift = (at(image) as u32).wrapping_sub(offset as u32);
        }
        d.store(word.wrapping_add(shift << 16), Ordering::Relaxed);
        end = offset + (word & 0xffff) as usize;
    }
    from.bin.extend_into(old, end - old, image);
}

/// Where the suffixes of the entries with location words `locs` (at least one) start and end
/// in their bin, if they lie back to back in entry order (each starts where the one before
/// ends). Every word is read, without an early exit, so that the loop vectorizes; `locs` is
/// a vector of a page that no thread changes meanwhile (see [`copy_slots`]).
#[inline]
fn back_to_back(locs: &[AtomicU32]) -> Option<(usize, usize)> {
    let words = plain(locs);
    let (head, last) = (words[0], words[words.len() - 1]);
    let mut gaps = 0;
    for (w, next) in words.iter().zip(&words[1..]) {
        gaps |= (next >> 16) ^ ((w >> 16) + (w & 0xffff));
    }
    let end = (last >> 16) + (last & 0xffff);
    (gaps == 0).then_some(((head >> 16) as usize, end as usize))
}

/// `src`'s location words, read as plain words: `src` is a vector of a page that no thread
/// changes meanwhile (see [`copy_slots`]).
#[inline]
fn plain(src: &[AtomicU32]) -> &[u32] {
    // SAFETY: `AtomicU32` has `u32`'s size, alignment and bit validity; no thread writes
    // `src` while it is borrowed here (see the function's docs), so plain reads race with
    // no write.
    unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u32>(), src.len()) }
}

/// Stores each of `src`'s words plus `shift` (modulo 2^32) into `dst` (of equal lengths):
/// `src` as in [`copy_slots`], `dst` a vector of the page being built, which no other thread
/// can reach yet.
#[inline]
fn add_slots(src: &[AtomicU32], dst: &[AtomicU32], shift: u32) {
    assert_eq!(src.len(), dst.len(), "vectors of unequal lengths");
    // SAFETY: as in `copy_slots`: `dst` lies in another page than `src`, its slots are
    // atomics (`UnsafeCell`s), and no other thread accesses it, so plain writes through a
    // pointer derived from the shared reference are allowed and race with nothing.
    let out = unsafe { std::slice::from_raw_parts_mut(dst.as_ptr() as *mut u32, dst.len()) };
    for (d, s) in out.iter_mut().zip(plain(src)) {
        *d = s.wrapping_add(shift);
    }
}

/// Copies `src` into `dst` (of equal lengths) as one copy of their memory rather than element
/// by element: `src` is a vector of a page that no thread changes meanwhile (a published
/// Bw-tree page, see [`patch`], or a B+-tree page whose write lock the caller holds: other
/// threads only read it), and `dst` one of the page being built, which no other thread can
/// reach yet, so no access of another thread races with the copy.
#[inline]
fn copy_slots<T: super::layout::Slot>(src: &[T], dst: &[T]) {
    assert_eq!(src.len(), dst.len(), "vectors of unequal lengths");
    // SAFETY: both slices are valid for `len` elements and lie in different pages (no
    // overlap); slots are atomics (`UnsafeCell`s of their word), so writing them through a
    // pointer derived from a shared reference is allowed, and a plain copy of their bytes
    // reads and writes the same values as `get` and `set` would, with no concurrent access
    // to either (see above).
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr() as *mut T, src.len());
    }
}
