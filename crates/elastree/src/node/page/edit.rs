//! Inserts and removes in place, and the room questions the tree asks before them.
//!
//! An insert whose key shares the page prefix and finds a free entry slot and room at the
//! bin's top shifts the vectors and appends its suffix. Any other insert rebuilds the page
//! with the new entry (`build.rs`): under the shorter prefix all keys then share, with its
//! bin compacted and its bytes re-partitioned between slots and bin. A remove shifts the
//! vectors and leaves its suffix dead until the next rebuild.

use std::cmp::Ordering as CmpOrdering;

use super::super::slotted::VarProbe;
use super::super::NodeHeader;
use super::build::{capacity_for_one_more as relayout_cap, needed, relayout, with_content, write};
use super::layout::Page;
use super::PageConfig;

/// The key length an inner page keeps room for when the tree asks without a key (before it
/// descends past the page): a typical separator. A longer one that finds no room makes the
/// tree split the page first.
const INNER_RESERVE: usize = 64;

/// Whether an entry with `probe`'s key (or, with `None`, an inner page's typical separator)
/// fits, after a rebuild if need be: within the page's bytes and the level's entry limit.
/// Inlined, so that a caller passing [`PageConfig::common_form`]'s copy reads the page with
/// its layout as constants.
#[inline(always)]
pub(super) fn has_room(
    node: &NodeHeader,
    config: &PageConfig,
    probe: Option<VarProbe<'_>>,
) -> bool {
    // The count and the meta word as read (torn values give a wrong answer, which the
    // caller's version check rejects); the vectors are located only for a key to compare
    // with the prefix.
    let count = node.count();
    if count >= config.max_entries(node.level()) {
        return false;
    }
    let meta = Page::meta_of(node);
    // A key that does not share the prefix shortens it by `lost` bytes, which makes each
    // entry's suffix longer by at most `lost + 1` (its mid-key may then hold a byte less).
    let (key_len, lost) = match probe {
        None => (INNER_RESERVE.min(config.max_key_len), 0),
        Some(probe) if count == 0 => (probe.bytes().len(), 0),
        Some(probe) => {
            let shared = Page::of(node, config.form).shared_prefix(meta, probe.bytes());
            (probe.bytes().len() - shared, meta.prefix_len - shared)
        }
    };
    let growth = if lost > 0 { count * (lost + 1) } else { 0 };
    let bin = meta.live.saturating_sub(lost) + growth + key_len;
    needed(count + 1, bin, config.form) <= Page::bytes_of(node)
}

/// Inserts `(key, value)` at position `i`. Write lock held; `has_room` said yes. Inlined as
/// `has_room` is; what is not an in-place insert is [`insert_slow`], out of line.
#[inline(always)]
pub(super) fn insert_at(
    node: &NodeHeader,
    config: &PageConfig,
    i: usize,
    key: VarProbe<'_>,
    value: u64,
) {
    let page = Page::of(node, config.form);
    let count = node.count();
    debug_assert!(i <= count && count < config.max_entries(node.level()));
    let meta = page.meta();
    let bytes = key.bytes();
    if count > 0 && page.against_prefix(meta, bytes) == CmpOrdering::Equal {
        let rest = &bytes[meta.prefix_len..];
        let (mid, in_mid) = config.form.mid.encode(rest);
        let suffix = &rest[in_mid..];
        if count < page.cap && meta.top + suffix.len() <= page.bin_len {
            page.shift_right(i, count);
            let offset = page.bin_len - meta.top - suffix.len();
            page.bin.write(offset, suffix);
            page.set_entry(
                i,
                mid,
                (offset, suffix.len()),
                key.tid().unwrap_or(0),
                value,
            );
            if !suffix.is_empty() && page.suffix_free {
                page.clear_suffix_free();
            }
            let mut meta = meta;
            meta.top += suffix.len();
            meta.live += suffix.len();
            page.set_meta(meta);
            node.set_count(count + 1);
            return;
        }
    }
    insert_slow(node, config, i, key, value)
}

/// [`insert_at`] when the key does not share the page prefix or finds a vector or the bin
/// full: the page's bytes shared out again (then an in-place insert), or the page rebuilt
/// with the new entry.
#[inline(never)]
fn insert_slow(node: &NodeHeader, config: &PageConfig, i: usize, key: VarProbe<'_>, value: u64) {
    let page = Page::of(node, config.form);
    let count = node.count();
    let meta = page.meta();
    let bytes = key.bytes();
    let tid = key.tid().unwrap_or(0);
    if count > 0 && page.against_prefix(meta, bytes) == CmpOrdering::Equal {
        // Out of entry slots or bin bytes but not of page bytes: share the page's bytes out
        // again, moving the vectors, and insert in place.
        let rest = &bytes[meta.prefix_len..];
        let suffix_len = rest.len() - config.form.mid.encode(rest).1;
        if let Some(cap) = relayout_cap(node, config, suffix_len) {
            relayout(node, config, cap);
            return insert_at(node, config, i, key, value);
        }
    }
    // Rebuild the page with the new entry: under the prefix every key then shares, the bin
    // compacted, slots and bin re-partitioned.
    with_content(|content| {
        content.load(&page, 0, i);
        content.push(bytes, tid, value);
        content.load(&page, i, count);
        content.load_fences(&page);
        write(node, config, content, 0..count + 1);
    })
}

/// Removes entry `i`. Write lock held.
pub(super) fn remove_at(node: &NodeHeader, config: &PageConfig, i: usize) {
    let page = Page::of(node, config.form);
    let count = node.count();
    debug_assert!(i < count);
    let mut meta = page.meta();
    meta.live -= page.suffix_at(i).1;
    page.shift_left(i, count);
    page.set_meta(meta);
    node.set_count(count - 1);
}
