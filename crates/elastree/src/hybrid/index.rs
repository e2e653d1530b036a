//! [`HybridIndex`]: the layer stack of the module docs behind the [`Index`] trait.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned};

use super::bloom::key_hash;
use super::dynamic::{Codec, Dynamic, DEAD, LIVE, TOMBSTONE};
use super::layers::{DynamicStream, Layered, Merged, PairMerge, StaticStream, Stream};
use super::static_stage::{StaticOptions, StaticStage};
use super::{HybridOptions, MergeMode, MergeStrategy};
use crate::{
    Direction, Error, Index, IndexKind, IndexOptions, KeyLen, KindOptions, KindStats, MemoryUsage,
};

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

impl KindStats for HybridStats {}

/// State shared by the index and its merge thread.
pub(super) struct Shared {
    pub(super) kind: IndexKind,
    pub(super) unique: bool,
    pub(super) max_key_len: usize,
    pub(super) key_len: KeyLen,
    pub(super) options: HybridOptions,
    pub(super) codec: Codec,
    /// Options of every dynamic stage's tree.
    pub(super) tree: IndexOptions,
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
    /// Builds an empty index (`hybrid`, or `hybrid-compressed` when `hybrid` compresses).
    pub fn new(options: &IndexOptions, hybrid: &HybridOptions) -> Result<Self, Error> {
        options.validate()?;
        hybrid.validate()?;
        let hybrid = hybrid.clone();
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
                kind: hybrid.kind(),
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

    /// Waits until no merge is running (background, or blocking on another thread) and
    /// reports the first error a background merge hit since the last call, if any.
    pub fn wait_for_merge(&self) -> Result<(), Error> {
        self.shared.wait_for_merge()
    }

    /// Merges the dynamic stages into the static stage now, on this thread, and returns once
    /// done (waiting first for a merge that is running).
    pub fn merge_now(&self) -> Result<(), Error> {
        let s = &self.shared;
        loop {
            s.wait_for_merge()?;
            if s.merging
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return super::merge::run(s);
            }
        }
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
        let _ = self.shared.wait_for_merge();
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

/// Pairs a blocking-mode scan collects under the gate before it lets merges in and calls
/// the visitor.
const BLOCKING_SCAN_CHUNK: usize = 1024;

impl Shared {
    /// The current view, valid while `guard` is held (and the index lives).
    pub(super) fn view<'g>(&'g self, guard: &'g Guard) -> &'g View {
        let view = self.view.load(Ordering::Acquire, guard);
        // SAFETY: the view is never null (set at construction, only ever swapped for
        // another), and a replaced view is destroyed through `defer_destroy`, so it outlives
        // every guard pinned while it was current; the current one lives as long as `self`.
        unsafe { view.deref() }
    }

    /// Replaces the view. Callers hold `publish`.
    pub(super) fn set_view(&self, view: View, guard: &Guard) {
        let old = self.view.swap(Owned::new(view), Ordering::AcqRel, guard);
        // SAFETY: `old` was the published view and is now unreachable from the index; readers
        // that loaded it hold guards, so destruction waits for them.
        unsafe { guard.defer_destroy(old) };
        // Old views hold whole stages: hand them to the collector now rather than after
        // this thread's next few dozen deferred frees.
        guard.flush();
    }

    pub(super) fn stats(&self) -> HybridStats {
        let mut stats = lock(&self.stats).clone();
        let guard = epoch::pin();
        let view = self.view(&guard);
        stats.static_len = view.base.len();
        stats.dynamic_len = view.dynamics_len();
        stats
    }

    /// See [`HybridIndex::wait_for_merge`].
    pub(super) fn wait_for_merge(&self) -> Result<(), Error> {
        loop {
            let handle = lock(&self.merger).take();
            if let Some(handle) = handle {
                if handle.join().is_err() {
                    lock(&self.merge_error).get_or_insert(Error::Corrupt(
                        "a background merge panicked; its dynamic stage stays readable".into(),
                    ));
                }
            }
            if !self.merging.load(Ordering::Acquire) && lock(&self.merger).is_none() {
                break;
            }
            std::thread::yield_now();
        }
        // Let the collector free what the merges replaced, so a memory reading that
        // follows sees the index at rest.
        epoch::pin().flush();
        match lock(&self.merge_error).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        crate::index::check_key(key, self.max_key_len, self.key_len)
    }

    fn gate(&self) -> Option<RwLockReadGuard<'_, ()>> {
        (self.options.mode == MergeMode::Blocking)
            .then(|| self.gate.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn stripe(&self, hash: u64) -> MutexGuard<'_, ()> {
        lock(&self.stripes[(hash as usize) % STRIPES].0)
    }

    /// Runs `write` on the active stage of the current view, reloading the view if a merge
    /// froze the stage in between. Also says whether the active stage has reached the merge
    /// trigger.
    fn write<T>(&self, write: impl Fn(&View, &Dynamic) -> T) -> (T, bool) {
        let guard = epoch::pin();
        loop {
            let view = self.view(&guard);
            if let Some(_inside) = view.active.enter() {
                let result = write(view, &view.active);
                return (result, self.is_due(view));
            }
            std::thread::yield_now();
        }
    }

    /// Whether the active stage of `view` has reached the merge trigger.
    fn is_due(&self, view: &View) -> bool {
        view.active.len() >= self.options.merge_threshold(view.base.len())
    }

    /// Unique index: the live tid of `key` in the layers below the active stage.
    fn unique_below(&self, view: &View, key: &[u8], hash: u64) -> Option<u64> {
        for stage in &view.frozen {
            if let Some(value) = stage.get(key, hash) {
                stage.touch(hash);
                return (value != TOMBSTONE).then_some(value);
            }
        }
        view.base.get(key)
    }

    /// Non-unique index: whether `(key, tid)` is present below the active stage.
    fn pair_below(&self, view: &View, key: &[u8], tid: u64, hash: u64, tree_key: &[u8]) -> bool {
        for stage in &view.frozen {
            if let Some(value) = stage.get(tree_key, hash) {
                stage.touch(hash);
                return value == LIVE;
            }
        }
        view.base.contains_pair(key, tid)
    }

    /// After a write that found the active stage at the trigger: starts a merge unless one
    /// is running. Errors of the merge are kept for [`HybridIndex::wait_for_merge`], never
    /// returned by the write (which has happened).
    fn maybe_merge(self: &Arc<Self>, due: bool) {
        if !due
            || self
                .merging
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        // The write saw its own view; a merge may have completed since.
        let still_due = {
            let guard = epoch::pin();
            self.is_due(self.view(&guard))
        };
        if !still_due {
            self.merging.store(false, Ordering::Release);
            return;
        }
        match self.options.mode {
            MergeMode::Blocking => {
                if let Err(e) = super::merge::run(self) {
                    lock(&self.merge_error).get_or_insert(e);
                }
            }
            MergeMode::Background => {
                let mut merger = lock(&self.merger);
                if let Some(done) = merger.take() {
                    if done.join().is_err() {
                        lock(&self.merge_error).get_or_insert(Error::Corrupt(
                            "a background merge panicked; its dynamic stage stays readable".into(),
                        ));
                    }
                }
                let shared = Arc::clone(self);
                let spawned = std::thread::Builder::new()
                    .name("elastree-merge".into())
                    .spawn(move || {
                        if let Err(e) = super::merge::run(&shared) {
                            lock(&shared.merge_error).get_or_insert(e);
                        }
                    });
                match spawned {
                    Ok(handle) => *merger = Some(handle),
                    Err(e) => {
                        // No thread, no merge: the next write that finds the trigger tries
                        // again.
                        self.merging.store(false, Ordering::Release);
                        lock(&self.merge_error).get_or_insert(Error::InvalidConfig(format!(
                            "cannot start a merge thread: {e}"
                        )));
                    }
                }
            }
        }
    }

    /// Non-unique `get_all` over one view: the static stage's tids overridden by the
    /// dynamic stages' entries, the highest stage deciding each tid.
    fn pairs_of(&self, view: &View, key: &[u8], hash: u64, out: &mut Vec<u64>) {
        let mut decided: Vec<(u64, bool)> = Vec::new();
        let mut entries = Vec::new();
        for stage in view.dynamics() {
            entries.clear();
            stage.pairs_of(key, hash, &mut entries);
            if entries.is_empty() {
                continue;
            }
            stage.touch(hash);
            if decided.is_empty() {
                decided.extend_from_slice(&entries);
            } else {
                // Both lists are by ascending tid: merge, keeping the higher stage's entry.
                decided = merge_by_tid(&decided, &entries);
            }
        }
        let start = out.len();
        view.base.get_all(key, out);
        if decided.is_empty() {
            return;
        }
        let from_static = out.split_off(start);
        let (mut i, mut j) = (0, 0);
        while i < from_static.len() || j < decided.len() {
            match (from_static.get(i), decided.get(j)) {
                (Some(&t), Some(&(d, live))) if t == d => {
                    if live {
                        out.push(d);
                    }
                    i += 1;
                    j += 1;
                }
                (Some(&t), Some(&(d, _))) if t < d => {
                    out.push(t);
                    i += 1;
                }
                (Some(&t), None) => {
                    out.push(t);
                    i += 1;
                }
                (_, Some(&(d, live))) => {
                    if live {
                        out.push(d);
                    }
                    j += 1;
                }
                (None, None) => unreachable!("loop condition"),
            }
        }
    }

    /// The scan over one view, visiting live pairs within the bounds. `after` skips the
    /// pairs up to and including a position (resuming a blocking-mode scan within a key).
    #[allow(clippy::too_many_arguments)]
    fn scan_view(
        &self,
        view: &View,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        after: Option<(&[u8], u64)>,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        // A dynamic stage's first batch: about as many entries as its share of the index
        // predicts the scan needs from it, so short scans copy little.
        let total = (view.base.len() + view.dynamics_len()).max(1) as f64;
        let mut dynamics: Vec<DynamicStream<'_>> = view
            .dynamics()
            .filter(|stage| !stage.is_empty())
            .map(|stage| {
                let expected = limit as f64 * stage.len() as f64 / total;
                let first_batch = ((1.5 * expected) as usize).saturating_add(2);
                DynamicStream::new(stage, lower, upper, direction, first_batch)
            })
            .collect();
        let (start, end) = match direction {
            Direction::Ascending => (lower, upper),
            Direction::Descending => (upper, lower),
        };
        let cursor = view.base.cursor(start, direction);
        let mut layered = if dynamics.len() <= 1 {
            Merged::Pair(PairMerge::new(
                dynamics.pop(),
                cursor,
                direction,
                self.unique,
            ))
        } else {
            let mut streams: Vec<Stream<'_>> = dynamics.into_iter().map(Stream::Dynamic).collect();
            streams.push(Stream::Static(StaticStream::new(cursor)));
            Merged::Layers(Layered::new(streams, direction, self.unique))
        };
        let mut visited = 0;
        while visited < limit {
            let Some(head) = layered.next_entry() else {
                break;
            };
            let key = head.key;
            let beyond = match (end, direction) {
                (Bound::Unbounded, _) => false,
                (Bound::Included(e), Direction::Ascending) => key > e,
                (Bound::Excluded(e), Direction::Ascending) => key >= e,
                (Bound::Included(e), Direction::Descending) => key < e,
                (Bound::Excluded(e), Direction::Descending) => key <= e,
            };
            if beyond {
                break;
            }
            if let Some((last_key, last_tid)) = after {
                let done = key == last_key
                    && match direction {
                        Direction::Ascending => head.tid <= last_tid,
                        Direction::Descending => head.tid >= last_tid,
                    };
                if done {
                    continue;
                }
            }
            if head.live {
                visit(key, head.tid);
                visited += 1;
            }
        }
        visited
    }

    /// A scan in [`MergeMode::Blocking`]: chunks collected under the gate, the visitor
    /// called outside it, so a visitor that calls the index (or waits for a thread that
    /// merges) cannot deadlock with a merge, and a long scan does not hold writers back.
    fn scan_in_chunks(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        let (mut lower, mut upper) = (lower.map(<[u8]>::to_vec), upper.map(<[u8]>::to_vec));
        let mut chunk: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut after: Option<(Vec<u8>, u64)> = None;
        let mut visited = 0;
        while visited < limit {
            let want = (limit - visited).min(BLOCKING_SCAN_CHUNK);
            chunk.clear();
            {
                let _gate = self.gate();
                let guard = epoch::pin();
                let view = self.view(&guard);
                self.scan_view(
                    view,
                    lower.as_ref().map(Vec::as_slice),
                    upper.as_ref().map(Vec::as_slice),
                    direction,
                    want,
                    after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                    &mut |k, t| chunk.push((k.to_vec(), t)),
                );
            }
            for (key, tid) in &chunk {
                visit(key, *tid);
            }
            visited += chunk.len();
            if chunk.len() < want {
                break;
            }
            // Resume at the last key: after it for a unique index, after its last visited
            // pair for a non-unique one.
            let (key, tid) = chunk.pop().expect("a full chunk");
            let resume = if self.unique {
                Bound::Excluded(key.clone())
            } else {
                Bound::Included(key.clone())
            };
            match direction {
                Direction::Ascending => lower = resume,
                Direction::Descending => upper = resume,
            }
            after = (!self.unique).then_some((key, tid));
        }
        visited
    }
}

/// Locks a mutex, ignoring poisoning: every critical section of the index leaves its data
/// consistent, so a panic elsewhere does not make it unusable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Merges two lists of `(tid, live)` by ascending tid; for a tid in both, `high`'s entry.
fn merge_by_tid(high: &[(u64, bool)], low: &[(u64, bool)]) -> Vec<(u64, bool)> {
    let mut out = Vec::with_capacity(high.len() + low.len());
    let (mut i, mut j) = (0, 0);
    while i < high.len() || j < low.len() {
        match (high.get(i), low.get(j)) {
            (Some(&h), Some(&l)) if h.0 == l.0 => {
                out.push(h);
                i += 1;
                j += 1;
            }
            (Some(&h), Some(&l)) if h.0 < l.0 => {
                out.push(h);
                i += 1;
            }
            (Some(&h), None) => {
                out.push(h);
                i += 1;
            }
            (_, Some(&l)) => {
                out.push(l);
                j += 1;
            }
            (None, None) => unreachable!("loop condition"),
        }
    }
    out
}

impl Index for HybridIndex {
    fn kind(&self) -> &'static str {
        self.shared.kind.name()
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
                    return match active.put(&tree_key, hash, tid) {
                        Some(TOMBSTONE) => None,
                        Some(previous) => Some(previous),
                        None => s.unique_below(view, key, hash),
                    };
                }
                let below = || s.pair_below(view, key, tid, hash, &tree_key);
                match active.get(&tree_key, hash) {
                    Some(LIVE) => return Some(tid),
                    Some(_) if below() => {
                        active.take(&tree_key);
                    }
                    Some(_) => {
                        active.put(&tree_key, hash, LIVE);
                    }
                    None if below() => return Some(tid),
                    None => {
                        active.put(&tree_key, hash, LIVE);
                    }
                }
                None
            })
        };
        if result.is_none() {
            s.live.fetch_add(1, Ordering::Relaxed);
        }
        s.maybe_merge(due);
        Ok(result)
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        let s = &self.shared;
        s.check_key(key)?;
        let hash = key_hash(key);
        let _gate = s.gate();
        let guard = epoch::pin();
        let view = s.view(&guard);
        if !s.unique {
            let mut all = Vec::new();
            s.pairs_of(view, key, hash, &mut all);
            return Ok(all.first().copied());
        }
        for stage in view.dynamics() {
            if let Some(value) = stage.get(key, hash) {
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
        s.pairs_of(s.view(&guard), key, hash, out);
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
                let below = s.unique_below(view, key, hash);
                match active.hide(key, hash, TOMBSTONE, below.is_some()) {
                    Some(TOMBSTONE) => None,
                    Some(tid) => Some(tid),
                    None => below,
                }
            })
        };
        if removed.is_some() {
            s.live.fetch_sub(1, Ordering::Relaxed);
        }
        s.maybe_merge(due);
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
                    let below = s.unique_below(view, key, hash);
                    let current = match active.get(key, hash) {
                        Some(TOMBSTONE) => None,
                        Some(t) => Some(t),
                        None => below,
                    };
                    if current != Some(tid) {
                        return false;
                    }
                    active.hide(key, hash, TOMBSTONE, below.is_some());
                    return true;
                }
                let below = s.pair_below(view, key, tid, hash, &tree_key);
                match active.get(&tree_key, hash) {
                    Some(DEAD) => false,
                    Some(_) => {
                        active.hide(&tree_key, hash, DEAD, below);
                        true
                    }
                    None if below => {
                        active.put(&tree_key, hash, DEAD);
                        true
                    }
                    None => false,
                }
            })
        };
        if removed {
            s.live.fetch_sub(1, Ordering::Relaxed);
        }
        s.maybe_merge(due);
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
        if s.options.mode == MergeMode::Blocking {
            return Ok(s.scan_in_chunks(lower, upper, direction, limit, visit));
        }
        let guard = epoch::pin();
        let view = s.view(&guard);
        Ok(s.scan_view(view, lower, upper, direction, limit, None, visit))
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
        let records = lock(&s.stats).records.capacity() * std::mem::size_of::<MergeRecord>();
        total.aux += std::mem::size_of::<Shared>()
            + std::mem::size_of::<View>()
            + std::mem::size_of_val(&*s.stripes)
            + records;
        total
    }

    fn check(&self) -> Result<(), Error> {
        let s = &self.shared;
        {
            let guard = epoch::pin();
            let view = s.view(&guard);
            view.base.check()?;
            for stage in view.dynamics() {
                stage.check()?;
            }
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

    fn stats(&self) -> Option<Box<dyn KindStats>> {
        Some(Box::new(self.shared.stats()))
    }
}
