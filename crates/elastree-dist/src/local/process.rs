//! The processes and ports of a local cluster: finding the programs, reserving free ports,
//! checking that a PID is still the `redis-server` we started, and signalling it.

use std::collections::BTreeSet;
use std::fs;
use std::net::TcpListener;
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::BUS_PORT_OFFSET;
use crate::error::DistError;

/// Auto-picked client ports come from `AUTO_PORT_LOW..AUTO_PORT_HIGH`, so that their bus
/// ports (+10000) stay below Linux's default ephemeral range (32768..) and the kernel does
/// not hand one of them to an outgoing connection between our check and Redis's bind.
pub(super) const AUTO_PORT_LOW: u16 = 10000;
/// See [`AUTO_PORT_LOW`].
pub(super) const AUTO_PORT_HIGH: u16 = 22000;

/// [`DistError::Missing`] unless `redis-server` and `redis-cli` are on PATH.
pub(super) fn require_programs() -> Result<(), DistError> {
    for program in ["redis-server", "redis-cli"] {
        if !on_path(program) {
            return Err(DistError::Missing { program });
        }
    }
    Ok(())
}

pub(super) fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

pub(super) fn spawn_error(program: &'static str, e: std::io::Error) -> DistError {
    if e.kind() == std::io::ErrorKind::NotFound {
        DistError::Missing { program }
    } else {
        DistError::Local(format!("cannot run {program}: {e}"))
    }
}

/// Ports handed out by [`reserve_ports`] and not yet bound by Redis, so that clusters
/// started in parallel in one process (tests) never get the same ports.
pub(super) static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Reserves `p` within this process if it and its bus port are free.
pub(super) fn try_reserve(p: u16) -> bool {
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
pub(super) fn reserve_ports(n: usize) -> Result<Vec<u16>, DistError> {
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
pub(super) fn release_ports(ports: &[u16]) {
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    for p in ports {
        reserved.remove(p);
    }
}

/// True if nothing listens on `port` of 127.0.0.1 or of every address.
pub(super) fn port_free(port: u16) -> bool {
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
pub(super) fn signal(pid: u32, sig: Signal) -> Result<(), DistError> {
    let raw = i32::try_from(pid).map_err(|_| DistError::Local(format!("bad pid {pid}")))?;
    kill(Pid::from_raw(raw), sig)
        .map_err(|e| DistError::Local(format!("cannot send {sig} to pid {raw}: {e}")))
}

/// Waits until `pid` no longer runs `redis-server` on `port`; false if it still does
/// after `limit`.
pub(super) fn wait_gone(pid: u32, port: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while process_alive(pid, port) {
        if Instant::now() >= deadline {
            return false;
        }
        sleep(Duration::from_millis(20));
    }
    true
}
