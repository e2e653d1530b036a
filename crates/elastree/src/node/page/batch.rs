//! The page's scan batch: a leaf's prefix copied once, and per entry its mid-key, its suffix
//! (into one buffer) and its value; keys are assembled only as they are handed out, each into
//! the same buffer (the prefix stays, the rest is overwritten), so a scan allocates nothing
//! per key and copies the prefix once per leaf.

use super::super::batch::{CopyFrom, LeafBatch};
use super::super::slotted::VarKey;
use super::super::NodeHeader;
use std::sync::atomic::Ordering;

use super::encode::{MidSlot, MidWidth};
use super::layout::{Mids, Page};
use super::{PageConfig, PageRepr};

/// One copied entry: its mid-key, where its suffix is in [`PageBatch::suffixes`], its tid
/// (non-unique trees) and its value.
#[derive(Clone, Copy)]
struct Copied {
    mid: u64,
    start: u32,
    len: u32,
    tid: u64,
    value: u64,
}

/// A leaf's entries copied for a scan (see the module).
#[derive(Default)]
pub struct PageBatch {
    prefix: Vec<u8>,
    entries: Vec<Copied>,
    /// Every copied suffix, each from a word boundary, then 8 zero bytes, so that whole
    /// words can be read from any suffix's start.
    suffixes: Vec<u8>,
    longest: usize,
    width: MidWidth,
    with_tid: bool,
    /// The key handed out last.
    key: VarKey,
}

/// A page batch holds one leaf's entries (they share its prefix): it is copied into cleared.
impl CopyFrom<PageRepr> for PageBatch {
    fn copy_from(
        &mut self,
        node: &NodeHeader,
        config: &PageConfig,
        (from, to): (usize, usize),
        descending: bool,
    ) {
        let page = Page::of(node, config.form);
        let to = to.min(page.count());
        if from >= to {
            return;
        }
        self.width = config.form.mid;
        self.with_tid = config.with_tid;
        self.prefix.clear();
        page.prefix_into(page.meta(), &mut self.prefix);
        match page.mids {
            Mids::Four(mids) => self.copy_entries(&page, &mids[from..to], from, descending),
            Mids::Eight(mids) => self.copy_entries(&page, &mids[from..to], from, descending),
        }
    }
}

impl PageBatch {
    /// Copies the entries from `from` on whose mid-keys are `mids` (of one width).
    #[inline(always)]
    fn copy_entries<M: MidSlot>(
        &mut self,
        page: &Page<'_>,
        mids: &[M],
        from: usize,
        descending: bool,
    ) {
        let n = mids.len();
        let (locs, values) = (&page.locs[from..from + n], &page.values[from..from + n]);
        let tids = page.tids.get(from..from + n).unwrap_or(&[]);
        // Start loading every suffix before copying any (inserted suffixes lie anywhere in
        // the bin: their cache misses overlap instead of following each other), and make
        // room for all of them as whole words.
        super::super::prefetch(values);
        let mut room = 8;
        for loc in locs {
            let loc = loc.load(Ordering::Relaxed);
            let (offset, len) = ((loc >> 16) as usize, (loc & 0xffff) as usize);
            page.bin.prefetch(offset, len);
            room += len.next_multiple_of(8);
        }
        self.entries.reserve(n);
        self.suffixes.reserve(room);
        let base = self.suffixes.as_mut_ptr();
        let mut at = self.suffixes.len();
        let mut copy_one = |j: usize| {
            let loc = locs[j].load(Ordering::Relaxed);
            let (offset, len) = ((loc >> 16) as usize, (loc & 0xffff) as usize);
            // SAFETY: `room` reserved whole words for every suffix (of the lengths read
            // above; a length read again may differ under a torn read, so it is clamped to
            // what is left), and the last 8 bytes for the padding.
            let len = len.min(room - 8);
            unsafe { page.bin.copy_words(offset, len, base.add(at)) };
            room -= len.next_multiple_of(8);
            self.longest = self.longest.max(len);
            self.entries.push(Copied {
                mid: mids[j].value(),
                start: at as u32,
                len: len as u32,
                tid: tids.get(j).map_or(0, |t| t.load(Ordering::Relaxed)),
                value: values[j].load(Ordering::Relaxed),
            });
            at += len.next_multiple_of(8);
        };
        if descending {
            (0..n).rev().for_each(&mut copy_one);
        } else {
            (0..n).for_each(&mut copy_one);
        }
        // SAFETY: `room` covered `at` plus the 8 padding bytes, all written now.
        unsafe {
            std::ptr::write_bytes(base.add(at), 0, 8);
            self.suffixes.set_len(at + 8);
        }
    }
}

impl LeafBatch for PageBatch {
    type Key = VarKey;

    fn clear(&mut self) {
        self.entries.clear();
        self.suffixes.clear();
        self.longest = 0;
    }

    #[inline]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn emit(&mut self, visit: &mut dyn FnMut(&VarKey, u64)) {
        let key = &mut self.key.bytes;
        key.clear();
        key.extend_from_slice(&self.prefix);
        let base = key.len();
        // Room for the mid-key and the longest suffix written as whole words.
        key.reserve(8 + self.longest.next_multiple_of(8));
        let out = key.as_mut_ptr();
        for entry in &self.entries {
            let held = self.width.held(entry.mid);
            let mid = self.width.mid_bytes(entry.mid);
            let (start, len) = (entry.start as usize, entry.len as usize);
            // SAFETY: the reserve above left room for 8 mid-key bytes after the prefix and
            // for the suffix rounded up to words after the `held <= 8` bytes that count, and
            // nothing reallocates the buffer in this loop; every word read from `suffixes`
            // lies within it (the last suffix is followed by 8 zero bytes); the bytes up to
            // `base + held + len` are written before the length is set.
            unsafe {
                std::ptr::copy_nonoverlapping(mid.as_ptr(), out.add(base), 8);
                let mut i = 0;
                while i < len {
                    std::ptr::copy_nonoverlapping(
                        self.suffixes.as_ptr().add(start + i),
                        out.add(base + held + i),
                        8,
                    );
                    i += 8;
                }
                self.key.bytes.set_len(base + held + len);
            }
            self.key.tid = self.with_tid.then_some(entry.tid);
            visit(&self.key, entry.value);
        }
    }

    #[inline]
    fn last_key(&self) -> Option<&VarKey> {
        (!self.entries.is_empty()).then_some(&self.key)
    }
}
