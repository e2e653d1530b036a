//! The SB-tree's hot paths on time-series keys, for profiling and instruction counting:
//! `valgrind --tool=callgrind target/release/examples/sbtree_paths 1000000` or
//! `perf record target/release/examples/sbtree_paths`. Timings on a shared machine drift;
//! instruction counts and profiles of one build against another do not.
//!
//! Arguments: `[keys] [kind] [phases]` (default 10000000 sbtree all): `phases` is `load`,
//! `scan` (load, then 100-key scans) or `all` (load, lookups, scans). Environment:
//! `DELAY=f` loads `tsensor:f` (that fraction of keys 16 to 16,384 keys late);
//! `THREADS=n` loads on `n` threads taking batches of 256 keys in arrival order.

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use elastree::{Direction, Index, IndexBuilder, IndexKind, KeyLen};
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

/// Loads `keys` (tid = position) on `threads` threads; returns Mops/s.
fn load(index: &dyn Index, keys: &[[u8; 8]], threads: usize) -> f64 {
    let start = Instant::now();
    if threads == 1 {
        for (tid, key) in keys.iter().enumerate() {
            index.insert(key, tid as u64).expect("insert");
        }
    } else {
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let first = next.fetch_add(256, Ordering::Relaxed);
                    if first >= keys.len() {
                        break;
                    }
                    for (tid, key) in keys.iter().enumerate().skip(first).take(256) {
                        index.insert(key, tid as u64).expect("insert");
                    }
                });
            }
        });
    }
    keys.len() as f64 / start.elapsed().as_secs_f64() / 1e6
}

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let n: usize = arg(1).and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    let kind: IndexKind = arg(2).map_or(IndexKind::SbTree, |s| s.parse().expect("a kind"));
    let phases = arg(3).unwrap_or_else(|| "all".to_string());
    let env = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<f64>().ok());
    let keys = keys(n, env("DELAY").unwrap_or(0.0));
    let threads = env("THREADS").map_or(1, |t| t as usize);
    let index = IndexBuilder::new(kind)
        .key_len(KeyLen::Fixed(8))
        .build()
        .expect("build");
    let loaded = load(&*index, &keys, threads);
    index.quiesce().expect("maintenance");
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
