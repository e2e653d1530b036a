//! [`BwTreeIndex`]: the Bw-tree as an [`Index`], with its own options ([`BwTreeOptions`]).

use std::ops::Bound;

use std::sync::atomic::Ordering::Relaxed;

use super::key::Key;
use super::shim;
use super::{BwCursor, BwTree, PrefixCursor};
use crate::btree::{DEFAULT_PAGE_BYTES, MIN_PAGE_BYTES};
use crate::index::{check_key, pair_bound, Direction, Index, KeyLen};
use crate::kind::KindOptions;
use crate::mem::MemoryUsage;
use crate::node::page::{MidWidth, PageConfig, MAX_PAGE_KEY_LEN};
use crate::stats::KindStats;
use crate::{Error, IndexKind, IndexOptions, PageOrganization};

/// Deltas a leaf's chain may hold before it is consolidated (inner pages are consolidated as
/// soon as a delta lands on them: see `consolidate.rs`'s `INNER_CHAIN`). Each delta a lookup
/// passes is a dependent cache miss (the profile of lookups after a load: most of the walk's
/// time is the load of a delta's kind), each consolidation copies the page. Measured with
/// `examples/bw_chain.rs` (1M random 8-byte keys, 2 threads, two runs, Mops/s load / lookup):
/// chain 2: 0.155 / 0.649 and 0.126 / 0.623; 4: 0.228 / 0.667 and 0.233 / 0.785; 8: 0.264 /
/// 0.548 and 0.260 / 0.370; 16: 0.304 / 0.476 and 0.215 / 0.308. 4 gives the fastest lookups
/// within 15% of the best load. Measured again once consolidation patched pages (four runs on a
/// busy machine, as ratios to the B+-tree of the same run, load / lookup): chain 2: 0.36 /
/// 0.73, 0.46 / 0.96, 0.28 / 0.75, 0.33 / 0.67; 4: 0.42 / 0.65, 0.57 / 0.61, 0.31 / 0.58, 0.38
/// / 0.58 (3 lies between). Chain 2 now gives about a quarter faster lookups for a seventh
/// slower loads; 4 is kept, loads being the larger gap. Once lookups consolidate the chains
/// they walk (`consolidate.rs`'s `READ_CHAIN`), a longer chain costs a read-mostly phase
/// little: `examples/bw_ops.rs` under callgrind (200K random 8-byte keys, instructions per
/// insert / per lookup, the lookups' consolidations included): chain 4: 3,806 / 1,649; 6: 3,576
/// / 1,659; 8: 3,505 / 1,661. Timed (`bw_chain 4000000 2 4,8,6`, three runs on a machine busy
/// with another build, load Mops/s): 4: 0.448, 0.557, 0.577; 8: 0.527, 0.529, 0.461; 6: 0.542,
/// 0.730, 0.589. 6 takes most of 8's saving in instructions with fewer deltas (dependent loads)
/// per walk.
///
/// Longer chains leave more deltas on the leaves after updates stop: `examples/bw_garbage.rs`
/// (the tree's bytes after 10M random updates over 1M keys on 2 threads, over a freshly built
/// tree's) gives chain 4: 1.088x and 1.091x; 5: 1.098x, 1.104x and 1.101x; 6: 1.109x to 1.118x
/// in seven runs, at 3,403, 3,348 and 3,191 instructions per insert (`examples/bw_ops.rs`, 1M
/// keys, with the chain directories and child hints). 6 was kept for the inserts, which are
/// further from their target than the bytes. Since deltas shrank (a 48-byte fixed part with no
/// tid words in unique trees, a directory that does not repeat `next`), leaves merge under two
/// fifths of a page instead of a third and the delta pool keeps half as much, chain 6 leaves
/// 1.083x-1.085x.
pub const DEFAULT_CHAIN_LENGTH: usize = 6;

/// Entries of a leaf page when the shared options do not say (bounded by the page's bytes).
const DEFAULT_CAPACITY: usize = 128;

/// Entries of an inner page when the shared options do not say (bounded by the page's
/// bytes, [`DEFAULT_INNER_PAGE_BYTES`]). Each level of the tree costs a lookup a
/// mapping-table read and a page search, and fuller inner pages take a level off sooner:
/// at 10 million keys (about 113,000 leaves) 128 entries make four levels and 512 three.
/// `examples/bw_ops.rs` under callgrind, 4M random 8-byte keys (three levels against four),
/// instructions per lookup / per insert: 128 entries 1,601 / 3,273; 512 entries 1,347 /
/// 3,091 (an inner page is rebuilt whole for each split below it, a larger one at a larger
/// cost, but the shorter descent saves more). At 200K keys (three levels either way):
/// 1,219 / 3,066 against 1,209 / 3,022.
const DEFAULT_INNER_CAPACITY: usize = 512;

/// The largest inner page by default, in bytes: room for the 512 separators an inner page
/// holds by default (pages are built with the bytes their entries need, not this).
pub const DEFAULT_INNER_PAGE_BYTES: usize = 16 * 1024;

/// The largest page, in bytes (offsets in a page are 16 bits).
const MAX_PAGE_BYTES: usize = 64 * 1024;

/// The Bw-tree's own options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwTreeOptions {
    /// How base pages are organized: [`PageOrganization::PrefixSplit`] (the default) or
    /// [`PageOrganization::Prefix`], optimized pages; or [`PageOrganization::Base`], the
    /// same pages keeping whole keys (no prefix factored out, splits in the middle that
    /// post whole keys; the mid-key vector stays, as the B+-tree's Base slotted node keeps
    /// a head word per key), the paper's baseline for its page optimizations.
    pub pages: PageOrganization,
    /// Deltas a leaf's chain may hold before it is consolidated (default
    /// [`DEFAULT_CHAIN_LENGTH`]; 1 to 1000).
    pub chain_length: usize,
    /// The largest leaf page, in bytes (default 4096; 256 to 65536).
    pub leaf_page_bytes: usize,
    /// The largest inner page, in bytes (default [`DEFAULT_INNER_PAGE_BYTES`]; 256 to
    /// 65536).
    pub inner_page_bytes: usize,
    /// The width of the pages' mid-keys.
    pub mid_key: MidWidth,
}

impl Default for BwTreeOptions {
    fn default() -> Self {
        Self {
            pages: PageOrganization::PrefixSplit,
            chain_length: DEFAULT_CHAIN_LENGTH,
            leaf_page_bytes: DEFAULT_PAGE_BYTES,
            inner_page_bytes: DEFAULT_INNER_PAGE_BYTES,
            mid_key: MidWidth::default(),
        }
    }
}

impl BwTreeOptions {
    /// Checks the options against the shared ones.
    fn validate(&self, options: &IndexOptions) -> Result<(), Error> {
        options.validate()?;
        let bad = |what: String| Err(Error::InvalidConfig(what));
        if options.max_key_len > MAX_PAGE_KEY_LEN {
            return bad(format!(
                "the bwtree kind takes keys of at most {MAX_PAGE_KEY_LEN} bytes, not {}",
                options.max_key_len
            ));
        }
        if !(1..=1000).contains(&self.chain_length) {
            return bad(format!(
                "chain length must be from 1 to 1000, not {}",
                self.chain_length
            ));
        }
        for (what, bytes) in [
            ("leaf", self.leaf_page_bytes),
            ("inner", self.inner_page_bytes),
        ] {
            if !(MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&bytes) {
                return bad(format!(
                    "{what} page bytes must be from {MIN_PAGE_BYTES} to {MAX_PAGE_BYTES}, \
                     not {bytes}"
                ));
            }
        }
        Ok(())
    }
}

impl KindOptions for BwTreeOptions {
    fn kind(&self) -> IndexKind {
        IndexKind::BwTree
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        Ok(Box::new(BwTreeIndex::new(options, self)?))
    }
}

/// What a Bw-tree's structure modifications have done (`stats_as::<BwTreeStats>()` on the
/// index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BwTreeStats {
    /// Pages split (Split deltas installed; root growth not counted).
    pub splits: u64,
    /// Leaves merged into their left sibling (merges started: an Unlink installed on the
    /// parent is always finished).
    pub merges: u64,
    /// Inner pages merged into their left sibling (likewise).
    pub inner_merges: u64,
    /// Leaves in the tree: reachable from the root, removed pages waiting for retirement
    /// not counted (computed by a walk; call while no writer runs).
    pub leaves: u64,
    /// Inner pages in the tree (likewise).
    pub inner: u64,
}

impl KindStats for BwTreeStats {}

/// The Bw-tree as an [`Index`] (see [`crate::bwtree`]).
pub struct BwTreeIndex {
    tree: BwTree,
    unique: bool,
    max_key_len: usize,
    key_len: KeyLen,
}

impl BwTreeIndex {
    /// An empty index, or the option that cannot be honoured.
    pub fn new(options: &IndexOptions, own: &BwTreeOptions) -> Result<Self, Error> {
        own.validate(options)?;
        let pages = PageConfig::new(
            (
                options.leaf_capacity.unwrap_or(DEFAULT_CAPACITY),
                options.inner_capacity.unwrap_or(DEFAULT_INNER_CAPACITY),
            ),
            (own.leaf_page_bytes, own.inner_page_bytes),
            options.max_key_len,
            (
                !options.unique,
                own.pages == PageOrganization::PrefixSplit,
                own.mid_key,
            ),
        );
        let pages = pages.with_child_hints();
        let config = match own.pages {
            PageOrganization::Base => pages.whole_keys(),
            PageOrganization::Prefix | PageOrganization::PrefixSplit => pages,
        };
        Ok(Self {
            tree: BwTree::new(config, !options.unique, own.chain_length as u16),
            unique: options.unique,
            max_key_len: options.max_key_len,
            key_len: options.key_len,
        })
    }

    /// A cursor over the keys in `(lower, upper)` in `direction`, read a batch (about a
    /// page) at a time with [`BwCursor::next_batch`]; physiological (see
    /// [`crate::bwtree`]'s `cursor` module): it remembers the page where its next batch
    /// starts and skips the descent when that page passes validation.
    pub fn cursor(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<BwCursor<'_>, Error> {
        let (lower, upper) = self.bounds(lower, upper)?;
        Ok(self.tree.cursor((lower, upper), direction))
    }

    /// A prefix cursor: finds the smallest sub-tree holding every key that starts with
    /// `prefix` and remembers it, so that its lookups and cursors start there.
    pub fn prefix_cursor(&self, prefix: &[u8]) -> Result<PrefixCursor<'_>, Error> {
        if prefix.len() > self.max_key_len {
            return Err(Error::KeyTooLong {
                len: prefix.len(),
                max: self.max_key_len,
            });
        }
        Ok(PrefixCursor::new(&self.tree, prefix))
    }

    /// Checks scan bounds and maps them to bounds on the tree's keys (a non-unique index's
    /// bounds take in or leave out every tid of their key).
    fn bounds<'k>(
        &self,
        lower: Bound<&'k [u8]>,
        upper: Bound<&'k [u8]>,
    ) -> Result<(Bound<Key<'k>>, Bound<Key<'k>>), Error> {
        for bound in [lower, upper] {
            if let Bound::Included(key) | Bound::Excluded(key) = bound {
                self.valid(key)?;
            }
        }
        let unique = self.unique;
        let at = |bytes, tid| Key {
            bytes,
            tid: if unique { 0 } else { tid },
        };
        Ok((pair_bound(lower, true, at), pair_bound(upper, false, at)))
    }

    /// Checks a key against the index's limits.
    fn valid(&self, key: &[u8]) -> Result<(), Error> {
        check_key(key, self.max_key_len, self.key_len)
    }

    /// Every pair of `key` (non-unique), ascending by tid, up to `limit`.
    fn pairs_of(&self, key: &[u8], limit: usize, out: &mut dyn FnMut(u64)) {
        self.tree.scan(
            Bound::Included(Key { bytes: key, tid: 0 }),
            Bound::Included(Key {
                bytes: key,
                tid: u64::MAX,
            }),
            Direction::Ascending,
            limit,
            &mut |_, tid| out(tid),
        );
    }
}

impl Index for BwTreeIndex {
    fn kind(&self) -> &'static str {
        IndexKind::BwTree.name()
    }

    fn is_unique(&self) -> bool {
        self.unique
    }

    fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, Error> {
        self.valid(key)?;
        Ok(if self.unique {
            self.tree.write(Key { bytes: key, tid: 0 }, &mut |current| {
                (Some(Some(tid)), current)
            })
        } else {
            self.tree
                .write(Key { bytes: key, tid }, &mut |current| match current {
                    Some(_) => (None, Some(tid)),
                    None => (Some(Some(tid)), None),
                })
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.valid(key)?;
        if self.unique {
            return Ok(self.tree.get(Key { bytes: key, tid: 0 }, &shim::pin()));
        }
        let mut first = None;
        self.pairs_of(key, 1, &mut |tid| first = Some(tid));
        Ok(first)
    }

    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error> {
        self.valid(key)?;
        if self.unique {
            out.extend(self.tree.get(Key { bytes: key, tid: 0 }, &shim::pin()));
        } else {
            self.pairs_of(key, usize::MAX, &mut |tid| out.push(tid));
        }
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.valid(key)?;
        if !self.unique {
            return Err(Error::Unsupported {
                operation: "remove",
                reason: "a non-unique index removes pairs: use remove_pair",
            });
        }
        Ok(self
            .tree
            .write(Key { bytes: key, tid: 0 }, &mut |current| match current {
                Some(value) => (Some(None), Some(value)),
                None => (None, None),
            }))
    }

    fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, Error> {
        self.valid(key)?;
        let key = Key {
            bytes: key,
            tid: if self.unique { 0 } else { tid },
        };
        Ok(self.tree.write(key, &mut |current| match current {
            Some(value) if value == tid => (Some(None), true),
            _ => (None, false),
        }))
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, Error> {
        let (lower, upper) = self.bounds(lower, upper)?;
        Ok(self.tree.scan(lower, upper, direction, limit, visit))
    }

    fn len(&self) -> usize {
        self.tree.len.get()
    }

    fn memory(&self) -> MemoryUsage {
        MemoryUsage {
            inner: self.tree.bytes.inner.get(),
            leaves: self.tree.bytes.leaves.get(),
            // The index object (boxed by the builder) holds the tree inline, and the byte
            // counts it shares with deferred frees in an `Arc` of their own. The delta pool's
            // shards and kept blocks are the tree's too.
            aux: self.tree.table.bytes()
                + self.tree.bytes.pool.bytes()
                + self.tree.bytes.pool.shard_bytes()
                + std::mem::size_of::<Self>()
                + crate::mem::arc_bytes::<super::Bytes>(),
        }
    }

    fn check(&self) -> Result<(), Error> {
        self.tree.check()
    }

    fn stats(&self) -> Option<Box<dyn KindStats>> {
        let (leaves, inner) = self.tree.pages();
        Some(Box::new(BwTreeStats {
            splits: self.tree.splits.load(Relaxed),
            merges: self.tree.merges[0].load(Relaxed),
            inner_merges: self.tree.merges[1].load(Relaxed),
            leaves,
            inner,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::page::PageImage;
    use crate::IndexBuilder;

    fn tiny(unique: bool) -> Box<dyn Index> {
        IndexBuilder::new(BwTreeOptions {
            chain_length: 2,
            leaf_page_bytes: MIN_PAGE_BYTES,
            inner_page_bytes: MIN_PAGE_BYTES,
            ..BwTreeOptions::default()
        })
        .unique(unique)
        .leaf_capacity(4)
        .inner_capacity(4)
        .build()
        .unwrap()
    }

    /// Lookups and writes through leaf chains of up to 12 deltas, whose newest delta's
    /// summary covers the 8 newest: a key whose mark none of them has goes straight to the
    /// base page, any other walks the chain, and deeper chains are always walked. Most keys
    /// share one of three marks (with tid 0: in the non-unique tree a pair's mark takes in
    /// its tid, so there the pairs with tid 0 collide), so their lookups meet deltas of
    /// their mark that hold other keys; one leaf holds them all (no split), so every chain
    /// is Inserts and Deletes over one base page.
    #[test]
    fn lookups_through_chains_of_colliding_marks() {
        use super::super::key::Key;
        use std::collections::{BTreeMap, BTreeSet};
        let mut by_mark: BTreeMap<u8, Vec<[u8; 8]>> = BTreeMap::new();
        for i in 0u64..4000 {
            let key = (i * 0x9E37_79B9).to_be_bytes();
            by_mark
                .entry(
                    Key {
                        bytes: &key,
                        tid: 0,
                    }
                    .mark(),
                )
                .or_default()
                .push(key);
        }
        // Eight keys of each of three marks, and eight keys of marks of their own.
        let mut keys: Vec<[u8; 8]> = by_mark
            .values()
            .take(3)
            .flat_map(|k| k[..8].to_vec())
            .collect();
        keys.extend(by_mark.values().skip(3).take(8).map(|k| k[0]));
        let n = keys.len();
        assert_eq!(n, 32);
        for unique in [true, false] {
            let index = IndexBuilder::new(BwTreeOptions {
                chain_length: 12,
                ..BwTreeOptions::default()
            })
            .unique(unique)
            .build()
            .unwrap();
            let mut model: BTreeSet<(usize, u64)> = BTreeSet::new();
            let mut rng = 0x2545_F491_4F6C_DD1Du64;
            for step in 0..20_000u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let k = (rng % n as u64) as usize;
                let tid = (rng >> 8) % 3;
                let held: Vec<u64> = model.range((k, 0)..(k + 1, 0)).map(|p| p.1).collect();
                if rng >> 40 & 1 == 0 {
                    let answer = index.insert(&keys[k], tid).unwrap();
                    if unique {
                        assert_eq!(answer, held.first().copied(), "step {step}");
                        model.retain(|p| p.0 != k);
                    } else {
                        assert_eq!(answer, held.contains(&tid).then_some(tid), "step {step}");
                    }
                    model.insert((k, tid));
                } else if unique {
                    assert_eq!(index.remove(&keys[k]).unwrap(), held.first().copied());
                    model.retain(|p| p.0 != k);
                } else {
                    let had = model.remove(&(k, tid));
                    assert_eq!(
                        index.remove_pair(&keys[k], tid).unwrap(),
                        had,
                        "step {step}"
                    );
                }
                for (k, key) in keys.iter().enumerate() {
                    let held: Vec<u64> = model.range((k, 0)..(k + 1, 0)).map(|p| p.1).collect();
                    let mut got = Vec::new();
                    index.get_all(key, &mut got).unwrap();
                    got.sort_unstable();
                    assert_eq!(got, held, "step {step}, key {k}");
                    assert_eq!(index.get(key).unwrap().is_some(), !held.is_empty());
                }
                if step % 1000 == 0 {
                    index.check().unwrap();
                }
            }
            assert_eq!(index.len(), model.len());
            index.check().unwrap();
        }
    }

    /// Leaves of four entries, chains of one delta, pages split in the middle: 10, 20, ...,
    /// 160, then 61 and 62, make a root over three inner pages, the middle one over leaves
    /// [60, 61, 62, 70] and [80, 90]. Removing 80 and 90 empties the second leaf, which
    /// merges into the first; its parent, left with one child, merges into its left
    /// sibling, which then routes [10, 100) over three leaves.
    #[test]
    fn an_inner_page_left_with_one_child_merges_into_its_left_sibling() {
        let options = IndexOptions {
            unique: true,
            max_key_len: 8,
            key_len: KeyLen::Fixed(8),
            leaf_capacity: Some(4),
            inner_capacity: Some(4),
        };
        let own = BwTreeOptions {
            pages: PageOrganization::Prefix,
            chain_length: 1,
            ..BwTreeOptions::default()
        };
        let index = BwTreeIndex::new(&options, &own).unwrap();
        let mut keys: Vec<u64> = (1..=16).map(|i| i * 10).chain([61, 62]).collect();
        for &k in &keys {
            assert_eq!(index.insert(&k.to_be_bytes(), k).unwrap(), None);
        }
        let stats = |index: &BwTreeIndex| (index as &dyn Index).stats_as::<BwTreeStats>().unwrap();
        let full = stats(&index);
        assert_eq!((full.leaves, full.inner), (7, 4), "{full:?}");
        for k in [80u64, 90] {
            assert_eq!(index.remove(&k.to_be_bytes()).unwrap(), Some(k));
            index.check().unwrap();
        }
        keys.retain(|&k| k != 80 && k != 90);
        let merged = stats(&index);
        assert_eq!(
            (
                merged.merges,
                merged.inner_merges,
                merged.leaves,
                merged.inner
            ),
            (1, 1, 6, 3),
            "{merged:?}"
        );
        let mut image = PageImage::default();
        let _guard = shim::pin();
        let shape = index
            .tree
            .collect(index.tree.table.get(super::super::ROOT), &mut image)
            .unwrap();
        let root: Vec<&[u8]> = (0..image.len()).map(|i| image.key(i)).collect();
        assert_eq!(shape.level, 2);
        assert_eq!(
            root,
            [&[][..], &100u64.to_be_bytes()[..]],
            "the root's separators"
        );
        for &k in &keys {
            assert_eq!(index.get(&k.to_be_bytes()).unwrap(), Some(k));
        }
        assert_eq!(index.len(), keys.len());
    }

    /// Inserts alone never merge pages, with keys that share a long prefix (the halves of a
    /// split inner page store it once, the level's first page cannot) and with keys near
    /// the length limit (fences take much of a page): a merge of such halves would split
    /// again at the next insert below them.
    #[test]
    fn inserts_of_long_keys_merge_nothing() {
        for prefix in [392, 992] {
            let index = IndexBuilder::new(BwTreeOptions::default())
                .unique(true)
                .key_len(KeyLen::Variable)
                .build()
                .unwrap();
            let key = |i: u64| {
                let mut key = vec![b'p'; prefix];
                key.extend_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
                key
            };
            for i in 0..20_000 {
                assert_eq!(index.insert(&key(i), i).unwrap(), None);
            }
            index.check().unwrap();
            let stats = index.stats_as::<BwTreeStats>().unwrap();
            assert!(stats.splits > 100, "{prefix}-byte prefix: {stats:?}");
            assert_eq!(
                (stats.merges, stats.inner_merges),
                (0, 0),
                "{prefix}-byte prefix: {stats:?}"
            );
        }
    }

    #[test]
    fn inserts_gets_removes_and_scans_through_splits() {
        let index = tiny(true);
        let key = |i: u64| (i * 7919 % 1000).to_be_bytes();
        for i in 0..1000 {
            assert_eq!(index.insert(&key(i), i).unwrap(), None);
            if i % 50 == 0 {
                index.check().unwrap();
            }
        }
        index.check().unwrap();
        assert_eq!(index.len(), 1000);
        for i in 0..1000 {
            assert_eq!(index.get(&key(i)).unwrap(), Some(i));
        }
        let mut seen = Vec::new();
        index
            .scan(
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Ascending,
                usize::MAX,
                &mut |k, _| seen.push(u64::from_be_bytes(k.try_into().unwrap())),
            )
            .unwrap();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        seen.clear();
        index
            .scan(
                Bound::Unbounded,
                Bound::Unbounded,
                Direction::Descending,
                usize::MAX,
                &mut |k, _| seen.push(u64::from_be_bytes(k.try_into().unwrap())),
            )
            .unwrap();
        assert_eq!(seen, (0..1000).rev().collect::<Vec<_>>());
        let full = index.stats_as::<BwTreeStats>().unwrap();
        for i in 0..1000 {
            assert_eq!(index.remove(&key(i)).unwrap(), Some(i));
            if i % 50 == 0 {
                index.check().unwrap();
            }
        }
        index.check().unwrap();
        assert_eq!(index.len(), 0);
        let empty = index.stats_as::<BwTreeStats>().unwrap();
        // Emptied leaves merged into their left siblings: the leaves' count falls by a
        // third (4-entry pages: a parent's leftmost child stays, and so does a leaf whose
        // last deletes, fewer than a chain's length, were not consolidated). Inner pages
        // left with one child merged too, and their count falls as well.
        assert!(
            empty.merges > 50 && empty.leaves * 3 < full.leaves * 2,
            "{full:?} then {empty:?}"
        );
        assert!(
            empty.inner_merges > 10 && empty.inner < full.inner,
            "{full:?} then {empty:?}"
        );
        // The keys come back: pages split again, through the recycled ids.
        for i in 0..1000 {
            assert_eq!(index.insert(&key(i), i).unwrap(), None);
        }
        index.check().unwrap();
        assert_eq!(index.len(), 1000);
    }
}
