//! Asymmetric barriers: a cheap one ([`light`]) for the side of a store-buffering pattern
//! that runs on every operation, and a costly one ([`heavy`]) for the side that runs
//! rarely; together they order like two sequentially consistent fences. In the pattern,
//! thread A stores `x`, passes a barrier and loads `y`, while thread B stores `y`, passes a
//! barrier and loads `x`: at least one of them sees the other's store.
//!
//! On Linux the heavy barrier is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: the kernel
//! makes every running thread of the process execute a full memory barrier before the call
//! returns (a thread that is not running passes one when it is scheduled), so the light
//! side needs only to keep the compiler from reordering its store and load. If that barrier
//! falls between the light side's store and load, both are ordered by it; if it comes after
//! the load, the store was already visible when the heavy side's load ran; if before the
//! store, the light side's load sees the heavy side's store. This is how userspace RCU and
//! folly order their fast paths. Where the call is unavailable (other systems, kernels
//! before 4.14, valgrind), and under the `loom` feature (which models fences, not the
//! kernel), both barriers are sequentially consistent fences.

use super::atomic::{fence, Ordering};

/// Whether the expedited process-wide barrier is available (registered once per process).
#[cfg(all(target_os = "linux", not(feature = "loom")))]
fn expedited() -> bool {
    use std::sync::OnceLock;
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
        let query = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0) };
        if query < 0 || query & MEMBARRIER_CMD_PRIVATE_EXPEDITED == 0 {
            return false;
        }
        // SAFETY: as above.
        let registered = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
            )
        };
        registered == 0
    })
}

#[cfg(not(all(target_os = "linux", not(feature = "loom"))))]
fn expedited() -> bool {
    false
}

/// The commands of `membarrier(2)` (linux/membarrier.h).
#[cfg(all(target_os = "linux", not(feature = "loom")))]
const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
#[cfg(all(target_os = "linux", not(feature = "loom")))]
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
#[cfg(all(target_os = "linux", not(feature = "loom")))]
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// The frequent side's barrier: a compiler barrier where [`heavy`] is the kernel's, else a
/// sequentially consistent fence.
#[inline]
pub fn light() {
    if expedited() {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The rare side's barrier: see the module docs. Costs a system call (microseconds) where
/// it is the kernel's.
pub fn heavy() {
    #[cfg(all(target_os = "linux", not(feature = "loom")))]
    if expedited() {
        // SAFETY: as in `expedited`; the process registered for this command.
        let done =
            unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) };
        // Registered, the command cannot fail; should it, the light side's compiler barrier
        // would not be enough, so stop rather than run unordered.
        assert_eq!(done, 0, "membarrier failed after a successful registration");
        return;
    }
    fence(Ordering::SeqCst);
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;

    use super::*;

    /// The store-buffering pattern, many rounds: a light side and a heavy side never both
    /// miss the other's store.
    #[test]
    fn a_light_and_a_heavy_barrier_never_both_miss() {
        let rounds = 2_000u64;
        let x = Arc::new(AtomicU64::new(0));
        let y = Arc::new(AtomicU64::new(0));
        let start = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(AtomicU64::new(0));
        let light_missed = Arc::new(AtomicBool::new(false));
        let light_side = {
            let (x, y, start, finished, missed) = (
                x.clone(),
                y.clone(),
                start.clone(),
                finished.clone(),
                light_missed.clone(),
            );
            std::thread::spawn(move || {
                for round in 1..=rounds {
                    while start.load(Ordering::Acquire) < round {
                        std::hint::spin_loop();
                    }
                    x.store(round, Ordering::Relaxed);
                    light();
                    missed.store(y.load(Ordering::Relaxed) < round, Ordering::Relaxed);
                    finished.store(round, Ordering::Release);
                }
            })
        };
        for round in 1..=rounds {
            start.store(round, Ordering::Release);
            y.store(round, Ordering::Relaxed);
            heavy();
            let heavy_missed = x.load(Ordering::Relaxed) < round;
            while finished.load(Ordering::Acquire) < round {
                std::hint::spin_loop();
            }
            let both = heavy_missed && light_missed.load(Ordering::Relaxed);
            assert!(
                !both,
                "both sides missed the other's store in round {round}"
            );
        }
        light_side.join().unwrap();
    }
}
