//! Talking to a Redis Cluster: the slot map, one small pool of connections per master, and the
//! retry rules that turn redirects, failovers and dead nodes into either a completed request
//! or a typed error within the deadline.
//!
//! The client routes every request itself (instead of redis-rs's cluster client) so that a
//! request is exactly one round trip to the master that owns its slot (a function call and,
//! for writes, the `WAIT` that must follow it on the same connection, pipelined), and so that
//! its timeouts and retries are the ones configured here.

use std::collections::HashMap;
use std::io::ErrorKind as IoErrorKind;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, ErrorKind, RedisError, ServerErrorKind, Value};

use crate::error::DistError;
use crate::slots::{SlotMap, SLOTS};

/// The function library's source and the version string `et_version` returns.
pub(crate) const LIBRARY: &str = include_str!("tree.lua");
/// Must equal `VERSION` in tree.lua.
pub(crate) const LIBRARY_VERSION: &str = "elastree-tree-13";

/// Timeouts and durability settings of a connection to a cluster.
#[derive(Debug, Clone)]
pub struct RouterOptions {
    /// How long one operation may take, retries included, before it fails with
    /// [`DistError::Unavailable`].
    pub op_timeout: Duration,
    /// How long opening a connection to one node may take.
    pub connect_timeout: Duration,
    /// Replicas that must acknowledge a write before it is acknowledged (`WAIT`); capped by
    /// the replicas the key's master has.
    pub wait_replicas: usize,
    /// How long a write waits for those replicas.
    pub replica_timeout: Duration,
    /// Fault injection for tests (off by default): every write request is sent twice and
    /// the first reply dropped, as when a failover loses the reply of a write that was
    /// applied and the client retries it. The index must end in the same state as without.
    pub repeat_writes: bool,
}

impl Default for RouterOptions {
    fn default() -> Self {
        RouterOptions {
            op_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_millis(500),
            wait_replicas: 1,
            replica_timeout: Duration::from_secs(2),
            repeat_writes: false,
        }
    }
}

/// Checks that something accepts TCP connections at `seed` ("host:port"), trying each
/// address it resolves to for at most `timeout`, so that a wrong or dead cluster address
/// fails at once instead of after [`RouterOptions::op_timeout`] of retries (a connection
/// that is refused fails without waiting for `timeout`). Call it before
/// [`crate::DistIndex::connect`] when the address comes from a user.
///
/// It only opens (and closes) a TCP connection: whether a Redis Cluster node answers there
/// is for the connect that follows to find out.
///
/// # Errors
///
/// [`DistError::Invalid`] when `seed` is not a "host:port" address, and
/// [`DistError::Unavailable`] naming `seed` when it resolves to no address or nothing
/// accepts a connection at any address it resolves to.
pub fn reachable(seed: &str, timeout: Duration) -> Result<(), DistError> {
    let targets: Vec<SocketAddr> = match seed.to_socket_addrs() {
        Ok(targets) => targets.collect(),
        Err(e) if e.kind() == IoErrorKind::InvalidInput => {
            return Err(DistError::Invalid(format!(
                "{seed:?} is not a host:port address ({e})"
            )))
        }
        Err(e) => {
            return Err(DistError::Unavailable(format!(
                "cannot resolve {seed:?}: {e}"
            )))
        }
    };
    let mut last = format!("{seed:?} resolves to no address");
    for target in targets {
        match TcpStream::connect_timeout(&target, timeout) {
            Ok(_) => return Ok(()),
            Err(e) if target.to_string() == seed => {
                last = format!("nothing answers at {seed}: {e}")
            }
            Err(e) => last = format!("nothing answers at {seed} ({target}): {e}"),
        }
    }
    Err(DistError::Unavailable(last))
}

/// Counters of the requests a client made.
#[derive(Debug, Default)]
pub(crate) struct RouterCounters {
    pub round_trips: AtomicU64,
    pub retries: AtomicU64,
    pub redirects: AtomicU64,
    pub map_refreshes: AtomicU64,
    /// Bumped every time a fresh slot map names other masters than the one before (a
    /// master joined or left, a replica took over): what starts an automatic rebalance.
    pub master_changes: AtomicU64,
    /// Write requests acknowledged after WAIT saw the configured replicas take them.
    pub replicated_writes: AtomicU64,
}

/// A request to run on one master: commands pipelined on one connection.
pub(crate) struct Request {
    cmds: Vec<redis::Cmd>,
    write: bool,
}

impl Request {
    /// A read: the commands only.
    pub fn read(cmds: Vec<redis::Cmd>) -> Self {
        Request { cmds, write: false }
    }

    /// A write: the commands, then `WAIT` for the configured replicas.
    pub fn write(cmds: Vec<redis::Cmd>) -> Self {
        Request { cmds, write: true }
    }
}

/// Routes requests to the masters of a Redis Cluster.
pub(crate) struct Router {
    seeds: Vec<String>,
    /// When the slot map was last read.
    refreshed: Mutex<Instant>,
    options: RouterOptions,
    map: RwLock<Arc<SlotMap>>,
    pools: Mutex<HashMap<String, Vec<Connection>>>,
    /// Masters known to have the current function library, with the replicas connected to
    /// each when it was checked.
    verified: Mutex<HashMap<String, usize>>,
    pub counters: RouterCounters,
}

/// What went wrong with one attempt, and what to do about it.
enum Failure {
    /// The slot lives elsewhere now: refresh the map and retry at once.
    Moved,
    /// The slot is being migrated: retry at this node with ASKING.
    Ask(String),
    /// The node is busy, failing over or unreachable: wait a little and retry.
    Transient(String),
    /// A function met the middle of a slot migration of its tag: a node key already moved
    /// away ("non local key") or, on the importing side, not there yet (a missing node).
    /// Retried like [`Failure::Transient`]; a node still missing at the deadline is
    /// corruption.
    Migrating(String),
    /// The node lacks the function library: load it and retry.
    NoLibrary,
    /// Nothing to retry: a script error or a bad request.
    Fatal(DistError),
}

impl Router {
    /// Connects through any of `seeds` ("host:port"), reads the slot map and makes sure every
    /// master has the current function library.
    pub fn connect(seeds: &[String], options: RouterOptions) -> Result<Router, DistError> {
        if seeds.is_empty() {
            return Err(DistError::Invalid("no cluster address given".into()));
        }
        let router = Router {
            seeds: seeds.to_vec(),
            refreshed: Mutex::new(Instant::now()),
            options,
            map: RwLock::new(Arc::new(SlotMap::default())),
            pools: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
            counters: RouterCounters::default(),
        };
        let deadline = Instant::now() + router.options.op_timeout;
        router.refresh_until(deadline)?;
        for master in router.masters() {
            router.ensure_library(&master, deadline)?;
        }
        Ok(router)
    }

    /// The current slot map.
    pub fn slot_map(&self) -> Arc<SlotMap> {
        self.map.read().expect("slot map lock").clone()
    }

    /// The addresses of the masters that own slots.
    pub fn masters(&self) -> Vec<String> {
        self.slot_map().masters()
    }

    /// The seeds this router was given and the masters it knows: addresses to connect
    /// through.
    pub fn seeds_and_masters(&self) -> Vec<String> {
        let mut all = self.seeds.clone();
        for m in self.masters() {
            if !all.contains(&m) {
                all.push(m);
            }
        }
        all
    }

    /// Re-reads the slot map if it is older than `age` (one attempt; a failure is left for
    /// the next operation to meet).
    pub fn refresh_if_older(&self, age: Duration) {
        let due = {
            let Ok(mut at) = self.refreshed.try_lock() else {
                return;
            };
            let due = at.elapsed() >= age;
            if due {
                // Claimed: other threads wait for the next period.
                *at = Instant::now();
            }
            due
        };
        if due {
            let _ = self.try_refresh();
        }
    }

    /// Re-reads the slot map, retrying until the deadline.
    pub fn refresh_until(&self, deadline: Instant) -> Result<(), DistError> {
        loop {
            let last = match self.try_refresh() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(DistError::Unavailable(format!(
                    "could not read the cluster's slot map within {:?}: {last}",
                    self.options.op_timeout
                )));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asks the known masters, then the seeds, for the slot map; takes the first complete one.
    fn try_refresh(&self) -> Result<(), String> {
        self.counters.map_refreshes.fetch_add(1, Ordering::Relaxed);
        let mut candidates = self.masters();
        for seed in &self.seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        let mut last = String::from("no address to ask");
        for addr in candidates {
            let reply: Result<Value, RedisError> =
                self.with_connection(&addr, |con| redis::cmd("CLUSTER").arg("SLOTS").query(con));
            match reply
                .map_err(|e| e.to_string())
                .and_then(|v| SlotMap::from_cluster_slots(&v))
            {
                Ok(map) if map.covered() == SLOTS => {
                    let mut current = self.map.write().expect("slot map lock");
                    if current.masters() != map.masters() {
                        self.counters.master_changes.fetch_add(1, Ordering::Relaxed);
                    }
                    *current = Arc::new(map);
                    *self.refreshed.lock().expect("refresh time lock") = Instant::now();
                    return Ok(());
                }
                Ok(map) => last = format!("{addr} knows owners for only {} slots", map.covered()),
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(last)
    }

    /// Runs `f` on a pooled connection to `addr` (opening one if needed). A connection that
    /// saw any error is dropped rather than returned to the pool.
    fn with_connection<T>(
        &self,
        addr: &str,
        f: impl FnOnce(&mut Connection) -> Result<T, RedisError>,
    ) -> Result<T, RedisError> {
        let pooled = self
            .pools
            .lock()
            .expect("pool lock")
            .get_mut(addr)
            .and_then(Vec::pop);
        let mut con = match pooled {
            Some(con) => con,
            None => {
                let client = redis::Client::open(format!("redis://{addr}/"))?;
                let con = client.get_connection_with_timeout(self.options.connect_timeout)?;
                let io_timeout = Some(self.options.op_timeout.max(self.options.replica_timeout));
                con.set_read_timeout(io_timeout)?;
                con.set_write_timeout(io_timeout)?;
                con
            }
        };
        let result = f(&mut con);
        if result.is_ok() {
            let mut pools = self.pools.lock().expect("pool lock");
            let pool = pools.entry(addr.to_string()).or_default();
            if pool.len() < 64 {
                pool.push(con);
            }
        }
        result
    }

    /// Loads the function library on `addr` unless it already has this version, and reads
    /// how many replicas are connected to the master (checked once per master: a new master
    /// or a promoted replica is checked on first use). `CLUSTER SLOTS` leaves out a replica
    /// that has not reported a replication offset yet, and on a fresh cluster the other
    /// nodes may not know yet which nodes are replicas; the master itself knows the replicas
    /// connected to it, and a write to it waits for them.
    /// Returns that replica count.
    fn ensure_library(&self, addr: &str, deadline: Instant) -> Result<usize, DistError> {
        loop {
            self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
            let attempt = self.with_connection(addr, |con| {
                let current: Option<String> =
                    redis::cmd("FCALL").arg("et_version").arg(0).query(con).ok();
                if current.as_deref() != Some(LIBRARY_VERSION) {
                    redis::cmd("FUNCTION")
                        .arg("LOAD")
                        .arg("REPLACE")
                        .arg(LIBRARY)
                        .query::<String>(con)?;
                }
                let info: String = redis::cmd("INFO").arg("replication").query(con)?;
                Ok(connected_replicas(&info))
            });
            match attempt {
                Ok(replicas) => {
                    self.verified
                        .lock()
                        .expect("verified lock")
                        .insert(addr.to_string(), replicas);
                    return Ok(replicas);
                }
                Err(e) if is_transient(&e) && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(DistError::Unavailable(format!(
                        "could not load the function library on {addr}: {e}"
                    )))
                }
            }
        }
    }

    /// Runs `request` on the master owning `slot`: redirects followed, transient failures
    /// retried until `deadline`. Returns the replies of the request's commands and the
    /// address that answered.
    pub fn run(
        &self,
        slot: u16,
        request: &Request,
        deadline: Instant,
    ) -> Result<(Vec<Value>, String), DistError> {
        let mut ask: Option<String> = None;
        let mut backoff = Duration::from_millis(10);
        loop {
            let map = self.slot_map();
            let addr = match &ask {
                Some(a) => a.clone(),
                None => match map.owner(slot) {
                    Some(node) => node.addr.clone(),
                    None => {
                        self.refresh_until(deadline)?;
                        continue;
                    }
                },
            };
            // One look-up per request: the replicas connected to a checked master, or the
            // check of a master seen for the first time.
            let known = self
                .verified
                .lock()
                .expect("verified lock")
                .get(&addr)
                .copied();
            let connected = match known {
                Some(n) => n,
                None => self.ensure_library(&addr, deadline)?,
            };
            let replicas = map.replicas_of(&addr).max(connected);
            let failure = match self.attempt(&addr, request, ask.is_some(), replicas) {
                Ok(replies) => return Ok((replies, addr)),
                Err(failure) => failure,
            };
            ask = None;
            let reason = match failure {
                Failure::Fatal(e) => return Err(e),
                Failure::Moved => {
                    self.counters.redirects.fetch_add(1, Ordering::Relaxed);
                    let _ = self.try_refresh();
                    "slot moved".to_string()
                }
                Failure::Ask(target) => {
                    self.counters.redirects.fetch_add(1, Ordering::Relaxed);
                    ask = Some(target);
                    "slot migrating".to_string()
                }
                Failure::NoLibrary => {
                    self.verified.lock().expect("verified lock").remove(&addr);
                    self.ensure_library(&addr, deadline)?;
                    "function library missing".to_string()
                }
                Failure::Transient(reason) | Failure::Migrating(reason) => {
                    thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(250));
                    let _ = self.try_refresh();
                    reason
                }
            };
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            if Instant::now() >= deadline {
                if reason.contains(MISSING_NODE) {
                    return Err(DistError::Corrupt(reason));
                }
                return Err(DistError::Unavailable(format!(
                    "no answer within {:?} (last: {reason})",
                    self.options.op_timeout
                )));
            }
        }
    }

    /// One round trip: the request's commands (after ASKING when redirected by ASK) and,
    /// for writes, WAIT.
    fn attempt(
        &self,
        addr: &str,
        request: &Request,
        asking: bool,
        replicas: usize,
    ) -> Result<Vec<Value>, Failure> {
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let wait = if request.write {
            self.options.wait_replicas.min(replicas)
        } else {
            0
        };
        let mut pipe = redis::pipe();
        if asking {
            pipe.cmd("ASKING").ignore();
        }
        for cmd in &request.cmds {
            pipe.add_command(cmd.clone());
        }
        if wait > 0 {
            pipe.cmd("WAIT")
                .arg(wait)
                .arg(self.options.replica_timeout.as_millis() as u64);
        }
        if request.write && self.options.repeat_writes {
            let _lost: Vec<Value> = self
                .with_connection(addr, |con| pipe.query(con))
                .map_err(classify)?;
        }
        let replies: Vec<Value> = self
            .with_connection(addr, |con| pipe.query(con))
            .map_err(classify)?;
        let mut replies = replies;
        if wait > 0 {
            let acked = match replies.pop() {
                Some(Value::Int(n)) => n,
                other => {
                    return Err(Failure::Fatal(DistError::Redis(format!(
                        "unexpected WAIT reply {other:?}"
                    ))))
                }
            };
            if (acked as usize) < wait {
                return Err(Failure::Fatal(DistError::Unavailable(format!(
                    "write applied on {addr} but acknowledged by {acked} of {wait} replicas within {:?}",
                    self.options.replica_timeout
                ))));
            }
            self.counters
                .replicated_writes
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(replies)
    }
}

impl Router {
    /// Every key matching `pattern` on every master (SCAN), e.g. to find the indexes a
    /// cluster holds.
    pub fn scan_keys(&self, pattern: &str, deadline: Instant) -> Result<Vec<Vec<u8>>, DistError> {
        let mut keys = Vec::new();
        for addr in self.masters() {
            let mut cursor: u64 = 0;
            loop {
                let reply: Result<(u64, Vec<Vec<u8>>), RedisError> =
                    self.with_connection(&addr, |con| {
                        redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(1000)
                            .query(con)
                    });
                match reply {
                    Ok((next, batch)) => {
                        keys.extend(batch);
                        if next == 0 {
                            break;
                        }
                        cursor = next;
                    }
                    Err(e) if is_transient(&e) && Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => return Err(DistError::Unavailable(format!("{addr}: {e}"))),
                }
            }
        }
        Ok(keys)
    }
}

/// The replicas connected to a master, by its `INFO replication` (`connected_slaves:N`,
/// which counts a replica still finishing its first sync too; `ROLE` lists only those
/// the master has put online, up to a second after the replica reports its link up).
fn connected_replicas(info: &str) -> usize {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("connected_slaves:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn is_transient(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
                    | ServerErrorKind::ReadOnly
            )
        )
}

/// What a function says when a node it must read is not there (tree.lua).
const MISSING_NODE: &str = "elastree: missing node";
/// What Redis says when a function touches a key of a slot that is migrating away and the key
/// is gone already (or would be new).
const NON_LOCAL_KEY: &str = "non local key";

fn classify(e: RedisError) -> Failure {
    match e.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => Failure::Moved,
        ErrorKind::Server(ServerErrorKind::Ask) => match e.redirect_node() {
            Some((addr, _)) => Failure::Ask(addr.to_string()),
            None => Failure::Moved,
        },
        _ if is_transient(&e) => Failure::Transient(e.to_string()),
        _ => {
            let text = e.to_string();
            if text.contains("Function not found") {
                Failure::NoLibrary
            } else if text.contains(MISSING_NODE) || text.contains(NON_LOCAL_KEY) {
                Failure::Migrating(text)
            } else if text.contains("elastree check:") {
                Failure::Fatal(DistError::Corrupt(text))
            } else {
                Failure::Fatal(DistError::Redis(text))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// How long the tests let [`reachable`] try one address: far above what a local
    /// connection takes on a loaded machine, so only a refusal makes it return early.
    const PATIENT: Duration = Duration::from_secs(60);

    #[test]
    fn a_listening_port_is_reachable() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // The kernel completes the handshake from the backlog: nobody needs to accept.
        reachable(&addr, PATIENT).unwrap_or_else(|e| panic!("{addr} listens: {e}"));
    }

    #[test]
    fn a_refused_port_is_unavailable_at_once() {
        // A port nothing listens on and nothing else can take while the test runs: the
        // local end of an open connection (bound, not listening: connecting to it is
        // refused).
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let held = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let addr = held.local_addr().unwrap().to_string();
        let started = Instant::now();
        let err = reachable(&addr, PATIENT).unwrap_err();
        let took = started.elapsed();
        match &err {
            DistError::Unavailable(message) => {
                assert!(message.contains(&addr), "the error names {addr}: {message}")
            }
            other => panic!("{addr}: expected Unavailable, got {other:?}"),
        }
        // A refusal returns without waiting out the timeout (the bound is half of it, so a
        // busy machine cannot make this fail; a wait for the timeout always would).
        assert!(took < PATIENT / 2, "{addr}: refused only after {took:?}");
    }

    #[test]
    fn a_malformed_address_is_invalid() {
        for seed in ["127.0.0.1", "no port here", "127.0.0.1:notaport"] {
            match reachable(seed, PATIENT) {
                Err(DistError::Invalid(message)) => {
                    assert!(message.contains(seed), "{seed:?}: {message}")
                }
                other => panic!("{seed:?}: expected Invalid, got {other:?}"),
            }
        }
    }
}
