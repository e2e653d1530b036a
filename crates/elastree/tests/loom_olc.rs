//! Model checks of the optimistic version lock with loom, which explores every interleaving
//! (and the reorderings the C++11 memory model allows) of small scenarios. Run with
//! `cargo test --workspace --features elastree/loom --test loom_olc`.
#![cfg(feature = "loom")]

use elastree::sync::{Restart, VersionLock};
use elastree_testkit::time_limit;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A node guarded by a version lock whose writers keep `a == b`.
struct Node {
    lock: VersionLock,
    a: AtomicU64,
    b: AtomicU64,
}

impl Node {
    fn new() -> Self {
        Self {
            lock: VersionLock::new(),
            a: AtomicU64::new(0),
            b: AtomicU64::new(0),
        }
    }

    fn write(&self, value: u64) {
        let _guard = self.lock.lock().unwrap();
        self.a.store(value, Ordering::Relaxed);
        self.b.store(value, Ordering::Relaxed);
    }

    /// One optimistic read attempt: the pair if the version validated.
    fn read(&self) -> Result<(u64, u64), Restart> {
        let read = self.lock.read_begin()?;
        let a = self.a.load(Ordering::Relaxed);
        let b = self.b.load(Ordering::Relaxed);
        read.validate()?;
        Ok((a, b))
    }
}

#[test]
fn validated_reads_are_never_torn() {
    let _limit = time_limit();
    loom::model(|| {
        let node = Arc::new(Node::new());
        let writer = {
            let node = Arc::clone(&node);
            thread::spawn(move || {
                node.write(1);
                node.write(2);
            })
        };
        for _ in 0..2 {
            if let Ok((a, b)) = node.read() {
                assert_eq!(a, b, "a validated optimistic read saw a torn write");
            }
        }
        writer.join().unwrap();
        assert_eq!(node.read(), Ok((2, 2)));
    });
}

#[test]
fn writers_exclude_each_other() {
    let _limit = time_limit();
    loom::model(|| {
        let node = Arc::new(Node::new());
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let node = Arc::clone(&node);
                thread::spawn(move || {
                    let _guard = node.lock.lock().unwrap();
                    // A read-modify-write made of two relaxed steps: lost if not exclusive.
                    let a = node.a.load(Ordering::Relaxed);
                    node.a.store(a + 1, Ordering::Relaxed);
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(node.a.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn upgrade_succeeds_only_from_the_current_version() {
    let _limit = time_limit();
    loom::model(|| {
        let node = Arc::new(Node::new());
        let other = {
            let node = Arc::clone(&node);
            thread::spawn(move || node.write(7))
        };
        let read = node.lock.read_begin();
        if let Ok(read) = read {
            let seen = node.a.load(Ordering::Relaxed);
            if let Ok(_guard) = read.upgrade() {
                // Holding the lock from the version we read: nobody wrote in between, so
                // what we read is still current.
                assert_eq!(node.a.load(Ordering::Relaxed), seen);
            }
        }
        other.join().unwrap();
    });
}

#[test]
fn obsolete_nodes_turn_readers_away() {
    let _limit = time_limit();
    loom::model(|| {
        let node = Arc::new(Node::new());
        let unlinker = {
            let node = Arc::clone(&node);
            thread::spawn(move || {
                let guard = node.lock.lock().unwrap();
                node.a.store(9, Ordering::Relaxed);
                guard.unlock_obsolete();
            })
        };
        // A reader either validates before the unlink (and saw the old value) or restarts.
        if let Ok((a, _)) = node.read() {
            assert_eq!(a, 0);
        }
        unlinker.join().unwrap();
        assert_eq!(node.read(), Err(Restart));
        assert!(node.lock.lock().is_err());
    });
}

/// A leaf, in the model of a leaf replacement: its version lock and its one entry.
struct Leaf {
    lock: VersionLock,
    value: AtomicU64,
}

/// The elastic tree's leaf replacement as an ascending scan sees it: the writer locks the
/// left sibling and the old leaf, fills the new leaf, swings the sibling's link to it and
/// marks the old leaf obsolete (then scribbles on it, as if its memory were reused, which the
/// epoch collector prevents but validation must catch anyway). A scanner stepping from the
/// sibling along the link either validates and reads the entry (10) from the old or the new
/// leaf, or restarts: it never validates a read of anything else.
#[test]
fn a_scan_across_a_leaf_replacement_never_validates_a_wrong_entry() {
    let _limit = time_limit();
    loom::model(|| {
        let sibling = Arc::new(VersionLock::new());
        let link = Arc::new(AtomicU64::new(0));
        let leaves = Arc::new([
            Leaf {
                lock: VersionLock::new(),
                value: AtomicU64::new(10),
            },
            Leaf {
                lock: VersionLock::new(),
                value: AtomicU64::new(0),
            },
        ]);
        let writer = {
            let (sibling, link, leaves) = (sibling.clone(), link.clone(), leaves.clone());
            thread::spawn(move || {
                let sibling_guard = sibling.lock().unwrap();
                let old_guard = leaves[0].lock.lock().unwrap();
                leaves[1].value.store(10, Ordering::Relaxed);
                link.store(1, Ordering::Release);
                drop(sibling_guard);
                old_guard.unlock_obsolete();
                leaves[0].value.store(99, Ordering::Relaxed);
            })
        };
        let step = || -> Result<u64, Restart> {
            let read = sibling.read_begin()?;
            let target = link.load(Ordering::Acquire) as usize;
            read.validate()?;
            let leaf = &leaves[target];
            let leaf_read = leaf.lock.read_begin()?;
            let value = leaf.value.load(Ordering::Relaxed);
            leaf_read.validate()?;
            Ok(value)
        };
        for _ in 0..2 {
            if let Ok(value) = step() {
                assert_eq!(value, 10, "a validated step read a replaced leaf's garbage");
            }
        }
        writer.join().unwrap();
        assert_eq!(step(), Ok(10));
    });
}

/// The writer gate: once `seal` returns, a writer either got in and its write is visible to
/// the sealer, or was turned away and wrote nothing.
#[test]
fn sealing_sees_every_admitted_write() {
    let _limit = time_limit();
    use elastree::sync::WriterGate;
    loom::model(|| {
        let gate = Arc::new(WriterGate::new());
        let data = Arc::new(AtomicU64::new(0));
        let writer = {
            let (gate, data) = (Arc::clone(&gate), Arc::clone(&data));
            thread::spawn(move || match gate.enter() {
                Some(_inside) => {
                    data.store(1, Ordering::Relaxed);
                    true
                }
                None => false,
            })
        };
        gate.seal();
        let seen = data.load(Ordering::Relaxed);
        let admitted = writer.join().unwrap();
        assert_eq!(
            seen,
            u64::from(admitted),
            "admitted {admitted}, sealer saw {seen}"
        );
    });
}

/// The B+-tree's insert finger (`btree/finger.rs`): a thread follows a node remembered from
/// an earlier operation only if the tree's count of retired inner nodes is unchanged, read
/// after pinning; a writer that unlinks the node counts it before handing it to the
/// collector, which frees it only once no thread pinned before the hand-over is still
/// pinned. The collector is modelled by its promise (a pin is a flag set with a full fence;
/// the free waits until the flag is clear); what the model checks is the count's place in
/// it: a reader that trusts the count never reads a freed node. Counting after the
/// hand-over makes it fail.
#[test]
fn a_finger_is_followed_only_while_its_node_lives() {
    let _limit = time_limit();
    loom::model(|| {
        let retires = Arc::new(AtomicU64::new(0));
        let pinned = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        // 1 while the node is allocated, 0 once freed.
        let alive = Arc::new(AtomicU64::new(1));
        // The count when the finger was taken (an earlier operation's descent).
        let remembered = 0;
        let writer = {
            let (retires, pinned, alive) = (retires.clone(), pinned.clone(), alive.clone());
            thread::spawn(move || {
                // Unlink, count, then hand the node over: the collector frees it once no
                // thread is pinned.
                retires.fetch_add(1, Ordering::SeqCst);
                loom::sync::atomic::fence(Ordering::SeqCst);
                while pinned.load(Ordering::SeqCst) {
                    thread::yield_now();
                }
                alive.store(0, Ordering::Relaxed);
            })
        };
        pinned.store(true, Ordering::SeqCst);
        loom::sync::atomic::fence(Ordering::SeqCst);
        if retires.load(Ordering::SeqCst) == remembered {
            assert_eq!(alive.load(Ordering::Relaxed), 1, "followed a freed node");
        }
        pinned.store(false, Ordering::SeqCst);
        writer.join().unwrap();
    });
}
