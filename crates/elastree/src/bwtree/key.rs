//! [`Key`]: a key and its tid as every part of the Bw-tree compares them.

use crate::node::slotted::{VarKey, VarProbe};

/// A borrowed key with its tid: ordered by bytes, then tid. Unique trees give every key the
/// tid 0, so they order by bytes alone; non-unique trees store each pair `(key, tid)` as a
/// key of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key<'a> {
    /// The key bytes.
    pub bytes: &'a [u8],
    /// The tid (0 in unique trees).
    pub tid: u64,
}

impl<'a> Key<'a> {
    /// The smallest key: the empty key with tid 0 (inner pages' first separator when they
    /// are unbounded below).
    pub const MIN: Key<'static> = Key { bytes: &[], tid: 0 };

    /// A page owned key as a key.
    pub fn of(key: &'a VarKey) -> Self {
        Key {
            bytes: &key.bytes,
            tid: key.tid.unwrap_or(0),
        }
    }

    /// The probe a page search takes (with the tid when pages keep tids).
    #[inline]
    pub fn probe(self, pairs: bool) -> VarProbe<'a> {
        VarProbe::new(self.bytes, pairs.then_some(self.tid))
    }

    /// An owned copy, as pages' fences are.
    pub fn to_owned(self, pairs: bool) -> VarKey {
        VarKey {
            bytes: self.bytes.to_vec(),
            tid: pairs.then_some(self.tid),
        }
    }
}
