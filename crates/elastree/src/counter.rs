//! A striped entry counter: writers on different threads bump different cache lines, so
//! counting entries does not serialise otherwise independent inserts.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Number of stripes; a power of two comfortably above the core counts we run on.
pub(crate) const STRIPES: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct Stripe(AtomicIsize);

/// A counter of entries whose increments from different threads rarely share a cache line.
#[derive(Default)]
pub(crate) struct StripedCount {
    stripes: [Stripe; STRIPES],
}

/// This thread's stripe, `0..STRIPES`: threads are dealt stripes in turn as they first ask,
/// so up to [`STRIPES`] threads get one each. Also the shard of per-thread structures
/// elsewhere (the SB-tree's block free lists).
pub(crate) fn stripe_of_this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE.with(|slot| {
        if slot.get() == usize::MAX {
            slot.set(NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
        }
        slot.get()
    })
}

impl StripedCount {
    /// Adds `delta` (which may be negative).
    #[inline]
    pub(crate) fn add(&self, delta: isize) {
        self.stripes[stripe_of_this_thread()]
            .0
            .fetch_add(delta, Ordering::Relaxed);
    }

    /// The sum of all stripes; exact when no update runs concurrently.
    pub(crate) fn get(&self) -> usize {
        let sum: isize = self
            .stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum();
        sum.max(0) as usize
    }
}
