//! Leaf splits that move entries instead of rebuilding them.
//!
//! A full leaf's split point is chosen from the page itself: two keys on a page share its
//! prefix, then as many bytes as their mid-keys agree on (within the bytes each holds), and
//! only when the mid-keys are equal do the suffixes decide. When neither half would get a
//! longer prefix than the page has, each half is built by moving its entries (mid-keys,
//! suffix locations, values, a back-to-back stretch of suffixes at a time, the prefix) as
//! they are, with the separator as its new fence: only the two keys around the split point
//! are decoded. A split that lengthens a half's prefix rebuilds from whole keys
//! (`split.rs`), so every half still gets the longest prefix of its own keys.

use std::ops::Range;
use std::ptr::NonNull;

use super::super::bytes::shared_words;
use super::super::slotted::VarKey;
use super::super::NodeHeader;
use super::alloc_built_page;
use super::build::{finish_moved_bin, grown_bytes, needed, partition, FenceFrom};
use super::encode::MidWidth;
use super::layout::{Page, NO_FENCE};
use super::patch::copy_run;
use super::split::{choose_split, shortest_separator, SplitKeys};
use super::PageConfig;

/// A page's keys for choosing a split point, read in place (write lock held).
pub(super) struct PageKeys<'p, 'n> {
    page: &'p Page<'n>,
    prefix_len: usize,
    width: MidWidth,
}

impl<'p, 'n> PageKeys<'p, 'n> {
    /// The keys of `page`.
    pub fn new(page: &'p Page<'n>) -> Self {
        Self {
            page,
            prefix_len: page.meta().prefix_len,
            width: page.form.mid,
        }
    }
}

impl SplitKeys for PageKeys<'_, '_> {
    fn count(&self) -> usize {
        self.page.count()
    }

    fn key_len(&self, i: usize) -> usize {
        self.prefix_len + self.width.held(self.page.mid(i)) + self.page.suffix_at(i).1
    }

    fn shared(&self, i: usize, j: usize) -> usize {
        let (a, b) = (self.page.mid(i), self.page.mid(j));
        let (held_a, held_b) = (self.width.held(a), self.width.held(b));
        let differ = a ^ b;
        let rest = if differ != 0 {
            // The encodings agree on their first `agree` bytes (mid-keys narrower than 8
            // bytes sit in the low bytes of the word). Within the bytes a mid-key holds they
            // are the key's; past them, the key ended or its suffix differs from the other
            // key's next byte (see encode.rs), so the shared bytes stop at the fewer held.
            let agree = differ.leading_zeros() as usize / 8 - (8 - self.width.bytes());
            agree.min(held_a).min(held_b)
        } else {
            // Equal mid-keys hold the same bytes; the suffixes go on from there.
            let ((at_a, len_a), (at_b, len_b)) = (self.page.suffix_at(i), self.page.suffix_at(j));
            let bin = &self.page.bin;
            held_a
                + shared_words(
                    |k| bin.window(at_a + k),
                    |k| bin.window(at_b + k),
                    len_a.min(len_b),
                )
        };
        self.prefix_len + rest
    }
}

/// The two pages that replace the full leaf `page` (of `config`'s largest size, with
/// `count >= 2` entries), split at the point `choose_split` picks, built by moving entries,
/// with the separator between them and their bytes; `None` (nothing allocated) when a half
/// would get a longer prefix or would not fit the largest page: the caller then rebuilds.
/// Write lock held.
#[allow(clippy::type_complexity)]
pub(super) fn split_moved(
    page: &Page<'_>,
    config: &PageConfig,
    image: &mut Vec<u8>,
) -> Option<(NonNull<NodeHeader>, VarKey, NonNull<NodeHeader>, usize)> {
    let keys = PageKeys::new(page);
    let count = page.count();
    let at = choose_split(&keys, true, config.short_splits);
    let prefix_len = keys.prefix_len;
    // Pages of whole keys keep their empty prefix whatever their halves share.
    let lengthens = |(a, b): (usize, usize)| keys.shared(a, b) != prefix_len;
    if config.factors_prefix() && (lengthens((0, at - 1)) || lengthens((at, count - 1))) {
        return None;
    }
    let separator = shortest_separator(&page.key(at - 1), page.key(at), config.short_splits);
    let tid_bytes = if config.with_tid { 8 } else { 0 };
    let spots = page.fence_spots();
    let fence_len = |(_, len): (usize, usize)| if len == NO_FENCE { 0 } else { len + tid_bytes };
    let separator_len = separator.bytes.len() + tid_bytes;
    let suffixes = |range: Range<usize>| range.map(|i| page.suffix_at(i).1).sum::<usize>();
    let bins = [
        prefix_len + fence_len(spots.low) + separator_len + suffixes(0..at),
        prefix_len + separator_len + fence_len(spots.high) + suffixes(at..count),
    ];
    let max = config.max_bytes(0);
    let needs = [
        needed(at, bins[0], config.form),
        needed(count - at, bins[1], config.form),
    ];
    if needs.iter().any(|&need| need > max) {
        return None;
    }
    let left = moved_half(
        page,
        config,
        0..at,
        (grown_bytes(needs[0], max), bins[0]),
        [FenceFrom::Old, FenceFrom::New(Some(&separator))],
        image,
    );
    let right = moved_half(
        page,
        config,
        at..count,
        (grown_bytes(needs[1], max), bins[1]),
        [FenceFrom::New(Some(&separator)), FenceFrom::Old],
        image,
    );
    Some((left.0, separator, right.0, left.1 + right.1))
}

/// A new leaf of `bytes` bytes holding entries `range` of `from` under its prefix, with
/// `fences`; `bin`: the bytes its bin holds (prefix, fences, suffixes).
fn moved_half(
    from: &Page<'_>,
    config: &PageConfig,
    range: Range<usize>,
    (bytes, bin): (usize, usize),
    fences: [FenceFrom<'_>; 2],
    image: &mut Vec<u8>,
) -> (NonNull<NodeHeader>, usize) {
    let form = config.form;
    let count = range.len();
    let (node, size) = alloc_built_page(config, 0, bytes);
    // SAFETY: freshly allocated, not yet shared.
    let header = unsafe { node.as_ref() };
    let cap = partition(bytes, count, bin, form, config.max_entries(0));
    Page::set_shape(header, bytes, cap, form);
    let to = Page::of(header, form);
    let start = to.bin_len - bin;
    image.clear();
    image.resize(start % 8, 0);
    copy_run(from, &to, range, 0, image, start);
    finish_moved_bin(from, &to, from.meta(), bin, (start, image), fences);
    header.set_count(count);
    to.finish_build();
    (node, size)
}
