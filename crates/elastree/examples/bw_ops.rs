//! Instructions per insert and per lookup, for callgrind:
//! `valgrind --tool=callgrind --toggle-collect='bw_ops::load' target/release/examples/bw_ops
//! [keys] [kind] [var]` (and `--toggle-collect='bw_ops::lookups'`), random 8-byte keys, one
//! thread, default options; `kind` is any index kind (default bwtree), so the Bw-tree's
//! counts can be set beside the B+-tree's. `var` declares the keys variable-length: the
//! B+-tree then keeps them in optimized pages, the layout the Bw-tree always uses, instead
//! of its sorted 8-byte integer nodes. The two phases' times go to stderr.

use elastree::{Index, IndexBuilder, IndexKind, KeyLen};

/// A multiplicative hash: distinct, scattered 8-byte keys.
fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

/// Inserts keys `0..n`.
#[inline(never)]
fn load(index: &dyn Index, n: u64) {
    for i in 0..n {
        index.insert(&key(i), i).expect("insert");
    }
}

/// Looks every key up, in another order than the load's.
#[inline(never)]
fn lookups(index: &dyn Index, n: u64) -> u64 {
    let mut hits = 0;
    for i in (0..n).rev() {
        hits += u64::from(index.get(&key(i)).expect("get") == Some(i));
    }
    hits
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(200_000, |a| a.parse().expect("keys"));
    let kind: IndexKind = args
        .next()
        .map_or(IndexKind::BwTree, |a| a.parse().expect("an index kind"));
    let key_len = match args.next().as_deref() {
        None => KeyLen::Fixed(8),
        Some("var") => KeyLen::Variable,
        Some(other) => panic!("keys {other:?}: `var` for variable-length keys, or nothing"),
    };
    let index = IndexBuilder::new(kind)
        .key_len(key_len)
        .build()
        .expect("index");
    let start = std::time::Instant::now();
    load(&*index, n);
    let loaded = start.elapsed();
    let hits = lookups(&*index, n);
    let looked = start.elapsed() - loaded;
    println!("{kind:?}: {n} keys, {hits} hits");
    eprintln!(
        "load {:.2} s, lookups {:.2} s",
        loaded.as_secs_f64(),
        looked.as_secs_f64()
    );
}
