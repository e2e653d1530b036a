//! elastree's own kinds behind [`BenchIndex`], and the options they are built with.

use std::ops::Bound;
use std::str::FromStr;
use std::sync::Arc;

use elastree::bwtree::{BwCursor, BwTreeIndex};
use elastree::{
    BTreeOptions, BwTreeOptions, Direction, ElasticOptions, Index, IndexBuilder, IndexKind, KeyLen,
    KindStats, PageOrganization, SeqTreeOptions,
};
use elastree_dist::{DistClient, DistKind};

use super::{reads_only, width_check, BenchCursor, BenchIndex, LogicalCursor};
use crate::cluster::Owned;
use crate::keys::{Key, KeySet, KeySetKind, KeyWidth};
use crate::workload::Workload;

/// The byte budget an elastic index gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// This many bytes per key of the key set (the default: 12, about half of what the
    /// B+-tree needs for random 8-byte keys, so the elastic tree must compact).
    PerKey(f64),
    /// Exactly this many bytes.
    Bytes(usize),
}

impl Default for Budget {
    fn default() -> Self {
        Budget::PerKey(12.0)
    }
}

impl Budget {
    /// The budget in bytes for a key set of `n` keys (at least elastree's minimum).
    pub fn bytes(self, n: usize) -> usize {
        let bytes = match self {
            Budget::PerKey(per_key) => (per_key * n as f64) as usize,
            Budget::Bytes(bytes) => bytes,
        };
        bytes.max(elastree::elastic::MIN_BUDGET)
    }
}

impl FromStr for Budget {
    type Err = String;

    /// `12/key` (bytes per key) or a byte count with an optional K, M or G suffix.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("budget {s:?}: expected bytes (e.g. 64M) or bytes per key (12/key)");
        if let Some(per_key) = s.strip_suffix("/key") {
            let v: f64 = per_key.parse().map_err(|_| bad())?;
            return (v > 0.0).then_some(Budget::PerKey(v)).ok_or_else(bad);
        }
        parse_bytes(s).map(Budget::Bytes).map_err(|_| bad())
    }
}

/// Parses a byte count with an optional K, M or G suffix (powers of 1024), as `--budget`
/// takes it in `elastree bench` and `elastree shell`.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let (digits, scale) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 1usize << 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a byte count (e.g. 65536, 64K, 64M, 1G)"))
}

/// Options of the SeqTree leaves of elastree's elastic and seqtree kinds; `None` leaves the
/// library's default (see [`SeqTreeOptions::tree_levels`] and [`SeqTreeOptions::breathing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SeqTreeTuning {
    /// BlindiTree levels of every SeqTree leaf.
    pub tree_levels: Option<u8>,
    /// Breathing slack: spare tuple-id slots per SeqTree leaf.
    pub breathing: Option<usize>,
}

impl SeqTreeTuning {
    /// `L<levels> s<breathing>`, with `default` for an option left to the library (for
    /// labels and reports).
    pub fn label(self) -> String {
        let show = |v: Option<String>| v.unwrap_or_else(|| "default".to_string());
        format!(
            "L{} s{}",
            show(self.tree_levels.map(|l| l.to_string())),
            show(self.breathing.map(|s| s.to_string()))
        )
    }
}

/// The key length elastree indexes for keys of `width` are built with.
pub fn key_len_of(width: KeyWidth) -> KeyLen {
    match width {
        KeyWidth::Fixed8 => KeyLen::Fixed(8),
        KeyWidth::Fixed16 => KeyLen::Fixed(16),
        KeyWidth::Variable => KeyLen::Variable,
    }
}

/// An elastree index kind through its public [`Index`] trait. 8-byte key sets are stored as
/// big-endian bytes in an index built with [`KeyLen::Fixed`]`(8)`, 16-byte ones in an index
/// built with [`KeyLen::Fixed`]`(16)`, all others with [`KeyLen::Variable`]. The distributed
/// kinds ([`Elastree::on_cluster`]) take every key length and store the same big-endian
/// bytes.
pub struct Elastree {
    index: Held,
    /// The kind's name.
    name: &'static str,
    width: KeyWidth,
    /// Why the kind cannot hold the key set's keys (a kind that takes only some key lengths,
    /// built for its default length so the adapter exists).
    refused: Option<String>,
    /// The options the index was built with (`None` on a cluster); the `static` kind is
    /// rebuilt by its bulk load.
    builder: Option<IndexBuilder>,
}

/// The index an [`Elastree`] adapter drives.
enum Held {
    /// Built by [`IndexBuilder`], in this process.
    Local(Box<dyn Index>),
    /// A Bw-tree, held as its own type for its cursors.
    BwTree(Box<BwTreeIndex>),
    /// A client of an index on a Redis Cluster, deleted from the cluster when dropped.
    Cluster(Owned),
}

impl Elastree {
    /// Drives the distributed index of `client` (of distributed `kind`) for the keys of
    /// `keys`; the index is deleted from the cluster when the adapter is dropped.
    pub fn on_cluster(kind: DistKind, keys: &KeySet, client: Box<dyn DistClient>) -> Self {
        Self {
            index: Held::Cluster(Owned::new(client)),
            name: kind.name(),
            width: keys.width(),
            refused: None,
            builder: None,
        }
    }

    /// The index.
    #[inline]
    fn index(&self) -> &dyn Index {
        match &self.index {
            Held::Local(index) => index.as_ref(),
            Held::BwTree(index) => index.as_ref(),
            Held::Cluster(owned) => owned.client(),
        }
    }

    /// Builds the index of `builder` (a Bw-tree as its own type, for its cursors, whether
    /// the builder has Bw-tree options or only the kind, which means their defaults).
    fn build_held(builder: &IndexBuilder) -> Result<Held, elastree::Error> {
        let defaults = BwTreeOptions::default();
        let own = match builder.kind_options_as::<BwTreeOptions>() {
            Some(own) => own,
            None if builder.kind() == IndexKind::BwTree => &defaults,
            None => return builder.build().map(Held::Local),
        };
        Ok(Held::BwTree(Box::new(BwTreeIndex::new(
            builder.options(),
            own,
        )?)))
    }

    /// Builds a unique index of `kind` for the keys of `keys` with the kind's default node
    /// sizes; kinds with indirect keys load keys from `keys`, and the elastic kind gets
    /// `budget`.
    pub fn new(kind: IndexKind, keys: &KeySet, budget: Budget) -> Result<Self, String> {
        Self::with_tuning(kind, keys, budget, SeqTreeTuning::default())
    }

    /// [`Elastree::new`] with the SeqTree-leaf options of `tuning` (for the elastic and
    /// seqtree kinds; the B+-tree has no SeqTree leaves and refuses a tuning).
    pub fn with_tuning(
        kind: IndexKind,
        keys: &KeySet,
        budget: Budget,
        tuning: SeqTreeTuning,
    ) -> Result<Self, String> {
        let width = keys.width();
        let key_len = key_len_of(width);
        let table = || Arc::new(keys.clone());
        let builder = match kind {
            IndexKind::Elastic => {
                let mut options = ElasticOptions::new(budget.bytes(keys.len()), table());
                options.tree_levels = tuning.tree_levels;
                options.breathing = tuning.breathing.unwrap_or(options.breathing);
                IndexBuilder::new(options)
            }
            IndexKind::SeqTree => {
                let mut options = SeqTreeOptions::new(table());
                options.tree_levels = tuning.tree_levels;
                options.breathing = tuning.breathing.unwrap_or(options.breathing);
                IndexBuilder::new(options)
            }
            _ if tuning != SeqTreeTuning::default() => {
                return Err(format!(
                    "elastree {kind} has no SeqTree leaves to tune ({})",
                    tuning.label()
                ))
            }
            _ => IndexBuilder::new(kind),
        };
        let refused = (!kind.takes_key_len(key_len)).then(|| {
            format!(
                "elastree {kind} indexes fixed-width integer keys (8 or 16 bytes); key set {} has \
                 {width:?} keys",
                keys.kind
            )
        });
        let builder = builder.key_len(if refused.is_some() {
            kind.default_key_len()
        } else {
            key_len
        });
        let index =
            Self::build_held(&builder).map_err(|e| format!("building elastree {kind}: {e}"))?;
        Ok(Self {
            index,
            name: kind.name(),
            width,
            refused,
            builder: Some(builder),
        })
    }

    /// The tree kinds built of pages, each in the page organizations it takes (the first
    /// its default): the B+-tree in all three, the Bw-tree in the two optimized ones.
    pub const PAGE_TREES: &'static [(IndexKind, &'static [PageOrganization])] = &[
        (
            IndexKind::BTree,
            &[
                PageOrganization::PrefixSplit,
                PageOrganization::Base,
                PageOrganization::Prefix,
            ],
        ),
        (
            IndexKind::BwTree,
            &[
                PageOrganization::PrefixSplit,
                PageOrganization::Base,
                PageOrganization::Prefix,
            ],
        ),
    ];

    /// The name of tree `kind` in page organization `pages` (`btree-base`, `bwtree-prefix`).
    pub fn pages_name(kind: IndexKind, pages: PageOrganization) -> &'static str {
        match (kind, pages) {
            (IndexKind::BwTree, PageOrganization::Base) => "bwtree-base",
            (IndexKind::BwTree, PageOrganization::Prefix) => "bwtree-prefix",
            (IndexKind::BwTree, PageOrganization::PrefixSplit) => "bwtree-prefix-split",
            (_, PageOrganization::Base) => "btree-base",
            (_, PageOrganization::Prefix) => "btree-prefix",
            (_, PageOrganization::PrefixSplit) => "btree-prefix-split",
        }
    }

    /// A unique tree of `kind` (`btree` or `bwtree`) in page organization `pages` for the
    /// keys of `keys` (the B+-tree's fixed 8- and 16-byte keys keep their integer-compared
    /// nodes whatever the organization).
    pub fn with_pages(
        kind: IndexKind,
        pages: PageOrganization,
        keys: &KeySet,
    ) -> Result<Self, String> {
        let name = Self::pages_name(kind, pages);
        let builder = match kind {
            IndexKind::BTree => IndexBuilder::new(BTreeOptions::default().pages(pages)),
            IndexKind::BwTree => IndexBuilder::new(BwTreeOptions {
                pages,
                ..BwTreeOptions::default()
            }),
            _ => {
                return Err(format!(
                    "elastree {kind} has no page organizations ({name})"
                ))
            }
        }
        .key_len(key_len_of(keys.width()));
        let index =
            Self::build_held(&builder).map_err(|e| format!("building elastree {name}: {e}"))?;
        Ok(Self {
            index,
            name,
            width: keys.width(),
            refused: None,
            builder: Some(builder),
        })
    }

    /// Whether `key` has a length this index could hold. A fixed-length elastree index
    /// refuses other lengths with an error; for a lookup or a removal such a key is simply
    /// absent.
    #[inline]
    fn may_hold(&self, key: Key<'_>) -> bool {
        match (self.width, key) {
            (KeyWidth::Fixed16, Key::Bytes(b)) => b.len() == 16,
            _ => true,
        }
    }
}

impl BenchIndex for Elastree {
    fn name(&self) -> &str {
        self.name
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        if let Some(why) = &self.refused {
            return Err(why.clone());
        }
        width_check(self.name(), self.width, keys)
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        if !self.loads_in_bulk() {
            return Ok(());
        }
        reads_only(
            workload,
            "the static index is read-only (bulk-loaded from sorted keys)",
        )
    }

    fn loads_in_bulk(&self) -> bool {
        self.builder
            .as_ref()
            .is_some_and(|b| !b.kind().is_writable())
    }

    fn bulk_load(&mut self, keys: &KeySet) -> Result<(), String> {
        let Some(builder) = &self.builder else {
            return Err(format!("{} does not load in bulk", self.name));
        };
        let mut pairs = keys.sorted_order().into_iter().map(|i| {
            let key = keys.key(i as usize).with_bytes(<[u8]>::to_vec);
            (key, u64::from(i))
        });
        self.index = Held::Local(
            builder
                .build_sorted(&mut pairs)
                .map_err(|e| format!("bulk-loading elastree {}: {e}", self.name))?,
        );
        Ok(())
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        if let Err(e) = key.with_bytes(|k| self.index().insert(k, value)) {
            panic!("elastree {} insert failed: {e}", self.name);
        }
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        if !self.may_hold(key) {
            return None;
        }
        key.with_bytes(|k| self.index().get(k))
            .unwrap_or_else(|e| panic!("elastree {} get failed: {e}", self.name))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let width = self.width;
        start
            .with_bytes(|k| {
                self.index().scan(
                    Bound::Included(k),
                    Bound::Unbounded,
                    Direction::Ascending,
                    n,
                    &mut |key, tid| visit(Key::from_bytes(width, key), tid),
                )
            })
            .unwrap_or_else(|e| panic!("elastree {} scan failed: {e}", self.name))
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let width = self.width;
        start
            .with_bytes(|k| {
                self.index().scan(
                    Bound::Unbounded,
                    Bound::Included(k),
                    Direction::Descending,
                    n,
                    &mut |key, tid| visit(Key::from_bytes(width, key), tid),
                )
            })
            .unwrap_or_else(|e| panic!("elastree {} descending scan failed: {e}", self.name))
    }

    /// The Bw-tree's own cursor ([`BwCursor`]; `physiological` `false` turns its physical
    /// part off, so that both variants run the same code); the logical cursor for every
    /// other kind.
    fn cursor<'a>(&'a self, start: Key<'_>, physiological: bool) -> Box<dyn BenchCursor + 'a> {
        let Held::BwTree(index) = &self.index else {
            return Box::new(LogicalCursor::new(self, start));
        };
        let mut cursor = start
            .with_bytes(|k| {
                index.cursor(Bound::Included(k), Bound::Unbounded, Direction::Ascending)
            })
            .unwrap_or_else(|e| panic!("elastree {} cursor failed: {e}", self.name));
        cursor.set_physiological(physiological);
        Box::new(BwBenchCursor {
            cursor,
            width: self.width,
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        if !self.may_hold(key) {
            return false;
        }
        key.with_bytes(|k| self.index().remove(k))
            .unwrap_or_else(|e| panic!("elastree {} remove failed: {e}", self.name))
            .is_some()
    }

    fn self_reported_bytes(&self) -> Option<usize> {
        // A distributed tree reports what it takes on the cluster's masters (one copy;
        // replicas hold more), as Redis counts it per key.
        Some(self.index().memory().total()).filter(|&b| b > 0)
    }

    fn quiesce(&self) {
        if let Err(e) = self.index().quiesce() {
            panic!("elastree {} background work failed: {e}", self.name);
        }
    }

    fn stats(&self) -> Option<Box<dyn KindStats>> {
        self.index().stats()
    }
}

/// A [`BwCursor`] as a [`BenchCursor`]: a request reads batches (each at most a page) until
/// it has its keys.
struct BwBenchCursor<'a> {
    cursor: BwCursor<'a>,
    width: KeyWidth,
}

impl BenchCursor for BwBenchCursor<'_> {
    fn next(&mut self, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let width = self.width;
        let mut handed = 0;
        while handed < n {
            let got = self.cursor.next_batch(n - handed, &mut |key, tid| {
                visit(Key::from_bytes(width, key), tid)
            });
            if got == 0 {
                break;
            }
            handed += got;
        }
        handed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Bw-tree kind with its defaults is held as its own type, so that the cursor mixes
    /// measure its physiological cursors, as they do with explicit Bw-tree options.
    #[test]
    fn a_default_bwtree_is_held_for_its_cursors() {
        let keys = KeySetKind::Rand64.generate(100, 7);
        let index = Elastree::new(IndexKind::BwTree, &keys, Budget::default()).expect("bwtree");
        assert!(matches!(index.index, Held::BwTree(_)));
        let btree = Elastree::new(IndexKind::BTree, &keys, Budget::default()).expect("btree");
        assert!(matches!(btree.index, Held::Local(_)));
    }
}
