//! Profiling aid (temporary).
use elastree::{Direction, IndexBuilder, IndexKind, KeyLen};
use std::ops::Bound;
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let kind: IndexKind = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(IndexKind::SbTree);
    let mut x = 0x1234_5678u64;
    let mut ms = 1_704_067_200_000u64;
    let keys: Vec<[u8; 8]> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ms += (x >> 60) % 3;
            ((ms << 16) | (x & 1023)).to_be_bytes()
        })
        .collect();
    let mut keys = keys;
    keys.sort_unstable();
    keys.dedup();
    let index = IndexBuilder::new(kind)
        .key_len(KeyLen::Fixed(8))
        .build()
        .unwrap();
    let t = Instant::now();
    for (tid, k) in keys.iter().enumerate() {
        index.insert(k, tid as u64).unwrap();
    }
    let load = keys.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
    index.quiesce().unwrap();
    if std::env::args().nth(3).as_deref() == Some("load") {
        println!("load {load:.2}");
        return;
    }
    let mut y = 99u64;
    let probes: Vec<usize> = (0..1_000_000)
        .map(|_| {
            y ^= y << 13;
            y ^= y >> 7;
            y ^= y << 17;
            (y % keys.len() as u64) as usize
        })
        .collect();
    let mode = std::env::args().nth(3).unwrap_or_default();
    let t = Instant::now();
    let mut hits = 0;
    let probes_lookup = if mode == "scan" {
        &probes[..1]
    } else {
        &probes[..]
    };
    for &p in probes_lookup {
        hits += index.get(&keys[p]).unwrap().is_some() as usize;
    }
    let lookup = probes_lookup.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
    let t = Instant::now();
    let mut seen = 0;
    for &p in probes.iter().take(200_000) {
        seen += index
            .scan(
                Bound::Included(&keys[p][..]),
                Bound::Unbounded,
                Direction::Ascending,
                100,
                &mut |_, t| {
                    std::hint::black_box(t);
                },
            )
            .unwrap();
    }
    let scan = seen as f64 / t.elapsed().as_secs_f64() / 1e6;
    println!("{kind} n={} load {load:.2} Mops/s lookup {lookup:.2} Mops/s scan100 {scan:.2} Mkeys/s hits {hits} mem {:.1} B/key", keys.len(), index.memory().total() as f64 / keys.len() as f64);
}
