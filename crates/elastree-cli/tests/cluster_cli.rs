//! `elastree cluster` through the built binary: up, status, kill with failover, down, and
//! the error for a missing redis-server. Needs `redis-server` and `redis-cli` on PATH.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

use elastree_testkit::{process, time_limit};

mod common;

/// Runs `elastree ARGS` and returns its output (killed, failing the test, if it runs past
/// the child limit).
fn elastree(args: &[&str]) -> Output {
    common::run(args, b"")
}

/// How long the test lets the cluster become healthy, and fail over after a kill: far above
/// what either takes on a loaded machine (seconds).
const WAIT_SECS: &str = "120";

/// How long the test waits for a stopped node's process to be gone.
const EXIT_WAIT: Duration = Duration::from_secs(30);

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// A base port with `n` consecutive free ports whose bus ports (+10000) are free too. The
/// range 22000..22700 keeps the bus ports below the kernel's ephemeral range and away from
/// the automatic ports of the library's own tests (10000..22000); the start depends on the
/// process id so that parallel runs search different places.
fn free_base_port(n: u16) -> u16 {
    let span = 700 - n;
    let start = (std::process::id() % u32::from(span)) as u16;
    (0..span)
        .map(|i| 22000 + (start + i) % span)
        .find(|&base| (base..base + n).all(|p| free(p) && free(p + 10000)))
        .expect("no free ports in 22000..22700")
}

/// The PIDs in the state file.
fn pids(dir: &Path) -> Vec<u32> {
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap()).unwrap();
    state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pid"].as_u64().unwrap() as u32)
        .collect()
}

/// True once `pid` has exited (a zombie waiting for init to reap it counts as exited).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits up to [`EXIT_WAIT`] for `pid` to exit; fails the test naming it and `what` if it
/// does not.
fn wait_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + EXIT_WAIT;
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        gone(pid),
        "pid {pid} ({what}) still runs {EXIT_WAIT:?} later"
    );
}

/// The cleanup shell's script: `$1` is the elastree binary, `$2` the cluster's directory.
/// It waits for end-of-file on its stdin, then stops the cluster and deletes the directory.
const CLEANUP_SCRIPT: &str = r#"
trap '' INT HUP
read -r _
if [ -f "$2/cluster.json" ]; then "$1" cluster down --purge --dir "$2"; fi
rm -rf "$2"
"#;

/// Stops the test's cluster and deletes its directory when dropped (at the end of the test,
/// also when it fails half-way), and when the test process ends without dropping it (the
/// time limit ends the process with `exit`, which runs no destructors; a kill signal), so
/// no redis-server outlives the test: a shell in a process group of its own waits for the
/// end of a pipe only this process writes (close-on-exec, so no node inherits it).
struct Cleanup {
    order: Option<ChildStdin>,
    shell: Child,
}

impl Cleanup {
    fn new(dir: &Path) -> Cleanup {
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(CLEANUP_SCRIPT)
            .arg("elastree-cluster-cli-cleanup")
            .arg(env!("CARGO_BIN_EXE_elastree"))
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the cleanup shell");
        let order = shell.stdin.take();
        Cleanup { order, shell }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // End of file: the shell stops the cluster and deletes its directory.
        drop(self.order.take());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match self.shell.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    eprintln!("the cleanup shell still runs after 2 minutes; leaving it");
                    return;
                }
            }
        }
    }
}

#[test]
fn up_status_kill_down() {
    let _limit = time_limit();
    let t0 = Instant::now();
    let dir = std::env::temp_dir().join(format!("elastree-cluster-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cleanup = Cleanup::new(&dir);
    let d = dir.to_str().unwrap();
    let base = free_base_port(6);
    let base_s = base.to_string();

    let out = elastree(&[
        "cluster",
        "up",
        "--masters",
        "3",
        "--replicas",
        "1",
        "--dir",
        d,
        "--base-port",
        &base_s,
        // Failover is what the test tries: a short node timeout, but not so short that a
        // node starved of CPU for a moment is failed over by mistake.
        "--node-timeout-ms",
        "5000",
        "--wait",
        WAIT_SECS,
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    eprintln!("up in {:?}", t0.elapsed());
    assert!(
        stdout.contains("cluster_state: ok (6 nodes, 6 alive, 3 masters own slots)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("redis-cli -c -p {base}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "elastree shell --index dist --cluster 127.0.0.1:{base}"
        )),
        "{stdout}"
    );
    let pids = pids(&dir);
    assert_eq!(pids.len(), 6, "pids in the state file: {pids:?}");

    // A second `up` in the same directory refuses, and changes nothing.
    let out = elastree(&["cluster", "up", "--dir", d, "--base-port", &base_s]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("already running"), "{stderr}");

    // Another cluster on the same ports is refused before anything starts.
    let other = dir.join("other");
    let out = elastree(&[
        "cluster",
        "up",
        "--dir",
        other.to_str().unwrap(),
        "--base-port",
        &base_s,
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("port {base} or its cluster bus port")),
        "{stderr}"
    );
    assert!(
        !other.join(&base_s).exists(),
        "the refused cluster created {}",
        other.join(&base_s).display()
    );

    let out = elastree(&["cluster", "status", "--dir", d]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("PORT"), "{stdout}");
    for p in base..base + 6 {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&p.to_string()))
            .unwrap_or_else(|| panic!("no row for {p}: {stdout}"));
        assert_eq!(row.split_whitespace().nth(2), Some("yes"), "{row}");
    }

    // Kill the first master and wait for its replica to take over.
    let out = elastree(&["cluster", "kill", &base_s, "--wait", WAIT_SECS, "--dir", d]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("killed the node on port {base} (pid {})", pids[0])),
        "expected the kill of pid {} on port {base}:\n{stdout}",
        pids[0]
    );
    assert!(
        stdout.contains("cluster_state: ok (6 nodes, 5 alive, 3 masters own slots)"),
        "{stdout}"
    );
    // SIGKILL: the process is gone as soon as the kernel has torn it down.
    wait_gone(pids[0], "the killed node");

    let out = elastree(&["cluster", "down", "--dir", d]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("stopped the cluster"), "{stdout}");
    for pid in pids {
        wait_gone(pid, "a node of the stopped cluster");
    }
    assert!(
        !dir.join("cluster.json").exists(),
        "down leaves no state file"
    );
    assert!(
        dir.join(format!("{base}")).join("redis.log").exists(),
        "down keeps the data"
    );

    // Nothing left to manage.
    let out = elastree(&["cluster", "status", "--dir", d]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("no cluster in"), "{stderr}");
    drop(cleanup);
    assert!(!dir.exists(), "{} is removed", dir.display());
    eprintln!("whole test in {:?}", t0.elapsed());
}

#[test]
fn missing_redis_server_is_a_clear_error_with_exit_code_2() {
    let _limit = time_limit();
    let dir =
        std::env::temp_dir().join(format!("elastree-cluster-cli-none-{}", std::process::id()));
    let out = process::output(
        Command::new(env!("CARGO_BIN_EXE_elastree"))
            .args(["cluster", "up", "--dir", dir.to_str().unwrap()])
            .env("PATH", "/nonexistent"),
        b"",
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("redis-server is not installed"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_few_masters_is_refused_with_exit_code_2() {
    let _limit = time_limit();
    let out = elastree(&[
        "cluster",
        "up",
        "--masters",
        "2",
        "--dir",
        "/nonexistent/never",
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("at least 3 masters"), "{stderr}");
}
