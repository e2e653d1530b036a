//! The foundation's model test (random inserts, updates, removes, gets and scans compared
//! with a BTreeMap, with structure checks along the way and a full drain at the end) driven
//! through the distributed index and its baseline on a local Redis Cluster (the one the
//! test binary shares; each case works on an index of its own name).

mod cluster;

use cluster::joined;
use elastree::Index;
use elastree_dist::baseline::BaselineIndex;
use elastree_dist::DistIndex;
use elastree_testkit::model::{run_model, Keys, Registry};
use elastree_testkit::time_limit;

/// One case: the tree, uniqueness, node capacity, keys, operations, seed.
type Case = (&'static str, bool, usize, Keys, u64, u64);

#[test]
fn every_tree_against_the_model_on_a_local_cluster() {
    let _limit = time_limit();
    let cluster = cluster::shared();
    let seeds = cluster::seeds(cluster);
    let cases: Vec<Case> = vec![
        ("dist", true, 4, Keys::Var { max: 40 }, 3000, 11),
        ("dist", false, 4, Keys::Small64 { space: 300 }, 3000, 12),
        ("dist", true, 64, Keys::Sequential64, 3000, 13),
        ("dist", false, 5, Keys::Var { max: 12 }, 2000, 14),
        ("dist-baseline", true, 4, Keys::Var { max: 40 }, 2000, 21),
        (
            "dist-baseline",
            false,
            4,
            Keys::Small64 { space: 300 },
            2000,
            22,
        ),
    ];
    std::thread::scope(|s| {
        let runs: Vec<_> = cases
            .into_iter()
            .map(|(tree, unique, capacity, keys, ops, seed)| {
                let seeds = &seeds;
                s.spawn(move || {
                    let name = cluster::unique_name(tree);
                    let case = format!(
                        "{tree} index {name} (unique: {unique}, capacity {capacity}, keys \
                         {keys:?}, {ops} operations, seed {seed})"
                    );
                    let options = cluster::options(&name, unique, capacity);
                    let registry = Registry::new();
                    if tree == "dist" {
                        let index = DistIndex::connect(seeds, options)
                            .unwrap_or_else(|e| panic!("connect to {case}: {e}"));
                        run_model(&index, &registry, keys, ops, seed, 500);
                        assert!(
                            index.stats().round_trips > 0,
                            "{case}: the client counted its round trips: {:?}",
                            index.stats()
                        );
                        index
                            .destroy()
                            .unwrap_or_else(|e| panic!("destroy {case}: {e}"));
                    } else {
                        let index = BaselineIndex::connect(seeds, options)
                            .unwrap_or_else(|e| panic!("connect to {case}: {e}"));
                        run_model(&index, &registry, keys, ops, seed, 500);
                        assert!(
                            index.is_empty(),
                            "{case}: empty after the model's drain: len {}",
                            index.len()
                        );
                        index
                            .destroy()
                            .unwrap_or_else(|e| panic!("destroy {case}: {e}"));
                    }
                })
            })
            .collect();
        for run in runs {
            joined(run);
        }
    });
}
