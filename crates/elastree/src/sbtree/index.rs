//! [`SbTreeIndex`]: the SB-tree as an [`Index`], with its own options ([`SbTreeOptions`]).
//! It indexes fixed-width integer keys (8 bytes, or 16); it refuses other key lengths when
//! built. It runs one maintenance thread, stopped when the index is dropped.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::key::{Pos, SbKey};
use super::stats::SbTreeStats;
use super::tree::SbTree;
use super::Geometry;
use crate::index::{check_key, Direction, Index, KeyLen};
use crate::kind::KindOptions;
use crate::mem::MemoryUsage;
use crate::{Error, IndexKind, IndexOptions, KindStats};

/// The SB-tree's own options. The defaults are the paper's sizes (4 KiB blocks) and what the
/// measurements here settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SbTreeOptions {
    /// Bytes of every block: data block bodies and the blocks of the threads' runs (default
    /// 4096; a multiple of 64 from 256 to 65536). A shared `leaf_capacity` overrides it
    /// with the smallest block that holds that many entries (for tests).
    pub block_bytes: usize,
    /// Blocks of one thread's run before its segment is sealed (default 256: a segment
    /// seals after about 65,000 in-order appends of one thread). Every seal drops the
    /// entries other threads have yet to append below the sealed segment's largest one
    /// into the data layer (as delayed entries, after the segment's conversion, each a
    /// rewrite of a data block): with two threads appending batches of 256 keys, 16 blocks
    /// made 1.7% of the keys delayed, 64 made 0.2 to 0.6% (about 600 seals in 10M keys),
    /// 256 make 0.15% (about 140 seals); delayed workloads seal on their late runs and
    /// see no change. A run's blocks are allocated as it grows.
    pub run_blocks: usize,
    /// Slots for late entries in a data block rebuilt for one (default 16).
    pub late_slots: usize,
    /// Keys per bucket of the N-ary search table (default 16: one cache line of 32-bit
    /// keys).
    pub bucket: usize,
    /// Fan-out of the search layer (default 16; a shared `inner_capacity` overrides it).
    pub fanout: usize,
    /// Search with vector instructions when the CPU has them (default `true`); `false`
    /// searches with the portable code.
    pub simd: bool,
}

impl Default for SbTreeOptions {
    fn default() -> Self {
        Self {
            block_bytes: 4096,
            run_blocks: 256,
            late_slots: 16,
            bucket: 16,
            fanout: 16,
            simd: true,
        }
    }
}

impl SbTreeOptions {
    /// Checks the options against the shared ones.
    fn validate(&self, options: &IndexOptions) -> Result<(), Error> {
        options.validate()?;
        let bad = |what: String| Err(Error::InvalidConfig(what));
        match options.key_len {
            KeyLen::Fixed(8 | 16) => {}
            other => {
                return bad(format!(
                    "the sbtree kind indexes fixed-width integer keys of 8 or 16 bytes, not \
                     {other:?}: build it with key_len(KeyLen::Fixed(8)) or KeyLen::Fixed(16)"
                ))
            }
        }
        if !(256..=65536).contains(&self.block_bytes) || !self.block_bytes.is_multiple_of(64) {
            return bad(format!(
                "block bytes must be a multiple of 64 from 256 to 65536, not {}",
                self.block_bytes
            ));
        }
        let ranges = [
            ("run blocks", self.run_blocks, 1, 4096),
            ("late slots", self.late_slots, 0, 255),
            ("bucket", self.bucket, 2, 1024),
            ("fan-out", self.fanout, 2, 1024),
        ];
        for (what, value, lo, hi) in ranges {
            if !(lo..=hi).contains(&value) {
                return bad(format!("{what} must be from {lo} to {hi}, not {value}"));
            }
        }
        if options
            .leaf_capacity
            .is_some_and(|c| !(2..=4096).contains(&c))
        {
            return bad(format!(
                "leaf capacity must be from 2 to 4096, not {:?}",
                options.leaf_capacity
            ));
        }
        if options
            .inner_capacity
            .is_some_and(|c| !(2..=1024).contains(&c))
        {
            return bad(format!(
                "inner capacity (the search layer's fan-out) must be from 2 to 1024, not {:?}",
                options.inner_capacity
            ));
        }
        Ok(())
    }
}

impl KindOptions for SbTreeOptions {
    fn kind(&self) -> IndexKind {
        IndexKind::SbTree
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        Ok(Box::new(SbTreeIndex::new(options, self)?))
    }
}

/// The tree behind the index, by key width.
enum Trees {
    U64(Arc<SbTree<u64>>),
    U128(Arc<SbTree<u128>>),
}

/// Runs `$body` with `$tree` bound to the index's tree, whatever its key type.
macro_rules! with_tree {
    ($self:expr, $tree:ident => $body:expr) => {
        match &$self.trees {
            Trees::U64($tree) => $body,
            Trees::U128($tree) => $body,
        }
    };
}

/// The SB-tree as an [`Index`]. See the module docs of [`super`].
pub struct SbTreeIndex {
    trees: Trees,
    unique: bool,
    max_key_len: usize,
    key_len: KeyLen,
    /// A key length that passes [`check_key`] (the fixed length, when it is at most the
    /// longest allowed; else `usize::MAX`): inserts of keys of that length skip the check.
    valid_len: usize,
    stop: Arc<AtomicBool>,
    maintainer: Option<JoinHandle<()>>,
}

/// The maintenance thread's loop: parked until woken, then the pending conversions, each
/// followed by its maintenance pass ([`SbTree::convert_oldest`]) so that the search layer
/// grows and converted segments are freed while sealers keep it converting; then one pass.
/// It keeps the block allocator's reserve filled ([`super::alloc::BlockAlloc::prepare`]), so
/// that inserting threads rarely fault in new memory themselves.
fn maintain_loop<K: SbKey>(tree: Arc<SbTree<K>>, stop: Arc<AtomicBool>) {
    loop {
        std::thread::park();
        while !stop.load(Ordering::Acquire) && tree.convert_oldest(0) {
            tree.collect_garbage();
            tree.res.blocks.prepare();
        }
        if stop.load(Ordering::Acquire) {
            return;
        }
        tree.maintain(&mut super::lock(&tree.maintenance));
        tree.collect_garbage();
        tree.res.blocks.prepare();
    }
}

impl SbTreeIndex {
    /// An empty index, or the option that cannot be honoured.
    pub fn new(options: &IndexOptions, own: &SbTreeOptions) -> Result<Self, Error> {
        own.validate(options)?;
        let pairs = !options.unique;
        let stop = Arc::new(AtomicBool::new(false));
        let spawn = |name: &str, work: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(work)
                .map_err(|e| {
                    Error::InvalidConfig(format!(
                        "cannot start the SB-tree's maintenance thread: {e}"
                    ))
                })
        };
        let (trees, maintainer) = match options.key_len {
            KeyLen::Fixed(8) => {
                let geo =
                    Geometry::new::<u64>(own, pairs, options.leaf_capacity, options.inner_capacity);
                let tree = Arc::new(SbTree::<u64>::new(geo));
                let (t, s) = (Arc::clone(&tree), Arc::clone(&stop));
                let handle = spawn("sbtree-maintain", Box::new(move || maintain_loop(t, s)))?;
                let _ = tree.maintainer.set(handle.thread().clone());
                (Trees::U64(tree), handle)
            }
            _ => {
                let geo = Geometry::new::<u128>(
                    own,
                    pairs,
                    options.leaf_capacity,
                    options.inner_capacity,
                );
                let tree = Arc::new(SbTree::<u128>::new(geo));
                let (t, s) = (Arc::clone(&tree), Arc::clone(&stop));
                let handle = spawn("sbtree-maintain", Box::new(move || maintain_loop(t, s)))?;
                let _ = tree.maintainer.set(handle.thread().clone());
                (Trees::U128(tree), handle)
            }
        };
        Ok(Self {
            trees,
            unique: options.unique,
            max_key_len: options.max_key_len,
            key_len: options.key_len,
            valid_len: match options.key_len {
                KeyLen::Fixed(n)
                    if check_key(&vec![0; n], options.max_key_len, options.key_len).is_ok() =>
                {
                    n
                }
                _ => usize::MAX,
            },
            stop,
            maintainer: Some(maintainer),
        })
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        check_key(key, self.max_key_len, self.key_len)
    }

    /// The statistics.
    pub fn stats(&self) -> SbTreeStats {
        with_tree!(self, tree => {
            let guard = &crossbeam_epoch::pin();
            let mut blocks = 0;
            let mut b = tree.data.head();
            while !b.is_null() {
                blocks += 1;
                // SAFETY: a linked block; the guard keeps it allocated.
                b = unsafe { &*b }.next();
            }
            SbTreeStats {
                seals: tree.counters.seals.get(),
                converted: tree.counters.converted.get(),
                delayed_inserts: tree.counters.delayed.get(),
                late_inserts: tree.counters.late.get(),
                spilled_inserts: tree.counters.spilled.get(),
                met: tree.counters.met.get(),
                data_blocks: blocks,
                indexed_blocks: tree.data.search_layer(guard).len(),
                search_rebuilds: super::lock(&tree.maintenance).rebuilds,
                data_entries: tree.data.len(),
            }
        })
    }

    /// Seals the frontier and converts everything into data blocks, then runs a maintenance
    /// pass (tests use it to move every entry into the data layer).
    pub fn flush(&self) {
        with_tree!(self, tree => {
            tree.flush();
            tree.maintain(&mut super::lock(&tree.maintenance));
        })
    }
}

/// A byte bound of a scan as a bound on keys of `K`'s width: a shorter bound is zero-padded
/// (at or above it means at or above the padded key, below it means below the padded key), a
/// longer one is truncated (above it means above the truncated key, at or below it means at
/// or below it); then as a bound on positions (a key's pairs run from tid 0 to tid max).
fn pos_bound<K: SbKey>(bound: Bound<&[u8]>, lower: bool, pairs: bool) -> Bound<Pos<K>> {
    let (bytes, inclusive) = match bound {
        Bound::Unbounded => return Bound::Unbounded,
        Bound::Included(b) => (b, true),
        Bound::Excluded(b) => (b, false),
    };
    let mut buf = [0u8; 16];
    let n = bytes.len().min(K::BYTES);
    buf[..n].copy_from_slice(&bytes[..n]);
    let key = K::from_be_slice(&buf[..K::BYTES]);
    let inclusive = match bytes.len().cmp(&K::BYTES) {
        std::cmp::Ordering::Equal => inclusive,
        std::cmp::Ordering::Less => lower,
        std::cmp::Ordering::Greater => !lower,
    };
    let tid = match (pairs, lower, inclusive) {
        (false, _, _) => 0,
        // Above the key: past its last pair; at or above: from its first.
        (true, true, false) | (true, false, true) => u64::MAX,
        (true, true, true) | (true, false, false) => 0,
    };
    let pos = Pos { key, tid };
    if inclusive {
        Bound::Included(pos)
    } else {
        Bound::Excluded(pos)
    }
}

impl Index for SbTreeIndex {
    fn kind(&self) -> &'static str {
        IndexKind::SbTree.name()
    }

    fn is_unique(&self) -> bool {
        self.unique
    }

    fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    #[inline]
    fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, Error> {
        if key.len() != self.valid_len {
            self.check_key(key)?;
        }
        Ok(with_tree!(self, tree => tree.insert(SbKey::from_be_slice(key), tid)))
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        if !self.unique {
            let mut first = None;
            let bound = Bound::Included(key);
            self.scan(bound, bound, Direction::Ascending, 1, &mut |_, tid| {
                first = Some(tid)
            })?;
            return Ok(first);
        }
        self.check_key(key)?;
        Ok(with_tree!(self, tree => tree.get(Pos { key: SbKey::from_be_slice(key), tid: 0 })))
    }

    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error> {
        if self.unique {
            out.extend(self.get(key)?);
            return Ok(());
        }
        let bound = Bound::Included(key);
        self.scan(
            bound,
            bound,
            Direction::Ascending,
            usize::MAX,
            &mut |_, tid| out.push(tid),
        )?;
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.check_key(key)?;
        if !self.unique {
            return Err(Error::Unsupported {
                operation: "remove(key)",
                reason: "a non-unique index removes (key, tid) pairs: use remove_pair",
            });
        }
        Ok(with_tree!(self, tree => tree.remove(SbKey::from_be_slice(key), None)))
    }

    fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, Error> {
        self.check_key(key)?;
        Ok(with_tree!(self, tree => tree.remove(SbKey::from_be_slice(key), Some(tid)).is_some()))
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, Error> {
        for bound in [lower, upper] {
            if let Bound::Included(b) | Bound::Excluded(b) = bound {
                if b.len() > self.max_key_len {
                    return Err(Error::KeyTooLong {
                        len: b.len(),
                        max: self.max_key_len,
                    });
                }
            }
        }
        let pairs = !self.unique;
        let descending = direction == Direction::Descending;
        Ok(with_tree!(self, tree => {
            let mut buf = [0u8; 16];
            tree.scan(
                pos_bound(lower, true, pairs),
                pos_bound(upper, false, pairs),
                descending,
                limit,
                &mut |k, t| {
                    k.write_be(&mut buf);
                    visit(&buf[..key_bytes(&k)], t)
                },
            )
        }))
    }

    fn len(&self) -> usize {
        with_tree!(self, tree => tree.len())
    }

    fn memory(&self) -> MemoryUsage {
        with_tree!(self, tree => {
            let res = &tree.res;
            let blocks = res.blocks.bytes();
            let free = res.blocks.free_bytes();
            let runs = res.run_blocks.get();
            MemoryUsage {
                inner: res.search.get(),
                leaves: res.headers.get() + blocks.saturating_sub(free + runs),
                aux: free
                    + runs
                    + res.aux.get()
                    + std::mem::size_of::<Self>()
                    + std::mem::size_of_val(&**tree)
                    + crate::mem::arc_bytes::<super::Resources>(),
            }
        })
    }

    fn check(&self) -> Result<(), Error> {
        with_tree!(self, tree => tree.check()).map_err(Error::Corrupt)
    }

    fn quiesce(&self) -> Result<(), Error> {
        with_tree!(self, tree => {
            tree.convert_pending(0);
            tree.maintain(&mut super::lock(&tree.maintenance));
            tree.collect_garbage();
        });
        Ok(())
    }

    fn stats(&self) -> Option<Box<dyn KindStats>> {
        Some(Box::new(SbTreeIndex::stats(self)))
    }
}

/// Bytes of a key of `k`'s type.
fn key_bytes<K: SbKey>(_: &K) -> usize {
    K::BYTES
}

impl Drop for SbTreeIndex {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.maintainer.take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}
