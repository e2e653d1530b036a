//! Starting nodes: each node's redis.conf, the daemonized redis-server, the first PONG,
//! and joining the nodes with `redis-cli --cluster create`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::probe::command;
use super::process::{process_alive, spawn_error};
use super::{
    ClusterSpec, LocalCluster, NodeRecord, Role, StartError, BUS_PORT_OFFSET, POLL, START_TIMEOUT,
    TOOL_TIMEOUT,
};
use crate::error::DistError;

impl LocalCluster {
    /// Writes each node's configuration, starts it (Redis daemonizes itself), records its
    /// PID and waits until it answers PING. Records each node as soon as its PID is known,
    /// so that a failure part-way kills what was started.
    pub(super) fn start_nodes(&mut self, ports: &[u16]) -> Result<(), StartError> {
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
    pub(super) fn wait_started(&self, port: u16, node_dir: &Path) -> Result<u32, StartError> {
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
    pub(super) fn config(&self, port: u16, node_dir: &Path) -> String {
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
    pub(super) fn create(
        &mut self,
        spec: &ClusterSpec,
        ready_timeout: Duration,
    ) -> Result<(), DistError> {
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

    /// Runs `redis-cli ARGS` with a deadline; its output goes to `DIR/redis-cli-NAME.log`,
    /// whose end is in the error if it fails.
    pub(super) fn tool(&self, name: &str, args: &[&str]) -> Result<(), DistError> {
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
