//! The insert finger: where a thread's last insert passed one level above the leaves, so
//! that the next insert of a clustered stream (keys arriving tenant by tenant, table by
//! table, or in time order) starts there instead of at the root.
//!
//! Each thread remembers one node: the level-1 node its last insert from the root passed,
//! with the count of inner nodes its tree had retired when that descent began. A later
//! insert into the same tree starts at that node only if
//!
//! 1. the tree's retired-inner-node count, read while pinned, is still the remembered one:
//!    no inner node was handed to the epoch collector since the descent that saw the node
//!    reachable began, so neither was this one; and if it is retired after the read, the
//!    collector keeps it until this operation unpins (the reasoning that makes any pointer
//!    read under a pin safe, with the count in the pointer's place: a retiring writer
//!    counts the node, then defers its free);
//! 2. its version reads (it is not obsolete), it is still at level 1 with room for one
//!    more separator (the insert cannot split it without its parent), and
//! 3. the node's own search puts the key between two of its separators (not in its first
//!    child, before them all): its separators lie within its bounds, so the node is the
//!    one on the key's path, and no fence needs to be read; or past its last separator and
//!    below its high fence (ascending keys; the rightmost node of the level has none). The
//!    search is the one the descent makes there anyway; the version validates it.
//!
//! Otherwise the insert descends from the root, and remembers the level-1 node it passes.
//! A hit skips every level above the leaves' parents; a miss costs a thread-local read and
//! a search of the remembered node. A random insert stream would miss on nearly every
//! insert, so after `m` misses in a row a thread leaves its finger alone for `2^m - 1`
//! inserts, at most [`MAX_REST`] (it still remembers nodes: a store); a hit ends the rest
//! policy's memory. A clustered stream's occasional miss (a new tenant, a key in an edge
//! child) costs it an insert or two from the root.
//!
//! Measured on `prefix28` keys (a tenant's 1,000 keys at a time, in random order), 2M keys:
//! 3,384 -> 2,949 instructions per insert (`valgrind --tool=callgrind
//! --toggle-collect='page_paths::load' target/release/examples/page_paths prefix28 2000000
//! prefix-split 1 8 none`), loads 3.40 -> 3.63 Mops/s (medians of three runs in turns);
//! `email` keys loaded in ascending order (`SORTED=1 ... email 1000000 ...`) 2,795 -> 2,471
//! with the high-fence case (loads 2.42 -> 2.55 Mops/s at 2M keys); random `email` inserts
//! 3,492 -> 3,539 instructions (+1.3%).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_epoch::Guard;

use crate::node::NodeHeader;

/// The most inserts a resting finger sits out.
const MAX_REST: u32 = 255;

/// Identities of trees, so that a finger never outlives its tree's meaning: a tree
/// allocated where a dropped one was gets another identity.
static NEXT_TREE: AtomicU64 = AtomicU64::new(1);

/// A tree's side of its threads' fingers.
#[derive(Debug)]
pub(super) struct Fingers {
    /// This tree's identity (never 0).
    tree: u64,
    /// Inner nodes retired so far.
    inner_retires: AtomicU64,
}

/// What a thread remembers.
#[derive(Clone, Copy)]
struct Finger {
    /// The tree's identity (0: none).
    tree: u64,
    /// The level-1 node's address.
    node: usize,
    /// The tree's retired-inner-node count when the descent that passed the node began.
    retires: u64,
    /// Misses in a row (at most 8: the rest after them is [`MAX_REST`]).
    misses: u32,
    /// Inserts left to sit out.
    rest: u32,
}

thread_local! {
    static FINGER: Cell<Finger> = const {
        Cell::new(Finger {
            tree: 0,
            node: 0,
            retires: 0,
            misses: 0,
            rest: 0,
        })
    };
}

#[cfg(test)]
thread_local! {
    /// Inserts this thread started at its finger (tests only).
    static HITS: Cell<u64> = const { Cell::new(0) };
}

impl Fingers {
    /// The side of a new tree.
    pub fn new() -> Self {
        Self {
            tree: NEXT_TREE.fetch_add(1, Ordering::Relaxed),
            inner_retires: AtomicU64::new(0),
        }
    }

    /// Counts an inner node about to be handed to the epoch collector (unlinked, marked
    /// obsolete): called before the collector gets it.
    pub fn inner_retired(&self) {
        self.inner_retires.fetch_add(1, Ordering::SeqCst);
    }

    /// The retired-inner-node count, read at the start of a descent from the root (pinned):
    /// what [`Fingers::remember`] stores with the level-1 node the descent passes.
    pub fn retires(&self) -> u64 {
        self.inner_retires.load(Ordering::SeqCst)
    }

    /// Remembers `node`, the level-1 node a descent that began when the count was
    /// `retires` passed (validated: reachable and not obsolete then).
    pub fn remember(&self, node: &NodeHeader, retires: u64) {
        // A thread being torn down has no finger to keep.
        let _ = FINGER.try_with(|f| {
            f.set(Finger {
                tree: self.tree,
                node: node as *const NodeHeader as usize,
                retires,
                ..f.get()
            })
        });
    }

    /// Notes that the recalled node did not hold the insert (or could not start it).
    pub fn missed(&self) {
        let _ = FINGER.try_with(|f| {
            let mut finger = f.get();
            finger.misses = (finger.misses + 1).min(MAX_REST.ilog2() + 1);
            finger.rest = ((1 << finger.misses) - 1).min(MAX_REST);
            f.set(finger);
        });
    }

    /// Notes that the recalled node started the insert.
    pub fn hit(&self) {
        #[cfg(test)]
        HITS.with(|h| h.set(h.get() + 1));
        let _ = FINGER.try_with(|f| {
            let finger = f.get();
            if finger.misses != 0 {
                f.set(Finger {
                    misses: 0,
                    ..finger
                });
            }
        });
    }

    /// What this thread's finger offers an insert into this tree: the node it remembers, if
    /// no inner node was retired since the descent that passed it began (see the module
    /// docs; the caller checks its version, level, room and keys before starting there).
    pub fn recall<'g>(&self, _guard: &'g Guard) -> Recall<'g> {
        let Ok(finger) = FINGER.try_with(|f| {
            let finger = f.get();
            if finger.rest > 0 {
                f.set(Finger {
                    rest: finger.rest - 1,
                    ..finger
                });
            }
            finger
        }) else {
            return Recall::Resting;
        };
        match finger.rest {
            0 => {}
            // The rest's last insert remembers a node for the next one.
            1 => return Recall::Nothing,
            _ => return Recall::Resting,
        }
        if finger.tree != self.tree
            || finger.node == 0
            || self.inner_retires.load(Ordering::SeqCst) != finger.retires
        {
            return Recall::Nothing;
        }
        // SAFETY: the node was a reachable inner node of this tree when a descent that
        // began at count `finger.retires` validated it; the count is unchanged now, read
        // under `_guard`, so the node has not been handed to the collector before this
        // read, and one handed over after it is freed only once `_guard` is dropped (point 1
        // of the module docs). The tree is alive (`self` borrows it) and frees nodes only
        // through the collector while it lives.
        Recall::Node(unsafe { &*(finger.node as *const NodeHeader) })
    }
}

/// What a thread's finger offers an insert.
pub(super) enum Recall<'g> {
    /// The remembered node, to start at if it passes the caller's checks.
    Node(&'g NodeHeader),
    /// Nothing to start at; the descent from the root remembers the node it passes.
    Nothing,
    /// The finger rests (or the thread is being torn down): the descent from the root
    /// need not remember anything.
    Resting,
}

#[cfg(test)]
mod tests {
    use super::HITS;
    use crate::btree::Tree;
    use crate::node::page::{MidWidth, PageConfig, PageRepr};
    use crate::node::slotted::VarProbe;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    fn key(tenant: u64, i: u64) -> Vec<u8> {
        format!("tenant/{tenant:04}/row/{i:06}").into_bytes()
    }

    fn hits() -> u64 {
        HITS.with(|h| h.get())
    }

    /// Tenant-clustered inserts start at the finger; removing most keys merges pages (inner
    /// ones too, which retires them and so drops every finger), and the inserts after that
    /// use fresh fingers; the tree stays whole and correct throughout.
    #[test]
    fn clustered_inserts_start_at_the_finger_across_merges() {
        let config = PageConfig::new((64, 64), (4096, 4096), 64, (false, true, MidWidth::Eight));
        let tree = Tree::<PageRepr>::new(config);
        let mut rng = StdRng::seed_from_u64(7);
        let mut tenants: Vec<u64> = (0..40).collect();
        tenants.shuffle(&mut rng);
        let mut rows: Vec<u64> = (0..200).collect();
        let before = hits();
        for &t in &tenants {
            rows.shuffle(&mut rng);
            for &i in &rows {
                let k = key(t, i);
                assert_eq!(tree.insert(VarProbe::new(&k, None), t * 1000 + i), None);
            }
        }
        let loaded = hits() - before;
        assert!(
            loaded > 4_000,
            "only {loaded} of 8,000 inserts started at the finger"
        );
        tree.check().unwrap();
        for &t in &tenants {
            for i in (0..200).filter(|i| i % 10 != 0) {
                let k = key(t, i);
                assert_eq!(tree.remove(VarProbe::new(&k, None)), Some(t * 1000 + i));
            }
        }
        tree.check().unwrap();
        assert!(tree.fingers.retires() > 0, "inner pages merged away");
        let before = hits();
        for &t in &tenants {
            for i in (0..200).filter(|i| i % 10 != 0).rev() {
                let k = key(t, i);
                assert_eq!(tree.insert(VarProbe::new(&k, None), t * 1000 + i + 1), None);
            }
        }
        assert!(
            hits() - before > 3_000,
            "the fingers came back after the merges"
        );
        tree.check().unwrap();
        for &t in &tenants {
            for i in 0..200 {
                let k = key(t, i);
                let tid = t * 1000 + i + u64::from(i % 10 != 0);
                assert_eq!(tree.get(VarProbe::new(&k, None)), Some(tid), "{t}/{i}");
            }
        }
    }

    /// Ascending keys past every key in the tree land past the finger page's last
    /// separator: its high fence (none, on the rightmost page) lets them start there.
    #[test]
    fn ascending_inserts_start_at_the_finger_past_its_last_separator() {
        let config = PageConfig::new((64, 64), (4096, 4096), 64, (false, true, MidWidth::Eight));
        let tree = Tree::<PageRepr>::new(config);
        let before = hits();
        for i in 0..8_000 {
            let k = key(1, i);
            assert_eq!(tree.insert(VarProbe::new(&k, None), i), None);
        }
        let ascending = hits() - before;
        assert!(
            ascending > 6_000,
            "only {ascending} of 8,000 inserts started at the finger"
        );
        tree.check().unwrap();
        for i in 0..8_000 {
            assert_eq!(tree.get(VarProbe::new(&key(1, i), None)), Some(i));
        }
    }
}
