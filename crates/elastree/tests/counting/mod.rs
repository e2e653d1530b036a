//! A counting global allocator for the memory tests: each test binary that measures memory
//! installs it with `#[global_allocator] static GLOBAL: counting::Counting = counting::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Forwards to the system allocator and keeps a running count of the bytes allocated.
pub struct Counting;

static ALLOCATED: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes currently allocated in this process.
pub fn allocated() -> isize {
    ALLOCATED.load(Ordering::Relaxed)
}

/// Asserts that an index's own figure is within 5% of what the allocator counted.
pub fn assert_close(what: &str, reported: usize, measured: isize) {
    let measured = measured as f64;
    let error = (reported as f64 - measured).abs() / measured;
    eprintln!(
        "{what}: reported {reported} B, allocator {measured} B, error {:.3}%",
        error * 100.0
    );
    assert!(
        error <= 0.05,
        "{what}: reported {reported} B but the allocator counted {measured} B"
    );
}
