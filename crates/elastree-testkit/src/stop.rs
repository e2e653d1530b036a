//! A stop flag for a test's helper threads (scanners, readers, movers) that loop until the
//! workers are done.
//!
//! Setting the flag by hand after joining the workers leaves it unset when a worker panics:
//! the join re-raises the panic, the scope then waits for the helpers, and they spin
//! forever. [`StopFlag::set_on_drop`] returns a guard made before the helpers start; when
//! the scope's closure ends, normally or by a panic, the guard sets the flag, the helpers
//! stop, and the panic reaches the harness.

use std::sync::atomic::{AtomicBool, Ordering};

/// A flag helper threads poll to know when to stop.
#[derive(Debug, Default)]
pub struct StopFlag(AtomicBool);

impl StopFlag {
    /// An unset flag.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// Whether the flag is set.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Sets the flag.
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// A guard that sets the flag when it drops (also while unwinding from a panic).
    #[must_use = "the flag is set when the guard drops: bind it with `let _stop = ...`"]
    pub fn set_on_drop(&self) -> SetOnDrop<'_> {
        SetOnDrop(self)
    }
}

/// Sets its [`StopFlag`] when dropped.
pub struct SetOnDrop<'a>(&'a StopFlag);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_worker_still_stops_the_helpers() {
        let stop = StopFlag::new();
        let outcome = std::panic::catch_unwind(|| {
            std::thread::scope(|s| {
                let _stop = stop.set_on_drop();
                s.spawn(|| {
                    while !stop.is_set() {
                        std::thread::yield_now();
                    }
                });
                let worker = s.spawn(|| panic!("a worker fails"));
                worker.join().unwrap();
            })
        });
        assert!(outcome.is_err(), "the worker's panic reaches the test");
        assert!(stop.is_set());
    }
}
