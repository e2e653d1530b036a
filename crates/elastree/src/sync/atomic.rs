//! The atomics the version lock is built on: std's, or loom's under `--cfg loom`, so that
//! the lock protocol can be model-checked (`tests/loom_olc.rs`).

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A hint that this thread is spinning (under loom: a yield, so the model makes progress).
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
