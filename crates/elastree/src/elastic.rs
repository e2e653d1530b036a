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
//! The bound is soft, and two cases exceed it; [`ElasticStats::over_budget`] records that the
//! index was seen above it:
//!
//! * a bound below what SeqTree leaves need (about 10 bytes per 8-byte key, tids included):
//!   once every overflowing leaf is compact the index keeps growing, like a `seqtree` index;
//! * data arriving in key order (time series, logs): only the last leaf overflows, so the
//!   standard leaves filled before shrinking began are never compacted by this policy,
//!   which converts leaves only when they overflow (the paper's policy). A sweep that
//!   compacts cold standard leaves is not implemented.
//!
//! A bound too small to hold even an empty index is refused at build time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::index::Error;

/// The smallest bound an elastic index accepts: room for the index object, a root leaf and
/// a few nodes.
pub const MIN_BUDGET: usize = 4 * 1024;

/// Options of the elasticity algorithm, with the paper's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ElasticOptions {
    /// The soft size bound in bytes.
    pub budget: usize,
    /// Fraction of the bound at which shrinking starts (default 0.90).
    pub shrink_at: f64,
    /// Fraction of the bound below which expansion starts (default 0.84).
    pub expand_below: f64,
    /// Capacity of a SeqTree leaf made from a full standard leaf; default twice the
    /// standard leaf capacity (the paper: 16-key leaves become 32-key SeqTrees).
    pub compact_start: Option<usize>,
    /// The largest SeqTree capacity reached by doubling; default four times the start (the
    /// paper: 32 -> 128).
    pub compact_max: Option<usize>,
    /// BlindiTree levels (at most 8; checked with the builder's other options); default grows
    /// with the capacity so that a search falls off the
    /// tree into about 32 entries (2 levels for the paper's 128-key leaves).
    pub tree_levels: Option<u8>,
    /// Breathing slack: spare tid slots per SeqTree leaf (default 4).
    pub breathing: usize,
    /// In the expanding state, one search in this many that ends on a SeqTree leaf splits
    /// it (default 64).
    pub expand_one_in: u32,
}

impl ElasticOptions {
    /// The paper's defaults for a bound of `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            shrink_at: 0.90,
            expand_below: 0.84,
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
    /// Whether the index was ever seen above its bound (see the module docs for when a soft
    /// bound cannot be kept).
    pub over_budget: bool,
}

/// The shared state of the elasticity algorithm of one index.
#[derive(Debug)]
pub struct ElasticPolicy {
    shrink_bytes: usize,
    expand_bytes: usize,
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
}

impl ElasticPolicy {
    /// The policy for validated `options` over standard leaves of `leaf_capacity`.
    pub fn new(options: &ElasticOptions, leaf_capacity: usize) -> Self {
        Self {
            shrink_bytes: (options.budget as f64 * options.shrink_at) as usize,
            expand_bytes: (options.budget as f64 * options.expand_below) as usize,
            budget: options.budget,
            leaf_capacity,
            compact_start: options.start(leaf_capacity),
            compact_max: options.max(leaf_capacity),
            expand_one_in: options.expand_one_in,
            shrinking: AtomicBool::new(false),
            compactions: AtomicU64::new(0),
            grows: AtomicU64::new(0),
            expansions: AtomicU64::new(0),
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

    /// Counts one conversion.
    pub fn record(&self, event: Event) {
        let counter = match event {
            Event::Compacted => &self.compactions,
            Event::Grew => &self.grows,
            Event::Expanded => &self.expansions,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// What the algorithm has done so far.
    pub fn stats(&self) -> ElasticStats {
        ElasticStats {
            compactions: self.compactions.load(Ordering::Relaxed),
            grows: self.grows.load(Ordering::Relaxed),
            expansions: self.expansions.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis() {
        let options = ElasticOptions::new(1_000_000);
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
        assert!(ElasticOptions::new(1000).validate(128).is_err());
        let mut o = ElasticOptions::new(1 << 20);
        assert!(o.validate(128).is_ok());
        o.expand_below = 0.95;
        assert!(o.validate(128).is_err());
        let mut o = ElasticOptions::new(1 << 20);
        o.compact_start = Some(64);
        assert!(o.validate(128).is_err());
    }

    #[test]
    fn levels_follow_capacity() {
        assert_eq!(default_levels(128), 2);
        assert_eq!(default_levels(256), 3);
        assert_eq!(default_levels(32), 0);
    }

    #[test]
    fn expansion_rolls_at_the_configured_rate() {
        let mut options = ElasticOptions::new(1 << 20);
        options.expand_one_in = 8;
        let policy = ElasticPolicy::new(&options, 128);
        let hits = (0..80_000).filter(|_| policy.roll_expansion()).count();
        assert!((8_000..12_000).contains(&hits), "{hits}");
    }
}
