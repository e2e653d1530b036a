//! Leaf blocks: up to `block_entries` pairs, encoded compactly, searched in place.
//!
//! # Encoding (all multi-byte integers little-endian)
//!
//! ```text
//! u8      npairs                      1..=255
//! u8      nkeys                       non-unique only (unique: nkeys = npairs)
//! keys header:
//!   Int mode:   u8 key_w              width of (last key - first key)
//!   Bytes mode: u16 prefix_len        bytes every key of the block shares
//!               u8 off_w              Var only: 2 or 4, width of a suffix end offset
//! u8      tid_w                       width of (max tid - min tid)
//! varint  tid_base                    min tid of the block (LEB128)
//! keys:
//!   Int mode:   nkeys deltas (key - first key), bit-packed at key_w
//!   Fixed mode: nkeys suffixes of (len - prefix_len) bytes
//!   Var mode:   nkeys suffix end offsets (off_w bytes each, relative to the suffix area),
//!               then the suffixes back to back
//! starts:     non-unique only: nkeys first-pair indexes, bit-packed at width(npairs)
//! tids:       npairs (tid - tid_base), bit-packed at tid_w
//! ```
//!
//! The block's first key is not stored: it is the block's fence key in the segment, which
//! is the base of the Int deltas and whose first `prefix_len` bytes are the Bytes prefix.
//!
//! # Invariants
//!
//! Keys are strictly ascending; pairs are in (key, tid) order; in a non-unique block key
//! `j` owns pairs `start(j) .. start(j + 1)` (`start(0) = 0`, `start(nkeys) = npairs`) and
//! its tids ascend. A key of a non-unique stage may continue from one block into the next
//! (the next block's fence is then that key with its next tid).

use std::cmp::Ordering;

use super::bits;
use super::keys::{cmp_bytes, put_int, to_int, FenceKey, KeyMode, Probe, Target};

/// Pairs in (key, tid) order with each distinct key held once: the input of block encoding
/// and the output of block decoding.
#[derive(Debug, Default)]
pub(crate) struct Pairs {
    /// Distinct keys back to back.
    pub(crate) key_bytes: Vec<u8>,
    /// End of key `j` in `key_bytes`.
    pub(crate) key_ends: Vec<u32>,
    /// First pair of key `j`.
    pub(crate) key_starts: Vec<u32>,
    /// Tid of each pair.
    pub(crate) tids: Vec<u64>,
}

impl Pairs {
    pub(crate) fn clear(&mut self) {
        self.key_bytes.clear();
        self.key_ends.clear();
        self.key_starts.clear();
        self.tids.clear();
    }

    pub(crate) fn npairs(&self) -> usize {
        self.tids.len()
    }

    pub(crate) fn nkeys(&self) -> usize {
        self.key_ends.len()
    }

    #[inline]
    pub(crate) fn key(&self, j: usize) -> &[u8] {
        let start = if j == 0 {
            0
        } else {
            self.key_ends[j - 1] as usize
        };
        &self.key_bytes[start..self.key_ends[j] as usize]
    }

    /// The last key, if any.
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        self.nkeys().checked_sub(1).map(|j| self.key(j))
    }

    /// One past the last pair of key `j`.
    #[inline]
    pub(crate) fn key_end_pair(&self, j: usize) -> usize {
        self.key_starts
            .get(j + 1)
            .map_or(self.tids.len(), |&s| s as usize)
    }

    /// Appends a pair; `same_key` says its key equals the last key (then `key` is ignored).
    #[inline]
    pub(crate) fn push(&mut self, key: &[u8], tid: u64, same_key: bool) {
        if !same_key {
            self.key_bytes.extend_from_slice(key);
            self.key_ends.push(self.key_bytes.len() as u32);
            self.key_starts.push(self.tids.len() as u32);
        }
        self.tids.push(tid);
    }
}

/// Appends the encoding of pairs `pa..pb` of `pairs` to `out`; `ka` is the key that holds
/// pair `pa`. Returns the key index one past the block's last key.
pub(crate) fn encode(
    pairs: &Pairs,
    mode: KeyMode,
    unique: bool,
    ka: usize,
    pa: usize,
    pb: usize,
    out: &mut Vec<u8>,
) -> usize {
    let n = pb - pa;
    debug_assert!((1..=255).contains(&n));
    let mut kb = ka + 1;
    while kb < pairs.nkeys() && (pairs.key_starts[kb] as usize) < pb {
        kb += 1;
    }
    let m = kb - ka;
    out.push(n as u8);
    if !unique {
        out.push(m as u8);
    }
    let first = pairs.key(ka);
    let last = pairs.key(kb - 1);
    let prefix = match mode {
        KeyMode::Int(_) => {
            let base = to_int(first);
            let w = bits::width(to_int(last) - base);
            out.push(w as u8);
            0
        }
        KeyMode::Fixed(_) | KeyMode::Var => {
            let p = first.iter().zip(last).take_while(|(a, b)| a == b).count();
            out.extend_from_slice(&(p as u16).to_le_bytes());
            p
        }
    };
    let suffix_total: usize = match mode {
        KeyMode::Var => (ka..kb).map(|j| pairs.key(j).len() - prefix).sum(),
        _ => 0,
    };
    let off_w = if suffix_total <= u16::MAX as usize {
        2
    } else {
        4
    };
    if mode == KeyMode::Var {
        out.push(off_w as u8);
    }
    let tids = &pairs.tids[pa..pb];
    let (min, max) = tids
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    let tid_w = bits::width(max - min);
    out.push(tid_w as u8);
    bits::put_varint(out, min);
    match mode {
        KeyMode::Int(_) => {
            let base = to_int(first);
            let w = bits::width(to_int(last) - base);
            bits::pack(out, (ka..kb).map(|j| to_int(pairs.key(j)) - base), w);
        }
        KeyMode::Fixed(_) => {
            for j in ka..kb {
                out.extend_from_slice(&pairs.key(j)[prefix..]);
            }
        }
        KeyMode::Var => {
            let mut end = 0usize;
            for j in ka..kb {
                end += pairs.key(j).len() - prefix;
                out.extend_from_slice(&(end as u32).to_le_bytes()[..off_w]);
            }
            for j in ka..kb {
                out.extend_from_slice(&pairs.key(j)[prefix..]);
            }
        }
    }
    if !unique {
        let w = bits::width(n as u64);
        bits::pack(
            out,
            (ka..kb).map(|j| (pairs.key_starts[j] as usize).max(pa) as u64 - pa as u64),
            w,
        );
    }
    bits::pack(out, tids.iter().map(|&t| t - min), tid_w);
    kb
}

/// A parsed block header: where each section of an encoded block lies. Holds no borrow; the
/// methods take the block's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    tid_base: u64,
    keys_at: u32,
    suffix_at: u32,
    starts_at: u32,
    tids_at: u32,
    end: u32,
    npairs: u16,
    nkeys: u16,
    mode: KeyMode,
    prefix: u16,
    unique: bool,
    key_w: u8,
    off_w: u8,
    tid_w: u8,
    starts_w: u8,
}

// Loaded blocks are moved around on every lookup: keep the header small.
const _: () = assert!(std::mem::size_of::<Block>() <= 48);

impl Block {
    /// Parses the header of the block encoded at the start of `buf`; `None` if the encoding
    /// is malformed or does not fit `buf` (`fence_len` is the length of the block's fence key
    /// in Bytes mode).
    #[inline]
    pub(crate) fn parse(
        buf: &[u8],
        mode: KeyMode,
        unique: bool,
        fence_len: usize,
    ) -> Option<Block> {
        let mut at = 0;
        let mut byte = || {
            let b = *buf.get(at)?;
            at += 1;
            Some(b)
        };
        let npairs = byte()? as usize;
        // (A closure per byte reads simply; the optimizer turns it into plain loads.)
        let nkeys = if unique { npairs } else { byte()? as usize };
        if npairs == 0 || nkeys == 0 || nkeys > npairs {
            return None;
        }
        let (mut key_w, mut prefix, mut off_w) = (0, 0, 0);
        match mode {
            KeyMode::Int(_) => {
                key_w = u32::from(byte()?);
                if key_w > 64 {
                    return None;
                }
            }
            KeyMode::Fixed(_) | KeyMode::Var => {
                prefix = u16::from_le_bytes([byte()?, byte()?]) as usize;
                if prefix > fence_len {
                    return None;
                }
                if mode == KeyMode::Var {
                    off_w = byte()? as usize;
                    if off_w != 2 && off_w != 4 {
                        return None;
                    }
                }
            }
        }
        let tid_w = u32::from(byte()?);
        if tid_w > 64 {
            return None;
        }
        let tid_base = bits::get_varint(buf, &mut at)?;
        let keys_at = at;
        let (suffix_at, keys_end) = match mode {
            KeyMode::Int(_) => (keys_at, keys_at + bits::packed_len(nkeys, key_w)),
            KeyMode::Fixed(len) => {
                let slen = (len as usize).checked_sub(prefix)?;
                (keys_at, keys_at + nkeys * slen)
            }
            KeyMode::Var => {
                let suffix_at = keys_at + nkeys * off_w;
                let total = read_off(buf.get(keys_at..suffix_at)?, nkeys - 1, off_w);
                (suffix_at, suffix_at + total)
            }
        };
        let starts_w = if unique {
            0
        } else {
            bits::width(npairs as u64)
        };
        let starts_at = keys_end;
        let tids_at = starts_at + bits::packed_len(if unique { 0 } else { nkeys }, starts_w);
        let end = tids_at + bits::packed_len(npairs, tid_w);
        if end > buf.len() || end > u32::MAX as usize {
            return None;
        }
        Some(Block {
            npairs: npairs as u16,
            nkeys: nkeys as u16,
            unique,
            mode,
            key_w: key_w as u8,
            prefix: prefix as u16,
            off_w: off_w as u8,
            tid_w: tid_w as u8,
            tid_base,
            keys_at: keys_at as u32,
            suffix_at: suffix_at as u32,
            starts_w: starts_w as u8,
            starts_at: starts_at as u32,
            tids_at: tids_at as u32,
            end: end as u32,
        })
    }

    /// Pairs in the block.
    #[inline]
    pub(crate) fn npairs(&self) -> usize {
        usize::from(self.npairs)
    }

    /// One past the last byte of the encoding.
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.end as usize
    }

    /// The first pair of key `j` (`npairs` for `j == nkeys`).
    #[inline]
    pub(crate) fn start(&self, buf: &[u8], j: usize) -> usize {
        if self.unique {
            j
        } else if j >= usize::from(self.nkeys) {
            usize::from(self.npairs)
        } else {
            bits::get(buf, self.starts_at as usize, j, u32::from(self.starts_w)) as usize
        }
    }

    /// The tid of pair `p`.
    #[inline]
    pub(crate) fn tid(&self, buf: &[u8], p: usize) -> u64 {
        self.tid_base.wrapping_add(bits::get(
            buf,
            self.tids_at as usize,
            p,
            u32::from(self.tid_w),
        ))
    }

    /// The key holding pair `p`.
    #[inline]
    pub(crate) fn key_of_pair(&self, buf: &[u8], p: usize) -> usize {
        if self.unique {
            return p;
        }
        // Last j with start(j) <= p.
        let (mut lo, mut hi) = (0, usize::from(self.nkeys));
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.start(buf, mid) <= p {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    #[inline(always)]
    fn suffix<'b>(&self, buf: &'b [u8], j: usize) -> &'b [u8] {
        match self.mode {
            KeyMode::Fixed(len) => {
                let slen = len as usize - usize::from(self.prefix);
                &buf[(self.keys_at as usize) + j * slen..(self.keys_at as usize) + (j + 1) * slen]
            }
            KeyMode::Var => {
                let offs = &buf[(self.keys_at as usize)..(self.suffix_at as usize)];
                let start = if j == 0 {
                    0
                } else {
                    read_off(offs, j - 1, usize::from(self.off_w))
                };
                let end = read_off(offs, j, usize::from(self.off_w));
                &buf[(self.suffix_at as usize) + start..(self.suffix_at as usize) + end]
            }
            KeyMode::Int(_) => &[],
        }
    }

    /// Appends key `j` (the block's fence is `fence`).
    #[inline]
    pub(crate) fn write_key(&self, buf: &[u8], fence: FenceKey<'_>, j: usize, out: &mut Vec<u8>) {
        match (self.mode, fence) {
            (KeyMode::Int(len), FenceKey::Int(base)) => put_int(
                base.wrapping_add(bits::get(
                    buf,
                    self.keys_at as usize,
                    j,
                    u32::from(self.key_w),
                )),
                len as usize,
                out,
            ),
            (_, FenceKey::Bytes(f)) => {
                out.extend_from_slice(&f[..usize::from(self.prefix)]);
                out.extend_from_slice(self.suffix(buf, j));
            }
            _ => unreachable!("fence of another representation"),
        }
    }

    /// The first pair of the block that is not before `target`, or `npairs`, and whether
    /// that pair's key equals the target key. `fence` is the block's fence key.
    #[inline]
    pub(crate) fn seek(
        &self,
        buf: &[u8],
        fence: FenceKey<'_>,
        target: &Target<'_>,
    ) -> (usize, bool) {
        match (fence, target.key) {
            (FenceKey::Int(base), Probe::Int(q)) => {
                if q < base {
                    return (0, false);
                }
                let d = q - base;
                self.seek_keys(buf, target, |j| {
                    bits::get(buf, self.keys_at as usize, j, u32::from(self.key_w)).cmp(&d)
                })
            }
            (FenceKey::Bytes(f), Probe::Bytes(q)) => {
                let pre = &f[..usize::from(self.prefix)];
                let ord = if q.len() >= pre.len() {
                    pre.cmp(&q[..pre.len()])
                } else {
                    // Equal here means q is a proper prefix of every key: keys are greater.
                    pre[..q.len()].cmp(q).then(Ordering::Greater)
                };
                match ord {
                    Ordering::Greater => (0, false),
                    Ordering::Less => (usize::from(self.npairs), false),
                    Ordering::Equal => {
                        let rest = &q[pre.len()..];
                        self.seek_keys(buf, target, |j| cmp_bytes(self.suffix(buf, j), rest))
                    }
                }
            }
            _ => unreachable!("fence and probe of different representations"),
        }
    }

    /// `seek` given `cmp(j)` = key `j` compared to the target key.
    #[inline]
    fn seek_keys(
        &self,
        buf: &[u8],
        target: &Target<'_>,
        cmp: impl Fn(usize) -> Ordering,
    ) -> (usize, bool) {
        let (mut lo, mut hi) = (0, usize::from(self.nkeys));
        while lo < hi {
            let mid = (lo + hi) / 2;
            let ord = cmp(mid);
            if ord == Ordering::Less || (ord == Ordering::Equal && target.after_key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let j = lo;
        if target.after_key || j == usize::from(self.nkeys) || cmp(j) != Ordering::Equal {
            return (self.start(buf, j), false);
        }
        // Key j is the target key: the first of its tids >= target.tid.
        let (mut lo, mut hi) = (self.start(buf, j), self.start(buf, j + 1));
        let end = hi;
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.tid(buf, mid) < target.tid {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo, lo < end)
    }

    /// Appends every pair of the block to `out` (keys via `fence`); `continues` says the
    /// first key equals `out`'s last key.
    pub(crate) fn decode_into(
        &self,
        buf: &[u8],
        fence: FenceKey<'_>,
        continues: bool,
        out: &mut Pairs,
    ) {
        let mut key = Vec::new();
        for j in 0..usize::from(self.nkeys) {
            key.clear();
            self.write_key(buf, fence, j, &mut key);
            let (s, e) = (self.start(buf, j), self.start(buf, j + 1));
            for p in s..e {
                out.push(&key, self.tid(buf, p), p > s || (j == 0 && continues));
            }
        }
    }
}

#[inline(always)]
fn read_off(offs: &[u8], j: usize, w: usize) -> usize {
    if w == 2 {
        u16::from_le_bytes([offs[2 * j], offs[2 * j + 1]]) as usize
    } else {
        u32::from_le_bytes(offs[4 * j..4 * j + 4].try_into().expect("4 bytes")) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&[u8], u64)]) -> Pairs {
        let mut p = Pairs::default();
        let mut last: Option<&[u8]> = None;
        for &(k, t) in list {
            p.push(k, t, last == Some(k));
            last = Some(k);
        }
        p
    }

    fn round_trip(mode: KeyMode, unique: bool, list: &[(&[u8], u64)]) {
        let input = pairs(list);
        let mut buf = Vec::new();
        let kb = encode(&input, mode, unique, 0, 0, list.len(), &mut buf);
        assert_eq!(kb, input.nkeys());
        let first = input.key(0).to_vec();
        let fence = match mode {
            KeyMode::Int(_) => FenceKey::Int(to_int(&first)),
            _ => FenceKey::Bytes(&first),
        };
        let block = Block::parse(&buf, mode, unique, first.len()).expect("parses");
        assert_eq!(block.end(), buf.len());
        let mut out = Pairs::default();
        block.decode_into(&buf, fence, false, &mut out);
        assert_eq!(out.tids, input.tids);
        assert_eq!(out.key_bytes, input.key_bytes);
        for (i, &(k, t)) in list.iter().enumerate() {
            let target = Target {
                key: mode.probe(k),
                tid: if unique { 0 } else { t },
                after_key: false,
            };
            assert_eq!(block.seek(&buf, fence, &target), (i, true));
        }
    }

    #[test]
    fn int_blocks() {
        let keys: Vec<[u8; 8]> = [3u64, 9, 1 << 40, u64::MAX]
            .iter()
            .map(|k| k.to_be_bytes())
            .collect();
        let list: Vec<(&[u8], u64)> = keys.iter().map(|k| (&k[..], 7)).collect();
        round_trip(KeyMode::Int(8), true, &list);
        let list: Vec<(&[u8], u64)> = vec![
            (&keys[0], 1),
            (&keys[0], 5),
            (&keys[1], 0),
            (&keys[2], u64::MAX),
        ];
        round_trip(KeyMode::Int(8), false, &list);
    }

    #[test]
    fn bytes_blocks() {
        let list: Vec<(&[u8], u64)> = vec![(b"abc", 1), (b"abcd", 2), (b"abd", 0), (b"abz", 9)];
        round_trip(KeyMode::Var, true, &list);
        let list: Vec<(&[u8], u64)> = vec![(b"", 1), (b"", 2), (b"x", 0)];
        round_trip(KeyMode::Var, false, &list);
        let list: Vec<(&[u8], u64)> = vec![(b"aaaa", 1), (b"aaab", 2), (b"bbbb", 3)];
        round_trip(KeyMode::Fixed(4), true, &list);
    }
}
