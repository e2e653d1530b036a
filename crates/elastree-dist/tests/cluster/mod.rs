//! The local clusters the tests run against: the one every test of a test binary shares
//! ([`shared`]), for tests that only use indexes of their own names, or one of a test's own
//! ([`start`]) for tests that kill, add or stop nodes or move slots by hand. Both are removed
//! when the process ends, also on a panic; a test's own also when it is dropped.
//!
//! Every connection opened here has connect, read and write timeouts, and every wait has a
//! deadline: a broken cluster fails a test with a message, it never hangs it.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use elastree_dist::local::LocalCluster;
use elastree_dist::{DistOptions, RouterOptions, TopEntry};
// Each test binary uses some of these (every binary compiles this module).
#[allow(unused_imports)]
pub use elastree_testkit::cluster::{seeds, shared, start, start_with_node_timeout};

/// The connect, read and write timeout of the tests' own connections to a node: far above
/// what a node takes to answer on a loaded machine, so it only ends a hang.
pub const NODE_IO_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a test waits for a condition (a thread's progress, a count) before it fails:
/// far above what the condition takes on a loaded machine.
pub const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// How long past its own operation deadline a client may take to return its typed error
/// before a test calls it a hang: far above what a loaded machine adds, far below the
/// 10-minute freeze or the stopped cluster a hung client would wait out. Only this upper
/// bound and the lower one (the client retried until its deadline) are asserted; neither
/// depends on the schedule.
pub const PAST_DEADLINE: Duration = WAIT_LIMIT;

/// Between two attempts of [`retried`] or two polls of [`wait_until`]: the attempt count
/// does not matter, only the deadline does.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// A name no other index on the cluster has.
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Options for a test index: small nodes so that splits, posts and merges happen often.
pub fn options(name: &str, unique: bool, capacity: usize) -> DistOptions {
    DistOptions {
        name: name.into(),
        unique,
        node_capacity: capacity,
        max_key_len: 64,
        subtrees_per_master: 2,
        subtree_levels: None,
        auto_rebalance: true,
        scan_chunk: 7,
        // Deadlines for a machine whose cores are busy elsewhere: they bound a hang, and a
        // healthy operation never comes near them (a WAIT returns as soon as the replica
        // has the write).
        router: RouterOptions {
            op_timeout: Duration::from_secs(20),
            replica_timeout: Duration::from_secs(30),
            ..RouterOptions::default()
        },
    }
}

/// Big-endian bytes of `i`: keys that sort like the integers.
pub fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The masters' ports, or a panic that says why they could not be read.
pub fn masters(cluster: &LocalCluster) -> Vec<u16> {
    cluster.masters().unwrap_or_else(|e| {
        panic!(
            "reading the masters of the cluster in {:?}: {e}",
            cluster.dir()
        )
    })
}

/// The masters' addresses, as `DistIndex::move_subtree` takes them.
pub fn master_addrs(cluster: &LocalCluster) -> Vec<String> {
    masters(cluster)
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect()
}

/// A plain connection to the node on `port`, with [`NODE_IO_TIMEOUT`] to connect, read and
/// write.
pub fn node(port: u16) -> redis::Connection {
    try_node(port).unwrap_or_else(|e| panic!("connecting to the node on port {port}: {e}"))
}

/// [`node`], or the error.
pub fn try_node(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(NODE_IO_TIMEOUT)?;
    con.set_read_timeout(Some(NODE_IO_TIMEOUT))?;
    con.set_write_timeout(Some(NODE_IO_TIMEOUT))?;
    Ok(con)
}

/// How many keys on the cluster's masters match `pattern` (KEYS, fine for test sizes).
pub fn keys_matching(cluster: &LocalCluster, pattern: &str) -> usize {
    masters(cluster)
        .into_iter()
        .map(|port| {
            let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
                .arg(pattern)
                .query(&mut node(port))
                .unwrap_or_else(|e| panic!("KEYS {pattern} on the node on port {port}: {e}"));
            keys.len()
        })
        .sum()
}

/// Calls the library function `function` on the sub-tree root `root` of tag `tag` (its meta
/// key declares the slot; the root id goes as its 4 bytes), then `args`, on whichever master
/// owns the tag (the others redirect): what a client sends, for tests that must reach past
/// the client. Panics with every master's answer if none of them returns a reply.
pub fn fcall(
    cluster: &LocalCluster,
    tag: &str,
    function: &str,
    root: u64,
    args: &[&[u8]],
) -> redis::Value {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(function)
        .arg(1)
        .arg(format!("{tag}:m"))
        .arg(tag)
        .arg(&(root as u32).to_be_bytes()[..]);
    for a in args {
        cmd.arg(*a);
    }
    let mut errors = Vec::new();
    for port in masters(cluster) {
        let reply = try_node(port).and_then(|mut con| cmd.query::<redis::Value>(&mut con));
        match reply {
            Ok(value) => return value,
            Err(e) => errors.push(format!("port {port}: {e}")),
        }
    }
    panic!(
        "FCALL {function} on root {root} of tag {tag} with args {:02x?}: no master returned a \
         reply; each master's error: {errors:?}",
        args
    )
}

/// Polls `done` until it returns true or [`WAIT_LIMIT`] passes, then panics saying what was
/// awaited (`what`) and the last state `state` describes.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool, state: impl Fn() -> String) {
    let deadline = Instant::now() + WAIT_LIMIT;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "waited {WAIT_LIMIT:?} for {what}; {}",
            state()
        );
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Waits until `count()` reaches `target` and returns true; returns `count() >= target`
/// at once when `give_up()` says the counting threads are done (finished early or failed).
/// Panics, naming `what`, if the count does not move for [`WAIT_LIMIT`]: the deadline runs
/// from the last progress, so a slow machine only makes the wait longer, a hang fails it.
pub fn wait_for_progress(
    what: &str,
    target: u64,
    count: impl Fn() -> u64,
    give_up: impl Fn() -> bool,
) -> bool {
    let mut last = count();
    let mut deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let now = count();
        if now >= target {
            return true;
        }
        if give_up() {
            return count() >= target;
        }
        if now != last {
            last = now;
            deadline = Instant::now() + WAIT_LIMIT;
        }
        assert!(
            Instant::now() < deadline,
            "waited for {what}: the count stayed at {now} (of {target}) for {WAIT_LIMIT:?}"
        );
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Waits until the writers' `progress` reaches `target` (as [`wait_for_progress`]); if they
/// all end first, re-raises the panic of the one that failed, or panics saying how far they
/// got (`what` names the point they should have reached).
pub fn writers_reach<T>(
    what: &str,
    target: u64,
    progress: &AtomicU64,
    writers: &mut Vec<std::thread::ScopedJoinHandle<'_, T>>,
) {
    let reached = wait_for_progress(
        what,
        target,
        || progress.load(Ordering::Relaxed),
        || writers.iter().all(|w| w.is_finished()),
    );
    if !reached {
        for w in writers.drain(..) {
            joined(w);
        }
        panic!(
            "the writers ended after {} inserts, before {what}",
            progress.load(Ordering::Relaxed)
        );
    }
}

/// `index` passes `check()` and holds `len` pairs; `when` says at what point of the test
/// (for the failure message).
pub fn assert_sound(index: &elastree_dist::DistIndex, when: &str, len: usize) {
    index
        .try_check()
        .unwrap_or_else(|e| panic!("check() {when}: {e}; stats {:?}", index.stats()));
    let got = index
        .try_len()
        .unwrap_or_else(|e| panic!("len() {when}: {e}"));
    assert_eq!(got, len, "len() {when}");
}

/// The first sub-tree of `index` (named `name`) in its top, and its hash tag.
pub fn first_subtree(index: &elastree_dist::DistIndex, name: &str) -> (TopEntry, String) {
    let entry = index
        .top_entries()
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("index {name} has a sub-tree"));
    let tag = format!("{{et:{name}:{}}}", entry.token);
    (entry, tag)
}

/// `op()`'s first success, retrying failures for up to [`WAIT_LIMIT`] (for a client with a
/// deliberately short operation timeout, whose setup a busy machine may make time out); panics
/// with the last error, naming `what`, after that.
pub fn retried<T, E: std::fmt::Display>(what: &str, mut op: impl FnMut() -> Result<T, E>) -> T {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        match op() {
            Ok(value) => return value,
            Err(e) if Instant::now() >= deadline => {
                panic!("{what} kept failing for {WAIT_LIMIT:?}; the last error: {e}")
            }
            Err(_) => std::thread::sleep(POLL_INTERVAL),
        }
    }
}

/// The result of a scoped thread; its panic, if it panicked, goes on with the original
/// message (a plain `unwrap` would only say `Any { .. }`).
pub fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
