//! Scans of the Bw-tree beside the B+-tree, for instruction counts and scan times:
//! `cargo run --release -p elastree --example bw_scan [btree|bwtree|bwcursor|bwpage|bwlogical]
//! [keys] [scans] [length] [updates]`. Loads `keys` random 8-byte keys (both trees with a
//! fixed 8-byte key length, as the benchmark's rand64), then blindly updates `updates` random
//! keys (deltas on top of the pages), then runs `scans` ascending scans of `length` keys from
//! random keys (`bwcursor`: each read through a new cursor, a batch at a time; `bwpage` and
//! `bwlogical`: requests of `length` keys, 16 per cursor, as the bench's `cursor-update-L`
//! and `logical-update-L`, with physiological or logical cursors), and prints the scans'
//! time on stderr. Environment: `THREADS=T` shares the scans among T threads; `SETTLE=1`
//! looks every key up before the scans, which consolidates the chains the load left (the
//! benchmark's mixes scan a freshly loaded tree, as without it).
//!
//! Only the scans are in `scan_phase`, so callgrind can count them alone:
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*scan_phase*'
//! target/release/examples/bw_scan bwtree 100000 2000 1000 0`.

use std::ops::Bound;

use elastree::bwtree::{BwCursor, BwTreeIndex};
use elastree::{BTreeOptions, BwTreeOptions, Direction, Index, IndexBuilder, IndexOptions, KeyLen};

/// A multiplicative hash: distinct, scattered 8-byte keys.
fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

/// An ascending cursor of `bw` from `start`.
fn open<'t>(bw: &'t BwTreeIndex, start: &[u8]) -> BwCursor<'t> {
    bw.cursor(
        Bound::Included(start),
        Bound::Unbounded,
        Direction::Ascending,
    )
    .expect("cursor")
}

/// Reads the next `len` keys of `cursor` (fewer where its range ends), a batch at a time.
fn read(cursor: &mut BwCursor<'_>, len: usize, visit: &mut dyn FnMut(&[u8], u64)) {
    let mut got = 0;
    while got < len {
        let batch = cursor.next_batch(len - got, visit);
        if batch == 0 {
            break;
        }
        got += batch;
    }
}

/// The scans measured: `scans` scans of `length` keys from pseudo-random loaded keys;
/// returns the sum of the tids visited.
#[inline(never)]
fn scan_phase(
    index: &dyn Index,
    (cursor, paging): (Option<&BwTreeIndex>, Option<bool>),
    n: u64,
    (scans, thread, threads): (u64, u64, u64),
    len: usize,
) -> u64 {
    let mut sum = 0u64;
    if let (Some(bw), Some(physiological)) = (cursor, paging) {
        for s in (thread..scans / 16).step_by(threads as usize) {
            let start = key(s.wrapping_mul(7919) % n);
            let mut c = open(bw, &start);
            c.set_physiological(physiological);
            for _ in 0..16 {
                read(&mut c, len, &mut |_, tid| sum = sum.wrapping_add(tid));
            }
        }
        return sum;
    }
    for s in (thread..scans).step_by(threads as usize) {
        let start = key(s.wrapping_mul(7919) % n);
        let mut visit = |_: &[u8], tid: u64| sum = sum.wrapping_add(tid);
        match cursor {
            Some(bw) => read(&mut open(bw, &start), len, &mut visit),
            None => {
                index
                    .scan(
                        Bound::Included(&start[..]),
                        Bound::Unbounded,
                        Direction::Ascending,
                        len,
                        &mut visit,
                    )
                    .expect("scan");
            }
        }
    }
    sum
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "bwtree".to_string());
    let mut number = |default: u64| args.next().map_or(default, |a| a.parse().expect("number"));
    let (n, scans, len, updates) = (number(100_000), number(2_000), number(1_000), number(0));
    // Fixed 8-byte keys, as the benchmark gives both trees on rand64: the B+-tree then has
    // its sorted-array nodes.
    let options = IndexOptions {
        key_len: KeyLen::Fixed(8),
        ..IndexOptions::default()
    };
    let btree = IndexBuilder::new(BTreeOptions::default())
        .key_len(KeyLen::Fixed(8))
        .build()
        .expect("index");
    let bwtree = BwTreeIndex::new(&options, &BwTreeOptions::default()).expect("index");
    let (index, cursor, paging): (&dyn Index, bool, Option<bool>) = match kind.as_str() {
        "btree" => (&*btree, false, None),
        "bwtree" => (&bwtree, false, None),
        "bwcursor" => (&bwtree, true, None),
        "bwpage" => (&bwtree, true, Some(true)),
        "bwlogical" => (&bwtree, true, Some(false)),
        other => panic!("unknown kind {other}: btree, bwtree, bwcursor, bwpage or bwlogical"),
    };
    for i in 0..n {
        index.insert(&key(i), i).expect("insert");
    }
    for u in 0..updates {
        let i = u.wrapping_mul(104_729) % n;
        index.insert(&key(i), i).expect("update");
    }
    if std::env::var_os("SETTLE").is_some() {
        for i in 0..n {
            index.get(&key(i)).expect("get");
        }
    }
    let threads: u64 = std::env::var("THREADS").map_or(1, |t| t.parse().expect("threads"));
    let started = std::time::Instant::now();
    let sum = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..threads)
            .map(|t| {
                let bw = cursor.then_some(&bwtree);
                scope.spawn(move || {
                    scan_phase(index, (bw, paging), n, (scans, t, threads), len as usize)
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("scan thread"))
            .fold(0u64, u64::wrapping_add)
    });
    eprintln!("scan phase: {:?}", started.elapsed());
    println!("{kind}: {scans} scans of {len} keys over {n} keys ({updates} updates): {sum}");
}
