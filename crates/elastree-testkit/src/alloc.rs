//! A counting global allocator: the system allocator plus running totals of the bytes currently
//! allocated and the peak, kept in relaxed atomics.
//!
//! The `elastree` binary (for its benchmarks) and the memory tests install it with
//!
//! ```text
//! #[global_allocator]
//! static ALLOC: elastree_testkit::alloc::CountingAlloc = elastree_testkit::alloc::CountingAlloc;
//! ```
//!
//! and read [`current`] before and after loading an index ([`assert_close`] compares an
//! index's own accounting with it). Without the
//! allocator installed (as in a test binary that does not install it) [`installed`] is `false`
//! and the counts stay at zero.
//!
//! The counts are the sizes requested from the allocator (`Layout::size`), not what the system
//! allocator rounds them up to, so they match an index's own exact accounting. Every
//! allocation touches one shared counter, which costs a little under many threads; every
//! index pays the same per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocations made by this thread: a constant-initialized cell without a destructor, so
    /// reaching it never allocates.
    static THREAD_ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting the bytes it hands out.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

#[inline]
fn record_alloc(bytes: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    // Reading first keeps the common case (no new peak) free of a second atomic write.
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

#[inline]
fn record_free(bytes: usize) {
    CURRENT.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; the counting touches only
// atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` was allocated by `System` through this allocator
        // with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        record_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            record_free(layout.size());
            record_alloc(new_size);
        }
        new
    }
}

/// How many allocations (and reallocations) the process has made so far, by every thread.
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// How many allocations (and reallocations) the calling thread has made so far: what an
/// operation on this thread allocated, whatever background threads (merges, maintenance, the
/// epoch collector) allocate meanwhile.
pub fn thread_allocations() -> usize {
    THREAD_ALLOCATIONS.with(Cell::get)
}

/// Whether the counting allocator is the global allocator of this process (it has counted at
/// least one allocation).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Bytes currently allocated.
pub fn current() -> usize {
    CURRENT.load(Ordering::Relaxed)
}

/// The most bytes allocated at once since the start or the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak measurement from the bytes allocated now.
pub fn reset_peak() {
    PEAK.store(current(), Ordering::Relaxed);
}

/// The process's peak resident set size in bytes (`VmHWM` in `/proc/self/status`), where the
/// system reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// The process's current resident set size in bytes (`VmRSS`), where the system reports it.
pub fn rss_bytes() -> Option<u64> {
    proc_status_kib("VmRSS:").map(|kib| kib * 1024)
}

/// Resets the peak RSS (`VmHWM`) to the current RSS by writing `5` to `/proc/self/clear_refs`
/// (Linux 4.0 and later), so the next [`peak_rss_bytes`] covers only what follows. Returns
/// whether the reset worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

/// Returns free heap memory to the system where the C library can (glibc's `malloc_trim`), so
/// that a following peak-RSS reading is not inflated by memory freed earlier. Returns whether
/// anything was released; a no-op elsewhere.
pub fn release_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's `malloc_trim` takes a byte count, touches only the allocator's own
        // state under its locks, and is safe to call at any time from any thread.
        unsafe { malloc_trim(0) != 0 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kib(&status, field)
}

/// Parses a `Field:   1234 kB` line of `/proc/<pid>/status`.
fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let mut parts = line[field.len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(value),
        Some(_) => None,
    }
}

/// [`current`] as a signed count, for differences from a baseline that may go below it.
pub fn allocated() -> isize {
    current() as isize
}

/// Asserts that an index's own figure (`reported` bytes) is within 5% of what the allocator
/// counted (`measured`), printing both; `what` names the index and the moment.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status_lines() {
        let status = "Name:\tx\nVmPeak:\t  200 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 99 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(1234));
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(99));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn reads_own_rss_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().unwrap() > 0);
            assert!(rss_bytes().unwrap() > 0);
        }
    }
}
