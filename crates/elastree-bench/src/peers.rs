//! Every index under measurement behind one trait, [`BenchIndex`]: elastree's kinds and the
//! peers (std `BTreeMap`, `bplustree`, `ferntree`, `congee`, `scc::TreeIndex`,
//! `crossbeam_skiplist::SkipMap` and a sorted array as the compactness bound).
//!
//! For 8-byte key sets the peers are instantiated with `u64` keys and elastree with
//! [`KeyLen::Fixed`]`(8)` big-endian byte keys; big-endian byte order equals numeric order, so
//! every index scans the same key sequence. For 16-byte key sets the peers use `Vec<u8>` keys
//! and elastree [`KeyLen::Fixed`]`(16)`; for every other key set (20- and 28-byte and
//! variable-length) the peers use `Vec<u8>` keys and elastree [`KeyLen::Variable`]. Byte-string
//! keys compare lexicographically, as elastree orders them. `congee` takes only 8-byte keys and
//! refuses the other sets.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use elastree::elastic::ElasticStats;
use elastree::{Direction, Index, IndexBuilder, IndexKind, KeyLen};

use elastree_dist::{DistOptions, DistStats};

use crate::cluster::{self, ClusterIndex, Owned};
use crate::keys::{Key, KeyData, KeySet, KeySetKind, KeyWidth};
use crate::workload::Workload;

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

    /// What the elasticity algorithm did so far (compactions, grows, expansions), for
    /// indexes with SeqTree leaves.
    fn elastic_stats(&self) -> Option<ElasticStats> {
        None
    }

    /// The cumulative counters of a distributed index's client (round trips, masters
    /// contacted, operations); `None` for every index that is not distributed.
    fn dist_stats(&self) -> Option<DistStats> {
        None
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
            Peer::Sorted => "sorted",
        }
    }
}

/// What to measure: one of elastree's kinds or a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexSpec {
    /// An elastree index kind.
    Elastree(IndexKind),
    /// A peer index.
    Peer(Peer),
}

impl IndexSpec {
    /// Every index the benchmark knows: elastree's kinds, then the peers.
    pub fn all() -> Vec<IndexSpec> {
        IndexKind::ALL
            .iter()
            .map(|&k| IndexSpec::Elastree(k))
            .chain(Peer::ALL.iter().map(|&p| IndexSpec::Peer(p)))
            .collect()
    }

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            IndexSpec::Elastree(kind) => kind.name(),
            IndexSpec::Peer(peer) => peer.name(),
        }
    }

    /// Whether the index lives on a Redis Cluster (`dist`, `dist-baseline`): it is built by
    /// [`IndexSpec::build_on`] with a cluster address and is not in [`IndexSpec::all`].
    pub fn is_distributed(self) -> bool {
        matches!(self, IndexSpec::Elastree(kind) if kind.is_distributed())
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
            (IndexSpec::Elastree(kind), Some(seed)) if kind.is_distributed() => {
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
            (IndexSpec::Elastree(kind), _) if kind.is_distributed() => {
                return Err(format!(
                    "{kind} lives on a Redis Cluster: build it with a cluster address"
                ))
            }
            (IndexSpec::Elastree(kind), _) => {
                Box::new(Elastree::with_tuning(kind, keys, budget, tuning)?)
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
            (IndexSpec::Peer(Peer::Sorted), _) => Box::new(SortedArray::new(width)),
        })
    }
}

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
/// library's default (see [`IndexBuilder::tree_levels`] and [`IndexBuilder::breathing`]).
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
            IndexSpec::all().into_iter().chain(
                IndexKind::DISTRIBUTED
                    .iter()
                    .map(|&kind| IndexSpec::Elastree(kind)),
            )
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
        Workload::Delete => Err(why.to_string()),
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
// elastree
// ---------------------------------------------------------------------------------------------

/// An elastree index kind through its public [`Index`] trait. 8-byte key sets are stored as
/// big-endian bytes in an index built with [`KeyLen::Fixed`]`(8)`, 16-byte ones in an index
/// built with [`KeyLen::Fixed`]`(16)`, all others with [`KeyLen::Variable`]. The distributed
/// kinds ([`Elastree::on_cluster`]) take every key length and store the same big-endian
/// bytes.
pub struct Elastree {
    index: Held,
    kind: IndexKind,
    width: KeyWidth,
    /// The options the index was built with (the `static` kind is rebuilt by its bulk load).
    builder: IndexBuilder,
}

/// The index an [`Elastree`] adapter drives.
enum Held {
    /// Built by [`IndexBuilder`], in this process.
    Local(Box<dyn Index>),
    /// A client of an index on a Redis Cluster, deleted from the cluster when dropped.
    Cluster(Owned),
}

impl Elastree {
    /// Drives the distributed index of `client` (of distributed `kind`) for the keys of
    /// `keys`; the index is deleted from the cluster when the adapter is dropped.
    pub fn on_cluster(kind: IndexKind, keys: &KeySet, client: Box<dyn ClusterIndex>) -> Self {
        Self {
            index: Held::Cluster(Owned::new(client)),
            kind,
            width: keys.width(),
            builder: IndexBuilder::new(kind),
        }
    }

    /// The index.
    #[inline]
    fn index(&self) -> &dyn Index {
        match &self.index {
            Held::Local(index) => index.as_ref(),
            Held::Cluster(owned) => owned.client().index(),
        }
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
        let key_len = match width {
            KeyWidth::Fixed8 => KeyLen::Fixed(8),
            KeyWidth::Fixed16 => KeyLen::Fixed(16),
            KeyWidth::Variable => KeyLen::Variable,
        };
        let mut builder = IndexBuilder::new(kind).key_len(key_len);
        if kind.needs_key_source() {
            builder = builder.key_source(Arc::new(keys.clone()));
        }
        if kind == IndexKind::Elastic {
            builder = builder.budget(budget.bytes(keys.len()));
        }
        if tuning != SeqTreeTuning::default() && kind == IndexKind::BTree {
            return Err(format!(
                "elastree {kind} has no SeqTree leaves to tune ({})",
                tuning.label()
            ));
        }
        if let Some(levels) = tuning.tree_levels {
            builder = builder.tree_levels(levels);
        }
        if let Some(slots) = tuning.breathing {
            builder = builder.breathing(slots);
        }
        let index = builder
            .build()
            .map_err(|e| format!("building elastree {kind}: {e}"))?;
        Ok(Self {
            index: Held::Local(index),
            kind,
            width,
            builder,
        })
    }

    #[inline]
    fn with_bytes<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
        match key {
            Key::U64(v) => f(&v.to_be_bytes()),
            Key::Bytes(b) => f(b),
        }
    }

    #[inline]
    fn decode(width: KeyWidth, bytes: &[u8]) -> Key<'_> {
        match width {
            KeyWidth::Fixed8 => Key::U64(u64::from_be_bytes(
                bytes
                    .try_into()
                    .expect("a fixed-8 index returns 8-byte keys"),
            )),
            KeyWidth::Fixed16 | KeyWidth::Variable => Key::Bytes(bytes),
        }
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
        self.kind.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        width_check(self.name(), self.width, keys)
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        if self.kind.is_writable() {
            return Ok(());
        }
        reads_only(
            workload,
            "the static index is read-only (bulk-loaded from sorted keys)",
        )
    }

    fn loads_in_bulk(&self) -> bool {
        !self.kind.is_writable()
    }

    fn bulk_load(&mut self, keys: &KeySet) -> Result<(), String> {
        let mut pairs = keys.sorted_order().into_iter().map(|i| {
            let key = Self::with_bytes(keys.key(i as usize), <[u8]>::to_vec);
            (key, u64::from(i))
        });
        self.index = Held::Local(
            self.builder
                .build_sorted(&mut pairs)
                .map_err(|e| format!("bulk-loading elastree {}: {e}", self.kind))?,
        );
        Ok(())
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        if let Err(e) = Self::with_bytes(key, |k| self.index().insert(k, value)) {
            panic!("elastree {} insert failed: {e}", self.kind);
        }
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        if !self.may_hold(key) {
            return None;
        }
        Self::with_bytes(key, |k| self.index().get(k))
            .unwrap_or_else(|e| panic!("elastree {} get failed: {e}", self.kind))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let width = self.width;
        Self::with_bytes(start, |k| {
            self.index().scan(
                Bound::Included(k),
                Bound::Unbounded,
                Direction::Ascending,
                n,
                &mut |key, tid| visit(Self::decode(width, key), tid),
            )
        })
        .unwrap_or_else(|e| panic!("elastree {} scan failed: {e}", self.kind))
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let width = self.width;
        Self::with_bytes(start, |k| {
            self.index().scan(
                Bound::Unbounded,
                Bound::Included(k),
                Direction::Descending,
                n,
                &mut |key, tid| visit(Self::decode(width, key), tid),
            )
        })
        .unwrap_or_else(|e| panic!("elastree {} descending scan failed: {e}", self.kind))
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        if !self.may_hold(key) {
            return false;
        }
        Self::with_bytes(key, |k| self.index().remove(k))
            .unwrap_or_else(|e| panic!("elastree {} remove failed: {e}", self.kind))
            .is_some()
    }

    fn self_reported_bytes(&self) -> Option<usize> {
        // A distributed tree reports what it takes on the cluster's masters (one copy;
        // replicas hold more), as Redis counts it per key.
        Some(self.index().memory().total()).filter(|&b| b > 0)
    }

    fn quiesce(&self) {
        if let Err(e) = self.index().quiesce() {
            panic!("elastree {} background work failed: {e}", self.kind);
        }
    }

    fn elastic_stats(&self) -> Option<ElasticStats> {
        self.index().elastic_stats()
    }

    fn dist_stats(&self) -> Option<DistStats> {
        match &self.index {
            Held::Local(_) => None,
            Held::Cluster(owned) => Some(owned.client().stats()),
        }
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

// ---------------------------------------------------------------------------------------------
// std BTreeMap
// ---------------------------------------------------------------------------------------------

/// `std::collections::BTreeMap` behind a mutex. Single-threaded only: the mutex is always
/// uncontended and costs one lock/unlock pair per operation.
pub struct StdBTreeMap<K: PeerKey> {
    map: Mutex<BTreeMap<K, u64>>,
}

impl<K: PeerKey> StdBTreeMap<K> {
    /// An empty map.
    pub fn new() -> Self {
        Self {
            map: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<K, u64>> {
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<K: PeerKey> Default for StdBTreeMap<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for StdBTreeMap<K> {
    fn name(&self) -> &str {
        Peer::BTreeMap.name()
    }

    fn concurrent(&self) -> bool {
        false
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        peer_key_check::<K>(self.name(), keys)
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.lock().insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let map = self.lock();
        K::with_ref(key, |k| map.get(k).copied())
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let map = self.lock();
        K::with_ref(start, |k| {
            visit_entries(
                map.range::<K::Ref, _>((Bound::Included(k), Bound::Unbounded)),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let map = self.lock();
        K::with_ref(start, |k| {
            visit_entries(
                map.range::<K::Ref, _>((Bound::Unbounded, Bound::Included(k)))
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        let mut map = self.lock();
        K::with_ref(key, |k| map.remove(k).is_some())
    }
}

// ---------------------------------------------------------------------------------------------
// bplustree
// ---------------------------------------------------------------------------------------------

/// `bplustree::BPlusTree` (OLC B+-tree, default node capacities). Scans use its raw shared
/// iterator (`seek` then `next`), dropped right after, as its docs advise.
pub struct BPlus<K: PeerKey> {
    tree: bplustree::BPlusTree<K, u64>,
}

impl<K: PeerKey> BPlus<K> {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: bplustree::BPlusTree::new(),
        }
    }
}

impl<K: PeerKey> Default for BPlus<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// Removes every key in ascending order, in batches read by a short-lived shared iterator.
macro_rules! drain_ascending {
    ($tree:expr) => {
        loop {
            let batch: Vec<K> = {
                let mut iter = $tree.raw_iter();
                iter.seek_to_first();
                std::iter::from_fn(|| iter.next().map(|(key, _)| key.clone()))
                    .take(DRAIN_BATCH)
                    .collect()
            };
            if batch.is_empty() {
                break;
            }
            for key in &batch {
                $tree.remove(key);
            }
        }
    };
}

/// Visits up to `$n` pairs ascending from the first key `>= $start` with the raw shared
/// iterator of a bplustree or ferntree tree (`seek`, then `next`).
macro_rules! raw_scan_ascending {
    ($tree:expr, $start:expr, $n:expr, $visit:expr) => {
        K::with_ref($start, |k| {
            let mut iter = $tree.raw_iter();
            iter.seek(k);
            let mut count = 0;
            while count < $n {
                match iter.next() {
                    Some((key, &value)) => $visit(key.key(), value),
                    None => break,
                }
                count += 1;
            }
            count
        })
    };
}

/// Visits up to `$n` pairs descending from the last key `<= $start` with the raw shared
/// iterator of a bplustree or ferntree tree (`seek_for_prev`, then `prev`).
///
/// bplustree 0.1's `seek_for_prev` of a key that is absent and falls inside a leaf leaves the
/// cursor after the next *larger* key (ferntree 0.7 fixed this), so a first key above the start
/// is skipped; with ferntree, or a start key that is present, that never happens.
macro_rules! raw_scan_descending {
    ($tree:expr, $start:expr, $n:expr, $visit:expr) => {
        K::with_ref($start, |k| {
            let mut iter = $tree.raw_iter();
            iter.seek_for_prev(k);
            let mut count = 0;
            let mut first = true;
            while count < $n {
                match iter.prev() {
                    Some((key, _)) if first && Borrow::<K::Ref>::borrow(key) > k => {
                        first = false;
                        continue;
                    }
                    Some((key, &value)) => $visit(key.key(), value),
                    None => break,
                }
                first = false;
                count += 1;
            }
            count
        })
    };
}

/// Keys removed per batch when emptying a tree before dropping it.
const DRAIN_BATCH: usize = 4096;

/// bplustree 0.1 has no `Drop` for its tree: dropping it frees the root pointer's latch but
/// none of the nodes. Removing every key first frees them through its merges, so a dropped tree
/// does not stay resident for the rest of the run (and inflate later RSS readings).
impl<K: PeerKey> Drop for BPlus<K> {
    fn drop(&mut self) {
        drain_ascending!(self.tree);
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for BPlus<K> {
    fn name(&self) -> &str {
        Peer::BPlusTree.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        peer_key_check::<K>(self.name(), keys)
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.tree.insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| self.tree.lookup(k, |v| *v))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        raw_scan_ascending!(self.tree, start, n, visit)
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        raw_scan_descending!(self.tree, start, n, visit)
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.tree.remove(k).is_some())
    }
}

// ---------------------------------------------------------------------------------------------
// ferntree
// ---------------------------------------------------------------------------------------------

/// `ferntree::Tree` (OLC B+-tree, default node capacities). Point reads use the optimistic fast
/// path (`get_optimistic`) that its docs recommend for `Copy` values; scans use its raw shared
/// iterator.
pub struct Fern<K: PeerKey + ferntree::OptimisticRead> {
    tree: ferntree::Tree<K, u64>,
}

impl<K: PeerKey + ferntree::OptimisticRead> Fern<K> {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: ferntree::Tree::new(),
        }
    }
}

impl<K: PeerKey + ferntree::OptimisticRead> Default for Fern<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// ferntree 0.7 has no `Drop` for its tree either (and `clear` retires only the root node), so
/// dropping it leaks every node; emptying it first frees them through its merges.
impl<K: PeerKey + ferntree::OptimisticRead> Drop for Fern<K> {
    fn drop(&mut self) {
        drain_ascending!(self.tree);
    }
}

impl<K: PeerKey + ferntree::OptimisticRead + Borrow<K::Ref>> BenchIndex for Fern<K> {
    fn name(&self) -> &str {
        Peer::FernTree.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        peer_key_check::<K>(self.name(), keys)
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.tree.insert(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| self.tree.get_optimistic(k))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        raw_scan_ascending!(self.tree, start, n, visit)
    }

    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        raw_scan_descending!(self.tree, start, n, visit)
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.tree.remove(k).is_some())
    }
}

// ---------------------------------------------------------------------------------------------
// congee
// ---------------------------------------------------------------------------------------------

// congee keys and values are `usize`; the benchmark's 8-byte keys are `u64`.
const _: () = assert!(usize::BITS == 64, "the congee adapter needs 64-bit usize");

/// Why congee skips descending scans.
const CONGEE_NO_REVERSE: &str =
    "congee 0.4 has no reverse iteration (its only scan, `range`, is ascending)";

/// `congee::Congee` (ART with OLC), 8-byte keys only. Every operation pins an epoch, as the
/// crate's examples do; congee's range end is exclusive, so scans end at `u64::MAX` (which the
/// key generators never produce).
pub struct Art {
    tree: congee::Congee<usize, usize>,
}

impl Art {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: congee::Congee::default(),
        }
    }

    #[inline]
    fn key(key: Key<'_>) -> usize {
        match key {
            Key::U64(v) => v as usize,
            Key::Bytes(_) => panic!("congee got a variable-length key"),
        }
    }
}

impl Default for Art {
    fn default() -> Self {
        Self::new()
    }
}

impl BenchIndex for Art {
    fn name(&self) -> &str {
        Peer::Congee.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        match workload {
            Workload::ScanDesc => Err(CONGEE_NO_REVERSE.to_string()),
            _ => Ok(()),
        }
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        match keys.width() {
            KeyWidth::Fixed8 => Ok(()),
            KeyWidth::Fixed16 | KeyWidth::Variable => Err(format!(
                "congee (ART) supports only 8-byte integer keys; key set {keys} has {} keys",
                match keys.key_len() {
                    Some(len) => format!("{len}-byte"),
                    None => "variable-length".to_string(),
                }
            )),
        }
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        let guard = self.tree.pin();
        self.tree
            .insert(Self::key(key), value as usize, &guard)
            .expect("congee insert: out of memory");
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let guard = self.tree.pin();
        self.tree.get(&Self::key(key), &guard).map(|v| v as u64)
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        const CHUNK: usize = 32;
        let guard = self.tree.pin();
        let mut buffer = [(0usize, 0usize); CHUNK];
        let mut from = Self::key(start);
        let mut count = 0;
        while count < n {
            let want = (n - count).min(CHUNK);
            let got = self
                .tree
                .range(&from, &usize::MAX, &mut buffer[..want], &guard);
            for &(key, value) in &buffer[..got] {
                visit(Key::U64(key as u64), value as u64);
            }
            count += got;
            if got < want {
                break;
            }
            match buffer[got - 1].0.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
        count
    }

    /// Never called: congee refuses [`Workload::ScanDesc`].
    fn scan_desc(&self, _start: Key<'_>, _n: usize, _visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        panic!("{CONGEE_NO_REVERSE}");
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        let guard = self.tree.pin();
        self.tree.remove(&Self::key(key), &guard).is_some()
    }
}

// ---------------------------------------------------------------------------------------------
// scc::TreeIndex
// ---------------------------------------------------------------------------------------------

/// `scc::TreeIndex` through its synchronous API: `insert_sync`, lock-free `peek_with`, `range`
/// under a `Guard`, `remove_sync`.
pub struct SccTree<K: PeerKey> {
    tree: scc::TreeIndex<K, u64>,
}

impl<K: PeerKey> SccTree<K> {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: scc::TreeIndex::new(),
        }
    }
}

impl<K: PeerKey> Default for SccTree<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for SccTree<K> {
    fn name(&self) -> &str {
        Peer::Scc.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        peer_key_check::<K>(self.name(), keys)
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.tree.upsert_sync(K::owned(key), value);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| self.tree.peek_with(k, |_, v| *v))
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            let guard = scc::Guard::new();
            visit_entries(
                self.tree
                    .range::<K::Ref, _>((Bound::Included(k), Bound::Unbounded), &guard),
                n,
                visit,
            )
        })
    }

    /// `range(..=start)` iterated from the back: scc's `Range` is double-ended and starts its
    /// backward walk at the range's upper bound.
    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            let guard = scc::Guard::new();
            visit_entries(
                self.tree
                    .range::<K::Ref, _>((Bound::Unbounded, Bound::Included(k)), &guard)
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.tree.remove_sync(k))
    }
}

// ---------------------------------------------------------------------------------------------
// crossbeam_skiplist::SkipMap
// ---------------------------------------------------------------------------------------------

/// Visits the first `n` skip-list entries of `entries`; returns how many it visited.
#[inline]
fn visit_skip_entries<'a, K: PeerKey>(
    entries: impl Iterator<Item = crossbeam_skiplist::map::Entry<'a, K, AtomicU64>>,
    n: usize,
    visit: &mut dyn FnMut(Key<'_>, u64),
) -> usize {
    let mut count = 0;
    for entry in entries.take(n) {
        visit(entry.key().key(), entry.value().load(Ordering::Acquire));
        count += 1;
    }
    count
}

/// `crossbeam_skiplist::SkipMap` with `AtomicU64` values.
///
/// `SkipMap::insert` of a key that is present is not an atomic replacement: it unlinks the old
/// node, then links a new one, and a concurrent `get` in between finds no key at all. So values
/// are atomics, and an insert is `get_or_insert` (one search, as `insert` does) followed by a
/// store into the entry's value: an update of a present key never makes it disappear.
pub struct Skip<K: PeerKey> {
    map: crossbeam_skiplist::SkipMap<K, AtomicU64>,
}

impl<K: PeerKey> Skip<K> {
    /// An empty map.
    pub fn new() -> Self {
        Self {
            map: crossbeam_skiplist::SkipMap::new(),
        }
    }
}

impl<K: PeerKey> Default for Skip<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PeerKey + Borrow<K::Ref>> BenchIndex for Skip<K> {
    fn name(&self) -> &str {
        Peer::SkipMap.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        peer_key_check::<K>(self.name(), keys)
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        self.map
            .get_or_insert(K::owned(key), AtomicU64::new(value))
            .value()
            .store(value, Ordering::Release);
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        K::with_ref(key, |k| {
            self.map
                .get(k)
                .map(|entry| entry.value().load(Ordering::Acquire))
        })
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            visit_skip_entries(
                self.map
                    .range::<K::Ref, _>((Bound::Included(k), Bound::Unbounded)),
                n,
                visit,
            )
        })
    }

    /// `range(..=start)` iterated from the back (`SkipMap`'s `Range` is double-ended).
    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        K::with_ref(start, |k| {
            visit_skip_entries(
                self.map
                    .range::<K::Ref, _>((Bound::Unbounded, Bound::Included(k)))
                    .rev(),
                n,
                visit,
            )
        })
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        K::with_ref(key, |k| self.map.remove(k).is_some())
    }
}

// ---------------------------------------------------------------------------------------------
// Sorted array
// ---------------------------------------------------------------------------------------------

enum SortedData {
    Empty,
    /// `(key, tid)` pairs sorted by key.
    Fixed(Vec<(u64, u64)>),
    /// Keys sorted and packed in one buffer: key `i` is `data[offsets[i]..offsets[i + 1]]`
    /// with tid `tids[i]`.
    Var {
        data: Vec<u8>,
        offsets: Vec<u32>,
        tids: Vec<u64>,
    },
}

/// A sorted array built by one bulk sort: `Vec<(u64, u64)>` for 8-byte keys; for
/// byte-string keys (fixed or variable length) the sorted key bytes packed in one buffer with 4-byte offsets and a
/// tid array. The compactness bound: read-only (lookups and scans by binary search), no
/// inserts or deletes.
pub struct SortedArray {
    width: KeyWidth,
    data: SortedData,
}

impl SortedArray {
    /// An empty array for keys of `width`; fill it with [`BenchIndex::bulk_load`].
    pub fn new(width: KeyWidth) -> Self {
        Self {
            width,
            data: SortedData::Empty,
        }
    }

    /// The position of the first key `>= key`.
    #[inline]
    fn lower_bound(&self, key: Key<'_>) -> usize {
        match (&self.data, key) {
            (SortedData::Empty, _) => 0,
            (SortedData::Fixed(pairs), Key::U64(k)) => pairs.partition_point(|&(x, _)| x < k),
            (
                SortedData::Var {
                    data,
                    offsets,
                    tids,
                },
                Key::Bytes(k),
            ) => {
                let key_at = |i: usize| &data[offsets[i] as usize..offsets[i + 1] as usize];
                let (mut lo, mut hi) = (0, tids.len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if key_at(mid) < k {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
            _ => panic!("sorted array got a key of the wrong width"),
        }
    }

    #[inline]
    fn entry(&self, i: usize) -> Option<(Key<'_>, u64)> {
        match &self.data {
            SortedData::Empty => None,
            SortedData::Fixed(pairs) => pairs.get(i).map(|&(k, v)| (Key::U64(k), v)),
            SortedData::Var {
                data,
                offsets,
                tids,
            } => tids.get(i).map(|&tid| {
                (
                    Key::Bytes(&data[offsets[i] as usize..offsets[i + 1] as usize]),
                    tid,
                )
            }),
        }
    }
}

impl BenchIndex for SortedArray {
    fn name(&self) -> &str {
        Peer::Sorted.name()
    }

    /// Reads are safe from many threads; the bulk load runs on one.
    fn concurrent(&self) -> bool {
        true
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        width_check(self.name(), self.width, keys)
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        reads_only(
            workload,
            "sorted array is read-only (built by one bulk sort)",
        )
    }

    fn loads_in_bulk(&self) -> bool {
        true
    }

    fn bulk_load(&mut self, keys: &KeySet) -> Result<(), String> {
        self.data = match &*keys.data {
            KeyData::U64(ks) => {
                let mut pairs: Vec<(u64, u64)> =
                    ks.iter().zip(0u64..).map(|(&k, i)| (k, i)).collect();
                pairs.sort_unstable_by_key(|&(k, _)| k);
                SortedData::Fixed(pairs)
            }
            KeyData::Fixed(_) | KeyData::Var(_) => {
                let total_bytes: usize = match &*keys.data {
                    KeyData::Fixed(ks) => ks.len() * ks.key_len(),
                    KeyData::Var(ks) => ks.total_bytes(),
                    KeyData::U64(_) => unreachable!("handled above"),
                };
                if u32::try_from(total_bytes).is_err() {
                    return Err("sorted array: key bytes exceed 4 GiB (4-byte offsets)".to_string());
                }
                let order = keys.sorted_order();
                let mut data = Vec::with_capacity(total_bytes);
                let mut offsets = Vec::with_capacity(order.len() + 1);
                offsets.push(0u32);
                let tids: Vec<u64> = order.iter().map(|&i| u64::from(i)).collect();
                for &i in &order {
                    match keys.key(i as usize) {
                        Key::Bytes(bytes) => data.extend_from_slice(bytes),
                        Key::U64(_) => unreachable!("byte-string key sets hold byte keys"),
                    }
                    offsets.push(data.len() as u32);
                }
                SortedData::Var {
                    data,
                    offsets,
                    tids,
                }
            }
        };
        Ok(())
    }

    fn insert(&self, _key: Key<'_>, _value: u64) {
        panic!("the sorted array is read-only: it is built by bulk_load");
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let pos = self.lower_bound(key);
        match self.entry(pos) {
            Some((k, tid)) if k == key => Some(tid),
            _ => None,
        }
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let pos = self.lower_bound(start);
        let mut count = 0;
        while count < n {
            match self.entry(pos + count) {
                Some((k, tid)) => visit(k, tid),
                None => break,
            }
            count += 1;
        }
        count
    }

    /// From the last key `<= start` back towards the first.
    #[inline]
    fn scan_desc(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        let pos = self.lower_bound(start);
        // One past the last key `<= start`.
        let end = match self.entry(pos) {
            Some((k, _)) if k == start => pos + 1,
            _ => pos,
        };
        let mut count = 0;
        for i in (0..end).rev().take(n) {
            let (k, tid) = self.entry(i).expect("below the end");
            visit(k, tid);
            count += 1;
        }
        count
    }

    fn remove(&self, _key: Key<'_>) -> bool {
        panic!("the sorted array is read-only");
    }

    fn self_reported_bytes(&self) -> Option<usize> {
        Some(match &self.data {
            SortedData::Empty => 0,
            SortedData::Fixed(pairs) => pairs.capacity() * std::mem::size_of::<(u64, u64)>(),
            SortedData::Var {
                data,
                offsets,
                tids,
            } => data.capacity() + offsets.capacity() * 4 + tids.capacity() * 8,
        })
    }
}
