//! The elasticity algorithm (elastic-index paper, section 4): when to compact leaves into
//! SeqTrees and when to expand them back.
//!
//! The index is given a soft size bound in bytes, counting inner nodes, leaves and the
//! SeqTree bodies (not the table). [`ElasticPolicy`] tracks one of two states:
//!
//! * **Shrinking**, entered when the index reaches `shrink_at` (default 90%) of the bound: a
//!   full standard leaf becomes a SeqTree leaf of twice its capacity instead of splitting (no
//!   new separator goes up, and the compact leaf is smaller than the standard one); a full
//!   SeqTree leaf doubles its capacity until `compact_max`, and splits only there.
//! * **Expanding**, entered when the index falls below `expand_below` (default 84%) of the
//!   bound (the gap is the hysteresis that stops the tree oscillating), and the initial
//!   state: a search that ends on a SeqTree leaf of capacity `2k` splits it, with probability
//!   `1 / expand_one_in`, into two leaves of capacity `k` (standard leaves when `k` is the
//!   standard capacity); a full SeqTree leaf does the same instead of growing.
//!
//! In both states a SeqTree leaf of capacity `2k` keeps at least `k + 1` entries: a remove
//! that would leave fewer halves its capacity, or turns it back into a standard leaf when
//! `k` is the standard capacity. The policy decides; the tree (`btree/`) carries out the
//! conversions under its ordinary lock protocol.
//!
//! **The sweep** (ours; the paper leaves policies other than overflow open): converting only
//! the leaves that overflow cannot keep the bound when data arrives in key order (time
//! series, logs), because then only the last leaf ever overflows and the standard leaves
//! filled before shrinking began are never touched. So, in the shrinking state, an insert
//! that overflows a leaf while the index is at or above `sweep_at` (default 95%) of the bound
//! also compacts a few *cold* standard leaves: a cursor ([`SweepCursor`], a key) walks the
//! leaf level, and each step merges two adjacent standard leaves under one parent into one
//! SeqTree leaf (two, because a single standard leaf of capacity `k` can never hold the
//! `k + 1` entries a SeqTree leaf of capacity `2k` needs). The right leaf of a pair is never
//! the last leaf of the tree (the hot one under ordered inserts). Each overflow sweeps at most
//! one pair per standard-leaf capacity of the overflowing leaf (one for a standard leaf, up to
//! eight for a full 1,024-entry SeqTree leaf), so the sweep costs about one extra leaf
//! conversion per 64 inserts while it runs, and nothing below `sweep_at`: it is reached only
//! from the overflow path, which below the bound is the B+-tree's split. A sweep that looks
//! at leaves and finds none to compact (every leaf already compact: the bound is below what
//! SeqTree leaves need) makes the next sweeps sit out 1, 2, 4, ... up to
//! [`MAX_SWEEP_BACKOFF`] overflows, so an unreachable bound does not cost a walk of the
//! leaves on every overflow.
//!
//! Why 95% and not the bound itself: between two overflows the index keeps growing (a SeqTree
//! leaf's body breathes), and replaced leaves stay counted until the epoch collector frees
//! them; starting at 95% leaves that room under the bound. Why not at `shrink_at`: that would
//! compact every leaf as soon as shrinking begins, slowing queries for no memory the bound
//! asks for. The sweep does not fight expansion: it runs only in the shrinking state and
//! only above `sweep_at`, expansion only in the expanding state, entered below
//! `expand_below`, and `expand_below < sweep_at` is checked.
//!
//! The bound is soft; [`ElasticStats::over_budget`] records that the index was seen above
//! it. A bound below what SeqTree leaves need (about 10 bytes per 8-byte key, tids included)
//! cannot be kept: once every leaf is compact the index keeps growing, like a `seqtree`
//! index.
//!
//! A bound too small to hold even an empty index is refused at build time.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::table::KeySource;
use crate::{ElasticIndex, Error, Index, IndexKind, IndexOptions, KindOptions, KindStats};

/// The smallest bound an elastic index accepts: room for the index object, a root leaf and
/// a few nodes.
pub const MIN_BUDGET: usize = 4 * 1024;

/// The `elastic` kind's options: where it loads keys from, and the elasticity algorithm's
/// settings with the paper's defaults.
#[derive(Clone)]
pub struct ElasticOptions {
    /// The table the index indexes: it must return, for every tid in the index, the key the
    /// tid was inserted with, for as long as the pair is indexed.
    pub key_source: Arc<dyn KeySource>,
    /// The soft size bound in bytes.
    pub budget: usize,
    /// Fraction of the bound at which shrinking starts (default 0.90).
    pub shrink_at: f64,
    /// Fraction of the bound below which expansion starts (default 0.84).
    pub expand_below: f64,
    /// Fraction of the bound at or above which, in the shrinking state, an overflow also
    /// sweeps cold standard leaves into SeqTree leaves (default 0.95; see the module docs).
    pub sweep_at: f64,
    /// Capacity of a SeqTree leaf made from a full standard leaf; default twice the
    /// standard leaf capacity (the paper: 16-key leaves become 32-key SeqTrees).
    pub compact_start: Option<usize>,
    /// The largest SeqTree capacity reached by doubling; default four times the start (the
    /// paper: 32 -> 128).
    pub compact_max: Option<usize>,
    /// BlindiTree levels (at most 8); default grows with the capacity so that a search falls off the
    /// tree into about 32 entries (2 levels for the paper's 128-key leaves).
    pub tree_levels: Option<u8>,
    /// Breathing slack: spare tid slots per SeqTree leaf (default 4).
    pub breathing: usize,
    /// In the expanding state, one search in this many that ends on a SeqTree leaf splits
    /// it (default 64).
    pub expand_one_in: u32,
}

impl ElasticOptions {
    /// The paper's defaults for a bound of `budget` bytes, loading keys from `key_source`.
    pub fn new(budget: usize, key_source: Arc<dyn KeySource>) -> Self {
        Self {
            key_source,
            budget,
            shrink_at: 0.90,
            expand_below: 0.84,
            sweep_at: 0.95,
            compact_start: None,
            compact_max: None,
            tree_levels: None,
            breathing: 4,
            expand_one_in: 64,
        }
    }

    /// Checks the options against each other; `leaf_capacity` is the standard leaf's.
    pub(crate) fn validate(&self, leaf_capacity: usize) -> Result<(), Error> {
        let bad = |what: String| Err(Error::InvalidConfig(what));
        if self.budget < MIN_BUDGET {
            return bad(format!(
                "an elastic budget of {} bytes cannot hold even an empty index; the minimum \
                 is {MIN_BUDGET} bytes",
                self.budget
            ));
        }
        if !(0.0 < self.expand_below && self.expand_below < self.shrink_at && self.shrink_at <= 1.0)
        {
            return bad(format!(
                "elastic thresholds must satisfy 0 < expand_below ({}) < shrink_at ({}) <= 1",
                self.expand_below, self.shrink_at
            ));
        }
        if !(self.expand_below < self.sweep_at && self.sweep_at <= 1.0) {
            return bad(format!(
                "the elastic sweep threshold must satisfy expand_below ({}) < sweep_at ({}) <= 1",
                self.expand_below, self.sweep_at
            ));
        }
        let start = self.start(leaf_capacity);
        let max = self.max(leaf_capacity);
        if start <= leaf_capacity || max < start || max > crate::node::seqtree::MAX_SEQ_CAPACITY {
            return bad(format!(
                "SeqTree capacities must satisfy leaf capacity ({leaf_capacity}) < start \
                 ({start}) <= max ({max}) <= {}",
                crate::node::seqtree::MAX_SEQ_CAPACITY
            ));
        }
        if self.expand_one_in == 0 {
            return bad("expand_one_in must be at least 1".into());
        }
        Ok(())
    }

    /// The SeqTree capacity a full standard leaf becomes.
    pub fn start(&self, leaf_capacity: usize) -> usize {
        self.compact_start.unwrap_or(2 * leaf_capacity)
    }

    /// The largest SeqTree capacity.
    pub fn max(&self, leaf_capacity: usize) -> usize {
        self.compact_max.unwrap_or(4 * self.start(leaf_capacity))
    }
}

impl fmt::Debug for ElasticOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElasticOptions")
            .field("budget", &self.budget)
            .field("shrink_at", &self.shrink_at)
            .field("expand_below", &self.expand_below)
            .field("sweep_at", &self.sweep_at)
            .field("compact_start", &self.compact_start)
            .field("compact_max", &self.compact_max)
            .field("tree_levels", &self.tree_levels)
            .field("breathing", &self.breathing)
            .field("expand_one_in", &self.expand_one_in)
            .finish_non_exhaustive()
    }
}

impl KindOptions for ElasticOptions {
    fn kind(&self) -> IndexKind {
        IndexKind::Elastic
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        Ok(Box::new(ElasticIndex::elastic(options, self)?))
    }
}

/// The `seqtree` kind's options: every leaf a SeqTree leaf (of `leaf_capacity` entries,
/// default 128), keys loaded from the table.
#[derive(Clone)]
pub struct SeqTreeOptions {
    /// The table the index indexes (see [`ElasticOptions::key_source`]).
    pub key_source: Arc<dyn KeySource>,
    /// BlindiTree levels (at most 8); default grows with the capacity (2 at 128 keys).
    pub tree_levels: Option<u8>,
    /// Breathing slack: spare tid slots per SeqTree leaf (default 4).
    pub breathing: usize,
}

impl SeqTreeOptions {
    /// The defaults, loading keys from `key_source`.
    pub fn new(key_source: Arc<dyn KeySource>) -> Self {
        Self {
            key_source,
            tree_levels: None,
            breathing: 4,
        }
    }
}

impl fmt::Debug for SeqTreeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeqTreeOptions")
            .field("tree_levels", &self.tree_levels)
            .field("breathing", &self.breathing)
            .finish_non_exhaustive()
    }
}

impl KindOptions for SeqTreeOptions {
    fn kind(&self) -> IndexKind {
        IndexKind::SeqTree
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        Ok(Box::new(ElasticIndex::seqtree(options, self)?))
    }
}

/// BlindiTree levels for SeqTree leaves of up to `capacity` entries: enough that a search
/// falls off the tree into about 32 entries (2 levels at 128, the paper's default).
pub fn default_levels(capacity: usize) -> u8 {
    let log = usize::BITS - capacity.max(1).leading_zeros() - 1;
    log.saturating_sub(5)
        .min(u32::from(crate::node::seqtree::MAX_LEVELS)) as u8
}

/// The algorithm's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElasticState {
    /// Below the shrink threshold since the last time the index fell under the expansion
    /// threshold: SeqTree leaves are expanded back.
    Expanding,
    /// The index reached the shrink threshold: leaves are compacted instead of split.
    Shrinking,
}

/// Counters of what the algorithm did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ElasticStats {
    /// Standard leaves turned into SeqTree leaves.
    pub compactions: u64,
    /// SeqTree leaves that doubled their capacity.
    pub grows: u64,
    /// SeqTree leaves split or turned back into standard leaves.
    pub expansions: u64,
    /// Sweep conversions: pairs of cold standard leaves merged into one SeqTree leaf by the
    /// sweep (not counted in `compactions`).
    pub sweeps: u64,
    /// Whether the index was ever seen above its bound (see the module docs for when a soft
    /// bound cannot be kept).
    pub over_budget: bool,
}

impl KindStats for ElasticStats {}

/// The shared state of the elasticity algorithm of one index.
#[derive(Debug)]
pub struct ElasticPolicy {
    shrink_bytes: usize,
    expand_bytes: usize,
    sweep_bytes: usize,
    budget: usize,
    /// Standard leaf capacity.
    pub leaf_capacity: usize,
    /// First SeqTree capacity.
    pub compact_start: usize,
    /// Largest SeqTree capacity.
    pub compact_max: usize,
    expand_one_in: u32,
    shrinking: AtomicBool,
    compactions: AtomicU64,
    grows: AtomicU64,
    expansions: AtomicU64,
    sweeps: AtomicU64,
    over_budget: AtomicBool,
}

/// Which counter [`ElasticPolicy::record`] bumps.
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// A standard leaf became a SeqTree leaf.
    Compacted,
    /// A SeqTree leaf doubled.
    Grew,
    /// A SeqTree leaf was split back or turned into a standard leaf.
    Expanded,
    /// The sweep merged two standard leaves into one SeqTree leaf.
    Swept,
}

impl ElasticPolicy {
    /// The policy for validated `options` over standard leaves of `leaf_capacity`.
    pub fn new(options: &ElasticOptions, leaf_capacity: usize) -> Self {
        Self {
            shrink_bytes: (options.budget as f64 * options.shrink_at) as usize,
            expand_bytes: (options.budget as f64 * options.expand_below) as usize,
            sweep_bytes: (options.budget as f64 * options.sweep_at) as usize,
            budget: options.budget,
            leaf_capacity,
            compact_start: options.start(leaf_capacity),
            compact_max: options.max(leaf_capacity),
            expand_one_in: options.expand_one_in,
            shrinking: AtomicBool::new(false),
            compactions: AtomicU64::new(0),
            grows: AtomicU64::new(0),
            expansions: AtomicU64::new(0),
            sweeps: AtomicU64::new(0),
            over_budget: AtomicBool::new(false),
        }
    }

    /// The soft bound in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Updates the state from the index's current size and returns it.
    pub fn observe(&self, bytes: usize) -> ElasticState {
        let shrinking = self.shrinking.load(Ordering::Relaxed);
        let now = if shrinking {
            bytes >= self.expand_bytes
        } else {
            bytes >= self.shrink_bytes
        };
        if now != shrinking {
            self.shrinking.store(now, Ordering::Relaxed);
        }
        if bytes > self.budget {
            self.over_budget.store(true, Ordering::Relaxed);
        }
        if now {
            ElasticState::Shrinking
        } else {
            ElasticState::Expanding
        }
    }

    /// The last observed state, without re-reading the size.
    #[inline]
    pub fn state(&self) -> ElasticState {
        if self.shrinking.load(Ordering::Relaxed) {
            ElasticState::Shrinking
        } else {
            ElasticState::Expanding
        }
    }

    /// Whether this search, ending on a SeqTree leaf in the expanding state, should split it.
    #[inline]
    pub fn roll_expansion(&self) -> bool {
        thread_local! {
            static STATE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        STATE.with(|state| {
            let mut x = state.get();
            if x == 0 {
                // Seed from the cell's address: distinct per thread, no clock needed.
                x = (state as *const _ as u64) | 1;
            }
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.set(x);
            x % u64::from(self.expand_one_in) == 0
        })
    }

    /// How many pairs of cold standard leaves the sweep may compact after an overflow of a
    /// leaf of `capacity` with the index at `bytes` (0: no sweep). Nonzero only in the
    /// shrinking state (as last observed) at or above the sweep threshold: one pair per
    /// standard-leaf capacity of the overflowing leaf, at least one.
    #[inline]
    pub fn sweep_quota(&self, bytes: usize, capacity: usize) -> usize {
        if bytes < self.sweep_bytes || self.state() != ElasticState::Shrinking {
            return 0;
        }
        (capacity / self.leaf_capacity.max(1)).max(1)
    }

    /// Whether the index at `bytes` is still at or above the sweep threshold.
    #[inline]
    pub fn sweep_wanted(&self, bytes: usize) -> bool {
        bytes >= self.sweep_bytes
    }

    /// Counts one conversion.
    pub fn record(&self, event: Event) {
        let counter = match event {
            Event::Compacted => &self.compactions,
            Event::Grew => &self.grows,
            Event::Expanded => &self.expansions,
            Event::Swept => &self.sweeps,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// What the algorithm has done so far.
    pub fn stats(&self) -> ElasticStats {
        ElasticStats {
            compactions: self.compactions.load(Ordering::Relaxed),
            grows: self.grows.load(Ordering::Relaxed),
            expansions: self.expansions.load(Ordering::Relaxed),
            sweeps: self.sweeps.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
        }
    }
}

/// The most overflows the sweep sits out after sweeps that found nothing to compact.
pub const MAX_SWEEP_BACKOFF: u32 = 16;

/// The sweep's state, behind a [`SweepCursor`].
///
/// Invariant: the position is only a hint. Leaves split, merge and convert under it, so the
/// sweep descends to whatever leaf holds the key at the time it resumes.
#[derive(Debug)]
pub struct SweepState<K> {
    /// Where the sweep resumes: the smallest key of the next leaf it looks at (`None`: the
    /// first leaf).
    pub position: Option<K>,
    /// Overflows still to sit out.
    idle: u32,
    /// How many overflows the last futile sweep made the sweep sit out.
    backoff: u32,
}

impl<K> SweepState<K> {
    /// Whether this overflow's sweep should run: not while backing off after futile sweeps
    /// (a bound below what compact leaves need leaves nothing to compact, and the sweep
    /// must not keep walking the leaves for nothing).
    pub fn take_turn(&mut self) -> bool {
        if self.idle == 0 {
            return true;
        }
        self.idle -= 1;
        false
    }

    /// Records a sweep's outcome: `futile` if it looked at leaves and compacted none, which
    /// doubles the backoff (up to [`MAX_SWEEP_BACKOFF`]); any compaction ends it.
    pub fn finish(&mut self, compacted: usize, futile: bool) {
        if compacted > 0 {
            self.backoff = 0;
        } else if futile {
            self.backoff = (self.backoff * 2).clamp(1, MAX_SWEEP_BACKOFF);
            self.idle = self.backoff;
        }
    }
}

/// The most leaf pairs the sweep may owe (see [`SweepCursor::owe`]): enough for every
/// writer of a busy machine to lose a few turns.
pub const MAX_OWED_PAIRS: usize = 1024;

/// A sweep pays at most this many times its own quota of what is owed, so the one insert
/// that sweeps does a bounded multiple of an ordinary sweep's work; the rest stays owed to
/// the next sweeps. Four writers that each lose their turn to a fifth owe it four quotas,
/// which it pays at once.
pub const OWED_PER_QUOTA: usize = 4;

/// The sweep's shared state: one per elastic tree. A sweeping writer holds it for the whole
/// sweep, so at most one thread sweeps at a time, and others do not wait: they add their
/// quota to what the sweep owes, and the next sweep pays it. So the sweep compacts as much
/// with many writers as with one, whichever thread gets the cursor; without the debt, how far
/// the tree stayed over its budget depended on how often writers met at the cursor.
#[derive(Debug)]
pub struct SweepCursor<K> {
    state: Mutex<SweepState<K>>,
    /// Pairs that sweeps skipped (the cursor was taken, or they lost too many races) and a
    /// later sweep should compact on top of its own quota; at most [`MAX_OWED_PAIRS`].
    owed: AtomicUsize,
}

impl<K> Default for SweepCursor<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> SweepCursor<K> {
    /// A cursor at the first leaf, not backing off.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(SweepState {
                position: None,
                idle: 0,
                backoff: 0,
            }),
            owed: AtomicUsize::new(0),
        }
    }

    /// Records `pairs` a sweep could not compact for a later sweep to do (capped at
    /// [`MAX_OWED_PAIRS`]).
    pub fn owe(&self, pairs: usize) {
        let _ = self
            .owed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |owed| {
                Some(owed.saturating_add(pairs).min(MAX_OWED_PAIRS))
            });
    }

    /// Takes at most `most` of what earlier sweeps owe; the rest stays owed.
    pub fn take_owed(&self, most: usize) -> usize {
        let mut taken = 0;
        let _ = self
            .owed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |owed| {
                taken = owed.min(most);
                Some(owed - taken)
            });
        taken
    }

    /// Takes the cursor for one sweep, or `None` if another thread is sweeping.
    pub fn try_take(&self) -> Option<MutexGuard<'_, SweepState<K>>> {
        match self.state.try_lock() {
            Ok(guard) => Some(guard),
            // A sweeper that panicked left a state that is still a valid hint.
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options for a bound of `budget` bytes; these tests never load a key.
    fn options(budget: usize) -> ElasticOptions {
        ElasticOptions::new(budget, Arc::new(Vec::<Vec<u8>>::new()))
    }

    #[test]
    fn hysteresis() {
        let options = options(1_000_000);
        let policy = ElasticPolicy::new(&options, 128);
        assert_eq!(policy.observe(800_000), ElasticState::Expanding);
        assert_eq!(policy.observe(900_000), ElasticState::Shrinking);
        // Between the thresholds the state holds.
        assert_eq!(policy.observe(850_000), ElasticState::Shrinking);
        assert_eq!(policy.observe(839_999), ElasticState::Expanding);
        assert_eq!(policy.observe(899_999), ElasticState::Expanding);
    }

    #[test]
    fn options_are_validated() {
        assert!(options(1000).validate(128).is_err());
        let mut o = options(1 << 20);
        assert!(o.validate(128).is_ok());
        o.expand_below = 0.95;
        assert!(o.validate(128).is_err());
        let mut o = options(1 << 20);
        o.compact_start = Some(64);
        assert!(o.validate(128).is_err());
        let mut o = options(1 << 20);
        o.sweep_at = 0.80;
        assert!(o.validate(128).is_err());
        o.sweep_at = 1.01;
        assert!(o.validate(128).is_err());
    }

    #[test]
    fn the_sweep_runs_only_when_shrinking_above_its_threshold() {
        let options = options(1_000_000);
        let policy = ElasticPolicy::new(&options, 128);
        // Expanding (the initial state): never, whatever the size.
        assert_eq!(policy.sweep_quota(2_000_000, 1024), 0);
        policy.observe(920_000);
        assert_eq!(policy.sweep_quota(920_000, 128), 0);
        assert_eq!(policy.sweep_quota(950_000, 128), 1);
        assert_eq!(policy.sweep_quota(950_000, 1024), 8);
        // Back in the expanding state, the sweep stops (hysteresis).
        policy.observe(800_000);
        assert_eq!(policy.sweep_quota(950_000, 1024), 0);
    }

    #[test]
    fn skipped_sweeps_are_owed_to_the_next() {
        let cursor = SweepCursor::<u64>::new();
        cursor.owe(3);
        cursor.owe(2);
        assert_eq!(cursor.take_owed(4), 4, "a sweep pays at most what it may");
        assert_eq!(cursor.take_owed(4), 1, "the rest stays owed");
        assert_eq!(cursor.take_owed(4), 0, "a debt is paid once");
        cursor.owe(MAX_OWED_PAIRS);
        cursor.owe(usize::MAX);
        assert_eq!(
            cursor.take_owed(usize::MAX),
            MAX_OWED_PAIRS,
            "the debt is capped"
        );
    }

    #[test]
    fn futile_sweeps_back_off() {
        let cursor = SweepCursor::<u64>::new();
        let mut state = cursor.try_take().unwrap();
        assert!(cursor.try_take().is_none(), "one sweeper at a time");
        assert!(state.take_turn());
        // Nothing looked at (e.g. already under the threshold): no backoff.
        state.finish(0, false);
        assert!(state.take_turn());
        let mut sat_out = Vec::new();
        for _ in 0..7 {
            state.finish(0, true);
            let mut n = 0;
            while !state.take_turn() {
                n += 1;
            }
            sat_out.push(n);
        }
        assert_eq!(sat_out, [1, 2, 4, 8, 16, 16, 16]);
        state.finish(3, false);
        state.finish(0, true);
        assert!(!state.take_turn(), "backoff restarts at 1");
        assert!(state.take_turn());
    }

    #[test]
    fn levels_follow_capacity() {
        assert_eq!(default_levels(128), 2);
        assert_eq!(default_levels(256), 3);
        assert_eq!(default_levels(32), 0);
    }

    #[test]
    fn expansion_rolls_at_the_configured_rate() {
        let mut options = options(1 << 20);
        options.expand_one_in = 8;
        let policy = ElasticPolicy::new(&options, 128);
        let hits = (0..80_000).filter(|_| policy.roll_expansion()).count();
        assert!((8_000..12_000).contains(&hits), "{hits}");
    }
}
