//! [`IndexKind`], the kinds this crate builds, and [`KindOptions`], a kind's own options and
//! how to build it from them.

use std::any::Any;
use std::fmt;
use std::str::FromStr;

use crate::hybrid::static_index::StaticIndex;
use crate::hybrid::HybridOptions;
use crate::{BTreeIndex, Error, HybridIndex, Index, IndexOptions, KeyLen, SbTreeOptions};

/// The index kinds this crate builds. Kinds implemented elsewhere (the distributed index of
/// `elastree-dist`) implement [`Index`] without being listed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IndexKind {
    /// The concurrent B+-tree with optimistic lock coupling: the default.
    BTree,
    /// The elastic B+-tree: the B+-tree while it fits its byte budget; beyond that it turns
    /// leaves into SeqTree leaves (keys loaded from the table) to stay within it, and back
    /// as the data shrinks. Built from [`crate::elastic::ElasticOptions`].
    Elastic,
    /// The B+-tree with every leaf a SeqTree leaf of 128 keys (the paper's "SeqTree128"):
    /// the elastic tree's most compact form. Built from [`crate::elastic::SeqTreeOptions`].
    SeqTree,
    /// The hybrid index: a dynamic B+-tree stage taking every write in front of a compact,
    /// read-only static stage, merged in the background ([`crate::hybrid`]; built from
    /// [`HybridOptions`] or with their defaults).
    Hybrid,
    /// The hybrid index with LZ4-compressed static leaf blocks behind a CLOCK cache of
    /// decompressed ones.
    HybridCompressed,
    /// The static stage of the hybrid index on its own: a compact, read-only B+-tree
    /// bulk-loaded from sorted pairs ([`crate::IndexBuilder::build_sorted`]); writes are
    /// refused.
    Static,
    /// The SB-tree ([`crate::sbtree`]): time-series keys (mostly increasing, some late)
    /// appended to per-thread runs, converted into data blocks under a packed search layer.
    /// Fixed-width integer keys only (8 or 16 bytes); built from
    /// [`crate::SbTreeOptions`] or with their defaults.
    SbTree,
    /// The Bw-tree ([`crate::bwtree`]): a latch-free B+-tree whose pages are optimized pages
    /// changed only by prepending delta records through a mapping table. Built from
    /// [`crate::BwTreeOptions`] or with their defaults.
    BwTree,
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
        IndexKind::SbTree,
        IndexKind::BwTree,
    ];

    /// The kind's name as the CLI and the benchmark spell it.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::BTree => "btree",
            IndexKind::Elastic => "elastic",
            IndexKind::SeqTree => "seqtree",
            IndexKind::Hybrid => "hybrid",
            IndexKind::HybridCompressed => "hybrid-compressed",
            IndexKind::Static => "static",
            IndexKind::SbTree => "sbtree",
            IndexKind::BwTree => "bwtree",
        }
    }

    /// The key length an index of this kind gets when none is given: [`KeyLen::Variable`],
    /// or for a kind that takes only fixed-width keys (`sbtree`), 8 bytes.
    pub fn default_key_len(self) -> KeyLen {
        match self {
            IndexKind::SbTree => KeyLen::Fixed(8),
            _ => KeyLen::Variable,
        }
    }

    /// Whether the kind indexes keys of `key_len`: every kind takes every length but
    /// `sbtree`, which takes fixed 8- and 16-byte keys (and refuses to build for others).
    pub fn takes_key_len(self, key_len: KeyLen) -> bool {
        match self {
            IndexKind::SbTree => matches!(key_len, KeyLen::Fixed(8 | 16)),
            _ => true,
        }
    }

    /// Whether the kind takes writes: every kind but `static`, which is bulk-loaded by
    /// [`crate::IndexBuilder::build_sorted`] and refuses inserts and removes.
    pub fn is_writable(self) -> bool {
        self != IndexKind::Static
    }

    /// Whether the kind loads keys from the table (a [`crate::table::KeySource`] in its
    /// options) instead of storing them all.
    pub fn needs_key_source(self) -> bool {
        matches!(self, IndexKind::Elastic | IndexKind::SeqTree)
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
        IndexKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = IndexKind::ALL.iter().map(|k| k.name()).collect();
                Error::InvalidConfig(format!(
                    "unknown index kind {s:?} (known: {})",
                    names.join(", ")
                ))
            })
    }
}

/// A kind's own options, and how to build the kind from them and the options every kind
/// shares ([`IndexOptions`]). [`crate::IndexBuilder::new`] takes any of them, so a new kind
/// brings its own options type instead of adding fields to the builder.
///
/// An [`IndexKind`] is itself the options of a kind with its defaults; the kinds whose
/// options have no default (`elastic` and `seqtree` need a key source) refuse to build from
/// the bare kind and name the options type to use.
pub trait KindOptions: Any + fmt::Debug + Send + Sync {
    /// The kind these options build.
    fn kind(&self) -> IndexKind;

    /// Builds an empty index, or says which option cannot be honoured.
    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error>;

    /// Builds the index holding `pairs`, strictly ascending by (key, tid) (unique: keys
    /// strictly ascending). By default the index is built empty and the pairs inserted one
    /// by one, stopping at the first error; a kind that bulk-loads overrides it.
    fn build_sorted(
        &self,
        options: &IndexOptions,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Box<dyn Index>, Error> {
        insert_all(self.build(options)?, pairs)
    }
}

/// Inserts `pairs` into `index` one by one, stopping at the first error.
fn insert_all(
    index: Box<dyn Index>,
    pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
) -> Result<Box<dyn Index>, Error> {
    for (key, tid) in pairs {
        index.insert(&key, tid)?;
    }
    Ok(index)
}

impl KindOptions for IndexKind {
    fn kind(&self) -> IndexKind {
        *self
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        match self {
            IndexKind::BTree => Ok(Box::new(BTreeIndex::new(options)?)),
            IndexKind::Elastic => Err(Error::InvalidConfig(
                "the elastic kind loads keys from the table and keeps a byte budget: build it \
                 from ElasticOptions::new(budget, key_source)"
                    .into(),
            )),
            IndexKind::SeqTree => Err(Error::InvalidConfig(
                "the seqtree kind loads keys from the table: build it from \
                 SeqTreeOptions::new(key_source)"
                    .into(),
            )),
            IndexKind::Hybrid | IndexKind::HybridCompressed => {
                HybridOptions::default().for_kind(*self).build(options)
            }
            IndexKind::Static => Ok(Box::new(StaticIndex::new(options)?)),
            IndexKind::SbTree => SbTreeOptions::default().build(options),
            IndexKind::BwTree => crate::BwTreeOptions::default().build(options),
        }
    }

    fn build_sorted(
        &self,
        options: &IndexOptions,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Box<dyn Index>, Error> {
        match self {
            IndexKind::Static => Ok(Box::new(StaticIndex::from_sorted(options, pairs)?)),
            _ => insert_all(self.build(options)?, pairs),
        }
    }
}

impl KindOptions for HybridOptions {
    fn kind(&self) -> IndexKind {
        match self.compression {
            crate::hybrid::Compression::None => IndexKind::Hybrid,
            crate::hybrid::Compression::Lz4 => IndexKind::HybridCompressed,
        }
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        Ok(Box::new(HybridIndex::new(options, self)?))
    }
}
