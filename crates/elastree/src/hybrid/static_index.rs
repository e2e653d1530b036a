//! The `static` index kind: a [`StaticStage`] behind the [`Index`] trait, read-only,
//! bulk-loaded from sorted pairs.

use std::ops::Bound;

use super::static_stage::{StaticOptions, StaticStage};
use crate::index::check_key;
use crate::mem::MemoryUsage;
use crate::{Direction, Error, Index, IndexKind, IndexOptions};

/// Why writes are refused.
const READ_ONLY: &str = "the static index is read-only: bulk-load it with StaticIndex::from_sorted";

/// A read-only index over a [`StaticStage`]; see [`StaticIndex::from_sorted`].
#[derive(Debug)]
pub struct StaticIndex {
    stage: StaticStage,
    max_key_len: usize,
}

impl StaticIndex {
    /// An empty static index with these options.
    pub fn new(options: &IndexOptions) -> Result<Self, Error> {
        Self::from_sorted(options, &mut std::iter::empty())
    }

    /// Builds the index from `pairs`, strictly ascending by (key, tid) (unique: keys
    /// strictly ascending). Refuses keys longer than the maximum ([`Error::KeyTooLong`]) or
    /// of another fixed length ([`Error::KeyLenMismatch`]) and out-of-order or duplicated
    /// input ([`Error::InvalidConfig`]).
    pub fn from_sorted(
        options: &IndexOptions,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Self, Error> {
        options.validate()?;
        let max_key_len = options.max_key_len;
        let key_len = options.key_len;
        let mut failed = None;
        let mut checked =
            pairs.map_while(|(key, tid)| match check_key(&key, max_key_len, key_len) {
                Ok(()) => Some((key, tid)),
                Err(e) => {
                    failed = Some(e);
                    None
                }
            });
        let stage = StaticStage::build(StaticOptions::new(options.unique, key_len), &mut checked);
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(Self {
            stage: stage?,
            max_key_len,
        })
    }

    /// The stage behind the index.
    pub fn stage(&self) -> &StaticStage {
        &self.stage
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        check_key(key, self.max_key_len, self.stage.options().key_len)
    }
}

impl Index for StaticIndex {
    fn kind(&self) -> &'static str {
        IndexKind::Static.name()
    }

    fn is_unique(&self) -> bool {
        self.stage.options().unique
    }

    fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    fn insert(&self, _key: &[u8], _tid: u64) -> Result<Option<u64>, Error> {
        Err(Error::Unsupported {
            operation: "insert",
            reason: READ_ONLY,
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.check_key(key)?;
        Ok(self.stage.get(key))
    }

    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error> {
        self.check_key(key)?;
        self.stage.get_all(key, out);
        Ok(())
    }

    fn remove(&self, _key: &[u8]) -> Result<Option<u64>, Error> {
        Err(Error::Unsupported {
            operation: "remove",
            reason: READ_ONLY,
        })
    }

    fn remove_pair(&self, _key: &[u8], _tid: u64) -> Result<bool, Error> {
        Err(Error::Unsupported {
            operation: "remove_pair",
            reason: READ_ONLY,
        })
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, Error> {
        let (start, end) = match direction {
            Direction::Ascending => (lower, upper),
            Direction::Descending => (upper, lower),
        };
        // Whether `key` is still on the near side of the far bound.
        let within = |key: &[u8]| match (end, direction) {
            (Bound::Unbounded, _) => true,
            (Bound::Included(b), Direction::Ascending) => key <= b,
            (Bound::Excluded(b), Direction::Ascending) => key < b,
            (Bound::Included(b), Direction::Descending) => key >= b,
            (Bound::Excluded(b), Direction::Descending) => key > b,
        };
        let mut cursor = self.stage.cursor(start, direction);
        let mut key = Vec::new();
        let mut visited = 0;
        while visited < limit {
            let Some(tid) = cursor.next(&mut key) else {
                break;
            };
            if !within(&key) {
                break;
            }
            visit(&key, tid);
            visited += 1;
        }
        Ok(visited)
    }

    fn len(&self) -> usize {
        self.stage.len()
    }

    fn memory(&self) -> MemoryUsage {
        let mut usage = self.stage.memory();
        // The stage is counted in place inside this object.
        usage.aux += std::mem::size_of::<Self>() - std::mem::size_of::<StaticStage>();
        usage
    }

    fn check(&self) -> Result<(), Error> {
        self.stage.check()
    }
}
