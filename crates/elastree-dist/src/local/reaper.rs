//! The reaper: a small shell process that removes a local cluster once the process that
//! started it is gone, however it ended.
//!
//! `redis-server` daemonizes, so its nodes outlive the process that started them, and a
//! cluster held in a `static` (the one a test binary shares) is never dropped. The reaper
//! reads a pipe whose only writer is that process (the pipe is close-on-exec, so no node or
//! tool inherits it). When the process exits (normally, by a panic, an abort or a kill
//! signal) the kernel closes the pipe, the reaper reads end-of-file, SIGKILLs every node
//! whose PID file is in the cluster's directory (each checked first, through
//! `/proc/PID/cmdline`, to be a `redis-server` serving that node's port, as `process`
//! checks every PID it signals) and deletes the directory. Told `keep` instead, it exits and
//! leaves the cluster alone. It runs in its own process group, so a Ctrl-C aimed at the
//! terminal's foreground group reaches the owner, and the reaper then cleans up after it.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use super::process::spawn_error;
use crate::error::DistError;

/// The reaper's script; `$1` is the cluster's directory.
const SCRIPT: &str = r#"
trap '' INT HUP
read -r order
[ "$order" = keep ] && exit 0
for pidfile in "$1"/*/redis.pid; do
  [ -f "$pidfile" ] || continue
  port=${pidfile%/redis.pid}
  port=${port##*/}
  pid=$(cat "$pidfile" 2>/dev/null) || continue
  case $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) in
    *redis-server*":$port "*) kill -9 "$pid" 2>/dev/null ;;
  esac
done
rm -rf "$1"
"#;

/// A running reaper; dropping it (or the owner's exit) makes it remove the cluster.
pub(super) struct Reaper {
    /// The write end of the reaper's stdin; closing it is the signal.
    order: Option<ChildStdin>,
    child: Child,
}

impl fmt::Debug for Reaper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reaper(pid {})", self.child.id())
    }
}

impl Reaper {
    /// Starts a reaper for the cluster in `dir`.
    pub(super) fn watch(dir: &Path) -> Result<Reaper, DistError> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("elastree-cluster-reaper")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| spawn_error("sh", e))?;
        let order = child.stdin.take();
        Ok(Reaper { order, child })
    }

    /// Tells the reaper to leave the cluster alone, and waits for it to exit.
    pub(super) fn disarm(mut self) {
        if let Some(mut order) = self.order.take() {
            let _ = order.write_all(b"keep\n");
        }
        let _ = self.child.wait();
    }
}

impl Drop for Reaper {
    /// Closes the pipe, so the reaper removes the cluster (nothing is left of it if the
    /// owner removed it first), and waits for it.
    fn drop(&mut self) {
        drop(self.order.take());
        let _ = self.child.wait();
    }
}
