//! Bit packing: arrays of `n` unsigned values of one width `w` (0 to 64 bits), stored
//! little-endian bit by bit from the first byte of the array, `ceil(n * w / 8)` bytes.
//!
//! Value `i` occupies bits `i * w .. (i + 1) * w` of the array. A width of 0 stores nothing
//! and every value reads as 0. Reads need no decode pass: [`get`] loads the (at most 9)
//! bytes that hold value `i` and shifts.

/// The number of bits needed to represent `max` (0 for 0).
#[inline]
pub(crate) fn width(max: u64) -> u32 {
    64 - max.leading_zeros()
}

/// Bytes of a packed array of `n` values of width `w`.
#[inline]
pub(crate) fn packed_len(n: usize, w: u32) -> usize {
    (n * w as usize).div_ceil(8)
}

/// Appends `values`, each of width `w` (every value must fit), as a packed array to `out`.
pub(crate) fn pack(out: &mut Vec<u8>, values: impl IntoIterator<Item = u64>, w: u32) {
    if w == 0 {
        return;
    }
    debug_assert!(w <= 64);
    let mut acc: u128 = 0;
    let mut bits: u32 = 0;
    for v in values {
        debug_assert!(w == 64 || v >> w == 0, "value {v} does not fit {w} bits");
        acc |= (v as u128) << bits;
        bits += w;
        if bits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            bits -= 64;
        }
    }
    let tail = bits.div_ceil(8) as usize;
    out.extend_from_slice(&acc.to_le_bytes()[..tail]);
}

/// Value `i` of the packed array of width `w` that starts at byte `at` of `buf`.
///
/// Bytes of `buf` past the array may be read (and masked off); bytes past `buf` are not.
#[inline]
pub(crate) fn get(buf: &[u8], at: usize, i: usize, w: u32) -> u64 {
    if w == 0 {
        return 0;
    }
    let bit = i * w as usize;
    let byte = at + bit / 8;
    let shift = (bit % 8) as u32;
    let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
    if let Some(window) = buf.get(byte..byte + 16) {
        let raw = u128::from_le_bytes(window.try_into().expect("16 bytes"));
        ((raw >> shift) as u64) & mask
    } else {
        // Near the end of the buffer: gather the bytes that exist.
        let mut raw = [0u8; 16];
        let end = buf.len().min(byte + 16);
        raw[..end - byte].copy_from_slice(&buf[byte..end]);
        ((u128::from_le_bytes(raw) >> shift) as u64) & mask
    }
}

/// Appends `v` as LEB128 (7 bits a byte, low first, high bit = more follow).
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 value at `*at`, advancing it; `None` if truncated or longer than 64 bits.
#[inline]
pub(crate) fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    // Fast path: tid bases below 128 take one byte.
    if let Some(&b) = buf.get(*at) {
        if b < 0x80 {
            *at += 1;
            return Some(u64::from(b));
        }
    }
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*at)?;
        *at += 1;
        if shift > 63 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths() {
        assert_eq!(width(0), 0);
        assert_eq!(width(1), 1);
        assert_eq!(width(255), 8);
        assert_eq!(width(256), 9);
        assert_eq!(width(u64::MAX), 64);
    }

    #[test]
    fn round_trip_every_width() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        for w in 0..=64u32 {
            for n in [0usize, 1, 2, 7, 8, 9, 63, 64, 65, 100] {
                let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
                let values: Vec<u64> = (0..n)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed & mask
                    })
                    .collect();
                // A prefix byte checks that `at` is honoured.
                let mut buf = vec![0xAB];
                pack(&mut buf, values.iter().copied(), w);
                assert_eq!(buf.len(), 1 + packed_len(n, w), "w {w} n {n}");
                for (i, &v) in values.iter().enumerate() {
                    assert_eq!(get(&buf, 1, i, w), v, "w {w} n {n} i {i}");
                }
                // Trailing garbage is masked off.
                buf.extend_from_slice(&[0xFF; 20]);
                for (i, &v) in values.iter().enumerate() {
                    assert_eq!(get(&buf, 1, i, w), v, "w {w} n {n} i {i} (padded)");
                }
            }
        }
    }

    #[test]
    fn extremes() {
        let mut buf = Vec::new();
        pack(&mut buf, [u64::MAX, 0, u64::MAX], 64);
        assert_eq!(get(&buf, 0, 0, 64), u64::MAX);
        assert_eq!(get(&buf, 0, 1, 64), 0);
        assert_eq!(get(&buf, 0, 2, 64), u64::MAX);
        let mut buf = Vec::new();
        pack(&mut buf, [(1 << 63) - 1, 5], 63);
        assert_eq!(get(&buf, 0, 0, 63), (1 << 63) - 1);
        assert_eq!(get(&buf, 0, 1, 63), 5);
    }

    #[test]
    fn varints() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut buf = vec![9];
            put_varint(&mut buf, v);
            let mut at = 1;
            assert_eq!(get_varint(&buf, &mut at), Some(v));
            assert_eq!(at, buf.len());
        }
        let mut at = 0;
        assert_eq!(get_varint(&[0x80], &mut at), None);
    }
}
