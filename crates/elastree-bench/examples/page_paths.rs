//! The B+-tree's hot paths on variable-length keys (load, lookup, 15-key scan), on one of the
//! benchmark's key sets, for instruction counting and profiling:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='page_paths::lookups' \
//!     target/release/examples/page_paths email 200000 prefix-split
//! ```
//!
//! Arguments: `[key set] [keys] [pages: base|prefix|prefix-split|btreemap] [rounds] [mid-key
//! bytes: 4|8] [phases]` (default `email 200000 prefix-split 1 8 lookup,scan`; the load always
//! runs); environment `LEAF_CAP`: the most entries of a leaf, `SORTED`: load the keys in
//! ascending order. Each phase is a function of its own (`load`, `lookups`, `scans`; with
//! `btreemap`, `std::collections::BTreeMap<Vec<u8>, u64>` instead of the tree: `map_load`,
//! `map_lookups`, `map_scans`), so `--toggle-collect` counts one of them; timings are printed
//! too, for a quick look (on this shared machine, compare versions by instruction counts).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Instant;

use elastree::{BTreeOptions, Direction, Index, IndexBuilder, KeyLen, MidWidth, PageOrganization};
use elastree_bench::keys::KeySetKind;

fn main() {
    let mut args = std::env::args().skip(1);
    let kind: KeySetKind = args
        .next()
        .map_or(Ok(KeySetKind::Email), |s| s.parse())
        .expect("a key set");
    let n: usize = args.next().map_or(200_000, |s| s.parse().expect("keys"));
    let pages_arg = args.next();
    let map_only = pages_arg.as_deref() == Some("btreemap");
    let pages: PageOrganization = match pages_arg {
        Some(s) if !map_only => s.parse().expect("a page organization"),
        _ => PageOrganization::PrefixSplit,
    };
    let rounds: usize = args.next().map_or(1, |s| s.parse().expect("rounds"));
    let mid_key = match args.next().as_deref() {
        Some("4") => MidWidth::Four,
        None | Some("8") => MidWidth::Eight,
        Some(other) => panic!("mid-key bytes are 4 or 8, not {other}"),
    };
    let phases = args.next().unwrap_or_else(|| "lookup,scan".into());
    let (lookup_rounds, scan_rounds) = (
        if phases.contains("lookup") { rounds } else { 0 },
        if phases.contains("scan") { rounds } else { 0 },
    );
    let keys = kind.generate(n, 42);
    let key_len = match kind.key_len() {
        Some(8) => KeyLen::Fixed(8),
        Some(16) => KeyLen::Fixed(16),
        _ => KeyLen::Variable,
    };
    let options = BTreeOptions {
        mid_key,
        ..BTreeOptions::default().pages(pages)
    };
    let mut builder = IndexBuilder::new(options).key_len(key_len);
    // Environment `LEAF_CAP`: the most entries of a leaf (the tree's default without it).
    if let Ok(entries) = std::env::var("LEAF_CAP") {
        builder = builder.leaf_capacity(entries.parse().expect("LEAF_CAP: entries"));
    }
    let index = builder.build().expect("build");
    let mut bytes: Vec<Vec<u8>> = (0..keys.len()).map(|i| keys.key(i).to_bytes()).collect();
    // Environment `SORTED`: load the keys in ascending order (an append-only stream).
    if std::env::var_os("SORTED").is_some() {
        bytes.sort_unstable();
    }
    let secs = |start: Instant| start.elapsed().as_secs_f64();
    if map_only {
        run_map(kind.name(), &bytes, lookup_rounds, scan_rounds);
        return;
    }

    let start = Instant::now();
    load(&*index, &bytes);
    let load_s = secs(start);
    // Lookups and scans in an order unrelated to the load's.
    let order: Vec<usize> = (0..n).map(|i| (i * 7_919 + 13) % n).collect();
    let start = Instant::now();
    let mut hits = 0;
    for _ in 0..lookup_rounds {
        hits += lookups(&*index, &bytes, &order);
    }
    let lookup_s = secs(start);
    let start = Instant::now();
    let mut visited = 0;
    for _ in 0..scan_rounds {
        visited += scans(&*index, &bytes, &order);
    }
    let scan_s = secs(start);
    let memory = index.memory();
    println!(
        "{} {n} keys, {pages}, {}-byte mid-keys: load {:.3} Mops/s, lookup {:.3} Mops/s ({hits} hits), scan {:.3} M keys/s; {:.1} B/key ({:.2} inner)",
        kind.name(),
        mid_key.bytes(),
        n as f64 / load_s / 1e6,
        (n * lookup_rounds) as f64 / lookup_s / 1e6,
        visited as f64 / scan_s / 1e6,
        memory.total() as f64 / n as f64,
        memory.inner as f64 / n as f64,
    );
}

#[inline(never)]
fn load(index: &dyn Index, keys: &[Vec<u8>]) {
    for (tid, key) in keys.iter().enumerate() {
        index.insert(key, tid as u64).expect("insert");
    }
}

#[inline(never)]
fn lookups(index: &dyn Index, keys: &[Vec<u8>], order: &[usize]) -> usize {
    order
        .iter()
        .filter(|&&i| index.get(&keys[i]).expect("get") == Some(i as u64))
        .count()
}

#[inline(never)]
fn scans(index: &dyn Index, keys: &[Vec<u8>], order: &[usize]) -> usize {
    let mut visited = 0;
    for &i in order.iter().step_by(4) {
        let mut sum = 0u64;
        visited += index
            .scan(
                Bound::Included(&keys[i]),
                Bound::Unbounded,
                Direction::Ascending,
                15,
                &mut |key, tid| sum = sum.wrapping_add(tid ^ key.len() as u64),
            )
            .expect("scan");
        std::hint::black_box(sum);
    }
    visited
}

/// The same phases on `BTreeMap<Vec<u8>, u64>`, the benchmark's reference.
fn run_map(name: &str, bytes: &[Vec<u8>], lookup_rounds: usize, scan_rounds: usize) {
    let n = bytes.len();
    let secs = |start: Instant| start.elapsed().as_secs_f64();
    let start = Instant::now();
    let map = map_load(bytes);
    let load_s = secs(start);
    let order: Vec<usize> = (0..n).map(|i| (i * 7_919 + 13) % n).collect();
    let start = Instant::now();
    let mut hits = 0;
    for _ in 0..lookup_rounds {
        hits += map_lookups(&map, bytes, &order);
    }
    let lookup_s = secs(start);
    let start = Instant::now();
    let mut visited = 0;
    for _ in 0..scan_rounds {
        visited += map_scans(&map, bytes, &order);
    }
    let scan_s = secs(start);
    println!(
        "{name} {n} keys, BTreeMap: load {:.3} Mops/s, lookup {:.3} Mops/s ({hits} hits), scan {:.3} M keys/s",
        n as f64 / load_s / 1e6,
        (n * lookup_rounds) as f64 / lookup_s / 1e6,
        visited as f64 / scan_s / 1e6,
    );
}

#[inline(never)]
fn map_load(keys: &[Vec<u8>]) -> BTreeMap<Vec<u8>, u64> {
    let mut map = BTreeMap::new();
    for (tid, key) in keys.iter().enumerate() {
        map.insert(key.clone(), tid as u64);
    }
    map
}

#[inline(never)]
fn map_lookups(map: &BTreeMap<Vec<u8>, u64>, keys: &[Vec<u8>], order: &[usize]) -> usize {
    order
        .iter()
        .filter(|&&i| map.get(&keys[i]) == Some(&(i as u64)))
        .count()
}

#[inline(never)]
fn map_scans(map: &BTreeMap<Vec<u8>, u64>, keys: &[Vec<u8>], order: &[usize]) -> usize {
    let mut visited = 0;
    for &i in order.iter().step_by(4) {
        let mut sum = 0u64;
        let from: &[u8] = &keys[i];
        for (key, tid) in map
            .range::<[u8], _>((Bound::Included(from), Bound::Unbounded))
            .take(15)
        {
            sum = sum.wrapping_add(tid ^ key.len() as u64);
            visited += 1;
        }
        std::hint::black_box(sum);
    }
    visited
}
