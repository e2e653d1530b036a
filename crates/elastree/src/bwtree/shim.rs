//! The two things the Bw-tree takes from outside its own code to run concurrently, behind
//! one seam so that `tests/loom_bwtree.rs` can model-check the tree itself: epoch-based
//! reclamation (pins, guards, deferred frees) and the mapping table's arrays of slots. The
//! slots are [`crate::sync::atomic`]'s atomics: std's, or loom's under the `loom` feature,
//! so that loom sees every read and compare-and-swap of a mapping-table entry and explores
//! their interleavings. This module holds the tree's only `cfg(feature = "loom")` switches
//! (but for the mapping table's unit tests, which run outside any model); the mapping
//! table's prefetch hints are off under loom through [`PREFETCH_HINTS`].
//!
//! # Without `loom` (every real build)
//!
//! The epoch is crossbeam-epoch's global collector: [`pin`] is `crossbeam_epoch::pin`,
//! [`Guard`] is its guard, and [`Garbage::defer`] is `Guard::defer_unchecked`; the
//! [`Garbage`] list is a zero-sized type. A segment of slots is one zeroed allocation
//! (zeroed atomics are null links). Every function here is `#[inline]` and forwards, so the
//! tree compiles to the code it compiled to before the seam existed.
//!
//! # Under `loom` (model checks only)
//!
//! crossbeam-epoch is not loom-aware (its atomics and thread-locals are std's, invisible to
//! the model), so the model replaces it: pinning does nothing, and [`Garbage::defer`] keeps
//! the deferred function on the [`Garbage`] list, which runs them when it is dropped, with
//! the tree (the tree's threads have joined by then). That is sound, and checks what the
//! model is for, because it is the epoch's guarantee made stronger: the real epoch frees a
//! retired chain (or hands a retired id out again) only after every thread pinned at its
//! retirement has unpinned; here nothing retired is freed or reused while any thread could
//! run. So every pointer a thread read from the mapping table stays valid, as it does under
//! a pin, and no address or id is reused within a run, so a compare-and-swap never meets an
//! ABA (which the pins rule out in the real tree, since a link read while pinned cannot be
//! freed and reallocated before the thread unpins). What the model then checks is the
//! install protocol: which chain top each compare-and-swap expected, who wins, and how the
//! losers and helpers recover. It does not check the epoch itself (crossbeam's own tests
//! do) nor id recycling. A segment of slots is built atom by atom: loom's atomics are not
//! valid when zeroed.

#[cfg(not(feature = "loom"))]
pub(super) use crossbeam_epoch::{pin, Guard};

#[cfg(feature = "loom")]
pub(super) use model::{pin, Guard};

use crate::sync::atomic::AtomicUsize;

/// Functions deferred until no thread can reach what they free (see the module docs).
#[derive(Default)]
pub(super) struct Garbage {
    /// Under `loom`: the deferred functions, run when the list is dropped.
    #[cfg(feature = "loom")]
    kept: model::Kept,
}

impl Garbage {
    /// Runs `free` once no thread pinned now (under `guard`) can still reach what it frees:
    /// after the epoch's grace period, or (under `loom`) when the list is dropped.
    ///
    /// # Safety
    ///
    /// What `free` frees is unlinked: no thread can make a new reference to it.
    #[inline]
    pub unsafe fn defer<F: FnOnce() + Send + 'static>(&self, guard: &Guard, free: F) {
        #[cfg(not(feature = "loom"))]
        // SAFETY: the caller's contract; the closure is `Send + 'static`, so running it on
        // whichever thread collects the garbage later is sound.
        unsafe {
            guard.defer_unchecked(free)
        };
        #[cfg(feature = "loom")]
        {
            let _ = guard;
            self.kept.push(Box::new(free));
        }
    }
}

/// Whether the mapping table keeps and reads its prefetch hints: not under loom, where they
/// would change no outcome and only widen the models.
pub(super) const PREFETCH_HINTS: bool = cfg!(not(feature = "loom"));

/// The layout of `len` slots: 16-aligned, so that an id's link and hint (two slots from an
/// even index) share a cache line.
#[cfg(not(feature = "loom"))]
fn slots_layout(len: usize) -> std::alloc::Layout {
    std::alloc::Layout::array::<AtomicUsize>(len)
        .and_then(|layout| layout.align_to(16))
        .expect("segment layout")
}

/// Allocates `len` slots, each a null link.
#[inline]
pub(super) fn new_slots(len: usize) -> *mut AtomicUsize {
    #[cfg(not(feature = "loom"))]
    {
        let layout = slots_layout(len);
        // SAFETY: the layout is non-zero-sized (`len > 0`); zeroed atomics are valid (null
        // links).
        let slots = unsafe { std::alloc::alloc_zeroed(layout) } as *mut AtomicUsize;
        if slots.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        slots
    }
    #[cfg(feature = "loom")]
    {
        let slots: Box<[AtomicUsize]> = (0..len).map(|_| AtomicUsize::new(0)).collect();
        Box::into_raw(slots) as *mut AtomicUsize
    }
}

/// Frees slots from [`new_slots`].
///
/// # Safety
///
/// `slots` came from `new_slots(len)` and no reference into it remains.
#[inline]
pub(super) unsafe fn free_slots(slots: *mut AtomicUsize, len: usize) {
    #[cfg(not(feature = "loom"))]
    {
        let layout = slots_layout(len);
        // SAFETY: the caller's contract: allocated by `new_slots` with this layout.
        unsafe { std::alloc::dealloc(slots as *mut u8, layout) };
    }
    #[cfg(feature = "loom")]
    // SAFETY: the caller's contract: a boxed slice of `len` atomics made by `new_slots`.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(slots, len)) });
}

/// The epoch's stand-in under `loom` (see the module docs).
#[cfg(feature = "loom")]
mod model {
    use std::sync::Mutex;

    /// A pin that pins nothing: nothing retired is freed before the tree is dropped.
    pub struct Guard(());

    impl Guard {
        /// Nothing to leave and re-enter.
        pub fn repin(&mut self) {}
    }

    /// Pins nothing (see [`Guard`]).
    pub fn pin() -> Guard {
        Guard(())
    }

    /// A deferred function.
    type Deferred = Box<dyn FnOnce() + Send>;

    /// Deferred functions, run on drop. A std mutex, not loom's: no loom operation runs
    /// while it is held, so loom never switches threads inside it and it is never contended.
    #[derive(Default)]
    pub struct Kept(Mutex<Vec<Deferred>>);

    impl Kept {
        /// Keeps `free` until the list is dropped.
        pub fn push(&self, free: Deferred) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(free);
        }
    }

    impl Drop for Kept {
        fn drop(&mut self) {
            let kept = std::mem::take(self.0.get_mut().unwrap_or_else(|e| e.into_inner()));
            for free in kept {
                free();
            }
        }
    }
}
