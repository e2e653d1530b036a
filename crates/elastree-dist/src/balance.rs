//! Elastic scaling and load balancing (the paper's sections 6 and 8): adapt the cut-off to
//! the number of masters (Algorithm 2: at least the target number of sub-trees per master,
//! the replicated top as small as possible), then move sub-trees until every master holds
//! about the same number.
//!
//! Lowering the cut-off under a sub-tree root turns the root's children into sub-tree roots:
//! `et_lower` marks the root LOWERED (remembering its children) and a compare-and-set on the
//! top replaces its entry by theirs; a client that meets the marker before the top changed
//! finishes that update itself. Moving a sub-tree re-tags it: `et_freeze` exports it and
//! makes it refuse writes (BUSY, which clients retry), `et_import` writes it under a fresh
//! tag whose slot the target master owns, `et_forward` leaves a forwarding marker in the old
//! place (clients that still route there follow it) and a compare-and-set points the top at
//! the new place. If the freeze expires first (the mover died or was too slow), the copy is
//! dropped and the sub-tree stays where it was.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::Value;

use crate::codec;
use crate::error::DistError;
use crate::index::{DistIndex, RootRef};
use crate::node::NodeView;
use crate::router::Request;
use crate::slots::slot_of;

/// What [`DistIndex::rebalance`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebalanceReport {
    /// Masters that own slots.
    pub masters: usize,
    /// Sub-trees before and after.
    pub subtrees_before: usize,
    /// Sub-trees after.
    pub subtrees_after: usize,
    /// Sub-tree roots the cut-off was lowered under.
    pub lowered: usize,
    /// Sub-trees moved to another master.
    pub moved: usize,
    /// Sub-trees per master after, by address.
    pub per_master: BTreeMap<String, usize>,
}

impl RebalanceReport {
    /// The largest relative deviation of a master's sub-tree count from the mean (0.0 when
    /// perfectly even).
    pub fn imbalance(&self) -> f64 {
        if self.per_master.is_empty() || self.subtrees_after == 0 {
            return 0.0;
        }
        let mean = self.subtrees_after as f64 / self.per_master.len() as f64;
        self.per_master
            .values()
            .map(|&n| (n as f64 - mean).abs() / mean)
            .fold(0.0, f64::max)
    }
}

/// How long a migration may keep a sub-tree frozen.
const FREEZE: Duration = Duration::from_secs(10);

impl DistIndex {
    /// Adapts the cut-off to the current masters and spreads the sub-trees evenly over
    /// them. Safe to run while other clients read and write (they see at most a short BUSY
    /// on a sub-tree being moved) and from several clients at once (every step is
    /// compare-and-set).
    pub fn rebalance(&self) -> Result<RebalanceReport, DistError> {
        let deadline = Instant::now() + self.options.router.op_timeout.max(Duration::from_secs(60));
        self.router.refresh_until(deadline)?;
        self.refresh_top(deadline)?;
        let masters = self.router.masters();
        let mut report = RebalanceReport {
            masters: masters.len(),
            subtrees_before: self.cached_top().entries.len(),
            ..RebalanceReport::default()
        };
        report.lowered = self.lower_cutoff(&masters, deadline)?;
        report.moved = self.spread(&masters, deadline)?;
        self.refresh_top(deadline)?;
        report.subtrees_after = self.cached_top().entries.len();
        report.per_master = self.cached_subtrees_per_master()?;
        Ok(report)
    }

    /// Sub-trees per master, by the slot of each sub-tree's tag (the top re-read first).
    pub fn subtrees_per_master(&self) -> Result<BTreeMap<String, usize>, DistError> {
        self.refresh_top(self.deadline())?;
        self.cached_subtrees_per_master()
    }

    /// Sub-trees per master by the cached top.
    fn cached_subtrees_per_master(&self) -> Result<BTreeMap<String, usize>, DistError> {
        let map = self.router.slot_map();
        let mut counts: BTreeMap<String, usize> =
            map.masters().into_iter().map(|m| (m, 0)).collect();
        for entry in &self.cached_top().entries {
            let tag = self.subtree_tag(entry.token);
            let owner = map.owner(slot_of(tag.as_bytes())).ok_or_else(|| {
                DistError::Unavailable(format!("no master owns the slot of {tag}"))
            })?;
            *counts.entry(owner.addr.clone()).or_default() += 1;
        }
        Ok(counts)
    }

    /// Entries per master: the entry counts of the tags whose slots each master owns.
    pub fn entries_per_master(&self) -> Result<BTreeMap<String, usize>, DistError> {
        let deadline = self.deadline();
        self.refresh_top(deadline)?;
        let map = self.router.slot_map();
        let mut entries: BTreeMap<String, usize> =
            map.masters().into_iter().map(|m| (m, 0)).collect();
        for token in self.cached_top().tokens() {
            let tag = self.subtree_tag(token);
            let owner = map.owner(slot_of(tag.as_bytes())).ok_or_else(|| {
                DistError::Unavailable(format!("no master owns the slot of {tag}"))
            })?;
            let count = codec::int(&self.call_tag("et_tag_count", token, &[], false, deadline)?)?;
            *entries.entry(owner.addr.clone()).or_default() += count.max(0) as usize;
        }
        Ok(entries)
    }

    /// Lowers the cut-off under sub-tree roots, round-robin over the masters holding the
    /// most sub-trees, until there are at least `subtrees_per_master` per master or no root
    /// has children left. Returns how many roots it lowered.
    fn lower_cutoff(&self, masters: &[String], deadline: Instant) -> Result<usize, DistError> {
        let target = self.options.subtrees_per_master * masters.len();
        let mut lowered = 0;
        let mut leaves: Vec<RootRef> = Vec::new();
        while self.cached_top().entries.len() < target {
            let counts = self.cached_subtrees_per_master()?;
            let map = self.router.slot_map();
            // The candidate: a non-leaf root on the master with the most sub-trees.
            let mut candidates: Vec<(usize, RootRef)> = self
                .cached_top()
                .entries
                .iter()
                .map(|e| RootRef {
                    token: e.token,
                    id: e.id,
                })
                .filter(|r| !leaves.contains(r))
                .map(|r| {
                    let tag = self.subtree_tag(r.token);
                    let owner = map
                        .owner(slot_of(tag.as_bytes()))
                        .map(|o| counts.get(&o.addr).copied().unwrap_or(0))
                        .unwrap_or(0);
                    (owner, r)
                })
                .collect();
            candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
            let Some(&(_, root)) = candidates.first() else {
                break;
            };
            let id = codec::root_arg(root.id);
            let reply = self.call_tag("et_lower", root.token, &[&id[..]], true, deadline)?;
            let reply = codec::Reply::parse(reply)?;
            match reply.status.as_str() {
                "LOWERED" => {
                    let children = codec::children(&reply.items, root.token)?;
                    self.replace_in_top(root, &children, deadline)?;
                    lowered += 1;
                }
                "LEAF" | "BUSY" => leaves.push(root),
                _ => self.refresh_top(deadline)?,
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Ok(lowered)
    }

    /// Moves sub-trees from the fullest master to the emptiest until their counts differ
    /// by at most one. Returns how many it moved.
    fn spread(&self, masters: &[String], deadline: Instant) -> Result<usize, DistError> {
        let mut moved = 0;
        let mut stuck: Vec<RootRef> = Vec::new();
        for _ in 0..self.cached_top().entries.len() * 2 + masters.len() {
            let counts = self.cached_subtrees_per_master()?;
            let (Some(most), Some(least)) = (
                counts.iter().max_by_key(|(_, &n)| n),
                counts.iter().min_by_key(|(_, &n)| n),
            ) else {
                break;
            };
            if most.1 - least.1 <= 1 {
                break;
            }
            let (from, to) = (most.0.clone(), least.0.clone());
            let map = self.router.slot_map();
            let Some(root) = self
                .cached_top()
                .entries
                .iter()
                .map(|e| RootRef {
                    token: e.token,
                    id: e.id,
                })
                .filter(|r| !stuck.contains(r))
                .find(|r| {
                    let tag = self.subtree_tag(r.token);
                    map.owner(slot_of(tag.as_bytes()))
                        .is_some_and(|o| o.addr == from)
                })
            else {
                break;
            };
            if self.migrate(root, &to, deadline)? {
                moved += 1;
            } else {
                stuck.push(root);
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Ok(moved)
    }

    /// Places a sub-tree that a split just created (in its sibling's tag): moves it to the
    /// master holding the fewest sub-trees when that is at least two fewer than its own, so
    /// the sub-trees spread over the masters as they appear, not only on `rebalance`.
    pub(crate) fn place_new_subtree(
        &self,
        root: RootRef,
        deadline: Instant,
    ) -> Result<(), DistError> {
        let counts = self.cached_subtrees_per_master()?;
        let map = self.router.slot_map();
        let tag = self.subtree_tag(root.token);
        let Some(here) = map.owner(slot_of(tag.as_bytes())).map(|o| o.addr.clone()) else {
            return Ok(());
        };
        let Some((least, &fewest)) = counts.iter().min_by_key(|(_, &n)| n) else {
            return Ok(());
        };
        if counts.get(&here).copied().unwrap_or(0) >= fewest + 2 {
            self.migrate(root, &least.clone(), deadline)?;
        }
        Ok(())
    }

    /// [`DistIndex::place_new_subtree`] after an insert that created a sub-tree: the insert
    /// has succeeded, so a failed move (a busy cluster, a racing rebalance) must not fail
    /// it; the sub-tree is correct where it is and a later `rebalance` moves it.
    pub(crate) fn try_place_new_subtree(&self, root: RootRef, deadline: Instant) {
        if self.place_new_subtree(root, deadline).is_err() {
            self.placement_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A fresh tag token whose slot the master `addr` owns.
    fn token_on(&self, addr: &str, deadline: Instant) -> Result<u64, DistError> {
        let t = self.top_tag();
        let map = self.router.slot_map();
        loop {
            let batch = 64u64;
            let n = batch.to_string();
            let cmd = codec::fcall("et_tokens", &format!("{t}:conf"), &[n.as_bytes()]);
            let (replies, _) =
                self.router
                    .run(slot_of(t.as_bytes()), &Request::write(vec![cmd]), deadline)?;
            let first = codec::u64_of(&replies[0])?;
            for token in first..first + batch {
                let tag = self.subtree_tag(token);
                if map
                    .owner(slot_of(tag.as_bytes()))
                    .is_some_and(|o| o.addr == addr)
                {
                    return Ok(token);
                }
            }
            if Instant::now() >= deadline {
                return Err(DistError::Unavailable(format!(
                    "found no tag on {addr} (does it own slots?)"
                )));
            }
        }
    }

    /// Moves the sub-tree `root` to master `to`. Returns false if it could not (busy, or
    /// the freeze expired) and left it in place.
    fn migrate(&self, root: RootRef, to: &str, deadline: Instant) -> Result<bool, DistError> {
        // The sub-tree's entry in the top, read before anything moves: once the forwarding
        // marker is in place, other threads of this client retarget their cached entry.
        let Some(lo) = self
            .cached_top()
            .entries
            .iter()
            .find(|e| e.token == root.token && e.id == root.id)
            .map(|e| e.lo.clone())
        else {
            return Ok(false);
        };
        let token = self.token_on(to, deadline)?;
        let id = codec::root_arg(root.id);
        let freeze_token = format!("mig-{}-{}", std::process::id(), token);
        let ttl = FREEZE.as_millis().to_string();
        let exported = self.call_tag(
            "et_freeze",
            root.token,
            &[&id[..], freeze_token.as_bytes(), ttl.as_bytes()],
            true,
            deadline,
        )?;
        let Value::Array(parts) = &exported else {
            return Err(DistError::Corrupt(format!("et_freeze reply {exported:?}")));
        };
        if codec::bytes_of(parts.first().unwrap_or(&Value::Nil))? != b"OK" {
            return Ok(false);
        }
        // Import {count, id1, blob1, ...} under the new tag.
        let nodes: Vec<Vec<u8>> = parts[1..]
            .iter()
            .map(codec::bytes_of)
            .collect::<Result<_, _>>()?;
        // The copy cuts right links that leave the sub-tree, and a sibling that a split of
        // this root created but whose post to the top failed is reachable only through that
        // link: post it first (idempotent), or its keys would be lost to every reader.
        if let Some(root_bytes) = nodes.get(2) {
            self.post_unposted_sibling(root, root_bytes, deadline)?;
        }
        let node_refs: Vec<&[u8]> = nodes.iter().map(Vec::as_slice).collect();
        let moved = RootRef { token, id: root.id };
        if let Err(e) = self.call_tag("et_import", token, &node_refs, true, deadline) {
            // Give the sub-tree back to its writers now rather than when the freeze expires,
            // and remove whatever part of the copy landed (both best effort).
            let _ = self.drop_subtree(moved, deadline);
            let _ = self.call_tag(
                "et_unfreeze",
                root.token,
                &[&id[..], freeze_token.as_bytes()],
                true,
                deadline,
            );
            return Err(e);
        }
        let token_s = token.to_string();
        let forwarded = self.call_tag(
            "et_forward",
            root.token,
            &[&id[..], freeze_token.as_bytes(), token_s.as_bytes()],
            true,
            deadline,
        )?;
        if codec::bytes_of(&forwarded)? != b"OK" {
            // The freeze expired: drop the copy, leave the sub-tree where it is.
            self.drop_subtree(moved, deadline)?;
            return Ok(false);
        }
        // Point the top at the new place (the old one forwards meanwhile).
        self.set_top_entry(&lo, root, moved, deadline)?;
        Ok(true)
    }

    /// If the (frozen) sub-tree root `root`, stored as `bytes`, has a finite high fence that
    /// no top entry starts at, its right link leads to a sibling sub-tree whose post never
    /// reached the top: posts it.
    fn post_unposted_sibling(
        &self,
        root: RootRef,
        bytes: &[u8],
        deadline: Instant,
    ) -> Result<(), DistError> {
        let view = NodeView::parse(bytes)?;
        let Some(high) = view.high() else {
            return Ok(());
        };
        self.refresh_top(deadline)?;
        if self.cached_top().entries.iter().any(|e| e.lo == high) {
            return Ok(());
        }
        if view.right() == 0 {
            return Err(DistError::Corrupt(format!(
                "sub-tree {}:{} ends at {high:?} but neither the top nor a right link goes on",
                root.token, root.id
            )));
        }
        let sibling = RootRef {
            token: root.token,
            id: u64::from(view.right()),
        };
        self.post(high, sibling, deadline)
    }

    /// Moves the sub-tree covering `key` to the master at `to` ("host:port", one that owns
    /// slots), e.g. to drain a master before it leaves. Returns false if it could not (the
    /// sub-tree is being moved or changed by someone else; try again) or it is there already.
    pub fn move_subtree(&self, key: &[u8], to: &str) -> Result<bool, DistError> {
        let deadline = Instant::now() + self.options.router.op_timeout.max(Duration::from_secs(60));
        self.router.refresh_until(deadline)?;
        if !self.router.masters().iter().any(|m| m == to) {
            return Err(DistError::Invalid(format!(
                "{to} is not a master that owns slots"
            )));
        }
        self.refresh_top(deadline)?;
        let top = self.cached_top();
        let Some(entry) = top.entries.get(top.covering(key)) else {
            return Err(DistError::Invalid("the index has no sub-tree".into()));
        };
        let root = RootRef {
            token: entry.token,
            id: entry.id,
        };
        let here = self
            .router
            .slot_map()
            .owner(slot_of(self.subtree_tag(root.token).as_bytes()))
            .map(|o| o.addr.clone());
        if here.as_deref() == Some(to) {
            return Ok(false);
        }
        self.migrate(root, to, deadline)
    }

    /// Compare-and-set of one top entry from `from` to `to`, then a re-read of the top.
    fn set_top_entry(
        &self,
        lo: &[u8],
        from: RootRef,
        to: RootRef,
        deadline: Instant,
    ) -> Result<(), DistError> {
        let old = codec::root_ref(from);
        let new = codec::root_ref(to);
        let reply = self.change_top(
            "et_top_cas",
            &[lo, old.as_bytes(), new.as_bytes()],
            deadline,
        )?;
        if codec::bytes_of(&reply)? == b"CONFLICT" {
            // Nothing else changes the entry of a frozen root; a conflict means the top no
            // longer holds `from` there, and the forwarding marker keeps every route right.
            return Err(DistError::Corrupt(format!(
                "the top entry {lo:?} no longer names the moved sub-tree {}:{}",
                from.token, from.id
            )));
        }
        Ok(())
    }
}
