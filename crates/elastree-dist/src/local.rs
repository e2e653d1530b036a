//! A local Redis Cluster for trying and testing the distributed index.
//!
//! [`LocalCluster::up`] starts `masters * (1 + replicas)` `redis-server` processes on
//! 127.0.0.1, joins them with `redis-cli --cluster create` and waits until every node agrees
//! the cluster is healthy. It records the ports, PIDs, roles and node ids in
//! `DIR/cluster.json`, so another process (the `elastree cluster` subcommands) can
//! [`open`](LocalCluster::open) the same cluster to inspect, grow, break or stop it.
//!
//! Only processes this module started are ever signalled: every signal goes to a recorded
//! PID, and only after `/proc/PID/cmdline` shows a `redis-server` serving the recorded port
//! (so a PID reused by another program, or another engineer's Redis, is left alone).
//!
//! Every network call has a connect and a response timeout, and every wait has a deadline:
//! nothing here hangs on a dead node.
//!
//! This file holds the public API and the state file; `start` starts nodes and runs
//! `redis-cli --cluster`, `health` decides when the nodes agree the cluster is healthy,
//! `probe` asks one node (CLUSTER NODES, CLUSTER INFO), and `process` finds free ports and
//! checks and signals PIDs.

mod health;
mod probe;
mod process;
mod reaper;
mod start;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::error::DistError;
use probe::query_node;
pub use process::process_alive;
use process::{
    port_free, release_ports, require_programs, reserve_ports, signal, try_reserve, wait_gone,
};
use reaper::Reaper;

/// The number of hash slots of a Redis Cluster.
pub const CLUSTER_SLOTS: usize = 16384;

/// Redis Cluster's bus port is the client port plus this offset, so both must be free.
pub(crate) const BUS_PORT_OFFSET: u16 = 10000;

/// How long a `redis-cli --cluster` command may run (create and rebalance move at most a
/// few thousand keys on a test cluster; they take seconds).
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a started node may take to answer PING (a second when the machine is idle; the
/// deadline only matters on one whose cores are busy elsewhere).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Between SIGTERM and SIGKILL in [`LocalCluster::down`].
const TERM_GRACE: Duration = Duration::from_secs(2);
/// Pause between two polls of a wait loop.
const POLL: Duration = Duration::from_millis(100);

/// The name of the state file in the cluster's directory.
const STATE_FILE: &str = "cluster.json";

/// What a local cluster should look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Masters that own hash slots; at least 3 (`redis-cli --cluster create` requires 3).
    pub masters: usize,
    /// Replicas per master, 0 to 2.
    pub replicas: usize,
    /// Where each node's `redis.conf`, data and log go (`DIR/PORT/`), and the state file
    /// `DIR/cluster.json`. Created if missing; must not hold an earlier cluster's data.
    pub dir: PathBuf,
    /// The first node's port (the others follow consecutively), or `None` to pick free
    /// consecutive ports automatically, so that parallel tests never collide.
    pub base_port: Option<u16>,
    /// `cluster-node-timeout`: how long a node may be unreachable before its replica takes
    /// over, in milliseconds.
    pub node_timeout_ms: u64,
    /// How long [`LocalCluster::up`] and [`LocalCluster::add_master`] wait for every node
    /// to agree the cluster is healthy before giving up, in milliseconds.
    pub ready_timeout_ms: u64,
}

/// Makes each default directory unique within the process.
static DIR_COUNTER: AtomicU32 = AtomicU32::new(0);

impl Default for ClusterSpec {
    /// 3 masters with 1 replica each on automatically chosen ports, in a fresh directory
    /// under the system's temporary directory, node timeout 2 s, ready timeout 30 s.
    fn default() -> Self {
        let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
        ClusterSpec {
            masters: 3,
            replicas: 1,
            dir: std::env::temp_dir().join(format!("elastree-cluster-{}-{n}", std::process::id())),
            base_port: None,
            node_timeout_ms: 2000,
            ready_timeout_ms: 30_000,
        }
    }
}

impl ClusterSpec {
    /// Checks that `redis-cli --cluster create` can build this cluster and that its ports
    /// fit; returns [`DistError::Invalid`] saying what is wrong.
    pub fn validate(&self) -> Result<(), DistError> {
        if self.masters < 3 {
            return Err(DistError::Invalid(format!(
                "a Redis Cluster needs at least 3 masters (redis-cli --cluster create refuses \
                 fewer), got {}",
                self.masters
            )));
        }
        if self.replicas > 2 {
            return Err(DistError::Invalid(format!(
                "replicas per master must be 0, 1 or 2, got {}",
                self.replicas
            )));
        }
        if self.node_timeout_ms == 0 {
            return Err(DistError::Invalid(
                "the node timeout must be at least 1 ms".into(),
            ));
        }
        if let Some(base) = self.base_port {
            let last = u32::from(base) + self.node_count() as u32 - 1;
            if base == 0 || last + u32::from(BUS_PORT_OFFSET) > u32::from(u16::MAX) {
                return Err(DistError::Invalid(format!(
                    "ports {base}..={last} do not fit: each node also needs its port + \
                     {BUS_PORT_OFFSET} for the cluster bus, at most {}",
                    u16::MAX
                )));
            }
        }
        Ok(())
    }

    /// The number of nodes: `masters * (1 + replicas)`.
    pub fn node_count(&self) -> usize {
        self.masters * (1 + self.replicas)
    }
}

/// A node's role in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Owns hash slots (or is a master waiting for slots).
    Master,
    /// Copies a master and takes over when it fails.
    Replica,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Master => "master",
            Role::Replica => "replica",
        })
    }
}

/// One node as recorded in the state file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct NodeRecord {
    port: u16,
    pid: u32,
    /// The role when the state file was last written (failover changes it; ask the
    /// cluster for the current one).
    role: Role,
    node_id: String,
    /// False once [`LocalCluster::kill`] killed it.
    alive: bool,
}

/// The state file `DIR/cluster.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    node_timeout_ms: u64,
    ready_timeout_ms: u64,
    nodes: Vec<NodeRecord>,
}

/// The state of one node, as reported by [`LocalCluster::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The client port on 127.0.0.1.
    pub port: u16,
    /// The process id of the `redis-server` serving the port.
    pub pid: u32,
    /// Whether that process is running.
    pub alive: bool,
    /// The role the node reports itself (the last recorded role if it is dead).
    pub role: Role,
    /// How many hash slots it owns (0 for replicas and for dead nodes).
    pub slots: usize,
    /// For a replica: the port of its master.
    pub master: Option<u16>,
    /// The node's cluster id (40 hex characters).
    pub node_id: String,
    /// What the node says in `cluster_state` of CLUSTER INFO (`ok`, `fail`), or `down`
    /// for a dead or unreachable node.
    pub cluster_state: String,
}

/// The state of a local cluster: one line per node and the overall cluster state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// Every node the cluster was built with, in port order.
    pub nodes: Vec<NodeStatus>,
    /// `ok` when every live node reports `cluster_state:ok`; otherwise the first other
    /// state a live node reports, or `down` if no node is alive.
    pub cluster_state: String,
}

impl ClusterStatus {
    /// True when the cluster state is `ok`.
    pub fn is_ok(&self) -> bool {
        self.cluster_state == "ok"
    }

    /// The number of nodes whose process is running.
    pub fn alive(&self) -> usize {
        self.nodes.iter().filter(|n| n.alive).count()
    }
}

impl fmt::Display for ClusterStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<6} {:<8} {:<6} {:<8} {:>6}  {:<7} {:<6} NODE ID",
            "PORT", "PID", "ALIVE", "ROLE", "SLOTS", "MASTER", "STATE"
        )?;
        for n in &self.nodes {
            let master = n.master.map_or_else(|| "-".to_string(), |p| p.to_string());
            writeln!(
                f,
                "{:<6} {:<8} {:<6} {:<8} {:>6}  {:<7} {:<6} {}",
                n.port,
                n.pid,
                if n.alive { "yes" } else { "no" },
                n.role,
                n.slots,
                master,
                n.cluster_state,
                n.node_id.get(..8).unwrap_or(&n.node_id),
            )?;
        }
        let owners = self.nodes.iter().filter(|n| n.alive && n.slots > 0).count();
        write!(
            f,
            "cluster_state: {} ({} nodes, {} alive, {} masters own slots)",
            self.cluster_state,
            self.nodes.len(),
            self.alive(),
            owners
        )
    }
}

/// A Redis Cluster of local `redis-server` processes started by [`LocalCluster::up`] (or
/// reopened from its directory by [`LocalCluster::open`]).
#[derive(Debug)]
pub struct LocalCluster {
    dir: PathBuf,
    state: State,
    /// True for a cluster started by `up` in this process.
    started_here: bool,
    /// Stop the processes and delete the directory on drop (only if `started_here`).
    remove_on_drop: bool,
    /// With `remove_on_drop`: the process that removes the cluster if this one exits
    /// without dropping it.
    reaper: Option<Reaper>,
}

impl LocalCluster {
    /// Starts a cluster as `spec` describes and waits until it is healthy: every node
    /// reports `cluster_state:ok`, every replica's link to its master is up, and every node
    /// agrees which masters own which slots. On any failure the processes it started are
    /// killed before the error is returned.
    pub fn up(spec: &ClusterSpec) -> Result<LocalCluster, DistError> {
        spec.validate()?;
        require_programs()?;
        fs::create_dir_all(&spec.dir)?;
        let dir = fs::canonicalize(&spec.dir)?;
        refuse_existing(&dir)?;
        let ready_timeout = Duration::from_millis(spec.ready_timeout_ms);
        // Auto ports can be taken between our check and Redis's bind (by another process);
        // then start over on other ports, a few times.
        let attempts = if spec.base_port.is_some() { 1 } else { 4 };
        let mut last_err = None;
        for _ in 0..attempts {
            let ports = match spec.base_port {
                Some(base) => {
                    let ports: Vec<u16> = (0..spec.node_count() as u16).map(|i| base + i).collect();
                    // Say which port is busy before starting anything.
                    if let Some(p) = ports
                        .iter()
                        .find(|&&p| !port_free(p) || !port_free(p + BUS_PORT_OFFSET))
                    {
                        return Err(DistError::Local(format!(
                            "port {p} or its cluster bus port {} is in use (another Redis?); \
                             choose other ports (elastree cluster up --base-port PORT)",
                            u32::from(*p) + u32::from(BUS_PORT_OFFSET)
                        )));
                    }
                    ports
                }
                None => reserve_ports(spec.node_count())?,
            };
            let mut cluster = LocalCluster {
                dir: dir.clone(),
                state: State {
                    node_timeout_ms: spec.node_timeout_ms,
                    ready_timeout_ms: spec.ready_timeout_ms,
                    nodes: Vec::new(),
                },
                started_here: true,
                remove_on_drop: false,
                reaper: None,
            };
            match cluster.start_nodes(&ports) {
                Ok(()) => {}
                Err(StartError::PortTaken(e)) if spec.base_port.is_none() => {
                    cluster.kill_all_started();
                    remove_node_dirs(&dir, &ports);
                    release_ports(&ports);
                    last_err = Some(e);
                    continue;
                }
                Err(StartError::PortTaken(e)) => {
                    // Nothing worth keeping: the logs only say the port was taken.
                    cluster.kill_all_started();
                    remove_node_dirs(&dir, &ports);
                    return Err(e);
                }
                Err(StartError::Other(e)) => {
                    cluster.kill_all_started();
                    release_ports(&ports);
                    return Err(e);
                }
            }
            let created = cluster.create(spec, ready_timeout);
            release_ports(&ports);
            return match created {
                Ok(()) => Ok(cluster),
                Err(e) => {
                    cluster.kill_all_started();
                    let _ = fs::remove_file(dir.join(STATE_FILE));
                    Err(e)
                }
            };
        }
        Err(last_err.unwrap_or_else(|| DistError::Local("no free ports found".into())))
    }

    /// Opens the cluster whose state file is in `dir` (written by [`up`](Self::up) in this
    /// or another process). Dropping the result never stops the cluster.
    pub fn open(dir: &Path) -> Result<LocalCluster, DistError> {
        let dir = fs::canonicalize(dir)
            .map_err(|e| DistError::Local(format!("no cluster in {}: {e}", dir.display())))?;
        let path = dir.join(STATE_FILE);
        let text = fs::read_to_string(&path).map_err(|e| {
            DistError::Local(format!(
                "no cluster in {} (cannot read {}: {e})",
                dir.display(),
                path.display()
            ))
        })?;
        let state: State = serde_json::from_str(&text)
            .map_err(|e| DistError::Local(format!("{} is damaged: {e}", path.display())))?;
        Ok(LocalCluster {
            dir,
            state,
            started_here: false,
            remove_on_drop: false,
            reaper: None,
        })
    }

    /// When `yes`, dropping this cluster (also while a test panics) kills its processes and
    /// deletes its directory, and so does the end of this process if the cluster is never
    /// dropped (one kept in a `static`, an abort, a kill signal): a small reaper process
    /// waits for it. Only a cluster started by [`up`](Self::up) in this process honours it;
    /// an [`open`](Self::open)ed one is never stopped by a drop.
    pub fn set_remove_on_drop(&mut self, yes: bool) -> Result<(), DistError> {
        if yes && self.started_here && self.reaper.is_none() {
            self.reaper = Some(Reaper::watch(&self.dir)?);
        } else if !yes {
            if let Some(reaper) = self.reaper.take() {
                reaper.disarm();
            }
        }
        self.remove_on_drop = yes;
        Ok(())
    }

    /// The cluster's directory (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The client ports of every node it was built with, dead ones included, ascending.
    pub fn ports(&self) -> Vec<u16> {
        self.state.nodes.iter().map(|n| n.port).collect()
    }

    /// The PID of the node on `port`, if the cluster has one there.
    pub fn pid(&self, port: u16) -> Option<u32> {
        self.node(port).map(|n| n.pid)
    }

    /// `127.0.0.1:PORT` of a live master, to hand to a cluster client. Falls back to any
    /// live node (a cluster client finds the masters from there), then to the first port.
    pub fn seed(&self) -> String {
        let port = self
            .masters()
            .ok()
            .and_then(|m| m.first().copied())
            .or_else(|| {
                self.state
                    .nodes
                    .iter()
                    .find(|n| n.alive && process_alive(n.pid, n.port))
                    .map(|n| n.port)
            })
            .or_else(|| self.state.nodes.first().map(|n| n.port))
            .unwrap_or(0);
        format!("127.0.0.1:{port}")
    }

    /// The ports of the live masters that own slots, ascending, as the cluster itself says
    /// (failover changes who the masters are).
    pub fn masters(&self) -> Result<Vec<u16>, DistError> {
        let view = self.any_view()?;
        let mut ports: Vec<u16> = view
            .iter()
            .filter(|e| e.is_master && !e.failed && e.slots > 0)
            .map(|e| e.port)
            .filter(|&p| self.node_alive(p))
            .collect();
        ports.sort_unstable();
        Ok(ports)
    }

    /// Every node's process state, role, slots and master, and the overall cluster state.
    pub fn status(&self) -> Result<ClusterStatus, DistError> {
        let mut ids: BTreeMap<String, u16> = BTreeMap::new();
        let mut selves = Vec::new();
        for rec in &self.state.nodes {
            let alive = rec.alive && process_alive(rec.pid, rec.port);
            let me = if alive {
                query_node(rec.port).ok()
            } else {
                None
            };
            if let Some((_, view)) = &me {
                for e in view {
                    ids.insert(e.id.clone(), e.port);
                }
            }
            selves.push((rec, alive, me));
        }
        let mut nodes = Vec::new();
        let mut overall: Option<String> = None;
        for (rec, alive, me) in selves {
            let mut st = NodeStatus {
                port: rec.port,
                pid: rec.pid,
                alive,
                role: rec.role,
                slots: 0,
                master: None,
                node_id: rec.node_id.clone(),
                cluster_state: "down".into(),
            };
            if let Some((state, view)) = me {
                if let Some(myself) = view.iter().find(|e| e.myself) {
                    st.role = if myself.is_master {
                        Role::Master
                    } else {
                        Role::Replica
                    };
                    st.slots = myself.slots;
                    st.master = myself.master.as_ref().and_then(|m| ids.get(m).copied());
                    st.node_id = myself.id.clone();
                }
                // The first live node's state, unless a later one reports something else.
                if overall.as_deref().is_none_or(|o| o == "ok") {
                    overall = Some(state.clone());
                }
                st.cluster_state = state;
            } else if alive {
                st.cluster_state = "unreachable".into();
                if overall.as_deref().is_none_or(|o| o == "ok") {
                    overall = Some("unreachable".into());
                }
            }
            nodes.push(st);
        }
        Ok(ClusterStatus {
            nodes,
            cluster_state: overall.unwrap_or_else(|| "down".into()),
        })
    }

    /// Starts one more node, adds it to the cluster as an empty master, moves a fair share
    /// of the slots (and their keys) to it with `redis-cli --cluster rebalance
    /// --cluster-use-empty-masters`, and waits until every node agrees. Returns its port.
    pub fn add_master(&mut self) -> Result<u16, DistError> {
        require_programs()?;
        let expected = self.masters()?.len() + 1;
        let port = self.free_port_after()?;
        match self.start_nodes(&[port]) {
            Ok(()) => {}
            Err(StartError::PortTaken(e) | StartError::Other(e)) => {
                self.kill_port(port);
                return Err(e);
            }
        }
        release_ports(&[port]);
        let seed = self.seed();
        // Each wait gets the whole ready timeout from its own start: the rebalance between
        // them moves keys and may take a while on a busy machine.
        let ready = Duration::from_millis(self.state.ready_timeout_ms);
        let new = format!("127.0.0.1:{port}");
        self.tool(
            "add-node",
            &["--cluster", "add-node", &new, &seed, "--cluster-yes"],
        )?;
        // `rebalance` refuses to run until every node knows the new one.
        self.wait(
            Instant::now() + ready,
            "every node to know the new node",
            |c| c.agreement(None, true),
        )?;
        self.tool(
            "rebalance",
            &[
                "--cluster",
                "rebalance",
                &seed,
                "--cluster-use-empty-masters",
                "--cluster-yes",
            ],
        )?;
        self.wait(
            Instant::now() + ready,
            "the rebalanced cluster to settle",
            |c| c.agreement(Some(expected), true),
        )?;
        self.refresh_roles();
        self.save()?;
        Ok(port)
    }

    /// Kills the node on `port` with SIGKILL (a crash, not a shutdown) and marks it dead in
    /// the state file. Refuses a port the cluster does not have, and a PID that no longer
    /// belongs to the `redis-server` it started.
    pub fn kill(&mut self, port: u16) -> Result<(), DistError> {
        let rec = self
            .node(port)
            .ok_or_else(|| {
                DistError::Invalid(format!(
                    "the cluster in {} has no node on port {port} (its ports: {:?})",
                    self.dir.display(),
                    self.ports()
                ))
            })?
            .clone();
        if !rec.alive || !process_alive(rec.pid, port) {
            self.mark_dead(port);
            self.save()?;
            return Err(DistError::Local(format!(
                "the node on port {port} (pid {}) is not running",
                rec.pid
            )));
        }
        signal(rec.pid, Signal::SIGKILL)?;
        wait_gone(rec.pid, port, Duration::from_secs(5));
        self.mark_dead(port);
        self.save()
    }

    /// Waits until every live node reports `cluster_state:ok`, every slot is owned by a
    /// live master, and the live nodes agree which master owns which slot: what a replica's
    /// promotion after [`kill`](Self::kill) leads to. [`DistError::Unavailable`] if that
    /// does not happen within `deadline`.
    pub fn wait_for_failover(&self, deadline: Duration) -> Result<(), DistError> {
        self.wait(Instant::now() + deadline, "failover", |c| {
            c.agreement(None, false)
        })
    }

    /// Stops every process this cluster started: SIGTERM, then SIGKILL for those still
    /// running after 2 s. Removes the state file and keeps the data directory (node logs,
    /// append-only files).
    pub fn down(self) -> Result<(), DistError> {
        self.down_with(false)
    }

    /// [`down`](Self::down), and with `remove_data` also deletes the cluster's directory.
    pub fn down_with(mut self, remove_data: bool) -> Result<(), DistError> {
        // Drop and the reaper must not act again (the data may be kept).
        self.remove_on_drop = false;
        if let Some(reaper) = self.reaper.take() {
            reaper.disarm();
        }
        let live: Vec<(u32, u16)> = self
            .state
            .nodes
            .iter()
            .filter(|n| process_alive(n.pid, n.port))
            .map(|n| (n.pid, n.port))
            .collect();
        for &(pid, _) in &live {
            // A node that exits between the check and the signal is fine.
            let _ = signal(pid, Signal::SIGTERM);
        }
        let grace = Instant::now() + TERM_GRACE;
        while Instant::now() < grace && live.iter().any(|&(p, port)| process_alive(p, port)) {
            sleep(POLL);
        }
        for &(pid, port) in &live {
            if process_alive(pid, port) {
                let _ = signal(pid, Signal::SIGKILL);
            }
        }
        let mut stuck = Vec::new();
        for &(pid, port) in &live {
            if !wait_gone(pid, port, Duration::from_secs(5)) {
                stuck.push(pid);
            }
        }
        if !stuck.is_empty() {
            return Err(DistError::Local(format!(
                "processes {stuck:?} did not exit after SIGKILL"
            )));
        }
        for n in &mut self.state.nodes {
            n.alive = false;
        }
        match fs::remove_file(self.dir.join(STATE_FILE)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        if remove_data {
            fs::remove_dir_all(&self.dir)?;
        }
        Ok(())
    }

    // ---- processes and the state file --------------------------------------------------

    fn node(&self, port: u16) -> Option<&NodeRecord> {
        self.state.nodes.iter().find(|n| n.port == port)
    }

    fn node_alive(&self, port: u16) -> bool {
        self.node(port)
            .is_some_and(|n| n.alive && process_alive(n.pid, n.port))
    }

    fn mark_dead(&mut self, port: u16) {
        if let Some(n) = self.state.nodes.iter_mut().find(|n| n.port == port) {
            n.alive = false;
        }
    }

    /// SIGKILLs the node recorded on `port`, if it is still ours, and forgets it.
    fn kill_port(&mut self, port: u16) {
        if let Some(n) = self.node(port) {
            if process_alive(n.pid, n.port) {
                let _ = signal(n.pid, Signal::SIGKILL);
                wait_gone(n.pid, n.port, Duration::from_secs(5));
            }
        }
        self.state.nodes.retain(|n| n.port != port);
        let _ = self.save();
    }

    /// SIGKILLs every node this cluster recorded (cleanup after a failed start) and every
    /// node whose PID file appeared but was not recorded yet.
    fn kill_all_started(&mut self) {
        let mut pids: Vec<(u32, u16)> = self.state.nodes.iter().map(|n| (n.pid, n.port)).collect();
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let Some(port) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u16>().ok())
                else {
                    continue;
                };
                if let Some(pid) = fs::read_to_string(entry.path().join("redis.pid"))
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                {
                    pids.push((pid, port));
                }
            }
        }
        for &(pid, port) in &pids {
            if process_alive(pid, port) {
                let _ = signal(pid, Signal::SIGKILL);
            }
        }
        for &(pid, port) in &pids {
            wait_gone(pid, port, Duration::from_secs(5));
        }
        for n in &mut self.state.nodes {
            n.alive = false;
        }
    }

    /// A free port for one more node: the port after the highest one if it is free, else
    /// an automatically chosen one.
    fn free_port_after(&self) -> Result<u16, DistError> {
        let next = self.state.nodes.iter().map(|n| n.port).max().unwrap_or(0);
        if let Some(p) = next.checked_add(1) {
            if u32::from(p) + u32::from(BUS_PORT_OFFSET) <= u32::from(u16::MAX)
                && !self.state.nodes.iter().any(|n| n.port == p)
                && try_reserve(p)
            {
                return Ok(p);
            }
        }
        Ok(reserve_ports(1)?[0])
    }

    /// Writes the state file (to a temporary file first, then renames it, so that a reader
    /// never sees half of it).
    fn save(&self) -> Result<(), DistError> {
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|e| DistError::Local(format!("cannot encode the state file: {e}")))?;
        let tmp = self.dir.join(format!("{STATE_FILE}.tmp"));
        fs::write(&tmp, text)?;
        fs::rename(&tmp, self.dir.join(STATE_FILE))?;
        Ok(())
    }
}

impl Drop for LocalCluster {
    /// With [`set_remove_on_drop`](LocalCluster::set_remove_on_drop) on a cluster started
    /// in this process: kills its processes (SIGKILL, no grace: this is cleanup, possibly
    /// during a panic) and deletes its directory.
    fn drop(&mut self) {
        if self.started_here && self.remove_on_drop {
            self.kill_all_started();
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Why starting nodes failed: a port collision (worth retrying on other ports) or not.
enum StartError {
    PortTaken(DistError),
    Other(DistError),
}

/// Refuses a directory that holds a running cluster or an earlier cluster's node data
/// (`redis-cli --cluster create` would refuse those nodes as not empty).
fn refuse_existing(dir: &Path) -> Result<(), DistError> {
    if let Ok(old) = LocalCluster::open(dir) {
        if old.state.nodes.iter().any(|n| process_alive(n.pid, n.port)) {
            return Err(DistError::Local(format!(
                "a cluster is already running in {} (seed {}); stop it with \
                 `elastree cluster down`",
                dir.display(),
                old.seed()
            )));
        }
    }
    for entry in fs::read_dir(dir)?.flatten() {
        let is_node = entry
            .file_name()
            .to_str()
            .is_some_and(|s| s.parse::<u16>().is_ok());
        if is_node && entry.path().join("nodes.conf").exists() {
            return Err(DistError::Local(format!(
                "{} holds the data of an earlier cluster ({}); remove it (or use \
                 `elastree cluster down --purge`) or choose another directory",
                dir.display(),
                entry.path().display()
            )));
        }
    }
    Ok(())
}

/// Deletes the node directories of a failed start, so a retry on other ports starts clean.
fn remove_node_dirs(dir: &Path, ports: &[u16]) {
    for p in ports {
        let _ = fs::remove_dir_all(dir.join(p.to_string()));
    }
    let _ = fs::remove_file(dir.join(STATE_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_refuses_fewer_than_three_masters() {
        let spec = ClusterSpec {
            masters: 2,
            ..ClusterSpec::default()
        };
        let err = spec.validate().unwrap_err();
        assert!(matches!(err, DistError::Invalid(_)), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("at least 3 masters") && msg.contains("got 2"),
            "{msg}"
        );
        // `up` validates before it touches the directory or starts anything.
        let err = LocalCluster::up(&spec).unwrap_err();
        assert!(matches!(err, DistError::Invalid(_)), "{err:?}");
        assert!(!spec.dir.exists());
    }

    #[test]
    fn validation_refuses_too_many_replicas_and_ports_past_the_bus_range() {
        let spec = ClusterSpec {
            replicas: 3,
            ..ClusterSpec::default()
        };
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("0, 1 or 2"));
        let spec = ClusterSpec {
            base_port: Some(60000),
            ..ClusterSpec::default()
        };
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("cluster bus"));
        assert!(ClusterSpec::default().validate().is_ok());
    }

    #[test]
    fn default_dirs_are_unique() {
        assert_ne!(ClusterSpec::default().dir, ClusterSpec::default().dir);
    }
}
