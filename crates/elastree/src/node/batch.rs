//! Scan batches: how a range scan hands out the entries of one leaf read under an optimistic
//! version, so that every entry handed out was validated first.
//!
//! A representation does it in whatever way is cheapest for it ([`NodeRepr::Batch`]):
//! [`SlotBatch`] copies owned keys (reused slot by slot, so that once it has grown it
//! allocates nothing), validates the leaf once and hands them out; the optimized page's batch
//! assembles each key straight from the page into a reusable buffer and validates the leaf
//! before handing out each one (`node/page/batch.rs`).

use std::any::{Any, TypeId};
use std::cell::RefCell;

use smallvec::SmallVec;

use super::{NodeHeader, NodeRepr};
use crate::sync::Optimistic;

/// What a scan keeps of the leaf it visits: the last key it handed out (the key a scan
/// resumes after), and whatever buffers it reuses from leaf to leaf.
pub trait LeafBatch: Default + Send + 'static {
    /// The key type handed out.
    type Key;

    /// The key handed out last by the latest [`ScanLeaf::visit_leaf`], if it handed any out.
    fn last_key(&self) -> Option<&Self::Key>;
}

/// The optimistic read of a leaf and the scan's callback, as [`ScanLeaf::visit_leaf`] takes
/// them.
pub type ReadAndVisit<'r, 'v, K> = (&'r Optimistic<'r>, &'v mut dyn FnMut(&K, u64));

/// How a scan hands out entries of representation `R`'s leaves under an optimistic read:
/// [`SlotBatch`] serves every representation through its key and value accessors (copy the
/// entries, validate once, hand them out), a representation with a way of its own (the
/// optimized page, which assembles each key straight from the page) implements it for
/// itself.
pub trait ScanLeaf<R: NodeRepr>: LeafBatch<Key = R::Owned> {
    /// Hands entries `from..to` of leaf `node` to `visit` (the last first when `descending`),
    /// each only after `read` validated the leaf at a point after that entry was read, and
    /// validates `read` at least once even when the range is empty (so that whatever the
    /// caller read of the leaf before the call is validated too). Returns `Ok(n)` when all
    /// `n` entries were handed out, or `Err(n)` when a validation failed after `n` of them
    /// were (those were present at the version the read began at; the rest were not handed
    /// out). Tolerant of torn contents.
    fn visit_leaf(
        &mut self,
        node: &NodeHeader,
        config: &R::Config,
        range: (usize, usize),
        descending: bool,
        read_and_visit: ReadAndVisit<'_, '_, R::Owned>,
    ) -> Result<usize, usize>;
}

thread_local! {
    /// Each thread's scan scratch (batches and resume keys), one per type, kept from scan to
    /// scan so that a scan copies keys into buffers that already have room for them.
    static SCRATCH: RefCell<Vec<(TypeId, Box<dyn Any>)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's scratch value of type `B` (as the last run left it), or with
/// a fresh one when the thread's is in use (a scan from inside another scan's callback).
pub fn with_thread_scratch<B: Default + 'static, T>(f: impl FnOnce(&mut B) -> T) -> T {
    let id = TypeId::of::<B>();
    let taken = SCRATCH.with(|cell| {
        let mut all = cell.borrow_mut();
        let at = all.iter().position(|(t, _)| *t == id)?;
        Some(all.swap_remove(at).1)
    });
    let mut scratch: Box<B> = taken
        .and_then(|b| b.downcast::<B>().ok())
        .unwrap_or_default();
    let result = f(&mut scratch);
    SCRATCH.with(|cell| cell.borrow_mut().push((id, scratch as Box<dyn Any>)));
    result
}

/// A batch of owned keys and values, for representations whose keys are cheap to copy whole
/// (integers) or stored whole (slotted nodes). Slots are reused: a key is overwritten in
/// place ([`NodeRepr::key_into`]), so a batch that has held a leaf's worth of keys allocates
/// nothing more. Its first 16 slots are inline.
pub struct SlotBatch<K> {
    slots: SmallVec<[(K, u64); 16]>,
    len: usize,
}

impl<K> Default for SlotBatch<K> {
    fn default() -> Self {
        Self {
            slots: SmallVec::new(),
            len: 0,
        }
    }
}

impl<K> SlotBatch<K> {
    /// Copies entries `from..to` of `node` (descending: `to - 1` down to `from`).
    #[inline]
    pub fn copy<R: NodeRepr<Owned = K>>(
        &mut self,
        node: &NodeHeader,
        config: &R::Config,
        (from, to): (usize, usize),
        descending: bool,
    ) {
        if !std::mem::needs_drop::<K>() {
            // Keys without a buffer of their own (integers) gain nothing from reused slots:
            // each is built in a register and pushed.
            self.slots.truncate(self.len);
            self.slots.reserve(to.saturating_sub(from));
            let entry = |i: usize| (R::key_at(node, config, i), R::value_at(node, config, i));
            if descending {
                self.slots.extend((from..to).rev().map(entry));
            } else {
                self.slots.extend((from..to).map(entry));
            }
            self.len = self.slots.len();
            return;
        }
        let mut copy_one = |i: usize| {
            if self.len == self.slots.len() {
                self.slots
                    .push((R::key_at(node, config, i), R::value_at(node, config, i)));
            } else {
                let slot = &mut self.slots[self.len];
                R::key_into(node, config, i, &mut slot.0);
                slot.1 = R::value_at(node, config, i);
            }
            self.len += 1;
        };
        if descending {
            (from..to).rev().for_each(&mut copy_one);
        } else {
            (from..to).for_each(&mut copy_one);
        }
    }
}

impl<K: Send + 'static, R: NodeRepr<Owned = K>> ScanLeaf<R> for SlotBatch<K> {
    /// Copies the entries, validates once, then hands them all out.
    #[inline]
    fn visit_leaf(
        &mut self,
        node: &NodeHeader,
        config: &R::Config,
        range: (usize, usize),
        descending: bool,
        (read, visit): ReadAndVisit<'_, '_, K>,
    ) -> Result<usize, usize> {
        self.len = 0;
        self.copy::<R>(node, config, range, descending);
        if read.validate().is_err() {
            self.len = 0;
            return Err(0);
        }
        for (key, value) in &self.slots[..self.len] {
            visit(key, *value);
        }
        Ok(self.len)
    }
}

impl<K: Send + 'static> LeafBatch for SlotBatch<K> {
    type Key = K;

    #[inline]
    fn last_key(&self) -> Option<&K> {
        self.len.checked_sub(1).map(|i| &self.slots[i].0)
    }
}
