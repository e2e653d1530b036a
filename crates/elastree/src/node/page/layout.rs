//! The byte layout of an optimized page and the view ([`Page`]) that reads and writes it
//! through atomics.
//!
//! ```text
//! bytes 0..24     NodeHeader (lock, count, level, format, link)
//! bytes 24..32    shape: page bytes (high 32 bits, fixed at allocation) | flags (16..32)
//!                 | capacity (low 16)
//! bytes 32..40    meta:  prefix length | prefix offset | bin top | bin live   (4 x u16)
//! bytes 40..64    the prefix's first 24 bytes, in 3 big-endian words (zero past its end)
//! 64..            mids:     cap x u32 (or u64) the 4 (or 8) key bytes after the prefix,
//!                                        encoded (encode.rs)
//!                 suffixes: cap x u32    suffix offset in the bin (high 16) | length (low 16)
//!                 values:   cap x u64    tid (leaf) or child pointer (inner)
//!                 tids:     cap x u64    non-unique trees only: the tid part of the key
//!                 fences:   u64          low offset | low length | high offset | high length
//!                 bin:      the rest but a pad word: prefix, fences, suffixes, from its end
//! bytes..         hints:    max_cap(bytes) x u64, inner pages of a form with child hints
//!                           only: a sidecar after the page's bytes (`Page::hint`)
//! ```
//!
//! With 8-byte mid-keys the suffix locations follow the tids instead, so that every u64
//! vector stays 8-byte aligned; the fence word starts at the next multiple of 8.
//!
//! Invariants (when no writer holds the lock):
//!
//! * the page's size never changes after allocation; its capacity changes only when a
//!   writer rebuilds or re-lays the page out, and `80 + round8(cap * slot) <= bytes` (`slot`
//!   = the mid-key's bytes + 12, and 8 more with tids), so the bin has room for its pad word
//!   at least;
//! * `count <= cap`; the bin's bytes `bin - top .. bin` are handed out, of which `live` are
//!   in use (the prefix, the fences and the entries' suffixes; a removed entry's suffix is
//!   dead until the page is rebuilt);
//! * the shape's `SUFFIX_FREE` flag, when set, promises that no entry has a suffix (every
//!   key's remainder after the prefix fits its mid-key, as with fixed 8-byte keys under
//!   8-byte mid-keys): a search that ties on a mid-key then decides without reading the
//!   entry's suffix location. A build sets it from its entries; an in-place insert of an
//!   entry with a suffix clears it; writing the shape clears it;
//! * the prefix lies at `prefix offset` in the bin, and its first 24 bytes are repeated in
//!   the header (so that a search compares a short prefix without touching the bin);
//! * a fence of length `NO_FENCE` is absent (unbounded); in non-unique trees a fence's tid
//!   follows its bytes in the bin as 8 big-endian bytes.
//!
//! Everything a search reads first (the lock, the count, the shape, the prefix) lies in the
//! page's first 64 bytes; the mid-keys start on the next cache line, and mid-keys, suffix
//! locations and values are separate vectors, so a search reads only mid-keys until it needs
//! more.
//!
//! Every field is an atomic; readers clamp every index, offset and length they derive, so a
//! page read while a writer rebuilds it (even with another capacity) gives wrong answers
//! that the version check rejects, never an out-of-bounds access.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::super::bytes::{words_for, WordBytes};
use super::super::NodeHeader;
use super::encode::{MidSlot, MidWidth};

/// Bytes of the node header.
pub(super) const HEADER_BYTES: usize = std::mem::size_of::<NodeHeader>();
/// Where the shape word is.
const SHAPE_AT: usize = HEADER_BYTES;
/// Where the meta word is.
const META_AT: usize = SHAPE_AT + 8;
/// Where the inline prefix words are.
const INLINE_AT: usize = META_AT + 8;
/// Words of the prefix repeated in the header.
pub(super) const INLINE_WORDS: usize = 3;
/// Bytes of the prefix repeated in the header.
pub(super) const INLINE_BYTES: usize = 8 * INLINE_WORDS;
/// Where the vectors start: the page's second cache line.
pub(super) const VECTORS_AT: usize = INLINE_AT + INLINE_BYTES;
const _: () = assert!(HEADER_BYTES == 24 && VECTORS_AT == 64);

/// Bytes a page spends besides its vectors and its bin's contents: the header, the fence
/// word and the bin's pad word.
pub(super) const FIXED_BYTES: usize = VECTORS_AT + 8 + 8;

/// The most entries a page holds (its capacity is a 16-bit field).
pub(super) const MAX_CAP: usize = u16::MAX as usize;

/// The shape word's flag: no entry of the page has a suffix (see the invariants above).
const SUFFIX_FREE: u64 = 1 << 16;

/// The length of an absent (unbounded) fence.
pub(super) const NO_FENCE: usize = u16::MAX as usize;

/// What decides a page's layout and encoding besides its size and capacity: whether keys
/// carry tids, how wide the mid-keys are, and whether pages factor out their keys' common
/// prefix (the same for every page of a tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Form {
    pub with_tid: bool,
    pub mid: MidWidth,
    /// Whether a built page's prefix is its keys' common prefix; `false` keeps whole keys
    /// (prefix always empty: the paper's Base organization in a page).
    pub factor_prefix: bool,
    /// Whether inner pages carry a child-hint sidecar (see [`Page::hint`]).
    pub child_hints: bool,
}

impl Form {
    /// Bytes of one entry's vector slots.
    #[inline]
    pub const fn slot_bytes(self) -> usize {
        self.mid.bytes() + 4 + 8 + if self.with_tid { 8 } else { 0 }
    }

    /// Bytes of the vectors of `cap` entries, rounded up to a word.
    #[inline]
    pub const fn vector_bytes(self, cap: usize) -> usize {
        (cap * self.slot_bytes()).next_multiple_of(8)
    }

    /// The most entries a page of `bytes` bytes can have with an empty bin.
    #[inline]
    pub const fn max_cap(self, bytes: usize) -> usize {
        let cap = bytes.saturating_sub(FIXED_BYTES) / self.slot_bytes();
        if cap < MAX_CAP {
            cap
        } else {
            MAX_CAP
        }
    }

    /// `cap` (at most [`MAX_CAP`]) if a page of `bytes` bytes has room for it, else
    /// `max_cap` (a torn shape word can claim any capacity): no division unless it clamps.
    #[inline]
    pub fn clamp_cap(self, cap: usize, bytes: usize) -> usize {
        debug_assert!(cap <= MAX_CAP);
        if FIXED_BYTES + cap * self.slot_bytes() <= bytes {
            cap
        } else {
            self.max_cap(bytes)
        }
    }

    /// Bytes of the child-hint sidecar allocated after a page of `bytes` bytes at `level`:
    /// a word for each entry the page could ever hold, in inner pages of a form with hints.
    #[inline]
    pub fn sidecar_bytes(self, bytes: usize, level: u16) -> usize {
        if self.child_hints && level > 0 {
            8 * self.max_cap(bytes)
        } else {
            0
        }
    }

    /// Bin bytes of a page of `bytes` bytes with capacity `cap` (at most `max_cap`).
    #[inline]
    pub const fn bin_bytes(self, bytes: usize, cap: usize) -> usize {
        bytes - FIXED_BYTES - self.vector_bytes(cap)
    }
}

/// A page's mid-key vector, of either width.
#[derive(Clone, Copy)]
pub(super) enum Mids<'n> {
    Four(&'n [AtomicU32]),
    Eight(&'n [AtomicU64]),
}

/// The meta word: where the prefix is and how much of the bin is handed out and live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Meta {
    pub prefix_len: usize,
    pub prefix_offset: usize,
    /// Bytes handed out from the bin's end.
    pub top: usize,
    /// Bytes of the prefix, the fences and the live suffixes.
    pub live: usize,
}

impl Meta {
    fn pack(self) -> u64 {
        (self.prefix_len as u64) << 48
            | (self.prefix_offset as u64) << 32
            | (self.top as u64) << 16
            | self.live as u64
    }

    fn unpack(word: u64) -> Self {
        Meta {
            prefix_len: (word >> 48) as u16 as usize,
            prefix_offset: (word >> 32) as u16 as usize,
            top: (word >> 16) as u16 as usize,
            live: word as u16 as usize,
        }
    }
}

/// Where a page's fences are in its bin: `(offset, length)`, length [`NO_FENCE`] for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FenceSpots {
    pub low: (usize, usize),
    pub high: (usize, usize),
}

impl FenceSpots {
    fn pack(self) -> u64 {
        (self.low.0 as u64) << 48
            | (self.low.1 as u64) << 32
            | (self.high.0 as u64) << 16
            | self.high.1 as u64
    }

    fn unpack(word: u64) -> Self {
        FenceSpots {
            low: ((word >> 48) as u16 as usize, (word >> 32) as u16 as usize),
            high: ((word >> 16) as u16 as usize, word as u16 as usize),
        }
    }
}

/// A view of one page: its vectors and bin, located from its shape word.
pub(super) struct Page<'n> {
    pub node: &'n NodeHeader,
    /// The page's size in bytes.
    pub bytes: usize,
    /// Entries the vectors hold.
    pub cap: usize,
    pub form: Form,
    /// The shape's `SUFFIX_FREE` flag as this view read it.
    pub suffix_free: bool,
    meta: &'n AtomicU64,
    inline: &'n [AtomicU64],
    pub mids: Mids<'n>,
    pub locs: &'n [AtomicU32],
    pub values: &'n [AtomicU64],
    pub tids: &'n [AtomicU64],
    fences: &'n AtomicU64,
    pub bin: WordBytes<'n>,
    /// Bytes of the bin (its pad word excluded).
    pub bin_len: usize,
}

/// The shape word of a page.
#[inline]
fn shape_word(node: &NodeHeader) -> &AtomicU64 {
    let base = node as *const NodeHeader as *const u8;
    // SAFETY: every page begins with the header and the shape word (allocated by
    // `alloc_page`, which sizes it at least `FIXED_BYTES`); the word is an atomic.
    unsafe { &*(base.add(SHAPE_AT) as *const AtomicU64) }
}

impl<'n> Page<'n> {
    /// The view of `node`, a page of a tree whose pages have `form`.
    #[inline]
    pub fn of(node: &'n NodeHeader, form: Form) -> Self {
        let word = shape_word(node).load(Ordering::Relaxed);
        let bytes = (word >> 32) as usize;
        debug_assert!(bytes >= FIXED_BYTES, "a page without a shape");
        let cap = form.clamp_cap(word as u16 as usize, bytes);
        let tid_slots = if form.with_tid { cap } else { 0 };
        let bin_len = form.bin_bytes(bytes, cap);
        let base = node as *const NodeHeader as *const u8;
        let wide = form.mid == MidWidth::Eight;
        // SAFETY: the page was allocated with `bytes` bytes (the shape's size never changes),
        // and `cap` is clamped so that the header, `cap` mid-keys, suffix locations and
        // values (plus `tid_slots` tids), the fence word and the bin with its pad word fit in
        // them. With 4-byte mid-keys the vectors are mids, locations, values, tids; with
        // 8-byte ones mids, values, tids, locations: either way every u64 vector starts at
        // `64 + 8 * cap` or `64 + 16 * cap`, a multiple of 8 (pages are 8-aligned), and the
        // fence word at the next multiple of 8 after the vectors. Every field is used only
        // through atomics, so shared references are sound under concurrent access.
        unsafe {
            let mids = base.add(VECTORS_AT);
            let after_mids = mids.add(form.mid.bytes() * cap);
            let (locs, values) = if wide {
                (after_mids.add(8 * (cap + tid_slots)), after_mids)
            } else {
                (after_mids, after_mids.add(4 * cap))
            };
            let tids = values.add(8 * cap);
            let fences = base.add(VECTORS_AT + form.vector_bytes(cap));
            let bin = fences.add(8);
            Page {
                node,
                bytes,
                cap,
                form,
                suffix_free: word & SUFFIX_FREE != 0,
                meta: &*(base.add(META_AT) as *const AtomicU64),
                inline: std::slice::from_raw_parts(
                    base.add(INLINE_AT) as *const AtomicU64,
                    INLINE_WORDS,
                ),
                mids: if wide {
                    Mids::Eight(std::slice::from_raw_parts(mids as *const AtomicU64, cap))
                } else {
                    Mids::Four(std::slice::from_raw_parts(mids as *const AtomicU32, cap))
                },
                locs: std::slice::from_raw_parts(locs as *const AtomicU32, cap),
                values: std::slice::from_raw_parts(values as *const AtomicU64, cap),
                tids: std::slice::from_raw_parts(tids as *const AtomicU64, tid_slots),
                fences: &*(fences as *const AtomicU64),
                bin: WordBytes::new(std::slice::from_raw_parts(
                    bin as *const AtomicU64,
                    words_for(bin_len),
                )),
                bin_len,
            }
        }
    }

    /// Writes the shape word of a page being allocated or rebuilt (write lock held, or
    /// unpublished), its `SUFFIX_FREE` flag clear. `cap` must leave the bin its pad word.
    pub fn set_shape(node: &NodeHeader, bytes: usize, cap: usize, form: Form) {
        debug_assert!(bytes.is_multiple_of(8) && cap <= form.max_cap(bytes));
        shape_word(node).store((bytes as u64) << 32 | cap as u64, Ordering::Relaxed);
    }

    /// Sets the shape's `SUFFIX_FREE` flag if no entry has a suffix: the last step of a
    /// build (write lock held, or unpublished), once its meta word and fences are set. The
    /// bin's live bytes tell it: they are the prefix's, the fences' and the suffixes'.
    pub fn mark_suffix_free(&self) {
        let tid = if self.form.with_tid { 8 } else { 0 };
        let fence = |(_, len): (usize, usize)| if len == NO_FENCE { 0 } else { len + tid };
        let spots = self.fence_spots();
        let meta = self.meta();
        if meta.live == meta.prefix_len + fence(spots.low) + fence(spots.high) {
            shape_word(self.node).fetch_or(SUFFIX_FREE, Ordering::Relaxed);
        }
    }

    /// Clears the shape's `SUFFIX_FREE` flag: an in-place insert of an entry with a suffix
    /// (builds set the flag from scratch instead). Write lock held.
    pub fn clear_suffix_free(&self) {
        shape_word(self.node).fetch_and(!SUFFIX_FREE, Ordering::Relaxed);
    }

    /// The page's size in bytes as its shape word gives it (fixed at allocation).
    #[inline]
    pub fn bytes_of(node: &NodeHeader) -> usize {
        (shape_word(node).load(Ordering::Relaxed) >> 32) as usize
    }

    /// The meta word of page `node`, read without locating its vectors (the word lies in
    /// the header: see the layout above).
    #[inline]
    pub fn meta_of(node: &NodeHeader) -> Meta {
        let base = node as *const NodeHeader as *const u8;
        // SAFETY: every page begins with the header, the shape word and the meta word (it is
        // allocated with at least `FIXED_BYTES`, as `shape_word` relies on too), and the meta
        // word is written before the page is shared (`alloc_page` zeroes it, a build writes
        // it); the word is an atomic.
        let word = unsafe { &*(base.add(META_AT) as *const AtomicU64) };
        Meta::unpack(word.load(Ordering::Relaxed))
    }

    /// The count, clamped to the capacity.
    #[inline]
    pub fn count(&self) -> usize {
        self.node.count().min(self.cap)
    }

    #[inline]
    pub fn meta(&self) -> Meta {
        Meta::unpack(self.meta.load(Ordering::Relaxed))
    }

    #[inline]
    pub fn set_meta(&self, meta: Meta) {
        self.meta.store(meta.pack(), Ordering::Relaxed);
    }

    #[inline]
    pub fn fence_spots(&self) -> FenceSpots {
        FenceSpots::unpack(self.fences.load(Ordering::Relaxed))
    }

    /// Where the low fence (`low`) or the high fence lies in the bin (offset and length),
    /// `None` when that side is unbounded.
    #[inline]
    pub fn fence_span(&self, low: bool) -> Option<(usize, usize)> {
        let spots = self.fence_spots();
        let span = if low { spots.low } else { spots.high };
        (span.1 != NO_FENCE).then_some(span)
    }

    pub fn set_fence_spots(&self, spots: FenceSpots) {
        self.fences.store(spots.pack(), Ordering::Relaxed);
    }

    /// Word `w` of the prefix's copy in the header.
    #[inline]
    pub fn inline_word(&self, w: usize) -> u64 {
        self.inline[w.min(INLINE_WORDS - 1)].load(Ordering::Relaxed)
    }

    pub fn set_inline_word(&self, w: usize, word: u64) {
        self.inline[w].store(word, Ordering::Relaxed);
    }

    /// The 8 prefix bytes from `at` on (`at` a multiple of 8): from the header for the first
    /// 24, from the bin after.
    #[inline]
    pub fn prefix_word(&self, meta: Meta, at: usize) -> u64 {
        if at < INLINE_BYTES {
            self.inline_word(at / 8)
        } else {
            self.bin.window(meta.prefix_offset + at)
        }
    }

    /// Entry `i`'s mid-key, zero-extended.
    #[inline]
    pub fn mid(&self, i: usize) -> u64 {
        match self.mids {
            Mids::Four(m) => m.get(i).map_or(0, MidSlot::value),
            Mids::Eight(m) => m.get(i).map_or(0, MidSlot::value),
        }
    }

    /// Suffix location of entry `i`: (offset, length).
    #[inline]
    pub fn suffix_at(&self, i: usize) -> (usize, usize) {
        let word = self.locs.get(i).map_or(0, |l| l.load(Ordering::Relaxed));
        ((word >> 16) as usize, (word & 0xffff) as usize)
    }

    #[inline]
    pub fn value(&self, i: usize) -> u64 {
        self.values.get(i).map_or(0, |v| v.load(Ordering::Relaxed))
    }

    #[inline]
    pub fn tid(&self, i: usize) -> u64 {
        self.tids.get(i).map_or(0, |t| t.load(Ordering::Relaxed))
    }

    /// Entry `i`'s child hint: `None` unless this is an inner page of a form with hints and
    /// `i` is below its capacity.
    ///
    /// A tree that reaches its children through an indirection (the Bw-tree's mapping table)
    /// keeps, after each inner page's bytes, a sidecar of one word per entry the page could
    /// hold ([`Form::sidecar_bytes`]): where entry `i`'s child page was last seen, so that a
    /// descent can start loading the child's page while it reads the indirection, instead
    /// of after. A hint is only ever prefetched, never dereferenced, so any value is safe;
    /// hints are written through atomics while the page is shared (its other bytes never
    /// are, in such a tree), and a zero hint is none.
    #[inline]
    pub fn hint(&self, i: usize) -> Option<&'n AtomicU64> {
        (i < self.cap && self.form.child_hints && !self.node.is_leaf()).then(|| {
            // SAFETY: an inner page of a form with hints is allocated with its sidecar of
            // `max_cap(bytes)` words after its `bytes` (`page::allocate`; its size and level
            // never change), zeroed there, and `i < cap <= max_cap(bytes)` (`Page::of`
            // clamps the capacity); `bytes` is a multiple of 8 and pages are 8-aligned, so
            // the word is aligned; it is only used as an atomic.
            unsafe { &*(self.hint_address(i) as *const AtomicU64) }
        })
    }

    /// Where entry `i`'s child hint lies if the page has a sidecar.
    #[inline]
    fn hint_address(&self, i: usize) -> usize {
        self.node as *const NodeHeader as usize + self.bytes + 8 * i
    }

    /// Starts loading the child hints of entries `from..to`, in an inner page of a form with
    /// hints (elsewhere the addresses lie past the page: only wasted requests).
    #[inline]
    pub fn prefetch_hints(&self, from: usize, to: usize) {
        let first = self.hint_address(from);
        super::super::prefetch_range(first, self.hint_address(to) - first);
    }

    /// Whether keys carry tids (a non-unique tree).
    #[inline]
    pub fn with_tid(&self) -> bool {
        self.form.with_tid
    }

    /// Writes entry `i`'s vector slots. Write lock held.
    #[inline]
    pub fn set_entry(&self, i: usize, mid: u64, loc: (usize, usize), tid: u64, value: u64) {
        match self.mids {
            Mids::Four(m) => m[i].store(mid as u32, Ordering::Relaxed),
            Mids::Eight(m) => m[i].store(mid, Ordering::Relaxed),
        }
        self.locs[i].store(((loc.0 as u32) << 16) | loc.1 as u32, Ordering::Relaxed);
        if let Some(slot) = self.tids.get(i) {
            slot.store(tid, Ordering::Relaxed);
        }
        self.values[i].store(value, Ordering::Release);
    }

    /// Finishes a build into an uninitialized page ([`super::alloc_built_page`]) once its
    /// shape, count, meta word and entries are set: zeroes what it left unwritten (the vector
    /// slots from the count on, the bytes between the vectors and the fence word, the bin's
    /// words below its first byte in use (the meta word's `live` bytes end the bin), and the
    /// pad word), so that every byte of the page is initialized, and sets the
    /// `SUFFIX_FREE` flag if it applies. The page is not shared yet.
    pub fn finish_build(&self) {
        let count = self.count();
        match self.mids {
            Mids::Four(m) => zero_slots(&m[count..]),
            Mids::Eight(m) => zero_slots(&m[count..]),
        }
        zero_slots(&self.locs[count..]);
        zero_slots(&self.values[count..]);
        zero_slots(&self.tids[count.min(self.tids.len())..]);
        let slots = self.cap * self.form.slot_bytes();
        let base = self.node as *const NodeHeader as *mut u8;
        // SAFETY: the vectors end `slots` bytes after `VECTORS_AT` and the fence word starts
        // at `VECTORS_AT + vector_bytes(cap)`, inside the page's allocation; the page is not
        // shared, so nothing reads these bytes while they are written.
        unsafe {
            std::ptr::write_bytes(
                base.add(VECTORS_AT + slots),
                0,
                self.form.vector_bytes(self.cap) - slots,
            )
        };
        let start = self.bin_len.saturating_sub(self.meta().live);
        self.bin.zero_words(0..start / 8);
        self.bin
            .zero_words(self.bin_len / 8..words_for(self.bin_len));
        self.mark_suffix_free();
    }

    /// Moves entries `from..count` one slot right (to make room at `from`). Write lock held;
    /// `count < cap`.
    #[inline]
    pub fn shift_right(&self, from: usize, count: usize) {
        match self.mids {
            Mids::Four(m) => shift_right(&m[from..=count]),
            Mids::Eight(m) => shift_right(&m[from..=count]),
        }
        shift_right(&self.locs[from..=count]);
        shift_right(&self.values[from..=count]);
        if self.form.with_tid {
            shift_right(&self.tids[from..=count]);
        }
    }

    /// Moves entries `from + 1..count` one slot left (over entry `from`). Write lock held.
    #[inline]
    pub fn shift_left(&self, from: usize, count: usize) {
        match self.mids {
            Mids::Four(m) => shift_left(&m[from..count]),
            Mids::Eight(m) => shift_left(&m[from..count]),
        }
        shift_left(&self.locs[from..count]);
        shift_left(&self.values[from..count]);
        if self.form.with_tid {
            shift_left(&self.tids[from..count]);
        }
    }
}

/// An atomic vector element that shifts can move.
pub(super) trait Slot {
    /// The element's value type.
    type Word: Copy;
    fn get(&self) -> Self::Word;
    fn set(&self, word: Self::Word);
}

impl Slot for AtomicU32 {
    type Word = u32;
    #[inline(always)]
    fn get(&self) -> u32 {
        self.load(Ordering::Relaxed)
    }
    #[inline(always)]
    fn set(&self, word: u32) {
        self.store(word, Ordering::Relaxed)
    }
}

impl Slot for AtomicU64 {
    type Word = u64;
    #[inline(always)]
    fn get(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
    #[inline(always)]
    fn set(&self, word: u64) {
        self.store(word, Ordering::Relaxed)
    }
}

/// Zeroes every slot of `slots`.
fn zero_slots<T: Slot>(slots: &[T])
where
    T::Word: Default,
{
    for slot in slots {
        slot.set(T::Word::default());
    }
}

/// Elements a shift moves per step: it loads them all, then stores them all, so a step
/// costs its loads, its stores and one loop test (elements stay atomics: a reader racing
/// the shift sees torn contents that its version check rejects).
const STEP: usize = 4;

/// Copies `src` to `dst` (slices of the same length), loading before storing.
#[inline(always)]
fn copy_step<T: Slot>(src: &[T], dst: &[T]) {
    let words: [T::Word; STEP] = std::array::from_fn(|k| src[k].get());
    for (slot, word) in dst.iter().zip(words) {
        slot.set(word);
    }
}

/// Moves `slots[..len - 1]` one place right.
#[inline]
fn shift_right<T: Slot>(slots: &[T]) {
    let Some(moved) = slots.len().checked_sub(1) else {
        return;
    };
    let (src, dst) = (&slots[..moved], &slots[1..]);
    // From the end, a step at a time: each step reads its elements before it overwrites
    // the last element the step before it read.
    let (mut src_steps, mut dst_steps) = (src.rchunks_exact(STEP), dst.rchunks_exact(STEP));
    for (s, d) in src_steps.by_ref().zip(dst_steps.by_ref()) {
        copy_step(s, d);
    }
    for (s, d) in src_steps
        .remainder()
        .iter()
        .zip(dst_steps.remainder())
        .rev()
    {
        d.set(s.get());
    }
}

/// Moves `slots[1..]` one place left, a step at a time from the start.
#[inline]
fn shift_left<T: Slot>(slots: &[T]) {
    let Some(moved) = slots.len().checked_sub(1) else {
        return;
    };
    let (src, dst) = (&slots[1..], &slots[..moved]);
    let (mut src_steps, mut dst_steps) = (src.chunks_exact(STEP), dst.chunks_exact(STEP));
    for (s, d) in src_steps.by_ref().zip(dst_steps.by_ref()) {
        copy_step(s, d);
    }
    for (s, d) in src_steps.remainder().iter().zip(dst_steps.remainder()) {
        d.set(s.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(slots: &[AtomicU64]) -> Vec<u64> {
        slots.iter().map(Slot::get).collect()
    }

    #[test]
    fn shifts_move_every_element_once() {
        for len in 0..=13u64 {
            let slots: Vec<AtomicU64> = (0..len).map(AtomicU64::new).collect();
            shift_right(&slots);
            let expected: Vec<u64> = (0..len).map(|j| j.saturating_sub(1)).collect();
            assert_eq!(words(&slots), expected, "right, {len} elements");

            let slots: Vec<AtomicU64> = (0..len).map(AtomicU64::new).collect();
            shift_left(&slots);
            let expected: Vec<u64> = (0..len).map(|j| (j + 1).min(len - 1)).collect();
            assert_eq!(words(&slots), expected, "left, {len} elements");

            let narrow: Vec<AtomicU32> = (0..len as u32).map(AtomicU32::new).collect();
            shift_right(&narrow);
            let got: Vec<u64> = narrow.iter().map(|s| u64::from(s.get())).collect();
            assert_eq!(
                got,
                (0..len).map(|j| j.saturating_sub(1)).collect::<Vec<_>>()
            );
        }
    }
}
