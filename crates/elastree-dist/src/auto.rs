//! Automatic rebalancing: the paper's Algorithm 2 runs "whenever a change of the DKV's scale
//! is detected". A client learns of a change when it re-reads the slot map (after a MOVED
//! redirect, a failover or an error, and at least every [`TOPOLOGY_CHECK`]: a new master may
//! take over no slot this client's keys live in) and the map names other masters than
//! before; the next operation it finishes then starts one background rebalance ([`DistIndex::rebalance`]) on
//! a connection of its own. That rebalance first waits until the slot map has stayed the same
//! for [`SETTLE`], since a cluster that gains a master moves its slots over for seconds.
//!
//! Several clients may notice the same change and rebalance at once: every step of a
//! rebalance is a compare-and-set, so they only share the work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::balance::RebalanceReport;
use crate::error::DistError;
use crate::index::DistIndex;
use crate::router::RouterOptions;

/// How often a client with automatic rebalancing re-reads the slot map at least (one
/// `CLUSTER SLOTS` from an operation that finishes after the period).
pub const TOPOLOGY_CHECK: Duration = Duration::from_secs(5);
/// How long the slot map must stay unchanged before an automatic rebalance starts.
pub const SETTLE: Duration = Duration::from_secs(1);
/// The longest an automatic rebalance waits for the slot map to settle before it runs anyway.
const SETTLE_AT_MOST: Duration = Duration::from_secs(60);
/// How often the settling rebalance re-reads the slot map.
const POLL: Duration = Duration::from_millis(200);

/// The outcome of an automatic rebalance, shared with the thread that runs it.
type Outcome = Arc<Mutex<Option<Result<RebalanceReport, String>>>>;

/// One client's automatic rebalancing: the master change it last acted on, the running
/// rebalance, the last outcome.
#[derive(Debug, Default)]
pub(crate) struct AutoRebalance {
    seen: AtomicU64,
    running: Mutex<Option<JoinHandle<()>>>,
    last: Outcome,
    completed: Arc<AtomicU64>,
}

impl AutoRebalance {
    /// Starts a background rebalance if `index`'s router saw the masters change since the
    /// last one started and none is running. Cheap when nothing changed: a lock tried, a
    /// clock read and an atomic load (and a slot map read every [`TOPOLOGY_CHECK`]).
    pub fn poll(&self, index: &DistIndex) {
        index.router.refresh_if_older(TOPOLOGY_CHECK);
        let changes = index.router.counters.master_changes.load(Ordering::Relaxed);
        if changes == self.seen.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut running) = self.running.try_lock() else {
            return;
        };
        if running.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        self.seen.store(changes, Ordering::Relaxed);
        let seeds = index.router.seeds_and_masters();
        let name = index.options.name.clone();
        let router = index.options.router.clone();
        let last = self.last.clone();
        let completed = self.completed.clone();
        *running = Some(thread::spawn(move || {
            let outcome = settle_and_rebalance(&seeds, &name, router).map_err(|e| e.to_string());
            *last.lock().expect("outcome lock") = Some(outcome);
            completed.fetch_add(1, Ordering::Relaxed);
        }));
    }

    /// Starts tracking changes from the router's count at connect time.
    pub fn start_from(&self, changes: u64) {
        self.seen.store(changes, Ordering::Relaxed);
    }

    /// Waits for a running rebalance to end.
    pub fn wait(&self) {
        if let Some(handle) = self.running.lock().expect("running lock").take() {
            let _ = handle.join();
        }
    }

    /// Automatic rebalances completed.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// The outcome of the last automatic rebalance, if one completed.
    pub fn last(&self) -> Option<Result<RebalanceReport, String>> {
        self.last.lock().expect("outcome lock").clone()
    }
}

/// Opens the index on a connection of its own, waits for the slot map to settle, and
/// rebalances.
fn settle_and_rebalance(
    seeds: &[String],
    name: &str,
    router: RouterOptions,
) -> Result<RebalanceReport, DistError> {
    let mut index = DistIndex::open(seeds, name, router)?;
    index.options.auto_rebalance = false;
    let began = Instant::now();
    let mut map = index.router.slot_map();
    let mut stable_since = Instant::now();
    while stable_since.elapsed() < SETTLE && began.elapsed() < SETTLE_AT_MOST {
        thread::sleep(POLL);
        index
            .router
            .refresh_until(Instant::now() + index.options.router.op_timeout)?;
        let fresh = index.router.slot_map();
        if !fresh.same_owners(&map) {
            map = fresh;
            stable_since = Instant::now();
        }
    }
    index.rebalance()
}
