//! Byte strings in atomic 64-bit words, compared eight bytes at a time.
//!
//! A node that optimistic readers read while a writer changes it keeps every field in
//! atomics. [`WordBytes`] stores a run of bytes in `AtomicU64` words, big-endian within each
//! word (byte `i` is byte `i % 8` from the top of word `i / 8`), so that the eight bytes at
//! any offset are two aligned loads and a shift, and comparing byte strings costs one integer
//! comparison per eight bytes instead of eight.
//!
//! Invariant: the word slice has one word more than the bytes need (a pad word), so a window
//! that starts in the last word reads a second word that exists. Every read clamps its word
//! index to the slice, so offsets and lengths from a torn read stay in bounds.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes stored big-endian in atomic words.
#[derive(Clone, Copy)]
pub(crate) struct WordBytes<'n> {
    words: &'n [AtomicU64],
}

/// The words that `bytes` bytes take, with the pad word.
pub(crate) const fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8) + 1
}

/// Up to 8 bytes as the top bytes of a big-endian word, zero below (the big-endian,
/// zero-padded word of a short byte string).
#[inline]
pub(crate) fn partial(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(buf)
}

/// The mask of the top `n` (1 to 8) bytes of a word.
#[inline]
fn top_bytes(n: usize) -> u64 {
    !0u64 << (64 - 8 * n)
}

impl<'n> WordBytes<'n> {
    /// The bytes held in `words` (with its pad word: see [`words_for`]).
    #[inline]
    pub(crate) fn new(words: &'n [AtomicU64]) -> Self {
        debug_assert!(!words.is_empty());
        Self { words }
    }

    #[inline]
    fn word(&self, w: usize) -> u64 {
        self.words[w.min(self.words.len() - 1)].load(Ordering::Relaxed)
    }

    /// The 8 bytes from `offset` on, big-endian (bytes past the end read as the pad word's).
    #[inline]
    pub(crate) fn window(&self, offset: usize) -> u64 {
        let (w, shift) = (offset / 8, (offset % 8) * 8);
        let high = self.word(w);
        if shift == 0 {
            high
        } else {
            (high << shift) | (self.word(w + 1) >> (64 - shift))
        }
    }

    /// Compares the `len` stored bytes at `offset` with `probe`, as byte strings (a prefix
    /// first).
    #[inline]
    pub(crate) fn compare(&self, offset: usize, len: usize, probe: &[u8]) -> CmpOrdering {
        let n = len.min(probe.len());
        let mut i = 0;
        while i < n {
            let take = (n - i).min(8);
            let mask = top_bytes(take);
            let stored = self.window(offset + i) & mask;
            let wanted = partial(&probe[i..i + take]);
            if stored != wanted {
                return stored.cmp(&wanted);
            }
            i += take;
        }
        len.cmp(&probe.len())
    }

    /// How many of the `len` stored bytes at `offset` start `key` too.
    #[inline]
    pub(crate) fn shared(&self, offset: usize, len: usize, key: &[u8]) -> usize {
        let n = len.min(key.len());
        let mut i = 0;
        while i < n {
            let take = (n - i).min(8);
            let diff = (self.window(offset + i) ^ partial(&key[i..i + take])) & top_bytes(take);
            if diff != 0 {
                return i + (diff.leading_zeros() / 8) as usize;
            }
            i += take;
        }
        n
    }

    /// Appends the `len` stored bytes at `offset` to `out`.
    #[inline]
    pub(crate) fn extend_into(&self, offset: usize, len: usize, out: &mut Vec<u8>) {
        let mut i = 0;
        while i < len {
            let take = (len - i).min(8);
            out.extend_from_slice(&self.window(offset + i).to_be_bytes()[..take]);
            i += take;
        }
    }

    /// Stores `bytes` at `offset`. Writer only (the node's write lock held, or the node not
    /// yet published); `offset + bytes.len() <= self.len()`.
    pub(crate) fn write(&self, offset: usize, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            let at = offset + i;
            let (w, skip) = (at / 8, at % 8);
            let take = (8 - skip).min(bytes.len() - i);
            // The bytes `skip .. skip + take` of word `w`, from the top.
            let mask = top_bytes(take) >> (8 * skip);
            let value = partial(&bytes[i..i + take]) >> (8 * skip);
            let slot = &self.words[w];
            let old = slot.load(Ordering::Relaxed);
            slot.store((old & !mask) | value, Ordering::Relaxed);
            i += take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(bytes: usize) -> Vec<AtomicU64> {
        (0..words_for(bytes)).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn writes_read_back_at_every_offset_and_length() {
        let words = store(64);
        let bin = WordBytes::new(&words);
        let data: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
        for offset in 0..20 {
            for len in 0..=20 {
                let bytes = &data[offset..offset + len];
                bin.write(offset, bytes);
                let mut out = Vec::new();
                bin.extend_into(offset, len, &mut out);
                assert_eq!(out, bytes, "offset {offset} len {len}");
                assert_eq!(bin.compare(offset, len, bytes), CmpOrdering::Equal);
                assert_eq!(bin.shared(offset, len, bytes), len);
            }
        }
    }

    #[test]
    fn comparisons_agree_with_byte_strings() {
        let words = store(48);
        let bin = WordBytes::new(&words);
        let stored = b"tenant-0042/users/\x00\x01\xffz";
        bin.write(5, stored);
        let probes: [&[u8]; 7] = [
            b"",
            b"tenant",
            b"tenant-0042/users/\x00\x01\xffz",
            b"tenant-0042/users/\x00\x01\xffz\x00",
            b"tenant-0042/users/\x00\x02",
            b"tenant-0041/zzzzzzzzzzzzzzzzzzzzz",
            b"u",
        ];
        for probe in probes {
            assert_eq!(
                bin.compare(5, stored.len(), probe),
                stored[..].cmp(probe),
                "{probe:?}"
            );
            let shared = stored.iter().zip(probe).take_while(|(a, b)| a == b).count();
            assert_eq!(bin.shared(5, stored.len(), probe), shared, "{probe:?}");
        }
    }
}
