//! The atomics the version lock, the SB-tree's hand-over protocol and the Bw-tree's mapping
//! table are built on: std's, or loom's under the `loom` feature, so that those protocols can
//! be model-checked (`tests/loom_olc.rs`, `tests/loom_sbtree.rs`, `tests/loom_bwtree.rs`).

#[cfg(feature = "loom")]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(feature = "loom"))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// The pacing of one spin-wait: a few short spins, then yields of the thread, so that a
/// lock holder that was descheduled gets a core back (with more threads than cores, or
/// under valgrind, which runs one thread at a time: a wait that only spins there burns the
/// waiter's whole time slice while the holder cannot run). Under loom every wait is a
/// yield, so the model makes progress.
#[derive(Default)]
pub struct SpinWait {
    #[cfg(not(feature = "loom"))]
    backoff: crossbeam_utils::Backoff,
}

impl SpinWait {
    /// A wait that has not waited yet.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits once: spins at first (doubling up to 64 spin hints), then yields the thread.
    #[inline]
    pub fn wait(&self) {
        #[cfg(feature = "loom")]
        loom::thread::yield_now();
        #[cfg(not(feature = "loom"))]
        self.backoff.snooze();
    }
}
