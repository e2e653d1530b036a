//! The atomics the version lock is built on: std's, or shuttle's when the `shuttle`
//! feature is on, so that the lock protocol can be model-checked with randomized schedules.

#[cfg(feature = "shuttle")]
pub use shuttle::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(feature = "shuttle"))]
pub use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A hint to the CPU (or to shuttle's scheduler) that this thread is spinning.
#[inline]
pub fn spin_hint() {
    #[cfg(feature = "shuttle")]
    shuttle::thread::yield_now();
    #[cfg(not(feature = "shuttle"))]
    std::hint::spin_loop();
}
