//! The SB-tree's hot paths on time-series keys, for profiling and instruction counting:
//! `valgrind --tool=callgrind target/release/examples/sbtree_paths 1000000` or
//! `perf record target/release/examples/sbtree_paths`. Timings on a shared machine drift;
//! instruction counts and profiles of one build against another do not.
//!
//! Arguments: `[keys] [kind] [phases]` (default 10000000 sbtree all): `phases` is `load`,
//! `scan` (load, then 100-key scans) or `all` (load, lookups, scans). Environment:
//! `DELAY=f` loads `tsensor:f` (that fraction of keys 16 to 16,384 keys late);
//! `THREADS=n` loads on `n` threads taking batches of 256 keys in arrival order
//! (`SEPARATE=1`: each thread loads an index of its own, sharing nothing with the others,
//! with the first `keys / n` keys, and the run ends after the load); `YIELD=1`
//! has each yield after every batch (under valgrind, which runs one thread at a time, the
//! threads then take turns batch by batch, as they interleave on two cores);
//! `RUN_BLOCKS=b` sets the SB-tree's blocks per run (its segment size), `FANOUT=f` its search
//! layer's fan-out. The CPU
//! time per key of each inserting thread and of the maintenance thread over the load goes
//! to standard error (Linux).

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use elastree::{Direction, Index, IndexBuilder, IndexKind, KeyLen, SbTreeOptions};
use elastree_bench::keys::{Key, KeySetKind};

/// A small xorshift generator for the probe positions (repeatable, no statistics needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `n` keys of the benchmark's `tsensor` set with a fraction `delay` of them late, as big-endian
/// bytes in arrival order.
fn keys(n: usize, delay: f64) -> Vec<[u8; 8]> {
    let set = KeySetKind::tsensor(delay)
        .expect("DELAY in [0, 1)")
        .generate(n, 1);
    (0..set.len())
        .map(|i| match set.key(i) {
            Key::U64(key) => key.to_be_bytes(),
            Key::Bytes(_) => unreachable!("tsensor keys are u64"),
        })
        .collect()
}

/// The CPU seconds of the thread whose `/proc` directory is `dir` (its scheduler's count of
/// nanoseconds on a CPU), and its name (Linux; `None` elsewhere).
fn thread_cpu(dir: &std::path::Path) -> Option<(String, f64)> {
    let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let name = std::fs::read_to_string(dir.join("comm")).ok()?;
    let ns = stat.split(' ').next()?.parse::<f64>().ok()?;
    Some((name.trim().to_string(), ns / 1e9))
}

/// The CPU seconds of every thread of the process now, by name.
fn threads_cpu() -> Vec<(String, f64)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks.filter_map(|t| thread_cpu(&t.ok()?.path())).collect()
}

/// Loads `keys` (tid = position) on `threads` threads; returns Mops/s and the CPU seconds
/// each inserting thread used (read as it ends).
fn load(index: &dyn Index, keys: &[[u8; 8]], threads: usize) -> (f64, Vec<f64>) {
    let start = Instant::now();
    let mut cpu = Vec::new();
    let own = || thread_cpu(std::path::Path::new("/proc/thread-self")).map_or(0.0, |c| c.1);
    if threads == 1 {
        let before = own();
        for (tid, key) in keys.iter().enumerate() {
            index.insert(key, tid as u64).expect("insert");
        }
        cpu.push(own() - before);
    } else {
        let next = AtomicUsize::new(0);
        let yield_batches = std::env::var_os("YIELD").is_some();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        loop {
                            let first = next.fetch_add(256, Ordering::Relaxed);
                            if first >= keys.len() {
                                break;
                            }
                            for (tid, key) in keys.iter().enumerate().skip(first).take(256) {
                                index.insert(key, tid as u64).expect("insert");
                            }
                            if yield_batches {
                                std::thread::yield_now();
                            }
                        }
                        own()
                    })
                })
                .collect();
            cpu.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().expect("an inserting thread")),
            );
        });
    }
    (keys.len() as f64 / start.elapsed().as_secs_f64() / 1e6, cpu)
}

/// `threads` indexes of `kind`, each loaded by a thread of its own with `keys` (tid =
/// position), all at once; returns the total Mops/s.
fn load_separately(kind: IndexKind, keys: &[[u8; 8]], threads: usize) -> f64 {
    let indexes: Vec<Box<dyn Index>> = (0..threads)
        .map(|_| builder(kind).build().expect("build"))
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for index in &indexes {
            s.spawn(move || {
                for (tid, key) in keys.iter().enumerate() {
                    index.insert(key, tid as u64).expect("insert");
                }
            });
        }
    });
    (keys.len() * threads) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// A builder of `kind` for 8-byte keys; an SB-tree's `run_blocks` and search-layer fan-out
/// from the environment's `RUN_BLOCKS` and `FANOUT` when set.
fn builder(kind: IndexKind) -> IndexBuilder {
    let builder = IndexBuilder::new(kind).key_len(KeyLen::Fixed(8));
    if kind != IndexKind::SbTree {
        return builder;
    }
    let env = |name: &str| std::env::var(name).ok().map(|v| v.parse().expect(name));
    let default = SbTreeOptions::default();
    builder.with_kind(SbTreeOptions {
        run_blocks: env("RUN_BLOCKS").unwrap_or(default.run_blocks),
        fanout: env("FANOUT").unwrap_or(default.fanout),
        ..default
    })
}

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let n: usize = arg(1).and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    let kind: IndexKind = arg(2).map_or(IndexKind::SbTree, |s| s.parse().expect("a kind"));
    let phases = arg(3).unwrap_or_else(|| "all".to_string());
    let env = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<f64>().ok());
    let keys = keys(n, env("DELAY").unwrap_or(0.0));
    let threads = env("THREADS").map_or(1, |t| t as usize);
    if std::env::var_os("SEPARATE").is_some() {
        let mops = load_separately(kind, &keys[..keys.len() / threads], threads);
        println!("{kind}: {threads} separate indexes, load {mops:.2} Mops/s in all");
        return;
    }
    let index = builder(kind).build().expect("build");
    let maintainer_before: f64 = threads_cpu()
        .iter()
        .filter(|(name, _)| name.starts_with("sbtree-maint"))
        .map(|c| c.1)
        .sum();
    let (loaded, inserters) = load(&*index, &keys, threads);
    let maintainer: f64 = threads_cpu()
        .iter()
        .filter(|(name, _)| name.starts_with("sbtree-maint"))
        .map(|c| c.1)
        .sum::<f64>()
        - maintainer_before;
    index.quiesce().expect("maintenance");
    // CPU nanoseconds per key of the inserting threads and of the maintenance thread (the
    // background conversions), over the load.
    let per_key = |secs: f64| secs * 1e9 / keys.len() as f64;
    let inserting: Vec<String> = inserters
        .iter()
        .map(|&s| format!("{:.1}", per_key(s)))
        .collect();
    eprintln!(
        "cpu ns/key: inserting threads [{}], maintenance thread {:.1}",
        inserting.join(", "),
        per_key(maintainer)
    );
    print!("{kind}: load {loaded:.2} Mops/s");
    let mut rng = Rng(99);
    let probes: Vec<&[u8; 8]> = (0..1_000_000)
        .map(|_| &keys[(rng.next() % keys.len() as u64) as usize])
        .collect();
    if phases == "all" {
        let start = Instant::now();
        let hits = probes
            .iter()
            .filter(|k| index.get(&k[..]).expect("get").is_some())
            .count();
        assert_eq!(hits, probes.len(), "every key is found");
        let mops = probes.len() as f64 / start.elapsed().as_secs_f64() / 1e6;
        print!(", lookup {mops:.2} Mops/s");
    }
    if phases != "load" {
        let start = Instant::now();
        let mut seen = 0;
        for key in probes.iter().take(200_000) {
            let all = Bound::Unbounded;
            let visit = &mut |_: &[u8], tid: u64| {
                std::hint::black_box(tid);
            };
            let from = Bound::Included(&key[..]);
            seen += index
                .scan(from, all, Direction::Ascending, 100, visit)
                .expect("scan");
        }
        let mkeys = seen as f64 / start.elapsed().as_secs_f64() / 1e6;
        print!(", 100-key scans {mkeys:.2} M keys/s");
    }
    let bytes = index.memory().total() as f64 / keys.len() as f64;
    println!(", {bytes:.1} bytes/key");
    if let Some(stats) = index.stats_as::<elastree::sbtree::SbTreeStats>() {
        println!("{stats:?}");
    }
}
