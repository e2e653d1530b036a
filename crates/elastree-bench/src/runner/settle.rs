//! Memory readings at rest: the frees that epoch-based indexes deferred, made to happen before
//! a reading.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::alloc;

/// How long [`settle_deferred_frees`] waits for the epoch collector at most. Reached only
/// when a thread stays pinned for that long (a hang elsewhere in the process); the reading
/// then counts memory not yet freed, and a warning says so.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// Consecutive quiet rounds (nothing freed) that end a settle.
const QUIET_ROUNDS: usize = 4;

/// Rounds a settle spends at most waiting for [`QUIET_ROUNDS`] quiet ones once the garbage
/// retired before it is collected (in a test process whose other threads allocate all the
/// time, no round is quiet; the benchmark's own process has no such threads).
const SETTLE_ROUNDS: usize = 16;

/// Pins and flushes of one round.
const FLUSHES_PER_ROUND: usize = 64;

/// Lets the frees that epoch-based indexes deferred happen now, before a memory reading.
///
/// elastree, bplustree, ferntree, congee and crossbeam-skiplist all retire memory through
/// crossbeam-epoch's default collector, which frees a retired object only once the global epoch
/// has advanced past it; garbage of threads that have exited waits in a global queue that each
/// collection drains a few bags at a time. (`scc::TreeIndex` uses a collector private to the
/// index, released when the index is dropped; so does masstree, a `seize` collector that its
/// adapter's `quiesce` flushes.)
///
/// This waits for a condition, not for a number of attempts: it queues a marker behind
/// everything retired so far (by this thread and by threads that have exited), then pins
/// and flushes from this (otherwise idle) thread, which advances the epoch and drains the
/// queue, until the marker has been freed: the queue is collected in order, so everything
/// queued before it has been collected too. Then it goes on until `QUIET_ROUNDS`
/// consecutive rounds free nothing more (a bag another thread took from the queue may still
/// be being freed), for at most `SETTLE_ROUNDS` rounds. A thread of the process that is
/// pinned holds the epoch back: rounds are 1 ms apart so that such a thread, descheduled on
/// a busy machine, gets to run and unpin. Gives up after [`SETTLE_LIMIT`].
///
/// The collector's own queue keeps one bag in flight while anything flushes (taking a bag off
/// the queue defers freeing the queue's old head, and that goes out in the next bag), so the
/// allocator's count swings by one bag from flush to flush. Each round ends right after a
/// flush that freed memory, where the swing is at its low point, so that two settles of a
/// process that does nothing else in between read the same count.
pub fn settle_deferred_frees() {
    settle_deferred_frees_watching(&|| 0);
}

/// [`settle_deferred_frees`], counting a round as quiet only if `held` (the bytes an index
/// reports holding, say) did not change either: the counting allocator is not installed in
/// every process (unit tests), and in a test process other threads allocate all the time.
pub fn settle_deferred_frees_watching(held: &dyn Fn() -> usize) {
    let marker = Arc::new(AtomicBool::new(false));
    {
        let guard = crossbeam_epoch::pin();
        // This thread's garbage goes to the global queue first, then the marker in a bag of
        // its own behind it: the queue is collected in order.
        guard.flush();
        let freed = Arc::clone(&marker);
        guard.defer(move || freed.store(true, Ordering::Release));
        guard.flush();
    }
    let deadline = Instant::now() + SETTLE_LIMIT;
    // The reading a round ends with: `held` first (it may pin), then the collector's swing
    // brought to its low point, then the allocator's count.
    let reading = || {
        let held = held();
        flush_to_a_low_point();
        (alloc::current(), held)
    };
    // Once the marker is freed: the last reading, the quiet rounds since and all rounds since.
    let mut after_marker: Option<((usize, usize), usize, usize)> = None;
    loop {
        for _ in 0..FLUSHES_PER_ROUND {
            crossbeam_epoch::pin().flush();
        }
        match &mut after_marker {
            None if marker.load(Ordering::Acquire) => {
                after_marker = Some((reading(), 0, 0));
            }
            None => {}
            Some((last, quiet, rounds)) => {
                let now = reading();
                if now == *last {
                    *quiet += 1;
                } else {
                    (*last, *quiet) = (now, 0);
                }
                *rounds += 1;
                if *quiet >= QUIET_ROUNDS || *rounds >= SETTLE_ROUNDS {
                    return;
                }
            }
        }
        if Instant::now() >= deadline {
            eprintln!(
                "warning: memory deferred by the epoch collector was not freed within \
                 {SETTLE_LIMIT:?} (a thread of this process stays pinned); the memory reading \
                 counts it"
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Flushes one at a time until a flush lowers the allocator's count (the collector freed a
/// bag and holds none in flight), at most 8 times (the swing's period is two flushes; without
/// the counting allocator, or with other threads allocating, nothing tells the low point).
fn flush_to_a_low_point() {
    for _ in 0..8 {
        let before = alloc::current();
        crossbeam_epoch::pin().flush();
        if alloc::current() < before {
            return;
        }
    }
}
