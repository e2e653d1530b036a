//! The page's invariant walk: its shape, its bin accounting, its prefix (in the bin and its
//! copy in the header), every entry's mid-key and suffix (none on a page flagged
//! suffix-free), key order, and its fences.

use super::super::slotted::VarKey;
use super::super::NodeHeader;
use super::layout::{Page, INLINE_BYTES, INLINE_WORDS, NO_FENCE};
use super::PageConfig;
use crate::node::bytes::key_word;

/// Checks one page (no writer running): see the invariants in `layout.rs` and `encode.rs`.
pub(super) fn check_page(node: &NodeHeader, config: &PageConfig) -> Result<(), String> {
    let page = Page::of(node, config.form);
    let count = node.count();
    if !page.bytes.is_multiple_of(8) || page.cap > config.form.max_cap(page.bytes) {
        return Err(format!(
            "shape {} bytes, {} entries is not a page",
            page.bytes, page.cap
        ));
    }
    if page.bytes > config.max_bytes(node.level()) {
        return Err(format!(
            "page of {} bytes exceeds the largest, {}",
            page.bytes,
            config.max_bytes(node.level())
        ));
    }
    if count > page.cap {
        return Err(format!("count {count} exceeds capacity {}", page.cap));
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

    // The prefix, and its copy in the header.
    if meta.prefix_len > 0 && !config.form.factor_prefix {
        return Err("a prefix on a page of whole keys".into());
    }
    if meta.prefix_len > 0 && !in_bin(meta.prefix_offset, meta.prefix_len) {
        return Err("prefix outside the bin's handed-out bytes".into());
    }
    let mut prefix = Vec::new();
    page.prefix_into(meta, &mut prefix);
    let head = &prefix[..prefix.len().min(INLINE_BYTES)];
    for w in 0..INLINE_WORDS {
        if page.inline_word(w) != key_word(head, 8 * w) {
            return Err(format!("header word {w} disagrees with the prefix"));
        }
    }
    let mut live = meta.prefix_len;

    // The fences.
    let spots = page.fence_spots();
    let tid_bytes = if config.with_tid { 8 } else { 0 };
    for (offset, len) in [spots.low, spots.high] {
        if len != NO_FENCE {
            if !in_bin(offset, len + tid_bytes) {
                return Err("fence outside the bin's handed-out bytes".into());
            }
            live += len + tid_bytes;
        }
    }
    let (low_fence, high_fence) = (page.fence(true), page.fence(false));
    if let (Some(l), Some(h)) = (&low_fence, &high_fence) {
        if l >= h {
            return Err(format!("low fence {l:?} not below high fence {h:?}"));
        }
    }

    // The entries.
    let mut previous: Option<VarKey> = None;
    for i in 0..count {
        let (offset, len) = page.suffix_at(i);
        if !in_bin(offset, len) {
            return Err(format!("entry {i}: suffix {offset}+{len} outside the bin"));
        }
        if len > 0 && page.suffix_free {
            return Err(format!(
                "entry {i} has a suffix on a page flagged suffix-free"
            ));
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
        let (mid, held) = config.form.mid.encode(rest);
        if mid != page.mid(i) || len != rest.len() - held {
            return Err(format!(
                "entry {i}: mid-key or suffix disagrees with the key"
            ));
        }
        if previous.as_ref().is_some_and(|p| *p >= key) {
            return Err(format!("keys out of order at {i}"));
        }
        if low_fence.as_ref().is_some_and(|l| key < *l) {
            return Err(format!("entry {i}: key {key:?} below the low fence"));
        }
        if high_fence.as_ref().is_some_and(|h| key >= *h) {
            return Err(format!("entry {i}: key {key:?} not below the high fence"));
        }
        previous = Some(key);
    }
    if live != meta.live {
        return Err(format!(
            "bin live {} but its contents use {live}",
            meta.live
        ));
    }
    Ok(())
}

/// Checks that `node`'s fences are the bounds its ancestors' separators give it.
pub(super) fn check_fences(
    node: &NodeHeader,
    config: &PageConfig,
    low: Option<&VarKey>,
    high: Option<&VarKey>,
) -> Result<(), String> {
    let page = Page::of(node, config.form);
    let (stored_low, stored_high) = (page.fence(true), page.fence(false));
    if stored_low.as_ref() != low || stored_high.as_ref() != high {
        return Err(format!(
            "fences [{stored_low:?}, {stored_high:?}) differ from the parent's [{low:?}, {high:?})"
        ));
    }
    Ok(())
}
