//! The public face of every index kind: the [`Index`] trait, [`IndexKind`], the
//! [`IndexBuilder`] and the typed [`Error`].

use std::fmt;
use std::ops::Bound;
use std::str::FromStr;

use crate::mem::MemoryUsage;

pub use crate::btree::{BTreeIndex, ElasticIndex};
use crate::elastic::ElasticOptions;
use crate::hybrid::static_index::StaticIndex;
pub use crate::hybrid::HybridIndex;
use crate::hybrid::HybridOptions;
use crate::table::KeySource;
use std::sync::Arc;

/// Default maximum key length in bytes (1 KiB).
pub const DEFAULT_MAX_KEY_LEN: usize = 1024;

/// The largest maximum key length an index accepts (32 KiB). Variable-length nodes store key
/// lengths and offsets in 16 bits, and a node must hold at least two maximal keys.
pub const MAX_KEY_LEN_LIMIT: usize = 32 * 1024;

/// Every way an index operation or build can fail. An operation that returns an error has
/// changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key is longer than the index's configured maximum.
    #[error("key of {len} bytes exceeds the maximum key length of {max} bytes")]
    KeyTooLong {
        /// Length of the rejected key.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The index was built for fixed-length keys and this key has another length.
    #[error("key of {len} bytes does not match the index's fixed key length of {expected} bytes")]
    KeyLenMismatch {
        /// Length of the rejected key.
        len: usize,
        /// The fixed key length of the index.
        expected: usize,
    },
    /// The operation does not apply to this index (for example `remove(key)` on a
    /// non-unique index, which removes pairs).
    #[error("{operation} is not supported here: {reason}")]
    Unsupported {
        /// The operation that was refused.
        operation: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The builder's options cannot be honoured.
    #[error("invalid index configuration: {0}")]
    InvalidConfig(String),
    /// [`Index::check`] found a structural invariant that does not hold.
    #[error("invariant violated: {0}")]
    Corrupt(String),
    /// A distributed index could not complete the operation within its timeout (the cluster
    /// is down, unreachable or failing over), or a write was applied on its master but not
    /// confirmed by the replicas it must wait for. Whether a write that failed this way took
    /// effect is unknown; writes are idempotent, so retrying it is safe.
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
}

/// The direction of a range scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Smallest (key, tid) first.
    Ascending,
    /// Largest (key, tid) first.
    Descending,
}

/// The index kinds elastree implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IndexKind {
    /// The concurrent B+-tree with optimistic lock coupling: the default.
    BTree,
    /// The elastic B+-tree: the B+-tree while it fits its byte budget; beyond that it turns
    /// leaves into SeqTree leaves (keys loaded from the table) to stay within it, and back
    /// as the data shrinks. Needs [`IndexBuilder::key_source`] and
    /// [`IndexBuilder::budget`].
    Elastic,
    /// The B+-tree with every leaf a SeqTree leaf of 128 keys (the paper's "SeqTree128"):
    /// the elastic tree's most compact form. Needs [`IndexBuilder::key_source`].
    SeqTree,
    /// The hybrid index: a dynamic B+-tree stage taking every write in front of a compact,
    /// read-only static stage, merged in the background ([`crate::hybrid`]; options in
    /// [`IndexBuilder::hybrid_options`]).
    Hybrid,
    /// The hybrid index with LZ4-compressed static leaf blocks behind a CLOCK cache of
    /// decompressed ones.
    HybridCompressed,
    /// The static stage of the hybrid index on its own: a compact, read-only B+-tree
    /// bulk-loaded from sorted pairs ([`IndexBuilder::build_sorted`]); writes are refused.
    Static,
    /// The distributed B+-tree on a Redis Cluster (crate `elastree-dist`): co-located
    /// sub-trees run as Redis Functions, the top cached in every client. Not built by
    /// [`IndexBuilder`]: connect with `elastree_dist::DistIndex::connect`.
    Dist,
    /// The distributed tree's baseline: every node its own Redis key, traversed from the
    /// client one node per round trip (crate `elastree-dist`).
    DistBaseline,
}

impl IndexKind {
    /// Every kind, in the order the CLI lists them.
    pub const ALL: &'static [IndexKind] = &[
        IndexKind::BTree,
        IndexKind::Elastic,
        IndexKind::SeqTree,
        IndexKind::Hybrid,
        IndexKind::HybridCompressed,
        IndexKind::Static,
    ];

    /// The kinds that live on a Redis Cluster (crate `elastree-dist`), which
    /// [`IndexBuilder`] does not build and [`IndexKind::ALL`] does not list.
    pub const DISTRIBUTED: &'static [IndexKind] = &[IndexKind::Dist, IndexKind::DistBaseline];

    /// The kind's name as the CLI and the benchmark spell it.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::BTree => "btree",
            IndexKind::Elastic => "elastic",
            IndexKind::SeqTree => "seqtree",
            IndexKind::Hybrid => "hybrid",
            IndexKind::HybridCompressed => "hybrid-compressed",
            IndexKind::Static => "static",
            IndexKind::Dist => "dist",
            IndexKind::DistBaseline => "dist-baseline",
        }
    }

    /// Whether the kind takes writes: every kind but `static`, which is bulk-loaded by
    /// [`IndexBuilder::build_sorted`] and refuses inserts and removes.
    pub fn is_writable(self) -> bool {
        self != IndexKind::Static
    }

    /// Whether the kind loads keys from the table ([`IndexBuilder::key_source`]) instead of
    /// storing them all.
    pub fn needs_key_source(self) -> bool {
        matches!(self, IndexKind::Elastic | IndexKind::SeqTree)
    }

    /// Whether the kind lives on a Redis Cluster ([`IndexKind::DISTRIBUTED`]).
    pub fn is_distributed(self) -> bool {
        IndexKind::DISTRIBUTED.contains(&self)
    }
}

impl fmt::Display for IndexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let known = || IndexKind::ALL.iter().chain(IndexKind::DISTRIBUTED).copied();
        known().find(|kind| kind.name() == s).ok_or_else(|| {
            let names: Vec<_> = known().map(|k| k.name()).collect();
            Error::InvalidConfig(format!(
                "unknown index kind {s:?} (known: {})",
                names.join(", ")
            ))
        })
    }
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
    /// Which kind this is.
    fn kind(&self) -> IndexKind;

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

    /// What the elasticity algorithm has done: `Some` for the `elastic` kind only.
    fn elastic_stats(&self) -> Option<crate::elastic::ElasticStats> {
        None
    }

    /// Merge counts and timings and stage sizes: `Some` for the hybrid kinds only.
    fn hybrid_stats(&self) -> Option<crate::hybrid::HybridStats> {
        None
    }
}

/// The table an index with indirect keys loads keys from.
#[derive(Clone)]
pub(crate) struct SharedKeySource(pub(crate) Arc<dyn KeySource>);

impl fmt::Debug for SharedKeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySource")
    }
}

/// Options for building an index; [`IndexBuilder::build`] validates them.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    pub(crate) kind: IndexKind,
    pub(crate) unique: bool,
    pub(crate) max_key_len: usize,
    pub(crate) key_len: KeyLen,
    pub(crate) leaf_capacity: Option<usize>,
    pub(crate) inner_capacity: Option<usize>,
    pub(crate) key_source: Option<SharedKeySource>,
    pub(crate) elastic: Option<ElasticOptions>,
    pub(crate) tree_levels: Option<u8>,
    pub(crate) breathing: Option<usize>,
    pub(crate) hybrid: Option<HybridOptions>,
}

impl IndexBuilder {
    /// A unique index of `kind` with variable-length keys of at most
    /// [`DEFAULT_MAX_KEY_LEN`] bytes and the kind's default node sizes.
    pub fn new(kind: IndexKind) -> Self {
        Self {
            kind,
            unique: true,
            max_key_len: DEFAULT_MAX_KEY_LEN,
            key_len: KeyLen::Variable,
            leaf_capacity: None,
            inner_capacity: None,
            key_source: None,
            elastic: None,
            tree_levels: None,
            breathing: None,
            hybrid: None,
        }
    }

    /// Where an index with indirect keys (`elastic`, `seqtree`) loads the key of a tid: the
    /// table the index indexes. It must return, for every tid in the index, the key the tid
    /// was inserted with, for as long as the pair is indexed.
    pub fn key_source(mut self, keys: Arc<dyn KeySource>) -> Self {
        self.key_source = Some(SharedKeySource(keys));
        self
    }

    /// The byte budget of an `elastic` index, with the paper's other defaults.
    pub fn budget(mut self, bytes: usize) -> Self {
        let mut options = self
            .elastic
            .take()
            .unwrap_or_else(|| ElasticOptions::new(bytes));
        options.budget = bytes;
        self.elastic = Some(options);
        self
    }

    /// Every option of the elasticity algorithm (see [`ElasticOptions`]).
    pub fn elastic_options(mut self, options: ElasticOptions) -> Self {
        self.elastic = Some(options);
        self
    }

    /// BlindiTree levels of SeqTree leaves (0 to 8; default 2 for 128-key leaves, more for
    /// larger ones).
    pub fn tree_levels(mut self, levels: u8) -> Self {
        self.tree_levels = Some(levels);
        self
    }

    /// Breathing slack of SeqTree leaves: spare tid slots per leaf (default 4).
    pub fn breathing(mut self, slots: usize) -> Self {
        self.breathing = Some(slots);
        self
    }

    /// Every option of a hybrid index (see [`HybridOptions`]; the default has the paper's
    /// settings: merge at a 10:1 static-to-dynamic ratio, merge everything, in the
    /// background).
    pub fn hybrid_options(mut self, options: HybridOptions) -> Self {
        self.hybrid = Some(options);
        self
    }

    /// Unique (`true`, the default) or non-unique (`false`).
    pub fn unique(mut self, unique: bool) -> Self {
        self.unique = unique;
        self
    }

    /// The longest key accepted (default [`DEFAULT_MAX_KEY_LEN`], at most
    /// [`MAX_KEY_LEN_LIMIT`]); longer keys are refused with [`Error::KeyTooLong`].
    pub fn max_key_len(mut self, bytes: usize) -> Self {
        self.max_key_len = bytes;
        self
    }

    /// Declares that every key has one length: [`KeyLen::Fixed`]`(8)` and `(16)` select the
    /// integer-compared node layouts.
    pub fn key_len(mut self, key_len: KeyLen) -> Self {
        self.key_len = key_len;
        self
    }

    /// The most entries a leaf node holds. Small values (down to 4) make splits and merges
    /// constant, which is what tests want; the default suits production.
    pub fn leaf_capacity(mut self, entries: usize) -> Self {
        self.leaf_capacity = Some(entries);
        self
    }

    /// The most separators an inner node holds (at least 4).
    pub fn inner_capacity(mut self, entries: usize) -> Self {
        self.inner_capacity = Some(entries);
        self
    }

    /// Builds the index, or says which option cannot be honoured.
    pub fn build(&self) -> Result<Box<dyn Index>, Error> {
        match self.kind {
            IndexKind::BTree => Ok(Box::new(BTreeIndex::new(self)?)),
            IndexKind::Elastic | IndexKind::SeqTree => Ok(Box::new(ElasticIndex::new(self)?)),
            IndexKind::Hybrid | IndexKind::HybridCompressed => {
                Ok(Box::new(HybridIndex::new(self)?))
            }
            IndexKind::Static => Ok(Box::new(StaticIndex::new(self)?)),
            IndexKind::Dist | IndexKind::DistBaseline => Err(Error::Unsupported {
                operation: "IndexBuilder::build",
                reason: "a distributed index lives on a Redis Cluster: connect with elastree_dist::DistIndex::connect",
            }),
        }
    }

    /// Builds the index holding `pairs`, which must be strictly ascending by (key, tid)
    /// (unique: keys strictly ascending). The `static` kind bulk-loads them
    /// ([`StaticIndex::from_sorted`]); every other kind is built empty and the pairs
    /// inserted one by one, stopping at the first error.
    pub fn build_sorted(
        &self,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Box<dyn Index>, Error> {
        match self.kind {
            IndexKind::Static => Ok(Box::new(StaticIndex::from_sorted(self, pairs)?)),
            _ => {
                let index = self.build()?;
                for (key, tid) in pairs {
                    index.insert(&key, tid)?;
                }
                Ok(index)
            }
        }
    }

    /// Checks the options that every kind shares.
    pub(crate) fn validate_common(&self) -> Result<(), Error> {
        if self.max_key_len == 0 || self.max_key_len > MAX_KEY_LEN_LIMIT {
            return Err(Error::InvalidConfig(format!(
                "max key length must be between 1 and {MAX_KEY_LEN_LIMIT} bytes, not {}",
                self.max_key_len
            )));
        }
        if let KeyLen::Fixed(len) = self.key_len {
            if len == 0 || len > self.max_key_len {
                return Err(Error::InvalidConfig(format!(
                    "fixed key length {len} must be between 1 and the maximum key length {}",
                    self.max_key_len
                )));
            }
        }
        Ok(())
    }
}
