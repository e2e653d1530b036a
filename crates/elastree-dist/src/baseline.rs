//! The paper's Baseline: the same B+-tree (same node layout, same capacity) with every node
//! its own Redis key placed by its own id (no shared hash tag, so a tree's nodes scatter over
//! all masters), traversed from the client one node per round trip. It is a B-link tree
//! (Lehman and Yao): a node is changed atomically by a single-key function, a split writes the
//! new right node first, then swings the left node (compare-and-set on its bytes), then posts
//! the separator to the parent; a reader that lands left of its key moves right.
//!
//! It exists to be measured against [`crate::DistIndex`]; it never merges nodes (removes
//! leave them sparse) and its `check` walks the whole tree from the client.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use elastree::{Direction, MemoryUsage};
use redis::Value;

use crate::adapter::{index_via_stored_map, StoredMap};
use crate::codec;
use crate::error::DistError;
use crate::index::DistOptions;
use crate::node::{NodeData, NodeView};
use crate::router::{Request, Router};
use crate::slots::slot_of;

/// The Baseline tree on a cluster. See the module docs.
pub struct BaselineIndex {
    router: Router,
    options: DistOptions,
    root: AtomicU64,
    operations: AtomicU64,
    masters_contacted: AtomicU64,
}

impl std::fmt::Debug for BaselineIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaselineIndex")
            .field("name", &self.options.name)
            .finish_non_exhaustive()
    }
}

/// The status word and items of a baseline function reply.
fn parse(v: &Value) -> Result<(String, Vec<Value>), DistError> {
    match v {
        Value::Array(parts) if !parts.is_empty() => Ok((
            String::from_utf8_lossy(&codec::bytes_of(&parts[0])?).into_owned(),
            parts[1..].to_vec(),
        )),
        other => Ok((
            String::from_utf8_lossy(&codec::bytes_of(other)?).into_owned(),
            Vec::new(),
        )),
    }
}

impl BaselineIndex {
    /// Connects and opens (or creates) the baseline tree `options.name` (its keys start with
    /// `et:<name>:b:`, no hash tag).
    pub fn connect(seeds: &[String], options: DistOptions) -> Result<BaselineIndex, DistError> {
        crate::index::validate(&options)?;
        let router = Router::connect(seeds, options.router.clone())?;
        let index = BaselineIndex {
            router,
            options,
            root: AtomicU64::new(0),
            operations: AtomicU64::new(0),
            masters_contacted: AtomicU64::new(0),
        };
        index.open_or_create()?;
        Ok(index)
    }

    fn key(&self, suffix: &str) -> String {
        format!("et:{}:b:{suffix}", self.options.name)
    }

    fn node_key(&self, id: u64) -> String {
        self.key(&id.to_string())
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.options.router.op_timeout
    }

    /// One command on the master of `key`'s slot; one round trip.
    fn run(
        &self,
        key: &str,
        cmd: redis::Cmd,
        write: bool,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<Value, DistError> {
        let request = if write {
            Request::write(vec![cmd])
        } else {
            Request::read(vec![cmd])
        };
        let (mut replies, addr) = self
            .router
            .run(slot_of(key.as_bytes()), &request, deadline)?;
        if !contacted.contains(&addr) {
            contacted.push(addr);
        }
        Ok(replies.swap_remove(0))
    }

    fn open_or_create(&self) -> Result<(), DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let conf_key = self.key("conf");
        let conf = format!(
            "unique={} capacity={}",
            self.options.unique as u8, self.options.node_capacity
        );
        let mut set = redis::cmd("SET");
        set.arg(&conf_key).arg(&conf).arg("NX").arg("GET");
        let previous = self.run(&conf_key, set, true, deadline, &mut contacted)?;
        if let Value::BulkString(stored) = &previous {
            if stored.as_slice() != conf.as_bytes() {
                return Err(DistError::Invalid(format!(
                    "baseline index {:?} exists with {}, asked for {conf}",
                    self.options.name,
                    String::from_utf8_lossy(stored)
                )));
            }
        }
        if self.read_root(deadline, &mut contacted)? == 0 {
            let id = self.new_id(deadline, &mut contacted)?;
            let leaf = NodeData {
                level: 0,
                flags: 0,
                right: 0,
                low: Vec::new(),
                high: None,
                keys: Vec::new(),
                vals: Vec::new(),
            };
            self.put_node(id, &leaf, deadline, &mut contacted)?;
            let root_key = self.key("root");
            let cas = codec::fcall("etb_cas", &root_key, &[b"", id.to_string().as_bytes()]);
            self.run(&root_key, cas, true, deadline, &mut contacted)?;
            self.read_root(deadline, &mut contacted)?;
        }
        Ok(())
    }

    fn read_root(&self, deadline: Instant, contacted: &mut Vec<String>) -> Result<u64, DistError> {
        let root_key = self.key("root");
        let mut get = redis::cmd("GET");
        get.arg(&root_key);
        let id = match self.run(&root_key, get, false, deadline, contacted)? {
            Value::Nil => 0,
            v => codec::u64_of(&v)?,
        };
        self.root.store(id, Ordering::Relaxed);
        Ok(id)
    }

    fn new_id(&self, deadline: Instant, contacted: &mut Vec<String>) -> Result<u64, DistError> {
        let key = self.key("next");
        let mut incr = redis::cmd("INCR");
        incr.arg(&key);
        codec::u64_of(&self.run(&key, incr, true, deadline, contacted)?)
    }

    fn put_node(
        &self,
        id: u64,
        node: &NodeData,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<(), DistError> {
        let key = self.node_key(id);
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(node.encode());
        self.run(&key, set, true, deadline, contacted)?;
        Ok(())
    }

    /// Reads a node's bytes (checked by [`NodeView::parse`] before they are returned).
    fn read_node(
        &self,
        id: u64,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<Vec<u8>, DistError> {
        let key = self.node_key(id);
        let mut get = redis::cmd("GET");
        get.arg(&key);
        match self.run(&key, get, false, deadline, contacted)? {
            Value::BulkString(bytes) => {
                NodeView::parse(&bytes)?;
                Ok(bytes)
            }
            other => Err(DistError::Corrupt(format!(
                "baseline node {id} missing ({other:?})"
            ))),
        }
    }

    /// Walks from the root to the node at `level` covering the position, one node per
    /// round trip, moving right where a split moved the position. Returns the path of ids
    /// (root first), that node's id and its bytes.
    fn descend(
        &self,
        key: Option<&[u8]>,
        strict: bool,
        level: u8,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<(Vec<u64>, u64, Vec<u8>), DistError> {
        let mut id = self.root.load(Ordering::Relaxed);
        let mut path = Vec::new();
        loop {
            let mut bytes = self.read_node(id, deadline, contacted)?;
            while beyond_high(&NodeView::parse(&bytes)?, key, strict) {
                id = u64::from(NodeView::parse(&bytes)?.right());
                bytes = self.read_node(id, deadline, contacted)?;
            }
            let node = NodeView::parse(&bytes)?;
            if node.level() <= level {
                return Ok((path, id, bytes));
            }
            path.push(id);
            id = u64::from(node.child(child_for(&node, key, strict)));
        }
    }

    /// Splits the full node `id` (level `level`), posting the separator to its parent (one
    /// of `path`, or found again from the root). A lost race leaves the tree unchanged.
    fn split(
        &self,
        id: u64,
        path: &[u64],
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<(), DistError> {
        let bytes = self.read_node(id, deadline, contacted)?;
        let node = NodeData::from_view(&NodeView::parse(&bytes)?);
        let cap = self.options.node_capacity;
        if node.keys.len() < cap {
            return Ok(()); // someone split it already
        }
        // Both halves keep whole entries: an inner node's right half starts with the entry
        // whose key is the separator (its low fence).
        let mut left = node.clone();
        let half = node.keys.len() / 2;
        let right_keys = left.keys.split_off(half);
        let right_vals = left.vals.split_off(half);
        let sep = right_keys[0].clone();
        let right_id = self.new_id(deadline, contacted)?;
        let right = NodeData {
            level: node.level,
            flags: 0,
            right: node.right,
            low: sep.clone(),
            high: node.high.clone(),
            keys: right_keys,
            vals: right_vals,
        };
        self.put_node(right_id, &right, deadline, contacted)?;
        left.high = Some(sep.clone());
        left.right = node_id(right_id)?;
        let key = self.node_key(id);
        let cas = codec::fcall("etb_cas", &key, &[&bytes, &left.encode()]);
        if codec::bytes_of(&self.run(&key, cas, true, deadline, contacted)?)? != b"OK" {
            let mut del = redis::cmd("DEL");
            del.arg(self.node_key(right_id));
            self.run(&self.node_key(right_id), del, true, deadline, contacted)?;
            return Ok(());
        }
        // Post (sep, right_id) one level up.
        if path.is_empty() && self.root.load(Ordering::Relaxed) == id {
            let root_id = self.new_id(deadline, contacted)?;
            let root = NodeData {
                level: node.level + 1,
                flags: 0,
                right: 0,
                low: Vec::new(),
                high: None,
                keys: vec![Vec::new(), sep.clone()],
                vals: vec![id, right_id],
            };
            self.put_node(root_id, &root, deadline, contacted)?;
            let root_key = self.key("root");
            let cas = codec::fcall(
                "etb_cas",
                &root_key,
                &[id.to_string().as_bytes(), root_id.to_string().as_bytes()],
            );
            if codec::bytes_of(&self.run(&root_key, cas, true, deadline, contacted)?)? == b"OK" {
                self.root.store(root_id, Ordering::Relaxed);
                return Ok(());
            }
            let mut del = redis::cmd("DEL");
            del.arg(self.node_key(root_id));
            self.run(&self.node_key(root_id), del, true, deadline, contacted)?;
            self.read_root(deadline, contacted)?;
        }
        let mut parent = match path.last() {
            Some(&p) => p,
            None => {
                self.descend(Some(&sep), false, node.level + 1, deadline, contacted)?
                    .1
            }
        };
        let parent_path = &path[..path.len().saturating_sub(1)];
        let cap_s = cap.to_string();
        let child_s = right_id.to_string();
        loop {
            let key = self.node_key(parent);
            let put = codec::fcall(
                "etb_inner_put",
                &key,
                &[&sep, child_s.as_bytes(), cap_s.as_bytes()],
            );
            let (status, items) = parse(&self.run(&key, put, true, deadline, contacted)?)?;
            match status.as_str() {
                "OK" => return Ok(()),
                "RIGHT" => parent = codec::u64_of(items.first().unwrap_or(&Value::Nil))?,
                "FULL" => self.split(parent, parent_path, deadline, contacted)?,
                other => return Err(DistError::Corrupt(format!("etb_inner_put: {other}"))),
            }
            if Instant::now() >= deadline {
                return Err(DistError::Unavailable(
                    "baseline split did not finish in time".into(),
                ));
            }
        }
    }

    /// Runs a leaf function (`etb_leaf_put` / `etb_leaf_del`) on the leaf covering `stored`,
    /// splitting full leaves on the way. Returns its OK items.
    fn leaf_op(
        &self,
        stored: &[u8],
        function: &str,
        args: &[&[u8]],
    ) -> Result<Vec<Value>, DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let (mut path, mut leaf, _) =
            self.descend(Some(stored), false, 0, deadline, &mut contacted)?;
        loop {
            let key = self.node_key(leaf);
            let mut all: Vec<&[u8]> = vec![stored];
            all.extend_from_slice(args);
            let cmd = codec::fcall(function, &key, &all);
            let (status, items) = parse(&self.run(&key, cmd, true, deadline, &mut contacted)?)?;
            match status.as_str() {
                "OK" => {
                    self.operations.fetch_add(1, Ordering::Relaxed);
                    self.masters_contacted
                        .fetch_add(contacted.len() as u64, Ordering::Relaxed);
                    return Ok(items);
                }
                "RIGHT" => leaf = codec::u64_of(items.first().unwrap_or(&Value::Nil))?,
                "FULL" => {
                    self.split(leaf, &path, deadline, &mut contacted)?;
                    let again = self.descend(Some(stored), false, 0, deadline, &mut contacted)?;
                    path = again.0;
                    leaf = again.1;
                }
                other => return Err(DistError::Corrupt(format!("{function}: {other}"))),
            }
            if Instant::now() >= deadline {
                return Err(DistError::Unavailable(format!(
                    "{function} did not finish in time"
                )));
            }
        }
    }

    /// The counters of this client, as [`crate::DistStats`].
    pub fn stats(&self) -> crate::DistStats {
        let c = &self.router.counters;
        crate::DistStats {
            operations: self.operations.load(Ordering::Relaxed),
            round_trips: c.round_trips.load(Ordering::Relaxed),
            masters_contacted: self.masters_contacted.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            replicated_writes: c.replicated_writes.load(Ordering::Relaxed),
            ..crate::DistStats::default()
        }
    }

    /// The tree's height (levels from the root to the leaves).
    pub fn height(&self) -> Result<u64, DistError> {
        let mut contacted = Vec::new();
        let deadline = self.deadline();
        let root = self.read_root(deadline, &mut contacted)?;
        let bytes = self.read_node(root, deadline, &mut contacted)?;
        Ok(u64::from(NodeView::parse(&bytes)?.level()) + 1)
    }

    /// Deletes the whole tree from the cluster.
    pub fn destroy(self) -> Result<(), DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let root = self.read_root(deadline, &mut contacted)?;
        let mut level_start = root;
        while level_start != 0 {
            let first = self.read_node(level_start, deadline, &mut contacted)?;
            let first = NodeView::parse(&first)?;
            let below = (!first.is_leaf() && first.len() > 0).then(|| u64::from(first.child(0)));
            let mut id = level_start;
            while id != 0 {
                let bytes = self.read_node(id, deadline, &mut contacted)?;
                let key = self.node_key(id);
                let mut del = redis::cmd("DEL");
                del.arg(&key);
                self.run(&key, del, true, deadline, &mut contacted)?;
                id = u64::from(NodeView::parse(&bytes)?.right());
            }
            level_start = below.unwrap_or(0);
        }
        for suffix in ["root", "next", "conf"] {
            let key = self.key(suffix);
            let mut del = redis::cmd("DEL");
            del.arg(&key);
            self.run(&key, del, true, deadline, &mut contacted)?;
        }
        Ok(())
    }

    /// The bytes the tree takes on the cluster's masters, as Redis counts them (`MEMORY
    /// USAGE` of every node key, by level, and of its root, id counter and settings keys in
    /// `aux`): one round trip per node.
    pub fn server_memory(&self) -> Result<MemoryUsage, DistError> {
        let deadline = self.deadline() + self.options.router.op_timeout * 10;
        let mut contacted = Vec::new();
        let usage = |key: &str, contacted: &mut Vec<String>| -> Result<usize, DistError> {
            let mut cmd = redis::cmd("MEMORY");
            cmd.arg("USAGE").arg(key);
            match self.run(key, cmd, false, deadline, contacted)? {
                Value::Int(n) => Ok(n.max(0) as usize),
                _ => Ok(0),
            }
        };
        let mut total = MemoryUsage::default();
        for suffix in ["root", "next", "conf"] {
            total.aux += usage(&self.key(suffix), &mut contacted)?;
        }
        let mut level_start = self.read_root(deadline, &mut contacted)?;
        while level_start != 0 {
            let mut below = 0;
            let mut id = level_start;
            while id != 0 {
                let bytes = self.read_node(id, deadline, &mut contacted)?;
                let node = NodeView::parse(&bytes)?;
                let used = usage(&self.node_key(id), &mut contacted)?;
                if node.is_leaf() {
                    total.leaves += used;
                } else {
                    total.inner += used;
                    if below == 0 && node.len() > 0 {
                        below = u64::from(node.child(0));
                    }
                }
                id = u64::from(node.right());
            }
            level_start = below;
        }
        Ok(total)
    }

    /// Walks every level left to right and checks each node's own invariants, levels,
    /// capacities, and that the right links of a level cover the key space without gaps;
    /// returns the number of entries.
    fn walk_check(&self) -> Result<usize, DistError> {
        let deadline = self.deadline() + self.options.router.op_timeout * 10;
        let mut contacted = Vec::new();
        let root = self.read_root(deadline, &mut contacted)?;
        let mut level_start = root;
        let mut entries = 0;
        loop {
            let mut below = None;
            let mut prev_high: Option<Vec<u8>> = Some(Vec::new());
            // Follow right links from the level's first node; they must cover the key space.
            let mut id = level_start;
            let mut level = None;
            while id != 0 {
                let bytes = self.read_node(id, deadline, &mut contacted)?;
                let node = NodeView::parse(&bytes)?;
                let bad = |what: &str| DistError::Corrupt(format!("baseline node {id}: {what}"));
                if *level.get_or_insert(node.level()) != node.level() {
                    return Err(bad("level differs from its left neighbour's"));
                }
                if prev_high.as_deref() != Some(node.low()) {
                    return Err(bad(
                        "low fence differs from its left neighbour's high fence",
                    ));
                }
                node.validate().map_err(|e| bad(&e))?;
                if node.len() > self.options.node_capacity {
                    return Err(bad("over its capacity"));
                }
                if node.is_leaf() {
                    entries += node.len();
                } else if below.is_none() {
                    below = Some(u64::from(node.child(0)));
                }
                prev_high = node.high().map(<[u8]>::to_vec);
                id = u64::from(node.right());
            }
            if prev_high.is_some() {
                return Err(DistError::Corrupt(
                    "a baseline level does not end at +inf".into(),
                ));
            }
            match below {
                Some(first) if level != Some(0) => level_start = first,
                _ => return Ok(entries),
            }
        }
    }
}

/// A node id as nodes store it (u32).
fn node_id(id: u64) -> Result<u32, DistError> {
    u32::try_from(id).map_err(|_| DistError::Corrupt(format!("node id {id} beyond u32")))
}

/// Whether the position (key, strict) lies beyond the node's high fence (see `tree.lua`;
/// `None` is +infinity).
fn beyond_high(node: &NodeView<'_>, key: Option<&[u8]>, strict: bool) -> bool {
    match (node.high(), key) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(hi), Some(k)) if strict => hi < k,
        (Some(hi), Some(k)) => hi <= k,
    }
}

/// The entry of an inner node whose child covers the position.
fn child_for(node: &NodeView<'_>, key: Option<&[u8]>, strict: bool) -> usize {
    let i = match key {
        None => node.len(),
        Some(k) if strict => node.lower_bound(k),
        Some(k) => node.upper_bound(k),
    };
    i.saturating_sub(1)
}

impl StoredMap for BaselineIndex {
    fn unique(&self) -> bool {
        self.options.unique
    }

    fn max_key_len(&self) -> usize {
        self.options.max_key_len
    }

    fn get_stored(&self, stored: &[u8]) -> Result<Option<u64>, DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let (_, _, bytes) = self.descend(Some(stored), false, 0, deadline, &mut contacted)?;
        self.operations.fetch_add(1, Ordering::Relaxed);
        self.masters_contacted
            .fetch_add(contacted.len() as u64, Ordering::Relaxed);
        let leaf = NodeView::parse(&bytes)?;
        Ok(leaf.find(stored).map(|i| leaf.tid(i)))
    }

    fn put_stored(&self, stored: &[u8], tid: u64, replace: bool) -> Result<Option<u64>, DistError> {
        let cap = self.options.node_capacity.to_string();
        let mode: &[u8] = if replace { b"u" } else { b"a" };
        let items = self.leaf_op(
            stored,
            "etb_leaf_put",
            &[&tid.to_be_bytes(), cap.as_bytes(), mode],
        )?;
        codec::opt_tid(items.first())
    }

    fn remove_stored(
        &self,
        stored: &[u8],
        expected: Option<u64>,
    ) -> Result<(Option<u64>, bool), DistError> {
        // An empty expected tid removes whatever the key maps to.
        let expected = expected.map_or(Vec::new(), |t| t.to_be_bytes().to_vec());
        let items = self.leaf_op(stored, "etb_leaf_del", &[&expected])?;
        codec::removal(&items)
    }

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
        let in_lower = |k: &[u8]| match &lower {
            Bound::Included(b) => k >= b.as_slice(),
            Bound::Excluded(b) => k > b.as_slice(),
            Bound::Unbounded => true,
        };
        let in_upper = |k: &[u8]| match &upper {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        };
        let mut visited = 0;
        match direction {
            Direction::Ascending => {
                let start: &[u8] = match &lower {
                    Bound::Included(b) | Bound::Excluded(b) => b,
                    Bound::Unbounded => &[],
                };
                let (_, _, mut bytes) =
                    self.descend(Some(start), false, 0, deadline, &mut contacted)?;
                'leaves: loop {
                    let leaf = NodeView::parse(&bytes)?;
                    for i in 0..leaf.len() {
                        let k = leaf.key(i);
                        if !in_lower(&k) {
                            continue;
                        }
                        if !in_upper(&k) || visited == limit {
                            break 'leaves;
                        }
                        visit(&k, leaf.tid(i));
                        visited += 1;
                    }
                    if leaf.right() == 0 || visited == limit {
                        break;
                    }
                    bytes = self.read_node(u64::from(leaf.right()), deadline, &mut contacted)?;
                }
            }
            Direction::Descending => {
                let (mut key, mut strict): (Option<Vec<u8>>, bool) = match &upper {
                    Bound::Included(b) => (Some(b.clone()), false),
                    Bound::Excluded(b) => (Some(b.clone()), true),
                    Bound::Unbounded => (None, false),
                };
                'back: loop {
                    let (_, _, bytes) =
                        self.descend(key.as_deref(), strict, 0, deadline, &mut contacted)?;
                    let leaf = NodeView::parse(&bytes)?;
                    for i in (0..leaf.len()).rev() {
                        let k = leaf.key(i);
                        if !in_upper(&k) {
                            continue;
                        }
                        if !in_lower(&k) || visited == limit {
                            break 'back;
                        }
                        visit(&k, leaf.tid(i));
                        visited += 1;
                    }
                    if leaf.low().is_empty() || visited == limit {
                        break;
                    }
                    key = Some(leaf.low().to_vec());
                    strict = true;
                }
            }
        }
        self.operations.fetch_add(1, Ordering::Relaxed);
        self.masters_contacted
            .fetch_add(contacted.len() as u64, Ordering::Relaxed);
        Ok(visited)
    }
}

impl BaselineIndex {
    fn index_len(&self) -> usize {
        self.walk_check().unwrap_or(0)
    }

    /// `Index::memory`: [`BaselineIndex::server_memory`] (nothing when the cluster cannot be
    /// reached; the client caches nothing).
    fn index_memory(&self) -> MemoryUsage {
        self.server_memory().unwrap_or_default()
    }

    fn index_check(&self) -> Result<(), DistError> {
        self.walk_check().map(|_| ())
    }
}

index_via_stored_map!(BaselineIndex, crate::DistKind::Baseline);
