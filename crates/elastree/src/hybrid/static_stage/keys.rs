//! Key representations of the static stage and the fence arrays built from them.
//!
//! A fence array holds the first key of each child (block of a segment, or segment of the
//! stage) contiguously; child `i`'s position is `i`, computed, never stored (the
//! Structural Reduction rule). Non-unique stages keep the first pair's tid beside each fence
//! key, because a key's pairs may continue from one child into the next.

use std::cmp::Ordering;

use crate::KeyLen;

/// How a stage stores and compares keys; chosen from [`KeyLen`] once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyMode {
    /// Fixed-length keys of 1 to 8 bytes, held as big-endian integers (zero-extended), so
    /// integer order is byte order.
    Int(u32),
    /// Fixed-length keys of more than 8 bytes, held as bytes.
    Fixed(u32),
    /// Variable-length keys, held as bytes.
    Var,
}

impl KeyMode {
    pub(crate) fn new(key_len: KeyLen) -> Self {
        match key_len {
            KeyLen::Fixed(n) if (1..=8).contains(&n) => KeyMode::Int(n as u32),
            // Longer than any key an index accepts (MAX_KEY_LEN_LIMIT) if it saturates.
            KeyLen::Fixed(n) => KeyMode::Fixed(u32::try_from(n).unwrap_or(u32::MAX)),
            KeyLen::Variable => KeyMode::Var,
        }
    }

    /// The fixed key length, if any.
    pub(crate) fn fixed_len(self) -> Option<usize> {
        match self {
            KeyMode::Int(n) | KeyMode::Fixed(n) => Some(n as usize),
            KeyMode::Var => None,
        }
    }

    /// The probe for `key`, which must have the stage's length when it is fixed.
    #[inline]
    pub(crate) fn probe(self, key: &[u8]) -> Probe<'_> {
        match self {
            KeyMode::Int(_) => Probe::Int(to_int(key)),
            _ => Probe::Bytes(key),
        }
    }
}

/// `key` (at most 8 bytes) as a big-endian integer.
#[inline]
pub(crate) fn to_int(key: &[u8]) -> u64 {
    debug_assert!(key.len() <= 8);
    let mut raw = [0u8; 8];
    raw[8 - key.len()..].copy_from_slice(key);
    u64::from_be_bytes(raw)
}

/// Appends the `len` low bytes of `v`, big-endian.
#[inline]
pub(crate) fn put_int(v: u64, len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&v.to_be_bytes()[8 - len..]);
}

/// `a.cmp(b)`, deciding from the first 8 bytes as integers when they differ (most
/// comparisons of a search do), which skips the call into the C library's `memcmp`.
#[inline(always)]
pub(crate) fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
    }
    a.cmp(b)
}

/// A search key in the stage's representation.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Probe<'k> {
    Int(u64),
    Bytes(&'k [u8]),
}

/// What a search looks for: the first pair that is not *before* the target.
///
/// With `after_key`, a pair is before the target when its key is `<= key` (the search finds
/// the first pair of the next key); otherwise when `(pair key, pair tid) < (key, tid)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'k> {
    pub(crate) key: Probe<'k>,
    pub(crate) tid: u64,
    pub(crate) after_key: bool,
}

/// One key of a fence array.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FenceKey<'f> {
    Int(u64),
    Bytes(&'f [u8]),
}

impl FenceKey<'_> {
    /// Appends the key's bytes.
    pub(crate) fn write(self, mode: KeyMode, out: &mut Vec<u8>) {
        match self {
            FenceKey::Int(v) => put_int(v, mode.fixed_len().unwrap_or(8), out),
            FenceKey::Bytes(b) => out.extend_from_slice(b),
        }
    }

    /// This key compared to `probe` (of the same representation).
    #[inline]
    pub(crate) fn cmp_probe(self, probe: Probe<'_>) -> Ordering {
        match (self, probe) {
            (FenceKey::Int(a), Probe::Int(b)) => a.cmp(&b),
            (FenceKey::Bytes(a), Probe::Bytes(b)) => cmp_bytes(a, b),
            _ => unreachable!("fence and probe of different representations"),
        }
    }
}

/// A fence array: `len()` keys, ascending (non-strictly for non-unique stages).
///
/// Layouts: `Int` one `u64` per key; `Fixed` keys of `len` bytes back to back; `Var` key
/// bytes back to back with `ends[i]` the end of key `i` (key `i` starts at `ends[i - 1]`, or
/// 0). Every buffer is allocated at its exact size.
#[derive(Debug)]
pub(crate) enum Fences {
    Int(Box<[u64]>),
    Fixed { len: usize, bytes: Box<[u8]> },
    Var { ends: Box<[u32]>, bytes: Box<[u8]> },
}

impl Fences {
    /// Number of keys.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Fences::Int(v) => v.len(),
            Fences::Fixed { len, bytes } => bytes.len() / len,
            Fences::Var { ends, .. } => ends.len(),
        }
    }

    /// Key `i`.
    #[inline(always)]
    pub(crate) fn key(&self, i: usize) -> FenceKey<'_> {
        match self {
            Fences::Int(v) => FenceKey::Int(v[i]),
            Fences::Fixed { len, bytes } => FenceKey::Bytes(&bytes[i * len..(i + 1) * len]),
            Fences::Var { ends, bytes } => {
                let start = if i == 0 { 0 } else { ends[i - 1] as usize };
                FenceKey::Bytes(&bytes[start..ends[i] as usize])
            }
        }
    }

    /// The number of leading fences before the probe: fences less than it, and fences equal
    /// to it when `equal_tids` is `None` (a unique stage, or a search for the next key) or,
    /// given `Some((tids, tid))`, when `tids[i] < tid`. Binary search.
    #[inline]
    pub(crate) fn count_before(
        &self,
        probe: Probe<'_>,
        equal_tids: Option<(&[u64], u64)>,
    ) -> usize {
        match (self, probe, equal_tids) {
            (Fences::Int(v), Probe::Int(p), None) => {
                let (mut lo, mut hi) = (0usize, v.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if v[mid] <= p {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
            _ => {
                let (mut lo, mut hi) = (0usize, self.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    let before = match self.key(mid).cmp_probe(probe) {
                        Ordering::Less => true,
                        Ordering::Greater => false,
                        Ordering::Equal => equal_tids.is_none_or(|(tids, tid)| tids[mid] < tid),
                    };
                    if before {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Fences::Int(v) => std::mem::size_of_val(&**v),
            Fences::Fixed { bytes, .. } => bytes.len(),
            Fences::Var { ends, bytes } => std::mem::size_of_val(&**ends) + bytes.len(),
        }
    }
}

/// Collects fence keys and freezes them into a [`Fences`] of exact size.
#[derive(Debug)]
pub(crate) struct FenceBuilder {
    mode: KeyMode,
    ints: Vec<u64>,
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl FenceBuilder {
    pub(crate) fn new(mode: KeyMode) -> Self {
        Self {
            mode,
            ints: Vec::new(),
            bytes: Vec::new(),
            ends: Vec::new(),
        }
    }

    /// Appends `key` (of the stage's length when fixed).
    pub(crate) fn push(&mut self, key: &[u8]) {
        match self.mode {
            KeyMode::Int(_) => self.ints.push(to_int(key)),
            KeyMode::Fixed(_) => self.bytes.extend_from_slice(key),
            KeyMode::Var => {
                self.bytes.extend_from_slice(key);
                self.ends.push(self.bytes.len() as u32);
            }
        }
    }

    /// Appends a fence key taken from another array.
    pub(crate) fn push_fence(&mut self, key: FenceKey<'_>) {
        match key {
            FenceKey::Int(v) => self.ints.push(v),
            FenceKey::Bytes(b) => self.push(b),
        }
    }

    /// The frozen array; the builder is left empty for reuse.
    pub(crate) fn finish(&mut self) -> Fences {
        match self.mode {
            KeyMode::Int(_) => Fences::Int(std::mem::take(&mut self.ints).into_boxed_slice()),
            KeyMode::Fixed(len) => Fences::Fixed {
                len: len as usize,
                bytes: std::mem::take(&mut self.bytes).into_boxed_slice(),
            },
            KeyMode::Var => Fences::Var {
                ends: std::mem::take(&mut self.ends).into_boxed_slice(),
                bytes: std::mem::take(&mut self.bytes).into_boxed_slice(),
            },
        }
    }
}
