//! The SeqTree: a compact B+-tree leaf that stores no keys (elastic-index paper, section 5).
//!
//! A SeqTree leaf holds `n` entries in key order as three arrays:
//!
//! * **BlindiBits** (`bits`, `n - 1` entries): entry `i` is the first bit in which keys `i`
//!   and `i + 1` differ (see [`super::blind`] for the bit view of each key type). This is a
//!   blind trie in in-order: the smallest entry of any range is the root of that range's
//!   sub-trie.
//! * **BlindiTree** (`tree`, `2^levels - 1` entries): the top `levels` levels of that trie as
//!   an implicit binary tree (children of `t` at `2t + 1` and `2t + 2`), each entry the index
//!   of its node in `bits`, or [`END_TREE`] where the trie has no node. A search descends it
//!   instead of scanning all of `bits`.
//! * **tuple ids** (`tids`, `n` entries): the values; keys are loaded from the table through
//!   the tree's [`KeySource`] when a search must confirm its candidate.
//!
//! # Search (section 5.2)
//!
//! A search descends the BlindiTree testing the probe's bit at each node, narrowing a range
//! of entries, and when it falls off the tree scans that range sequentially with the
//! hit/miss rule (a hit at entry `i` moves the candidate to key `i + 1`; a miss at bit `b`
//! makes the scan ignore later entries with bits above `b`, which belong to the right
//! sub-trie it just rejected). It then loads the candidate's key and compares. On a mismatch
//! at bit `d`, every key sharing the first `d` bits with the candidate forms one contiguous
//! group (the sub-trie under the deepest node with a bit below `d`), and the probe lies
//! entirely before or after it: if the search fell off the tree below a node with a bit above
//! `d`, the group is that tree node's range (found by ascending the path); otherwise it is
//! found sequentially inside the fall-off range. The result is the position of the first key
//! not less than the probe, as for every node representation.
//!
//! # Layout
//!
//! ```text
//! node (48 bytes):  NodeHeader (format = FORMAT_COMPACT) | capacity: u32 | pad | body ptr
//! body (one allocation, replaced as a whole):
//!     word 0        slots (low 32 bits) | tree entries (high 32 bits), fixed at allocation
//!     tree cells    u16 each, END_TREE = u16::MAX
//!     slots cells   bit positions (u8 or u16: `BlindKeys::Pos`)
//!     slots words   tids (8-byte aligned)
//! ```
//!
//! Invariants (no writer holding the lock): `count <= capacity` and `count <= slots`;
//! `bits[i]` is the first differing bit of keys `i` and `i + 1` for `i < count - 1`; keys
//! ascend strictly; `tree` is the BlindiTree built from `bits` (each node the smallest bit of its range).
//!
//! **Breathing** (section 5.4): a body has room for `slots = count + s` entries, not for the
//! capacity; an insert into a full body replaces it by one `s` slots larger, a remove that
//! leaves more than `2s` free slots replaces it by a tighter one, and a split gives each half
//! `count / 2 + s` slots. In leaves larger than the paper's (the elastic tree's reach 1,024
//! keys) the slack is at least a 64th of the count, so copies stay amortised. Searches never look at the slack. Replaced bodies are retired to
//! the epoch collector, since optimistic readers may still be reading them.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_epoch as epoch;

use super::blind::{BlindKeys, PosCell};
use super::{NodeHeader, SearchResult};
use crate::mem::ByteCounter;
use crate::table::KeySource;

/// The `NodeHeader::format` of a SeqTree leaf.
pub const FORMAT_COMPACT: u8 = 1;
/// A BlindiTree entry with no trie node.
pub const END_TREE: u16 = u16::MAX;
/// The largest capacity of a SeqTree leaf (positions in the BlindiTree are `u16`).
pub const MAX_SEQ_CAPACITY: usize = 4096;
/// The most BlindiTree levels (the paper sweeps 0..6).
pub const MAX_LEVELS: u8 = 8;

/// Settings and shared state of the SeqTree leaves of one tree.
pub struct SeqShared {
    /// Where keys are loaded from: the key of every indexed tid.
    pub keys: Arc<dyn KeySource>,
    /// Whether the tid is part of the key (non-unique trees).
    pub composite: bool,
    /// BlindiTree levels (default 2).
    pub levels: u8,
    /// Breathing slack `s`: spare tid slots per body (default 4).
    pub breathing: usize,
    /// Bytes of every live body (node stubs are counted by the tree).
    pub body_bytes: ByteCounter,
}

impl std::fmt::Debug for SeqShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqShared")
            .field("composite", &self.composite)
            .field("levels", &self.levels)
            .field("breathing", &self.breathing)
            .field("body_bytes", &self.body_bytes.get())
            .finish()
    }
}

impl SeqShared {
    fn tree_len(&self) -> usize {
        (1usize << self.levels.min(MAX_LEVELS)) - 1
    }
}

/// The fixed part of a SeqTree leaf.
#[repr(C)]
struct CompactNode {
    header: NodeHeader,
    capacity: AtomicU32,
    _pad: u32,
    body: AtomicPtr<AtomicU64>,
}

const STUB_BYTES: usize = size_of::<CompactNode>();
const _: () = assert!(STUB_BYTES == 40);

/// A view of one body.
struct Body<'b, P> {
    slots: usize,
    tids: &'b [AtomicU64],
    tree: &'b [AtomicU16],
    bits: &'b [P],
}

/// The layout of a body and the byte offsets of its tree and bits arrays.
/// The layout of a body and the byte offsets of its bits and tids arrays. The tree and the
/// bits come first, next to the meta word, so a search reads adjacent cache lines before the
/// one tid it needs.
fn body_layout<P: PosCell>(slots: usize, tree_len: usize) -> (Layout, usize, usize) {
    let bits_at = 8 + 2 * tree_len;
    let tids_at = (bits_at + P::BYTES * slots).next_multiple_of(8);
    let end = tids_at + 8 * slots;
    let layout = Layout::from_size_align(end, 8).expect("body layout");
    (layout, bits_at, tids_at)
}

impl<'b, P: PosCell> Body<'b, P> {
    /// The body at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`alloc_body`] and stays allocated for `'b` (the epoch guard).
    unsafe fn at(ptr: *const AtomicU64) -> Self {
        // SAFETY: word 0 is the meta word, written before publication, never changed.
        let meta = unsafe { &*ptr }.load(Ordering::Relaxed);
        let slots = meta as u32 as usize;
        let tree_len = (meta >> 32) as usize;
        let (_, bits_at, tids_at) = body_layout::<P>(slots, tree_len);
        let base = ptr as *const u8;
        // SAFETY: the body was allocated with exactly this layout (tids 8-byte aligned); every
        // cell is an atomic, so shared references are sound while writers store into them.
        unsafe {
            Body {
                slots,
                tids: std::slice::from_raw_parts(base.add(tids_at) as *const AtomicU64, slots),
                tree: std::slice::from_raw_parts(base.add(8) as *const AtomicU16, tree_len),
                bits: std::slice::from_raw_parts(base.add(bits_at) as *const P, slots),
            }
        }
    }

    #[inline]
    fn tid(&self, i: usize) -> u64 {
        self.tids[i].load(Ordering::Relaxed)
    }

    #[inline]
    fn bit(&self, i: usize) -> u32 {
        self.bits[i].get()
    }

    #[inline]
    fn tree_entry(&self, t: usize) -> u16 {
        self.tree[t].load(Ordering::Relaxed)
    }
}

/// Allocates a zeroed body with `slots` slots; returns it and its size.
fn alloc_body<P: PosCell>(slots: usize, tree_len: usize) -> (NonNull<AtomicU64>, usize) {
    let (layout, _, _) = body_layout::<P>(slots, tree_len);
    // SAFETY: non-zero size (at least the meta word); zeroed memory is valid for atomics.
    let ptr = unsafe { alloc_zeroed(layout) } as *mut AtomicU64;
    let Some(body) = NonNull::new(ptr) else {
        handle_alloc_error(layout)
    };
    let meta = slots as u64 | ((tree_len as u64) << 32);
    // SAFETY: freshly allocated and aligned.
    unsafe { body.as_ref() }.store(meta, Ordering::Relaxed);
    (body, layout.size())
}

/// Frees a body; returns its size.
///
/// # Safety
///
/// `body` came from [`alloc_body`] with the same `P` and nobody references it any more.
unsafe fn free_body<P: PosCell>(body: NonNull<AtomicU64>) -> usize {
    // SAFETY: the meta word is intact until the free.
    let meta = unsafe { body.as_ref() }.load(Ordering::Relaxed);
    let (layout, _, _) = body_layout::<P>(meta as u32 as usize, (meta >> 32) as usize);
    // SAFETY: allocated with this layout.
    unsafe { dealloc(body.as_ptr() as *mut u8, layout) };
    layout.size()
}

thread_local! {
    /// Buffer for keys loaded through the key source, reused by every search on a thread.
    static KEY_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the key of `tid` (`None` if the key source has no such tuple).
fn with_key<T>(keys: &dyn KeySource, tid: u64, f: impl FnOnce(Option<&[u8]>) -> T) -> T {
    KEY_BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            let found = keys.key(tid, &mut buffer);
            f(found.then_some(buffer.as_slice()))
        }
        // A key source that searches an index from inside `key`: use a fresh buffer.
        Err(_) => {
            let mut buffer = Vec::new();
            let found = keys.key(tid, &mut buffer);
            f(found.then_some(buffer.as_slice()))
        }
    })
}

/// A tree node visited by a search: its range of keys before descending, and its bit.
#[derive(Clone, Copy, Default)]
struct PathStep {
    lo: usize,
    hi: usize,
    bit: u32,
}

/// The SeqTree leaf representation over the keys of representation `K`.
pub struct SeqTree<K>(PhantomData<K>);

impl<K: BlindKeys> SeqTree<K> {
    #[inline]
    fn stub(node: &NodeHeader) -> &CompactNode {
        // SAFETY: callers only pass nodes whose format is FORMAT_COMPACT, which were
        // allocated by `alloc` as a `CompactNode` (header first, `repr(C)`).
        unsafe { &*(node as *const NodeHeader as *const CompactNode) }
    }

    #[inline]
    fn body(node: &NodeHeader) -> Body<'_, K::Pos> {
        let ptr = Self::stub(node).body.load(Ordering::Acquire);
        // SAFETY: a compact node always has a body; bodies replaced under the write lock are
        // retired to the epoch collector, and every caller is pinned.
        unsafe { Body::at(ptr) }
    }

    /// Allocates an empty SeqTree leaf of `capacity`; returns it and the bytes of its stub
    /// (its body is counted in `shared.body_bytes`).
    pub fn alloc(shared: &SeqShared, capacity: usize) -> (NonNull<NodeHeader>, usize) {
        let capacity = capacity.clamp(2, MAX_SEQ_CAPACITY);
        let slots = shared.breathing.max(1).min(capacity);
        let (body, body_bytes) = alloc_body::<K::Pos>(slots, shared.tree_len());
        shared.body_bytes.add(body_bytes);
        let layout = Layout::new::<CompactNode>();
        let header = NodeHeader::new(0);
        header.format.store(FORMAT_COMPACT, Ordering::Relaxed);
        let stub = CompactNode {
            header,
            capacity: AtomicU32::new(capacity as u32),
            _pad: 0,
            body: AtomicPtr::new(body.as_ptr()),
        };
        let node = Box::into_raw(Box::new(stub)) as *mut NodeHeader;
        // SAFETY: just allocated.
        Self::build_tree(&Self::body(unsafe { &*node }), 0);
        // SAFETY: Box::into_raw is never null.
        (unsafe { NonNull::new_unchecked(node) }, layout.size())
    }

    /// Frees a SeqTree leaf and its body; returns the stub's bytes.
    ///
    /// # Safety
    ///
    /// `node` came from [`SeqTree::alloc`] and nobody references it any more.
    pub unsafe fn free(shared: &SeqShared, node: NonNull<NodeHeader>) -> usize {
        let stub = node.as_ptr() as *mut CompactNode;
        // SAFETY: allocated by `alloc` as a boxed CompactNode; exclusively ours now.
        let stub = unsafe { Box::from_raw(stub) };
        if let Some(body) = NonNull::new(stub.body.load(Ordering::Relaxed)) {
            // SAFETY: the node's current body, unreachable with the node.
            shared.body_bytes.sub(unsafe { free_body::<K::Pos>(body) });
        }
        STUB_BYTES
    }

    /// The leaf's capacity.
    #[inline]
    pub fn capacity(node: &NodeHeader) -> usize {
        (Self::stub(node).capacity.load(Ordering::Relaxed) as usize).min(MAX_SEQ_CAPACITY)
    }

    /// Changes the capacity in place (write lock held; `count <= capacity`).
    pub fn set_capacity(node: &NodeHeader, capacity: usize) {
        let capacity = capacity.clamp(2, MAX_SEQ_CAPACITY) as u32;
        Self::stub(node).capacity.store(capacity, Ordering::Relaxed);
    }

    /// The entry count clamped to what the body and capacity can hold.
    #[inline]
    pub fn count(node: &NodeHeader) -> usize {
        let body = Self::body(node);
        node.count().min(body.slots).min(Self::capacity(node))
    }

    /// Whether one more entry fits under the capacity.
    #[inline]
    pub fn has_room(node: &NodeHeader) -> bool {
        node.count() < Self::capacity(node)
    }

    /// The tid of entry `i`.
    #[inline]
    pub fn value_at(node: &NodeHeader, i: usize) -> u64 {
        let body = Self::body(node);
        body.tid(i.min(body.slots.saturating_sub(1)))
    }

    /// Overwrites the tid of entry `i` (write lock held; the new tid has the same key).
    pub fn set_value(node: &NodeHeader, i: usize, value: u64) {
        let body = Self::body(node);
        if i < body.slots {
            body.tids[i].store(value, Ordering::Relaxed);
        }
    }

    /// Asks the key source to start loading the keys of entries `from..to`.
    pub fn prefetch_keys(node: &NodeHeader, shared: &SeqShared, from: usize, to: usize) {
        let body = Self::body(node);
        let to = to.min(body.slots);
        for i in from.min(to)..to {
            shared.keys.prefetch(body.tid(i));
        }
    }

    /// The key of entry `i`, loaded through the key source.
    pub fn key_at(node: &NodeHeader, shared: &SeqShared, i: usize) -> K::Owned {
        let tid = Self::value_at(node, i);
        with_key(&*shared.keys, tid, |bytes| {
            K::owned_from_loaded(bytes.unwrap_or(&[]), tid, shared.composite)
        })
    }

    /// [`SeqTree::key_at`] into `out`, reusing what it holds.
    pub fn key_into(node: &NodeHeader, shared: &SeqShared, i: usize, out: &mut K::Owned) {
        let tid = Self::value_at(node, i);
        with_key(&*shared.keys, tid, |bytes| {
            K::owned_into(bytes.unwrap_or(&[]), tid, shared.composite, out)
        })
    }

    /// Searches with predecessor semantics; see the module docs. Tolerant of torn contents.
    pub fn search(node: &NodeHeader, shared: &SeqShared, probe: K::Probe<'_>) -> SearchResult {
        let body = Self::body(node);
        let n = node.count().min(body.slots);
        if n == 0 {
            return SearchResult {
                pos: 0,
                found: false,
            };
        }
        // Stage 1: descend the BlindiTree over the key range [lo, hi].
        let (mut lo, mut hi) = (0, n - 1);
        let mut path = [PathStep::default(); MAX_LEVELS as usize];
        let mut depth = 0;
        let mut t = 0;
        while t < body.tree.len() && lo < hi {
            let e = body.tree_entry(t) as usize;
            if e < lo || e >= hi {
                break; // END_TREE, or a torn entry: continue sequentially.
            }
            let bit = body.bit(e);
            path[depth] = PathStep { lo, hi, bit };
            depth += 1;
            if K::bit(probe, bit) {
                lo = e + 1;
                t = 2 * t + 2;
            } else {
                hi = e;
                t = 2 * t + 1;
            }
        }
        // Stage 2: the sequential hit/miss scan of the fall-off range.
        let mut candidate = lo;
        let mut ignore_above = u32::MAX;
        for i in lo..hi {
            let bit = body.bit(i);
            if bit > ignore_above {
                continue;
            }
            if K::bit(probe, bit) {
                candidate = i + 1;
                ignore_above = u32::MAX;
            } else {
                ignore_above = bit;
            }
        }
        // Stage 3: confirm against the table.
        let tid = body.tid(candidate);
        let diff = with_key(&*shared.keys, tid, |bytes| match bytes {
            Some(bytes) => K::diff_loaded(probe, bytes, tid, shared.composite),
            // A torn tid; the caller's validation fails. Any in-bounds answer will do.
            None => Some(0),
        });
        let Some(d) = diff else {
            return SearchResult {
                pos: candidate,
                found: true,
            };
        };
        let greater = K::bit(probe, d);
        // The group of keys sharing the first `d` bits with the candidate.
        let (group_lo, group_hi) = match path[..depth].iter().find(|step| step.bit >= d) {
            // The shallowest path node at or below bit `d` roots the group: ascend to it.
            Some(step) => (step.lo, step.hi),
            // Every path bit is below `d`: the group lies inside the fall-off range.
            None => {
                let right = (candidate..hi).find(|&i| body.bit(i) < d).unwrap_or(hi);
                let left = (lo..candidate)
                    .rev()
                    .find(|&i| body.bit(i) < d)
                    .map_or(lo, |i| i + 1);
                (left, right)
            }
        };
        SearchResult {
            pos: if greater { group_hi + 1 } else { group_lo },
            found: false,
        }
    }

    /// Builds the BlindiTree of a body holding `n` entries from its bits (section 5.3):
    /// each tree node points to the smallest bit in its range (the root of that range's
    /// sub-trie); an empty range gets [`END_TREE`].
    fn build_tree(body: &Body<'_, K::Pos>, n: usize) {
        Self::build_subtree(body, 0, 0, n.saturating_sub(1));
    }

    /// Builds the sub-tree of tree node `t`, whose range is bits `lo..hi`.
    fn build_subtree(body: &Body<'_, K::Pos>, t: usize, lo: usize, hi: usize) {
        Self::plan_subtree(body, t, lo, hi, &mut |t, e| {
            body.tree[t].store(e, Ordering::Relaxed)
        });
    }

    /// Computes the sub-tree of tree node `t` over bits `lo..hi` from the bits alone,
    /// handing each tree position and its entry to `set`.
    fn plan_subtree(
        body: &Body<'_, K::Pos>,
        t: usize,
        lo: usize,
        hi: usize,
        set: &mut impl FnMut(usize, u16),
    ) {
        if t >= body.tree.len() {
            return;
        }
        if lo >= hi {
            set(t, END_TREE);
            Self::plan_subtree(body, 2 * t + 1, lo, lo, set);
            Self::plan_subtree(body, 2 * t + 2, lo, lo, set);
            return;
        }
        let mut e = lo;
        for i in lo + 1..hi {
            if body.bit(i) < body.bit(e) {
                e = i;
            }
        }
        set(t, e as u16);
        Self::plan_subtree(body, 2 * t + 1, lo, e, set);
        Self::plan_subtree(body, 2 * t + 2, e + 1, hi, set);
    }

    /// Adds `delta` to every tree entry at or above bits index `from` (after entries were
    /// shifted in `bits`).
    fn shift_tree(body: &Body<'_, K::Pos>, from: usize, delta: isize) {
        for cell in body.tree {
            let e = cell.load(Ordering::Relaxed);
            if e != END_TREE && usize::from(e) >= from {
                cell.store((e as isize + delta) as u16, Ordering::Relaxed);
            }
        }
    }

    /// Updates the tree after a new trie node with bit `bit` took bits index `at` (the
    /// entries after it already shifted): descends the stored tree towards `at` and, where
    /// the new node belongs above a stored one (or fills an empty range), splices it in by
    /// rebuilding that sub-tree (section 5.3). Below the tree, nothing changes.
    fn splice(body: &Body<'_, K::Pos>, bits_len: usize, at: usize, bit: u32) {
        let (mut lo, mut hi, mut t) = (0, bits_len, 0);
        while t < body.tree.len() {
            let e = usize::from(body.tree_entry(t));
            if e == usize::from(END_TREE) || e < lo || e >= hi || body.bit(e) > bit {
                Self::build_subtree(body, t, lo, hi);
                return;
            }
            if at < e {
                hi = e;
                t = 2 * t + 1;
            } else {
                lo = e + 1;
                t = 2 * t + 2;
            }
        }
    }

    /// The bits range of tree node `t`, following the stored tree from the root.
    fn range_of(body: &Body<'_, K::Pos>, t: usize, bits_len: usize) -> (usize, usize) {
        let mut path = [0usize; MAX_LEVELS as usize];
        let (mut depth, mut node) = (0, t);
        while node > 0 {
            path[depth] = node;
            depth += 1;
            node = (node - 1) / 2;
        }
        let (mut lo, mut hi, mut parent) = (0, bits_len, 0);
        for &child in path[..depth].iter().rev() {
            let e = usize::from(body.tree_entry(parent)).min(hi);
            if child == 2 * parent + 1 {
                hi = e.max(lo);
            } else {
                lo = (e + 1).min(hi);
            }
            parent = child;
        }
        (lo, hi)
    }

    /// Replaces the node's body by `new` (write lock held) and retires the old one.
    fn swap_body(node: &NodeHeader, shared: &Arc<SeqShared>, new: NonNull<AtomicU64>) {
        let old = Self::stub(node).body.swap(new.as_ptr(), Ordering::AcqRel);
        let Some(old) = NonNull::new(old) else { return };
        let shared = Arc::clone(shared);
        let old_addr = old.as_ptr() as usize;
        let guard = epoch::pin();
        // SAFETY: the old body is unreachable from the node (swapped under the write lock);
        // readers that loaded it are pinned, so the collector frees it after they finish.
        unsafe {
            guard.defer_unchecked(move || {
                let old = NonNull::new_unchecked(old_addr as *mut AtomicU64);
                shared.body_bytes.sub(free_body::<K::Pos>(old));
            });
        }
    }

    /// Spare slots a body gets beyond `n` entries: the breathing parameter `s` (exactly the
    /// paper's rule in leaves of up to 128 keys once `s >= 2`), or a 64th of the entries in
    /// the elastic tree's larger leaves, so that a 1,024-key leaf is not copied every 4
    /// inserts.
    fn slack(shared: &SeqShared, n: usize) -> usize {
        shared.breathing.max(1).max(n / 64)
    }

    /// A fresh body for `n` entries of a leaf of `capacity`.
    fn new_body(shared: &SeqShared, n: usize, capacity: usize) -> NonNull<AtomicU64> {
        let slots = (n + Self::slack(shared, n)).min(capacity.max(n)).max(1);
        let (body, bytes) = alloc_body::<K::Pos>(slots, shared.tree_len());
        shared.body_bytes.add(bytes);
        body
    }

    /// Writes `tids` and `bits` as the node's whole contents (write lock held), reusing the
    /// body when it fits without too much slack, else in a fresh one.
    fn write_all(node: &NodeHeader, shared: &Arc<SeqShared>, tids: &[u64], bits: &[u32]) {
        let n = tids.len();
        let current = Self::body(node);
        if n <= current.slots && current.slots - n <= 2 * Self::slack(shared, n) {
            Self::fill(&current, tids, bits, n);
            node.set_count(n);
            return;
        }
        let new = Self::new_body(shared, n, Self::capacity(node));
        // SAFETY: freshly allocated body.
        Self::fill(&unsafe { Body::at(new.as_ptr()) }, tids, bits, n);
        node.set_count(n);
        Self::swap_body(node, shared, new);
    }

    fn fill(body: &Body<'_, K::Pos>, tids: &[u64], bits: &[u32], n: usize) {
        for (cell, &tid) in body.tids.iter().zip(tids) {
            cell.store(tid, Ordering::Relaxed);
        }
        for (cell, &bit) in body.bits.iter().zip(bits) {
            cell.set(bit);
        }
        Self::build_tree(body, n);
    }

    /// The node's entries as plain arrays (write lock held).
    fn snapshot(node: &NodeHeader) -> (Vec<u64>, Vec<u32>) {
        let body = Self::body(node);
        let n = Self::count(node);
        let tids = (0..n).map(|i| body.tid(i)).collect();
        let bits = (0..n.saturating_sub(1)).map(|i| body.bit(i)).collect();
        (tids, bits)
    }

    /// The first bit in which the keys of `left` and `right` differ (loaded).
    fn diff_tids(shared: &SeqShared, left: u64, right: u64) -> u32 {
        let left_key = with_key(&*shared.keys, left, |bytes| {
            K::owned_from_loaded(bytes.unwrap_or(&[]), left, shared.composite)
        });
        Self::diff_probe_tid(shared, K::probe(&left_key), right)
    }

    fn diff_probe_tid(shared: &SeqShared, probe: K::Probe<'_>, tid: u64) -> u32 {
        with_key(&*shared.keys, tid, |bytes| {
            K::diff_loaded(probe, bytes.unwrap_or(&[]), tid, shared.composite)
        })
        // Equal keys cannot be adjacent; a broken key source gets bit 0, which `check`
        // reports.
        .unwrap_or(0)
    }

    /// Writes the bits around a new key at position `i`: `left` (its first difference from
    /// key `i - 1`) at `i - 1` and `right` (from key `i + 1`) at `i`.
    fn set_new_bits(body: &Body<'_, K::Pos>, i: usize, left: Option<u32>, right: Option<u32>) {
        if let Some(l) = left {
            body.bits[i - 1].set(l);
        }
        if let Some(r) = right {
            body.bits[i].set(r);
        }
    }

    /// Inserts `(key, tid)` at position `i` (write lock held, `has_room`).
    pub fn insert_at(
        node: &NodeHeader,
        shared: &Arc<SeqShared>,
        i: usize,
        key: K::Probe<'_>,
        tid: u64,
    ) {
        let n = Self::count(node);
        let i = i.min(n);
        let body = Self::body(node);
        let left = (i > 0).then(|| Self::diff_probe_tid(shared, key, body.tid(i - 1)));
        let right = (i < n).then(|| Self::diff_probe_tid(shared, key, body.tid(i)));
        if n < body.slots {
            // In place: shift the tail right by one, then rebuild the tree.
            for k in (i..n).rev() {
                body.tids[k + 1].store(body.tid(k), Ordering::Relaxed);
            }
            body.tids[i].store(tid, Ordering::Relaxed);
            // bits: [.. i-1) stay; entry i-1 (if any) becomes `left`; `right` goes at i.
            if n >= 1 {
                for k in (i..n - 1).rev() {
                    body.bits[k + 1].set(body.bit(k));
                }
            }
            Self::set_new_bits(&body, i, left, right);
            node.set_count(n + 1);
            // The new trie node is the larger of the two bits around the new key; the
            // smaller one is the node that was there (and moves right when it is `right`).
            let new_node = match (left, right) {
                (Some(l), Some(r)) if l < r => Some((i, r)),
                (Some(l), _) => Some((i - 1, l)),
                (None, Some(r)) => Some((0, r)),
                (None, None) => None,
            };
            if let Some((at, bit)) = new_node {
                Self::shift_tree(&body, at, 1);
                Self::splice(&body, n, at, bit);
            }
            return;
        }
        // Breathing: the body is full; copy into a larger one with the entry in place.
        let new = Self::new_body(shared, n + 1, Self::capacity(node));
        // SAFETY: freshly allocated body.
        let fresh: Body<'_, K::Pos> = unsafe { Body::at(new.as_ptr()) };
        for k in 0..n {
            let to = k + usize::from(k >= i);
            fresh.tids[to].store(body.tid(k), Ordering::Relaxed);
        }
        fresh.tids[i].store(tid, Ordering::Relaxed);
        for k in 0..n.saturating_sub(1) {
            let to = k + usize::from(k >= i);
            fresh.bits[to].set(body.bit(k));
        }
        Self::set_new_bits(&fresh, i, left, right);
        Self::build_tree(&fresh, n + 1);
        node.set_count(n + 1);
        Self::swap_body(node, shared, new);
    }

    /// Removes entry `i` (write lock held). Needs no key loads: the bit between the new
    /// neighbours is the smaller of the two removed bits.
    pub fn remove_at(node: &NodeHeader, shared: &Arc<SeqShared>, i: usize) {
        let n = Self::count(node);
        if i >= n {
            return;
        }
        let body = Self::body(node);
        // The trie node that goes: of the two bits around key `i`, the larger.
        let gone = match i {
            _ if n < 2 => None,
            0 => Some(0),
            _ if i == n - 1 => Some(n - 2),
            _ if body.bit(i - 1) < body.bit(i) => Some(i),
            _ => Some(i - 1),
        };
        if n >= 2 && i > 0 && i < n - 1 {
            body.bits[i - 1].set(body.bit(i - 1).min(body.bit(i)));
        }
        // Entry `i` goes; bits entry `i` goes, except for the last key, whose bit is `i - 1`.
        let dropped_bit = if i == n - 1 { i.saturating_sub(1) } else { i };
        for k in i..n - 1 {
            body.tids[k].store(body.tid(k + 1), Ordering::Relaxed);
        }
        for k in dropped_bit..n.saturating_sub(2) {
            body.bits[k].set(body.bit(k + 1));
        }
        node.set_count(n - 1);
        if body.slots - (n - 1) > 2 * Self::slack(shared, n - 1) {
            // Breathing out: move into a tighter body.
            let (tids, bits) = Self::snapshot(node);
            Self::write_all(node, shared, &tids, &bits);
        } else if let Some(gone) = gone {
            // The tree node that pointed at the removed trie node (if it was in the tree)
            // loses it: rebuild its sub-tree; every later entry moves left by one.
            let holder = body
                .tree
                .iter()
                .position(|cell| usize::from(cell.load(Ordering::Relaxed)) == gone);
            Self::shift_tree(&body, gone + 1, -1);
            if let Some(t) = holder {
                let (lo, hi) = Self::range_of(&body, t, n - 2);
                Self::build_subtree(&body, t, lo, hi);
            }
        }
    }

    /// Moves entries `from..count` of `src` to the end of `dst` (both SeqTree leaves,
    /// write-locked or `dst` unpublished; `dst` has room).
    pub fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, shared: &Arc<SeqShared>) {
        let (src_tids, src_bits) = Self::snapshot(src);
        let from = from.min(src_tids.len());
        let (mut tids, mut bits) = Self::snapshot(dst);
        let moved = &src_tids[from..];
        if moved.is_empty() {
            return;
        }
        if let Some(&last) = tids.last() {
            bits.push(Self::diff_tids(shared, last, moved[0]));
        }
        tids.extend_from_slice(moved);
        bits.extend_from_slice(src_bits.get(from..).unwrap_or(&[]));
        Self::write_all(dst, shared, &tids, &bits);
        let keep_bits = from.saturating_sub(1);
        Self::write_all(src, shared, &src_tids[..from], &src_bits[..keep_bits]);
    }

    /// Appends entries given with their keys (ascending, above every key of `dst`) to `dst`
    /// (write-locked or unpublished; room for all): how a standard leaf's entries enter a
    /// SeqTree leaf without loading any key but the junction.
    pub fn append_entries(dst: &NodeHeader, shared: &Arc<SeqShared>, entries: &[(K::Owned, u64)]) {
        if entries.is_empty() {
            return;
        }
        let (mut tids, mut bits) = Self::snapshot(dst);
        if let Some(&last) = tids.last() {
            bits.push(Self::diff_probe_tid(shared, K::probe(&entries[0].0), last));
        }
        for pair in entries.windows(2) {
            // Both keys are in hand: no key load.
            bits.push(K::diff_probes(K::probe(&pair[0].0), K::probe(&pair[1].0)).unwrap_or(0));
        }
        tids.extend(entries.iter().map(|(_, tid)| *tid));
        Self::write_all(dst, shared, &tids, &bits);
    }

    /// Checks the invariants of the module docs against the keys loaded from the source.
    pub fn check_node(node: &NodeHeader, shared: &SeqShared) -> Result<(), String> {
        let body = Self::body(node);
        let n = node.count();
        let cap = Self::capacity(node);
        if n > cap || n > body.slots {
            return Err(format!(
                "count {n} exceeds capacity {cap} or slots {}",
                body.slots
            ));
        }
        let mut buf = Vec::new();
        for i in 0..n {
            let tid = body.tid(i);
            if !shared.keys.key(tid, &mut buf) {
                return Err(format!("entry {i}: tid {tid} has no key in the key source"));
            }
        }
        for i in 0..n.saturating_sub(1) {
            let left = Self::key_at(node, shared, i);
            let expected = Self::diff_probe_tid(shared, K::probe(&left), body.tid(i + 1));
            if body.bit(i) != expected {
                return Err(format!(
                    "bits[{i}] is {} but keys {i} and {} first differ at bit {expected}",
                    body.bit(i),
                    i + 1
                ));
            }
            if K::bit(K::probe(&left), expected) {
                return Err(format!("keys {i} and {} are not ascending", i + 1));
            }
        }
        // Compare with the tree the bits call for, without writing into the node.
        let stored: Vec<u16> = (0..body.tree.len()).map(|t| body.tree_entry(t)).collect();
        let mut rebuilt = vec![END_TREE; body.tree.len()];
        Self::plan_subtree(&body, 0, 0, n.saturating_sub(1), &mut |t, e| rebuilt[t] = e);
        if stored != rebuilt {
            return Err(format!("BlindiTree {stored:?} differs from {rebuilt:?}"));
        }
        Ok(())
    }

    /// Bytes of the node's stub and body (for tests and reports).
    pub fn bytes(node: &NodeHeader) -> usize {
        let body = Self::body(node);
        STUB_BYTES + body_layout::<K::Pos>(body.slots, body.tree.len()).0.size()
    }
}
