//! `settle_deferred_frees` waits for the epoch collector to free what was deferred before it,
//! also while another thread holds the epoch back, instead of giving up after a round that
//! frees nothing.
//!
//! One test in its own binary: no other test's thread takes garbage off the collector's
//! queue (and frees it on its own time) while the settle waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use elastree_bench::runner::settle::settle_deferred_frees;
use elastree_testkit::time_limit;

/// Defers a closure that counts itself into `freed` on the current thread.
fn defer_count(freed: &Arc<AtomicUsize>) {
    let freed = Arc::clone(freed);
    crossbeam_epoch::pin().defer(move || freed.fetch_add(1, Ordering::Relaxed));
}

#[test]
fn a_settle_waits_for_a_pinned_thread_and_frees_everything_deferred_before_it() {
    let _limit = time_limit();
    let freed = Arc::new(AtomicUsize::new(0));
    // Garbage of threads that have exited: in the collector's global queue.
    for _ in 0..3 {
        let freed = Arc::clone(&freed);
        thread::spawn(move || defer_count(&freed)).join().unwrap();
    }
    // A thread pinned while the settle starts holds the epoch back, as a descheduled
    // reader does on a busy machine.
    let (pinned, is_pinned) = mpsc::channel();
    let holder = thread::spawn(move || {
        let guard = crossbeam_epoch::pin();
        pinned.send(()).unwrap();
        // How long it stays pinned does not matter to the outcome (the settle waits up to
        // 30 s for it); it only has to outlast the settle's first rounds.
        thread::sleep(Duration::from_millis(300));
        drop(guard);
    });
    is_pinned
        .recv_timeout(Duration::from_secs(60))
        .expect("the holder thread pins");
    // Garbage of this thread, deferred while the holder is pinned.
    defer_count(&freed);
    settle_deferred_frees();
    assert_eq!(
        freed.load(Ordering::Relaxed),
        4,
        "closures deferred before the settle (3 by exited threads, 1 by this one) that ran"
    );
    holder.join().unwrap();
}
