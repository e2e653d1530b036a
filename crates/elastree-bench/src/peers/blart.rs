//! The `blart` crate.

use std::borrow::Borrow;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};

use blart::{AsBytes, NoPrefixesBytes, TreeMap};

use super::{lock_unpoisoned, width_check, BenchIndex, Peer};
use crate::keys::{Key, KeySetKind, KeyWidth};

/// `blart::TreeMap` (an adaptive radix tree, after Leis, Kemper and Neumann's ART) behind a
/// mutex: blart's map is a single-threaded `BTreeMap` replacement (`&mut self` to write), so
/// like [`super::StdBTreeMap`] it runs on one thread only, and the mutex is always uncontended.
/// Scans use its double-ended `range` (reversed for descending scans).
///
/// An ART cannot hold a key that is a prefix of another (blart's `insert` needs keys whose type
/// promises that, `NoPrefixesBytes`; `try_insert` refuses such a key at run time). Keys are
/// stored so that none is: 8-byte keys as `[u8; 8]` big-endian bytes and 16-byte keys as
/// `[u8; 16]` (keys of one length are never prefixes of one another), every other key set,
/// whose keys may be prefixes of others (`docterm`, `email`), as [`PrefixFree`] byte strings.
/// The crate does not count its own memory (its tree-statistics visitor walks the whole tree
/// and leaves out the keys' own allocations).
pub struct Blart<K: ArtKey> {
    map: Mutex<TreeMap<K, u64>>,
}

impl<K: ArtKey> Blart<K> {
    /// An empty map.
    pub fn new() -> Self {
        Self {
            map: Mutex::new(TreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TreeMap<K, u64>> {
        lock_unpoisoned(&self.map)
    }

    /// Visits up to `n` pairs of `entries`; returns how many it visited.
    fn visit_entries<'a>(
        entries: impl Iterator<Item = (&'a K, &'a u64)>,
        n: usize,
        visit: &mut dyn FnMut(Key<'_>, u64),
    ) -> usize {
        let mut scratch = Vec::new();
        let mut count = 0;
        for (key, &value) in entries.take(n) {
            visit(key.key(&mut scratch), value);
            count += 1;
        }
        count
    }
}

impl<K: ArtKey> Default for Blart<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: ArtKey> BenchIndex for Blart<K> {
    fn name(&self) -> &str {
        Peer::Blart.name()
    }

    fn concurrent(&self) -> bool {
        false
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        width_check(self.name(), K::WIDTH, keys)
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.lock().insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let map = self.lock();
        K::with_stored(key, |k| map.get(k).copied())
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let map = self.lock();
        K::with_stored(start, |k| {
            Self::visit_entries(
                map.range::<[u8], _>((Bound::Included(k), Bound::Unbounded)),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let map = self.lock();
        K::with_stored(start, |k| {
            Self::visit_entries(
                map.range::<[u8], _>((Bound::Unbounded, Bound::Included(k)))
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        let mut map = self.lock();
        K::with_stored(key, |k| map.remove(k).is_some())
    }
}

/// A key as [`Blart`] stores it: bytes that are never a prefix of another stored key's
/// (blart's `NoPrefixesBytes`) and whose byte order is the benchmark's key order. Lookups and
/// scan bounds borrow the stored form as `[u8]`.
pub trait ArtKey: AsBytes + NoPrefixesBytes + Borrow<[u8]> + Send + Sync + 'static {
    /// The width of the key sets this type holds.
    const WIDTH: KeyWidth;
    /// The stored key of a benchmark key of [`ArtKey::WIDTH`].
    fn owned(key: Key<'_>) -> Self;
    /// Calls `f` with the stored form of a benchmark key (of any length: a lookup of a key
    /// that the map cannot hold simply misses).
    fn with_stored<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R;
    /// The benchmark key of this stored key, decoded into `scratch` if it must be.
    fn key<'a>(&'a self, scratch: &'a mut Vec<u8>) -> Key<'a>;
}

impl ArtKey for [u8; 8] {
    const WIDTH: KeyWidth = KeyWidth::Fixed8;

    #[inline]
    fn owned(key: Key<'_>) -> Self {
        match key {
            Key::U64(v) => v.to_be_bytes(),
            Key::Bytes(_) => panic!("an 8-byte blart map got a byte-string key"),
        }
    }

    #[inline]
    fn with_stored<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
        key.with_bytes(f)
    }

    #[inline]
    fn key<'a>(&'a self, _scratch: &'a mut Vec<u8>) -> Key<'a> {
        Key::U64(u64::from_be_bytes(*self))
    }
}

impl ArtKey for [u8; 16] {
    const WIDTH: KeyWidth = KeyWidth::Fixed16;

    #[inline]
    fn owned(key: Key<'_>) -> Self {
        match key {
            Key::Bytes(b) => b.try_into().expect("a 16-byte key set has 16-byte keys"),
            Key::U64(_) => panic!("a 16-byte blart map got an integer key"),
        }
    }

    #[inline]
    fn with_stored<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
        key.with_bytes(f)
    }

    #[inline]
    fn key<'a>(&'a self, _scratch: &'a mut Vec<u8>) -> Key<'a> {
        Key::Bytes(self)
    }
}

/// A byte string in a prefix-free, order-preserving encoding: every `0x00` byte of the key is
/// written as `0x00 0xFF`, and the key ends with `0x00 0x00`. The terminator occurs nowhere
/// else, so no encoded key is a prefix of another; and the encoding keeps the keys' order: where
/// two keys first differ, a `0x00` (`0x00 0xFF`) still sorts below any other byte, and where one
/// key ends, its terminator sorts below whatever the longer key goes on with (a byte above
/// `0x00`, or `0x00 0xFF`). A key costs two bytes more, plus one per `0x00` byte in it.
pub struct PrefixFree(Box<[u8]>);

/// The terminator of a [`PrefixFree`] key.
const TERMINATOR: [u8; 2] = [0x00, 0x00];

/// The byte that follows a key's `0x00` byte in a [`PrefixFree`] key.
const ESCAPED_ZERO: u8 = 0xFF;

/// Keys whose encoding fits this many bytes are encoded on the stack for lookups.
const STACK_KEY: usize = 256;

impl PrefixFree {
    /// The encoded length of `key`.
    #[inline]
    fn encoded_len(key: &[u8]) -> usize {
        key.len() + key.iter().filter(|&&b| b == 0).count() + TERMINATOR.len()
    }

    /// Writes the encoding of `key` to the start of `out` (at least
    /// [`PrefixFree::encoded_len`] bytes long); returns its length.
    #[inline]
    fn encode(key: &[u8], out: &mut [u8]) -> usize {
        let mut len = 0;
        for &b in key {
            out[len] = b;
            len += 1;
            if b == 0 {
                out[len] = ESCAPED_ZERO;
                len += 1;
            }
        }
        out[len..len + TERMINATOR.len()].copy_from_slice(&TERMINATOR);
        len + TERMINATOR.len()
    }

    /// Appends the key that `encoded` encodes to `out`.
    #[inline]
    fn decode(encoded: &[u8], out: &mut Vec<u8>) {
        let body = &encoded[..encoded.len() - TERMINATOR.len()];
        let mut bytes = body.iter();
        while let Some(&b) = bytes.next() {
            out.push(b);
            if b == 0 {
                bytes.next();
            }
        }
    }
}

impl AsBytes for PrefixFree {
    fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

// SAFETY: every `PrefixFree` byte string ends with the terminator `0x00 0x00`, which occurs
// nowhere before its end (a `0x00` byte inside is always followed by `0xFF`), so no stored key
// is a proper prefix of another.
unsafe impl NoPrefixesBytes for PrefixFree {}

impl Borrow<[u8]> for PrefixFree {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl ArtKey for PrefixFree {
    const WIDTH: KeyWidth = KeyWidth::Variable;

    #[inline]
    fn owned(key: Key<'_>) -> Self {
        match key {
            Key::Bytes(b) => {
                let mut encoded = vec![0; Self::encoded_len(b)].into_boxed_slice();
                Self::encode(b, &mut encoded);
                PrefixFree(encoded)
            }
            Key::U64(_) => panic!("a byte-string blart map got an integer key"),
        }
    }

    #[inline]
    fn with_stored<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
        key.with_bytes(|b| {
            let len = Self::encoded_len(b);
            if len <= STACK_KEY {
                let mut encoded = [0u8; STACK_KEY];
                Self::encode(b, &mut encoded);
                f(&encoded[..len])
            } else {
                let mut encoded = vec![0; len];
                Self::encode(b, &mut encoded);
                f(&encoded)
            }
        })
    }

    #[inline]
    fn key<'a>(&'a self, scratch: &'a mut Vec<u8>) -> Key<'a> {
        scratch.clear();
        Self::decode(&self.0, scratch);
        Key::Bytes(scratch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(key: &[u8]) -> Vec<u8> {
        PrefixFree::with_stored(Key::Bytes(key), <[u8]>::to_vec)
    }

    #[test]
    fn prefix_free_keys_keep_the_order_and_decode_back() {
        let keys: [&[u8]; 10] = [
            b"",
            b"\x00",
            b"\x00\x00",
            b"\x00\x01",
            b"\x00\xff",
            b"a",
            b"a\x00",
            b"a\x00b",
            b"ab",
            b"a\xff",
        ];
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1], "the test's keys are sorted");
            let (a, b) = (encoded(pair[0]), encoded(pair[1]));
            assert!(a < b, "{:?} < {:?}", pair[0], pair[1]);
            assert!(!b.starts_with(&a), "{a:?} is a prefix of {b:?}");
        }
        for key in keys {
            let stored = PrefixFree::owned(Key::Bytes(key));
            assert_eq!(stored.0.len(), PrefixFree::encoded_len(key));
            assert_eq!(&*stored.0, encoded(key).as_slice());
            let mut scratch = Vec::new();
            assert_eq!(stored.key(&mut scratch), Key::Bytes(key));
        }
        // A key too long for the stack buffer encodes on the heap, the same way.
        let long = vec![0u8; STACK_KEY];
        assert_eq!(encoded(&long).len(), 2 * STACK_KEY + 2);
    }
}
