//! Keys as the SB-tree stores them: fixed-width integers ([`SbKey`]: `u64` for 8-byte keys,
//! `u128` for 16-byte keys, the big-endian value of the key's bytes, so integer order is byte
//! order) and positions ([`Pos`]): where an entry sorts.
//!
//! A unique index orders entries by key; a non-unique one by (key, tid), so that a key's tids
//! are adjacent and ascending. Both are one ordering of [`Pos`] = (key, tid) in which a unique
//! index's positions carry tid 0: comparisons never ask which kind of index they are in.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use super::simd::{portable_count, Kernel};

mod sealed {
    /// Only this module's key types are keys: [`super::SbKey::count`] relies on their
    /// layout and order.
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for u128 {}
}

/// A fixed-width integer key (`u64` or `u128`; sealed).
pub trait SbKey:
    sealed::Sealed + Copy + Ord + Eq + Debug + Default + Send + Sync + 'static
{
    /// Bytes of the key.
    const BYTES: usize;
    /// The smallest key.
    const MIN: Self;
    /// The largest key.
    const MAX: Self;

    /// The key whose big-endian bytes are `bytes` (exactly [`SbKey::BYTES`] of them).
    fn from_be_slice(bytes: &[u8]) -> Self;
    /// Writes the key's big-endian bytes to `out[..BYTES]`.
    fn write_be(self, out: &mut [u8]);
    /// The key as two words, high first (an 8-byte key's high word is 0).
    fn to_words(self) -> [u64; 2];
    /// The key of [`SbKey::to_words`]'s words.
    fn from_words(words: [u64; 2]) -> Self;
    /// `self - base` if `base <= self` and the difference fits 32 bits: the key's offset in a
    /// block whose keys are stored as 32-bit offsets from `base`.
    fn offset_from(self, base: Self) -> Option<u32>;
    /// The low 32 bits of `self - base` (wrapping): the offset when
    /// [`SbKey::offset_from`] says it fits.
    fn low_offset(self, base: Self) -> u32;
    /// `base + offset`.
    fn add_offset(base: Self, offset: u32) -> Self;
    /// The key `ahead` average gaps above `last`, the gaps measured over `n` keys from
    /// `first` to `last` (saturating at [`SbKey::MAX`]; at least `last + 1`).
    fn project(first: Self, last: Self, n: u64, ahead: u64) -> Self;
    /// The number of `keys` below `x` (`strict`) or at most `x`, with `kernel`'s vector
    /// instructions where it has them for this width.
    fn count(kernel: Kernel, keys: &[Self], x: Self, strict: bool) -> usize;
}

/// The first index of `lo..hi` whose position is not below `pos` (`hi` if none), by
/// halving; `at` reads ascending positions.
///
/// Without a branch on the data: each halving picks its half with a conditional move
/// ([`Pos::below`], [`std::hint::select_unpredictable`]), so the loop runs a number of
/// times that depends on the length only. A search's comparisons go either way at random,
/// and the branchy version mispredicted about half of them: at 20% delayed keys, 5 of the
/// 10 mispredicted branches of a late insert were in its two searches of sorted blocks.
/// `pairs`: whether the positions' tids count (see [`Pos::below`]).
#[inline]
pub fn first_not_below<K: SbKey>(
    range: (usize, usize),
    pos: Pos<K>,
    pairs: bool,
    at: impl Fn(usize) -> Pos<K>,
) -> usize {
    partition_point(range, |i| at(i).below(pos, pairs))
}

/// The first index of `lo..hi` for which `before` is false (`hi` if none), where it holds
/// for a prefix of the range: [`first_not_below`]'s branch-free halving, for any test.
#[inline]
pub fn partition_point((lo, hi): (usize, usize), before: impl Fn(usize) -> bool) -> usize {
    if hi <= lo {
        return lo;
    }
    // The point is in `base..=base + size`, and `before` holds below `base`.
    let (mut base, mut size) = (lo, hi - lo);
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = std::hint::select_unpredictable(before(mid), mid, base);
        size -= half;
    }
    base + usize::from(before(base))
}

/// Where `key` would fall among `count` keys spread evenly from `low` (inclusive) to `high`
/// (exclusive): an interpolation search's first guess, for prefetching (`None` when `key` is
/// outside the range).
pub fn interpolate<K: SbKey>(low: K, high: K, key: K, count: usize) -> Option<usize> {
    let wide = |k: K| {
        let [h, l] = k.to_words();
        (u128::from(h) << 64) | u128::from(l)
    };
    let (low, high, key) = (wide(low), wide(high), wide(key));
    if !(low <= key && key < high) {
        return None;
    }
    let (span, at) = (high - low, key - low);
    // The usual case in one 64-bit multiplication and division (no 128-bit division
    // routine), with the same result as below.
    if let (Ok(span), Ok(at)) = (u64::try_from(span), u64::try_from(at)) {
        if let Some(product) = at.checked_mul(count as u64) {
            return Some((product / span) as usize);
        }
    }
    // Scaled down so that the product cannot overflow: a guess needs no more precision.
    let shift = (128 - (high - low).leading_zeros()).saturating_sub(96);
    let (span, at) = ((high - low) >> shift, (key - low) >> shift);
    Some((at * count as u128 / span.max(1)) as usize)
}

impl SbKey for u64 {
    const BYTES: usize = 8;
    const MIN: Self = 0;
    const MAX: Self = u64::MAX;

    #[inline]
    fn from_be_slice(bytes: &[u8]) -> Self {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        u64::from_be_bytes(b)
    }
    #[inline]
    fn write_be(self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.to_be_bytes());
    }
    #[inline]
    fn to_words(self) -> [u64; 2] {
        [0, self]
    }
    #[inline]
    fn from_words(words: [u64; 2]) -> Self {
        words[1]
    }
    #[inline]
    fn offset_from(self, base: Self) -> Option<u32> {
        self.checked_sub(base).and_then(|d| u32::try_from(d).ok())
    }
    #[inline]
    fn low_offset(self, base: Self) -> u32 {
        self.wrapping_sub(base) as u32
    }
    #[inline]
    fn add_offset(base: Self, offset: u32) -> Self {
        base + u64::from(offset)
    }
    fn project(first: Self, last: Self, n: u64, ahead: u64) -> Self {
        let gap = (last - first) / n.max(1);
        last.saturating_add(gap.max(1).saturating_mul(ahead.max(1)))
    }
    #[inline]
    fn count(kernel: Kernel, keys: &[Self], x: Self, strict: bool) -> usize {
        kernel.count_u64(keys, x, strict)
    }
}

impl SbKey for u128 {
    const BYTES: usize = 16;
    const MIN: Self = 0;
    const MAX: Self = u128::MAX;

    #[inline]
    fn from_be_slice(bytes: &[u8]) -> Self {
        let mut b = [0u8; 16];
        b.copy_from_slice(bytes);
        u128::from_be_bytes(b)
    }
    #[inline]
    fn write_be(self, out: &mut [u8]) {
        out[..16].copy_from_slice(&self.to_be_bytes());
    }
    #[inline]
    fn to_words(self) -> [u64; 2] {
        [(self >> 64) as u64, self as u64]
    }
    #[inline]
    fn from_words(words: [u64; 2]) -> Self {
        (u128::from(words[0]) << 64) | u128::from(words[1])
    }
    #[inline]
    fn offset_from(self, base: Self) -> Option<u32> {
        self.checked_sub(base).and_then(|d| u32::try_from(d).ok())
    }
    #[inline]
    fn low_offset(self, base: Self) -> u32 {
        self.wrapping_sub(base) as u32
    }
    #[inline]
    fn add_offset(base: Self, offset: u32) -> Self {
        base + u128::from(offset)
    }
    fn project(first: Self, last: Self, n: u64, ahead: u64) -> Self {
        let gap = (last - first) / u128::from(n.max(1));
        last.saturating_add(gap.max(1).saturating_mul(u128::from(ahead.max(1))))
    }
    #[inline]
    fn count(_: Kernel, keys: &[Self], x: Self, strict: bool) -> usize {
        portable_count(keys, x, strict)
    }
}

/// Where an entry sorts: its key, then (non-unique index) its tid. A unique index's
/// positions have tid 0, so one lexicographic order serves both kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Pos<K> {
    /// The key.
    pub key: K,
    /// The tid in a non-unique index; 0 in a unique one.
    pub tid: u64,
}

impl<K: SbKey> Pos<K> {
    /// The smallest position.
    pub const MIN: Pos<K> = Pos {
        key: K::MIN,
        tid: 0,
    };

    /// The largest position.
    pub const MAX: Pos<K> = Pos {
        key: K::MAX,
        tid: u64::MAX,
    };

    /// The position of the entry `(key, tid)` in an index that orders by tid too (`pairs`)
    /// or not.
    #[inline]
    pub fn of(key: K, tid: u64, pairs: bool) -> Self {
        Pos {
            key,
            tid: if pairs { tid } else { 0 },
        }
    }

    /// Whether `self` sorts below `other`, both positions of an index that orders by tid
    /// too (`pairs`) or not (their tids are 0): the derived order, computed without a
    /// branch. Where tids do not count, the keys alone are compared (one 64-bit comparison
    /// for 8-byte keys): a wider comparison, with tids that are 0 but not known to be,
    /// made the compiler turn a search's conditional moves back into branches.
    #[inline(always)]
    pub fn below(self, other: Self, pairs: bool) -> bool {
        let ([ah, al], [bh, bl]) = (self.key.to_words(), other.key.to_words());
        let wide = |h: u64, l: u64| (u128::from(h) << 64) | u128::from(l);
        match (K::BYTES == 8, pairs) {
            (true, false) => al < bl,
            (true, true) => wide(al, self.tid) < wide(bl, other.tid),
            (false, false) => wide(ah, al) < wide(bh, bl),
            (false, true) => {
                let (a, b) = (wide(ah, al), wide(bh, bl));
                (a < b) | ((a == b) & (self.tid < other.tid))
            }
        }
    }

    /// The next position up, if there is one.
    pub fn succ(self, pairs: bool) -> Option<Self> {
        if pairs && self.tid < u64::MAX {
            return Some(Pos {
                key: self.key,
                tid: self.tid + 1,
            });
        }
        let words = self.key.to_words();
        let key = if words == K::MAX.to_words() {
            return None;
        } else if K::BYTES == 8 {
            K::from_words([0, words[1] + 1])
        } else {
            let (lo, carry) = words[1].overflowing_add(1);
            K::from_words([words[0] + u64::from(carry), lo])
        };
        Some(Pos { key, tid: 0 })
    }
}

/// A position in three atomic words (key high, key low, tid), for fields that optimistic
/// readers read while a writer may change them.
#[derive(Debug, Default)]
pub struct PosCell {
    words: [AtomicU64; 3],
}

impl PosCell {
    /// A cell holding `pos`.
    pub fn new<K: SbKey>(pos: Pos<K>) -> Self {
        let cell = Self::default();
        cell.store(pos);
        cell
    }

    /// The position (may be torn under a concurrent writer: validate before trusting it).
    #[inline]
    pub fn load<K: SbKey>(&self) -> Pos<K> {
        let hi = if K::BYTES == 8 {
            0
        } else {
            self.words[0].load(Ordering::Relaxed)
        };
        let lo = self.words[1].load(Ordering::Relaxed);
        Pos {
            key: K::from_words([hi, lo]),
            tid: self.words[2].load(Ordering::Relaxed),
        }
    }

    /// Stores `pos` (relaxed: the caller's lock or fence orders it).
    #[inline]
    pub fn store<K: SbKey>(&self, pos: Pos<K>) {
        let [hi, lo] = pos.key.to_words();
        self.words[0].store(hi, Ordering::Relaxed);
        self.words[1].store(lo, Ordering::Relaxed);
        self.words[2].store(pos.tid, Ordering::Relaxed);
    }
}

/// Atomic words of an entry (key, tid) stored for optimistic readers: the key's words (high
/// first), then the tid.
pub const fn entry_words<K: SbKey>() -> usize {
    K::BYTES / 8 + 1
}

/// The key of the entry in `slot` ([`entry_words`] words; may be torn under a concurrent
/// writer).
#[inline]
fn load_key<K: SbKey>(slot: &[AtomicU64]) -> K {
    if K::BYTES == 8 {
        K::from_words([0, slot[0].load(Ordering::Relaxed)])
    } else {
        K::from_words([
            slot[0].load(Ordering::Relaxed),
            slot[1].load(Ordering::Relaxed),
        ])
    }
}

/// The entry in `slot` ([`entry_words`] words; may be torn under a concurrent writer).
#[inline]
pub fn load_entry<K: SbKey>(slot: &[AtomicU64]) -> (K, u64) {
    (
        load_key(slot),
        slot[entry_words::<K>() - 1].load(Ordering::Relaxed),
    )
}

/// The position of the entry in `slot` (as [`load_entry`]), its tid read only in an index
/// that orders by tid (`pairs`): a unique index's searches compare keys alone, one load
/// per probe.
#[inline]
pub fn load_pos<K: SbKey>(slot: &[AtomicU64], pairs: bool) -> Pos<K> {
    let tid = if pairs {
        slot[entry_words::<K>() - 1].load(Ordering::Relaxed)
    } else {
        0
    };
    Pos::of(load_key(slot), tid, pairs)
}

/// Stores the entry `(key, tid)` in `slot` (relaxed: the caller's lock or publication
/// orders it).
#[inline]
pub fn store_entry<K: SbKey>(slot: &[AtomicU64], key: K, tid: u64) {
    let [hi, lo] = key.to_words();
    if K::BYTES == 8 {
        slot[0].store(lo, Ordering::Relaxed);
    } else {
        slot[0].store(hi, Ordering::Relaxed);
        slot[1].store(lo, Ordering::Relaxed);
    }
    slot[entry_words::<K>() - 1].store(tid, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_bytes_and_words() {
        let k = 0x0102_0304_0506_0708u64;
        let mut b = [0u8; 16];
        k.write_be(&mut b);
        assert_eq!(u64::from_be_slice(&b[..8]), k);
        assert_eq!(u64::from_words(k.to_words()), k);
        let w = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10u128;
        w.write_be(&mut b);
        assert_eq!(u128::from_be_slice(&b), w);
        assert_eq!(u128::from_words(w.to_words()), w);
    }

    #[test]
    fn offsets_fit_32_bits_above_the_base_only() {
        assert_eq!(10u64.offset_from(3), Some(7));
        assert_eq!(3u64.offset_from(10), None);
        assert_eq!((u64::from(u32::MAX) + 5).offset_from(5), Some(u32::MAX));
        assert_eq!((u64::from(u32::MAX) + 6).offset_from(5), None);
        assert_eq!(u64::add_offset(5, 7), 12);
        assert_eq!((1u128 << 80).offset_from((1u128 << 80) - 2), Some(2));
    }

    #[test]
    fn positions_order_by_key_then_tid_and_step_up() {
        let a = Pos::of(5u64, 9, true);
        let b = Pos::of(5u64, 10, true);
        assert!(a < b);
        assert_eq!(Pos::of(5u64, 9, false), Pos::of(5u64, 10, false));
        assert_eq!(a.succ(true), Some(b));
        assert_eq!(
            Pos::of(5u64, 0, false).succ(false),
            Some(Pos::of(6u64, 0, false))
        );
        assert_eq!(Pos::of(u64::MAX, 0, false).succ(false), None);
        let top = Pos::of(u64::MAX, u64::MAX, true);
        assert_eq!(top.succ(true), None);
        let carry = Pos::of(u128::from(u64::MAX), 0, false).succ(false).unwrap();
        assert_eq!(carry.key, 1u128 << 64);
    }

    /// The branch-free comparison agrees with the derived order, for both key widths and
    /// both kinds of index, and the branch-free halving with a sorted slice's
    /// `partition_point` for every probe and sub-range.
    #[test]
    fn branch_free_comparisons_and_halvings_agree_with_the_derived_order() {
        fn check<K: SbKey>(keys: &[K]) {
            for pairs in [false, true] {
                let tids: &[u64] = if pairs { &[0, 1, u64::MAX] } else { &[0] };
                let mut all: Vec<Pos<K>> = keys
                    .iter()
                    .flat_map(|&k| tids.iter().map(move |&t| Pos::of(k, t, pairs)))
                    .collect();
                for &a in &all {
                    for &b in &all {
                        assert_eq!(a.below(b, pairs), a < b, "{a:?} < {b:?}");
                    }
                }
                all.sort();
                all.dedup();
                for lo in 0..all.len() {
                    for hi in lo..=all.len() {
                        for &p in &all {
                            let expect = lo + all[lo..hi].partition_point(|&x| x < p);
                            let got = first_not_below((lo, hi), p, pairs, |i| all[i]);
                            assert_eq!(got, expect, "{p:?} in {lo}..{hi}");
                        }
                    }
                }
            }
        }
        check::<u64>(&[0, 1, 2, 7, 1 << 40, u64::MAX - 1, u64::MAX]);
        check::<u128>(&[0, 1, 1 << 64, (1 << 64) + 1, u128::MAX - 1, u128::MAX]);
    }

    #[test]
    fn interpolation_spreads_keys_evenly_and_refuses_keys_outside() {
        assert_eq!(interpolate(100u64, 200, 100, 50), Some(0));
        assert_eq!(interpolate(100u64, 200, 150, 50), Some(25));
        assert_eq!(interpolate(100u64, 200, 199, 50), Some(49));
        assert_eq!(interpolate(100u64, 200, 200, 50), None);
        assert_eq!(interpolate(100u64, 200, 99, 50), None);
        assert_eq!(interpolate(5u64, 5, 5, 50), None);
        // The widest ranges neither overflow nor lose the guess.
        assert_eq!(interpolate(0u64, u64::MAX, u64::MAX / 2, 1000), Some(499));
        assert_eq!(
            interpolate(0u128, u128::MAX, u128::MAX / 4, 1000),
            Some(249)
        );
        let low = 7u128 << 100;
        assert_eq!(interpolate(low, low + 1000, low + 500, 10), Some(5));
    }

    #[test]
    fn a_projection_lands_ahead_of_the_last_key() {
        assert_eq!(u64::project(0, 100, 10, 4), 140);
        assert_eq!(u64::project(7, 7, 1, 4), 11);
        assert_eq!(u64::project(0, u64::MAX - 1, 2, 4), u64::MAX);
        assert_eq!(u128::project(0, 100, 10, 4), 140);
    }

    #[test]
    fn a_cell_holds_a_position() {
        let cell = PosCell::new(Pos::of(42u128 << 70, 7, true));
        assert_eq!(cell.load::<u128>(), Pos::of(42u128 << 70, 7, true));
        cell.store(Pos::of(3u64, 1, true));
        assert_eq!(cell.load::<u64>(), Pos::of(3u64, 1, true));
    }
}
