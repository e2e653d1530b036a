//! The client's copy of the top of the tree: the levels above the cut-off, held in Redis as
//! one routing entry per sub-tree (its low fence and its root) and cached in every client,
//! read without validation (the paper's dirty reads). A stale copy is detected by the fences
//! the sub-tree functions check, and refreshed.

use std::collections::BTreeSet;

use redis::Value;

use crate::codec;
use crate::error::DistError;
use crate::index::RootRef;

/// One sub-tree as the top knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopEntry {
    /// The sub-tree's low fence: it covers keys from here to the next entry's.
    pub lo: Vec<u8>,
    /// The tag token of its slot: its nodes are keys `{et:<index>:<token>}:n:<id>`.
    pub token: u64,
    /// Its root's node id.
    pub id: u64,
}

/// The cached top. Invariant: entries sorted by `lo`, strictly ascending, the first one's
/// `lo` empty (minus infinity) once the index exists.
#[derive(Debug, Clone, Default)]
pub(crate) struct Top {
    pub version: i64,
    pub entries: Vec<TopEntry>,
}

impl Top {
    /// From an `et_top` reply: `{version, lo1, ref1, lo2, ref2, ...}`.
    pub fn parse(v: &Value) -> Result<Top, DistError> {
        let Value::Array(items) = v else {
            return Err(DistError::Corrupt(format!("top reply {v:?}")));
        };
        let version = codec::int(items.first().unwrap_or(&Value::Int(0)))?;
        let mut entries = Vec::with_capacity(items.len() / 2);
        for pair in items.get(1..).unwrap_or_default().chunks(2) {
            let [lo, r] = pair else {
                return Err(DistError::Corrupt("odd top reply".into()));
            };
            let lo = codec::bytes_of(lo)?;
            let r = codec::bytes_of(r)?;
            let root = codec::parse_root_ref(&r).ok_or_else(|| {
                DistError::Corrupt(format!("bad top entry {:?}", String::from_utf8_lossy(&r)))
            })?;
            entries.push(TopEntry {
                lo,
                token: root.token,
                id: root.id,
            });
        }
        entries.sort_by(|a, b| a.lo.cmp(&b.lo));
        Ok(Top { version, entries })
    }

    /// The entry covering `key`: the last with `lo <= key`.
    pub fn covering(&self, key: &[u8]) -> usize {
        self.entries
            .partition_point(|e| e.lo.as_slice() <= key)
            .saturating_sub(1)
    }

    /// The entry covering the largest key below `key`: the last with `lo < key`.
    pub fn covering_below(&self, key: &[u8]) -> usize {
        self.entries
            .partition_point(|e| e.lo.as_slice() < key)
            .saturating_sub(1)
    }

    /// The distinct tag tokens of the sub-trees.
    pub fn tokens(&self) -> BTreeSet<u64> {
        self.entries.iter().map(|e| e.token).collect()
    }

    /// Points the entry of root `from` at `to` (a sub-tree that moved).
    pub fn retarget(&mut self, from: RootRef, to: RootRef) {
        for e in &mut self.entries {
            if e.token == from.token && e.id == from.id {
                e.token = to.token;
                e.id = to.id;
            }
        }
    }

    /// Bytes the cached copy takes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Top>()
            + self.entries.capacity() * std::mem::size_of::<TopEntry>()
            + self.entries.iter().map(|e| e.lo.capacity()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(los: &[&[u8]]) -> Top {
        Top {
            version: 1,
            entries: los
                .iter()
                .enumerate()
                .map(|(i, lo)| TopEntry {
                    lo: lo.to_vec(),
                    token: 0,
                    id: i as u64,
                })
                .collect(),
        }
    }

    #[test]
    fn routing_picks_the_covering_sub_tree() {
        let t = top(&[b"", b"g", b"p"]);
        assert_eq!(t.covering(b""), 0);
        assert_eq!(t.covering(b"f"), 0);
        assert_eq!(t.covering(b"g"), 1);
        assert_eq!(t.covering(b"zz"), 2);
        assert_eq!(t.covering_below(b"g"), 0);
        assert_eq!(t.covering_below(b"g\0"), 1);
        assert_eq!(t.covering_below(b""), 0);
    }
}
