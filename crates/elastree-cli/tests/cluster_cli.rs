//! `elastree cluster` through the built binary: up, status, kill with failover, down, and
//! the error for a missing redis-server. Needs `redis-server` and `redis-cli` on PATH.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs `elastree ARGS` and returns its output.
fn elastree(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_elastree"))
        .args(args)
        .output()
        .expect("run elastree")
}

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

/// Stops the cluster if the test fails half-way, so no redis-server outlives it.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.0.join("cluster.json").exists() {
            let dir = self.0.to_str().unwrap();
            elastree(&["cluster", "down", "--purge", "--dir", dir]);
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn up_status_kill_down() {
    let t0 = Instant::now();
    let dir = std::env::temp_dir().join(format!("elastree-cluster-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cleanup = Cleanup(dir.clone());
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
    assert_eq!(pids.len(), 6);

    // A second `up` in the same directory refuses, and changes nothing.
    let out = elastree(&["cluster", "up", "--dir", d, "--base-port", &base_s]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
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
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(&format!("port {base} or its cluster bus port")),
        "{stderr}"
    );
    assert!(!other.join(&base_s).exists());

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
    let out = elastree(&["cluster", "kill", &base_s, "--wait", "30", "--dir", d]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("killed the node on port {base} (pid {})", pids[0])));
    assert!(
        stdout.contains("cluster_state: ok (6 nodes, 5 alive, 3 masters own slots)"),
        "{stdout}"
    );
    assert!(gone(pids[0]));

    let out = elastree(&["cluster", "down", "--dir", d]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("stopped the cluster"), "{stdout}");
    for pid in pids {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(gone(pid), "pid {pid} still runs");
    }
    assert!(!dir.join("cluster.json").exists());
    assert!(
        dir.join(format!("{base}")).join("redis.log").exists(),
        "down keeps the data"
    );

    // Nothing left to manage.
    let out = elastree(&["cluster", "status", "--dir", d]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("no cluster in"), "{stderr}");
    drop(cleanup);
    assert!(!dir.exists());
    eprintln!("whole test in {:?}", t0.elapsed());
}

#[test]
fn missing_redis_server_is_a_clear_error_with_exit_code_2() {
    let dir =
        std::env::temp_dir().join(format!("elastree-cluster-cli-none-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_elastree"))
        .args(["cluster", "up", "--dir", dir.to_str().unwrap()])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("redis-server is not installed"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_few_masters_is_refused_with_exit_code_2() {
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
