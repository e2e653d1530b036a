//! [`HybridIndex`]: the layer stack of the module docs behind the [`Index`] trait.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned};

use super::bloom::key_hash;
use super::dynamic::{Codec, Dynamic, DEAD, LIVE, TOMBSTONE};
use super::layers::{DynamicStream, Layered, StaticStream, Stream};
use super::static_stage::{StaticOptions, StaticStage};
use super::{HybridOptions, MergeMode, MergeStrategy};
use crate::{Direction, Error, Index, IndexBuilder, IndexKind, KeyLen, MemoryUsage};

/// Writers of one key serialise on one of this many lock stripes.
const STRIPES: usize = 1024;

/// The layer stack at one instant. Immutable once published; replaced whole by a merge.
pub(super) struct View {
    /// The bottom layer.
    pub(super) base: Arc<StaticStage>,
    /// Dynamic stages below the active one, newest first: the stage being merged, and under
    /// merge-cold the recently used entries carried over from earlier merges.
    pub(super) frozen: Vec<Arc<Dynamic>>,
    /// The stage every write goes to.
    pub(super) active: Arc<Dynamic>,
}

impl View {
    /// Entries in the dynamic stages.
    pub(super) fn dynamics_len(&self) -> usize {
        self.dynamics().map(|d| d.len()).sum()
    }

    /// The dynamic stages, highest first.
    fn dynamics(&self) -> impl Iterator<Item = &Arc<Dynamic>> {
        std::iter::once(&self.active).chain(&self.frozen)
    }
}

/// What one merge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeRecord {
    /// Pairs in the static stage before the merge.
    pub static_before: usize,
    /// Pairs in the static stage after it.
    pub static_after: usize,
    /// Dynamic-stage entries applied to the static stage (inserts, updates, tombstones).
    pub merged: usize,
    /// Entries kept in a dynamic stage because they were recently used (merge-cold).
    pub carried: usize,
    /// When the merge started, counted from the index's creation.
    pub started: Duration,
    /// Wall time of the merge.
    pub duration: Duration,
}

/// What the hybrid index has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HybridStats {
    /// Merges completed.
    pub merges: u64,
    /// Total time spent merging.
    pub merge_time: Duration,
    /// The most recent merges (up to 4096), oldest first.
    pub records: Vec<MergeRecord>,
    /// Pairs in the static stage now.
    pub static_len: usize,
    /// Entries in the dynamic stages now (live and tombstones).
    pub dynamic_len: usize,
}

/// State shared by the index and its merge thread.
pub(super) struct Shared {
    pub(super) kind: IndexKind,
    pub(super) unique: bool,
    pub(super) max_key_len: usize,
    pub(super) key_len: KeyLen,
    pub(super) options: HybridOptions,
    pub(super) codec: Codec,
    /// Options of every dynamic stage's tree.
    pub(super) tree: IndexBuilder,
    view: Atomic<View>,
    /// Live pairs: changed by writers only (a merge moves pairs, it does not add any).
    live: AtomicIsize,
    stripes: Box<[Stripe]>,
    /// Set while a merge runs; at most one runs at a time.
    pub(super) merging: AtomicBool,
    /// Held shared by every operation in [`MergeMode::Blocking`], exclusively by its merge.
    pub(super) gate: RwLock<()>,
    /// Serialises view publication.
    pub(super) publish: Mutex<()>,
    pub(super) stats: Mutex<HybridStats>,
    /// The background merge thread, if one was started.
    pub(super) merger: Mutex<Option<JoinHandle<()>>>,
    /// The first error a background merge hit (the index stays valid: the merge is abandoned
    /// with the frozen stage still readable).
    pub(super) merge_error: Mutex<Option<Error>>,
    /// When the index was created (merge records count from here).
    pub(super) created: Instant,
}

#[repr(align(64))]
struct Stripe(Mutex<()>);

/// The hybrid index: see the [module docs](super).
pub struct HybridIndex {
    shared: Arc<Shared>,
}

impl HybridIndex {
    /// Builds an empty index from the builder's options (`hybrid` or `hybrid-compressed`).
    pub fn new(options: &IndexBuilder) -> Result<Self, Error> {
        options.validate_common()?;
        let mut hybrid = options.hybrid.clone().unwrap_or_default();
        if options.kind == IndexKind::HybridCompressed {
            hybrid.compression = super::Compression::Lz4;
        }
        hybrid.validate()?;
        let codec = match (options.unique, options.key_len) {
            (true, _) => Codec::Unique,
            (false, KeyLen::Fixed(len)) => Codec::FixedPairs(len),
            (false, KeyLen::Variable) => {
                if 2 * options.max_key_len + 10 > crate::MAX_KEY_LEN_LIMIT {
                    return Err(Error::InvalidConfig(format!(
                        "a non-unique hybrid index with variable-length keys accepts keys of at \
                         most {} bytes (its dynamic stage stores escaped (key, tid) pairs), not {}",
                        (crate::MAX_KEY_LEN_LIMIT - 10) / 2,
                        options.max_key_len
                    )));
                }
                Codec::VarPairs
            }
        };
        let tree = Dynamic::tree_options(options, codec);
        let mut static_options = StaticOptions::new(options.unique, options.key_len);
        static_options.compression = hybrid.compression;
        static_options.cache_blocks = hybrid.cache_blocks;
        let active = Dynamic::new(
            &tree,
            codec,
            hybrid.filter_keys(0),
            hybrid.bloom_bits_per_key,
            hybrid.strategy == MergeStrategy::Cold,
        )?;
        let view = View {
            base: Arc::new(StaticStage::empty(static_options)),
            frozen: Vec::new(),
            active: Arc::new(active),
        };
        Ok(Self {
            shared: Arc::new(Shared {
                kind: options.kind,
                unique: options.unique,
                max_key_len: options.max_key_len,
                key_len: options.key_len,
                options: hybrid,
                codec,
                tree,
                view: Atomic::new(view),
                live: AtomicIsize::new(0),
                stripes: (0..STRIPES).map(|_| Stripe(Mutex::new(()))).collect(),
                merging: AtomicBool::new(false),
                gate: RwLock::new(()),
                publish: Mutex::new(()),
                stats: Mutex::new(HybridStats::default()),
                merger: Mutex::new(None),
                merge_error: Mutex::new(None),
                created: Instant::now(),
            }),
        })
    }

    /// Waits for a running background merge, if any, to finish, and reports the error it
    /// hit, if any.
    pub fn wait_for_merge(&self) -> Result<(), Error> {
        let handle = self.shared.merger.lock().expect("merger lock").take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
        match self
            .shared
            .merge_error
            .lock()
            .expect("merge error lock")
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Merges the dynamic stages into the static stage now, on this thread, and returns once
    /// done (waiting first for a background merge that is running).
    pub fn merge_now(&self) -> Result<(), Error> {
        self.wait_for_merge()?;
        while self
            .shared
            .merging
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            std::thread::yield_now();
        }
        super::merge::run(&self.shared)
    }

    /// Merge counts and timings, and the sizes of the stages.
    pub fn stats(&self) -> HybridStats {
        self.shared.stats()
    }
}

impl Drop for HybridIndex {
    fn drop(&mut self) {
        // A background merge holds the shared state; let it finish so no thread outlives
        // the index.
        let _ = self.wait_for_merge();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last owner is being dropped, so no thread can load the view any more;
        // `unprotected` is sound without concurrent access.
        unsafe {
            let guard = epoch::unprotected();
            let view = self.view.load(Ordering::Acquire, guard);
            if !view.is_null() {
                drop(view.into_owned());
            }
        }
    }
}

impl Shared {
    /// The current view, valid while `guard` is held.
    pub(super) fn view<'g>(&self, guard: &'g Guard) -> &'g View {
        let view = self.view.load(Ordering::Acquire, guard);
        // SAFETY: the view is never null (set at construction, only ever swapped for
        // another), and a replaced view is destroyed through `defer_destroy`, so it outlives
        // every guard pinned while it was current.
        unsafe { view.deref() }
    }

    /// Replaces the view. Callers hold `publish`.
    pub(super) fn set_view(&self, view: View, guard: &Guard) {
        let old = self.view.swap(Owned::new(view), Ordering::AcqRel, guard);
        // SAFETY: `old` was the published view and is now unreachable from the index; readers
        // that loaded it hold guards, so destruction waits for them.
        unsafe { guard.defer_destroy(old) };
    }

    pub(super) fn stats(&self) -> HybridStats {
        let mut stats = self.stats.lock().expect("stats lock").clone();
        let guard = epoch::pin();
        let view = self.view(&guard);
        stats.static_len = view.base.len();
        stats.dynamic_len = view.dynamics().map(|d| d.len()).sum();
        stats
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        if key.len() > self.max_key_len {
            return Err(Error::KeyTooLong {
                len: key.len(),
                max: self.max_key_len,
            });
        }
        if let KeyLen::Fixed(expected) = self.key_len {
            if key.len() != expected {
                return Err(Error::KeyLenMismatch {
                    len: key.len(),
                    expected,
                });
            }
        }
        Ok(())
    }

    fn gate(&self) -> Option<RwLockReadGuard<'_, ()>> {
        (self.options.mode == MergeMode::Blocking)
            .then(|| self.gate.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn stripe(&self, hash: u64) -> MutexGuard<'_, ()> {
        let stripe = &self.stripes[(hash as usize) % STRIPES];
        stripe.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `write` on the active stage of the current view, reloading the view if a merge
    /// froze the stage in between.
    ///
    /// Also says whether the active stage has reached the merge trigger.
    fn write<T>(
        &self,
        write: impl Fn(&View, &Dynamic) -> Result<T, Error>,
    ) -> Result<(T, bool), Error> {
        let guard = epoch::pin();
        loop {
            let view = self.view(&guard);
            if let Some(_inside) = view.active.enter() {
                let result = write(view, &view.active)?;
                let due = view.active.len() >= self.options.merge_threshold(view.base.len());
                return Ok((result, due));
            }
            std::thread::yield_now();
        }
    }

    /// Unique index: the live tid of `key` in the layers below the active stage.
    fn unique_below(&self, view: &View, key: &[u8], hash: u64) -> Result<Option<u64>, Error> {
        for stage in &view.frozen {
            if let Some(value) = stage.get(key, hash)? {
                stage.touch(hash);
                return Ok((value != TOMBSTONE).then_some(value));
            }
        }
        Ok(view.base.get(key))
    }

    /// Non-unique index: whether `(key, tid)` is present below the active stage.
    fn pair_below(
        &self,
        view: &View,
        key: &[u8],
        hash: u64,
        tree_key: &[u8],
    ) -> Result<bool, Error> {
        for stage in &view.frozen {
            if let Some(value) = stage.get(tree_key, hash)? {
                stage.touch(hash);
                return Ok(value == LIVE);
            }
        }
        let tid = u64::from_be_bytes(tree_key[tree_key.len() - 8..].try_into().expect("tid"));
        Ok(view.base.contains_pair(key, tid))
    }

    /// After a write: starts a merge if the write found the active stage at the trigger.
    fn maybe_merge(self: &Arc<Self>, due: bool) -> Result<(), Error> {
        if !due
            || self
                .merging
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return Ok(());
        }
        match self.options.mode {
            MergeMode::Blocking => super::merge::run(self),
            MergeMode::Background => {
                let mut merger = self.merger.lock().expect("merger lock");
                if let Some(done) = merger.take() {
                    let _ = done.join();
                }
                let shared = Arc::clone(self);
                *merger = Some(std::thread::spawn(move || {
                    if let Err(e) = super::merge::run(&shared) {
                        shared
                            .merge_error
                            .lock()
                            .expect("merge error lock")
                            .get_or_insert(e);
                    }
                }));
                Ok(())
            }
        }
    }
}

impl Index for HybridIndex {
    fn kind(&self) -> IndexKind {
        self.shared.kind
    }

    fn is_unique(&self) -> bool {
        self.shared.unique
    }

    fn max_key_len(&self) -> usize {
        self.shared.max_key_len
    }

    fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, Error> {
        let s = &self.shared;
        s.check_key(key)?;
        if s.unique && tid == TOMBSTONE {
            return Err(Error::Unsupported {
                operation: "insert",
                reason: "tid u64::MAX is reserved: a unique hybrid index uses it as its tombstone",
            });
        }
        let hash = key_hash(key);
        let (result, due) = {
            let _gate = s.gate();
            let _stripe = s.stripe(hash);
            let tree_key = s.codec.tree_key(key, tid);
            s.write(|view, active| {
                if s.unique {
                    Ok(match active.put(&tree_key, hash, tid)? {
                        Some(TOMBSTONE) => None,
                        Some(previous) => Some(previous),
                        None => s.unique_below(view, key, hash)?,
                    })
                } else {
                    match active.get(&tree_key, hash)? {
                        Some(LIVE) => return Ok(Some(tid)),
                        Some(_) if s.pair_below(view, key, hash, &tree_key)? => {
                            active.take(&tree_key)?;
                        }
                        Some(_) => {
                            active.put(&tree_key, hash, LIVE)?;
                        }
                        None if s.pair_below(view, key, hash, &tree_key)? => return Ok(Some(tid)),
                        None => {
                            active.put(&tree_key, hash, LIVE)?;
                        }
                    }
                    Ok(None)
                }
            })?
        };
        if result.is_none() {
            s.live.fetch_add(1, Ordering::Relaxed);
        }
        s.maybe_merge(due)?;
        Ok(result)
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        let s = &self.shared;
        s.check_key(key)?;
        if !s.unique {
            let mut all = Vec::new();
            self.get_all(key, &mut all)?;
            return Ok(all.first().copied());
        }
        let hash = key_hash(key);
        let _gate = s.gate();
        let guard = epoch::pin();
        let view = s.view(&guard);
        for stage in view.dynamics() {
            if let Some(value) = stage.get(key, hash)? {
                stage.touch(hash);
                return Ok((value != TOMBSTONE).then_some(value));
            }
        }
        Ok(view.base.get(key))
    }

    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error> {
        let s = &self.shared;
        if s.unique {
            out.extend(self.get(key)?);
            return Ok(());
        }
        s.check_key(key)?;
        let hash = key_hash(key);
        let _gate = s.gate();
        let guard = epoch::pin();
        let view = s.view(&guard);
        // Overrides from the dynamic stages, highest first: the first entry of a pair wins.
        let mut decided: Vec<(u64, bool)> = Vec::new();
        let mut entries = Vec::new();
        for stage in view.dynamics() {
            entries.clear();
            stage.pairs_of(key, hash, &mut entries)?;
            if !entries.is_empty() {
                stage.touch(hash);
            }
            for &(tid, live) in &entries {
                if !decided.iter().any(|&(t, _)| t == tid) {
                    decided.push((tid, live));
                }
            }
        }
        let start = out.len();
        if decided.is_empty() {
            view.base.get_all(key, out);
            return Ok(());
        }
        let mut from_static = Vec::new();
        view.base.get_all(key, &mut from_static);
        out.extend(
            from_static
                .into_iter()
                .filter(|t| !decided.iter().any(|&(d, _)| d == *t)),
        );
        out.extend(decided.iter().filter(|&&(_, live)| live).map(|&(t, _)| t));
        out[start..].sort_unstable();
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        let s = &self.shared;
        s.check_key(key)?;
        if !s.unique {
            return Err(Error::Unsupported {
                operation: "remove(key)",
                reason: "a non-unique index removes (key, tid) pairs: use remove_pair",
            });
        }
        let hash = key_hash(key);
        let (removed, due) = {
            let _gate = s.gate();
            let _stripe = s.stripe(hash);
            s.write(|view, active| {
                let below = s.unique_below(view, key, hash)?;
                let previous = if below.is_some() {
                    active.put(key, hash, TOMBSTONE)?
                } else {
                    active.take(key)?
                };
                Ok(match previous {
                    Some(TOMBSTONE) => None,
                    Some(tid) => Some(tid),
                    None => below,
                })
            })?
        };
        if removed.is_some() {
            s.live.fetch_sub(1, Ordering::Relaxed);
        }
        s.maybe_merge(due)?;
        Ok(removed)
    }

    fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, Error> {
        let s = &self.shared;
        s.check_key(key)?;
        let hash = key_hash(key);
        let (removed, due) = {
            let _gate = s.gate();
            let _stripe = s.stripe(hash);
            let tree_key = s.codec.tree_key(key, tid);
            s.write(|view, active| {
                if s.unique {
                    let current = match active.get(key, hash)? {
                        Some(TOMBSTONE) => None,
                        Some(t) => Some(t),
                        None => s.unique_below(view, key, hash)?,
                    };
                    if current != Some(tid) {
                        return Ok(false);
                    }
                    if s.unique_below(view, key, hash)?.is_some() {
                        active.put(key, hash, TOMBSTONE)?;
                    } else {
                        active.take(key)?;
                    }
                    return Ok(true);
                }
                let below = s.pair_below(view, key, hash, &tree_key)?;
                match active.get(&tree_key, hash)? {
                    Some(DEAD) => Ok(false),
                    Some(_) => {
                        if below {
                            active.put(&tree_key, hash, DEAD)?;
                        } else {
                            active.take(&tree_key)?;
                        }
                        Ok(true)
                    }
                    None if below => {
                        active.put(&tree_key, hash, DEAD)?;
                        Ok(true)
                    }
                    None => Ok(false),
                }
            })?
        };
        if removed {
            s.live.fetch_sub(1, Ordering::Relaxed);
        }
        s.maybe_merge(due)?;
        Ok(removed)
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, Error> {
        let s = &self.shared;
        if limit == 0 {
            return Ok(0);
        }
        let _gate = s.gate();
        let guard = epoch::pin();
        let view = s.view(&guard);
        let first_batch = limit.min(64);
        let mut streams = Vec::with_capacity(2 + view.frozen.len());
        for stage in view.dynamics() {
            streams.push(Stream::Dynamic(DynamicStream::new(
                stage,
                lower,
                upper,
                direction,
                first_batch,
            )?));
        }
        let (start, end) = match direction {
            Direction::Ascending => (lower, upper),
            Direction::Descending => (upper, lower),
        };
        streams.push(Stream::Static(StaticStream::new(
            view.base.cursor(start, direction),
        )));
        let mut layered = Layered::new(streams, direction, s.unique);
        let mut visited = 0;
        while visited < limit {
            let Some(head) = layered.next_entry()? else {
                break;
            };
            let beyond = match (end, direction) {
                (Bound::Unbounded, _) => false,
                (Bound::Included(e), Direction::Ascending) => head.key.as_slice() > e,
                (Bound::Excluded(e), Direction::Ascending) => head.key.as_slice() >= e,
                (Bound::Included(e), Direction::Descending) => head.key.as_slice() < e,
                (Bound::Excluded(e), Direction::Descending) => head.key.as_slice() <= e,
            };
            if beyond {
                break;
            }
            if head.live {
                visit(&head.key, head.tid);
                visited += 1;
            }
        }
        Ok(visited)
    }

    fn len(&self) -> usize {
        self.shared.live.load(Ordering::Relaxed).max(0) as usize
    }

    fn memory(&self) -> MemoryUsage {
        let s = &self.shared;
        let guard = epoch::pin();
        let view = s.view(&guard);
        let mut total = view.base.memory();
        for stage in view.dynamics() {
            total = total + stage.memory();
        }
        total.aux += std::mem::size_of::<Shared>()
            + std::mem::size_of::<View>()
            + std::mem::size_of_val(&*s.stripes);
        total
    }

    fn check(&self) -> Result<(), Error> {
        let s = &self.shared;
        let guard = epoch::pin();
        let view = s.view(&guard);
        view.base.check()?;
        for stage in view.dynamics() {
            stage.check()?;
        }
        // The live count agrees with a full scan, which is strictly ordered.
        let mut count = 0usize;
        let mut previous: Option<(Vec<u8>, u64)> = None;
        let mut disorder = None;
        self.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Ascending,
            usize::MAX,
            &mut |k, t| {
                count += 1;
                if let Some((pk, pt)) = &previous {
                    let ordered = if s.unique {
                        pk.as_slice() < k
                    } else {
                        (pk.as_slice(), *pt) < (k, t)
                    };
                    if !ordered && disorder.is_none() {
                        disorder = Some(format!("scan order broken at key {k:?} tid {t}"));
                    }
                }
                previous = Some((k.to_vec(), t));
            },
        )?;
        if let Some(msg) = disorder {
            return Err(Error::Corrupt(msg));
        }
        if count != self.len() {
            return Err(Error::Corrupt(format!(
                "the index counts {} pairs but a full scan visits {count}",
                self.len()
            )));
        }
        Ok(())
    }

    fn quiesce(&self) -> Result<(), Error> {
        self.wait_for_merge()
    }

    fn hybrid_stats(&self) -> Option<HybridStats> {
        Some(self.shared.stats())
    }
}
