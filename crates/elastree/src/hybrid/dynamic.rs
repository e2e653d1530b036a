//! The dynamic stage: a concurrent B+-tree that takes every write, with a Bloom filter over
//! its keys and a gate that lets a merge freeze it.
//!
//! **Entries.** A unique index stores `key -> tid` in a unique tree, with the reserved tid
//! [`TOMBSTONE`] marking a key deleted from a lower layer. A non-unique index stores one
//! entry per `(key, tid)` pair in a *unique* tree keyed by the pair's composite key (the key,
//! then the tid big-endian; variable-length keys in the order-preserving tuple format of
//! [`crate::key`], so pairs sort by key, then tid), with value [`LIVE`] or [`DEAD`]. Either
//! way every change of one key or pair is a single atomic tree operation, so readers see a
//! key's state change at one instant.
//!
//! **Layers.** An entry here overrides whatever the layers below (older dynamic stages, the
//! static stage) say about the same key or pair; a dead entry hides it.
//!
//! **Freezing.** Writers [`Dynamic::enter`] before writing and leave after; a merge
//! [`Dynamic::seal`]s the stage and waits for the writers inside to leave, after which the
//! stage never changes again and can be read as a sorted stream.

use std::ops::Bound;

use super::bloom::Bloom;
use crate::key::{encode_field, KeyPart};
use crate::sync::{Inside, WriterGate};
use crate::{BTreeIndex, Direction, Error, Index, IndexOptions, KeyLen, MemoryUsage};

/// The tid a unique dynamic stage stores for a deleted key. Users cannot insert it.
pub const TOMBSTONE: u64 = u64::MAX;
/// Value of a present pair in a non-unique dynamic stage.
pub const LIVE: u64 = 0;
/// Value of a deleted pair in a non-unique dynamic stage.
pub const DEAD: u64 = 1;

/// How user keys map to keys of the dynamic stage's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Unique index: the tree key is the user key.
    Unique,
    /// Non-unique index with keys of one length: the key, then the tid big-endian.
    FixedPairs(usize),
    /// Non-unique index with variable keys: the key in the tuple format (zeros escaped,
    /// terminated), then the tid big-endian.
    VarPairs,
}

impl Codec {
    /// The tree key of the pair `(key, tid)` (non-unique codecs) or of `key` (unique).
    pub fn encode(self, key: &[u8], tid: u64, out: &mut Vec<u8>) {
        out.clear();
        match self {
            Codec::Unique => out.extend_from_slice(key),
            Codec::FixedPairs(_) => {
                out.extend_from_slice(key);
                out.extend_from_slice(&tid.to_be_bytes());
            }
            Codec::VarPairs => {
                encode_field(&KeyPart::Bytes(key.to_vec()), out);
                out.extend_from_slice(&tid.to_be_bytes());
            }
        }
    }

    /// The tree key of `(key, tid)`: `key` itself for the unique codec (no copy).
    pub fn tree_key(self, key: &[u8], tid: u64) -> std::borrow::Cow<'_, [u8]> {
        if self == Codec::Unique {
            return std::borrow::Cow::Borrowed(key);
        }
        let mut out = Vec::with_capacity(key.len() + 10);
        self.encode(key, tid, &mut out);
        std::borrow::Cow::Owned(out)
    }

    /// Splits a tree key of a pair codec into the user key (appended to `key`) and the tid.
    pub fn decode_pair(self, tree_key: &[u8], key: &mut Vec<u8>) -> u64 {
        let (body, tid) = tree_key.split_at(tree_key.len() - 8);
        let tid = u64::from_be_bytes(tid.try_into().expect("8-byte tid"));
        match self {
            Codec::Unique | Codec::FixedPairs(_) => key.extend_from_slice(body),
            Codec::VarPairs => {
                // Undo the escaping: 0x00 0xFF is a zero byte, 0x00 0x00 the terminator.
                let mut i = 0;
                while i < body.len() {
                    if body[i] == 0 {
                        if body.get(i + 1) == Some(&0xFF) {
                            key.push(0);
                        }
                        i += 2;
                    } else {
                        key.push(body[i]);
                        i += 1;
                    }
                }
            }
        }
        tid
    }

    /// Maps a bound on user keys to the bound on tree keys covering the same pairs.
    pub fn bound(self, bound: Bound<&[u8]>, lower: bool, out: &mut Vec<u8>) -> Bound<()> {
        let (key, inclusive) = match bound {
            Bound::Unbounded => return Bound::Unbounded,
            Bound::Included(k) => (k, true),
            Bound::Excluded(k) => (k, false),
        };
        let shape = |inclusive: bool| {
            if inclusive {
                Bound::Included(())
            } else {
                Bound::Excluded(())
            }
        };
        match self {
            Codec::Unique => {
                out.clear();
                out.extend_from_slice(key);
                shape(inclusive)
            }
            Codec::FixedPairs(len) if key.len() != len => {
                // A bound of another length first becomes the equivalent bound on keys of
                // exactly `len` bytes (a shorter one zero-padded, the smallest full key above
                // it; a longer one truncated, the largest full key below it), so that no tid
                // byte is ever compared with a key byte.
                let mut fitted = key[..key.len().min(len)].to_vec();
                fitted.resize(len, 0);
                let inclusive = (key.len() < len) == lower;
                self.pair_bound(&fitted, inclusive, lower, out)
            }
            _ => self.pair_bound(key, inclusive, lower, out),
        }
    }

    /// The tree-key bound of a pair codec for a bound on user keys of the right shape: the
    /// first or last pair of the key, included or excluded.
    fn pair_bound(self, key: &[u8], inclusive: bool, lower: bool, out: &mut Vec<u8>) -> Bound<()> {
        // Included lower: from (key, 0); excluded lower: after (key, MAX); included upper:
        // up to (key, MAX); excluded upper: before (key, 0).
        let tid = if inclusive == lower { 0 } else { u64::MAX };
        self.encode(key, tid, out);
        if inclusive {
            Bound::Included(())
        } else {
            Bound::Excluded(())
        }
    }
}

/// Attaches the bytes in `key` to a bound shape from [`Codec::bound`].
pub fn with_key(shape: Bound<()>, key: &[u8]) -> Bound<&[u8]> {
    match shape {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(()) => Bound::Included(key),
        Bound::Excluded(()) => Bound::Excluded(key),
    }
}

/// Why tree operations of a dynamic stage cannot fail: the hybrid index validates every user
/// key (length, fixed length) before it reaches a stage, and the stage's tree accepts every
/// tree key of a valid user key ([`Dynamic::tree_options`]).
const VALIDATED: &str = "a validated key fits the dynamic stage's tree";

/// One dynamic stage; see the module docs. Its operations take keys the index has
/// validated, so they do not fail (an error would mean an index bug, not bad input).
pub struct Dynamic {
    tree: BTreeIndex,
    codec: Codec,
    bloom: Bloom,
    /// Keys read or written here since the stage was created (merge-cold strategy only).
    access: Option<Bloom>,
    gate: WriterGate,
}

impl Dynamic {
    /// An empty stage whose filter is sized for `expected` keys.
    pub fn new(
        tree: &IndexOptions,
        codec: Codec,
        expected: usize,
        bloom_bits_per_key: usize,
        track_access: bool,
    ) -> Result<Self, Error> {
        Ok(Self {
            tree: BTreeIndex::new(tree)?,
            codec,
            bloom: Bloom::new(expected, bloom_bits_per_key),
            access: track_access.then(|| Bloom::new(expected, bloom_bits_per_key)),
            gate: WriterGate::new(),
        })
    }

    /// The options of the tree behind a dynamic stage for user keys described by `user`.
    pub fn tree_options(user: &IndexOptions, codec: Codec) -> IndexOptions {
        let mut tree = IndexOptions {
            unique: true,
            ..user.clone()
        };
        match codec {
            Codec::Unique => {}
            Codec::FixedPairs(len) => {
                tree.key_len = KeyLen::Fixed(len + 8);
                tree.max_key_len = len + 8;
            }
            Codec::VarPairs => {
                // Worst case: every byte a zero, escaped to two, plus terminator and tid.
                tree.key_len = KeyLen::Variable;
                tree.max_key_len = (2 * user.max_key_len + 10).min(crate::MAX_KEY_LEN_LIMIT);
            }
        }
        tree
    }

    /// Starts a write, or `None` if a merge has sealed the stage (the caller reloads the
    /// index's view, which by then has a new active stage).
    pub fn enter(&self) -> Option<Inside<'_>> {
        self.gate.enter()
    }

    /// Stops new writers and waits for the ones inside to leave; afterwards the stage
    /// never changes. Writers only stay inside for one tree operation.
    pub fn seal(&self) {
        self.gate.seal();
    }

    /// The codec of this stage's keys.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Entries held (live and dead).
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the stage holds no entries.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Whether the filter says the key may be here (`false` is exact).
    #[inline]
    pub fn may_contain(&self, hash: u64) -> bool {
        self.bloom.may_contain(hash)
    }

    /// Records an access of a key held here (merge-cold only).
    #[inline]
    pub fn touch(&self, hash: u64) {
        if let Some(access) = &self.access {
            access.insert(hash);
        }
    }

    /// Whether the key was read or written here since the stage was created. Always
    /// `true` when access is not tracked.
    pub fn was_touched(&self, hash: u64) -> bool {
        self.access.as_ref().is_none_or(|a| a.may_contain(hash))
    }

    /// The stored value of a tree key (a tid or [`TOMBSTONE`]; [`LIVE`] or [`DEAD`]).
    #[inline]
    pub fn get(&self, tree_key: &[u8], hash: u64) -> Option<u64> {
        if !self.bloom.may_contain(hash) {
            return None;
        }
        self.tree.get(tree_key).expect(VALIDATED)
    }

    /// Stores `value` under a tree key, returning the previous value. `hash` is the hash of
    /// the *user* key (the filter is over user keys).
    pub fn put(&self, tree_key: &[u8], hash: u64, value: u64) -> Option<u64> {
        self.bloom.insert(hash);
        self.touch(hash);
        self.tree.insert(tree_key, value).expect(VALIDATED)
    }

    /// Stores `value` under a tree key without recording an access: how a merge carries
    /// recently used entries into a new stage, which must not count as a new use.
    pub fn load(&self, tree_key: &[u8], hash: u64, value: u64) -> Option<u64> {
        self.bloom.insert(hash);
        self.tree.insert(tree_key, value).expect(VALIDATED)
    }

    /// Deletes a tree key as seen through this stage: writes the dead marker (`dead`:
    /// [`TOMBSTONE`] or [`DEAD`]) when a lower layer still holds the entry, so it stays
    /// hidden, or removes this stage's entry when none does. Returns the previous value.
    pub fn hide(&self, tree_key: &[u8], hash: u64, dead: u64, below: bool) -> Option<u64> {
        if below {
            self.put(tree_key, hash, dead)
        } else {
            self.take(tree_key)
        }
    }

    /// Removes a tree key, returning its value.
    pub fn take(&self, tree_key: &[u8]) -> Option<u64> {
        self.tree.remove(tree_key).expect(VALIDATED)
    }

    /// Appends the `(tid, live)` entries of a user key of a non-unique stage, by ascending
    /// tid.
    pub fn pairs_of(&self, key: &[u8], hash: u64, out: &mut Vec<(u64, bool)>) {
        if !self.bloom.may_contain(hash) {
            return;
        }
        let (mut low, mut high) = (Vec::new(), Vec::new());
        self.codec.encode(key, 0, &mut low);
        self.codec.encode(key, u64::MAX, &mut high);
        let codec = self.codec;
        let mut user = Vec::new();
        self.scan_tree(
            Bound::Included(&low),
            Bound::Included(&high),
            Direction::Ascending,
            usize::MAX,
            &mut |tree_key, value| {
                user.clear();
                let tid = codec.decode_pair(tree_key, &mut user);
                out.push((tid, value == LIVE));
            },
        );
    }

    /// Visits up to `limit` tree entries in the tree-key range, in `direction` order.
    pub fn scan_tree(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        self.tree
            .scan(lower, upper, direction, limit, visit)
            .expect("scans of a B+-tree take bounds of any length")
    }

    /// The bytes held: the tree, the filters and this struct.
    pub fn memory(&self) -> MemoryUsage {
        let tree = self.tree.memory();
        let filters = self.bloom.bytes() + self.access.as_ref().map_or(0, Bloom::bytes);
        MemoryUsage {
            aux: tree.aux + filters + std::mem::size_of::<Self>(),
            ..tree
        }
    }

    /// The tree's invariants.
    pub fn check(&self) -> Result<(), Error> {
        self.tree.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn var_pairs_sort_by_key_then_tid() {
        let keys: [&[u8]; 5] = [b"", b"\0", b"a", b"a\0", b"ab"];
        let mut encoded = Vec::new();
        for key in keys {
            for tid in [0, 7, u64::MAX] {
                let mut out = Vec::new();
                Codec::VarPairs.encode(key, tid, &mut out);
                let mut back = Vec::new();
                assert_eq!(Codec::VarPairs.decode_pair(&out, &mut back), tid);
                assert_eq!(back, key);
                encoded.push(out);
            }
        }
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(sorted, encoded);
    }
}
