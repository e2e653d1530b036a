//! Load and lookup throughput of the Bw-tree by consolidation threshold (chain length):
//! `cargo run --release -p elastree --example bw_chain [keys] [threads] [chains]` (`chains`
//! comma-separated, default `1,2,3,4,8,16`), random 8-byte keys; used to choose
//! `bwtree::DEFAULT_CHAIN_LENGTH`. The OLC B+-tree runs first, and each chain length's
//! figures are also given as ratios to its (the same run's). Both take variable-length
//! keys, so the B+-tree here has optimized pages, as the Bw-tree: the ratios compare the
//! trees' mechanisms over one page search. `elastree bench` gives both trees fixed 8-byte
//! keys on rand64, and the B+-tree then has sorted-array nodes, whose search is cheaper.

use std::time::Instant;

use elastree::{BwTreeOptions, Index, IndexBuilder, IndexKind};

/// A multiplicative hash: distinct, scattered 8-byte keys.
fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("keys"));
    let threads: u64 = args.next().map_or(2, |a| a.parse().expect("threads"));
    let chains: Vec<usize> = args.next().map_or(vec![1, 2, 3, 4, 8, 16], |a| {
        a.split(',').map(|c| c.parse().expect("chain")).collect()
    });
    let measure = |index: &dyn Index| {
        let run = |f: &(dyn Fn(&dyn Index, u64) + Sync)| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for t in 0..threads {
                    s.spawn(move || {
                        for i in (t..n).step_by(threads as usize) {
                            f(index, i);
                        }
                    });
                }
            });
            n as f64 / start.elapsed().as_secs_f64() / 1e6
        };
        let load = run(&|index, i| {
            index.insert(&key(i), i).expect("insert");
        });
        let lookup = run(&|index, i| {
            assert_eq!(index.get(&key(i)).expect("get"), Some(i));
        });
        (load, lookup)
    };
    let btree = IndexBuilder::new(IndexKind::BTree).build().expect("index");
    let (btree_load, btree_lookup) = measure(&*btree);
    drop(btree);
    println!("btree:    load {btree_load:.3} Mops/s, lookup {btree_lookup:.3} Mops/s");
    for chain_length in chains {
        let index = IndexBuilder::new(BwTreeOptions {
            chain_length,
            ..BwTreeOptions::default()
        })
        .build()
        .expect("index");
        let (load, lookup) = measure(&*index);
        println!(
            "chain {chain_length:2}: load {load:.3} Mops/s ({:.2}x btree), lookup {lookup:.3} \
             Mops/s ({:.2}x btree)",
            load / btree_load,
            lookup / btree_lookup
        );
    }
}
