//! Waiting for health: every live node says `cluster_state:ok`, agrees which master owns
//! which slot, every slot has a live master, and (while building) every replica's link is up.

use std::collections::{BTreeMap, BTreeSet};
use std::thread::sleep;
use std::time::Instant;

use super::probe::{command, info_field, parse_nodes, query_node, SlotOwners, ViewEntry};
use super::process::process_alive;
use super::{LocalCluster, Role, CLUSTER_SLOTS, POLL};
use crate::error::DistError;

impl LocalCluster {
    /// Polls `check` until it returns `Ok(None)` (healthy) or the deadline passes; the
    /// error then says what `check` last found wrong.
    pub(super) fn wait(
        &self,
        deadline: Instant,
        what: &str,
        check: impl Fn(&Self) -> Result<Option<String>, DistError>,
    ) -> Result<(), DistError> {
        loop {
            let problem = match check(self) {
                Ok(None) => return Ok(()),
                Ok(Some(p)) => p,
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(DistError::Unavailable(format!(
                    "gave up waiting for {what}: {problem}"
                )));
            }
            sleep(POLL);
        }
    }

    /// `None` when every live node reports `cluster_state:ok`, all of them agree which
    /// master owns which slot, every slot is owned by a live master, and (if given)
    /// `masters` masters own slots; with `links`, also every replica's link to its master
    /// is up and every node knows every node. Otherwise what is not yet so.
    pub(super) fn agreement(
        &self,
        masters: Option<usize>,
        links: bool,
    ) -> Result<Option<String>, DistError> {
        let mut first: Option<(u16, SlotOwners)> = None;
        for rec in self.state.nodes.iter().filter(|n| n.alive) {
            if !process_alive(rec.pid, rec.port) {
                continue;
            }
            let (state, view) = match query_node(rec.port) {
                Ok(v) => v,
                Err(e) => return Ok(Some(format!("node {}: {e}", rec.port))),
            };
            if state != "ok" {
                return Ok(Some(format!(
                    "node {} says cluster_state:{state}",
                    rec.port
                )));
            }
            if view.iter().any(|e| e.handshake) {
                return Ok(Some(format!("node {} is still in a handshake", rec.port)));
            }
            let mut owners = BTreeMap::new();
            let mut covered = 0;
            for e in view.iter().filter(|e| e.is_master && e.slots > 0) {
                if e.failed || !self.node_alive(e.port) {
                    return Ok(Some(format!(
                        "node {} still sees the dead master {} owning slots",
                        rec.port, e.port
                    )));
                }
                for &r in &e.ranges {
                    covered += usize::from(r.1 - r.0) + 1;
                    owners.insert(r, e.id.clone());
                }
            }
            if covered != CLUSTER_SLOTS {
                return Ok(Some(format!(
                    "node {} sees {covered} of {CLUSTER_SLOTS} slots owned",
                    rec.port
                )));
            }
            let owner_count = owners.values().collect::<BTreeSet<_>>().len();
            if let Some(m) = masters {
                if owner_count != m {
                    return Ok(Some(format!(
                        "node {} sees {owner_count} masters owning slots, expected {m}",
                        rec.port
                    )));
                }
            }
            if links {
                if let Some(me) = view.iter().find(|e| e.myself) {
                    if !me.is_master {
                        let info: String =
                            command(rec.port, redis::cmd("INFO").arg("replication"))?;
                        if info_field(&info, "master_link_status") != Some("up") {
                            return Ok(Some(format!(
                                "replica {}'s link to its master is not up yet",
                                rec.port
                            )));
                        }
                    }
                }
                let known = view.len();
                let expected = self.state.nodes.len();
                if known != expected {
                    return Ok(Some(format!(
                        "node {} knows {known} nodes, expected {expected}",
                        rec.port
                    )));
                }
            }
            match &first {
                None => first = Some((rec.port, owners)),
                Some((port, o)) if *o != owners => {
                    return Ok(Some(format!(
                        "nodes {port} and {} disagree about the slot owners",
                        rec.port
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(if first.is_none() {
            Some("no node is alive".into())
        } else {
            None
        })
    }

    /// The CLUSTER NODES view of the first live node that answers.
    pub(super) fn any_view(&self) -> Result<Vec<ViewEntry>, DistError> {
        let mut last = None;
        for rec in self.state.nodes.iter().filter(|n| n.alive) {
            if !process_alive(rec.pid, rec.port) {
                continue;
            }
            match command::<String>(rec.port, redis::cmd("CLUSTER").arg("NODES")) {
                Ok(text) => return Ok(parse_nodes(&text)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            DistError::Unavailable(format!("no node of {} is alive", self.dir.display()))
        }))
    }

    /// Records the roles the nodes report now (after create, rebalance).
    pub(super) fn refresh_roles(&mut self) {
        if let Ok(view) = self.any_view() {
            for n in &mut self.state.nodes {
                if let Some(e) = view.iter().find(|e| e.port == n.port) {
                    n.role = if e.is_master {
                        Role::Master
                    } else {
                        Role::Replica
                    };
                    if n.node_id.is_empty() {
                        n.node_id = e.id.clone();
                    }
                }
            }
        }
    }
}
