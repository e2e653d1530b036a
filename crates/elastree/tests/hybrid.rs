//! The hybrid index beyond the shared model and stress tests (which run it with frequent
//! merges): every merge option through the model test, merges that run while writers and
//! readers race, the merge trigger, and typed errors.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::thread;

use elastree::hybrid::{
    HybridIndex, HybridOptions, HybridStats, MergeMode, MergeStrategy, MergeTrigger,
};
use elastree::{Direction, Error, Index, IndexBuilder, IndexKind, IndexOptions, KeyLen};
use elastree_testkit::model::{
    all_pairs, assert_same_pairs, frequent_merges, run_model_merging, scaled, tiny, Built, Keys,
    Registry,
};
use elastree_testkit::{time_limit, StopFlag};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KEY_SETS: &[Keys] = &[
    Keys::Small64 { space: 600 },
    Keys::Sequential64,
    Keys::Small128 { space: 600 },
    Keys::Var { max: 40 },
];

/// Merges each model run forces (at evenly spread structure checks); the merges the
/// trigger starts come on top, racing the operations in between.
const FORCED_MERGES: u64 = 5;

/// The model test with `options`, unique and non-unique, on every key set; the run merged
/// at least the merges it forced (a count the schedule cannot change).
fn model_with(kind: IndexKind, options: HybridOptions, seed: u64) {
    let _limit = time_limit();
    for unique in [true, false] {
        for (i, &keys) in KEY_SETS.iter().enumerate() {
            let registry = Registry::new();
            let builder =
                tiny(kind, &registry, unique, keys, 40).with_kind(options.clone().for_kind(kind));
            let built = Built::new(&builder);
            let seed = seed + i as u64;
            let forced =
                run_model_merging(&built, &registry, keys, 12_000, seed, 199, FORCED_MERGES);
            let hybrid = built.hybrid().expect("a hybrid kind");
            hybrid.wait_for_merge().unwrap();
            let merges = hybrid.stats().merges;
            // More merges than forced: the trigger fired too (a write that finds the stage
            // due starts a merge or finds one running, and a forced merge never is).
            assert!(
                forced >= 1 && merges > forced,
                "{options:?}, unique {unique}, {keys:?}, seed {seed}: {merges} merges, {forced} \
                 forced"
            );
        }
    }
}

#[test]
fn model_blocking_merges() {
    let _limit = time_limit();
    let options = HybridOptions {
        mode: MergeMode::Blocking,
        ..frequent_merges()
    };
    model_with(IndexKind::Hybrid, options, 10);
}

#[test]
fn model_merge_cold() {
    let _limit = time_limit();
    let options = HybridOptions {
        strategy: MergeStrategy::Cold,
        ..frequent_merges()
    };
    model_with(IndexKind::Hybrid, options, 20);
}

#[test]
fn model_constant_trigger() {
    let _limit = time_limit();
    let options = HybridOptions {
        trigger: MergeTrigger::Constant(16),
        min_merge: 1,
        ..frequent_merges()
    };
    model_with(IndexKind::Hybrid, options, 30);
}

#[test]
fn model_compressed_small_cache() {
    let _limit = time_limit();
    let options = HybridOptions {
        cache_blocks: 2,
        ..frequent_merges()
    };
    model_with(IndexKind::HybridCompressed, options, 40);
}

/// Merge-cold keeps recently used entries out of the static stage: after a merge that
/// found every entry hot, they are all still in a dynamic stage.
#[test]
fn merge_cold_carries_hot_entries() {
    let _limit = time_limit();
    let options = HybridOptions {
        strategy: MergeStrategy::Cold,
        trigger: MergeTrigger::Constant(1 << 30),
        ..HybridOptions::default()
    };
    let index = HybridIndex::new(&fixed8(), &options).unwrap();
    for k in 0u64..1000 {
        index.insert(&k.to_be_bytes(), k).unwrap();
    }
    index.merge_now().unwrap();
    let stats = index.stats();
    let last = *stats.records.last().unwrap();
    assert_eq!((last.carried, last.merged), (1000, 0), "{stats:?}");
    // Nothing touched them since: the next merge moves them all.
    index.merge_now().unwrap();
    let stats = index.stats();
    let last = *stats.records.last().unwrap();
    assert_eq!((last.carried, last.merged), (0, 1000), "{stats:?}");
    assert_eq!(stats.static_len, 1000);
    for k in 0u64..1000 {
        assert_eq!(index.get(&k.to_be_bytes()).unwrap(), Some(k));
    }
    index.check().unwrap();
}

/// The ratio trigger keeps the dynamic stage small. A blocking merge runs on the writer
/// that reaches the trigger, so after every write the active stage is below it. A
/// background merge lags the writers by however long the machine takes to run it, so the
/// checks there are the ones timing cannot move: every merge started only once its stage
/// was due, and once the writers stop, the next write brings the stage below the trigger.
#[test]
fn ratio_trigger_keeps_the_dynamic_stage_small() {
    let _limit = time_limit();
    for mode in [MergeMode::Blocking, MergeMode::Background] {
        let options = HybridOptions {
            mode,
            ..HybridOptions::default()
        };
        let index = HybridIndex::new(&fixed8(), &options.clone()).unwrap();
        let n = scaled(200_000);
        let mut rng = StdRng::seed_from_u64(5);
        for tid in 0..n {
            index.insert(&rng.gen::<u64>().to_be_bytes(), tid).unwrap();
            if mode == MergeMode::Blocking && tid % 1000 == 0 {
                let stats = index.stats();
                let threshold = options.merge_threshold(stats.static_len);
                assert!(stats.dynamic_len < threshold, "{mode:?}: {stats:?}");
            }
        }
        index.wait_for_merge().unwrap();
        // One more write finds any stage the last merge left at the trigger.
        index.insert(&rng.gen::<u64>().to_be_bytes(), n).unwrap();
        index.wait_for_merge().unwrap();
        let stats = index.stats();
        let threshold = options.merge_threshold(stats.static_len);
        assert!(stats.dynamic_len < threshold, "{mode:?}: {stats:?}");
        // Every key is new and nothing is removed: each one is in exactly one stage.
        assert_eq!(
            stats.static_len + stats.dynamic_len,
            n as usize + 1,
            "{mode:?}: {stats:?}"
        );
        // With the stage below the trigger, most keys are static. (On a small run the
        // trigger's floor of `min_merge` entries is most of the keys, and with background
        // merges how many a lagging merge took in decides the split.)
        if n >= 100_000 || mode == MergeMode::Blocking {
            assert!(
                stats.static_len * 10 >= n as usize * 8,
                "{mode:?}: {stats:?}"
            );
        }
        // A background merge that lags takes in a bigger stage, so only blocking merges
        // have a count that timing cannot move.
        if n >= 100_000 && mode == MergeMode::Blocking {
            assert!(stats.merges >= 5, "{mode:?}: {stats:?}");
        }
        for record in &stats.records {
            // Every key is new, so a merge moves its whole stage, which was due.
            assert!(
                record.merged >= options.merge_threshold(record.static_before),
                "{mode:?}: {record:?}"
            );
            assert!(record.static_after >= record.static_before, "{record:?}");
        }
        assert_eq!(index.len(), n as usize + 1);
        index.check().unwrap();
    }
}

/// Reads, scans and writes race with background merges of a large static stage: no reader
/// ever misses a key that is present throughout, and no write is lost.
#[test]
fn operations_race_with_background_merges() {
    let _limit = time_limit();
    let options = HybridOptions {
        trigger: MergeTrigger::Ratio(4.0),
        min_merge: 256,
        publish_every: 1,
        ..HybridOptions::default()
    };
    let index = HybridIndex::new(&fixed8(), &options).unwrap();
    let stable: Vec<u64> = (0..scaled(20_000)).map(|k| k * 4).collect();
    for &k in &stable {
        index.insert(&k.to_be_bytes(), k).unwrap();
    }
    // The load's merges are done before the race: from here on only the writer's writes
    // start merges.
    index.wait_for_merge().unwrap();
    let merges_before = index.stats().merges;
    let ops = scaled(60_000);
    // The writer forces a merge a third and two thirds of the way through, so merges happen
    // however slowly the machine runs the background ones. Before the first, its writes
    // bring the stage to the trigger (a quarter of the static stage: 5,000 of the 20,000
    // stable keys, a fifth of the ops it makes before then) while no merge runs, so a
    // background merge starts and races the writer and the reader: the run makes more
    // merges than it forces, a count the schedule cannot change.
    let forced = 2;
    let force_at = |op: u64| (1..=forced).any(|i| op == ops * i / (forced + 1));
    let stop = StopFlag::new();
    let written: BTreeMap<u64, u64> = thread::scope(|s| {
        let stopping = stop.set_on_drop();
        let (index, stable, stop) = (&index, &stable, &stop);
        s.spawn(move || {
            let mut rng = StdRng::seed_from_u64(1);
            let mut round = 0u64;
            while !stop.is_set() {
                round += 1;
                let k = stable[rng.gen_range(0..stable.len())];
                assert_eq!(
                    index.get(&k.to_be_bytes()).unwrap(),
                    Some(k),
                    "reader round {round}: get of stable key {k}"
                );
                let lo = stable[rng.gen_range(0..stable.len())];
                let mut seen = Vec::new();
                index
                    .scan(
                        Bound::Included(&lo.to_be_bytes()[..]),
                        Bound::Unbounded,
                        Direction::Ascending,
                        64,
                        &mut |key, _| seen.push(u64::from_be_bytes(key.try_into().unwrap())),
                    )
                    .unwrap();
                if let Some(at) = seen.windows(2).position(|w| w[0] >= w[1]) {
                    panic!(
                        "reader round {round}: scan from {lo} out of order at {at}: {} then {}",
                        seen[at],
                        seen[at + 1]
                    );
                }
                let last = *seen.last().unwrap();
                let expected = stable.iter().filter(|&&k| k >= lo && k <= last).count();
                let got = seen.iter().filter(|&&k| k % 4 == 0).count();
                assert_eq!(
                    got, expected,
                    "reader round {round}: scan from {lo} to {last} missed stable keys"
                );
            }
        });
        let writer = s.spawn(move || {
            let mut rng = StdRng::seed_from_u64(2);
            let mut mine = BTreeMap::new();
            for op in 0..ops {
                if force_at(op) {
                    index
                        .merge_now()
                        .unwrap_or_else(|e| panic!("forced merge at op {op}: {e}"));
                }
                let k = rng.gen_range(0..stable.len() as u64 * 4) | 1;
                if rng.gen_bool(0.7) {
                    let previous = index.insert(&k.to_be_bytes(), op).unwrap();
                    assert_eq!(previous, mine.insert(k, op), "op {op}: insert of key {k}");
                } else {
                    let removed = index.remove(&k.to_be_bytes()).unwrap();
                    assert_eq!(removed, mine.remove(&k), "op {op}: remove of key {k}");
                }
            }
            mine
        });
        let mine = writer.join().unwrap();
        drop(stopping);
        mine
    });
    index.wait_for_merge().unwrap();
    let merges = index.stats().merges - merges_before;
    assert!(
        merges > forced,
        "{merges} merges during the race, {forced} of them forced: the trigger started none"
    );
    let mut expected: BTreeMap<u64, u64> = stable.iter().map(|&k| (k, k)).collect();
    expected.extend(written);
    let expected: Vec<(u64, u64)> = expected.into_iter().collect();
    assert_same_pairs(&all_pairs(&index), &expected, "final contents");
    index.check().unwrap();
}

#[test]
fn bad_options_and_reserved_tid_are_typed_errors() {
    let _limit = time_limit();
    let build = |options: HybridOptions| IndexBuilder::new(options).build().err();
    for options in [
        HybridOptions {
            trigger: MergeTrigger::Ratio(0.0),
            ..HybridOptions::default()
        },
        HybridOptions {
            trigger: MergeTrigger::Ratio(f64::NAN),
            ..HybridOptions::default()
        },
        HybridOptions {
            trigger: MergeTrigger::Constant(0),
            ..HybridOptions::default()
        },
        HybridOptions {
            publish_every: 0,
            ..HybridOptions::default()
        },
        HybridOptions {
            bloom_bits_per_key: 0,
            ..HybridOptions::default()
        },
    ] {
        assert!(
            matches!(build(options.clone()), Some(Error::InvalidConfig(_))),
            "{options:?}"
        );
    }
    let too_long = IndexBuilder::new(IndexKind::Hybrid)
        .unique(false)
        .max_key_len(20_000)
        .build()
        .err();
    assert!(matches!(too_long, Some(Error::InvalidConfig(_))));

    let index = IndexBuilder::new(IndexKind::Hybrid).build().unwrap();
    assert!(matches!(
        index.insert(b"k", u64::MAX),
        Err(Error::Unsupported { .. })
    ));
    assert_eq!(index.len(), 0);
    let long = vec![7u8; 2000];
    assert!(matches!(
        index.insert(&long, 1),
        Err(Error::KeyTooLong { .. })
    ));
    assert!(matches!(index.remove(&long), Err(Error::KeyTooLong { .. })));
    let non_unique = IndexBuilder::new(IndexKind::Hybrid)
        .unique(false)
        .build()
        .unwrap();
    assert!(matches!(
        non_unique.remove(b"k"),
        Err(Error::Unsupported { .. })
    ));
    // A non-unique index takes every tid, u64::MAX included.
    assert_eq!(non_unique.insert(b"k", u64::MAX).unwrap(), None);
    assert_eq!(non_unique.get(b"k").unwrap(), Some(u64::MAX));
}

/// Scan bounds of any length on fixed-length keys cover the same pairs as in the B+-tree,
/// for pairs in the dynamic stage, in the static stage and deleted from it.
#[test]
fn bounds_of_any_length_match_the_btree() {
    let _limit = time_limit();
    for unique in [true, false] {
        for len in [4usize, 8, 16] {
            let build = |builder: IndexBuilder| {
                Built::new(&builder.unique(unique).key_len(KeyLen::Fixed(len)))
            };
            let built = build(IndexBuilder::new(frequent_merges()));
            let btree = build(IndexBuilder::new(IndexKind::BTree));
            let (hybrid, btree) = (built.index(), btree.index());
            let mut rng = StdRng::seed_from_u64(len as u64);
            let alphabet = [0u8, 1, b'a', b'b', 0xff];
            let random_key = |rng: &mut StdRng, n: usize| -> Vec<u8> {
                (0..n).map(|_| alphabet[rng.gen_range(0..5)]).collect()
            };
            for step in 0..3000u64 {
                // Merges forced along the way (the trigger's background merges race in
                // between), so pairs sit in every stage and the merge count is fixed.
                if step % 1000 == 999 {
                    built.hybrid().unwrap().merge_now().unwrap();
                }
                let key = random_key(&mut rng, len);
                let tid = rng.gen_range(0..4u64);
                if rng.gen_bool(0.7) {
                    assert_eq!(
                        hybrid.insert(&key, tid).unwrap(),
                        btree.insert(&key, tid).unwrap(),
                        "unique {unique} len {len} step {step}: insert {key:02x?} tid {tid}"
                    );
                } else {
                    assert_eq!(
                        hybrid.remove_pair(&key, tid).unwrap(),
                        btree.remove_pair(&key, tid).unwrap(),
                        "unique {unique} len {len} step {step}: remove_pair {key:02x?} tid {tid}"
                    );
                }
                if step % 10 != 0 {
                    continue;
                }
                let bound = |rng: &mut StdRng| {
                    let n = rng.gen_range(0..=len + 3);
                    match rng.gen_range(0..3) {
                        0 => Bound::Unbounded,
                        1 => Bound::Included(random_key(rng, n)),
                        _ => Bound::Excluded(random_key(rng, n)),
                    }
                };
                let (lo, hi) = (bound(&mut rng), bound(&mut rng));
                for direction in [Direction::Ascending, Direction::Descending] {
                    let collect = |index: &dyn Index| {
                        let mut got = Vec::new();
                        index
                            .scan(
                                lo.as_ref().map(Vec::as_slice),
                                hi.as_ref().map(Vec::as_slice),
                                direction,
                                usize::MAX,
                                &mut |k, t| got.push((k.to_vec(), t)),
                            )
                            .unwrap();
                        got
                    };
                    assert_eq!(
                        collect(hybrid),
                        collect(btree),
                        "unique {unique} len {len} step {step}: scan {direction:?} {lo:02x?}..{hi:02x?}"
                    );
                }
            }
            hybrid.quiesce().unwrap();
            let merges = hybrid.stats_as::<HybridStats>().unwrap().merges;
            assert!(
                merges > 3,
                "unique {unique} len {len}: {merges} merges, 3 forced (the trigger fired none)"
            );
        }
    }
}

/// In blocking mode a scan's visitor may call the index, even writes that start a merge.
#[test]
fn blocking_scan_visitor_may_call_the_index() {
    let _limit = time_limit();
    let options = HybridOptions {
        mode: MergeMode::Blocking,
        ..frequent_merges()
    };
    let index = IndexBuilder::new(options)
        .key_len(KeyLen::Fixed(8))
        .build()
        .unwrap();
    for k in 0u64..5000 {
        index.insert(&(k * 2).to_be_bytes(), k).unwrap();
    }
    let merges_before = index.stats_as::<HybridStats>().unwrap().merges;
    let mut seen = 0;
    index
        .scan(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Ascending,
            usize::MAX,
            &mut |k, t| {
                let odd = u64::from_be_bytes(k.try_into().unwrap()) + 1;
                index.insert(&odd.to_be_bytes(), t).unwrap();
                seen += 1;
            },
        )
        .unwrap();
    assert!(seen >= 5000);
    assert!(index.stats_as::<HybridStats>().unwrap().merges > merges_before);
    assert_eq!(index.len(), 10_000);
    index.check().unwrap();
}

#[test]
fn extreme_trigger_options_neither_panic_nor_overflow() {
    let _limit = time_limit();
    for options in [
        HybridOptions {
            trigger: MergeTrigger::Constant(usize::MAX),
            ..HybridOptions::default()
        },
        HybridOptions {
            min_merge: usize::MAX,
            ..HybridOptions::default()
        },
        HybridOptions {
            trigger: MergeTrigger::Ratio(1e9),
            ..HybridOptions::default()
        },
        HybridOptions {
            trigger: MergeTrigger::Ratio(1e-3),
            ..HybridOptions::default()
        },
    ] {
        let index = IndexBuilder::new(options).build().unwrap();
        for k in 0u64..100 {
            index.insert(&k.to_be_bytes(), k).unwrap();
        }
        index.quiesce().unwrap();
        assert_eq!(index.len(), 100);
    }
    let tiny = HybridOptions {
        trigger: MergeTrigger::Ratio(1e-30),
        ..HybridOptions::default()
    };
    let err = IndexBuilder::new(tiny).build().err();
    assert!(matches!(err, Some(Error::InvalidConfig(_))));
}

/// The shared options of a unique index over 8-byte keys.
fn fixed8() -> IndexOptions {
    IndexOptions {
        key_len: KeyLen::Fixed(8),
        ..IndexOptions::default()
    }
}
