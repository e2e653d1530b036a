//! The mid-key encoding (the Bw-tree paper's section III-B), for mid-keys of the paper's 4
//! bytes or of 8.
//!
//! The *remainder* of a key is what follows the page prefix. Its first bytes go into a
//! `w`-byte mid-key (`w` = 4 or 8), compared as a big-endian integer; the rest is the suffix:
//!
//! * a remainder of `n < w` bytes: its bytes, zero-padded to `w - 1`, then `n` in the last
//!   byte; no suffix;
//! * a remainder of `w` bytes or more whose `w`-th byte is above `w - 1`: its first `w`
//!   bytes; the suffix is the rest;
//! * otherwise: its first `w - 1` bytes, then `w - 1`; the suffix is the rest from the `w`-th
//!   byte on.
//!
//! So mid-keys order remainders as their bytes do, a shorter remainder first, and two
//! remainders tie on their mid-keys only if their suffixes (compared as byte strings) decide.
//! (The paper's argument for `w` = 4 holds for any `w`: the last byte's values `0..w` only
//! mark remainders that end, or continue with a small byte, after `w - 1` bytes.)

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::super::bytes::key_word;

/// How wide a page's mid-keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MidWidth {
    /// The paper's 4-byte mid-keys.
    Four,
    /// 8-byte mid-keys: twice the bytes compared before a tie falls to the suffixes.
    #[default]
    Eight,
}

impl MidWidth {
    /// Bytes of a mid-key.
    #[inline]
    pub const fn bytes(self) -> usize {
        match self {
            MidWidth::Four => 4,
            MidWidth::Eight => 8,
        }
    }

    /// The mid-key of a key remainder (zero-extended to 64 bits) and how many of its bytes
    /// the mid-key holds (the suffix is the rest).
    #[inline]
    pub(super) fn encode(self, rest: &[u8]) -> (u64, usize) {
        self.encode_at(rest, 0)
    }

    /// [`Self::encode`] of the remainder `key[at..]` (`at <= key.len()`), its first word read
    /// from the whole key (one load when the key has 8 bytes or more).
    #[inline(always)]
    pub(super) fn encode_at(self, key: &[u8], at: usize) -> (u64, usize) {
        let len = key.len() - at;
        match self {
            MidWidth::Four => encode_word(key_word(key, at) >> 32, len, 4),
            MidWidth::Eight => encode_word(key_word(key, at), len, 8),
        }
    }

    /// How many remainder bytes a mid-key holds.
    #[inline]
    pub(super) fn held(self, mid: u64) -> usize {
        let last = (mid & 0xff) as usize;
        let w = self.bytes();
        if last < w {
            last
        } else {
            w
        }
    }

    /// The bytes a mid-key holds, as big-endian bytes of its width (`held` of them count).
    #[inline]
    pub(super) fn mid_bytes(self, mid: u64) -> [u8; 8] {
        (mid << (64 - 8 * self.bytes())).to_be_bytes()
    }
}

/// The encoding of a remainder of `len` bytes whose first `w` bytes (zero past its end) are
/// the low `8 * w` bits of `head`.
#[inline]
fn encode_word(head: u64, len: usize, w: usize) -> (u64, usize) {
    let last = head & 0xff;
    if len < w {
        // Zero-padded already; the last byte (a pad byte) takes the length.
        (head | len as u64, len)
    } else if last >= w as u64 {
        (head, w)
    } else {
        ((head & !0xff) | (w as u64 - 1), w - 1)
    }
}

/// A mid-key vector's element type, for the search core that is generic over the width.
pub(super) trait MidSlot: Sync {
    /// The width of a mid-key held in this slot type.
    const WIDTH: MidWidth;
    /// The element's value, zero-extended.
    fn value(&self) -> u64;
}

impl MidSlot for AtomicU32 {
    const WIDTH: MidWidth = MidWidth::Four;
    #[inline(always)]
    fn value(&self) -> u64 {
        u64::from(self.load(Ordering::Relaxed))
    }
}

impl MidSlot for AtomicU64 {
    const WIDTH: MidWidth = MidWidth::Eight;
    #[inline(always)]
    fn value(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering as CmpOrdering;

    fn remainder_order(width: MidWidth, a: &[u8], b: &[u8]) -> CmpOrdering {
        let (ma, ha) = width.encode(a);
        let (mb, hb) = width.encode(b);
        ma.cmp(&mb).then_with(|| a[ha..].cmp(&b[hb..]))
    }

    /// Every remainder of up to `len` bytes over an alphabet with the encodings' edge values.
    fn remainders(len: usize, alphabet: &[u8]) -> Vec<Vec<u8>> {
        let mut all: Vec<Vec<u8>> = vec![vec![]];
        let mut frontier = vec![vec![]];
        for _ in 0..len {
            let mut next = Vec::new();
            for prefix in &frontier {
                for &b in alphabet {
                    let mut k: Vec<u8> = prefix.clone();
                    k.push(b);
                    next.push(k);
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    }

    #[test]
    fn mid_keys_order_remainders_as_bytes() {
        for (width, len, alphabet) in [
            (MidWidth::Four, 6, &[0u8, 1, 2, 3, 4, 0x7f, 0xff][..]),
            (MidWidth::Eight, 9, &[0u8, 7, 8, 0xff][..]),
        ] {
            let mut all = remainders(len, alphabet);
            for a in &all {
                let (mid, n) = width.encode(a);
                assert_eq!(width.held(mid), n, "{width:?}: held(encode({a:?}))");
                assert_eq!(&width.mid_bytes(mid)[..n], &a[..n], "{width:?}: {a:?}");
                if width == MidWidth::Four {
                    assert!(mid <= u64::from(u32::MAX));
                }
            }
            // Sorted by (mid-key, suffix), every remainder is in byte order: the encoding
            // orders all of them as their bytes do.
            all.sort_by(|a, b| remainder_order(width, a, b));
            for pair in all.windows(2) {
                assert!(
                    pair[0] < pair[1],
                    "{width:?}: {:?} vs {:?}",
                    pair[0],
                    pair[1]
                );
            }
        }
    }
}
