//! The [`elastree::Index`] operations of both distributed trees, written once over the map
//! of stored keys each tree keeps: a unique index stores its keys as they are; a non-unique
//! one stores each (key, tid) pair as one composite key ([`codec::composite`]), so both trees
//! only ever hold a unique, ordered map of byte strings to tids.

use std::ops::Bound;

use elastree::{check_key, Direction, Error, KeyLen};

use crate::codec;
use crate::error::DistError;

/// A unique ordered map of stored keys to tids, on a cluster.
pub(crate) trait StoredMap {
    /// Whether the index is unique (stored keys are the user's keys).
    fn unique(&self) -> bool;
    /// The longest user key accepted.
    fn max_key_len(&self) -> usize;
    /// The tid of a stored key.
    fn get_stored(&self, stored: &[u8]) -> Result<Option<u64>, DistError>;
    /// Inserts a stored key: `replace` replaces an existing one's tid, else leaves it.
    /// Returns the previous tid.
    fn put_stored(&self, stored: &[u8], tid: u64, replace: bool) -> Result<Option<u64>, DistError>;
    /// Removes a stored key (only if its tid is `expected`, when given); returns the tid it
    /// had and whether it was removed.
    fn remove_stored(
        &self,
        stored: &[u8],
        expected: Option<u64>,
    ) -> Result<(Option<u64>, bool), DistError>;
    /// Visits stored keys within the bounds in `direction` order, at most `limit`.
    fn scan_stored(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, DistError>;
}

/// The [`Error`] a distributed failure becomes behind the `Index` trait.
pub(crate) fn to_index_error(e: DistError) -> Error {
    match e {
        DistError::Index(e) => e,
        DistError::Corrupt(msg) => Error::Corrupt(msg),
        DistError::Invalid(msg) => Error::InvalidConfig(msg),
        other => Error::External(elastree::ExternalError::new(other)),
    }
}

fn check(map: &dyn StoredMap, key: &[u8]) -> Result<(), Error> {
    check_key(key, map.max_key_len(), KeyLen::Variable)
}

/// [`elastree::Index::insert`].
pub(crate) fn insert(map: &dyn StoredMap, key: &[u8], tid: u64) -> Result<Option<u64>, Error> {
    check(map, key)?;
    if map.unique() {
        map.put_stored(key, tid, true).map_err(to_index_error)
    } else {
        map.put_stored(&codec::composite(key, tid), tid, false)
            .map_err(to_index_error)
    }
}

/// Visits the tids of one key of a non-unique index, ascending.
fn key_tids(
    map: &dyn StoredMap,
    key: &[u8],
    limit: usize,
    visit: &mut dyn FnMut(u64),
) -> Result<(), Error> {
    let lower = Bound::Included(codec::composite(key, 0));
    let upper = Bound::Included(codec::composite(key, u64::MAX));
    map.scan_stored(lower, upper, Direction::Ascending, limit, &mut |_, tid| {
        visit(tid)
    })
    .map_err(to_index_error)?;
    Ok(())
}

/// [`elastree::Index::get`].
pub(crate) fn get(map: &dyn StoredMap, key: &[u8]) -> Result<Option<u64>, Error> {
    check(map, key)?;
    if map.unique() {
        return map.get_stored(key).map_err(to_index_error);
    }
    let mut first = None;
    key_tids(map, key, 1, &mut |tid| first = Some(tid))?;
    Ok(first)
}

/// [`elastree::Index::get_all`].
pub(crate) fn get_all(map: &dyn StoredMap, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error> {
    check(map, key)?;
    if map.unique() {
        out.extend(map.get_stored(key).map_err(to_index_error)?);
        return Ok(());
    }
    key_tids(map, key, usize::MAX, &mut |tid| out.push(tid))
}

/// [`elastree::Index::remove`].
pub(crate) fn remove(map: &dyn StoredMap, key: &[u8]) -> Result<Option<u64>, Error> {
    check(map, key)?;
    if !map.unique() {
        return Err(Error::Unsupported {
            operation: "remove",
            reason: "a non-unique index removes pairs: use remove_pair",
        });
    }
    Ok(map.remove_stored(key, None).map_err(to_index_error)?.0)
}

/// [`elastree::Index::remove_pair`].
pub(crate) fn remove_pair(map: &dyn StoredMap, key: &[u8], tid: u64) -> Result<bool, Error> {
    check(map, key)?;
    let removed = if map.unique() {
        map.remove_stored(key, Some(tid))
    } else {
        map.remove_stored(&codec::composite(key, tid), None)
    };
    Ok(removed.map_err(to_index_error)?.1)
}

/// [`elastree::Index::scan`].
pub(crate) fn scan(
    map: &dyn StoredMap,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    direction: Direction,
    limit: usize,
    visit: &mut dyn FnMut(&[u8], u64),
) -> Result<usize, Error> {
    for bound in [lower, upper] {
        if let Bound::Included(k) | Bound::Excluded(k) = bound {
            check(map, k)?;
        }
    }
    if limit == 0 {
        return Ok(0);
    }
    if map.unique() {
        let lower = lower.map(<[u8]>::to_vec);
        let upper = upper.map(<[u8]>::to_vec);
        return map
            .scan_stored(lower, upper, direction, limit, visit)
            .map_err(to_index_error);
    }
    let lower = match lower {
        Bound::Included(k) => Bound::Included(codec::composite(k, 0)),
        Bound::Excluded(k) => Bound::Excluded(codec::composite(k, u64::MAX)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let upper = match upper {
        Bound::Included(k) => Bound::Included(codec::composite(k, u64::MAX)),
        Bound::Excluded(k) => Bound::Excluded(codec::composite(k, 0)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let mut failure = None;
    let n =
        map.scan_stored(lower, upper, direction, limit, &mut |stored, tid| {
            match codec::split_composite(stored) {
                Some((key, _)) => visit(&key, tid),
                None => failure = Some(stored.to_vec()),
            }
        })
        .map_err(to_index_error)?;
    match failure {
        Some(stored) => Err(Error::Corrupt(format!(
            "stored key {stored:?} is not a (key, tid) composite"
        ))),
        None => Ok(n),
    }
}

/// Implements [`elastree::Index`] for a [`StoredMap`] type by delegating to this module;
/// `len`, `memory` and `check` come from the type's own `index_len`, `index_memory` and
/// `index_check`.
macro_rules! index_via_stored_map {
    ($ty:ty, $kind:expr) => {
        impl elastree::Index for $ty {
            fn kind(&self) -> &'static str {
                $kind.name()
            }
            fn is_unique(&self) -> bool {
                $crate::adapter::StoredMap::unique(self)
            }
            fn max_key_len(&self) -> usize {
                $crate::adapter::StoredMap::max_key_len(self)
            }
            fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, elastree::Error> {
                $crate::adapter::insert(self, key, tid)
            }
            fn get(&self, key: &[u8]) -> Result<Option<u64>, elastree::Error> {
                $crate::adapter::get(self, key)
            }
            fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), elastree::Error> {
                $crate::adapter::get_all(self, key, out)
            }
            fn remove(&self, key: &[u8]) -> Result<Option<u64>, elastree::Error> {
                $crate::adapter::remove(self, key)
            }
            fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, elastree::Error> {
                $crate::adapter::remove_pair(self, key, tid)
            }
            fn scan(
                &self,
                lower: std::ops::Bound<&[u8]>,
                upper: std::ops::Bound<&[u8]>,
                direction: elastree::Direction,
                limit: usize,
                visit: &mut dyn FnMut(&[u8], u64),
            ) -> Result<usize, elastree::Error> {
                $crate::adapter::scan(self, lower, upper, direction, limit, visit)
            }
            fn len(&self) -> usize {
                self.index_len()
            }
            fn memory(&self) -> elastree::MemoryUsage {
                self.index_memory()
            }
            fn check(&self) -> Result<(), elastree::Error> {
                self.index_check().map_err($crate::adapter::to_index_error)
            }
            fn stats(&self) -> Option<Box<dyn elastree::KindStats>> {
                Some(Box::new(self.stats()))
            }
        }
    };
}
pub(crate) use index_via_stored_map;
