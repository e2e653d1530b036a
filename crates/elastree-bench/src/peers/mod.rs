//! Every index under measurement behind one trait, [`BenchIndex`]: elastree's kinds and the
//! peers (std `BTreeMap`, `bplustree`, `ferntree`, `congee`, `scc::TreeIndex`,
//! `crossbeam_skiplist::SkipMap`, `masstree`, `blart` and a sorted array as the compactness
//! bound), one module each.
//!
//! For 8-byte key sets the peers are instantiated with `u64` keys and elastree with
//! [`KeyLen::Fixed`]`(8)` big-endian byte keys; big-endian byte order equals numeric order, so
//! every index scans the same key sequence. For 16-byte key sets the peers use `Vec<u8>` keys
//! and elastree [`KeyLen::Fixed`]`(16)`; for every other key set (20- and 28-byte and
//! variable-length) the peers use `Vec<u8>` keys and elastree [`KeyLen::Variable`]. Byte-string
//! keys compare lexicographically, as elastree orders them. `congee` takes only 8-byte keys and
//! refuses the other sets. `masstree` takes byte strings of every width (8-byte keys as their
//! big-endian bytes); `blart` stores 8- and 16-byte keys as byte arrays and the others in a
//! prefix-free encoding (an ART holds no key that is a prefix of another).
//!
//! [`KeyLen::Fixed`]: ::elastree::KeyLen::Fixed
//! [`KeyLen::Variable`]: ::elastree::KeyLen::Variable

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};

use std::any::Any;

use ::elastree::{IndexKind, KindStats, PageOrganization};
use elastree_dist::{DistKind, DistOptions};

use crate::cluster;
use crate::keys::{Key, KeySet, KeySetKind, KeyWidth};
use crate::workload::Workload;

mod blart;
/// The [`BenchIndex`] methods a peer generic over its key type `K` writes the same way: its
/// name (`$peer`), whether it may run on many threads (`$concurrent`), and the key sets `K`
/// holds ([`peer_key_check`]).
macro_rules! generic_peer_basics {
    ($peer:expr, concurrent: $concurrent:expr) => {
        fn name(&self) -> &str {
            $peer.name()
        }

        fn concurrent(&self) -> bool {
            $concurrent
        }

        fn supports(&self, keys: KeySetKind) -> Result<(), String> {
            super::peer_key_check::<K>(self.name(), keys)
        }
    };
}

mod bplustree;
mod btreemap;
mod congee;
mod elastree;
mod ferntree;
mod masstree;
mod raw_iter;
mod scc;
mod skipmap;
mod sorted;

pub use self::blart::{ArtKey, Blart, PrefixFree};
pub use self::bplustree::BPlus;
pub use self::btreemap::StdBTreeMap;
pub use self::congee::Art;
pub use self::elastree::{key_len_of, parse_bytes, Budget, Elastree, SeqTreeTuning};
pub use self::ferntree::Fern;
pub use self::masstree::Mass;
pub use self::scc::SccTree;
pub use self::skipmap::Skip;
pub use self::sorted::SortedArray;

/// An index as the benchmark drives it. Values are tuple ids (`u64`); keys come as [`Key`]s of
/// the width the index was built for.
///
/// All operations take `&self`; an index whose [`BenchIndex::concurrent`] is `true` may be
/// called from many threads at once.
pub trait BenchIndex: Send + Sync {
    /// The name the CLI and the reports use.
    fn name(&self) -> &str;

    /// Whether the index may be driven from many threads at once (for the operations it
    /// supports). A non-concurrent index only runs on one thread.
    fn concurrent(&self) -> bool;

    /// Whether the index can hold this key set, or why not.
    fn supports(&self, keys: KeySetKind) -> Result<(), String>;

    /// Whether the index can run this workload, or why not.
    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        let _ = workload;
        Ok(())
    }

    /// `true` if the index is built by [`BenchIndex::bulk_load`] instead of by inserts.
    fn loads_in_bulk(&self) -> bool {
        false
    }

    /// Builds the index from all of `keys`, key `i` mapping to tid `i`. Only for indexes whose
    /// [`BenchIndex::loads_in_bulk`] is `true`.
    fn bulk_load(&mut self, keys: &KeySet) -> Result<(), String> {
        let _ = keys;
        Err(format!("{} does not load in bulk", self.name()))
    }

    /// Inserts `key -> value` (or replaces the key's value).
    fn insert(&self, key: Key<'_>, value: u64);

    /// The key's value.
    fn get(&self, key: Key<'_>) -> Option<u64>;

    /// Visits up to `n` pairs in ascending key order starting at the first key `>= start` and
    /// returns how many it visited.
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize;

    /// Visits up to `n` pairs in descending key order starting at the last key `<= start` and
    /// returns how many it visited. An index without reverse iteration refuses
    /// [`Workload::ScanDesc`] in [`BenchIndex::supports_workload`] and panics here.
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize;

    /// Removes the key; says whether it was present.
    fn remove(&self, key: Key<'_>) -> bool;

    /// The bytes the index says it holds, for indexes that account for their own memory.
    fn self_reported_bytes(&self) -> Option<usize> {
        None
    }

    /// Waits for background work the index started (a hybrid index's merge), so that a
    /// memory reading sees the index at rest.
    fn quiesce(&self) {}

    /// What the index's own algorithm did so far, for elastree's kinds that keep statistics
    /// (the elastic tree's conversions, the hybrid index's merges, a distributed client's
    /// round trips); `stats_as` on a `dyn BenchIndex` gives them as their type.
    fn stats(&self) -> Option<Box<dyn KindStats>> {
        None
    }

    /// A cursor reading keys in ascending order from the first key `>= start`, a request at
    /// a time, holding nothing of the index between requests. `physiological` asks for the
    /// index's own cursor that remembers where the next request starts in the tree (the
    /// Bw-tree's); otherwise, and for every index without one, a logical cursor: it keeps
    /// only the last key returned and each request scans on after it from the root.
    fn cursor<'a>(&'a self, start: Key<'_>, physiological: bool) -> Box<dyn BenchCursor + 'a> {
        let _ = physiological;
        Box::new(LogicalCursor::new(self, start))
    }
}

/// A range read a request at a time ([`BenchIndex::cursor`]).
pub trait BenchCursor {
    /// Visits the next up to `n` pairs of the range, in ascending key order after every pair
    /// of the earlier requests; returns how many it visited (fewer than `n` only at the end
    /// of the index).
    fn next(&mut self, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize;
}

/// A key kept between requests.
enum OwnedKey {
    U64(u64),
    Bytes(Vec<u8>),
}

impl OwnedKey {
    fn set(&mut self, key: Key<'_>) {
        match (self, key) {
            (OwnedKey::Bytes(mine), Key::Bytes(b)) => {
                mine.clear();
                mine.extend_from_slice(b);
            }
            (mine, key) => *mine = OwnedKey::of(key),
        }
    }

    fn of(key: Key<'_>) -> Self {
        match key {
            Key::U64(v) => OwnedKey::U64(v),
            Key::Bytes(b) => OwnedKey::Bytes(b.to_vec()),
        }
    }

    fn key(&self) -> Key<'_> {
        match self {
            OwnedKey::U64(v) => Key::U64(*v),
            OwnedKey::Bytes(b) => Key::Bytes(b),
        }
    }
}

/// A logical cursor over any index: the key to go on from, and whether the pair at that
/// key was already returned; each request is a scan from it.
pub struct LogicalCursor<'a, I: BenchIndex + ?Sized> {
    index: &'a I,
    resume: OwnedKey,
    /// Whether `resume` was returned (the next scan skips it).
    returned: bool,
    /// The last key of a request, kept as the next `resume` (its buffer reused).
    spare: OwnedKey,
}

impl<'a, I: BenchIndex + ?Sized> LogicalCursor<'a, I> {
    /// A cursor from the first key `>= start`.
    pub fn new(index: &'a I, start: Key<'_>) -> Self {
        Self {
            index,
            resume: OwnedKey::of(start),
            returned: false,
            spare: OwnedKey::U64(0),
        }
    }
}

impl<I: BenchIndex + ?Sized> BenchCursor for LogicalCursor<'_, I> {
    fn next(&mut self, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let (resume, returned, spare) = (&self.resume, self.returned, &mut self.spare);
        let mut handed = 0;
        let skip = usize::from(returned);
        let mut first = true;
        self.index.scan(resume.key(), n + skip, &mut |key, tid| {
            let again = std::mem::take(&mut first) && returned && key == resume.key();
            if again || handed == n {
                return;
            }
            visit(key, tid);
            handed += 1;
            spare.set(key);
        });
        if handed > 0 {
            std::mem::swap(&mut self.resume, &mut self.spare);
            self.returned = true;
        }
        handed
    }
}

impl dyn BenchIndex + '_ {
    /// The index's statistics as `T` (for example `elastree_dist::DistStats`), or `None`
    /// when it keeps none or keeps another type.
    pub fn stats_as<T: KindStats + Clone>(&self) -> Option<T> {
        let stats = self.stats()?;
        let any: &dyn Any = &*stats;
        any.downcast_ref::<T>().cloned()
    }
}

/// The peers, by CLI name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// `std::collections::BTreeMap` behind a mutex (single thread only).
    BTreeMap,
    /// The `bplustree` crate: an OLC B+-tree.
    BPlusTree,
    /// The `ferntree` crate: an OLC B+-tree.
    FernTree,
    /// The `congee` crate: an ART with OLC, 8-byte keys only.
    Congee,
    /// `scc::TreeIndex`: a lock-free-read B+-tree.
    Scc,
    /// `crossbeam_skiplist::SkipMap`: a lock-free skip list.
    SkipMap,
    /// The `masstree` crate: a concurrent trie of B+-trees.
    MassTree,
    /// The `blart` crate: an adaptive radix tree behind a mutex (single thread only).
    Blart,
    /// A sorted array built by one bulk sort: the compactness bound, read-only.
    Sorted,
}

impl Peer {
    /// Every peer, in the order the CLI lists them.
    pub const ALL: &'static [Peer] = &[
        Peer::BTreeMap,
        Peer::BPlusTree,
        Peer::FernTree,
        Peer::Congee,
        Peer::Scc,
        Peer::SkipMap,
        Peer::MassTree,
        Peer::Blart,
        Peer::Sorted,
    ];

    /// The peer's CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Peer::BTreeMap => "btreemap",
            Peer::BPlusTree => "bplustree",
            Peer::FernTree => "ferntree",
            Peer::Congee => "congee",
            Peer::Scc => "scc",
            Peer::SkipMap => "skipmap",
            Peer::MassTree => "masstree",
            Peer::Blart => "blart",
            Peer::Sorted => "sorted",
        }
    }
}

/// What to measure: one of elastree's kinds, a distributed one or a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexSpec {
    /// An elastree index kind.
    Elastree(IndexKind),
    /// elastree's B+-tree or Bw-tree in a page organization other than its default one
    /// (`btree-base`, `btree-prefix`, `bwtree-prefix`).
    Pages(IndexKind, PageOrganization),
    /// A distributed index kind (`elastree-dist`), on a Redis Cluster.
    Dist(DistKind),
    /// A peer index.
    Peer(Peer),
}

impl IndexSpec {
    /// Every index the benchmark knows: elastree's kinds, the B+-tree's other page
    /// organizations, then the peers.
    pub fn all() -> Vec<IndexSpec> {
        let pages = Elastree::PAGE_TREES
            .iter()
            .flat_map(|&(kind, organizations)| {
                organizations[1..]
                    .iter()
                    .map(move |&o| IndexSpec::Pages(kind, o))
            });
        IndexKind::ALL
            .iter()
            .map(|&k| IndexSpec::Elastree(k))
            .chain(pages)
            .chain(Peer::ALL.iter().map(|&p| IndexSpec::Peer(p)))
            .collect()
    }

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            IndexSpec::Elastree(kind) => kind.name(),
            IndexSpec::Pages(kind, pages) => Elastree::pages_name(kind, pages),
            IndexSpec::Dist(kind) => kind.name(),
            IndexSpec::Peer(peer) => peer.name(),
        }
    }

    /// Whether the index lives on a Redis Cluster (`dist`, `dist-baseline`): it is built by
    /// [`IndexSpec::build_on`] with a cluster address and is not in [`IndexSpec::all`].
    pub fn is_distributed(self) -> bool {
        matches!(self, IndexSpec::Dist(_))
    }

    /// [`IndexSpec::build_tuned`], with the cluster (a seed address, "host:port") that the
    /// distributed kinds connect to; each such index gets a fresh name and is deleted from the
    /// cluster when dropped. Other indexes ignore `cluster`.
    pub fn build_on(
        self,
        keys: &KeySet,
        budget: Budget,
        tuning: SeqTreeTuning,
        cluster: Option<&str>,
    ) -> Result<Box<dyn BenchIndex>, String> {
        match (self, cluster) {
            (IndexSpec::Dist(kind), Some(seed)) => {
                let client = cluster::connect(
                    kind,
                    seed,
                    cluster::fresh_name("bench"),
                    DistOptions::default(),
                )
                .map_err(|e| format!("connecting {kind} to the cluster at {seed}: {e}"))?;
                Ok(Box::new(Elastree::on_cluster(kind, keys, client)))
            }
            _ => self.build_tuned(keys, budget, tuning),
        }
    }

    /// Builds an empty index for the keys of `keys` (tid `i` being key `i`, which indexes
    /// with indirect keys load from `keys`); `budget` is the elastic kind's.
    pub fn build(self, keys: &KeySet, budget: Budget) -> Result<Box<dyn BenchIndex>, String> {
        self.build_tuned(keys, budget, SeqTreeTuning::default())
    }

    /// [`IndexSpec::build`], with `tuning` for the SeqTree leaves of elastree's elastic and
    /// seqtree kinds (every other index ignores it).
    pub fn build_tuned(
        self,
        keys: &KeySet,
        budget: Budget,
        tuning: SeqTreeTuning,
    ) -> Result<Box<dyn BenchIndex>, String> {
        let width = keys.width();
        Ok(match (self, width) {
            (IndexSpec::Dist(kind), _) => {
                return Err(format!(
                    "{kind} lives on a Redis Cluster: build it with a cluster address"
                ))
            }
            (IndexSpec::Elastree(kind), _) => {
                Box::new(Elastree::with_tuning(kind, keys, budget, tuning)?)
            }
            (IndexSpec::Pages(kind, pages), _) => {
                Box::new(Elastree::with_pages(kind, pages, keys)?)
            }
            (IndexSpec::Peer(Peer::BTreeMap), KeyWidth::Fixed8) => {
                Box::new(StdBTreeMap::<u64>::new())
            }
            (IndexSpec::Peer(Peer::BTreeMap), _) => Box::new(StdBTreeMap::<Vec<u8>>::new()),
            (IndexSpec::Peer(Peer::BPlusTree), KeyWidth::Fixed8) => Box::new(BPlus::<u64>::new()),
            (IndexSpec::Peer(Peer::BPlusTree), _) => Box::new(BPlus::<Vec<u8>>::new()),
            (IndexSpec::Peer(Peer::FernTree), KeyWidth::Fixed8) => Box::new(Fern::<u64>::new()),
            (IndexSpec::Peer(Peer::FernTree), _) => Box::new(Fern::<Vec<u8>>::new()),
            (IndexSpec::Peer(Peer::Congee), _) => Box::new(Art::new()),
            (IndexSpec::Peer(Peer::Scc), KeyWidth::Fixed8) => Box::new(SccTree::<u64>::new()),
            (IndexSpec::Peer(Peer::Scc), _) => Box::new(SccTree::<Vec<u8>>::new()),
            (IndexSpec::Peer(Peer::SkipMap), KeyWidth::Fixed8) => Box::new(Skip::<u64>::new()),
            (IndexSpec::Peer(Peer::SkipMap), _) => Box::new(Skip::<Vec<u8>>::new()),
            (IndexSpec::Peer(Peer::MassTree), _) => Box::new(Mass::new(width)),
            (IndexSpec::Peer(Peer::Blart), KeyWidth::Fixed8) => Box::new(Blart::<[u8; 8]>::new()),
            (IndexSpec::Peer(Peer::Blart), KeyWidth::Fixed16) => Box::new(Blart::<[u8; 16]>::new()),
            (IndexSpec::Peer(Peer::Blart), KeyWidth::Variable) => {
                Box::new(Blart::<PrefixFree>::new())
            }
            (IndexSpec::Peer(Peer::Sorted), _) => Box::new(SortedArray::new(width)),
        })
    }
}

impl fmt::Display for IndexSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexSpec {
    type Err = String;

    /// The name of any index in [`IndexSpec::all`] or of a distributed kind (`dist`,
    /// `dist-baseline`).
    fn from_str(s: &str) -> Result<Self, String> {
        let known = || {
            IndexSpec::all()
                .into_iter()
                .chain(DistKind::ALL.iter().map(|&kind| IndexSpec::Dist(kind)))
        };
        known().find(|spec| spec.name() == s).ok_or_else(|| {
            let names: Vec<_> = known().map(|spec| spec.name()).collect();
            format!("unknown index {s:?} (known: {})", names.join(", "))
        })
    }
}

/// The workloads a read-only, bulk-loaded index runs (the load is its bulk load); any other
/// is refused with `why`.
fn reads_only(workload: Workload, why: &str) -> Result<(), String> {
    match workload {
        Workload::Delete | Workload::Mixed => Err(why.to_string()),
        Workload::Ycsb(y) if !y.read_only() => Err(why.to_string()),
        Workload::Load
        | Workload::Lookup
        | Workload::LookupZipf
        | Workload::Scan
        | Workload::ScanDesc
        | Workload::Ycsb(_) => Ok(()),
    }
}

/// Whether an index built for keys of `built` width can hold key set `keys`.
fn width_check(name: &str, built: KeyWidth, keys: KeySetKind) -> Result<(), String> {
    if keys.width() == built {
        Ok(())
    } else {
        Err(format!(
            "{name} was built for {built:?} keys, key set {keys} has {:?} keys",
            keys.width()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Key types of the generic peers
// ---------------------------------------------------------------------------------------------

/// A key type the generic peers are instantiated with: `u64` for 8-byte key sets, `Vec<u8>` for
/// variable-length ones. Lookups borrow the key as [`PeerKey::Ref`] (`u64` / `[u8]`), so only
/// inserts build an owned key.
pub trait PeerKey: Ord + Clone + Send + Sync + 'static {
    /// The borrowed form lookups compare against.
    type Ref: ?Sized + Ord;
    /// Whether this type holds keys of `width`.
    fn holds(width: KeyWidth) -> bool;
    /// An owned key from a benchmark key of the matching width.
    fn owned(key: Key<'_>) -> Self;
    /// Calls `f` with the borrowed form of a benchmark key of the matching width.
    fn with_ref<R>(key: Key<'_>, f: impl FnOnce(&Self::Ref) -> R) -> R;
    /// The benchmark key for a stored key.
    fn key(&self) -> Key<'_>;
}

impl PeerKey for u64 {
    type Ref = u64;

    fn holds(width: KeyWidth) -> bool {
        width == KeyWidth::Fixed8
    }

    #[inline]
    fn owned(key: Key<'_>) -> Self {
        match key {
            Key::U64(v) => v,
            Key::Bytes(_) => panic!("a u64-keyed peer got a variable-length key"),
        }
    }

    #[inline]
    fn with_ref<R>(key: Key<'_>, f: impl FnOnce(&u64) -> R) -> R {
        f(&Self::owned(key))
    }

    #[inline]
    fn key(&self) -> Key<'_> {
        Key::U64(*self)
    }
}

impl PeerKey for Vec<u8> {
    type Ref = [u8];

    /// Byte strings hold 16-byte and variable-length key sets.
    fn holds(width: KeyWidth) -> bool {
        width != KeyWidth::Fixed8
    }

    #[inline]
    fn owned(key: Key<'_>) -> Self {
        match key {
            Key::Bytes(b) => b.to_vec(),
            Key::U64(_) => panic!("a byte-keyed peer got an integer key"),
        }
    }

    #[inline]
    fn with_ref<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
        match key {
            Key::Bytes(b) => f(b),
            Key::U64(_) => panic!("a byte-keyed peer got an integer key"),
        }
    }

    #[inline]
    fn key(&self) -> Key<'_> {
        Key::Bytes(self)
    }
}

/// Whether a peer keyed by `K` can hold key set `keys`.
fn peer_key_check<K: PeerKey>(name: &str, keys: KeySetKind) -> Result<(), String> {
    if K::holds(keys.width()) {
        Ok(())
    } else {
        Err(format!(
            "{name} was built for other keys than key set {keys}'s {:?} keys",
            keys.width()
        ))
    }
}

/// Locks the mutex of a single-threaded peer (always uncontended), whether or not a panic
/// poisoned it.
fn lock_unpoisoned<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Visits the first `n` of `entries`; returns how many it visited.
#[inline]
fn visit_entries<'a, K: PeerKey>(
    entries: impl Iterator<Item = (&'a K, &'a u64)>,
    n: usize,
    visit: &mut dyn FnMut(Key<'_>, u64),
) -> usize {
    let mut count = 0;
    for (key, &value) in entries.take(n) {
        visit(key.key(), value);
        count += 1;
    }
    count
}
