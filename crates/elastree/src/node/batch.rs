//! Scan batches: the entries a range scan copies out of one leaf under an optimistic read,
//! held until the leaf's version validates and then handed to the caller.
//!
//! A representation copies entries in whatever form is cheapest for it ([`NodeRepr::Batch`]):
//! [`SlotBatch`] holds owned keys (reused slot by slot, so that once it has grown it allocates
//! nothing), and the optimized page's batch holds the page prefix once and each entry's
//! mid-key and suffix, assembling every key into one buffer only as it hands it out.

use std::any::{Any, TypeId};
use std::cell::RefCell;

use smallvec::SmallVec;

use super::{NodeHeader, NodeRepr};

/// The entries of one leaf a scan has copied, keys of type `K`.
pub trait LeafBatch: Default + Send + 'static {
    /// The key type handed out.
    type Key;

    /// Drops the entries (keeping buffers for reuse).
    fn clear(&mut self);

    /// Entries held.
    fn len(&self) -> usize;

    /// Whether the batch holds no entry.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands every entry to `visit`, in the order they were copied.
    fn emit(&mut self, visit: &mut dyn FnMut(&Self::Key, u64));

    /// The last entry's key (after [`LeafBatch::emit`]: the last one handed out).
    fn last_key(&self) -> Option<&Self::Key>;
}

/// How a batch copies entries of representation `R`'s leaves: [`SlotBatch`] serves every
/// representation through its key and value accessors, a representation with a batch of its
/// own (the optimized page) implements it for itself.
pub trait CopyFrom<R: NodeRepr> {
    /// Copies entries `from..to` of leaf `node` after what the batch holds (the last first
    /// when `descending`). Read under an optimistic version: tolerant of torn contents.
    fn copy_from(
        &mut self,
        node: &NodeHeader,
        config: &R::Config,
        range: (usize, usize),
        descending: bool,
    );
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

impl<K, R: NodeRepr<Owned = K>> CopyFrom<R> for SlotBatch<K> {
    #[inline]
    fn copy_from(
        &mut self,
        node: &NodeHeader,
        config: &R::Config,
        range: (usize, usize),
        descending: bool,
    ) {
        self.copy::<R>(node, config, range, descending);
    }
}

impl<K: Send + 'static> LeafBatch for SlotBatch<K> {
    type Key = K;

    #[inline]
    fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn emit(&mut self, visit: &mut dyn FnMut(&K, u64)) {
        for (key, value) in &self.slots[..self.len] {
            visit(key, *value);
        }
    }

    #[inline]
    fn last_key(&self) -> Option<&K> {
        self.len.checked_sub(1).map(|i| &self.slots[i].0)
    }
}
