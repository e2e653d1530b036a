//! Instructions per call of the function library's hot operations, counted by callgrind
//! inside a redis-server (only `fcallCommand`, so networking and the client are left out;
//! the counts repeat exactly from run to run, unlike timings on a shared machine).
//!
//! ```sh
//! cargo run --release -p elastree-dist --example function_cost -- [KEYS] [CALLS] [CAPACITY]
//! ```
//!
//! It starts `valgrind --tool=callgrind redis-server` on a free port (standalone: the
//! functions do not need a cluster), builds one sub-tree of KEYS random 8-byte keys (default
//! 20000) with nodes of CAPACITY entries (default 25, the paper's arity) through `et_put`,
//! then runs CALLS (default 2000) gets, updates, 50-key ascending scans (CALLS / 10) and
//! inserts of new keys, and prints the instructions per call of each phase. Needs valgrind
//! (with callgrind_control) and redis-server.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const LIBRARY: &str = include_str!("../src/tree.lua");

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mut next = |default: usize| {
        args.next()
            .unwrap_or(Ok(default))
            .map_err(|e| e.to_string())
    };
    let (keys, calls, capacity) = (next(20_000)?, next(2_000)?, next(25)?);
    let dir = std::env::temp_dir().join(format!("elastree-function-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let server = Server::start(&dir, port)?;
    let result = measure(&server, keys, calls, capacity);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let phases = result?;
    println!(
        "function library {}: instructions per call (callgrind, fcallCommand only), one \
         sub-tree of {keys} random 8-byte keys, nodes of {capacity}",
        library_version()
    );
    for (phase, count, per_call) in phases {
        println!("  {phase:<12} {per_call:>10.0}   ({count} calls)");
    }
    Ok(())
}

/// A redis-server under callgrind, killed when dropped.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Server {
    fn start(dir: &Path, port: u16) -> Result<Server, String> {
        let out = dir.join("callgrind.out.%p");
        let child = Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=fcallCommand",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .args(["redis-server", "--port", &port.to_string(), "--save", ""])
            .args(["--appendonly", "no", "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start valgrind (is it installed?): {e}"))?;
        let server = Server {
            child,
            dir: dir.to_path_buf(),
            port,
        };
        let began = Instant::now();
        while server.connection().is_err() {
            if began.elapsed() > Duration::from_secs(60) {
                return Err("redis-server under valgrind did not come up in 60 s".into());
            }
            sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    fn connection(&self) -> Result<redis::Connection, String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .map_err(|e| e.to_string())?;
        let mut con = client.get_connection().map_err(|e| e.to_string())?;
        redis::cmd("PING")
            .query::<String>(&mut con)
            .map_err(|e| e.to_string())?;
        Ok(con)
    }

    /// Asks callgrind to dump its counts since the last dump, named `phase`.
    fn dump(&self, phase: &str) -> Result<(), String> {
        let status = Command::new("callgrind_control")
            .arg(format!("--dump={phase}"))
            .arg(self.child.id().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("callgrind_control: {e}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| "callgrind_control failed".to_string())
    }

    /// The instruction count of the dump named `phase`.
    fn count(&self, phase: &str) -> Result<u64, String> {
        let began = Instant::now();
        loop {
            for entry in std::fs::read_dir(&self.dir).map_err(|e| e.to_string())? {
                let path = entry.map_err(|e| e.to_string())?.path();
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let dumped = text.lines().any(|l| {
                    l.starts_with("desc: Trigger") && l.ends_with(&format!("dump {phase}"))
                });
                if dumped {
                    if let Some(n) = text
                        .lines()
                        .find_map(|l| l.strip_prefix("summary: "))
                        .and_then(|n| n.trim().parse().ok())
                    {
                        return Ok(n);
                    }
                }
            }
            if began.elapsed() > Duration::from_secs(30) {
                return Err(format!("no callgrind dump for {phase}"));
            }
            sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn library_version() -> &'static str {
    LIBRARY
        .lines()
        .find_map(|l| l.strip_prefix("local VERSION = '"))
        .and_then(|l| l.strip_suffix('\''))
        .unwrap_or("?")
}

/// A deterministic stream of 8-byte keys (splitmix64).
fn keys_from(seed: u64) -> impl Iterator<Item = [u8; 8]> {
    let mut x = seed;
    std::iter::repeat_with(move || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)).to_be_bytes()
    })
}

type Phases = Vec<(&'static str, usize, f64)>;

fn measure(server: &Server, keys: usize, calls: usize, capacity: usize) -> Result<Phases, String> {
    let mut con = server.connection()?;
    let q = |e: redis::RedisError| e.to_string();
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query::<String>(&mut con)
        .map_err(q)?;
    let tag = "{et:cost:0}";
    let meta = format!("{tag}:m");
    let root: u32 = redis::cmd("FCALL")
        .arg("et_new_root")
        .arg(1)
        .arg(&meta)
        .arg(tag)
        .query(&mut con)
        .map_err(q)?;
    let root = root.to_be_bytes();
    let cap = capacity.to_string();
    let put = |key: &[u8], tid: u64| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg("et_put")
            .arg(1)
            .arg(&meta)
            .arg(tag)
            .arg(&root[..])
            .arg(key);
        // Never split the root into two sub-trees: one sub-tree that grows levels.
        cmd.arg(&tid.to_be_bytes()[..])
            .arg(&cap)
            .arg("0")
            .arg("u")
            .arg("63");
        cmd
    };
    let stored: Vec<[u8; 8]> = keys_from(7).take(keys).collect();
    for (chunk_no, chunk) in stored.chunks(1000).enumerate() {
        let mut pipe = redis::pipe();
        for (i, k) in chunk.iter().enumerate() {
            pipe.add_command(put(k, (chunk_no * 1000 + i) as u64))
                .ignore();
        }
        pipe.query::<()>(&mut con).map_err(q)?;
    }
    server.dump("load")?;
    let probes: Vec<[u8; 8]> = (0..calls)
        .map(|i| stored[(i * 7919) % stored.len()])
        .collect();
    let mut phases: Vec<(&'static str, usize)> = vec![("load", keys)];
    for k in &probes {
        redis::cmd("FCALL")
            .arg("et_get")
            .arg(1)
            .arg(&meta)
            .arg(tag)
            .arg(&root[..])
            .arg(&k[..])
            .query::<redis::Value>(&mut con)
            .map_err(q)?;
    }
    server.dump("get")?;
    phases.push(("get", calls));
    for (i, k) in probes.iter().enumerate() {
        put(k, u64::MAX - i as u64)
            .query::<redis::Value>(&mut con)
            .map_err(q)?;
    }
    server.dump("update")?;
    phases.push(("update", calls));
    let scans = (calls / 10).max(1);
    for k in probes.iter().take(scans) {
        redis::cmd("FCALL")
            .arg("et_scan")
            .arg(1)
            .arg(&meta)
            .arg(tag)
            .arg(&root[..])
            .arg("a")
            .arg("50")
            .arg("1")
            .arg(&k[..])
            .arg("0")
            .arg("0")
            .arg("")
            .query::<redis::Value>(&mut con)
            .map_err(q)?;
    }
    server.dump("scan50")?;
    phases.push(("scan50", scans));
    for (i, k) in keys_from(99).take(calls).enumerate() {
        put(&k, i as u64)
            .query::<redis::Value>(&mut con)
            .map_err(q)?;
    }
    server.dump("insert")?;
    phases.push(("insert", calls));
    phases
        .into_iter()
        .map(|(phase, count)| Ok((phase, count, server.count(phase)? as f64 / count as f64)))
        .collect()
}
