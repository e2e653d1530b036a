//! Memory figures: the counting allocator sees what a loaded index holds, and a dropped index
//! gives it all back (the bplustree and ferntree adapters empty their trees before dropping
//! them, because those crates free no nodes on drop; masstree keeps some nodes in a pool of the
//! thread's own).
//!
//! One test in its own binary, so no other test allocates while it measures.

use elastree::IndexKind;
use elastree_bench::alloc::{self, CountingAlloc};
use elastree_bench::keys::KeySetKind;
use elastree_bench::peers::{Budget, IndexSpec, Peer};
use elastree_bench::runner::settle::settle_deferred_frees;
use elastree_testkit::time_limit;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const N: usize = 20_000;

#[test]
fn loaded_indexes_hold_memory_and_dropped_ones_free_it() {
    let _limit = time_limit();
    assert!(alloc::installed());
    for &kind in KeySetKind::BASELINE {
        let keys = kind.generate(N, 3);
        for spec in IndexSpec::all() {
            let ctx = format!("{spec} on {kind}");
            settle_deferred_frees();
            let before = alloc::current();
            let mut index = spec.build(&keys, Budget::default()).expect("builds");
            if index.supports(kind).is_err() {
                continue;
            }
            if index.loads_in_bulk() {
                index.bulk_load(&keys).expect("bulk load");
            } else {
                for i in 0..N {
                    index.insert(keys.key(i), i as u64);
                }
            }
            index.quiesce();
            settle_deferred_frees();
            let held = alloc::current().saturating_sub(before);
            // At least the tids, and for byte-string keys the key bytes, must be somewhere;
            // indexes with indirect keys (elastic, seqtree) leave the keys in the table, and
            // the static stage (static, hybrid) bit-packs keys and tids, so for them only a
            // couple of bytes per pair are certain.
            let indirect = matches!(spec, IndexSpec::Elastree(k) if k.needs_key_source());
            let packed = matches!(
                spec,
                IndexSpec::Elastree(
                    IndexKind::Static | IndexKind::Hybrid | IndexKind::HybridCompressed
                )
            );
            let floor = if packed { N * 2 } else { N * 8 }
                + if indirect || packed {
                    0
                } else if kind == KeySetKind::Email {
                    N * 20
                } else {
                    N * 8
                };
            assert!(held >= floor, "{ctx}: holds only {held} bytes");
            if let Some(own) = index.self_reported_bytes() {
                let diff = own.abs_diff(held);
                assert!(
                    diff <= held / 10 + 4096,
                    "{ctx}: reports {own} bytes, allocated {held}"
                );
            }
            drop(index);
            settle_deferred_frees();
            let left = alloc::current().saturating_sub(before);
            // masstree takes nodes from a pool of the thread's own, refilled 128 nodes at a
            // time, that returns them to the allocator only when the thread exits: this
            // thread's pool keeps what building and loading the tree left in it (the bench
            // loads on threads of their own).
            let pooled = if spec == IndexSpec::Peer(Peer::MassTree) {
                256 * 1024
            } else {
                0
            };
            assert!(
                left <= 64 * 1024 + pooled,
                "{ctx}: {left} bytes still allocated after drop"
            );
        }
    }
}
