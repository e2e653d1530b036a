//! [`KindArg`]: what `--index` names, one of the library's kinds or a distributed one.

use std::fmt;
use std::str::FromStr;

use elastree::IndexKind;
use elastree_dist::DistKind;

/// An index kind the CLI builds (`--index`): the library's own, or one that lives on a
/// Redis Cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KindArg {
    /// A kind `elastree::IndexBuilder` builds.
    Local(IndexKind),
    /// A kind of `elastree-dist`, opened on a cluster (`--cluster`).
    Dist(DistKind),
}

impl KindArg {
    /// Every kind, the library's first.
    pub fn all() -> impl Iterator<Item = KindArg> {
        let local = IndexKind::ALL.iter().map(|&k| KindArg::Local(k));
        local.chain(DistKind::ALL.iter().map(|&k| KindArg::Dist(k)))
    }

    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            KindArg::Local(kind) => kind.name(),
            KindArg::Dist(kind) => kind.name(),
        }
    }

    /// The distributed kind, if it is one.
    pub fn dist(self) -> Option<DistKind> {
        match self {
            KindArg::Dist(kind) => Some(kind),
            KindArg::Local(_) => None,
        }
    }
}

impl Default for KindArg {
    fn default() -> Self {
        KindArg::Local(IndexKind::BTree)
    }
}

impl fmt::Display for KindArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KindArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        KindArg::all().find(|kind| kind.name() == s).ok_or_else(|| {
            let names: Vec<_> = KindArg::all().map(KindArg::name).collect();
            format!("unknown index kind {s:?} (known: {})", names.join(", "))
        })
    }
}
