//! The public face of every index kind: the [`Index`] trait, the scan [`Direction`], key
//! lengths ([`KeyLen`]) and the key check every kind runs.

use std::ops::Bound;

pub use crate::btree::{BTreeIndex, ElasticIndex};
pub use crate::hybrid::HybridIndex;
use crate::mem::MemoryUsage;
use crate::stats::KindStats;
use crate::Error;

/// The direction of a range scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Smallest (key, tid) first.
    Ascending,
    /// Largest (key, tid) first.
    Descending,
}

/// Checks a key against an index's limits: [`Error::KeyTooLong`] over `max` bytes,
/// [`Error::KeyLenMismatch`] for a fixed-length index and a key of another length. Every
/// kind runs it before an operation touches anything.
pub fn check_key(key: &[u8], max: usize, key_len: KeyLen) -> Result<(), Error> {
    if key.len() > max {
        return Err(Error::KeyTooLong {
            len: key.len(),
            max,
        });
    }
    match key_len {
        KeyLen::Fixed(expected) if key.len() != expected => Err(Error::KeyLenMismatch {
            len: key.len(),
            expected,
        }),
        _ => Ok(()),
    }
}

/// Maps a key bound of a non-unique index (the `lower` or the upper one) to a bound on
/// (key, tid) pairs, made by `pair`, that takes in or leaves out every tid of its key.
pub(crate) fn pair_bound<T, P>(
    bound: Bound<T>,
    lower: bool,
    pair: impl Fn(T, u64) -> P,
) -> Bound<P> {
    match (bound, lower) {
        (Bound::Unbounded, _) => Bound::Unbounded,
        (Bound::Included(k), true) => Bound::Included(pair(k, 0)),
        (Bound::Excluded(k), true) => Bound::Excluded(pair(k, u64::MAX)),
        (Bound::Included(k), false) => Bound::Included(pair(k, u64::MAX)),
        (Bound::Excluded(k), false) => Bound::Excluded(pair(k, 0)),
    }
}

/// Whether every key of an index has one length. Fixed 8- and 16-byte keys get node layouts
/// that store and compare keys as integers; other lengths use variable-length nodes and
/// reject keys of another length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KeyLen {
    /// Keys of any length up to the maximum.
    #[default]
    Variable,
    /// Every key has exactly this many bytes.
    Fixed(usize),
}

/// An ordered index from byte-string keys to tuple ids.
///
/// Implemented by every index kind; object safe, so `Box<dyn Index>` lets a program pick the
/// kind at run time. All methods take `&self` and are safe to call from many threads at once
/// unless the method says otherwise.
pub trait Index: Send + Sync {
    /// The kind's name, as the CLI and the benchmark spell it (for this crate's kinds,
    /// [`crate::IndexKind::name`]).
    fn kind(&self) -> &'static str;

    /// `true` for a unique (primary) index, `false` for a non-unique (secondary) one.
    fn is_unique(&self) -> bool;

    /// The longest key accepted, in bytes.
    fn max_key_len(&self) -> usize;

    /// Unique index: inserts `key -> tid` or replaces the key's tid, returning the previous
    /// one. Non-unique index: adds the pair, returning `Some(tid)` if it was already present
    /// (nothing changes) and `None` if it was added.
    fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, Error>;

    /// Unique index: the key's tid. Non-unique index: the key's smallest tid.
    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error>;

    /// Appends every tid of `key` to `out` in ascending order (at most one for a unique
    /// index).
    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error>;

    /// Unique index: removes the key and returns its tid. A non-unique index refuses with
    /// [`Error::Unsupported`]; use [`Index::remove_pair`].
    fn remove(&self, key: &[u8]) -> Result<Option<u64>, Error>;

    /// Removes the pair `(key, tid)` if present and says whether it was. On a unique index
    /// the key is removed only if it maps to `tid`.
    fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, Error>;

    /// Visits up to `limit` pairs within `(lower, upper)` in `direction` order, calling
    /// `visit(key, tid)` for each, and returns how many it visited. See the crate docs for
    /// the guarantees under concurrent writers.
    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, Error>;

    /// The number of pairs held. Exact when no writer runs concurrently.
    fn len(&self) -> usize;

    /// `len() == 0`.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the index holds, by part.
    fn memory(&self) -> MemoryUsage;

    /// Walks the whole structure and reports the first invariant that does not hold. Call it
    /// while no writer runs.
    fn check(&self) -> Result<(), Error>;

    /// Waits for background work the index started (a hybrid index's running merge) to
    /// finish, and reports an error it hit. Memory and timing measurements call it so they
    /// see the index at rest.
    fn quiesce(&self) -> Result<(), Error> {
        Ok(())
    }

    /// What the kind's own algorithm has done, for kinds that keep statistics (the elastic
    /// tree's [`crate::elastic::ElasticStats`], the hybrid index's
    /// [`crate::hybrid::HybridStats`]); `stats_as::<T>()` on a `dyn Index` gives them as
    /// their own type.
    fn stats(&self) -> Option<Box<dyn KindStats>> {
        None
    }
}
