//! [`DistIndex`]: the STI-BT client. It keeps the top of the tree (the levels above the
//! cut-off, one routing entry per sub-tree) cached and reads it without validation, and sends
//! each operation, in one round trip, to the master that owns the sub-tree covering the key,
//! where a Redis Function runs the rest of it atomically.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use elastree::{Direction, MemoryUsage};
use redis::Value;

use crate::adapter::{index_via_stored_map, StoredMap};
use crate::auto::AutoRebalance;
use crate::codec::{self, Reply};
use crate::error::DistError;
use crate::node::{self, NodeView};
use crate::router::{Request, Router, RouterOptions};
use crate::slots::slot_of;
use crate::top::{Top, TopEntry};

/// How a distributed index is laid out and reached.
#[derive(Debug, Clone)]
pub struct DistOptions {
    /// The index's name: its keys in Redis start with `{et:<name>`. Letters, digits, `_`
    /// and `-`, at most 64 bytes.
    pub name: String,
    /// A unique (primary) index or a non-unique (secondary) one.
    pub unique: bool,
    /// Entries per tree node (leaf entries or inner children), 4..=4096.
    pub node_capacity: usize,
    /// The longest key accepted, in bytes (at most [`elastree::MAX_KEY_LEN_LIMIT`]).
    pub max_key_len: usize,
    /// Sub-trees the index aims to have per master (default 5): a sub-tree root that
    /// overflows while there are fewer becomes two sub-trees (the new one posted to the top
    /// and placed on the master with the fewest), otherwise the sub-tree grows a level.
    /// [`DistIndex::rebalance`] lowers the cut-off to reach it. With at least 5 per master,
    /// an even spread (counts differing by at most one) keeps every master within 20% of
    /// the mean; the paper's minimum is 1.
    pub subtrees_per_master: usize,
    /// The most levels a sub-tree grows to (`None`: as many as keep it within
    /// [`SUBTREE_ENTRIES`] entries at full nodes, at least 2). A sub-tree root that overflows
    /// at this height splits into two sub-trees instead of growing (the new one posted to
    /// the top and placed on the master with the fewest), so a sub-tree stays small enough to
    /// move, and keys inserted in order spread over the masters instead of piling into the
    /// last sub-tree.
    pub subtree_levels: Option<usize>,
    /// Whether this client rebalances on its own when it sees the cluster's masters change
    /// (default true): its next operation starts [`DistIndex::rebalance`] in the background
    /// once the slot map has settled (see [`DistIndex::last_auto_rebalance`]).
    pub auto_rebalance: bool,
    /// Entries one scan call returns at most (one round trip each).
    pub scan_chunk: usize,
    /// Timeouts and durability.
    pub router: RouterOptions,
}

impl Default for DistOptions {
    fn default() -> Self {
        DistOptions {
            name: "default".into(),
            unique: true,
            node_capacity: 64,
            max_key_len: elastree::DEFAULT_MAX_KEY_LEN,
            subtrees_per_master: 5,
            subtree_levels: None,
            auto_rebalance: true,
            scan_chunk: 256,
            router: RouterOptions::default(),
        }
    }
}

/// Entries a sub-tree of full nodes may hold at most under the default
/// [`DistOptions::subtree_levels`]: 2^18, about 8 MiB of pages for 8-byte keys, which is what a
/// migration of the sub-tree copies through the client while writers to it wait.
pub const SUBTREE_ENTRIES: usize = 1 << 18;

impl DistOptions {
    /// The height limit of sub-trees: [`DistOptions::subtree_levels`] or the default for
    /// the node capacity (the most levels whose full sub-tree holds at most
    /// [`SUBTREE_ENTRIES`] entries, at least 2).
    pub fn subtree_levels(&self) -> usize {
        self.subtree_levels.unwrap_or_else(|| {
            let mut levels = 1;
            let mut entries = self.node_capacity;
            while entries.saturating_mul(self.node_capacity) <= SUBTREE_ENTRIES {
                entries *= self.node_capacity;
                levels += 1;
            }
            levels.max(2)
        })
    }

    fn validate(&self) -> Result<(), DistError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(DistError::Invalid(format!(
                "index name {:?}: use 1-64 letters, digits, '_' or '-'",
                self.name
            )));
        }
        if !(4..=4096).contains(&self.node_capacity) {
            return Err(DistError::Invalid(format!(
                "node capacity {} outside 4..=4096",
                self.node_capacity
            )));
        }
        if self.max_key_len == 0 || self.max_key_len > elastree::MAX_KEY_LEN_LIMIT {
            return Err(DistError::Invalid(format!(
                "maximum key length {} outside 1..={}",
                self.max_key_len,
                elastree::MAX_KEY_LEN_LIMIT
            )));
        }
        if self
            .subtree_levels
            .is_some_and(|l| !(1..=node::MAX_LEVEL as usize).contains(&l))
        {
            return Err(DistError::Invalid(format!(
                "sub-tree levels must be between 1 and {}",
                node::MAX_LEVEL
            )));
        }
        if self.subtrees_per_master == 0 || self.scan_chunk == 0 {
            return Err(DistError::Invalid(
                "subtrees_per_master and scan_chunk must be at least 1".into(),
            ));
        }
        if self.router.op_timeout.is_zero() {
            return Err(DistError::Invalid(
                "the operation timeout must be positive".into(),
            ));
        }
        Ok(())
    }
}

/// Validates options (shared with the baseline).
pub(crate) fn validate(options: &DistOptions) -> Result<(), DistError> {
    options.validate()
}

/// What a client has done so far: the basis of round trips per operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DistStats {
    /// Index operations completed (a scan counts once).
    pub operations: u64,
    /// Requests sent, each one network round trip (retries and top refreshes included).
    pub round_trips: u64,
    /// Distinct masters contacted, summed over operations.
    pub masters_contacted: u64,
    /// Times the cached top was re-read.
    pub top_refreshes: u64,
    /// Sub-tree calls that found the cached top stale (moved right, forwarded or refused).
    pub stale_routes: u64,
    /// Requests retried after a redirect, a failover or a busy sub-tree.
    pub retries: u64,
    /// New sub-trees left on their sibling's master because moving them failed (a later
    /// [`DistIndex::rebalance`] moves them).
    pub placement_failures: u64,
    /// Automatic rebalances this client ran after seeing the masters change.
    pub auto_rebalances: u64,
    /// Write requests acknowledged only after `WAIT` saw the configured replicas take them.
    pub replicated_writes: u64,
}

impl elastree::KindStats for DistStats {}

impl DistStats {
    /// The counters since `before` (each field; counters only grow).
    pub fn since(self, before: DistStats) -> DistStats {
        self.zip(before, u64::saturating_sub)
    }

    /// Applies `f` field by field.
    fn zip(self, other: DistStats, f: impl Fn(u64, u64) -> u64) -> DistStats {
        DistStats {
            operations: f(self.operations, other.operations),
            round_trips: f(self.round_trips, other.round_trips),
            masters_contacted: f(self.masters_contacted, other.masters_contacted),
            top_refreshes: f(self.top_refreshes, other.top_refreshes),
            stale_routes: f(self.stale_routes, other.stale_routes),
            retries: f(self.retries, other.retries),
            placement_failures: f(self.placement_failures, other.placement_failures),
            auto_rebalances: f(self.auto_rebalances, other.auto_rebalances),
            replicated_writes: f(self.replicated_writes, other.replicated_writes),
        }
    }
}

impl std::ops::Add for DistStats {
    type Output = DistStats;

    /// The sum, field by field (counters of several clients or runs).
    fn add(self, other: DistStats) -> DistStats {
        self.zip(other, u64::saturating_add)
    }
}

/// Where an operation starts in key space.
#[derive(Clone, Copy)]
enum Position<'a> {
    /// The sub-tree covering this key.
    At(&'a [u8]),
    /// The sub-tree covering the largest key below this one.
    Below(&'a [u8]),
    /// The last sub-tree.
    End,
}

/// A sub-tree root: the tag token of its slot and its node id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RootRef {
    pub token: u64,
    pub id: u64,
}

/// One ordered index on a Redis Cluster (STI-BT). Cheap to share between threads (`&self`
/// everywhere); each thread's requests use their own pooled connection.
///
/// Guarantees: every single-key operation is linearizable (it runs as one atomic function
/// on the master that owns the key's sub-tree); a scan never misses or repeats a key present
/// throughout the scan (it proceeds in chunks, each atomic, each starting after the last key
/// returned); with replicas, a write is acknowledged only after `WAIT` saw the configured
/// number of replicas take it, so it survives the loss of one master. An unreachable cluster
/// gives an unavailable error ([`crate::unavailable`]) within [`RouterOptions::op_timeout`].
pub struct DistIndex {
    pub(crate) router: Router,
    pub(crate) options: DistOptions,
    pub(crate) top: RwLock<Arc<Top>>,
    operations: AtomicU64,
    masters_contacted: AtomicU64,
    top_refreshes: AtomicU64,
    stale_routes: AtomicU64,
    pub(crate) placement_failures: AtomicU64,
    auto: AutoRebalance,
}

impl std::fmt::Debug for DistIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistIndex")
            .field("name", &self.options.name)
            .field("unique", &self.options.unique)
            .finish_non_exhaustive()
    }
}

impl DistIndex {
    /// Connects to the cluster through `seeds` ("host:port", any node) and opens the index
    /// `options.name`, creating it if it does not exist. An existing index must have been
    /// created with the same uniqueness and node capacity.
    pub fn connect(seeds: &[String], options: DistOptions) -> Result<DistIndex, DistError> {
        options.validate()?;
        let router = Router::connect(seeds, options.router.clone())?;
        let index = DistIndex::with_router(router, options);
        index.open_or_create()?;
        Ok(index)
    }

    /// Opens the existing index `name` with the settings it was created with (an error if
    /// there is no such index).
    pub fn open(
        seeds: &[String],
        name: &str,
        router: RouterOptions,
    ) -> Result<DistIndex, DistError> {
        let mut options = DistOptions {
            name: name.to_string(),
            router,
            ..DistOptions::default()
        };
        options.validate()?;
        let router = Router::connect(seeds, options.router.clone())?;
        let mut index = DistIndex::with_router(router, options.clone());
        let deadline = index.deadline();
        let conf = index.read_conf(deadline)?;
        options.unique = conf.unique;
        options.node_capacity = conf.capacity;
        index.options = options;
        index.refresh_top(deadline)?;
        if index.cached_top().entries.is_empty() {
            return Err(DistError::Invalid(format!(
                "the cluster holds no index named {name:?}"
            )));
        }
        Ok(index)
    }

    /// The names of the indexes the cluster holds.
    pub fn list(seeds: &[String], router: RouterOptions) -> Result<Vec<String>, DistError> {
        let deadline = Instant::now() + router.op_timeout;
        let router = Router::connect(seeds, router)?;
        let mut names: Vec<String> = router
            .scan_keys("{et:*}:conf", deadline)?
            .into_iter()
            .filter_map(|key| {
                let key = String::from_utf8(key).ok()?;
                let name = key.strip_prefix("{et:")?.strip_suffix("}:conf")?;
                (!name.contains(':')).then(|| name.to_string())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Rebalances every index the cluster holds (after masters joined or left); returns
    /// each one's report.
    pub fn rebalance_all(
        seeds: &[String],
        router: RouterOptions,
    ) -> Result<Vec<(String, crate::RebalanceReport)>, DistError> {
        let mut reports = Vec::new();
        for name in DistIndex::list(seeds, router.clone())? {
            let index = DistIndex::open(seeds, &name, router.clone())?;
            reports.push((name, index.rebalance()?));
        }
        Ok(reports)
    }

    fn with_router(router: Router, options: DistOptions) -> DistIndex {
        let auto = AutoRebalance::default();
        auto.start_from(router.counters.master_changes.load(Ordering::Relaxed));
        DistIndex {
            router,
            options,
            top: RwLock::new(Arc::new(Top::default())),
            operations: AtomicU64::new(0),
            masters_contacted: AtomicU64::new(0),
            top_refreshes: AtomicU64::new(0),
            stale_routes: AtomicU64::new(0),
            placement_failures: AtomicU64::new(0),
            auto,
        }
    }

    /// The options the index was opened with.
    pub fn options(&self) -> &DistOptions {
        &self.options
    }

    /// The counters of this client.
    pub fn stats(&self) -> DistStats {
        let c = &self.router.counters;
        DistStats {
            operations: self.operations.load(Ordering::Relaxed),
            round_trips: c.round_trips.load(Ordering::Relaxed),
            masters_contacted: self.masters_contacted.load(Ordering::Relaxed),
            top_refreshes: self.top_refreshes.load(Ordering::Relaxed),
            stale_routes: self.stale_routes.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            placement_failures: self.placement_failures.load(Ordering::Relaxed),
            auto_rebalances: self.auto.completed(),
            replicated_writes: c.replicated_writes.load(Ordering::Relaxed),
        }
    }

    /// The outcome of the last automatic rebalance this client ran (see
    /// [`DistOptions::auto_rebalance`]), if one has completed.
    pub fn last_auto_rebalance(&self) -> Option<Result<crate::RebalanceReport, String>> {
        self.auto.last()
    }

    /// The cached top: one entry per sub-tree, in key order.
    pub fn top_entries(&self) -> Vec<TopEntry> {
        self.cached_top().entries.clone()
    }

    /// The hash-tag prefix of the index's own keys (the top and the settings).
    pub(crate) fn top_tag(&self) -> String {
        format!("{{et:{}}}", self.options.name)
    }

    /// The hash-tag prefix of the sub-trees with tag token `token`.
    pub(crate) fn subtree_tag(&self, token: u64) -> String {
        format!("{{et:{}:{token}}}", self.options.name)
    }

    pub(crate) fn cached_top(&self) -> Arc<Top> {
        self.top.read().expect("top lock").clone()
    }

    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.options.router.op_timeout
    }

    fn open_or_create(&self) -> Result<(), DistError> {
        let deadline = self.deadline();
        self.refresh_top(deadline)?;
        if self.cached_top().entries.is_empty() {
            let root = self.new_root(0, deadline)?;
            self.init(root, deadline)?;
            self.refresh_top(deadline)?;
            let first = self.route(Position::At(&[]));
            if first != root {
                // Another client created the index first: drop our unused root.
                self.drop_subtree(root, deadline)?;
            }
        }
        let conf = self.read_conf(deadline)?;
        if conf.unique != self.options.unique || conf.capacity != self.options.node_capacity {
            return Err(DistError::Invalid(format!(
                "index {:?} exists with unique={} and node capacity {}, asked for unique={} and {}",
                self.options.name,
                conf.unique,
                conf.capacity,
                self.options.unique,
                self.options.node_capacity
            )));
        }
        Ok(())
    }

    fn read_conf(&self, deadline: Instant) -> Result<codec::Conf, DistError> {
        let t = self.top_tag();
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(format!("{t}:conf"));
        let (replies, _) =
            self.router
                .run(slot_of(t.as_bytes()), &Request::read(vec![cmd]), deadline)?;
        codec::Conf::parse(&replies[0])
    }

    /// Runs the library function `name` on the sub-trees of tag `token` (the tag's meta key
    /// declares the slot; the tag is the first argument, `args` follow): one round trip to
    /// the tag's master. Returns the function's reply.
    pub(crate) fn call_tag(
        &self,
        name: &str,
        token: u64,
        args: &[&[u8]],
        write: bool,
        deadline: Instant,
    ) -> Result<Value, DistError> {
        let tag = self.subtree_tag(token);
        let mut all: Vec<&[u8]> = vec![tag.as_bytes()];
        all.extend_from_slice(args);
        let cmd = codec::fcall(name, &format!("{tag}:m"), &all);
        let request = if write {
            Request::write(vec![cmd])
        } else {
            Request::read(vec![cmd])
        };
        let (mut replies, _) = self
            .router
            .run(slot_of(tag.as_bytes()), &request, deadline)?;
        Ok(replies.swap_remove(0))
    }

    /// Runs the library function `name` on the top (its tag first, then `args`) and re-reads
    /// the top in the same round trip, installing the fresh copy. Returns the function's
    /// reply.
    pub(crate) fn change_top(
        &self,
        name: &str,
        args: &[&[u8]],
        deadline: Instant,
    ) -> Result<Value, DistError> {
        let t = self.top_tag();
        let top_key = format!("{t}:top");
        let mut all: Vec<&[u8]> = vec![t.as_bytes()];
        all.extend_from_slice(args);
        let change = codec::fcall(name, &top_key, &all);
        let read = codec::fcall("et_top", &top_key, &[t.as_bytes()]);
        let (mut replies, _) = self.router.run(
            slot_of(t.as_bytes()),
            &Request::write(vec![change, read]),
            deadline,
        )?;
        self.install_top(&replies[1])?;
        Ok(replies.swap_remove(0))
    }

    /// Creates an empty sub-tree root in tag `token`.
    pub(crate) fn new_root(&self, token: u64, deadline: Instant) -> Result<RootRef, DistError> {
        let reply = self.call_tag("et_new_root", token, &[], true, deadline)?;
        let id = codec::u64_of(&reply)?;
        Ok(RootRef { token, id })
    }

    /// Creates the index's settings and first top entry unless they exist.
    fn init(&self, root: RootRef, deadline: Instant) -> Result<(), DistError> {
        let t = self.top_tag();
        let root_ref = codec::root_ref(root);
        let unique = if self.options.unique { "1" } else { "0" };
        let cap = self.options.node_capacity.to_string();
        let args: [&[u8]; 6] = [
            t.as_bytes(),
            root_ref.as_bytes(),
            b"unique",
            unique.as_bytes(),
            b"capacity",
            cap.as_bytes(),
        ];
        let cmd = codec::fcall("et_init", &format!("{t}:conf"), &args);
        self.router
            .run(slot_of(t.as_bytes()), &Request::write(vec![cmd]), deadline)?;
        Ok(())
    }

    /// Re-reads the top.
    pub(crate) fn refresh_top(&self, deadline: Instant) -> Result<(), DistError> {
        let t = self.top_tag();
        let cmd = codec::fcall("et_top", &format!("{t}:top"), &[t.as_bytes()]);
        let (replies, _) =
            self.router
                .run(slot_of(t.as_bytes()), &Request::read(vec![cmd]), deadline)?;
        self.install_top(&replies[0])
    }

    pub(crate) fn install_top(&self, reply: &Value) -> Result<(), DistError> {
        self.top_refreshes.fetch_add(1, Ordering::Relaxed);
        let fresh = Top::parse(reply)?;
        let mut top = self.top.write().expect("top lock");
        if fresh.version >= top.version {
            *top = Arc::new(fresh);
        }
        Ok(())
    }

    /// Posts a sub-tree root `(sep, root)` to the top (idempotent) and re-reads the top, in
    /// one round trip.
    pub(crate) fn post(
        &self,
        sep: &[u8],
        root: RootRef,
        deadline: Instant,
    ) -> Result<(), DistError> {
        let root_ref = codec::root_ref(root);
        self.change_top("et_post", &[sep, root_ref.as_bytes()], deadline)?;
        Ok(())
    }

    /// Replaces the top entry of `root` by `children` (low fence, root) in one atomic
    /// compare-and-set, then re-reads the top (one round trip). A conflict means another
    /// client did it first.
    pub(crate) fn replace_in_top(
        &self,
        root: RootRef,
        children: &[(Vec<u8>, RootRef)],
        deadline: Instant,
    ) -> Result<(), DistError> {
        let old = codec::root_ref(root);
        let mut args: Vec<Vec<u8>> = Vec::new();
        for (i, (lo, child)) in children.iter().enumerate() {
            args.push(lo.clone());
            args.push(if i == 0 {
                old.clone().into_bytes()
            } else {
                Vec::new()
            });
            args.push(codec::root_ref(*child).into_bytes());
        }
        let arg_refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        self.change_top("et_top_cas", &arg_refs, deadline)?;
        Ok(())
    }

    /// Whether a sub-tree root that overflows now should split into two sub-trees (rather
    /// than grow a level): while the index has fewer sub-trees than it aims for.
    fn allow_post(&self) -> bool {
        let masters = self.router.slot_map().master_count().max(1);
        self.cached_top().entries.len() < self.options.subtrees_per_master * masters
    }

    fn route(&self, position: Position<'_>) -> RootRef {
        let top = self.cached_top();
        let i = match position {
            Position::At(key) => top.covering(key),
            Position::Below(key) => top.covering_below(key),
            Position::End => top.entries.len().saturating_sub(1),
        };
        top.entries
            .get(i)
            .map(|e| RootRef {
                token: e.token,
                id: e.id,
            })
            .unwrap_or(RootRef { token: 0, id: 1 })
    }

    /// Runs one sub-tree function for an operation starting at `position`: builds the call
    /// with `make(tag, root)`, follows forwards, refreshes a stale top and retries a busy
    /// sub-tree until the deadline. Returns the reply and the masters contacted.
    fn call(
        &self,
        position: Position<'_>,
        write: bool,
        deadline: Instant,
        contacted: &mut Vec<String>,
        make: &dyn Fn(&str, u64) -> redis::Cmd,
    ) -> Result<(Reply, RootRef), DistError> {
        let mut target = self.route(position);
        let mut stale_in_a_row = 0u32;
        loop {
            let tag = self.subtree_tag(target.token);
            let cmd = make(&tag, target.id);
            let request = if write {
                Request::write(vec![cmd])
            } else {
                Request::read(vec![cmd])
            };
            let (mut replies, addr) =
                self.router
                    .run(slot_of(tag.as_bytes()), &request, deadline)?;
            if !contacted.contains(&addr) {
                contacted.push(addr);
            }
            let reply = Reply::parse(replies.swap_remove(0))?;
            match reply.status.as_str() {
                "FWD" => {
                    self.stale_routes.fetch_add(1, Ordering::Relaxed);
                    let moved = RootRef {
                        token: codec::u64_of(reply.item(0))?,
                        id: codec::u64_of(reply.item(1))?,
                    };
                    if reply.hint_id == 0 {
                        // The root itself moved: patch the cached entry, no refresh needed.
                        let mut top = self.top.write().expect("top lock");
                        Arc::make_mut(&mut top).retarget(target, moved);
                    } else {
                        self.refresh_top(deadline)?;
                    }
                    target = moved;
                }
                "STALE" => {
                    self.stale_routes.fetch_add(1, Ordering::Relaxed);
                    self.refresh_top(deadline)?;
                    stale_in_a_row += 1;
                    if stale_in_a_row > 3 {
                        thread::sleep(Duration::from_millis(5));
                    }
                    if Instant::now() >= deadline {
                        return Err(DistError::Unavailable(
                            "the index's top kept changing under this operation".into(),
                        ));
                    }
                    target = self.route(position);
                }
                "LOWERED" => {
                    // The cut-off moved below this root; finish (idempotently) the top
                    // update that replaces it by its children, then route again.
                    self.stale_routes.fetch_add(1, Ordering::Relaxed);
                    let children = codec::children(&reply.items, target.token)?;
                    self.replace_in_top(target, &children, deadline)?;
                    target = self.route(position);
                }
                "BUSY" => {
                    // A sub-tree being migrated refuses writes for a moment.
                    if Instant::now() >= deadline {
                        return Err(DistError::Unavailable(
                            "the sub-tree stayed frozen by a migration past the timeout".into(),
                        ));
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                _ => {
                    if reply.hint_id != 0 {
                        // Moved right past our root: the top is stale; post the sibling
                        // (in case its creator did not) and re-read the top.
                        self.stale_routes.fetch_add(1, Ordering::Relaxed);
                        let sibling = RootRef {
                            token: target.token,
                            id: reply.hint_id,
                        };
                        self.post(&reply.hint_sep, sibling, deadline)?;
                    }
                    return Ok((reply, target));
                }
            }
        }
    }

    fn finish(&self, contacted: &[String]) {
        self.operations.fetch_add(1, Ordering::Relaxed);
        self.masters_contacted
            .fetch_add(contacted.len() as u64, Ordering::Relaxed);
        if self.options.auto_rebalance {
            self.auto.poll(self);
        }
    }

    /// The number of entries, summed over the tags of the sub-trees.
    pub fn try_len(&self) -> Result<usize, DistError> {
        let deadline = self.deadline();
        self.refresh_top(deadline)?;
        let mut total = 0i64;
        for token in self.cached_top().tokens() {
            total += codec::int(&self.call_tag("et_tag_count", token, &[], false, deadline)?)?;
        }
        Ok(total.max(0) as usize)
    }

    /// The bytes the index takes on the cluster's masters, as Redis counts them
    /// (`MEMORY USAGE`: value, key and per-key overhead; the growth of `used_memory_dataset`
    /// matches it): inner nodes, leaves, and in `aux` the tags' meta hashes, the top, the
    /// settings and markers at sub-tree roots. Every replica holds as much again. Walks every
    /// sub-tree (one round trip each); markers that moves and cut-off changes left behind
    /// roots no longer in the top (one small key each) are not counted.
    pub fn server_memory(&self) -> Result<MemoryUsage, DistError> {
        let deadline = self.deadline();
        self.refresh_top(deadline)?;
        let mut total = MemoryUsage::default();
        let top = self.cached_top();
        for entry in &top.entries {
            let id = codec::root_arg(entry.id);
            let reply = self.call_tag("et_memory", entry.token, &[&id[..]], false, deadline)?;
            let Value::Array(parts) = &reply else {
                return Err(DistError::Corrupt(format!("et_memory answered {reply:?}")));
            };
            let part = |i: usize| -> Result<usize, DistError> {
                Ok(codec::int(parts.get(i).unwrap_or(&Value::Int(0)))?.max(0) as usize)
            };
            total.inner += part(0)?;
            total.leaves += part(1)?;
            total.aux += part(2)?;
        }
        let t = self.top_tag();
        let mut keys = vec![format!("{t}:top"), format!("{t}:conf")];
        keys.extend(
            top.tokens()
                .iter()
                .map(|&token| format!("{}:m", self.subtree_tag(token))),
        );
        for key in keys {
            let mut usage = redis::cmd("MEMORY");
            usage.arg("USAGE").arg(&key);
            let (replies, _) = self.router.run(
                slot_of(key.as_bytes()),
                &Request::read(vec![usage]),
                deadline,
            )?;
            if let Value::Int(n) = replies[0] {
                total.aux += n.max(0) as usize;
            }
        }
        Ok(total)
    }

    /// Walks every sub-tree and checks the invariants of the whole index: each sub-tree's
    /// nodes (on its master), the top's entries against the sub-tree roots' fences, and the
    /// entry counts. Call it while no writer runs.
    pub fn try_check(&self) -> Result<(), DistError> {
        crate::check::check(self)
    }

    /// Deletes a sub-tree (used for an unused root and by [`DistIndex::destroy`]).
    pub(crate) fn drop_subtree(&self, root: RootRef, deadline: Instant) -> Result<(), DistError> {
        let id = codec::root_arg(root.id);
        self.call_tag("et_drop", root.token, &[&id[..]], true, deadline)?;
        Ok(())
    }

    /// Deletes the whole index from the cluster: its sub-trees, the markers moves and
    /// cut-off changes left behind, its top and settings (every key of its tags, found with
    /// SCAN on every master). Call it when no other client uses the index.
    pub fn destroy(self) -> Result<(), DistError> {
        self.auto.wait();
        let deadline = self.deadline() + self.options.router.op_timeout * 5;
        let name = &self.options.name;
        let mut keys = self.router.scan_keys(&format!("{{et:{name}:*"), deadline)?;
        keys.extend(
            self.router
                .scan_keys(&format!("{{et:{name}}}:*"), deadline)?,
        );
        for key in keys {
            let mut del = redis::cmd("DEL");
            del.arg(&key);
            self.router
                .run(slot_of(&key), &Request::write(vec![del]), deadline)?;
        }
        Ok(())
    }
}

impl StoredMap for DistIndex {
    fn unique(&self) -> bool {
        self.options.unique
    }

    fn max_key_len(&self) -> usize {
        self.options.max_key_len
    }

    /// Looks up one stored key (unique keys, or composite keys of a non-unique index): the
    /// sub-tree's function returns the leaf covering it, searched here.
    fn get_stored(&self, stored: &[u8]) -> Result<Option<u64>, DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let (reply, _) = self.call(
            Position::At(stored),
            false,
            deadline,
            &mut contacted,
            &|tag, root| codec::subtree_call("et_get", tag, root, &[stored]),
        )?;
        self.finish(&contacted);
        let leaf = NodeView::parse(codec::bytes_ref(reply.item(0))?)?;
        Ok(leaf.find(stored).map(|i| leaf.tid(i)))
    }

    /// Inserts a stored key; `replace`: insert or replace, else insert only if absent.
    /// Returns the previous tid.
    fn put_stored(&self, stored: &[u8], tid: u64, replace: bool) -> Result<Option<u64>, DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let value = tid.to_be_bytes();
        let cap = self.options.node_capacity.to_string();
        let allow_post = if self.allow_post() { "1" } else { "0" };
        let mode = if replace { "u" } else { "a" };
        let levels = self.options.subtree_levels().to_string();
        let (reply, target) = self.call(
            Position::At(stored),
            true,
            deadline,
            &mut contacted,
            &|tag, root| {
                codec::subtree_call(
                    "et_put",
                    tag,
                    root,
                    &[
                        stored,
                        &value,
                        cap.as_bytes(),
                        allow_post.as_bytes(),
                        mode.as_bytes(),
                        levels.as_bytes(),
                    ],
                )
            },
        )?;
        if reply.items.len() >= 3 {
            // The sub-tree root split into two sub-trees: post the new one.
            let sep = codec::bytes_of(&reply.items[1])?;
            let id = codec::u64_of(&reply.items[2])?;
            // It lives in the tag of the sub-tree that split; then it goes to the master
            // with the fewest sub-trees.
            let root = RootRef {
                token: target.token,
                id,
            };
            self.post(&sep, root, deadline)?;
            self.try_place_new_subtree(root, deadline);
        }
        self.finish(&contacted);
        codec::opt_tid(reply.items.first())
    }

    /// Removes a stored key (only if it maps to `expected`, when given). Returns the tid it
    /// had and whether it was removed.
    fn remove_stored(
        &self,
        stored: &[u8],
        expected: Option<u64>,
    ) -> Result<(Option<u64>, bool), DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let min_fill = (self.options.node_capacity / 4).max(1).to_string();
        let cap = self.options.node_capacity.to_string();
        // An empty expected tid removes whatever the key maps to.
        let expected = expected.map_or(Vec::new(), |t| t.to_be_bytes().to_vec());
        let (reply, _) = self.call(
            Position::At(stored),
            true,
            deadline,
            &mut contacted,
            &|tag, root| {
                codec::subtree_call(
                    "et_del",
                    tag,
                    root,
                    &[stored, min_fill.as_bytes(), cap.as_bytes(), &expected],
                )
            },
        )?;
        self.finish(&contacted);
        codec::removal(&reply.items)
    }

    /// Scans stored keys within the bounds, calling `visit` with each stored key and tid.
    /// Each call of the sub-tree's function returns the leaf covering the scan's position and
    /// the leaves after it (in the scan's direction) inside that sub-tree, atomically; their
    /// entries are read here, and the next call starts where the last leaf ends, so keys
    /// never repeat or go backwards and a key present throughout is never skipped.
    fn scan_stored(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let ascending = direction == Direction::Ascending;
        // The bound the scan moves away from (`from`) advances after each call; the other
        // one (`to`) ends the scan.
        let (mut from, to) = if ascending {
            (lower, upper)
        } else {
            (upper, lower)
        };
        let mut visited = 0;
        while visited < limit {
            let max = (limit - visited).min(self.options.scan_chunk).to_string();
            let (position, pos_key, strict): (Position<'_>, &[u8], bool) = match (&from, ascending)
            {
                (Bound::Included(k), _) => (Position::At(k), k, false),
                (Bound::Excluded(k), true) => (Position::At(k), k, false),
                (Bound::Excluded(k), false) => (Position::Below(k), k, true),
                (Bound::Unbounded, true) => (Position::At(&[]), &[], false),
                (Bound::Unbounded, false) => (Position::End, &[], false),
            };
            let pos_has: &[u8] = if matches!(from, Bound::Unbounded) {
                b"0"
            } else {
                b"1"
            };
            let (stop_has, stop_key): (&[u8], &[u8]) = match &to {
                Bound::Included(k) | Bound::Excluded(k) => (b"1", k),
                Bound::Unbounded => (b"0", b""),
            };
            let dir: &[u8] = if ascending { b"a" } else { b"d" };
            let strict: &[u8] = if strict { b"1" } else { b"0" };
            let (reply, _) =
                self.call(position, false, deadline, &mut contacted, &|tag, root| {
                    codec::subtree_call(
                        "et_scan",
                        tag,
                        root,
                        &[
                            dir,
                            max.as_bytes(),
                            pos_has,
                            pos_key,
                            strict,
                            stop_has,
                            stop_key,
                        ],
                    )
                })?;
            let mut finished = false;
            let mut next = None;
            for item in &reply.items {
                let leaf = NodeView::parse(codec::bytes_ref(item)?)?;
                if visit_leaf(&leaf, &from, &to, ascending, limit, &mut visited, visit) {
                    finished = true;
                    break;
                }
                next = Some(if ascending {
                    leaf.high().map(|h| Bound::Included(h.to_vec()))
                } else {
                    (!leaf.low().is_empty()).then(|| Bound::Excluded(leaf.low().to_vec()))
                });
            }
            match next {
                Some(Some(bound)) if !finished => from = bound,
                _ => break,
            }
        }
        self.finish(&contacted);
        Ok(visited)
    }
}

/// Visits a scanned leaf's entries that lie between `from` and `to`, in the scan's
/// direction, until `limit` visits in all. Returns true when the scan is over (the limit is
/// reached or an entry lies past `to`).
fn visit_leaf(
    leaf: &NodeView<'_>,
    from: &Bound<Vec<u8>>,
    to: &Bound<Vec<u8>>,
    ascending: bool,
    limit: usize,
    visited: &mut usize,
    visit: &mut dyn FnMut(&[u8], u64),
) -> bool {
    use std::cmp::Ordering::{Greater, Less};
    let n = leaf.len();
    // Entries on the scan's side of `from`: [start, n) ascending, [0, end) descending.
    let edge = match (from, ascending) {
        (Bound::Included(k), true) => leaf.lower_bound(k),
        (Bound::Excluded(k), true) => leaf.upper_bound(k),
        (Bound::Included(k), false) => leaf.upper_bound(k),
        (Bound::Excluded(k), false) => leaf.lower_bound(k),
        (Bound::Unbounded, true) => 0,
        (Bound::Unbounded, false) => n,
    };
    let past_to = |i: usize| match to {
        Bound::Included(k) => leaf.cmp_key(i, k) == if ascending { Greater } else { Less },
        Bound::Excluded(k) => leaf.cmp_key(i, k) != if ascending { Less } else { Greater },
        Bound::Unbounded => false,
    };
    let mut key = Vec::new();
    let mut take = |i: usize| {
        if *visited == limit || past_to(i) {
            return true;
        }
        key.clear();
        key.extend_from_slice(leaf.prefix());
        key.extend_from_slice(leaf.suffix(i));
        visit(&key, leaf.tid(i));
        *visited += 1;
        false
    };
    let stopped = if ascending {
        (edge..n).any(&mut take)
    } else {
        (0..edge).rev().any(&mut take)
    };
    stopped || *visited == limit
}

impl DistIndex {
    /// `Index::len`: the entry count, 0 when the cluster cannot be reached (use
    /// [`DistIndex::try_len`] to see the error).
    fn index_len(&self) -> usize {
        self.try_len().unwrap_or(0)
    }

    /// `Index::memory`: [`DistIndex::server_memory`] and, in `aux`, the client's cached top
    /// (only the latter when the cluster cannot be reached).
    fn index_memory(&self) -> MemoryUsage {
        let client = MemoryUsage {
            inner: 0,
            leaves: 0,
            aux: self.cached_top().bytes(),
        };
        match self.server_memory() {
            Ok(server) => server + client,
            Err(_) => client,
        }
    }

    fn index_check(&self) -> Result<(), DistError> {
        self.try_check()
    }
}

index_via_stored_map!(DistIndex, crate::DistKind::Tree);
