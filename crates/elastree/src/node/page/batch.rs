//! How a scan hands out a page's entries: each key is assembled straight from the page into
//! a reusable buffer (the page prefix written once per leaf, then per entry its mid-key bytes
//! and its suffix), the leaf's version is validated, and only then is the key handed out.
//! Nothing is copied twice and nothing is allocated per key.
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
        // is clamped to it), made once per leaf so that assembling a key reserves nothing.
        let rest_room = 8 + page.bin_len.next_multiple_of(8);
        for key in &mut self.keys {
            key.bytes.clear();
            page.prefix_into(meta, &mut key.bytes);
            key.bytes.reserve(rest_room);
        }
        let run = (&page, from, to, &valid);
        let visit = &mut visit;
        match (page.mids, descending) {
            (Mids::Four(m), false) => self.visit_run(run, &m[from..to], 0..to - from, visit),
            (Mids::Four(m), true) => self.visit_run(run, &m[from..to], (0..to - from).rev(), visit),
            (Mids::Eight(m), false) => self.visit_run(run, &m[from..to], 0..to - from, visit),
            (Mids::Eight(m), true) => {
                self.visit_run(run, &m[from..to], (0..to - from).rev(), visit)
            }
        }
    }

    /// Hands out entries `from + j` for each `j` of `order` (below `to - from`), whose
    /// mid-keys are `mids` (entries `from..to`, of one width), each after a validation (`valid`).
    /// Both key buffers hold the page prefix and have room for any rest of the page's keys
    /// (as `visit_with` leaves them).
    #[inline(always)]
    fn visit_run<M: MidSlot>(
        &mut self,
        (page, from, to, valid): (&Page<'_>, usize, usize, &impl Fn() -> bool),
        mids: &[M],
        order: impl Iterator<Item = usize>,
        visit: &mut impl FnMut(&VarKey, u64),
    ) -> Result<usize, usize> {
        let n = mids.len();
        let (locs, values) = (&page.locs[from..to][..n], &page.values[from..to][..n]);
        let tids = page.tids.get(from..to).unwrap_or(&[]);
        let [first, second] = &mut self.keys;
        let base = first.bytes.len();
        let (mut key, mut spare) = (first, second);
        // Whether `key` is `self.keys[1]`.
        let mut odd = false;
        let mut handed = 0;
        for j in order {
            let mid = mids[j].value();
            let loc = locs[j].load(Ordering::Relaxed);
            // SAFETY: `visit_with` reserved room for the prefix (`base` bytes) and the
            // longest rest of this page's keys in both buffers, and nothing since shrank them.
            unsafe { page.rest_from_reserved(M::WIDTH, mid, loc, base, &mut key.bytes) };
            key.tid =
                (!tids.is_empty()).then(|| tids.get(j).map_or(0, |t| t.load(Ordering::Relaxed)));
            let value = values[j].load(Ordering::Relaxed);
            if !valid() {
                return Err(handed);
            }
            visit(key, value);
            handed += 1;
            self.last = Some(usize::from(odd));
            std::mem::swap(&mut key, &mut spare);
            odd = !odd;
        }
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
