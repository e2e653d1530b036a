//! Model checks of the SB-tree's hand-over protocol (`elastree::sbtree::protocol`) with loom:
//! a thread appending to its run while another seals the segment, readers of an open run,
//! two threads appending the same key, a thread joining a segment that is being sealed, and
//! an insert into a sealed segment's spill racing its conversion.
//! Loom explores every interleaving and the reorderings the C++ memory model allows; under
//! the `loom` feature the protocol's asymmetric barriers are sequentially consistent fences.
//! Run with `cargo test --workspace --features elastree/loom --test loom_sbtree`.
#![cfg(feature = "loom")]

use elastree::sbtree::protocol::{RunHead, SegmentHead, Settled};
use elastree_testkit::time_limit;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A run's entries as the model stores them: one key word per slot.
struct Run {
    head: RunHead,
    slots: [AtomicU64; 2],
    /// Set by the owner once its insert of the slot is settled and checked.
    checked: [AtomicBool; 2],
}

impl Run {
    fn new() -> Self {
        Self {
            head: RunHead::new(),
            slots: [AtomicU64::new(0), AtomicU64::new(0)],
            checked: [AtomicBool::new(false), AtomicBool::new(false)],
        }
    }

    /// The owner's append of `key` at `slot`: the protocol's steps 1-4 and 6.
    fn append(&self, segment: &SegmentHead, slot: usize, key: u64) -> Settled {
        self.head.begin();
        self.slots[slot].store(key, Ordering::Relaxed);
        self.head.widen([0, key], || [0, key + 1]);
        self.head.publish(slot as u64 + 1);
        let settled = self.head.settle(segment, slot as u64);
        if settled != Settled::Dropped {
            self.checked[slot].store(true, Ordering::Relaxed);
        }
        self.head.end();
        settled
    }
}

struct World {
    segment: SegmentHead,
    run: Run,
}

/// An owner appends two keys while a sealer seals: every entry the owner was told is in
/// the segment (open or captured) is in the captured length and every dropped one is not,
/// and the sealer converts only after the owner's in-flight inserts are checked.
#[test]
fn an_append_racing_a_seal_is_captured_or_told_it_was_dropped() {
    let _limit = time_limit();
    loom::model(|| {
        let world = Arc::new(World {
            segment: SegmentHead::new(),
            run: Run::new(),
        });
        world.segment.claim();
        let owner = {
            let w = Arc::clone(&world);
            thread::spawn(move || {
                let mut outcomes = Vec::new();
                for slot in 0..2 {
                    let settled = w.run.append(&w.segment, slot, 10 + slot as u64);
                    outcomes.push(settled);
                    if settled == Settled::Dropped {
                        break;
                    }
                }
                outcomes
            })
        };
        // The sealer.
        world.segment.close();
        let captured = world.run.head.capture();
        world.run.head.drain();
        for slot in 0..captured as usize {
            assert!(
                world.run.checked[slot].load(Ordering::Relaxed),
                "slot {slot} converted before its insert was checked"
            );
        }
        let outcomes = owner.join().unwrap();
        for (slot, settled) in outcomes.iter().enumerate() {
            match settled {
                Settled::Open | Settled::Captured => {
                    assert!(
                        (slot as u64) < captured,
                        "slot {slot} lost: captured {captured}"
                    )
                }
                Settled::Dropped => {
                    assert!((slot as u64) >= captured, "slot {slot} taken and dropped")
                }
            }
        }
    });
}

/// A reader of the open run, racing an append and a seal: if its check after reading
/// ([`SegmentHead::open_after_fence`], the first step of [`RunHead::committed`]) finds the
/// segment open, the sealer captures every entry it read, so an entry it returned never
/// disappears (if closed, it keeps only captured ones). Three threads: the schedules are
/// bounded to three preemptions.
#[test]
fn a_reader_never_keeps_an_entry_the_seal_drops() {
    let _limit = time_limit();
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let world = Arc::new(World {
            segment: SegmentHead::new(),
            run: Run::new(),
        });
        world.segment.claim();
        let owner = {
            let w = Arc::clone(&world);
            thread::spawn(move || w.run.append(&w.segment, 0, 10))
        };
        let reader = {
            let w = Arc::clone(&world);
            thread::spawn(move || {
                let seen = w.run.head.published();
                if seen > 0 {
                    assert_eq!(w.run.slots[0].load(Ordering::Relaxed), 10);
                }
                (seen, w.segment.open_after_fence())
            })
        };
        world.segment.close();
        let captured = world.run.head.capture();
        world.run.head.drain();
        owner.join().unwrap();
        let (seen, open) = reader.join().unwrap();
        if open {
            assert!(
                seen <= captured,
                "a reader kept {seen} entries, {captured} captured"
            );
        }
    });
}

/// Two threads append the same key to their own runs of one segment at the same time: at
/// least one of them, checking the other's run after its own publication, finds the key
/// (so the two inserts are resolved instead of both claiming to be first).
#[test]
fn two_appends_of_one_key_meet() {
    let _limit = time_limit();
    loom::model(|| {
        let segment = Arc::new(SegmentHead::new());
        let runs = Arc::new([Run::new(), Run::new()]);
        segment.claim();
        segment.claim();
        let appenders: Vec<_> = (0..2)
            .map(|me| {
                let (segment, runs) = (Arc::clone(&segment), Arc::clone(&runs));
                thread::spawn(move || {
                    assert_eq!(runs[me].append(&segment, 0, 7), Settled::Open);
                    // A peer exists: the full fence before looking at it (see `check_peers`).
                    loom::sync::atomic::fence(Ordering::SeqCst);
                    let peer = &runs[1 - me];
                    peer.head.covers([0, 7])
                        && peer.head.published() >= 1
                        && peer.slots[0].load(Ordering::Relaxed) == 7
                })
            })
            .collect();
        let met: Vec<bool> = appenders.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(
            met[0] || met[1],
            "both inserts of the key missed each other"
        );
    });
}

/// A thread joins a segment while it is sealed: if the join says the segment is open, the
/// sealer's count of runs includes the new one (so it captures it); otherwise the joiner
/// takes nothing there.
#[test]
fn a_joiner_is_seen_by_the_sealer_or_sees_the_seal() {
    let _limit = time_limit();
    loom::model(|| {
        let segment = Arc::new(SegmentHead::new());
        segment.claim();
        let joiner = {
            let segment = Arc::clone(&segment);
            thread::spawn(move || {
                let slot = segment.claim();
                (slot, segment.join())
            })
        };
        segment.close();
        let runs = segment.used();
        let (slot, open) = joiner.join().unwrap();
        if open {
            assert!(
                slot < runs,
                "an open join in slot {slot} the sealer did not count ({runs})"
            );
        }
    });
}

/// The spill of a sealed segment as the model keeps it: its lock's contents.
#[derive(Default)]
struct Spill {
    closed: bool,
    keys: Vec<u64>,
}

/// The spill's hand-over, in the steps of `Segment::spill_insert`, `Segment::close_spill` and
/// `SbTree::convert`: an insert takes the spill's lock and adds its key unless the spill is
/// closed (then it waits for the conversion and writes the data layer); the conversion closes
/// the spill and copies its keys to the data layer under the lock (the spill keeps them), then
/// marks the segment converted; a reader looks in the data layer once the segment is marked
/// converted, else in the spill. An insert is never lost, and a reader that starts after it
/// returned finds it whichever way it looks. (Were the conversion to empty the spill as it
/// copies it, this model fails: a reader that saw the segment unconverted would miss the key.)
#[test]
fn a_spilled_insert_survives_a_racing_conversion() {
    let _limit = time_limit();
    loom::model(|| {
        let spill = Arc::new(loom::sync::Mutex::new(Spill::default()));
        let data = Arc::new(loom::sync::Mutex::new(Vec::<u64>::new()));
        let converted = Arc::new(AtomicBool::new(false));
        let shared = || {
            (
                Arc::clone(&spill),
                Arc::clone(&data),
                Arc::clone(&converted),
            )
        };
        let inserter = {
            let (spill, data, converted) = shared();
            thread::spawn(move || {
                {
                    let mut spill = spill.lock().unwrap();
                    if !spill.closed {
                        spill.keys.push(7);
                        return;
                    }
                }
                // Closed: wait for the conversion, then write the data layer.
                while !converted.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                data.lock().unwrap().push(7);
            })
        };
        let converter = {
            let (spill, data, converted) = shared();
            thread::spawn(move || {
                {
                    let mut spill = spill.lock().unwrap();
                    spill.closed = true;
                    data.lock().unwrap().extend(spill.keys.iter().copied());
                }
                converted.store(true, Ordering::Release);
            })
        };
        inserter.join().unwrap();
        // A reader after the insert returned, racing the conversion.
        let found = if converted.load(Ordering::Acquire) {
            data.lock().unwrap().contains(&7)
        } else {
            spill.lock().unwrap().keys.contains(&7)
        };
        assert!(found, "a reader after the insert missed it");
        converter.join().unwrap();
        assert_eq!(*data.lock().unwrap(), [7], "the key once in the data layer");
    });
}
