//! [`DistKind`]: the two distributed trees, by the names the CLI and the benchmark use.

use std::fmt;
use std::str::FromStr;

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
