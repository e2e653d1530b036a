//! Splits, merges and growth of optimized pages: the split point and the separator of the
//! Bw-tree paper's section II-C, and the pages built for the halves of a split, for a merged
//! pair and for a page that grows.

use std::ptr::NonNull;

use super::super::bytes::common_prefix;
use super::super::slotted::VarKey;
use super::super::NodeHeader;
use super::build::{copy_grown, grown_bytes, needed, with_content, write, Content, GROWTH_DIVISOR};
use super::cut::split_moved;
use super::layout::Page;
use super::{alloc_built_page, PageConfig};

/// How much more the split point's separator weighs than the bytes the halves' prefixes
/// save: every search that passes the parent compares it (the paper tried 2 to 8 and found
/// 4 best).
const SEPARATOR_WEIGHT: i64 = 4;

/// The sorted keys a split point is chosen from: rebuilt entries ([`Content`]) or a page's
/// own, read in place (`cut.rs`).
pub(super) trait SplitKeys {
    /// How many keys.
    fn count(&self) -> usize;
    /// Key `i`'s length in bytes.
    fn key_len(&self, i: usize) -> usize;
    /// How many bytes keys `i <= j` share from the start.
    fn shared(&self, i: usize, j: usize) -> usize;
}

impl SplitKeys for Content {
    fn count(&self) -> usize {
        self.len()
    }

    fn key_len(&self, i: usize) -> usize {
        self.key(i).len()
    }

    fn shared(&self, i: usize, j: usize) -> usize {
        common_prefix(self.key(i), self.key(j))
    }
}

/// Where to split keys `0..n` of `keys` (`n >= 2`): the middle, or with short splits the
/// point between the .33 and the .67 entry that maximizes `Saved(L|R) - 4 * TSize(L|R)`:
/// the bytes the two halves' prefixes save, less four times the separator the parent gets
/// (the shortest separator for a leaf, the entry that moves up for an inner node). Ties go to
/// the point nearest the middle. The point is between 1 and `n - 1`.
pub(super) fn choose_split(keys: &impl SplitKeys, leaf: bool, short_splits: bool) -> usize {
    let n = keys.count();
    if !short_splits || n < 3 {
        return n / 2;
    }
    let (lo, hi) = ((n / 3).max(1), (2 * n).div_ceil(3).min(n - 1));
    // The keys are sorted, so two keys share the least prefix any two neighbours between
    // them share: the neighbours' shares around the candidates give every share a score
    // needs, each computed once. `adjacent[j]`: what keys `lo - 1 + j` and `lo + j` share.
    let adjacent: Vec<usize> = (lo - 1..hi.min(n - 2) + 1)
        .map(|i| keys.shared(i, i + 1))
        .collect();
    let adj = |i: usize| adjacent[i - (lo - 1)];
    // An inner split moves entry `at` up: it is in neither half.
    let right_of = |at: usize| if leaf { at } else { at + 1 };
    // `right_shared[at - lo]`: what the right half's first key shares with the last key.
    let mut right_shared = vec![0; hi - lo + 1];
    let mut shared = None;
    for at in (lo..=hi).rev() {
        let right = right_of(at);
        if right < n {
            let share =
                shared.map_or_else(|| keys.shared(right, n - 1), |s: usize| s.min(adj(right)));
            right_shared[at - lo] = share;
            shared = Some(share);
        }
    }
    // What the first key shares with the left half's last key (`at - 1`).
    let mut left_shared = keys.shared(0, lo - 1);
    let mut best = (lo, (i64::MIN, i64::MIN));
    for at in lo..=hi {
        if at > lo {
            left_shared = left_shared.min(adj(at - 2));
        }
        let saved = at * left_shared + (n - right_of(at)) * right_shared[at - lo];
        let term = if leaf {
            (adj(at - 1) + 1).min(keys.key_len(at))
        } else {
            keys.key_len(at)
        };
        let off_middle = (at as i64 - (n / 2) as i64).abs();
        let score = (saved as i64 - SEPARATOR_WEIGHT * term as i64, -off_middle);
        // Of equal scores the last wins.
        if score >= best.1 {
            best = (at, score);
        }
    }
    best.0
}

/// With short splits, the shortest `s` with `left < s <= right`: the right key's bytes up to
/// and including the first that differs from the left key's (tid 0 in a non-unique tree);
/// the right key itself when only the tids differ, or without short splits.
pub(super) fn shortest_separator(left: &VarKey, right: VarKey, short_splits: bool) -> VarKey {
    if !short_splits || left.bytes == right.bytes {
        return right;
    }
    let keep = (common_prefix(&left.bytes, &right.bytes) + 1).min(right.bytes.len());
    let mut bytes = right.bytes;
    bytes.truncate(keep);
    VarKey {
        bytes,
        tid: right.tid.map(|_| 0),
    }
}

/// The separator a split of `content` at `at` posts: the shortest one for a leaf, entry
/// `at` itself for an inner node (it moves up).
fn separator_of(content: &Content, at: usize, leaf: bool, config: &PageConfig) -> VarKey {
    let right = content.owned(at, config.with_tid);
    if leaf && at > 0 {
        shortest_separator(
            &content.owned(at - 1, config.with_tid),
            right,
            config.short_splits,
        )
    } else {
        right
    }
}

/// Allocates a page of `bytes` at `level` and writes entries `range` of `content` with
/// fences `low` and `high` into it.
fn build_page(
    config: &PageConfig,
    level: u16,
    bytes: usize,
    content: &mut Content,
    range: std::ops::Range<usize>,
    (low, high): (Option<VarKey>, Option<VarKey>),
) -> (NonNull<NodeHeader>, usize) {
    let (node, size) = alloc_built_page(config, level, bytes);
    content.low = low;
    content.high = high;
    // SAFETY: freshly allocated, not yet shared.
    let header = unsafe { node.as_ref() };
    write(header, config, content, range);
    Page::of(header, config.form).finish_build();
    (node, size)
}

/// Bytes for a new page at `level` holding entries `range` of `content` with fences
/// `low`/`high`: room to grow for a leaf, the largest page for an inner node (inner pages do
/// not grow) or for a leaf that appends (`full`).
fn new_bytes(
    config: &PageConfig,
    level: u16,
    content: &mut Content,
    range: std::ops::Range<usize>,
    fences: &(Option<VarKey>, Option<VarKey>),
    full: bool,
) -> usize {
    let max = config.max_bytes(level);
    if level > 0 || full {
        return max;
    }
    grown_bytes(halves_need(content, range, fences, config), max)
}

/// Splits `node` at `at`: entries from `at` on (a leaf) or after `at` (an inner node, whose
/// entry `at` moves up as `separator`) go to a new right page, which is returned with its
/// size; `node` keeps the rest. The halves' fences meet at the separator. The new page is
/// sized to its entries with room to grow, or the largest page when the split makes room at
/// the end of the last leaf (`appending`). Write lock held on `node`.
pub(super) fn split_off(
    node: &NodeHeader,
    config: &PageConfig,
    at: usize,
    separator: &VarKey,
    appending: bool,
) -> (NonNull<NodeHeader>, usize) {
    let level = node.level();
    with_content(|content| {
        let page = Page::of(node, config.form);
        let count = page.count();
        content.load(&page, 0, count);
        content.load_fences(&page);
        let (low, high) = (content.low.take(), content.high.take());
        let right_range = if level == 0 { at..count } else { at + 1..count };
        let right_fences = (Some(separator.clone()), high);
        let bytes = new_bytes(
            config,
            level,
            content,
            right_range.clone(),
            &right_fences,
            appending,
        );
        let right = build_page(config, level, bytes, content, right_range, right_fences);
        if level > 0 {
            // The moved-up entry's child becomes the right node's leftmost child.
            // SAFETY: freshly built, not yet shared.
            unsafe { right.0.as_ref() }.set_link(content.value(at) as *mut NodeHeader);
        }
        content.low = low;
        content.high = Some(separator.clone());
        write(node, config, content, 0..at);
        right
    })
}

/// Folds `right` into `left` (its left sibling under the same parent): an inner pair gets
/// the parent's `separator` between them, with `right`'s leftmost child; `left`'s high fence
/// becomes `right`'s. Write locks held on both; they fit (`fits_merge`).
pub(super) fn merge_from(
    left: &NodeHeader,
    right: &NodeHeader,
    config: &PageConfig,
    separator: Option<&VarKey>,
) {
    with_content(|content| {
        let (l, r) = (Page::of(left, config.form), Page::of(right, config.form));
        content.load(&l, 0, l.count());
        if let Some(separator) = separator {
            content.push(
                &separator.bytes,
                separator.tid.unwrap_or(0),
                right.link() as u64,
            );
        }
        content.load(&r, 0, r.count());
        content.low = l.fence(true);
        content.high = r.fence(false);
        let count = content.len();
        write(left, config, content, 0..count);
    })
}

/// Whether all entries of `right`, plus `extra` entries of the longest key, fit in `left`
/// (under `left`'s low and `right`'s high fence). Read under optimistic versions: the copy
/// may be torn, and sizing it never panics.
pub(super) fn fits_merge(
    left: &NodeHeader,
    right: &NodeHeader,
    extra: usize,
    config: &PageConfig,
) -> bool {
    let (l, r) = (Page::of(left, config.form), Page::of(right, config.form));
    let count = l.count() + r.count() + extra;
    if count > config.max_entries(left.level()) {
        return false;
    }
    with_content(|content| {
        content.load(&l, 0, l.count());
        content.load(&r, 0, r.count());
        content.low = l.fence(true);
        content.high = r.fence(false);
        let entries = content.len();
        let prefix = content.torn_prefix_len(0..entries, config.form);
        let bin =
            content.bin_bytes(0..entries, prefix, config.form) + extra * (config.max_key_len + 8);
        needed(count, bin, config.form) <= l.bytes
    })
}

/// The nodes that replace leaf `node` when it has no room: one larger page with its entries
/// while it is below the largest page size, else two pages (split as `choose_split` says,
/// each sized to its entries with room to grow; built by moving entries when both halves
/// keep the page prefix, see `cut.rs`) and the separator between them. Returns the
/// first page, the second with its separator, and their bytes. Write locks held.
#[allow(clippy::type_complexity)]
pub(super) fn replacement(
    node: &NodeHeader,
    config: &PageConfig,
) -> (
    NonNull<NodeHeader>,
    Option<(VarKey, NonNull<NodeHeader>)>,
    usize,
) {
    let max = config.max_bytes(0);
    with_content(|content| {
        let page = Page::of(node, config.form);
        let count = page.count();
        if page.bytes < max || count < 2 {
            // Grow: the last leaf to the largest page at once (appends fill it), any other by
            // half and at least a cache line more than it has. A page with little dead
            // space in its bin is copied as it is; else it is rebuilt.
            let meta = page.meta();
            let bytes = if node.link().is_null() {
                max
            } else {
                let grown = grown_bytes(needed(count, meta.live, config.form), max);
                grown
                    .max(page.bytes + page.bytes / GROWTH_DIVISOR + 64)
                    .next_multiple_of(64)
                    .min(max)
            };
            let (first, size) = alloc_built_page(config, 0, bytes);
            // SAFETY: freshly allocated, not yet shared.
            copy_grown(node, unsafe { first.as_ref() }, config, content.image());
            return (first, None, size);
        }
        if let Some((first, separator, second, bytes)) = split_moved(&page, config, content.image())
        {
            return (first, Some((separator, second)), bytes);
        }
        content.load(&page, 0, count);
        content.load_fences(&page);
        let fences = (content.low.take(), content.high.take());
        let SplitPlan {
            at,
            separator,
            needs,
        } = plan_split(content, true, config, &fences);
        let left_fences = (fences.0, Some(separator.clone()));
        let right_fences = (Some(separator.clone()), fences.1);
        let left_bytes = grown_bytes(needs[0], max);
        let right_bytes = grown_bytes(needs[1], max);
        let (first, a) = build_page(config, 0, left_bytes, content, 0..at, left_fences);
        let (second, b) = build_page(config, 0, right_bytes, content, at..count, right_fences);
        (first, Some((separator, second)), a + b)
    })
}

/// The split point of `node` (see [`plan_split`]). Write lock held.
pub(super) fn split_point(node: &NodeHeader, config: &PageConfig) -> usize {
    with_content(|content| {
        let page = Page::of(node, config.form);
        let count = page.count();
        if count < 2 {
            return count / 2;
        }
        content.load(&page, 0, count);
        let fences = (page.fence(true), page.fence(false));
        plan_split(content, node.is_leaf(), config, &fences).at
    })
}

/// A split point, the separator it posts and the bytes each half needs.
struct SplitPlan {
    at: usize,
    separator: VarKey,
    /// Bytes the left and the right half need, each with its fences.
    needs: [usize; 2],
}

/// [`choose_split`]'s point if both halves, each with its fences (the page's `fences` and
/// the separator), fit in the largest page; else the point nearest to it at which they do.
/// (Halves normally fit easily; a separator as long as the longest key, posted by a split
/// that does not shorten separators, can tip one over.) At least two entries.
fn plan_split(
    content: &mut Content,
    leaf: bool,
    config: &PageConfig,
    fences: &(Option<VarKey>, Option<VarKey>),
) -> SplitPlan {
    let count = content.len();
    let preferred = choose_split(content, leaf, config.short_splits);
    let level = u16::from(!leaf);
    let max = config.max_bytes(level);
    let mut plan = |at: usize| {
        let separator = separator_of(content, at, leaf, config);
        let right = if leaf { at } else { at + 1 };
        let left_fences = (fences.0.clone(), Some(separator.clone()));
        let right_fences = (Some(separator.clone()), fences.1.clone());
        let needs = [
            halves_need(content, 0..at, &left_fences, config),
            halves_need(content, right..count, &right_fences, config),
        ];
        SplitPlan {
            at,
            separator,
            needs,
        }
    };
    let fits = |plan: &SplitPlan| plan.needs.iter().all(|&need| need <= max);
    let first = plan(preferred);
    if fits(&first) {
        return first;
    }
    let mut nearest: Vec<usize> = (1..count).filter(|&at| at != preferred).collect();
    nearest.sort_by_key(|&at| at.abs_diff(preferred));
    nearest
        .into_iter()
        .map(&mut plan)
        .find(fits)
        .unwrap_or(first)
}

/// The bytes a page holding entries `range` of `content` with `fences` needs.
fn halves_need(
    content: &mut Content,
    range: std::ops::Range<usize>,
    fences: &(Option<VarKey>, Option<VarKey>),
    config: &PageConfig,
) -> usize {
    let (low, high) = (content.low.take(), content.high.take());
    content.low.clone_from(&fences.0);
    content.high.clone_from(&fences.1);
    let needed = content.needed_bytes(range, config.form);
    content.low = low;
    content.high = high;
    needed
}
