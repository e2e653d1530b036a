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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::error::DistError;

/// The number of hash slots of a Redis Cluster.
pub const CLUSTER_SLOTS: usize = 16384;

/// Redis Cluster's bus port is the client port plus this offset, so both must be free.
const BUS_PORT_OFFSET: u16 = 10000;

/// Auto-picked client ports come from `AUTO_PORT_LOW..AUTO_PORT_HIGH`, so that their bus
/// ports (+10000) stay below Linux's default ephemeral range (32768..) and the kernel does
/// not hand one of them to an outgoing connection between our check and Redis's bind.
const AUTO_PORT_LOW: u16 = 10000;
/// See [`AUTO_PORT_LOW`].
const AUTO_PORT_HIGH: u16 = 22000;

/// How long to wait for a TCP connection to a node (a local node answers in microseconds;
/// a dead one refuses at once, a stopped one times out here).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);
/// How long to wait for a node's reply to one command.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(2000);
/// How long a `redis-cli --cluster` command may run (create and rebalance move at most a
/// few thousand keys on a test cluster; they take seconds).
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a started node may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);
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
                Some(base) => (0..spec.node_count() as u16).map(|i| base + i).collect(),
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
                Err(StartError::PortTaken(e) | StartError::Other(e)) => {
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
        })
    }

    /// When `yes`, dropping this cluster (also while a test panics) kills its processes and
    /// deletes its directory. Only a cluster started by [`up`](Self::up) in this process
    /// honours it; an [`open`](Self::open)ed one is never stopped by a drop.
    pub fn set_remove_on_drop(&mut self, yes: bool) {
        self.remove_on_drop = yes;
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
        let deadline = Instant::now() + Duration::from_millis(self.state.ready_timeout_ms);
        let new = format!("127.0.0.1:{port}");
        self.tool(
            "add-node",
            &["--cluster", "add-node", &new, &seed, "--cluster-yes"],
        )?;
        // `rebalance` refuses to run until every node knows the new one.
        self.wait(deadline, "every node to know the new node", |c| {
            c.agreement(None, true)
        })?;
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
        self.wait(deadline, "the rebalanced cluster to settle", |c| {
            c.agreement(Some(expected), true)
        })?;
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
        // Drop must not act again.
        self.remove_on_drop = false;
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

    // ---- starting nodes -------------------------------------------------------------

    /// Writes each node's configuration, starts it (Redis daemonizes itself), records its
    /// PID and waits until it answers PING. Records each node as soon as its PID is known,
    /// so that a failure part-way kills what was started.
    fn start_nodes(&mut self, ports: &[u16]) -> Result<(), StartError> {
        for &port in ports {
            let node_dir = self.dir.join(port.to_string());
            fs::create_dir_all(&node_dir).map_err(|e| StartError::Other(e.into()))?;
            let conf = node_dir.join("redis.conf");
            fs::write(&conf, self.config(port, &node_dir))
                .map_err(|e| StartError::Other(e.into()))?;
            let _ = fs::remove_file(node_dir.join("redis.pid"));
            let status = Command::new("redis-server")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| StartError::Other(spawn_error("redis-server", e)))?;
            if !status.success() {
                return Err(StartError::Other(DistError::Local(format!(
                    "redis-server {} exited with {status}; see {}",
                    conf.display(),
                    node_dir.join("redis.log").display()
                ))));
            }
        }
        for &port in ports {
            let node_dir = self.dir.join(port.to_string());
            let pid = self.wait_started(port, &node_dir)?;
            self.state.nodes.push(NodeRecord {
                port,
                pid,
                role: Role::Master,
                node_id: String::new(),
                alive: true,
            });
        }
        self.state.nodes.sort_by_key(|n| n.port);
        for &port in ports {
            let id: String =
                command(port, redis::cmd("CLUSTER").arg("MYID")).map_err(StartError::Other)?;
            if let Some(n) = self.state.nodes.iter_mut().find(|n| n.port == port) {
                n.node_id = id;
            }
        }
        self.save().map_err(StartError::Other)
    }

    /// Waits for the node's PID file and for its first PONG.
    fn wait_started(&self, port: u16, node_dir: &Path) -> Result<u32, StartError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let pidfile = node_dir.join("redis.pid");
        let log = node_dir.join("redis.log");
        let mut pid = None;
        loop {
            if pid.is_none() {
                pid = fs::read_to_string(&pidfile)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok());
            }
            if let Some(pid) = pid {
                let pong: Result<String, _> = command(port, &redis::cmd("PING"));
                if pong.is_ok_and(|p| p == "PONG") && process_alive(pid, port) {
                    return Ok(pid);
                }
            }
            let log_text = fs::read_to_string(&log).unwrap_or_default();
            if log_text.contains("Address already in use") {
                return Err(StartError::PortTaken(DistError::Local(format!(
                    "port {port} (or its bus port {}) is already in use",
                    u32::from(port) + u32::from(BUS_PORT_OFFSET)
                ))));
            }
            if Instant::now() >= deadline {
                let tail: Vec<&str> = log_text.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(StartError::Other(DistError::Local(format!(
                    "the node on port {port} did not answer PING within {START_TIMEOUT:?}; \
                     end of {}:\n{}",
                    log.display(),
                    tail.join("\n")
                ))));
            }
            sleep(POLL);
        }
    }

    /// One node's `redis.conf`.
    fn config(&self, port: u16, node_dir: &Path) -> String {
        let quoted = |p: &Path| {
            format!(
                "\"{}\"",
                p.display()
                    .to_string()
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
            )
        };
        format!(
            "# Written by elastree-dist (local cluster); one node of {dir}.\n\
             port {port}\n\
             bind 127.0.0.1\n\
             protected-mode no\n\
             cluster-enabled yes\n\
             cluster-config-file nodes.conf\n\
             cluster-node-timeout {timeout}\n\
             # Serve the slots that still have a master while others fail over.\n\
             cluster-require-full-coverage no\n\
             appendonly yes\n\
             appendfsync everysec\n\
             save \"\"\n\
             # Replicas sync over the socket at once: no RDB file, no 5 s delay.\n\
             repl-diskless-sync yes\n\
             repl-diskless-sync-delay 0\n\
             dir {node_dir}\n\
             daemonize yes\n\
             pidfile {pidfile}\n\
             logfile {logfile}\n",
            dir = self.dir.display(),
            timeout = self.state.node_timeout_ms,
            node_dir = quoted(node_dir),
            pidfile = quoted(&node_dir.join("redis.pid")),
            logfile = quoted(&node_dir.join("redis.log")),
        )
    }

    /// Joins the started nodes with `redis-cli --cluster create` and waits until healthy.
    fn create(&mut self, spec: &ClusterSpec, ready_timeout: Duration) -> Result<(), DistError> {
        let deadline = Instant::now() + ready_timeout;
        let addrs: Vec<String> = self
            .state
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let replicas = spec.replicas.to_string();
        let mut args: Vec<&str> = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", &replicas, "--cluster-yes"]);
        self.tool("create", &args)?;
        self.wait(deadline, "the new cluster to become healthy", |c| {
            c.agreement(Some(spec.masters), true)
        })?;
        self.refresh_roles();
        self.save()
    }

    // ---- health -------------------------------------------------------------------------

    /// Polls `check` until it returns `Ok(None)` (healthy) or the deadline passes; the
    /// error then says what `check` last found wrong.
    fn wait(
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
    fn agreement(&self, masters: Option<usize>, links: bool) -> Result<Option<String>, DistError> {
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
    fn any_view(&self) -> Result<Vec<ViewEntry>, DistError> {
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
    fn refresh_roles(&mut self) {
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

    /// Runs `redis-cli ARGS` with a deadline; its output goes to `DIR/redis-cli-NAME.log`,
    /// whose end is in the error if it fails.
    fn tool(&self, name: &str, args: &[&str]) -> Result<(), DistError> {
        let log_path = self.dir.join(format!("redis-cli-{name}.log"));
        let log = fs::File::create(&log_path)?;
        let mut child = Command::new("redis-cli")
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| spawn_error("redis-cli", e))?;
        let deadline = Instant::now() + TOOL_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            sleep(Duration::from_millis(50));
        };
        let output = fs::read_to_string(&log_path).unwrap_or_default();
        // redis-cli --cluster exits 0 on some failures; its errors start with [ERR].
        let failed_line = output.lines().find(|l| l.starts_with("[ERR]"));
        match (status, failed_line) {
            (Some(s), None) if s.success() => Ok(()),
            (None, _) => Err(DistError::Unavailable(format!(
                "redis-cli {} did not finish within {TOOL_TIMEOUT:?}; see {}",
                args.join(" "),
                log_path.display()
            ))),
            (Some(s), line) => {
                let tail: Vec<&str> = output.lines().rev().take(8).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(DistError::Local(format!(
                    "redis-cli {} failed ({}): {}\n{}",
                    args.join(" "),
                    s,
                    line.unwrap_or("see below"),
                    tail.join("\n")
                )))
            }
        }
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

/// Which node id owns each slot range (inclusive), as one node sees it.
type SlotOwners = BTreeMap<(u16, u16), String>;

/// One line of CLUSTER NODES.
#[derive(Debug, Clone)]
struct ViewEntry {
    id: String,
    port: u16,
    myself: bool,
    is_master: bool,
    /// Flagged `fail` or `fail?` by the viewing node.
    failed: bool,
    handshake: bool,
    /// For a replica, its master's id.
    master: Option<String>,
    /// Owned slot ranges, inclusive.
    ranges: Vec<(u16, u16)>,
    slots: usize,
}

/// Parses CLUSTER NODES: `<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent>
/// <pong-recv> <config-epoch> <link-state> <slot>...`, where a slot is `N`, `A-B`, or a
/// bracketed migration note (skipped).
fn parse_nodes(text: &str) -> Vec<ViewEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            continue;
        }
        let port = fields[1]
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(0);
        let flags: Vec<&str> = fields[2].split(',').collect();
        let ranges: Vec<(u16, u16)> = fields[8..]
            .iter()
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                None => s.parse().ok().map(|a| (a, a)),
            })
            .collect();
        let slots = ranges.iter().map(|&(a, b)| usize::from(b - a) + 1).sum();
        out.push(ViewEntry {
            id: fields[0].to_string(),
            port,
            myself: flags.contains(&"myself"),
            is_master: flags.contains(&"master"),
            failed: flags.iter().any(|f| *f == "fail" || *f == "fail?"),
            handshake: flags.contains(&"handshake") || flags.contains(&"noaddr"),
            master: (fields[3] != "-").then(|| fields[3].to_string()),
            ranges,
            slots,
        });
    }
    out
}

/// The value of `name:` in INFO output.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim)
    })
}

/// A node's `cluster_state` and its CLUSTER NODES view.
fn query_node(port: u16) -> Result<(String, Vec<ViewEntry>), DistError> {
    let mut con = connect(port)?;
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut con)
        .map_err(|e| redis_error(port, e))?;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut con)
        .map_err(|e| redis_error(port, e))?;
    let state = info_field(&info, "cluster_state")
        .unwrap_or("unknown")
        .to_string();
    Ok((state, parse_nodes(&nodes)))
}

/// Runs one command on the node at `port`, with the connect and response timeouts.
fn command<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Result<T, DistError> {
    let mut con = connect(port)?;
    cmd.query(&mut con).map_err(|e| redis_error(port, e))
}

/// A connection to the node at `port` with the connect and response timeouts set.
fn connect(port: u16) -> Result<redis::Connection, DistError> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .map_err(|e| redis_error(port, e))?;
    let con = client
        .get_connection_with_timeout(CONNECT_TIMEOUT)
        .map_err(|e| DistError::Unavailable(format!("node 127.0.0.1:{port}: {e}")))?;
    con.set_read_timeout(Some(RESPONSE_TIMEOUT))
        .and_then(|()| con.set_write_timeout(Some(RESPONSE_TIMEOUT)))
        .map_err(|e| redis_error(port, e))?;
    Ok(con)
}

fn redis_error(port: u16, e: redis::RedisError) -> DistError {
    if e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        DistError::Unavailable(format!("node 127.0.0.1:{port}: {e}"))
    } else {
        DistError::Redis(format!("node 127.0.0.1:{port}: {e}"))
    }
}

/// [`DistError::Missing`] unless `redis-server` and `redis-cli` are on PATH.
fn require_programs() -> Result<(), DistError> {
    for program in ["redis-server", "redis-cli"] {
        if !on_path(program) {
            return Err(DistError::Missing { program });
        }
    }
    Ok(())
}

fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

fn spawn_error(program: &'static str, e: std::io::Error) -> DistError {
    if e.kind() == std::io::ErrorKind::NotFound {
        DistError::Missing { program }
    } else {
        DistError::Local(format!("cannot run {program}: {e}"))
    }
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

/// Ports handed out by [`reserve_ports`] and not yet bound by Redis, so that clusters
/// started in parallel in one process (tests) never get the same ports.
static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Reserves `p` within this process if it and its bus port are free.
fn try_reserve(p: u16) -> bool {
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    if reserved.contains(&p) || !port_free(p) || !port_free(p + BUS_PORT_OFFSET) {
        return false;
    }
    reserved.insert(p);
    true
}

/// Finds and reserves `n` consecutive free ports (each with a free bus port), starting the
/// search at a point that depends on the process and time, so that parallel test
/// processes usually search different places.
fn reserve_ports(n: usize) -> Result<Vec<u16>, DistError> {
    let n16 = u16::try_from(n).map_err(|_| DistError::Invalid(format!("{n} nodes")))?;
    let span = AUTO_PORT_HIGH - AUTO_PORT_LOW - n16;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = std::process::id().wrapping_mul(2_654_435_761) ^ nanos;
    let start = (seed % u32::from(span)) as u16;
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    let mut offset = 0;
    while offset < span {
        let base = AUTO_PORT_LOW + (start + offset) % span;
        let ports: Vec<u16> = (base..base + n16).collect();
        let free = ports
            .iter()
            .all(|&p| !reserved.contains(&p) && port_free(p) && port_free(p + BUS_PORT_OFFSET));
        if free {
            reserved.extend(ports.iter().copied());
            return Ok(ports);
        }
        offset += n16;
    }
    Err(DistError::Local(format!(
        "no {n} consecutive free ports in {AUTO_PORT_LOW}..{AUTO_PORT_HIGH}"
    )))
}

/// Forgets reservations once Redis holds the ports (or gave up on them).
fn release_ports(ports: &[u16]) {
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    for p in ports {
        reserved.remove(p);
    }
}

fn port_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// True if `pid` is a running (not zombie) `redis-server` serving `port`: Redis sets its
/// process title to `redis-server 127.0.0.1:PORT [cluster]`, which `/proc/PID/cmdline`
/// shows. A reused PID, or a zombie (whose cmdline is empty), is not ours.
pub fn process_alive(pid: u32, port: u16) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    let ours = cmdline.contains("redis-server") && cmdline.contains(&format!(":{port}"));
    let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true);
    ours && !zombie
}

/// Sends `sig` to `pid`.
fn signal(pid: u32, sig: Signal) -> Result<(), DistError> {
    let raw = i32::try_from(pid).map_err(|_| DistError::Local(format!("bad pid {pid}")))?;
    kill(Pid::from_raw(raw), sig)
        .map_err(|e| DistError::Local(format!("cannot send {sig} to pid {raw}: {e}")))
}

/// Waits until `pid` no longer runs `redis-server` on `port`; false if it still does
/// after `limit`.
fn wait_gone(pid: u32, port: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while process_alive(pid, port) {
        if Instant::now() >= deadline {
            return false;
        }
        sleep(Duration::from_millis(20));
    }
    true
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

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461->-b2]
b2 127.0.0.1:7001@17001,host master - 0 0 2 connected 5461-10922 16000
c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected
d4 127.0.0.1:7004@17004 master,fail - 0 0 3 disconnected
";
        let v = parse_nodes(text);
        assert_eq!(v.len(), 4);
        assert!(v[0].myself && v[0].is_master);
        assert_eq!((v[0].port, v[0].slots), (7000, 5461));
        assert_eq!(v[1].ranges, vec![(5461, 10922), (16000, 16000)]);
        assert_eq!(v[1].slots, 5463);
        assert_eq!(v[2].master.as_deref(), Some("a1"));
        assert!(!v[2].is_master);
        assert!(v[3].failed && v[3].slots == 0);
        assert_eq!(
            info_field("# Cluster\r\ncluster_state:ok\r\n", "cluster_state"),
            Some("ok")
        );
    }
}
