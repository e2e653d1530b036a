//! Reading a page: a key against the page prefix, the binary search over the mid-key vector
//! (the Bw-tree paper's Figure 7), and entries' keys and fences.

use std::cmp::Ordering as CmpOrdering;

use super::super::bytes::{key_word, top_bytes};
use super::super::slotted::{VarKey, VarProbe};
use super::super::NodeHeader;
use super::super::{prefetch, SearchResult};
use super::encode::{MidSlot, MidWidth};
use super::layout::{Form, Meta, Mids, Page};

/// A probe's key after the page prefix: its encoded mid-key, its suffix and its tid.
#[derive(Clone, Copy)]
struct Remainder<'a> {
    mid: u64,
    suffix: &'a [u8],
    /// The suffix's first 8 bytes as a big-endian word (zero past its end).
    head: u64,
    tid: Option<u64>,
}

/// Below this many candidates, a search prefetches the values and suffix locations it may
/// read at its end: the 8 values of one cache line (and their suffix locations, 16 to a line).
const PREFETCH_SPAN: usize = 8;

/// The most bin bytes a leaf search starts loading with its mid-keys (see
/// [`Page::search_inline`]): 24 cache lines, the 12-byte suffixes of 128 20-byte keys under
/// 8-byte mid-keys.
const BIN_PREFETCH_BYTES: usize = 24 * 64;

impl Page<'_> {
    /// How `key` compares with the page's keys through the prefix: `Equal` if it starts with
    /// the prefix, `Less` if it sorts before every key that does, `Greater` if after. A
    /// prefix of at most 8 bytes (inner pages' and random keys' leaves' usually) is one
    /// masked comparison of the header's first prefix word with the key's first word.
    #[inline(always)]
    pub fn against_prefix(&self, meta: Meta, key: &[u8]) -> CmpOrdering {
        let len = meta.prefix_len;
        if len == 0 {
            return CmpOrdering::Equal;
        }
        if len <= 8 && key.len() >= len {
            let mask = top_bytes(len);
            return (key_word(key, 0) & mask).cmp(&(self.inline_word(0) & mask));
        }
        Self::against_long_prefix(self.node, self.form, meta, key)
    }

    /// [`Self::against_prefix`] word by word, of page `node` (of `form`): out of line, from
    /// the page's address (a view passed by reference would be spelled out in memory on
    /// every search).
    #[inline(never)]
    fn against_long_prefix(node: &NodeHeader, form: Form, meta: Meta, key: &[u8]) -> CmpOrdering {
        let page = Page::of(node, form);
        let n = meta.prefix_len.min(key.len());
        let mut i = 0;
        while i < n {
            let mask = top_bytes((n - i).min(8));
            let stored = page.prefix_word(meta, i) & mask;
            let wanted = key_word(key, i) & mask;
            if stored != wanted {
                // Every key on the page starts with the prefix: it orders them all.
                return wanted.cmp(&stored);
            }
            i += 8;
        }
        if key.len() < meta.prefix_len {
            // A proper prefix of the page prefix sorts first.
            CmpOrdering::Less
        } else {
            CmpOrdering::Equal
        }
    }

    /// How many bytes of the prefix `key` starts with: all of them when
    /// [`Self::against_prefix`] finds `key` under it (one masked comparison for a short
    /// prefix), else counted word by word out of line.
    #[inline(always)]
    pub fn shared_prefix(&self, meta: Meta, key: &[u8]) -> usize {
        match self.against_prefix(meta, key) {
            CmpOrdering::Equal => meta.prefix_len,
            _ => Self::shared_prefix_words(self.node, self.form, meta, key),
        }
    }

    /// [`Self::shared_prefix`] word by word, of page `node` (of `form`), from the page's
    /// address as [`Self::against_long_prefix`].
    #[inline(never)]
    fn shared_prefix_words(node: &NodeHeader, form: Form, meta: Meta, key: &[u8]) -> usize {
        let page = Page::of(node, form);
        let n = meta.prefix_len.min(key.len());
        let mut i = 0;
        while i < n {
            let diff = (page.prefix_word(meta, i) ^ key_word(key, i)) & top_bytes((n - i).min(8));
            if diff != 0 {
                return i + (diff.leading_zeros() / 8) as usize;
            }
            i += 8;
        }
        n
    }

    /// Compares entry `i` with a probe whose mid-key equals the entry's: by suffix, then
    /// (non-unique trees) by tid. The suffixes' first words decide most ties: they are
    /// compared as integers first (the probe's read once per search), and the bytes after
    /// them only when they are equal. A probe without a suffix (its mid-key holds all of its
    /// remainder: an 8-byte key under a page prefix) reads only the entry's suffix length,
    /// and not even that on a page whose entries have no suffixes (its `SUFFIX_FREE` flag,
    /// read with the shape): a fixed-length key's search then never touches the suffix
    /// locations, one cache miss fewer per page.
    #[inline(always)]
    fn compare_tail(&self, i: usize, probe: &Remainder<'_>) -> CmpOrdering {
        let (offset, len) = if self.suffix_free {
            (0, 0)
        } else {
            self.suffix_at(i)
        };
        let n = len.min(probe.suffix.len());
        let by_suffix = if probe.suffix.is_empty() || len == 0 {
            // Nothing to compare, and the bin is not read (its line is often not loaded
            // yet): the longer suffix is the greater.
            len.cmp(&probe.suffix.len())
        } else if n >= 8 {
            let (stored, head) = (self.bin.window(offset), probe.head);
            if stored != head {
                stored.cmp(&head)
            } else {
                self.bin.compare_after_word(offset, len, probe.suffix)
            }
        } else {
            let (stored, head) = (self.bin.window(offset), probe.head);
            // The top `n` bytes (none when `n` is 0), then the lengths.
            let mask = !(u64::MAX >> (8 * n));
            (stored & mask)
                .cmp(&(head & mask))
                .then(len.cmp(&probe.suffix.len()))
        };
        match by_suffix {
            CmpOrdering::Equal => {}
            other => return other,
        }
        match probe.tid {
            Some(tid) if self.with_tid() => self.tid(i).cmp(&tid),
            _ => CmpOrdering::Equal,
        }
    }

    /// Searches for `probe`; tolerant of torn contents.
    #[inline]
    pub fn search(&self, probe: VarProbe<'_>) -> SearchResult {
        self.search_inline(probe)
    }

    /// [`Self::search`], inlined into its caller: for a hot path that locates the page
    /// itself, so that the view's fields the search does not read are never computed.
    #[inline(always)]
    pub fn search_inline(&self, probe: VarProbe<'_>) -> SearchResult {
        self.search_loading(probe, true, false)
    }

    /// [`Self::search_inline`], which starts loading the mid-keys first only if
    /// `load_mids`: a caller that has already asked for them (the Bw-tree, whose mapping
    /// table link says how many lines the header and mid-keys take) passes `false`. With
    /// `load_hints`, the last candidates' child hints start loading with their values (see
    /// [`Page::hint`]; for a caller that reads the hint next).
    #[inline(always)]
    pub fn search_loading(
        &self,
        probe: VarProbe<'_>,
        load_mids: bool,
        load_hints: bool,
    ) -> SearchResult {
        let count = self.count();
        // Start loading the mid-keys the binary search will touch, in parallel.
        if load_mids {
            match self.mids {
                Mids::Four(m) => prefetch(&m[..count]),
                Mids::Eight(m) => prefetch(&m[..count]),
            }
        }
        let meta = self.meta();
        if !self.suffix_free && self.node.is_leaf() {
            // In a leaf, a mid-key tie is the rule for a hit, and it reads the entry's suffix
            // location, then the suffix in the bin: two more misses, each waiting for the
            // one before, after the mid-keys'. Both start loading with the mid-keys instead:
            // the whole suffix-location vector and the bin's handed-out end (where the
            // suffixes are), up to `BIN_PREFETCH_BYTES`. Inner pages are left alone: their
            // ties are rare and they stay in cache. (Loading the values too gained nothing
            // measurable: they are prefetched once the search is down to one line of them.)
            prefetch(&self.locs[..count]);
            self.bin.prefetch_end(meta.top.min(BIN_PREFETCH_BYTES));
        }
        let key = probe.bytes();
        match self.against_prefix(meta, key) {
            CmpOrdering::Less => {
                return SearchResult {
                    pos: 0,
                    found: false,
                }
            }
            CmpOrdering::Greater => {
                return SearchResult {
                    pos: count,
                    found: false,
                }
            }
            CmpOrdering::Equal if count == 0 => {
                return SearchResult {
                    pos: 0,
                    found: false,
                }
            }
            CmpOrdering::Equal => {}
        }
        // The remainder's words are read in place: a key of 8 bytes or more gives them with
        // one load each.
        let at = meta.prefix_len.min(key.len());
        let (mid, in_mid) = self.form.mid.encode_at(key, at);
        let probe = Remainder {
            mid,
            suffix: &key[at + in_mid..],
            head: key_word(key, at + in_mid),
            tid: probe.tid(),
        };
        match self.mids {
            Mids::Four(m) => self.search_mids(&m[..count], probe, load_hints),
            Mids::Eight(m) => self.search_mids(&m[..count], probe, load_hints),
        }
    }

    /// The search of the paper's Figure 7 over `mids` (the page's mid-keys, of one width):
    /// `lower` ends at the last entry not above the probe (or at 0); a mid-key tie compares
    /// the tails, and an equal tail ends it. Once few candidates are left, their values and
    /// suffix locations start loading.
    #[inline(always)]
    fn search_mids<M: MidSlot>(
        &self,
        mids: &[M],
        probe: Remainder<'_>,
        load_hints: bool,
    ) -> SearchResult {
        let count = mids.len();
        // Loop invariant: `lower + n <= count` (a step keeps `lower` and shrinks `n`, or moves
        // `lower` up by `half` and shrinks `n` by as much), so `middle = lower + n / 2` is
        // below `count` while `n >= 2`: the mid-keys are read without bounds checks (even a
        // torn page's: `mids` is the vector clamped to the count, whatever the count read).
        let (mut lower, mut n) = (0, count);
        while n > PREFETCH_SPAN {
            let half = n / 2;
            let middle = lower + half;
            // SAFETY: see the loop invariant above.
            let at = unsafe { mids.get_unchecked(middle) }.value();
            if at != probe.mid {
                lower = if probe.mid < at { lower } else { middle };
            } else {
                match self.compare_tail(middle, &probe) {
                    CmpOrdering::Less => lower = middle,
                    CmpOrdering::Greater => {}
                    CmpOrdering::Equal => {
                        return SearchResult {
                            pos: middle,
                            found: true,
                        }
                    }
                }
            }
            n -= half;
        }
        let end = (lower + n).min(count);
        prefetch(&self.values[lower..end]);
        if load_hints && self.form.child_hints && !self.node.is_leaf() {
            self.prefetch_hints(lower, end);
        }
        // In a leaf this repeats `search_inline`'s load of every suffix location: one line's
        // request, cheaper in instructions than telling leaves apart here (measured).
        if !self.suffix_free {
            prefetch(&self.locs[lower..end]);
        }
        while n > 1 {
            let half = n / 2;
            let middle = lower + half;
            // SAFETY: see the loop invariant above.
            let at = unsafe { mids.get_unchecked(middle) }.value();
            if at != probe.mid {
                lower = if probe.mid < at { lower } else { middle };
            } else {
                match self.compare_tail(middle, &probe) {
                    CmpOrdering::Less => lower = middle,
                    CmpOrdering::Greater => {}
                    CmpOrdering::Equal => {
                        return SearchResult {
                            pos: middle,
                            found: true,
                        }
                    }
                }
            }
            n -= half;
        }
        let last = match mids.get(lower).map_or(0, MidSlot::value).cmp(&probe.mid) {
            CmpOrdering::Equal => self.compare_tail(lower, &probe),
            other => other,
        };
        match last {
            CmpOrdering::Less => SearchResult {
                pos: lower + 1,
                found: false,
            },
            CmpOrdering::Equal => SearchResult {
                pos: lower,
                found: true,
            },
            CmpOrdering::Greater => SearchResult {
                pos: lower,
                found: false,
            },
        }
    }

    /// Appends the page prefix to `out`.
    #[inline]
    pub fn prefix_into(&self, meta: Meta, out: &mut Vec<u8>) {
        self.bin
            .extend_into(meta.prefix_offset, meta.prefix_len, out);
    }

    /// Appends entry `i`'s key after the prefix (its mid-key bytes and suffix) to `out`.
    #[inline]
    pub fn rest_into(&self, i: usize, out: &mut Vec<u8>) {
        let mid = self.mid(i);
        let (offset, len) = self.suffix_at(i);
        let width = self.form.mid;
        // All 8 bytes (a copy of a fixed length), then the ones the mid-key does not hold
        // dropped.
        let end = out.len() + width.held(mid);
        out.extend_from_slice(&width.mid_bytes(mid));
        out.truncate(end);
        self.bin.extend_into(offset, len, out);
    }

    /// Writes the key after the prefix of an entry whose mid-key and suffix location (as
    /// stored) have been read (its mid-key bytes and suffix) into `out` from byte `base` on,
    /// replacing what followed: a scan's assembly of keys in a buffer that keeps the prefix.
    /// Whole words are written (a copy of a length known only at run time would be a call),
    /// then the length set to the bytes wanted. `width` is the mid-keys' (a constant where
    /// the caller knows it).
    ///
    /// `head` is the prefix's first `base` bytes as a big-endian word (zero after them).
    /// When the prefix is shorter than a word, the key's first word is written as one store
    /// (the prefix's bytes and the mid-key's first ones, joined in a register), so that a
    /// caller that reads the key's first 8 bytes at once (an 8-byte key read as an integer)
    /// has the load forwarded from that store: a load that spans the prefix's older bytes and
    /// a separate store of the mid-key waits for the store to reach the cache instead.
    ///
    /// # Safety
    ///
    /// `out` has room for `max(base, 8) + 8 + round8(self.bin_len)` bytes (its capacity),
    /// and `base <= out.len()`.
    #[inline(always)]
    pub unsafe fn rest_from_reserved(
        &self,
        width: MidWidth,
        (mid, loc): (u64, u32),
        (base, head): (usize, u64),
        out: &mut Vec<u8>,
    ) {
        let (offset, len) = ((loc >> 16) as usize, (loc & 0xffff) as usize);
        // A torn location may claim more than the bin holds.
        let len = len.min(self.bin_len);
        let held = width.held(mid);
        debug_assert!(
            base <= out.len()
                && out.capacity() >= base.max(8) + 8 + self.bin_len.next_multiple_of(8)
        );
        let dst = out.as_mut_ptr();
        let mid_bytes = width.mid_bytes(mid);
        // SAFETY: the caller's room: the 8 mid-key bytes from `base` (or the key's first two
        // words, when `base < 8`), then the suffix as whole words from `base + held`
        // (`held <= 8`, `len <= bin_len`); the bytes up to `base + held + len` are written
        // before the length is set to it.
        unsafe {
            if (1..8).contains(&base) {
                let word = u64::from_be_bytes(mid_bytes);
                let first = head | word >> (8 * base);
                let second = word << (64 - 8 * base);
                dst.cast::<[u8; 8]>().write_unaligned(first.to_be_bytes());
                dst.add(8)
                    .cast::<[u8; 8]>()
                    .write_unaligned(second.to_be_bytes());
            } else {
                std::ptr::copy_nonoverlapping(mid_bytes.as_ptr(), dst.add(base), 8);
            }
            if len > 0 {
                self.bin.copy_words(offset, len, dst.add(base + held));
            }
            out.set_len(base + held + len);
        }
    }

    /// Appends entry `i`'s whole key to `out` (prefix, mid-key bytes, suffix).
    #[inline]
    pub fn key_into(&self, i: usize, out: &mut Vec<u8>) {
        self.prefix_into(self.meta(), out);
        self.rest_into(i, out);
    }

    /// Entry `i`'s key into `out`, reusing its buffer.
    #[inline]
    pub fn var_key_into(&self, i: usize, out: &mut VarKey) {
        out.bytes.clear();
        self.key_into(i, &mut out.bytes);
        out.tid = self.with_tid().then(|| self.tid(i));
    }

    /// Entry `i` as an owned key.
    pub fn key(&self, i: usize) -> VarKey {
        let mut key = VarKey::default();
        self.var_key_into(i, &mut key);
        key
    }

    /// The page's low fence (`low`) or high fence, `None` when unbounded.
    pub fn fence(&self, low: bool) -> Option<VarKey> {
        let (offset, len) = self.fence_span(low)?;
        let mut bytes = Vec::with_capacity(len);
        self.bin.extend_into(offset, len, &mut bytes);
        let tid = self.with_tid().then(|| self.bin.window(offset + len));
        Some(VarKey { bytes, tid })
    }
}
