//! A gate that lets one thread freeze a structure many writers update: after
//! [`WriterGate::seal`] returns, every writer that got in has left, and no writer gets in
//! again, so the sealer reads a structure that never changes and sees every write made
//! inside the gate.
//!
//! Protocol: one atomic word holds the count of writers inside and a sealed bit, so every
//! entry, exit and the seal are read-modify-writes of one location, totally ordered by its
//! modification order (no reliance on sequential consistency across locations). A writer
//! adds one and backs out if the value it replaced had the sealed bit; the sealer sets the
//! bit and waits for the count to reach zero. A writer's decrement on leaving (release)
//! publishes its writes to the sealer that reads zero (acquire). `tests/loom_olc.rs`
//! model-checks it.

use super::atomic::{AtomicUsize, Ordering, SpinWait};

/// The sealed bit of the gate's word; the bits below count the writers inside.
const SEALED: usize = 1 << (usize::BITS - 1);

/// See the module docs.
#[derive(Debug, Default)]
pub struct WriterGate {
    state: AtomicUsize,
}

/// A writer inside a [`WriterGate`]; leaves on drop.
#[derive(Debug)]
pub struct Inside<'a>(&'a WriterGate);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.state.fetch_sub(1, Ordering::Release);
    }
}

impl WriterGate {
    /// An open gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets a writer in, or `None` once the gate is sealed.
    pub fn enter(&self) -> Option<Inside<'_>> {
        if self.state.fetch_add(1, Ordering::Acquire) & SEALED != 0 {
            self.state.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Inside(self))
    }

    /// Closes the gate and waits until every writer inside has left. Writers should stay
    /// inside only briefly: this spins.
    pub fn seal(&self) {
        self.state.fetch_or(SEALED, Ordering::AcqRel);
        let wait = SpinWait::new();
        while self.state.load(Ordering::Acquire) & !SEALED != 0 {
            wait.wait();
        }
    }

    /// Whether [`WriterGate::seal`] has been called.
    pub fn is_sealed(&self) -> bool {
        self.state.load(Ordering::Acquire) & SEALED != 0
    }
}
