//! The stored form of a tree node: one Redis string per node, written by the function
//! library (`tree.lua`) and by the Baseline client, read by both and by the client's leaf
//! searches, scans and invariant checks.
//!
//! # Layout ("page", all integers big-endian)
//!
//! ```text
//! offset  size  field
//!  0      1     kind: 0 leaf; 1..=63 inner node of that level; 0xF0 forward marker;
//!               0xF1 lowered marker (markers have their own layout, below)
//!  1      1     flags: bit 0 ROOT (a sub-tree root), bit 1 HIGH_INF (the high fence is
//!               +infinity), bit 2 FROZEN (a migration holds the sub-tree; its deadline
//!               and holder are in the tag's meta hash)
//!  2      2     n: entries (leaf: key/tid pairs; inner: children)
//!  4      4     right: id of the right neighbour on this level, 0 for none
//!  8      4     heap_end: bytes of the heap in use (live and dead records)
//! 12      4     dead: bytes of dead records in the heap (removed entries)
//! 16      4     low_len: bytes of the low fence (0: minus infinity)
//! 20      4     high_len: bytes of the high fence (0 when HIGH_INF)
//! 24      4     prefix: bytes every key of the node starts with (the fences' common prefix)
//! 28            low fence, then high fence
//! S             n slots of 8 bytes, in key order: head u32 (the 4 key bytes after the
//!               prefix, zero-padded) | record offset u32 (from the heap start)
//! S + 8n        heap: records, each: value (leaf: the tid, 8 bytes; inner: child id,
//!               u32) | key length after the prefix, u32 | key bytes after the prefix
//! ```
//!
//! An inner node's entry i is (the low fence of child i, child i): its first entry's key is
//! the node's own low fence. The heads let a search compare numbers instead of strings (in
//! Lua, a C call per string compare); only equal heads fall back to the key bytes. An insert
//! appends its record to the heap and splices one slot into the slot array, so no other
//! record moves; a removal drops the slot and counts the record's bytes dead until the node is
//! rebuilt (split, merge, or more than half the heap dead).
//!
//! Invariants of a node: keys strictly ascending; every key in [low, high) and starting with
//! the prefix; each head equal to its key's 4 bytes after the prefix; each record inside the
//! heap and the heap's live records plus `dead` equal to `heap_end`; the string ends at the
//! heap's end. An inner node's first key is its low fence.
//!
//! Markers, left in place of a sub-tree root that is gone:
//!
//! ```text
//! forward:  0xF0 | root id u32 | token of the tag it moved to, decimal ASCII
//! lowered:  0xF1 | count u16 | count x (child id u32 | low fence length u32 | low fence)
//! ```

use std::cmp::Ordering;

use crate::error::DistError;

/// Bytes before the fences.
pub(crate) const HEADER_LEN: usize = 28;
/// Bytes of one slot.
pub(crate) const SLOT_LEN: usize = 8;
/// The highest level an inner node may have.
pub(crate) const MAX_LEVEL: u8 = 63;
/// Kind byte of a forward marker.
pub(crate) const KIND_FORWARD: u8 = 0xF0;
/// Kind byte of a lowered marker.
pub(crate) const KIND_LOWERED: u8 = 0xF1;
/// Flag: a sub-tree root.
pub(crate) const FLAG_ROOT: u8 = 1;
/// Flag: the high fence is +infinity.
pub(crate) const FLAG_HIGH_INF: u8 = 2;
/// Flag: frozen by a migration.
pub(crate) const FLAG_FROZEN: u8 = 4;

fn corrupt(what: impl std::fmt::Display) -> DistError {
    DistError::Corrupt(format!("stored node: {what}"))
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 4 bytes of `suffix` (a key after the prefix) that a slot's head holds.
pub(crate) fn head_of(suffix: &[u8]) -> u32 {
    let mut h = [0u8; 4];
    let n = suffix.len().min(4);
    h[..n].copy_from_slice(&suffix[..n]);
    u32::from_be_bytes(h)
}

/// Whatever a node key holds: a node, or a marker left where a sub-tree root was.
#[derive(Debug)]
pub(crate) enum Stored<'a> {
    /// A tree node.
    Node(NodeView<'a>),
    /// The sub-tree moved to tag `token`, same root id.
    Forward { token: u64, id: u32 },
    /// The cut-off moved below this root: its children (low fence, id) are sub-tree roots.
    Lowered(Vec<(Vec<u8>, u32)>),
}

impl<'a> Stored<'a> {
    /// Parses a stored node or marker.
    pub fn parse(bytes: &'a [u8]) -> Result<Stored<'a>, DistError> {
        match bytes.first() {
            Some(&KIND_FORWARD) => {
                if bytes.len() < 6 {
                    return Err(corrupt("short forward marker"));
                }
                let id = be32(bytes, 1);
                let token = std::str::from_utf8(&bytes[5..])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| corrupt("forward marker without a token"))?;
                Ok(Stored::Forward { token, id })
            }
            Some(&KIND_LOWERED) => {
                let count = bytes
                    .get(1..3)
                    .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
                    .ok_or_else(|| corrupt("short lowered marker"))?;
                let mut at = 3;
                let mut children = Vec::with_capacity(count);
                for _ in 0..count {
                    if bytes.len() < at + 8 {
                        return Err(corrupt("short lowered marker"));
                    }
                    let id = be32(bytes, at);
                    let len = be32(bytes, at + 4) as usize;
                    let lo = bytes
                        .get(at + 8..at + 8 + len)
                        .ok_or_else(|| corrupt("short lowered marker"))?;
                    children.push((lo.to_vec(), id));
                    at += 8 + len;
                }
                Ok(Stored::Lowered(children))
            }
            _ => NodeView::parse(bytes).map(Stored::Node),
        }
    }
}

/// A node's bytes, checked once by [`NodeView::parse`] so that every accessor stays inside
/// them. Borrowed: nothing is copied until a key is asked for as a `Vec`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeView<'a> {
    bytes: &'a [u8],
    level: u8,
    flags: u8,
    n: usize,
    right: u32,
    heap_end: usize,
    dead: usize,
    low_len: usize,
    high_len: usize,
    prefix: usize,
    slots: usize,
    heap: usize,
}

impl<'a> NodeView<'a> {
    /// Checks the header and that every slot's record lies inside the heap (not the order of
    /// the keys: [`NodeView::validate`] does that).
    pub fn parse(bytes: &'a [u8]) -> Result<NodeView<'a>, DistError> {
        if bytes.len() < HEADER_LEN {
            return Err(corrupt(format!(
                "{} bytes, shorter than a header",
                bytes.len()
            )));
        }
        let level = bytes[0];
        if level > MAX_LEVEL {
            return Err(corrupt(format!("kind {level:#x}")));
        }
        let flags = bytes[1];
        let n = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
        let low_len = be32(bytes, 16) as usize;
        let high_len = be32(bytes, 20) as usize;
        let slots = HEADER_LEN
            .checked_add(low_len)
            .and_then(|x| x.checked_add(high_len))
            .ok_or_else(|| corrupt("fence lengths overflow"))?;
        let heap = slots + SLOT_LEN * n;
        let heap_end = be32(bytes, 8) as usize;
        if heap.checked_add(heap_end) != Some(bytes.len()) {
            return Err(corrupt(format!(
                "{} bytes, but the header says {} + {} heap",
                bytes.len(),
                heap,
                heap_end
            )));
        }
        let view = NodeView {
            bytes,
            level,
            flags,
            n,
            right: be32(bytes, 4),
            heap_end,
            dead: be32(bytes, 12) as usize,
            low_len,
            high_len,
            prefix: be32(bytes, 24) as usize,
            slots,
            heap,
        };
        if view.prefix > low_len || (view.high().is_some() && view.prefix > high_len) {
            return Err(corrupt("prefix longer than a fence"));
        }
        if view.high().is_none() && high_len != 0 {
            return Err(corrupt("an infinite high fence with bytes"));
        }
        let value_len = view.value_len();
        for i in 0..n {
            let off = view.offset(i);
            let rec = off
                .checked_add(value_len + 4)
                .filter(|&end| end <= heap_end)
                .ok_or_else(|| corrupt(format!("slot {i} points outside the heap")))?;
            let len = be32(bytes, heap + off + value_len) as usize;
            if rec.checked_add(len).is_none_or(|end| end > heap_end) {
                return Err(corrupt(format!("record {i} runs past the heap")));
            }
        }
        Ok(view)
    }

    /// 0 for a leaf, else the inner node's level.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Whether this node is a sub-tree root.
    pub fn is_root(&self) -> bool {
        self.flags & FLAG_ROOT != 0
    }

    /// Whether a migration froze this sub-tree root.
    pub fn is_frozen(&self) -> bool {
        self.flags & FLAG_FROZEN != 0
    }

    /// Entries (leaf pairs or inner children).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Id of the right neighbour, 0 for none.
    pub fn right(&self) -> u32 {
        self.right
    }

    /// The low fence (empty: minus infinity).
    pub fn low(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..HEADER_LEN + self.low_len]
    }

    /// The high fence, `None` for +infinity.
    pub fn high(&self) -> Option<&'a [u8]> {
        if self.flags & FLAG_HIGH_INF != 0 {
            None
        } else {
            let at = HEADER_LEN + self.low_len;
            Some(&self.bytes[at..at + self.high_len])
        }
    }

    /// The bytes every key of the node starts with.
    pub fn prefix(&self) -> &'a [u8] {
        &self.low()[..self.prefix]
    }

    fn value_len(&self) -> usize {
        if self.is_leaf() {
            8
        } else {
            4
        }
    }

    fn head(&self, i: usize) -> u32 {
        be32(self.bytes, self.slots + SLOT_LEN * i)
    }

    fn offset(&self, i: usize) -> usize {
        be32(self.bytes, self.slots + SLOT_LEN * i + 4) as usize
    }

    fn record(&self, i: usize) -> usize {
        self.heap + self.offset(i)
    }

    /// Entry `i`'s key bytes after the prefix.
    pub fn suffix(&self, i: usize) -> &'a [u8] {
        let at = self.record(i) + self.value_len();
        let len = be32(self.bytes, at) as usize;
        &self.bytes[at + 4..at + 4 + len]
    }

    /// Entry `i`'s whole key.
    pub fn key(&self, i: usize) -> Vec<u8> {
        let mut k = self.prefix().to_vec();
        k.extend_from_slice(self.suffix(i));
        k
    }

    /// A leaf entry's tid.
    pub fn tid(&self, i: usize) -> u64 {
        let at = self.record(i);
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_be_bytes(b)
    }

    /// An inner entry's child id.
    pub fn child(&self, i: usize) -> u32 {
        be32(self.bytes, self.record(i))
    }

    /// How entry `i`'s key compares with `key`.
    pub fn cmp_key(&self, i: usize, key: &[u8]) -> Ordering {
        let prefix = self.prefix();
        let p = prefix.len().min(key.len());
        match prefix[..p].cmp(&key[..p]) {
            Ordering::Equal if key.len() >= prefix.len() => {
                self.suffix(i).cmp(&key[prefix.len()..])
            }
            Ordering::Equal => Ordering::Greater,
            other => other,
        }
    }

    /// The first entry whose key is not below `key` (`len()` if none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.partition(|i| self.cmp_key(i, key) == Ordering::Less)
    }

    /// The first entry whose key is above `key` (`len()` if none).
    pub fn upper_bound(&self, key: &[u8]) -> usize {
        self.partition(|i| self.cmp_key(i, key) != Ordering::Greater)
    }

    fn partition(&self, before: impl Fn(usize) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The entry holding exactly `key`.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        let i = self.lower_bound(key);
        (i < self.n && self.cmp_key(i, key) == Ordering::Equal).then_some(i)
    }

    /// Whether `key` lies inside [low, high).
    pub fn covers(&self, key: &[u8]) -> bool {
        key >= self.low() && self.high().is_none_or(|h| key < h)
    }

    /// Checks the node's own invariants (the module docs): the ones [`NodeView::parse`]
    /// leaves to this walk, over every entry.
    pub fn validate(&self) -> Result<(), String> {
        let low = self.low();
        if let Some(high) = self.high() {
            if low >= high {
                return Err("low fence not below the high fence".into());
            }
            let common = low.iter().zip(high).take_while(|(a, b)| a == b).count();
            if common != self.prefix {
                return Err(format!(
                    "prefix of {} bytes, but the fences share {common}",
                    self.prefix
                ));
            }
        } else if self.prefix != 0 {
            return Err("a prefix under an infinite high fence".into());
        }
        let mut live = 0;
        let mut previous: Option<Vec<u8>> = None;
        for i in 0..self.n {
            let suffix = self.suffix(i);
            if self.head(i) != head_of(suffix) {
                return Err(format!("slot {i}: head does not match its key"));
            }
            let key = self.key(i);
            if !self.covers(&key) {
                return Err(format!("entry {i}: key outside the fences"));
            }
            if previous.as_ref().is_some_and(|p| *p >= key) {
                return Err(format!("entry {i}: keys out of order"));
            }
            previous = Some(key);
            live += self.value_len() + 4 + suffix.len();
        }
        if live + self.dead != self.heap_end {
            return Err(format!(
                "heap of {} bytes holds {live} live and {} dead",
                self.heap_end, self.dead
            ));
        }
        if !self.is_leaf() && self.n > 0 && self.suffix(0) != &low[self.prefix..] {
            return Err("the first entry of an inner node is not its low fence".into());
        }
        Ok(())
    }
}

/// A node's contents, to be encoded (the Baseline writes whole nodes; tests build them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeData {
    /// 0 for a leaf.
    pub level: u8,
    /// `FLAG_*` bits (HIGH_INF is set from `high`).
    pub flags: u8,
    /// Right neighbour's id, 0 for none.
    pub right: u32,
    /// Low fence (empty: minus infinity).
    pub low: Vec<u8>,
    /// High fence, `None` for +infinity.
    pub high: Option<Vec<u8>>,
    /// Entry keys, ascending (an inner node's first one is `low`).
    pub keys: Vec<Vec<u8>>,
    /// Leaf: tids; inner: child ids (as u64, each must fit u32).
    pub vals: Vec<u64>,
}

impl NodeData {
    /// The node a view holds.
    pub fn from_view(v: &NodeView<'_>) -> NodeData {
        NodeData {
            level: v.level(),
            flags: v.flags & !FLAG_HIGH_INF,
            right: v.right(),
            low: v.low().to_vec(),
            high: v.high().map(<[u8]>::to_vec),
            keys: (0..v.len()).map(|i| v.key(i)).collect(),
            vals: (0..v.len())
                .map(|i| {
                    if v.is_leaf() {
                        v.tid(i)
                    } else {
                        u64::from(v.child(i))
                    }
                })
                .collect(),
        }
    }

    /// The stored bytes (no dead records).
    pub fn encode(&self) -> Vec<u8> {
        let prefix = match &self.high {
            Some(high) => self
                .low
                .iter()
                .zip(high)
                .take_while(|(a, b)| a == b)
                .count(),
            None => 0,
        };
        let leaf = self.level == 0;
        let mut slots = Vec::with_capacity(SLOT_LEN * self.keys.len());
        let mut heap = Vec::new();
        for (key, &val) in self.keys.iter().zip(&self.vals) {
            let suffix = &key[prefix..];
            slots.extend_from_slice(&head_of(suffix).to_be_bytes());
            slots.extend_from_slice(&(heap.len() as u32).to_be_bytes());
            if leaf {
                heap.extend_from_slice(&val.to_be_bytes());
            } else {
                heap.extend_from_slice(&(val as u32).to_be_bytes());
            }
            heap.extend_from_slice(&(suffix.len() as u32).to_be_bytes());
            heap.extend_from_slice(suffix);
        }
        let high = self.high.as_deref().unwrap_or(&[]);
        let flags = if self.high.is_none() {
            self.flags | FLAG_HIGH_INF
        } else {
            self.flags & !FLAG_HIGH_INF
        };
        let mut out =
            Vec::with_capacity(HEADER_LEN + self.low.len() + high.len() + slots.len() + heap.len());
        out.push(self.level);
        out.push(flags);
        out.extend_from_slice(&(self.keys.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.right.to_be_bytes());
        out.extend_from_slice(&(heap.len() as u32).to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&(self.low.len() as u32).to_be_bytes());
        out.extend_from_slice(&(high.len() as u32).to_be_bytes());
        out.extend_from_slice(&(prefix as u32).to_be_bytes());
        out.extend_from_slice(&self.low);
        out.extend_from_slice(high);
        out.extend_from_slice(&slots);
        out.extend_from_slice(&heap);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(low: &[u8], high: Option<&[u8]>, keys: &[&[u8]]) -> NodeData {
        NodeData {
            level: 0,
            flags: FLAG_ROOT,
            right: 9,
            low: low.to_vec(),
            high: high.map(<[u8]>::to_vec),
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            vals: (0..keys.len() as u64).map(|i| i * 1000 + 7).collect(),
        }
    }

    #[test]
    fn a_leaf_round_trips_and_searches_like_a_sorted_slice() {
        let keys: Vec<&[u8]> = vec![b"ab", b"ab\0", b"ab\0\0\0\x01", b"abc", b"abcdefgh", b"abd"];
        let data = leaf(b"aa", Some(b"ac"), &keys);
        let bytes = data.encode();
        let v = NodeView::parse(&bytes).unwrap();
        v.validate().unwrap();
        assert_eq!(v.prefix(), b"a");
        assert_eq!(NodeData::from_view(&v), data);
        for probe in [
            &b""[..],
            b"a",
            b"aa",
            b"ab",
            b"ab\0",
            b"ab\0\0",
            b"abc",
            b"abcd",
            b"abd",
            b"abz",
            b"b",
        ] {
            let expect_lower = keys.partition_point(|k| *k < probe);
            let expect_upper = keys.partition_point(|k| *k <= probe);
            assert_eq!(v.lower_bound(probe), expect_lower, "lower {probe:?}");
            assert_eq!(v.upper_bound(probe), expect_upper, "upper {probe:?}");
            assert_eq!(v.find(probe), keys.iter().position(|k| *k == probe));
        }
        assert_eq!(v.tid(2), 2007);
        assert!(v.is_root() && v.is_leaf());
        assert_eq!(v.right(), 9);
    }

    #[test]
    fn inner_nodes_and_infinite_fences() {
        let data = NodeData {
            level: 2,
            flags: 0,
            right: 0,
            low: Vec::new(),
            high: None,
            keys: vec![Vec::new(), b"m".to_vec(), b"t".to_vec()],
            vals: vec![3, 4, 5],
        };
        let bytes = data.encode();
        let v = NodeView::parse(&bytes).unwrap();
        v.validate().unwrap();
        assert_eq!(v.high(), None);
        assert_eq!(v.child(1), 4);
        assert_eq!(v.upper_bound(b"n") - 1, 1);
        assert_eq!(NodeData::from_view(&v), data);
    }

    #[test]
    fn corrupt_bytes_are_refused_not_trusted() {
        let bytes = leaf(b"", Some(b"z"), &[b"a", b"b"]).encode();
        for cut in 0..bytes.len() {
            assert!(
                NodeView::parse(&bytes[..cut]).is_err(),
                "truncated at {cut}"
            );
        }
        let mut bad = bytes.clone();
        let slot = HEADER_LEN + 1 + 4; // first slot's offset field
        bad[slot..slot + 4].copy_from_slice(&1000u32.to_be_bytes());
        assert!(NodeView::parse(&bad).is_err());
        let mut unordered = bytes.clone();
        let last = unordered.len() - 1;
        unordered[last] = b'0';
        let v = NodeView::parse(&unordered).unwrap();
        assert!(v.validate().is_err());
    }

    #[test]
    fn markers_parse() {
        let mut fwd = vec![KIND_FORWARD];
        fwd.extend_from_slice(&77u32.to_be_bytes());
        fwd.extend_from_slice(b"12345");
        assert!(matches!(
            Stored::parse(&fwd).unwrap(),
            Stored::Forward {
                token: 12345,
                id: 77
            }
        ));
        let mut low = vec![KIND_LOWERED, 0, 2];
        for (id, lo) in [(5u32, &b""[..]), (6, b"k")] {
            low.extend_from_slice(&id.to_be_bytes());
            low.extend_from_slice(&(lo.len() as u32).to_be_bytes());
            low.extend_from_slice(lo);
        }
        match Stored::parse(&low).unwrap() {
            Stored::Lowered(children) => {
                assert_eq!(children, vec![(Vec::new(), 5), (b"k".to_vec(), 6)])
            }
            other => panic!("{other:?}"),
        }
    }
}
