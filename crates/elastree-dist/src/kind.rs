//! [`DistKind`]: the two distributed trees, by the names the CLI and the benchmark use.

use std::fmt;
use std::str::FromStr;

use crate::baseline::BaselineIndex;
use crate::{DistError, DistIndex, DistOptions};

/// The index kinds that live on a Redis Cluster. They implement [`elastree::Index`] but are
/// not built by [`elastree::IndexBuilder`]: connect with [`crate::DistIndex::connect`] or
/// [`crate::baseline::BaselineIndex::connect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DistKind {
    /// The distributed B+-tree: co-located sub-trees run as Redis Functions, the top cached
    /// in every client ([`crate::DistIndex`]).
    Tree,
    /// The paper's baseline: every node its own Redis key, traversed from the client one
    /// node per round trip ([`crate::baseline::BaselineIndex`]).
    Baseline,
}

impl DistKind {
    /// Both kinds, in the order the CLI lists them.
    pub const ALL: &'static [DistKind] = &[DistKind::Tree, DistKind::Baseline];

    /// The kind's name as the CLI and the benchmark spell it.
    pub fn name(self) -> &'static str {
        match self {
            DistKind::Tree => "dist",
            DistKind::Baseline => "dist-baseline",
        }
    }
}

impl fmt::Display for DistKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DistKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        DistKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| {
                format!("unknown distributed index kind {s:?} (known: dist, dist-baseline)")
            })
    }
}

/// A client of either distributed kind: the [`elastree::Index`] operations (its counters are
/// the index's `stats()`, a [`crate::DistStats`]) and deletion of the index from the cluster.
pub trait DistClient: elastree::Index {
    /// Deletes the index and every key it stored from the cluster.
    fn destroy(self: Box<Self>) -> Result<(), DistError>;
}

impl DistClient for DistIndex {
    fn destroy(self: Box<Self>) -> Result<(), DistError> {
        DistIndex::destroy(*self)
    }
}

impl DistClient for BaselineIndex {
    fn destroy(self: Box<Self>) -> Result<(), DistError> {
        BaselineIndex::destroy(*self)
    }
}

/// Opens (or creates) the index `options.name` of `kind` on the cluster that `seeds` reach.
pub fn open(
    kind: DistKind,
    seeds: &[String],
    options: DistOptions,
) -> Result<Box<dyn DistClient>, DistError> {
    Ok(match kind {
        DistKind::Tree => Box::new(DistIndex::connect(seeds, options)?),
        DistKind::Baseline => Box::new(BaselineIndex::connect(seeds, options)?),
    })
}
