//! How a scan hands out a page's entries: each key is assembled straight from the page into
//! a reusable buffer (the page prefix written once per leaf, then per entry its mid-key bytes
//! and its suffix; under a prefix shorter than a word, the key's first word is rewritten
//! whole, so that a caller's 8-byte load of it is forwarded from one store), the leaf's
//! version is validated, and only then is the key handed out. Nothing is copied twice and
//! nothing is allocated per key.
//!
//! Two buffers take turns: the one holding the key handed out last is never written while
//! the next key is assembled in the other, so when a validation fails, the key a scan
//! resumes after is still whole ([`LeafBatch::last_key`]).
//!
//! Every read of the page goes through atomics (its views clamp indexes, offsets and
//! lengths), and a key is handed out only after the version check that follows its reads
//! (the seqlock pattern: the check's acquire fence orders the reads before it), so a torn key
//! is never seen by the caller.

use super::super::batch::{LeafBatch, ReadAndVisit, ScanLeaf};
use super::super::slotted::VarKey;
use super::super::NodeHeader;

use std::sync::atomic::Ordering;

use super::encode::MidSlot;
use super::layout::{Mids, Page};
use super::{PageConfig, PageRepr};

/// The reusable key buffers of a scan over pages (see the module).
#[derive(Default)]
pub struct PageBatch {
    keys: [VarKey; 2],
    /// Which of `keys` holds the key handed out last, if the latest leaf handed any out.
    last: Option<usize>,
}

impl ScanLeaf<PageRepr> for PageBatch {
    fn visit_leaf(
        &mut self,
        node: &NodeHeader,
        config: &PageConfig,
        range: (usize, usize),
        descending: bool,
        (read, visit): ReadAndVisit<'_, '_, VarKey>,
    ) -> Result<usize, usize> {
        self.visit_with(
            node,
            config,
            range,
            descending,
            || read.validate().is_ok(),
            visit,
        )
    }
}

impl PageBatch {
    /// Hands entries `from..to` of `node` to `visit` (the last first when `descending`), with
    /// no validation: for pages never written after they were published (the Bw-tree's base
    /// pages), read while the thread holds them (pinned). Returns how many it handed out.
    /// `visit` is called directly (inlined into the loop where the caller's closure allows).
    #[inline]
    pub fn visit_published(
        &mut self,
        node: &NodeHeader,
        config: &PageConfig,
        range: (usize, usize),
        descending: bool,
        visit: impl FnMut(&VarKey, u64),
    ) -> usize {
        match self.visit_with(node, config, range, descending, || true, visit) {
            Ok(n) | Err(n) => n,
        }
    }

    /// [`ScanLeaf::visit_leaf`] with the validation `valid` (`false`: the page changed).
    #[inline(always)]
    fn visit_with(
        &mut self,
        node: &NodeHeader,
        config: &PageConfig,
        (from, to): (usize, usize),
        descending: bool,
        valid: impl Fn() -> bool,
        mut visit: impl FnMut(&VarKey, u64),
    ) -> Result<usize, usize> {
        self.last = None;
        let page = Page::of(node, config.form);
        let to = to.min(page.count());
        if from >= to {
            return if valid() { Ok(0) } else { Err(0) };
        }
        let meta = page.meta();
        // Room for the prefix and the longest rest a key of this page can have (its mid-key
        // bytes, then its suffix as whole words, the suffix at most the bin: a torn location
        // is clamped to it), and a word more (a short prefix's key is written from byte 0 as
        // two whole words), made once per leaf so that assembling a key reserves nothing.
        let rest_room = 16 + page.bin_len.next_multiple_of(8);
        for key in &mut self.keys {
            key.bytes.clear();
            page.prefix_into(meta, &mut key.bytes);
            key.bytes.reserve(rest_room);
        }
        let run = (&page, from, to, &valid);
        let visit = &mut visit;
        // A suffix-free page's keys are each the prefix and a mid-key: its suffix
        // locations are never read.
        match (page.mids, page.suffix_free) {
            (Mids::Four(m), true) => {
                self.visit_mids::<_, false>(run, &m[from..to], descending, visit)
            }
            (Mids::Four(m), false) => {
                self.visit_mids::<_, true>(run, &m[from..to], descending, visit)
            }
            (Mids::Eight(m), true) => {
                self.visit_mids::<_, false>(run, &m[from..to], descending, visit)
            }
            (Mids::Eight(m), false) => {
                self.visit_mids::<_, true>(run, &m[from..to], descending, visit)
            }
        }
    }

    /// [`Self::visit_run`] over all of `mids`, in the order `descending` says.
    #[inline(always)]
    fn visit_mids<M: MidSlot, const SUFFIXES: bool>(
        &mut self,
        run: (&Page<'_>, usize, usize, &impl Fn() -> bool),
        mids: &[M],
        descending: bool,
        visit: &mut impl FnMut(&VarKey, u64),
    ) -> Result<usize, usize> {
        let n = mids.len();
        if descending {
            self.visit_run::<M, SUFFIXES>(run, mids, (0..n).rev(), visit)
        } else {
            self.visit_run::<M, SUFFIXES>(run, mids, 0..n, visit)
        }
    }

    /// Hands out entries `from + j` for each `j` of `order` (below `to - from`), whose
    /// mid-keys are `mids` (entries `from..to`, of one width), each after a validation (`valid`).
    /// Both key buffers hold the page prefix and have room for any rest of the page's keys
    /// (as `visit_with` leaves them). `SUFFIXES`: whether the entries may have suffixes (else
    /// their suffix locations are not read: the page is suffix-free, and a torn flag only
    /// assembles a wrong key that the validation rejects).
    #[inline(always)]
    fn visit_run<M: MidSlot, const SUFFIXES: bool>(
        &mut self,
        (page, from, to, valid): (&Page<'_>, usize, usize, &impl Fn() -> bool),
        mids: &[M],
        order: impl Iterator<Item = usize>,
        visit: &mut impl FnMut(&VarKey, u64),
    ) -> Result<usize, usize> {
        let n = mids.len();
        let (locs, values) = (&page.locs[from..to][..n], &page.values[from..to][..n]);
        let tids = page.tids.get(from..to).unwrap_or(&[]);
        let with_tid = !tids.is_empty();
        let base = self.keys[0].bytes.len();
        // The prefix's first bytes as a big-endian word, zero after them: the header's copy
        // (see `Page::rest_from_reserved`; a torn copy only assembles a key the validation
        // rejects).
        let head = page.inline_word(0);
        // The keys handed out take turns in the two buffers: the `k`-th (from 0) is
        // assembled in `self.keys[k % 2]`.
        let mut handed = 0;
        let last = |handed: usize| handed.checked_sub(1).map(|k| k & 1);
        for j in order {
            let key = &mut self.keys[handed & 1];
            let mid = mids[j].value();
            let loc = if SUFFIXES {
                locs[j].load(Ordering::Relaxed)
            } else {
                0
            };
            // SAFETY: `visit_with` reserved room for the prefix (`base` bytes) and the
            // longest rest of this page's keys in both buffers, and nothing since shrank them.
            unsafe { page.rest_from_reserved(M::WIDTH, (mid, loc), (base, head), &mut key.bytes) };
            key.tid = if with_tid {
                Some(tids.get(j).map_or(0, |t| t.load(Ordering::Relaxed)))
            } else {
                None
            };
            let value = values[j].load(Ordering::Relaxed);
            if !valid() {
                self.last = last(handed);
                return Err(handed);
            }
            visit(key, value);
            handed += 1;
        }
        self.last = last(handed);
        Ok(handed)
    }
}

impl LeafBatch for PageBatch {
    type Key = VarKey;

    #[inline]
    fn last_key(&self) -> Option<&VarKey> {
        self.last.map(|k| &self.keys[k])
    }
}
