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

use elastree::{Direction, IndexKind, MemoryUsage};
use redis::Value;

use crate::adapter::{index_via_stored_map, StoredMap};
use crate::codec;
use crate::error::DistError;
use crate::index::DistOptions;
use crate::router::{Request, Router};
use crate::slots::slot_of;

/// A tree node as stored (MessagePack, the layout of `tree.lua`).
#[derive(Debug, Clone, PartialEq)]
struct Node {
    level: u64,
    lo: Vec<u8>,
    /// `None`: plus infinity.
    hi: Option<Vec<u8>>,
    right: u64,
    keys: Vec<Vec<u8>>,
    /// Leaf: 8-byte tids. Inner: child ids (as big-endian u64 bytes here).
    vals: Vec<Val>,
    version: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum Val {
    Tid(Vec<u8>),
    Child(u64),
}

impl Node {
    fn decode(bytes: &[u8]) -> Result<Node, DistError> {
        let bad = |what: &str| DistError::Corrupt(format!("baseline node: {what}"));
        let value = rmpv::decode::read_value(&mut &bytes[..]).map_err(|e| bad(&e.to_string()))?;
        let rmpv::Value::Array(f) = value else {
            return Err(bad("not an array"));
        };
        let int = |v: &rmpv::Value| v.as_u64().ok_or_else(|| bad("expected an integer"));
        let raw = |v: &rmpv::Value| match v {
            rmpv::Value::String(s) => Ok(s.as_bytes().to_vec()),
            rmpv::Value::Binary(b) => Ok(b.clone()),
            _ => Err(bad("expected a string")),
        };
        let list = |v: &rmpv::Value| match v {
            rmpv::Value::Array(a) => Ok(a.clone()),
            rmpv::Value::Map(m) if m.is_empty() => Ok(Vec::new()),
            _ => Err(bad("expected an array")),
        };
        if f.len() < 6 {
            return Err(bad("too few fields"));
        }
        let level = int(&f[0])?;
        let hi = match &f[2] {
            rmpv::Value::Boolean(false) => None,
            v => Some(raw(v)?),
        };
        let keys = list(&f[4])?
            .iter()
            .map(raw)
            .collect::<Result<Vec<_>, _>>()?;
        let vals = list(&f[5])?
            .iter()
            .map(|v| {
                if level == 0 {
                    raw(v).map(Val::Tid)
                } else {
                    int(v).map(Val::Child)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Node {
            level,
            lo: raw(&f[1])?,
            hi,
            right: int(&f[3])?,
            keys,
            vals,
            version: f.get(7).and_then(rmpv::Value::as_u64).unwrap_or(0),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let w = &mut out;
        // Writing to a Vec cannot fail.
        let str = |w: &mut Vec<u8>, b: &[u8]| {
            rmp::encode::write_str_len(w, b.len() as u32).expect("vec write");
            w.extend_from_slice(b);
        };
        rmp::encode::write_array_len(w, 8).expect("vec write");
        rmp::encode::write_uint(w, self.level).expect("vec write");
        str(w, &self.lo);
        match &self.hi {
            Some(hi) => str(w, hi),
            None => rmp::encode::write_bool(w, false).expect("vec write"),
        }
        rmp::encode::write_uint(w, self.right).expect("vec write");
        rmp::encode::write_array_len(w, self.keys.len() as u32).expect("vec write");
        for k in &self.keys {
            str(w, k);
        }
        rmp::encode::write_array_len(w, self.vals.len() as u32).expect("vec write");
        for v in &self.vals {
            match v {
                Val::Tid(t) => str(w, t),
                Val::Child(c) => {
                    rmp::encode::write_uint(w, *c).expect("vec write");
                }
            }
        }
        rmp::encode::write_uint(w, 0).expect("vec write");
        rmp::encode::write_uint(w, self.version).expect("vec write");
        out
    }

    /// Whether the position (key, strict) lies beyond the high fence (see `tree.lua`).
    fn beyond_high(&self, key: Option<&[u8]>, strict: bool) -> bool {
        match (&self.hi, key) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(hi), Some(k)) => {
                if strict {
                    hi.as_slice() < k
                } else {
                    hi.as_slice() <= k
                }
            }
        }
    }

    /// The child covering the position.
    fn child_for(&self, key: Option<&[u8]>, strict: bool) -> Result<u64, DistError> {
        let i = match key {
            None => self.vals.len() - 1,
            Some(k) if strict => self.keys.partition_point(|s| s.as_slice() < k),
            Some(k) => self.keys.partition_point(|s| s.as_slice() <= k),
        };
        match self.vals.get(i) {
            Some(Val::Child(c)) => Ok(*c),
            _ => Err(DistError::Corrupt(
                "baseline inner node without that child".into(),
            )),
        }
    }
}

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
            let leaf = Node {
                level: 0,
                lo: Vec::new(),
                hi: None,
                right: 0,
                keys: Vec::new(),
                vals: Vec::new(),
                version: 0,
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
        node: &Node,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<(), DistError> {
        let key = self.node_key(id);
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(node.encode());
        self.run(&key, set, true, deadline, contacted)?;
        Ok(())
    }

    /// Reads a node: its bytes (for compare-and-set) and its decoded form.
    fn read_node(
        &self,
        id: u64,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<(Vec<u8>, Node), DistError> {
        let key = self.node_key(id);
        let mut get = redis::cmd("GET");
        get.arg(&key);
        match self.run(&key, get, false, deadline, contacted)? {
            Value::BulkString(bytes) => {
                let node = Node::decode(&bytes)?;
                Ok((bytes, node))
            }
            other => Err(DistError::Corrupt(format!(
                "baseline node {id} missing ({other:?})"
            ))),
        }
    }

    /// Walks from the root to the node at `level` covering the position, one node per
    /// round trip, moving right where a split moved the position. Returns the path of ids
    /// (root first) and that node.
    fn descend(
        &self,
        key: Option<&[u8]>,
        strict: bool,
        level: u64,
        deadline: Instant,
        contacted: &mut Vec<String>,
    ) -> Result<(Vec<u64>, u64, Node), DistError> {
        let mut id = self.root.load(Ordering::Relaxed);
        let mut path = Vec::new();
        loop {
            let (_, mut node) = self.read_node(id, deadline, contacted)?;
            while node.beyond_high(key, strict) {
                id = node.right;
                node = self.read_node(id, deadline, contacted)?.1;
            }
            if node.level <= level {
                return Ok((path, id, node));
            }
            path.push(id);
            id = node.child_for(key, strict)?;
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
        let (bytes, node) = self.read_node(id, deadline, contacted)?;
        let cap = self.options.node_capacity;
        let size = if node.level == 0 {
            node.keys.len()
        } else {
            node.vals.len()
        };
        if size < cap {
            return Ok(()); // someone split it already
        }
        let mut left = node.clone();
        let (sep, right_keys, right_vals) = if node.level == 0 {
            let half = node.keys.len() / 2;
            let rk = left.keys.split_off(half);
            let rv = left.vals.split_off(half);
            (rk[0].clone(), rk, rv)
        } else {
            let h = node.vals.len() / 2;
            let rk = left.keys.split_off(h);
            let rv = left.vals.split_off(h);
            let sep = left.keys.pop().expect("an inner node holds separators");
            (sep, rk, rv)
        };
        let right_id = self.new_id(deadline, contacted)?;
        let right = Node {
            level: node.level,
            lo: sep.clone(),
            hi: node.hi.clone(),
            right: node.right,
            keys: right_keys,
            vals: right_vals,
            version: 0,
        };
        self.put_node(right_id, &right, deadline, contacted)?;
        left.hi = Some(sep.clone());
        left.right = right_id;
        left.version += 1;
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
            let root = Node {
                level: node.level + 1,
                lo: Vec::new(),
                hi: None,
                right: 0,
                keys: vec![sep.clone()],
                vals: vec![Val::Child(id), Val::Child(right_id)],
                version: 0,
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
            ..crate::DistStats::default()
        }
    }

    /// The tree's height (levels from the root to the leaves).
    pub fn height(&self) -> Result<u64, DistError> {
        let mut contacted = Vec::new();
        let deadline = self.deadline();
        let root = self.read_root(deadline, &mut contacted)?;
        Ok(self.read_node(root, deadline, &mut contacted)?.1.level + 1)
    }

    /// Deletes the whole tree from the cluster.
    pub fn destroy(self) -> Result<(), DistError> {
        let deadline = self.deadline();
        let mut contacted = Vec::new();
        let root = self.read_root(deadline, &mut contacted)?;
        let mut level_start = root;
        loop {
            let (_, first) = self.read_node(level_start, deadline, &mut contacted)?;
            let below = match first.vals.first() {
                Some(Val::Child(c)) if first.level > 0 => Some(*c),
                _ => None,
            };
            let mut id = level_start;
            while id != 0 {
                let (_, node) = self.read_node(id, deadline, &mut contacted)?;
                let key = self.node_key(id);
                let mut del = redis::cmd("DEL");
                del.arg(&key);
                self.run(&key, del, true, deadline, &mut contacted)?;
                id = node.right;
            }
            match below {
                Some(c) => level_start = c,
                None => break,
            }
        }
        for suffix in ["root", "next", "conf"] {
            let key = self.key(suffix);
            let mut del = redis::cmd("DEL");
            del.arg(&key);
            self.run(&key, del, true, deadline, &mut contacted)?;
        }
        Ok(())
    }

    /// Walks every level left to right and checks order, fences and the links between
    /// parents and children; returns the number of entries.
    fn walk_check(&self) -> Result<usize, DistError> {
        let deadline = self.deadline() + self.options.router.op_timeout * 10;
        let mut contacted = Vec::new();
        let root = self.read_root(deadline, &mut contacted)?;
        let mut level_ids = vec![root];
        let mut entries = 0;
        loop {
            let mut next_level = Vec::new();
            let mut prev_hi: Option<Vec<u8>> = Some(Vec::new());
            // Follow right links from the level's first node; they must cover the key space.
            let mut id = level_ids[0];
            let mut level = None;
            while id != 0 {
                let (_, node) = self.read_node(id, deadline, &mut contacted)?;
                if *level.get_or_insert(node.level) != node.level {
                    return Err(DistError::Corrupt(format!(
                        "baseline node {id}: level mismatch"
                    )));
                }
                if prev_hi.as_ref() != Some(&node.lo) {
                    return Err(DistError::Corrupt(format!(
                        "baseline node {id}: low fence differs from its left neighbour's high fence"
                    )));
                }
                if !node.keys.windows(2).all(|w| w[0] < w[1]) {
                    return Err(DistError::Corrupt(format!(
                        "baseline node {id}: keys out of order"
                    )));
                }
                let inside = |k: &Vec<u8>| *k >= node.lo && node.hi.as_ref().is_none_or(|h| k < h);
                if !node.keys.iter().all(inside) {
                    return Err(DistError::Corrupt(format!(
                        "baseline node {id}: key outside fences"
                    )));
                }
                if node.level == 0 {
                    entries += node.keys.len();
                } else {
                    for v in &node.vals {
                        if let Val::Child(c) = v {
                            next_level.push(*c);
                        }
                    }
                }
                prev_hi = node.hi.clone();
                id = node.right;
            }
            if prev_hi.is_some() {
                return Err(DistError::Corrupt(
                    "a baseline level does not end at +inf".into(),
                ));
            }
            if level == Some(0) || next_level.is_empty() {
                return Ok(entries);
            }
            level_ids = next_level;
        }
    }
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
        let (_, _, leaf) = self.descend(Some(stored), false, 0, deadline, &mut contacted)?;
        self.operations.fetch_add(1, Ordering::Relaxed);
        self.masters_contacted
            .fetch_add(contacted.len() as u64, Ordering::Relaxed);
        match leaf.keys.binary_search_by(|k| k.as_slice().cmp(stored)) {
            Ok(i) => match &leaf.vals[i] {
                Val::Tid(t) => codec::tid_of(&Value::BulkString(t.clone())).map(Some),
                Val::Child(_) => Err(DistError::Corrupt("a leaf with a child".into())),
            },
            Err(_) => Ok(None),
        }
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
        let tid = |v: &Val| match v {
            Val::Tid(t) => codec::tid_of(&Value::BulkString(t.clone())),
            Val::Child(_) => Err(DistError::Corrupt("a leaf with a child".into())),
        };
        match direction {
            Direction::Ascending => {
                let start: &[u8] = match &lower {
                    Bound::Included(b) | Bound::Excluded(b) => b,
                    Bound::Unbounded => &[],
                };
                let (_, _, mut leaf) =
                    self.descend(Some(start), false, 0, deadline, &mut contacted)?;
                'leaves: loop {
                    for (k, v) in leaf.keys.iter().zip(&leaf.vals) {
                        if !in_lower(k) {
                            continue;
                        }
                        if !in_upper(k) || visited == limit {
                            break 'leaves;
                        }
                        visit(k, tid(v)?);
                        visited += 1;
                    }
                    if leaf.right == 0 || visited == limit {
                        break;
                    }
                    leaf = self.read_node(leaf.right, deadline, &mut contacted)?.1;
                }
            }
            Direction::Descending => {
                let (mut key, mut strict): (Option<Vec<u8>>, bool) = match &upper {
                    Bound::Included(b) => (Some(b.clone()), false),
                    Bound::Excluded(b) => (Some(b.clone()), true),
                    Bound::Unbounded => (None, false),
                };
                'back: loop {
                    let (_, _, leaf) =
                        self.descend(key.as_deref(), strict, 0, deadline, &mut contacted)?;
                    for (k, v) in leaf.keys.iter().zip(&leaf.vals).rev() {
                        if !in_upper(k) {
                            continue;
                        }
                        if !in_lower(k) || visited == limit {
                            break 'back;
                        }
                        visit(k, tid(v)?);
                        visited += 1;
                    }
                    if leaf.lo.is_empty() || visited == limit {
                        break;
                    }
                    key = Some(leaf.lo.clone());
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

    fn index_memory(&self) -> MemoryUsage {
        MemoryUsage::default()
    }

    fn index_check(&self) -> Result<(), DistError> {
        self.walk_check().map(|_| ())
    }
}

index_via_stored_map!(BaselineIndex, IndexKind::DistBaseline);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip_through_messagepack() {
        let leaf = Node {
            level: 0,
            lo: b"a".to_vec(),
            hi: None,
            right: 7,
            keys: vec![b"a".to_vec(), b"b\xff\0".to_vec()],
            vals: vec![Val::Tid(vec![0; 8]), Val::Tid(vec![1; 8])],
            version: 3,
        };
        assert_eq!(Node::decode(&leaf.encode()).unwrap(), leaf);
        let inner = Node {
            level: 2,
            lo: Vec::new(),
            hi: Some(b"zz".to_vec()),
            right: 0,
            keys: vec![b"m".to_vec()],
            vals: vec![Val::Child(1), Val::Child(1 << 40)],
            version: 0,
        };
        assert_eq!(Node::decode(&inner.encode()).unwrap(), inner);
    }
}
