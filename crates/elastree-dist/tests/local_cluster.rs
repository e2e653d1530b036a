//! The local-cluster tooling against real `redis-server` processes: start, inspect, write
//! through every master, grow by one master, fail a master over, stop.
//!
//! Needs `redis-server` and `redis-cli` on PATH (scripts/install-deps.sh installs them).
//! Ports are chosen automatically, so this runs next to other clusters on the machine.

use std::time::{Duration, Instant};

use elastree_dist::local::{ClusterSpec, LocalCluster, Role};
use elastree_testkit::cluster::READY_TIMEOUT_MS;
use elastree_testkit::time_limit;

/// The connect, read and write timeout of the test's connections: far above what a node
/// takes to answer on a loaded machine, so a broken cluster fails the test instead of
/// hanging it.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a killed process may take to be gone: far above what it takes.
const GONE_LIMIT: Duration = Duration::from_secs(30);

/// A connection to one node with timeouts, so a broken cluster fails the test instead of
/// hanging it.
fn try_connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(IO_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

/// [`try_connect`], or a panic naming the port.
fn connect(port: u16) -> redis::Connection {
    try_connect(port).unwrap_or_else(|e| panic!("connecting to the node on port {port}: {e}"))
}

/// The cluster's node table, for a failure message.
fn status_of(cluster: &LocalCluster) -> String {
    cluster
        .status()
        .map_or_else(|e| format!("(no status: {e})"), |s| s.to_string())
}

/// A key whose hash slot `port` owns, found by asking the node (CLUSTER KEYSLOT) and
/// comparing with its own slot ranges (CLUSTER SHARDS would do too; CLUSTER NODES is
/// enough here).
fn key_owned_by(port: u16) -> String {
    let mut con = connect(port);
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut con)
        .unwrap_or_else(|e| panic!("CLUSTER NODES on port {port}: {e}"));
    let me = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_else(|| panic!("no `myself` line in CLUSTER NODES of port {port}:\n{nodes}"));
    let number = |s: &str| -> u16 {
        s.parse()
            .unwrap_or_else(|e| panic!("slot {s:?} in {me:?} (port {port}): {e}"))
    };
    let ranges: Vec<(u16, u16)> = me
        .split_whitespace()
        .skip(8)
        .filter(|s| !s.starts_with('['))
        .map(|s| match s.split_once('-') {
            Some((a, b)) => (number(a), number(b)),
            None => (number(s), number(s)),
        })
        .collect();
    // A master owns a few thousand of the 16384 slots: one of the first keys is its own.
    for i in 0..100_000 {
        let key = format!("k{i}");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut con)
            .unwrap_or_else(|e| panic!("CLUSTER KEYSLOT {key} on port {port}: {e}"));
        if ranges.iter().any(|&(a, b)| a <= slot && slot <= b) {
            return key;
        }
    }
    panic!("none of 100000 keys falls in the slots of port {port}: {ranges:?}")
}

fn gone(pid: u32) -> bool {
    // A SIGKILLed daemon is an orphan that init reaps; until it does, it is a zombie,
    // which no longer runs.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Whether the process `pid` is gone within [`GONE_LIMIT`] (a killed process takes a
/// moment to exit).
fn gone_soon(pid: u32) -> bool {
    let deadline = Instant::now() + GONE_LIMIT;
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    gone(pid)
}

#[test]
fn up_status_write_grow_failover_down() {
    let _limit = time_limit();
    let t0 = Instant::now();
    // The default spec (3 masters, a replica each, node timeout 2 s), given as long to
    // become healthy as every test cluster: a busy machine only makes it slower.
    let spec = ClusterSpec {
        ready_timeout_ms: READY_TIMEOUT_MS,
        ..ClusterSpec::default()
    };
    let mut cluster = LocalCluster::up(&spec)
        .unwrap_or_else(|e| panic!("cluster up in {}: {e}", spec.dir.display()));
    cluster
        .set_remove_on_drop(true)
        .unwrap_or_else(|e| panic!("starting the reaper of {}: {e}", spec.dir.display()));
    eprintln!("up in {:?}", t0.elapsed());
    let state_file = spec.dir.join("cluster.json");
    assert!(
        state_file.exists(),
        "up wrote the state file {}",
        state_file.display()
    );

    // Six nodes, all alive, the cluster ok; three masters with a replica each.
    let status = cluster
        .status()
        .unwrap_or_else(|e| panic!("status after up: {e}"));
    eprintln!("{status}");
    assert_eq!(status.nodes.len(), 6, "nodes after up:\n{status}");
    assert_eq!(status.alive(), 6, "live nodes after up:\n{status}");
    assert!(status.is_ok(), "{status}");
    let masters = cluster
        .masters()
        .unwrap_or_else(|e| panic!("masters after up: {e}\n{status}"));
    assert_eq!(masters.len(), 3, "masters {masters:?} after up:\n{status}");
    let slots: usize = status.nodes.iter().map(|n| n.slots).sum();
    assert_eq!(slots, 16384, "slots owned after up:\n{status}");
    for n in &status.nodes {
        match n.role {
            Role::Master => assert!(
                n.slots > 0 && n.master.is_none(),
                "master on port {}:\n{status}",
                n.port
            ),
            Role::Replica => assert!(
                n.master.is_some_and(|m| masters.contains(&m)),
                "the replica on port {} follows one of the masters {masters:?}:\n{status}",
                n.port
            ),
        }
    }
    let shown = status.to_string();
    assert!(
        shown.contains("cluster_state: ok (6 nodes, 6 alive, 3 masters own slots)"),
        "the status table's summary line:\n{shown}"
    );
    assert!(
        masters
            .iter()
            .any(|p| cluster.seed() == format!("127.0.0.1:{p}")),
        "the seed {} is one of the masters {masters:?}",
        cluster.seed()
    );

    // Another process can open the cluster from its directory.
    let opened = LocalCluster::open(&spec.dir)
        .unwrap_or_else(|e| panic!("open the cluster in {}: {e}", spec.dir.display()));
    assert_eq!(
        opened.ports(),
        cluster.ports(),
        "ports of the cluster opened from {}",
        spec.dir.display()
    );
    drop(opened);
    let status = cluster
        .status()
        .unwrap_or_else(|e| panic!("status after dropping an opened copy: {e}"));
    assert!(
        status.is_ok(),
        "dropping an opened cluster stops nothing:\n{status}"
    );

    // A SET and GET on a key of each master's own slots.
    let mut keys = Vec::new();
    for &m in &masters {
        let key = key_owned_by(m);
        let mut con = connect(m);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(format!("v{m}"))
            .query(&mut con)
            .unwrap_or_else(|e| panic!("SET {key} on its master, port {m}: {e}"));
        let got: String = redis::cmd("GET")
            .arg(&key)
            .query(&mut con)
            .unwrap_or_else(|e| panic!("GET {key} on its master, port {m}: {e}"));
        assert_eq!(got, format!("v{m}"), "GET {key} on port {m}");
        keys.push((key, format!("v{m}")));
    }

    // Grow by one master: four masters own slots and the new one has its share.
    let t = Instant::now();
    let new = cluster
        .add_master()
        .unwrap_or_else(|e| panic!("add_master: {e}\n{}", status_of(&cluster)));
    eprintln!("add_master in {:?}", t.elapsed());
    let status = cluster
        .status()
        .unwrap_or_else(|e| panic!("status after add_master: {e}"));
    let masters = cluster
        .masters()
        .unwrap_or_else(|e| panic!("masters after add_master: {e}\n{status}"));
    assert_eq!(
        masters.len(),
        4,
        "masters {masters:?} after add_master:\n{status}"
    );
    assert!(
        masters.contains(&new),
        "the new node on port {new} is one of the masters {masters:?}:\n{status}"
    );
    assert!(status.is_ok(), "{status}");
    let new_slots = status
        .nodes
        .iter()
        .find(|n| n.port == new)
        .unwrap_or_else(|| panic!("the new node on port {new} in the status:\n{status}"))
        .slots;
    assert!(
        new_slots > 16384 / 4 - 100,
        "the new master on port {new} has its share of the slots, {new_slots}:\n{status}"
    );
    let reopened = LocalCluster::open(&spec.dir)
        .unwrap_or_else(|e| panic!("open the cluster in {}: {e}", spec.dir.display()));
    assert_eq!(
        reopened.ports().len(),
        7,
        "nodes in the state file after add_master: {:?}",
        reopened.ports()
    );

    // Kill a master that has a replica; the replica takes over.
    let replicas_of = |status: &elastree_dist::local::ClusterStatus, m: u16| -> Vec<u16> {
        status
            .nodes
            .iter()
            .filter(|n| n.role == Role::Replica && n.master == Some(m))
            .map(|n| n.port)
            .collect()
    };
    let victim = *masters
        .iter()
        .find(|&&m| !replicas_of(&status, m).is_empty())
        .unwrap_or_else(|| panic!("a master with a replica among {masters:?}:\n{status}"));
    let heirs = replicas_of(&status, victim);
    let victim_pid = cluster
        .pid(victim)
        .unwrap_or_else(|| panic!("the pid of the master on port {victim}:\n{status}"));
    let t = Instant::now();
    cluster
        .kill(victim)
        .unwrap_or_else(|e| panic!("kill the master on port {victim} (pid {victim_pid}): {e}"));
    assert!(
        gone_soon(victim_pid),
        "the killed master (port {victim}, pid {victim_pid}) is gone within {GONE_LIMIT:?}"
    );
    cluster
        .wait_for_failover(Duration::from_secs(60))
        .unwrap_or_else(|e| {
            panic!(
                "failover after killing port {victim}: {e}\n{}",
                status_of(&cluster)
            )
        });
    eprintln!("failover in {:?}", t.elapsed());
    let status = cluster
        .status()
        .unwrap_or_else(|e| panic!("status after the failover: {e}"));
    let masters = cluster
        .masters()
        .unwrap_or_else(|e| panic!("masters after the failover: {e}\n{status}"));
    assert_eq!(
        masters.len(),
        4,
        "masters {masters:?} after the failover:\n{status}"
    );
    assert!(
        !masters.contains(&victim),
        "the killed port {victim} is no master any more: {masters:?}\n{status}"
    );
    assert!(
        heirs.iter().any(|h| masters.contains(h)),
        "one of {heirs:?} was promoted:\n{status}"
    );
    assert!(status.is_ok(), "{status}");
    let dead = status
        .nodes
        .iter()
        .find(|n| n.port == victim)
        .unwrap_or_else(|| panic!("the killed node on port {victim} in the status:\n{status}"));
    assert!(
        !dead.alive,
        "the killed node on port {victim} shows as dead:\n{status}"
    );
    assert!(
        shown_has_dead_row(&status.to_string(), victim),
        "the status table has a dead row for port {victim}:\n{status}"
    );
    assert!(
        cluster.kill(victim).is_err(),
        "a dead node cannot be killed again"
    );
    assert!(cluster.kill(1).is_err(), "not a port of this cluster");

    // The keys written before survive rebalance and failover (ask whoever owns them now).
    for (key, value) in &keys {
        // The masters that do not own the key answer MOVED.
        let mut found = None;
        let mut answers = Vec::new();
        for &m in &masters {
            let got: redis::RedisResult<Option<String>> =
                redis::cmd("GET").arg(key).query(&mut connect(m));
            if let Ok(Some(v)) = &got {
                found = Some(v.clone());
            }
            answers.push((m, got));
        }
        assert_eq!(
            found.as_ref(),
            Some(value),
            "key {key} after the rebalance and the failover; (master, GET): {answers:?}"
        );
    }

    // Down stops every process it started and removes the state file.
    let pids: Vec<(u16, u32)> = cluster
        .ports()
        .iter()
        .map(|&p| {
            let pid = cluster
                .pid(p)
                .unwrap_or_else(|| panic!("the pid of the node on port {p}"));
            (p, pid)
        })
        .collect();
    let dir = cluster.dir().to_path_buf();
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("down of the cluster in {}: {e}", dir.display()));
    for (port, pid) in pids {
        assert!(
            gone_soon(pid),
            "pid {pid} (port {port}) still runs {GONE_LIMIT:?} after down"
        );
    }
    assert!(
        !dir.exists(),
        "down_with(true) removed the directory {}",
        dir.display()
    );
    eprintln!("whole test in {:?}", t0.elapsed());
}

fn shown_has_dead_row(table: &str, port: u16) -> bool {
    table
        .lines()
        .any(|l| l.starts_with(&port.to_string()) && l.split_whitespace().nth(2) == Some("no"))
}

#[test]
fn drop_with_remove_on_drop_stops_the_processes_even_on_panic() {
    let _limit = time_limit();
    let spec = ClusterSpec {
        replicas: 0,
        ready_timeout_ms: READY_TIMEOUT_MS,
        ..ClusterSpec::default()
    };
    let dir = spec.dir.clone();
    let outcome = std::panic::catch_unwind(|| {
        let mut cluster = LocalCluster::up(&spec)
            .unwrap_or_else(|e| panic!("cluster up in {}: {e}", spec.dir.display()));
        cluster
            .set_remove_on_drop(true)
            .unwrap_or_else(|e| panic!("starting the reaper of {}: {e}", spec.dir.display()));
        let pids: Vec<u32> = cluster
            .ports()
            .iter()
            .map(|&p| {
                cluster
                    .pid(p)
                    .unwrap_or_else(|| panic!("the pid of the node on port {p}"))
            })
            .collect();
        assert_eq!(pids.len(), 3, "pids of the 3 masters: {pids:?}");
        std::panic::panic_any(pids);
    });
    // Anything but the deliberate panic with the pids is the test failing on its way there.
    let pids = match outcome {
        Ok(()) => unreachable!("the closure always panics"),
        Err(payload) => match payload.downcast::<Vec<u32>>() {
            Ok(pids) => pids,
            Err(other) => std::panic::resume_unwind(other),
        },
    };
    for &pid in pids.iter() {
        assert!(
            gone_soon(pid),
            "pid {pid} still runs {GONE_LIMIT:?} after the cluster was dropped in a panic"
        );
    }
    assert!(
        !dir.exists(),
        "dropping the cluster removed its directory {}",
        dir.display()
    );
}

/// Set by `a_cluster_never_dropped_is_removed_when_its_process_dies` for its child process.
const OWNER_VAR: &str = "ELASTREE_TEST_CLUSTER_OWNER";

/// Run only in a child process by `a_cluster_never_dropped_is_removed_when_its_process_dies`
/// (anywhere else, say under `--include-ignored`, it returns at once): starts a cluster that
/// is never dropped, prints its nodes' pids and its directory, and waits to be killed.
#[test]
#[ignore = "run by a_cluster_never_dropped_is_removed_when_its_process_dies"]
fn start_a_cluster_and_wait_to_be_killed() {
    if std::env::var_os(OWNER_VAR).is_none() {
        return;
    }
    let spec = ClusterSpec {
        replicas: 0,
        ready_timeout_ms: READY_TIMEOUT_MS,
        ..ClusterSpec::default()
    };
    let mut cluster = LocalCluster::up(&spec).expect("cluster up");
    cluster.set_remove_on_drop(true).expect("the reaper starts");
    let pids: Vec<String> = cluster
        .ports()
        .iter()
        .map(|&p| cluster.pid(p).expect("a pid").to_string())
        .collect();
    // The directory last, on its own line: it may hold spaces.
    println!("\nPIDS {}\nDIR {}", pids.join(" "), cluster.dir().display());
    std::mem::forget(cluster);
    std::thread::sleep(Duration::from_secs(600));
}

/// A cluster kept past its owner (in a `static`, or an owner killed by a signal, which runs
/// no destructor) is still removed: its reaper sees the owner's end and stops the nodes and
/// deletes the directory. The owner here is a child process killed with SIGKILL.
#[test]
fn a_cluster_never_dropped_is_removed_when_its_process_dies() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let _limit = time_limit();
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "start_a_cluster_and_wait_to_be_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(OWNER_VAR, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the owner process");
    let mut lines = std::io::BufReader::new(owner.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    let pids_line = lines.find(|l| l.starts_with("PIDS "));
    let dir_line = lines.next().filter(|l| l.starts_with("DIR "));
    // The owner dies without dropping anything: no destructor, no atexit handler runs.
    owner.kill().unwrap();
    let output = owner.wait_with_output().unwrap();
    let (Some(pids_line), Some(dir_line)) = (pids_line, dir_line) else {
        panic!(
            "the owner did not print its cluster before it was killed; its stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let line = format!("{pids_line}, {dir_line}");
    let dir = std::path::PathBuf::from(&dir_line["DIR ".len()..]);
    let pids: Vec<u32> = pids_line["PIDS ".len()..]
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "{line}");
    for &pid in &pids {
        assert!(
            gone_soon(pid),
            "node pid {pid} still runs {GONE_LIMIT:?} after its owner was killed ({line})"
        );
    }
    let deadline = Instant::now() + GONE_LIMIT;
    while dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !dir.exists(),
        "the reaper removed the directory {} of the killed owner's cluster",
        dir.display()
    );
}
