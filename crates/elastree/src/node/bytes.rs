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

/// The 8 bytes of `key` from `at` on as a big-endian word, zero past the key's end. One
/// unaligned load when the key has 8 bytes there, or when it has 8 bytes at all (the last 8,
/// shifted); a shorter key takes two overlapping loads of 4 or 2 bytes (or one byte).
#[inline]
pub(crate) fn key_word(key: &[u8], at: usize) -> u64 {
    let len = key.len();
    if at + 8 <= len {
        return u64::from_be_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    }
    if at >= len {
        return 0;
    }
    let take = len - at;
    if len >= 8 {
        let last = u64::from_be_bytes(key[len - 8..].try_into().expect("8 bytes"));
        return last << (8 * (8 - take));
    }
    // `take` (1 to 7) bytes from `at`: the first and the last few, which overlap (the same
    // bytes land on the same places), placed from the word's top.
    let rest = &key[at..];
    if take >= 4 {
        let first = u64::from(u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")));
        let last = u64::from(u32::from_be_bytes(
            rest[take - 4..].try_into().expect("4 bytes"),
        ));
        (first << 32) | (last << (8 * (8 - take)))
    } else if take >= 2 {
        let first = u64::from(u16::from_be_bytes(rest[..2].try_into().expect("2 bytes")));
        let last = u64::from(u16::from_be_bytes(
            rest[take - 2..].try_into().expect("2 bytes"),
        ));
        (first << 48) | (last << (8 * (8 - take)))
    } else {
        u64::from(rest[0]) << 56
    }
}

/// The mask of the top `n` (1 to 8) bytes of a word.
#[inline]
pub(crate) fn top_bytes(n: usize) -> u64 {
    !0u64 << (64 - 8 * n)
}

/// Compares `n` bytes of two byte sources given as big-endian word readers (`a(i)`, `b(i)`:
/// the 8 bytes from byte `i` on), then the lengths: byte-string order of the first
/// `a_len`/`b_len` bytes where `n = min(a_len, b_len)`.
pub(crate) fn compare_words(
    a: impl Fn(usize) -> u64,
    a_len: usize,
    b: impl Fn(usize) -> u64,
    b_len: usize,
) -> CmpOrdering {
    compare_words_from(a, a_len, b, b_len, 0)
}

/// [`compare_words`] when the first `from` bytes (a multiple of 8, at most the shorter
/// length) are known to be equal.
#[inline]
pub(crate) fn compare_words_from(
    a: impl Fn(usize) -> u64,
    a_len: usize,
    b: impl Fn(usize) -> u64,
    b_len: usize,
    from: usize,
) -> CmpOrdering {
    let n = a_len.min(b_len);
    let mut i = from;
    while i < n {
        let mask = top_bytes((n - i).min(8));
        let (x, y) = (a(i) & mask, b(i) & mask);
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    a_len.cmp(&b_len)
}

/// How many of the first `n` bytes two word readers share.
#[inline]
pub(crate) fn shared_words(a: impl Fn(usize) -> u64, b: impl Fn(usize) -> u64, n: usize) -> usize {
    let mut i = 0;
    while i < n {
        let diff = (a(i) ^ b(i)) & top_bytes((n - i).min(8));
        if diff != 0 {
            return i + (diff.leading_zeros() / 8) as usize;
        }
        i += 8;
    }
    n
}

/// How much of `a` and `b` is the same from the start.
#[inline]
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    shared_words(|i| key_word(a, i), |i| key_word(b, i), a.len().min(b.len()))
}

impl<'n> WordBytes<'n> {
    /// Zeroes words `range` (clamped to the words held).
    pub(crate) fn zero_words(&self, range: std::ops::Range<usize>) {
        let end = range.end.min(self.words.len());
        for word in &self.words[range.start.min(end)..end] {
            word.store(0, Ordering::Relaxed);
        }
    }

    /// The bytes held in `words` (with its pad word: see [`words_for`]).
    #[inline]
    pub(crate) fn new(words: &'n [AtomicU64]) -> Self {
        debug_assert!(!words.is_empty());
        Self { words }
    }

    /// Starts loading the last `bytes` bytes held (clamped to all of them; the pad word
    /// excluded), where a page's bin hands out its bytes from (see [`super::prefetch`]).
    #[inline(always)]
    pub(crate) fn prefetch_end(&self, bytes: usize) {
        let end = self.words.len() - 1;
        super::prefetch(&self.words[end.saturating_sub(bytes.div_ceil(8))..end]);
    }

    /// Word `w` (clamped to the last).
    #[inline]
    pub(crate) fn word(&self, w: usize) -> u64 {
        self.words[w.min(self.words.len() - 1)].load(Ordering::Relaxed)
    }

    /// The 8 bytes from `offset` on, big-endian (bytes past the end read as the pad word's).
    #[inline]
    pub(crate) fn window(&self, offset: usize) -> u64 {
        let (w, shift) = (offset / 8, (offset % 8) * 8);
        // The two words as one 128-bit integer, shifted: no branch on the alignment.
        let pair = (u128::from(self.word(w)) << 64) | u128::from(self.word(w + 1));
        ((pair << shift) >> 64) as u64
    }

    /// Compares the `len` stored bytes at `offset` with `probe`, as byte strings (a prefix
    /// first).
    #[inline]
    pub(crate) fn compare(&self, offset: usize, len: usize, probe: &[u8]) -> CmpOrdering {
        compare_words(
            |i| self.window(offset + i),
            len,
            |i| key_word(probe, i),
            probe.len(),
        )
    }

    /// [`WordBytes::compare`] when the first 8 bytes of both are known to be equal (and both
    /// have at least 8).
    #[inline]
    pub(crate) fn compare_after_word(
        &self,
        offset: usize,
        len: usize,
        probe: &[u8],
    ) -> CmpOrdering {
        compare_words_from(
            |i| self.window(offset + i),
            len,
            |i| key_word(probe, i),
            probe.len(),
            8,
        )
    }

    /// Appends the `len` stored bytes at `offset` to `out`.
    #[inline]
    pub(crate) fn extend_into(&self, offset: usize, len: usize, out: &mut Vec<u8>) {
        // Whole words into the vector's spare room (a copy of a length known only at run
        // time would be a call), then the length set to the bytes wanted.
        out.reserve(len + 8);
        let base = out.len();
        let dst = out.as_mut_ptr();
        let mut i = 0;
        while i < len {
            let word = self.window(offset + i).to_be_bytes();
            // SAFETY: `reserve(len + 8)` leaves room for 8 bytes from `base + i` (`i < len`).
            unsafe { std::ptr::copy_nonoverlapping(word.as_ptr(), dst.add(base + i), 8) };
            i += 8;
        }
        // SAFETY: bytes `base..base + len` were written above (and the capacity holds them).
        unsafe { out.set_len(base + len) };
    }

    /// Writes the `len` stored bytes at `offset` to `out` as whole words (`len` rounded up to
    /// 8): the scan's copy of a suffix. A window past the stored words (a torn read) reads
    /// the last word instead.
    ///
    /// # Safety
    ///
    /// `out` is valid for writes of `len.next_multiple_of(8)` bytes.
    #[inline]
    pub(crate) unsafe fn copy_words(&self, offset: usize, len: usize, out: *mut u8) {
        let (w, shift) = (offset / 8, (offset % 8) * 8);
        let count = len.div_ceil(8);
        let load = |i: usize| self.words[i].load(Ordering::Relaxed);
        if w + count < self.words.len() {
            // Every word read lies in the slice: no clamping per word.
            let mut high = load(w);
            for k in 0..count {
                let low = load(w + k + 1);
                let pair = (u128::from(high) << 64) | u128::from(low);
                let word = (((pair << shift) >> 64) as u64).to_be_bytes();
                // SAFETY: the caller's guarantee: `8 * k + 8 <= 8 * count`.
                unsafe { std::ptr::copy_nonoverlapping(word.as_ptr(), out.add(8 * k), 8) };
                high = low;
            }
        } else {
            for k in 0..count {
                let word = self.window(offset + 8 * k).to_be_bytes();
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(word.as_ptr(), out.add(8 * k), 8) };
            }
        }
    }

    /// Stores `bytes` as whole words from word `first` on (`bytes.len()` a multiple of 8).
    /// Writer only, as [`WordBytes::write`].
    pub(crate) fn store_words(&self, first: usize, bytes: &[u8]) {
        debug_assert!(bytes.len().is_multiple_of(8));
        for (w, chunk) in bytes.chunks_exact(8).enumerate() {
            let word = u64::from_be_bytes(chunk.try_into().expect("8 bytes"));
            self.words[first + w].store(word, Ordering::Relaxed);
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
            let value = (key_word(bytes, i) & top_bytes(take)) >> (8 * skip);
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

    #[test]
    fn key_words_are_zero_padded_big_endian_windows() {
        // Keys of every length up to 8 take the short-key loads at every offset.
        let keys: [&[u8]; 10] = [
            b"",
            b"a",
            b"ab",
            b"abc",
            b"abcd",
            b"abcde",
            b"abcdef",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefghijklmnopq",
        ];
        for key in keys {
            for at in 0..key.len() + 10 {
                let mut expected = [0u8; 8];
                for (i, slot) in expected.iter_mut().enumerate() {
                    *slot = key.get(at + i).copied().unwrap_or(0);
                }
                assert_eq!(
                    key_word(key, at),
                    u64::from_be_bytes(expected),
                    "{key:?} at {at}"
                );
            }
        }
    }

    #[test]
    fn word_comparisons_agree_with_byte_strings() {
        let keys: [&[u8]; 9] = [
            b"",
            b"a",
            b"a\x00",
            b"abcdefgh",
            b"abcdefgh\x00",
            b"abcdefghi",
            b"abcdefgz",
            b"tenant-0042/users/\x00\x01\xffz",
            b"tenant-0042/users/\x00\x02",
        ];
        for a in keys {
            for b in keys {
                let got = compare_words(|i| key_word(a, i), a.len(), |i| key_word(b, i), b.len());
                assert_eq!(got, a.cmp(b), "{a:?} vs {b:?}");
                let shared = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                assert_eq!(common_prefix(a, b), shared, "{a:?} vs {b:?}");
            }
        }
    }

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
        }
    }
}
