//! Keys seen as bit strings: what a blind trie (the SeqTree) needs from a key representation.
//!
//! A blind trie never stores keys; it stores, for each pair of adjacent keys, the position
//! of the first bit in which they differ, and at the end of a search compares the probe
//! with one key loaded through a [`crate::table::KeySource`]. For that to order keys
//! correctly, the bit string of a key must sort exactly like the key, and no key's bit string
//! may be a prefix of another's. [`BlindKeys`] gives each standard representation such a
//! view:
//!
//! * `u64` and `u128` keys (big-endian integers) are their own bit strings, most significant
//!   bit first; a non-unique tree over 8-byte keys already stores `(key, tid)` as one `u128`.
//! * Variable keys ([`VarKey`]) are not prefix-free (`"ab"` < `"abc"`), so each byte is
//!   preceded by a 1 bit and the key is ended by a 0 bit: bit `9q` is 1 while byte `q`
//!   exists and 0 at the end, bits `9q+1..9q+9` are byte `q`. A shorter key is then smaller
//!   than every key it prefixes, at the bit where it ends. In non-unique trees the 64 bits of
//!   the tid follow the end bit, so pairs sort by key, then tid.
//!
//! Bit positions are stored in [`BlindKeys::Pos`] cells: one byte where every position is
//! below 256 (fixed keys), two bytes otherwise.

use std::sync::atomic::{AtomicU16, AtomicU8, Ordering};

use super::slotted::{Slotted, VarKey, VarProbe};
use super::sorted::Sorted;
use super::NodeRepr;

/// An atomic cell holding one bit position.
pub trait PosCell: Send + Sync + 'static {
    /// Bytes per cell.
    const BYTES: usize;
    /// The largest position the cell holds.
    const MAX: u32;
    /// Loads the position (relaxed: node contents are validated by the version lock).
    fn get(&self) -> u32;
    /// Stores a position (write lock held).
    fn set(&self, pos: u32);
}

impl PosCell for AtomicU8 {
    const BYTES: usize = 1;
    const MAX: u32 = u8::MAX as u32;
    #[inline]
    fn get(&self) -> u32 {
        u32::from(self.load(Ordering::Relaxed))
    }
    #[inline]
    fn set(&self, pos: u32) {
        self.store(pos.min(Self::MAX) as u8, Ordering::Relaxed)
    }
}

impl PosCell for AtomicU16 {
    const BYTES: usize = 2;
    const MAX: u32 = u16::MAX as u32;
    #[inline]
    fn get(&self) -> u32 {
        u32::from(self.load(Ordering::Relaxed))
    }
    #[inline]
    fn set(&self, pos: u32) {
        self.store(pos.min(Self::MAX) as u16, Ordering::Relaxed)
    }
}

/// A node representation whose keys can be indexed by a blind trie.
pub trait BlindKeys: NodeRepr {
    /// The cell type of a bit position.
    type Pos: PosCell;

    /// The bit at `pos` of the probe's bit string (0 past its end).
    fn bit(probe: Self::Probe<'_>, pos: u32) -> bool;

    /// The first bit in which the probe differs from the key `bytes` (of tuple `tid`, part of
    /// the key in non-unique trees when `composite`), or `None` when they are equal.
    fn diff_loaded(probe: Self::Probe<'_>, bytes: &[u8], tid: u64, composite: bool) -> Option<u32>;

    /// The first bit in which two keys differ, or `None` when they are equal.
    fn diff_probes(a: Self::Probe<'_>, b: Self::Probe<'_>) -> Option<u32>;

    /// The owned key of tuple `tid` whose key bytes are `bytes`.
    fn owned_from_loaded(bytes: &[u8], tid: u64, composite: bool) -> Self::Owned;

    /// [`BlindKeys::owned_from_loaded`] into `out`, reusing what it holds.
    #[inline]
    fn owned_into(bytes: &[u8], tid: u64, composite: bool, out: &mut Self::Owned) {
        *out = Self::owned_from_loaded(bytes, tid, composite);
    }

    /// Whether every bit position of keys up to `max_key_len` bytes fits in [`Self::Pos`].
    fn positions_fit(max_key_len: usize, composite: bool) -> bool;
}

/// `bytes` as a big-endian integer of `N` bytes: zero-padded or truncated on the right, so a
/// key source that returns a wrong length gives a wrong key (caught by `check`), never a
/// panic.
#[inline]
fn be_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = bytes.len().min(N);
    out[..n].copy_from_slice(&bytes[..n]);
    out
}

#[inline]
fn first_diff_u64(a: u64, b: u64) -> Option<u32> {
    (a != b).then(|| (a ^ b).leading_zeros())
}

#[inline]
fn first_diff_u128(a: u128, b: u128) -> Option<u32> {
    (a != b).then(|| (a ^ b).leading_zeros())
}

impl BlindKeys for Sorted<u64> {
    type Pos = AtomicU8;

    #[inline]
    fn bit(probe: u64, pos: u32) -> bool {
        pos < 64 && (probe >> (63 - pos)) & 1 == 1
    }

    #[inline]
    fn diff_loaded(probe: u64, bytes: &[u8], _tid: u64, _composite: bool) -> Option<u32> {
        first_diff_u64(probe, u64::from_be_bytes(be_array(bytes)))
    }

    #[inline]
    fn diff_probes(a: u64, b: u64) -> Option<u32> {
        first_diff_u64(a, b)
    }

    fn owned_from_loaded(bytes: &[u8], _tid: u64, _composite: bool) -> u64 {
        u64::from_be_bytes(be_array(bytes))
    }

    fn positions_fit(_max_key_len: usize, composite: bool) -> bool {
        !composite
    }
}

/// The `u128` form of a key: a 16-byte key, or (8-byte key, tid) in non-unique trees.
#[inline]
fn u128_of(bytes: &[u8], tid: u64, composite: bool) -> u128 {
    if composite {
        (u128::from(u64::from_be_bytes(be_array(bytes))) << 64) | u128::from(tid)
    } else {
        u128::from_be_bytes(be_array(bytes))
    }
}

impl BlindKeys for Sorted<u128> {
    type Pos = AtomicU8;

    #[inline]
    fn bit(probe: u128, pos: u32) -> bool {
        pos < 128 && (probe >> (127 - pos)) & 1 == 1
    }

    #[inline]
    fn diff_loaded(probe: u128, bytes: &[u8], tid: u64, composite: bool) -> Option<u32> {
        first_diff_u128(probe, u128_of(bytes, tid, composite))
    }

    #[inline]
    fn diff_probes(a: u128, b: u128) -> Option<u32> {
        first_diff_u128(a, b)
    }

    fn owned_from_loaded(bytes: &[u8], tid: u64, composite: bool) -> u128 {
        u128_of(bytes, tid, composite)
    }

    fn positions_fit(_max_key_len: usize, _composite: bool) -> bool {
        true
    }
}

/// The bit at `pos` of the prefix-free view of a variable key (see the module docs).
#[inline]
fn var_bit(bytes: &[u8], tid: Option<u64>, pos: u32) -> bool {
    let q = (pos / 9) as usize;
    let r = pos % 9;
    if q < bytes.len() {
        return r == 0 || (bytes[q] >> (8 - r)) & 1 == 1;
    }
    // Past the bytes: the end bit (0) at 9 * len, then the tid's 64 bits.
    let end = 9 * bytes.len() as u32;
    match tid {
        Some(tid) if pos > end && pos <= end + 64 => (tid >> (64 - (pos - end))) & 1 == 1,
        _ => false,
    }
}

/// The first differing bit of the prefix-free views of two variable keys.
#[inline]
fn var_diff(a: &[u8], a_tid: Option<u64>, b: &[u8], b_tid: Option<u64>) -> Option<u32> {
    let common = a.len().min(b.len());
    if let Some(q) = a[..common]
        .iter()
        .zip(&b[..common])
        .position(|(x, y)| x != y)
    {
        return Some(9 * q as u32 + 1 + (a[q] ^ b[q]).leading_zeros());
    }
    if a.len() != b.len() {
        // One key ends where the other continues: they differ at the end bit.
        return Some(9 * common as u32);
    }
    let end = 9 * common as u32;
    match (a_tid, b_tid) {
        (Some(x), Some(y)) if x != y => Some(end + 1 + (x ^ y).leading_zeros()),
        _ => None,
    }
}

impl BlindKeys for Slotted {
    type Pos = AtomicU16;

    #[inline]
    fn bit(probe: VarProbe<'_>, pos: u32) -> bool {
        var_bit(probe.bytes(), probe.tid(), pos)
    }

    #[inline]
    fn diff_loaded(probe: VarProbe<'_>, bytes: &[u8], tid: u64, composite: bool) -> Option<u32> {
        var_diff(probe.bytes(), probe.tid(), bytes, composite.then_some(tid))
    }

    #[inline]
    fn diff_probes(a: VarProbe<'_>, b: VarProbe<'_>) -> Option<u32> {
        var_diff(a.bytes(), a.tid(), b.bytes(), b.tid())
    }

    fn owned_from_loaded(bytes: &[u8], tid: u64, composite: bool) -> VarKey {
        VarKey {
            bytes: bytes.to_vec(),
            tid: composite.then_some(tid),
        }
    }

    fn owned_into(bytes: &[u8], tid: u64, composite: bool, out: &mut VarKey) {
        out.bytes.clear();
        out.bytes.extend_from_slice(bytes);
        out.tid = composite.then_some(tid);
    }

    fn positions_fit(max_key_len: usize, composite: bool) -> bool {
        let last = 9 * max_key_len + if composite { 65 } else { 1 };
        last <= <AtomicU16 as PosCell>::MAX as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering as CmpOrdering;

    /// The order of two keys as decided by their first differing bit.
    fn bit_order(a: &[u8], at: Option<u64>, b: &[u8], bt: Option<u64>) -> CmpOrdering {
        match var_diff(a, at, b, bt) {
            None => CmpOrdering::Equal,
            Some(pos) if var_bit(a, at, pos) => {
                assert!(!var_bit(b, bt, pos), "keys must differ at the reported bit");
                CmpOrdering::Greater
            }
            Some(pos) => {
                assert!(var_bit(b, bt, pos), "keys must differ at the reported bit");
                CmpOrdering::Less
            }
        }
    }

    #[test]
    fn variable_bit_view_sorts_like_the_keys() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"ab",
            b"ab\0",
            b"abc",
            b"b",
            b"\xff",
            b"\xff\xff",
        ];
        for a in &keys {
            for b in &keys {
                assert_eq!(bit_order(a, None, b, None), a.cmp(b), "{a:?} vs {b:?}");
                for (x, y) in [(0u64, 1u64), (5, 5), (u64::MAX, 7)] {
                    let expected = (a, x).cmp(&(b, y));
                    assert_eq!(bit_order(a, Some(x), b, Some(y)), expected);
                }
            }
        }
    }

    #[test]
    fn integer_bits_are_most_significant_first() {
        assert!(Sorted::<u64>::bit(1 << 63, 0));
        assert!(!Sorted::<u64>::bit(1 << 63, 1));
        assert!(Sorted::<u64>::bit(1, 63));
        assert_eq!(
            Sorted::<u64>::diff_loaded(5, &5u64.to_be_bytes(), 0, false),
            None
        );
        assert_eq!(
            Sorted::<u64>::diff_loaded(4, &5u64.to_be_bytes(), 0, false),
            Some(63)
        );
        let pair = u128_of(&7u64.to_be_bytes(), 9, true);
        assert_eq!(pair, (7u128 << 64) | 9);
        assert!(Sorted::<u128>::bit(pair, 127));
    }

    #[test]
    fn position_limits() {
        assert!(Slotted::positions_fit(1024, true));
        assert!(!Slotted::positions_fit(8000, false));
        assert!(!Sorted::<u64>::positions_fit(8, true));
    }
}
