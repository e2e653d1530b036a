//! [`Key`]: a key and its tid as every part of the Bw-tree compares them.

use std::cmp::Ordering;

use crate::node::bytes::key_word;
use crate::node::slotted::{VarKey, VarProbe};

/// A borrowed key with its tid: ordered by bytes, then tid. Unique trees give every key the
/// tid 0, so they order by bytes alone; non-unique trees store each pair `(key, tid)` as a
/// key of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key<'a> {
    /// The key bytes.
    pub bytes: &'a [u8],
    /// The tid (0 in unique trees).
    pub tid: u64,
}

impl<'a> Key<'a> {
    /// The smallest key: the empty key with tid 0 (inner pages' first separator when they
    /// are unbounded below).
    pub const MIN: Key<'static> = Key { bytes: &[], tid: 0 };

    /// A page owned key as a key.
    pub fn of(key: &'a VarKey) -> Self {
        Key {
            bytes: &key.bytes,
            tid: key.tid.unwrap_or(0),
        }
    }

    /// Whether two keys are the same (as `==`, without a call to compare the bytes: keys of
    /// up to 8 bytes compare as one word each).
    #[inline]
    pub fn same(self, other: Key<'_>) -> bool {
        let len = self.bytes.len();
        self.tid == other.tid
            && len == other.bytes.len()
            && if len <= 8 {
                key_word(self.bytes, 0) == key_word(other.bytes, 0)
            } else {
                self.bytes == other.bytes
            }
    }

    /// How two keys order (as `cmp`: bytes, then tid): first by their first 8 bytes as
    /// big-endian integers, zero-padded (keys whose words differ differ within them, and
    /// a byte of one against the padding of the other orders as the shorter key does), which
    /// decides most comparisons without a call; by the whole bytes when those tie.
    #[inline(always)]
    pub fn order(self, other: Key<'_>) -> Ordering {
        let (a, b) = (self.bytes, other.bytes);
        let (x, y) = match (a.first_chunk::<8>(), b.first_chunk::<8>()) {
            (Some(x), Some(y)) => (u64::from_be_bytes(*x), u64::from_be_bytes(*y)),
            _ => (key_word(a, 0), key_word(b, 0)),
        };
        if x != y {
            return x.cmp(&y);
        }
        a.cmp(b).then(self.tid.cmp(&other.tid))
    }

    /// A byte hashed from the key's first and last 8 bytes, its length and its tid: equal
    /// keys have equal marks, so a chain none of whose keys' marks is a key's cannot hold
    /// it (see `delta.rs`'s summaries).
    #[inline]
    pub fn mark(self) -> u8 {
        let len = self.bytes.len();
        let (first, last) = match (self.bytes.first_chunk::<8>(), self.bytes.last_chunk::<8>()) {
            (Some(f), Some(l)) => (u64::from_le_bytes(*f), u64::from_le_bytes(*l)),
            _ => (key_word(self.bytes, 0), 0),
        };
        let mixed = (first ^ last.rotate_left(29) ^ len as u64)
            .wrapping_add(self.tid.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
    }

    /// The probe a page search takes (with the tid when pages keep tids).
    #[inline]
    pub fn probe(self, pairs: bool) -> VarProbe<'a> {
        VarProbe::new(self.bytes, pairs.then_some(self.tid))
    }

    /// An owned copy, as pages' fences are.
    pub fn to_owned(self, pairs: bool) -> VarKey {
        VarKey {
            bytes: self.bytes.to_vec(),
            tid: pairs.then_some(self.tid),
        }
    }
}
