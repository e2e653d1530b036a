//! The local-cluster tooling against real `redis-server` processes: start, inspect, write
//! through every master, grow by one master, fail a master over, stop.
//!
//! Needs `redis-server` and `redis-cli` on PATH (scripts/install-deps.sh installs them).
//! Ports are chosen automatically, so this runs next to other clusters on the machine.

use std::time::{Duration, Instant};

use elastree_dist::local::{ClusterSpec, LocalCluster, Role};

/// A connection to one node with timeouts, so a broken cluster fails the test instead of
/// hanging it.
fn connect(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let con = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    con
}

/// A key whose hash slot `port` owns, found by asking the node (CLUSTER KEYSLOT) and
/// comparing with its own slot ranges (CLUSTER SHARDS would do too; CLUSTER NODES is
/// enough here).
fn key_owned_by(port: u16) -> String {
    let mut con = connect(port);
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut con).unwrap();
    let me = nodes.lines().find(|l| l.contains("myself")).unwrap();
    let ranges: Vec<(u16, u16)> = me
        .split_whitespace()
        .skip(8)
        .filter(|s| !s.starts_with('['))
        .map(|s| match s.split_once('-') {
            Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
            None => (s.parse().unwrap(), s.parse().unwrap()),
        })
        .collect();
    for i in 0.. {
        let key = format!("k{i}");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut con)
            .unwrap();
        if ranges.iter().any(|&(a, b)| a <= slot && slot <= b) {
            return key;
        }
    }
    unreachable!()
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

/// Whether the process `pid` is gone within 5 s (a killed process takes a moment to exit).
fn gone_soon(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    gone(pid)
}

#[test]
fn up_status_write_grow_failover_down() {
    let t0 = Instant::now();
    let spec = ClusterSpec::default();
    let mut cluster = LocalCluster::up(&spec).expect("cluster up");
    cluster.set_remove_on_drop(true);
    eprintln!("up in {:?}", t0.elapsed());
    assert!(spec.dir.join("cluster.json").exists());

    // Six nodes, all alive, the cluster ok; three masters with a replica each.
    let status = cluster.status().unwrap();
    eprintln!("{status}");
    assert_eq!(status.nodes.len(), 6);
    assert_eq!(status.alive(), 6);
    assert!(status.is_ok(), "{status}");
    let masters = cluster.masters().unwrap();
    assert_eq!(masters.len(), 3);
    let slots: usize = status.nodes.iter().map(|n| n.slots).sum();
    assert_eq!(slots, 16384);
    for n in &status.nodes {
        match n.role {
            Role::Master => assert!(n.slots > 0 && n.master.is_none(), "{status}"),
            Role::Replica => assert!(masters.contains(&n.master.unwrap()), "{status}"),
        }
    }
    let shown = status.to_string();
    assert!(shown.contains("cluster_state: ok (6 nodes, 6 alive, 3 masters own slots)"));
    assert!(masters
        .iter()
        .any(|p| cluster.seed() == format!("127.0.0.1:{p}")));

    // Another process can open the cluster from its directory.
    let opened = LocalCluster::open(&spec.dir).unwrap();
    assert_eq!(opened.ports(), cluster.ports());
    drop(opened);
    assert!(
        cluster.status().unwrap().is_ok(),
        "dropping an opened cluster stops nothing"
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
            .unwrap();
        let got: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        assert_eq!(got, format!("v{m}"));
        keys.push((key, format!("v{m}")));
    }

    // Grow by one master: four masters own slots and the new one has its share.
    let t = Instant::now();
    let new = cluster.add_master().unwrap();
    eprintln!("add_master in {:?}", t.elapsed());
    let masters = cluster.masters().unwrap();
    assert_eq!(masters.len(), 4, "{}", cluster.status().unwrap());
    assert!(masters.contains(&new));
    let status = cluster.status().unwrap();
    assert!(status.is_ok(), "{status}");
    let new_slots = status.nodes.iter().find(|n| n.port == new).unwrap().slots;
    assert!(new_slots > 16384 / 4 - 100, "{status}");
    assert_eq!(LocalCluster::open(&spec.dir).unwrap().ports().len(), 7);

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
        .unwrap();
    let heirs = replicas_of(&status, victim);
    let victim_pid = cluster.pid(victim).unwrap();
    let t = Instant::now();
    cluster.kill(victim).unwrap();
    assert!(gone_soon(victim_pid));
    cluster.wait_for_failover(Duration::from_secs(30)).unwrap();
    eprintln!("failover in {:?}", t.elapsed());
    let masters = cluster.masters().unwrap();
    assert_eq!(masters.len(), 4);
    assert!(!masters.contains(&victim));
    assert!(
        heirs.iter().any(|h| masters.contains(h)),
        "one of {heirs:?} was promoted: {}",
        cluster.status().unwrap()
    );
    let status = cluster.status().unwrap();
    assert!(status.is_ok(), "{status}");
    let dead = status.nodes.iter().find(|n| n.port == victim).unwrap();
    assert!(!dead.alive);
    assert!(shown_has_dead_row(&status.to_string(), victim));
    assert!(
        cluster.kill(victim).is_err(),
        "a dead node cannot be killed again"
    );
    assert!(cluster.kill(1).is_err(), "not a port of this cluster");

    // The keys written before survive rebalance and failover (ask whoever owns them now).
    for (key, value) in &keys {
        let mut found = None;
        for &m in &masters {
            let got: Option<String> = redis::cmd("GET")
                .arg(key)
                .query(&mut connect(m))
                .unwrap_or(None);
            if got.is_some() {
                found = got;
            }
        }
        assert_eq!(found.as_ref(), Some(value), "{key}");
    }

    // Down stops every process it started and removes the state file.
    let pids: Vec<u32> = cluster
        .ports()
        .iter()
        .map(|&p| cluster.pid(p).unwrap())
        .collect();
    let dir = cluster.dir().to_path_buf();
    cluster.down_with(true).unwrap();
    for pid in pids {
        assert!(gone_soon(pid), "pid {pid} still runs");
    }
    assert!(!dir.exists());
    eprintln!("whole test in {:?}", t0.elapsed());
}

fn shown_has_dead_row(table: &str, port: u16) -> bool {
    table
        .lines()
        .any(|l| l.starts_with(&port.to_string()) && l.split_whitespace().nth(2) == Some("no"))
}

#[test]
fn drop_with_remove_on_drop_stops_the_processes_even_on_panic() {
    let spec = ClusterSpec {
        replicas: 0,
        ..ClusterSpec::default()
    };
    let dir = spec.dir.clone();
    let pids = std::panic::catch_unwind(|| {
        let mut cluster = LocalCluster::up(&spec).expect("cluster up");
        cluster.set_remove_on_drop(true);
        let pids: Vec<u32> = cluster
            .ports()
            .iter()
            .map(|&p| cluster.pid(p).unwrap())
            .collect();
        assert_eq!(pids.len(), 3);
        std::panic::panic_any(pids);
    })
    .unwrap_err()
    .downcast::<Vec<u32>>()
    .unwrap();
    for &pid in pids.iter() {
        assert!(gone_soon(pid), "pid {pid} still runs");
    }
    assert!(!dir.exists());
}
