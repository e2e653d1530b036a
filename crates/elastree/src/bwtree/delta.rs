//! Delta records and the tagged link that points at a chain's top: the only module besides
//! the mapping table that dereferences raw pointers.
//!
//! # Layout of a delta (one allocation)
//!
//! ```text
//! 0   next      u64   the rest of the chain (a Link: a delta, or the base page)
//! 8   kind      u8    Insert, Delete, Split, IndexEntry, Remove, Merge or Unlink
//! 9   flags     u8    bits 0-1, Insert and Delete: 0 the key's spot is unknown, 1 the
//!                     key is absent from the base page and would go at `pos`, 2 it is
//!                     there at `pos` (see [`Spot`]); bit 2: the key's tid is stored;
//!                     bit 3: the high key's tid is stored
//! 10  level     u16   the page's level (0: leaf)
//! 12  depth     u16   deltas from this one down to the base, this one included
//! 14  pos       u16   Insert and Delete: the key's position in the base page (see `spot`)
//! 16  key_len   u32   bytes of the key
//! 20  high_len  u32   bytes of the high key, NO_HIGH for none (unbounded)
//! 24  value     u64   Insert: the value; Split: the new right page; IndexEntry: the child;
//!                     Remove: the removed page's own id; Merge: the Link to the removed
//!                     page's chain; Unlink: the removed child
//! 32  base      u64   Insert and Delete over a chain of Inserts and Deletes alone, at most
//!                     MARKS deep (this one included): the chain's base page (a Link);
//!                     else null
//! 40  marks     u64   with `base`: the marks (`Key::mark`) of the keys of this delta and
//!                     of every delta below it, this one's in the low byte; else 0
//! 48  key bytes, then high key bytes, then the key's tid (u64, unaligned) if flag bit 2,
//!     then the high key's tid (u64, unaligned) if flag bit 3
//! ..  with `base`, from the next multiple of 8: the directory, `depth - 2` Links to the
//!     deltas below `next`, `next`'s own `next` first (`next` itself is the field above)
//! ```
//!
//! A tid of 0 is not stored (it reads back as 0): unique trees give every key the tid 0, so
//! their deltas carry no tid words at all, and their Inserts and Deletes of 8-byte keys take
//! 64 bytes or less up to the third of a chain.
//!
//! `base` and `marks` summarize the chain below a leaf's newest delta: a lookup whose key's
//! mark is none of them knows, from the top delta alone, that no delta of the chain holds
//! its key, and searches the base page without loading the deltas between (each a
//! dependent load, usually a cache miss). A read that needs them all (a scan, a
//! consolidation) starts loading them all at once from the directory
//! ([`Delta::start_loading_chain`]) instead of one after the other through `next`.
//!
//! Invariants: a delta is immutable once published (installed by a compare-and-swap on its
//! page's mapping-table entry); `next` is the entry the install replaced; `depth` is
//! `next`'s depth plus one (a base page's is 0); a known spot is what a search of the
//! chain's base page for the delta's key returns (every delta of a chain was installed over
//! that base page: consolidation replaces the whole chain). Insert and Delete appear only
//! on leaves, IndexEntry and Unlink only on inner pages, Remove and Merge on both (leaves
//! and inner pages merge alike); Split, IndexEntry, Remove, Merge and Unlink carry the high
//! key (the end of the range they move).
//! A Remove is only ever the top of its page's chain (nothing is installed on it), and its
//! `next` belongs to the Merge that absorbs it: freeing a Remove frees the delta alone. A
//! Merge owns the chain its value links to (freed with the Merge's own chain).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use super::key::Key;
use super::pool::{DeltaPool, Giver};
use super::Bytes;
use crate::node::page::{PageConfig, PageRepr};
use crate::node::slotted::VarKey;
use crate::node::{NodeHeader, NodeRepr};

/// A mapping-table entry or a delta's `next`: null, a delta (low bit clear) or a base page
/// (an optimized page's header, low bit set). Both are 8-aligned, and a base page's link
/// keeps in bits 1 and 2 a size class of the cache lines a search reads first from the
/// page's start (the header and the mid-keys: 4, 8, 16 or 32 lines), so that a reader can
/// start loading them all with the header: see [`Link::prefetch`]. The class lives in the
/// alignment bits, not in the address's unused top byte, so that a link stays a pointer into
/// its page for leak checkers (valgrind, LeakSanitizer) following garbage the epoch still
/// holds at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Link(pub usize);

/// The bits of a link below the address: the base tag and the line class.
const TAG_BITS: usize = 7;

/// What a link points at, borrowed for the epoch guard's lifetime.
pub(super) enum Target<'g> {
    /// No page (an id not in use).
    Null,
    /// A delta record.
    Delta(&'g Delta),
    /// A consolidated base page.
    Base(&'g NodeHeader),
}

impl Link {
    /// No page.
    pub const NULL: Link = Link(0);

    /// A link to base page `node`, whose search reads its first `bytes` bytes first: the
    /// lines they touch (counted from the line that holds the page's start: pages are
    /// 8-aligned) rounded up to the next class, at most 32.
    pub fn base(node: NonNull<NodeHeader>, bytes: usize) -> Link {
        let address = node.as_ptr() as usize;
        debug_assert_eq!(address & TAG_BITS, 0, "pages are 8-aligned");
        let lines = (address % 64 + bytes).div_ceil(64);
        let class = (0..3).find(|&c| 4 << c >= lines).unwrap_or(3);
        Link(address | 1 | class << 1)
    }

    /// A link to a delta.
    pub fn delta(delta: NonNull<Delta>) -> Link {
        Link(delta.as_ptr() as usize)
    }

    /// Whether the link leads to a delta (not a base page, not null).
    #[inline]
    pub fn is_delta(self) -> bool {
        self.0 != 0 && self.0 & 1 == 0
    }

    /// Whether the link leads to a base page.
    #[inline]
    pub fn is_base(self) -> bool {
        self.0 & 1 == 1
    }

    /// Starts loading the cache lines a search of base page link `self` reads first (its
    /// header and mid-keys), all at once. `self` need not be current: a prefetch never
    /// faults and reads nothing for the program, so a link to a page freed since (a stale
    /// hint) only wastes the requests. Does nothing for other links, and off x86_64.
    #[inline]
    pub fn prefetch(self) {
        if self.is_base() {
            let first = self.0 & !63;
            for line in 0..4usize << ((self.0 >> 1) & 3) {
                crate::node::prefetch_line(first + 64 * line);
            }
        }
    }

    /// What the link points at.
    ///
    /// # Safety
    ///
    /// The link was read from the mapping table or a published delta while the thread is
    /// pinned (epoch), and the chain it leads to was retired, if at all, after the pin: the
    /// target stays allocated for `'g`.
    #[inline]
    pub unsafe fn target<'g>(self) -> Target<'g> {
        if self.0 == 0 {
            Target::Null
        } else if self.0 & 1 == 1 {
            // SAFETY: see the function's contract.
            Target::Base(unsafe { &*((self.0 & !TAG_BITS) as *const NodeHeader) })
        } else {
            // SAFETY: see the function's contract.
            Target::Delta(unsafe { &*(self.0 as *const Delta) })
        }
    }

    /// Whether the chain at `self` is its base page alone or Inserts and Deletes over it
    /// (the top delta's summary says so, without loading the deltas below): no split,
    /// merge or removal to follow.
    ///
    /// # Safety
    ///
    /// As [`Link::target`].
    #[inline]
    pub unsafe fn entries_only(self) -> bool {
        // SAFETY: the caller's contract.
        match unsafe { self.target() } {
            Target::Base(_) => true,
            Target::Delta(d) => d.entries_over().is_some(),
            Target::Null => false,
        }
    }

    /// Starts loading every delta of the chain at `self` at once, for a read about to walk
    /// them all ([`Delta::start_loading_chain`] of its top; nothing for a base page).
    ///
    /// # Safety
    ///
    /// As [`Link::target`].
    #[inline]
    pub unsafe fn start_loading_chain(self) {
        // SAFETY: the caller's contract.
        if let Target::Delta(d) = unsafe { self.target() } {
            d.start_loading_chain();
        }
    }

    /// Deltas above the base page (0 for a base page or null).
    ///
    /// # Safety
    ///
    /// As [`Link::target`].
    #[inline]
    pub unsafe fn depth(self) -> u16 {
        // SAFETY: the caller's contract.
        match unsafe { self.target() } {
            Target::Delta(d) => d.depth,
            _ => 0,
        }
    }
}

/// What a delta says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Kind {
    /// `(key, tid) -> value` (unique: replaces the key's value).
    Insert,
    /// `(key, tid)` is gone.
    Delete,
    /// Keys from `key` up to the high key moved to page `value` (the new right sibling);
    /// this page now ends at `key`.
    Split,
    /// Keys from `key` up to the high key are in child `value` (posted on the parent after a
    /// split).
    IndexEntry,
    /// This page (id `value`, keys from `key` up to the high key) is removed: its keys are
    /// now in the page to its left. Always the chain's top; `next` is the frozen page.
    Remove,
    /// This page absorbed its removed right sibling: keys from `key` up to the high key are
    /// in the chain `value` links to (the removed page's frozen chain), and this page's
    /// right sibling is that page's.
    Merge,
    /// Child `value` (keys from `key` up to the high key) is being merged into its left
    /// sibling: route that range as the keys just below `key` (the index-term delete).
    Unlink,
}

/// `high_len` of a delta whose high key is unbounded.
const NO_HIGH: u32 = u32::MAX;

/// A delta record's fixed part (see the module docs); its key bytes follow it.
#[repr(C)]
pub(super) struct Delta {
    next: Link,
    kind: Kind,
    flags: u8,
    level: u16,
    depth: u16,
    pos: u16,
    key_len: u32,
    high_len: u32,
    value: u64,
    base: Link,
    marks: u64,
}

const _: () = assert!(std::mem::size_of::<Delta>() == 48);
const _: () = assert!(std::mem::align_of::<Delta>() == 8);

/// The most deltas (the newest included) whose keys' marks a delta's summary holds: one
/// byte each in `marks`.
const MARKS: u16 = 8;

/// `flags` bits holding an Insert's or Delete's [`Spot`] state.
const SPOT_BITS: u8 = 0b11;
/// `flags` bit: the key's tid follows the keys' bytes.
const KEY_TID: u8 = 0b100;
/// `flags` bit: the high key's tid follows the keys' bytes (after the key's tid, if stored).
const HIGH_TID: u8 = 0b1000;

/// The bytes of the tids a delta with `flags` stores.
#[inline]
fn tids_len(flags: u8) -> usize {
    const _: () = assert!(KEY_TID == 1 << 2 && HIGH_TID == 1 << 3);
    8 * usize::from((flags >> 2 & 1) + (flags >> 3 & 1))
}

/// Where a delta's key bytes start: right after the fixed part, whatever its flags.
const KEYS_AT: usize = std::mem::size_of::<Delta>();

/// Where an Insert or Delete delta's key lies in the base page at the bottom of its chain,
/// as the writer's walk found it there: consolidation patches that page (`node/page/patch.rs`)
/// without searching it again for the key. Unknown when the walk ended at a delta (the
/// key's newest state was above the base page) or the position does not fit 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Spot {
    /// 0 unknown, 1 absent (`pos` is where the key would go), 2 found at `pos`.
    state: u8,
    pos: u16,
}

impl Spot {
    /// No position known.
    pub const UNKNOWN: Spot = Spot { state: 0, pos: 0 };

    /// Position `pos` of a search of the base page, which found the key there or not.
    #[inline]
    pub fn at(pos: usize, found: bool) -> Spot {
        match u16::try_from(pos) {
            Ok(pos) => Spot {
                state: 1 + u8::from(found),
                pos,
            },
            Err(_) => Spot::UNKNOWN,
        }
    }

    /// The position and whether the key is there, if known.
    #[inline]
    pub fn get(self) -> Option<(usize, bool)> {
        (self.state != 0).then_some((usize::from(self.pos), self.state == 2))
    }
}

/// A delta's contents, before it is allocated.
pub(super) struct NewDelta<'a> {
    pub kind: Kind,
    pub level: u16,
    pub key: Key<'a>,
    pub high: Option<Key<'a>>,
    pub value: u64,
    /// Insert and Delete: the key's spot in the chain's base page ([`Spot::UNKNOWN`] for
    /// other kinds).
    pub spot: Spot,
}

impl Delta {
    /// Where the directory starts (after the key bytes, 8-aligned), for a delta with
    /// `flags` and keys of these lengths.
    #[inline]
    fn directory_at(flags: u8, key_len: usize, high_len: usize) -> usize {
        (KEYS_AT + key_len + high_len + tids_len(flags)).next_multiple_of(8)
    }

    /// The bytes of a delta with `flags`, these keys and `below` directory entries.
    #[inline]
    fn size_for(flags: u8, key_len: usize, high_len: usize, below: usize) -> usize {
        if below == 0 {
            KEYS_AT + key_len + high_len + tids_len(flags)
        } else {
            Self::directory_at(flags, key_len, high_len) + 8 * below
        }
    }

    /// Entries of the directory of a delta at `depth` with a summary over base page `base`
    /// (null: none): every delta below its `next`.
    #[inline]
    fn directory_len(base: Link, depth: u16) -> usize {
        if base == Link::NULL {
            0
        } else {
            usize::from(depth.saturating_sub(2))
        }
    }

    /// Entries of the directory.
    #[inline]
    fn below_len(&self) -> usize {
        Self::directory_len(self.base, self.depth)
    }

    /// The directory: links to every delta below `next`, the nearest first (empty without
    /// a summary).
    #[inline]
    fn below(&self) -> &[Link] {
        let len = self.below_len();
        if len == 0 {
            return &[];
        }
        // SAFETY: `alloc` wrote `len` Links (8-aligned: the delta is) at `directory_at`, and
        // the delta is immutable once published.
        unsafe {
            let start = (self as *const Delta as *const u8).add(Self::directory_at(
                self.flags,
                self.key_len as usize,
                self.high_len(),
            ));
            std::slice::from_raw_parts(start as *const Link, len)
        }
    }

    /// Starts loading every delta below this one (their fixed parts and the start of their
    /// keys) at once, from the directory: a read about to walk the whole chain waits for
    /// one load instead of one after another. Does nothing for a delta without a summary.
    #[inline]
    pub fn start_loading_chain(&self) {
        if self.base == Link::NULL || !self.next.is_delta() {
            return;
        }
        for link in std::iter::once(&self.next).chain(self.below()) {
            crate::node::prefetch_line(link.0);
            crate::node::prefetch_line(link.0 + 64);
        }
    }

    /// Bytes of the high key (0 for none).
    #[inline]
    fn high_len(&self) -> usize {
        if self.high_len == NO_HIGH {
            0
        } else {
            self.high_len as usize
        }
    }

    /// The summary (`base`, `marks`) of a leaf Insert or Delete of `key` on top of `next`
    /// at `depth`: `next`'s extended by the key's mark, or a new one over a base page;
    /// none (null, 0) over any other delta, past [`MARKS`] deep, or for other kinds.
    ///
    /// # Safety
    ///
    /// As [`Link::target`] for `next`.
    unsafe fn summary(new: &NewDelta<'_>, next: Link, depth: u16) -> (Link, u64) {
        if !matches!(new.kind, Kind::Insert | Kind::Delete) || depth > MARKS {
            return (Link::NULL, 0);
        }
        let mark = u64::from(new.key.mark());
        // SAFETY: the caller's contract.
        match unsafe { next.target() } {
            Target::Base(_) => (next, mark),
            Target::Delta(d) if d.base != Link::NULL => (d.base, d.marks << 8 | mark),
            _ => (Link::NULL, 0),
        }
    }

    /// The chain's base page when no delta of the chain this delta tops can hold a key of
    /// mark `mark` (see the module docs): a lookup of such a key searches the base page
    /// alone. `None` when one may (or the delta has no summary).
    #[inline]
    pub fn past_deltas(&self, mark: u8) -> Option<Link> {
        if self.base == Link::NULL {
            return None;
        }
        const LOW: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        // A zero byte of `x` is a delta whose key has the mark; borrows in the subtraction
        // run upwards only, so the lowest `depth` bytes' test is exact. A delta with a
        // summary is 1 to MARKS deep (`summary`).
        debug_assert!((1..=MARKS).contains(&self.depth));
        let x = self.marks ^ LOW.wrapping_mul(u64::from(mark));
        let in_chain = HIGH >> (8 * (MARKS - self.depth));
        (x.wrapping_sub(LOW) & !x & in_chain == 0).then_some(self.base)
    }

    /// The chain's base page when every delta from this one down is an Insert or Delete
    /// (the delta has a summary): a read that wants only the page's fences, side link or
    /// level goes there without loading the deltas between.
    #[inline]
    pub fn entries_over(&self) -> Option<Link> {
        (self.base != Link::NULL).then_some(self.base)
    }

    /// Allocates a delta on top of `next` (not yet published), from `pool`'s kept blocks
    /// when it has one of its size; returns it and its size.
    ///
    /// # Safety
    ///
    /// As [`Link::target`] for `next` (its summary is read).
    pub unsafe fn alloc(
        new: &NewDelta<'_>,
        next: Link,
        depth: u16,
        pool: &DeltaPool,
    ) -> (NonNull<Delta>, usize) {
        // SAFETY: the caller's contract.
        let (base, marks) = unsafe { Self::summary(new, next, depth) };
        let high = new.high.map_or(&[][..], |h| h.bytes);
        // The directory: the deltas below `next`, when the new delta has a summary.
        let below = Self::directory_len(base, depth);
        let high_tid = new.high.map_or(0, |h| h.tid);
        let flags = new.spot.state
            | if new.key.tid != 0 { KEY_TID } else { 0 }
            | if high_tid != 0 { HIGH_TID } else { 0 };
        let size = Self::size_for(flags, new.key.bytes.len(), high.len(), below);
        // The block: the size rounded up to the alignment (see `free_delta`).
        let block = block_layout(size);
        let delta = match pool.take(block.size()) {
            Some(kept) => kept.cast::<Delta>(),
            None => {
                // SAFETY: the layout is at least the fixed part, non-zero.
                let ptr = unsafe { alloc(block) } as *mut Delta;
                let Some(delta) = NonNull::new(ptr) else {
                    handle_alloc_error(block)
                };
                delta
            }
        };
        let ptr = delta.as_ptr();
        // SAFETY: freshly allocated with room for the fixed part, the stored tids and both
        // keys' bytes, 8-aligned; not shared until installed.
        unsafe {
            delta.as_ptr().write(Delta {
                next,
                kind: new.kind,
                flags,
                level: new.level,
                depth,
                pos: new.spot.pos,
                key_len: new.key.bytes.len() as u32,
                high_len: new.high.map_or(NO_HIGH, |h| h.bytes.len() as u32),
                value: new.value,
                base,
                marks,
            });
            let bytes = (ptr as *mut u8).add(KEYS_AT);
            std::ptr::copy_nonoverlapping(new.key.bytes.as_ptr(), bytes, new.key.bytes.len());
            std::ptr::copy_nonoverlapping(
                high.as_ptr(),
                bytes.add(new.key.bytes.len()),
                high.len(),
            );
            if flags & (KEY_TID | HIGH_TID) != 0 {
                let mut tids = bytes.add(new.key.bytes.len() + high.len()) as *mut u64;
                for tid in [new.key.tid, high_tid] {
                    if tid != 0 {
                        tids.write_unaligned(tid);
                        tids = tids.add(1);
                    }
                }
            }
            if below > 0 {
                let directory = (ptr as *mut u8).add(Self::directory_at(
                    flags,
                    new.key.bytes.len(),
                    high.len(),
                )) as *mut Link;
                // A summary at depth 3 or more means `next` is a delta with one, over
                // another delta (`summary`): the directory is that delta, then `next`'s
                // directory, the `below - 1` deltas under it (`next` readable: the contract).
                debug_assert!(next.is_delta(), "a summary {depth} deep tops a delta");
                if let Target::Delta(d) = next.target() {
                    directory.write(d.next());
                    std::ptr::copy_nonoverlapping(d.below().as_ptr(), directory.add(1), below - 1);
                }
            }
        }
        (delta, size)
    }

    /// The delta's size in bytes.
    #[inline]
    pub fn size(&self) -> usize {
        Self::size_for(
            self.flags,
            self.key_len as usize,
            self.high_len(),
            self.below_len(),
        )
    }

    /// The key bytes that follow the fixed part.
    #[inline]
    fn tail(&self, from: usize, len: usize) -> &[u8] {
        // SAFETY: `alloc` wrote `key_len + high_len` bytes after the fixed part, and the
        // delta is immutable once published.
        unsafe {
            let start = (self as *const Delta as *const u8).add(KEYS_AT);
            std::slice::from_raw_parts(start.add(from), len)
        }
    }

    /// The `i`th tid stored after the keys' bytes.
    ///
    /// # Safety
    ///
    /// `flags` has more than `i` tid bits set.
    #[inline]
    unsafe fn stored_tid(&self, i: usize) -> u64 {
        // SAFETY: `alloc` wrote a u64 (unaligned) after the keys' bytes for each tid bit set
        // in `flags`, the key's first; the caller's contract.
        unsafe {
            (self as *const Delta as *const u8)
                .add(KEYS_AT + self.key_len as usize + self.high_len() + 8 * i)
                .cast::<u64>()
                .read_unaligned()
        }
    }

    /// The delta's key.
    #[inline]
    pub fn key(&self) -> Key<'_> {
        Key {
            bytes: self.tail(0, self.key_len as usize),
            tid: if self.flags & KEY_TID != 0 {
                // SAFETY: the key's tid bit is set.
                unsafe { self.stored_tid(0) }
            } else {
                0
            },
        }
    }

    /// The high key of a Split or IndexEntry (`None`: unbounded).
    #[inline]
    pub fn high(&self) -> Option<Key<'_>> {
        (self.high_len != NO_HIGH).then(|| Key {
            bytes: self.tail(self.key_len as usize, self.high_len as usize),
            tid: if self.flags & HIGH_TID != 0 {
                // SAFETY: the high key's tid bit is set (after the key's, if stored).
                unsafe { self.stored_tid(usize::from(self.flags >> 2 & 1)) }
            } else {
                0
            },
        })
    }

    /// The end of the range a structure delta moves, owned: a Split's own key (`split`: the
    /// page now ends there) or the high key (`None`: unbounded).
    pub fn high_key(&self, pairs: bool, split: bool) -> Option<VarKey> {
        if split {
            Some(self.key().to_owned(pairs))
        } else {
            self.high().map(|h| h.to_owned(pairs))
        }
    }

    /// What the delta says.
    #[inline]
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// An Insert's or Delete's key's spot in the chain's base page.
    #[inline]
    pub fn spot(&self) -> Spot {
        Spot {
            state: self.flags & SPOT_BITS,
            pos: self.pos,
        }
    }

    /// The page's level.
    #[inline]
    pub fn level(&self) -> u16 {
        self.level
    }

    /// Deltas from this one to the base.
    #[inline]
    pub fn depth(&self) -> u16 {
        self.depth
    }

    /// Insert: the value; Split: the right page; IndexEntry: the child.
    #[inline]
    pub fn value(&self) -> u64 {
        self.value
    }

    /// The rest of the chain.
    #[inline]
    pub fn next(&self) -> Link {
        self.next
    }
}

/// The block a delta of `size` bytes is allocated in: the size rounded up to the alignment.
#[inline]
fn block_layout(size: usize) -> Layout {
    Layout::from_size_align(size.next_multiple_of(8), 8).expect("delta layout")
}

/// Frees one delta (into `bytes`' pool of kept blocks if it has room); returns its size.
///
/// # Safety
///
/// `delta` came from [`Delta::alloc`] of the tree whose byte counters are `bytes`, and no
/// other thread can reach it.
pub(super) unsafe fn free_delta(delta: NonNull<Delta>, bytes: &Bytes) -> usize {
    // SAFETY: the caller's contract.
    unsafe { free_delta_into(delta, bytes, &mut bytes.pool.giver()) }
}

/// [`free_delta`] with `bytes`' pool shard locked by the caller (`giver`).
///
/// # Safety
///
/// As [`free_delta`].
#[inline]
unsafe fn free_delta_into(delta: NonNull<Delta>, bytes: &Bytes, giver: &mut Giver<'_>) -> usize {
    // SAFETY: the caller's contract; the block is the one `alloc` allocated (or took from
    // the pool): the size rounded up to the alignment.
    unsafe {
        let size = delta.as_ref().size();
        let block = size.next_multiple_of(8);
        if !giver.give(delta.cast::<u8>(), block, || bytes.tree()) {
            dealloc(delta.as_ptr() as *mut u8, block_layout(size));
        }
        size
    }
}

/// Frees a base page that was never published, or whose chain is freed; returns its size.
///
/// # Safety
///
/// `node` came from a page build and no other thread can reach it.
pub(super) unsafe fn free_base(config: &PageConfig, node: NonNull<NodeHeader>) -> usize {
    // SAFETY: the caller's contract.
    unsafe { PageRepr::free(config, node) }
}

/// Frees every record of the chain at `top` (deltas, the chains Merge deltas own, and the
/// base page; a Remove delta alone), the deltas into the pool of `tree` (the byte counters
/// of the tree the chain belongs to) when it has room; returns the bytes freed and the
/// chain's level. The pool's shard is locked once for the whole chain.
///
/// # Safety
///
/// No thread can reach the chain any more: it was unlinked and its grace period has passed,
/// or the tree is being dropped.
pub(super) unsafe fn free_chain(config: &PageConfig, top: Link, tree: &Bytes) -> (usize, u16) {
    // SAFETY: the caller's contract.
    unsafe { free_chain_into(config, top, tree, &mut tree.pool.giver()) }
}

/// [`free_chain`] with the pool's shard locked by the caller (`giver`).
///
/// # Safety
///
/// As [`free_chain`].
unsafe fn free_chain_into(
    config: &PageConfig,
    top: Link,
    tree: &Bytes,
    giver: &mut Giver<'_>,
) -> (usize, u16) {
    let (mut link, mut bytes, mut level) = (top, 0, 0);
    loop {
        // SAFETY: the caller's contract: every record of the chain is still allocated and
        // only this thread reaches it.
        match unsafe { link.target() } {
            Target::Null => return (bytes, level),
            Target::Delta(d) => {
                let (kind, next) = (d.kind(), d.next());
                if kind == Kind::Merge {
                    // SAFETY: the Merge owns the removed page's chain (see the module docs).
                    let absorbed = Link(d.value() as usize);
                    bytes += unsafe { free_chain_into(config, absorbed, tree, giver) }.0;
                }
                level = d.level();
                // SAFETY: as above.
                bytes += unsafe { free_delta_into(NonNull::from(d), tree, giver) };
                if kind == Kind::Remove {
                    // The frozen chain below belongs to the Merge that absorbed it.
                    return (bytes, level);
                }
                link = next;
            }
            Target::Base(node) => {
                level = node.level();
                // SAFETY: as above.
                bytes += unsafe { free_base(config, NonNull::from(node)) };
                return (bytes, level);
            }
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::node::page::{MidWidth, PageImage};

    /// Frees a delta made by these tests (never published, never pooled).
    fn free(delta: NonNull<Delta>) {
        // SAFETY: allocated by `Delta::alloc` from an empty pool (the global allocator), in
        // the block `block_layout` gives for its size; no one else reaches it.
        unsafe {
            let size = delta.as_ref().size();
            dealloc(delta.as_ptr() as *mut u8, block_layout(size));
        }
    }

    fn new_delta<'a>(kind: Kind, key: Key<'a>, high: Option<Key<'a>>) -> NewDelta<'a> {
        NewDelta {
            kind,
            level: 0,
            key,
            high,
            value: 42,
            spot: Spot::at(3, true),
        }
    }

    /// Keys of every small length, with and without tids and high keys, read back as they
    /// were written, and a delta takes the fixed part, the keys' bytes and a word for each
    /// tid that is not 0.
    #[test]
    fn keys_and_tids_read_back_as_written() {
        let pool = DeltaPool::default();
        let bytes: Vec<u8> = (1..=20).collect();
        for key_len in [0, 1, 7, 8, 13] {
            for tid in [0, 7, u64::MAX] {
                for high in [None, Some((3, 0)), Some((9, 1u64 << 40))] {
                    let key = Key {
                        bytes: &bytes[..key_len],
                        tid,
                    };
                    let high = high.map(|(len, tid)| Key {
                        bytes: &bytes[20 - len..],
                        tid,
                    });
                    let kind = if high.is_some() {
                        Kind::Split
                    } else {
                        Kind::Insert
                    };
                    // SAFETY: `next` is null.
                    let (delta, size) =
                        unsafe { Delta::alloc(&new_delta(kind, key, high), Link::NULL, 1, &pool) };
                    // SAFETY: allocated just now, not freed before `free` below.
                    let d = unsafe { delta.as_ref() };
                    assert!(d.key().same(key));
                    assert_eq!(
                        d.high().map(|h| (h.bytes, h.tid)),
                        high.map(|h| (h.bytes, h.tid))
                    );
                    assert_eq!((d.kind(), d.value(), d.depth()), (kind, 42, 1));
                    assert_eq!(d.spot().get(), Some((3, true)));
                    let tids = [Some(tid), high.map(|h| h.tid)]
                        .into_iter()
                        .filter(|t| t.is_some_and(|t| t != 0))
                        .count();
                    let expected = 48 + key_len + high.map_or(0, |h| h.bytes.len()) + 8 * tids;
                    assert_eq!((size, d.size()), (expected, expected));
                    free(delta);
                }
            }
        }
    }

    /// Each Insert of a chain over a base page names that page, and its directory lists
    /// every delta below its `next`, the nearest first; an 8-byte key's Insert takes 64
    /// bytes or less up to the third of the chain.
    #[test]
    fn a_chain_keeps_a_directory_of_the_deltas_below_next() {
        let config = PageConfig::new((8, 8), (512, 512), 8, (false, true, MidWidth::Eight));
        let (node, _) = PageImage::default().build(&config, 0, 0..0, (None, None));
        let base = Link::base(node, 64);
        let pool = DeltaPool::default();
        let keys: Vec<[u8; 8]> = (0..7u64).map(|i| (i * 1000).to_be_bytes()).collect();
        let mut chain: Vec<NonNull<Delta>> = Vec::new();
        let mut top = base;
        for (i, bytes) in keys.iter().enumerate() {
            let key = Key { bytes, tid: 0 };
            let depth = i as u16 + 1;
            // SAFETY: `top` is the base page or a delta of this chain, all alive.
            let (delta, size) =
                unsafe { Delta::alloc(&new_delta(Kind::Insert, key, None), top, depth, &pool) };
            // SAFETY: as above.
            let d = unsafe { delta.as_ref() };
            assert_eq!(d.entries_over(), Some(base));
            assert_eq!(d.next(), top);
            let below: Vec<Link> = chain
                .iter()
                .rev()
                .skip(1)
                .map(|&p| Link::delta(p))
                .collect();
            assert_eq!(d.below(), &below[..]);
            assert_eq!(size, 56 + 8 * usize::from(depth.saturating_sub(2)));
            assert_eq!(size <= 64, depth <= 3);
            // A key of the chain is there; no summary clears it.
            for older in &keys[..=i] {
                let mark = Key {
                    bytes: older,
                    tid: 0,
                }
                .mark();
                assert_eq!(d.past_deltas(mark), None);
            }
            chain.push(delta);
            top = Link::delta(delta);
        }
        for delta in chain {
            free(delta);
        }
        // SAFETY: built above, never shared; the deltas over it are freed.
        unsafe { free_base(&config, node) };
    }
}
