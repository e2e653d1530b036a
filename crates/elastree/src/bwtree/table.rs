//! The mapping table: logical page ids to the page's current state (a tagged [`Link`] to the
//! top of its delta chain), growable without stopping readers.
//!
//! Beside each id's link lies a hint: the link of the last base page installed as the
//! page's whole chain. A reader that finds a base page in the table starts loading its header
//! and mid-keys at once (the link says how many lines: [`Link::prefetch`]); one that finds a
//! delta on top does so for the hint's page, so the base page (which the walk reaches after
//! the delta) loads while the delta does, instead of after it. The hint is never
//! dereferenced: a stale one (the page consolidated since, or freed) only wastes prefetches,
//! which never fault.
//!
//! A lookup's descent keeps one more hint per child, in its parent: the inner page's
//! sidecar (`Page::hint` in `node::page`) holds the base page the child had when a lookup
//! last passed. The descent starts loading that page as soon as its search of the parent
//! ends, so the child's page and its mapping-table entry load together instead of one
//! after the other ([`MappingTable::get_hinted`], which also refreshes a stale hint).
//! Writers neither read nor refresh these hints: under writes a leaf's base page changes
//! every few writes, so a refresh would mostly dirty a line of the parent for nothing.
//!
//! # Layout
//!
//! Ids are split over segments whose sizes double: segment `s` holds
//! `FIRST_SEGMENT << s` ids (two words each: the link and the hint), so id `i` lives in segment
//! `msb(i + FIRST_SEGMENT) - log2(FIRST_SEGMENT)`, at the offset of `i + FIRST_SEGMENT`
//! below that bit. The
//! directory holds one pointer per segment ([`SEGMENTS`] of them: more ids than memory can
//! hold pages for); a segment is allocated, zeroed, the first time an id in it is handed
//! out, installed with a compare-and-swap (a thread that loses the race frees its copy), and
//! never freed or moved before the table is dropped. A reader therefore loads the directory
//! slot and the entry, and never waits for a growing table.
//!
//! # Ids
//!
//! Fresh ids come from a counter. An id whose page was removed is retired through the epoch
//! ([`MappingTable::retire`]): it is handed out again only after every thread pinned when it
//! was retired has unpinned, so no thread still holding the old id can see a new page under
//! it.

use std::alloc::Layout;
use std::sync::{Arc, Mutex};

use super::delta::Link;
use super::shim::{self, Garbage, Guard};
use crate::mem::ByteCounter;
use crate::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
/// A child hint in a page's sidecar: page memory, a plain atomic even under loom.
type HintWord = std::sync::atomic::AtomicU64;

/// Ids of the first segment: a small tree's table is one 16 KiB segment.
const FIRST_SEGMENT: u64 = 1024;
/// `log2(FIRST_SEGMENT)`.
const FIRST_BITS: u32 = FIRST_SEGMENT.trailing_zeros();
/// Segments in the directory: about `FIRST_SEGMENT << SEGMENTS` ids, 2^51.
pub(super) const SEGMENTS: usize = 41;

/// A logical page id.
pub(super) type PageId = u64;

/// Where id `id` lives: its segment and the offset in it.
#[inline]
fn locate(id: PageId) -> (usize, usize) {
    let biased = id + FIRST_SEGMENT;
    let bit = 63 - biased.leading_zeros();
    let segment = (bit - FIRST_BITS) as usize;
    (segment, (biased - (1 << bit)) as usize)
}

/// Ids of segment `s`.
fn segment_len(s: usize) -> usize {
    (FIRST_SEGMENT << s) as usize
}

/// Words per id in a segment: its link and its base-page hint, in one 16-byte-aligned pair
/// (so in one cache line).
const WORDS_PER_ID: usize = 2;

fn segment_layout(s: usize) -> Layout {
    Layout::array::<AtomicUsize>(WORDS_PER_ID * segment_len(s)).expect("segment layout")
}

/// The mapping table (see the module docs).
pub(super) struct MappingTable {
    directory: [AtomicPtr<AtomicUsize>; SEGMENTS],
    /// The next id never handed out.
    next: AtomicU64,
    /// Retired ids whose grace period has passed, shared with the epoch's deferred pushes.
    free: Arc<Mutex<Vec<PageId>>>,
    /// Bytes of the segments (the tree's "aux" memory).
    bytes: ByteCounter,
    /// The deferred pushes onto `free`.
    garbage: Garbage,
}

impl MappingTable {
    /// An empty table whose first fresh id is `first` (0 but in tests of a large table).
    pub fn new(first: PageId) -> Self {
        Self {
            directory: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            next: AtomicU64::new(first),
            free: Arc::new(Mutex::new(Vec::new())),
            bytes: ByteCounter::new(),
            garbage: Garbage::default(),
        }
    }

    /// The words of `id` (its link and its hint), if its segment exists.
    #[inline]
    fn words(&self, id: PageId) -> Option<&[AtomicUsize; WORDS_PER_ID]> {
        let (segment, offset) = locate(id);
        let base = self.directory.get(segment)?.load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: a non-null directory entry points to a live segment of
        // `WORDS_PER_ID * segment_len` zero-initialised atomics (installed with Release after
        // zeroing, freed only on drop) and `offset < segment_len(segment)` by `locate`.
        Some(unsafe { &*(base.add(WORDS_PER_ID * offset) as *const [AtomicUsize; WORDS_PER_ID]) })
    }

    /// The current state of page `id` (null for an id with no page). The lines a search of
    /// its base page reads first start loading: the page's own when it is the whole chain,
    /// the hint's (see the module docs) when a delta tops it.
    #[inline]
    pub fn get(&self, id: PageId) -> Link {
        self.words(id).map_or(Link::NULL, |words| {
            let link = Link(words[0].load(Ordering::Acquire));
            if shim::PREFETCH_HINTS {
                Self::base_page(words, link).prefetch();
            }
            link
        })
    }

    /// The base page to start loading for an entry (`words`) whose state is `link`: the
    /// page itself when it is the whole chain, else the entry's hint.
    #[inline]
    fn base_page(words: &[AtomicUsize; WORDS_PER_ID], link: Link) -> Link {
        if link.is_delta() {
            Link(words[1].load(Ordering::Relaxed))
        } else {
            link
        }
    }

    /// [`Self::get`] for a descent that has read `hint`, the child hint its parent keeps for
    /// `id` ([`PageView::child_hint`](crate::node::page::PageView::child_hint)), and started
    /// loading the page it names: the base page's lines are requested only if the hint
    /// named another page, and then the hint is set to the base page (the page itself when
    /// it is the whole chain, else the entry's own hint), so that the next descent finds it
    /// there.
    #[inline]
    pub fn get_hinted(&self, id: PageId, hint: &HintWord) -> Link {
        self.words(id).map_or(Link::NULL, |words| {
            let link = Link(words[0].load(Ordering::Acquire));
            if shim::PREFETCH_HINTS {
                let base = Self::base_page(words, link);
                if base.0 as u64 != hint.load(Ordering::Relaxed) {
                    base.prefetch();
                    hint.store(base.0 as u64, Ordering::Relaxed);
                }
            }
            link
        })
    }

    /// Starts loading page `id`'s entry and, through it, the first lines of its base page,
    /// for a read that will come to the page shortly (a [`MappingTable::get`] whose answer
    /// is not needed yet).
    #[inline]
    pub fn start_loading(&self, id: PageId) {
        let _ = self.get(id);
    }

    /// Replaces page `id`'s state `expected` with `new`; `false` if it was not `expected`.
    #[inline]
    pub fn cas(&self, id: PageId, expected: Link, new: Link) -> bool {
        self.words(id).is_some_and(|words| {
            let swapped = words[0]
                .compare_exchange(expected.0, new.0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if swapped {
                Self::note_base(words, new);
            }
            swapped
        })
    }

    /// Sets the state of `id`, an id this thread holds and has not published.
    pub fn set(&self, id: PageId, link: Link) {
        if let Some(words) = self.words(id) {
            words[0].store(link.0, Ordering::Release);
            Self::note_base(words, link);
        }
    }

    /// Keeps base page `link` (if it is one) as its id's hint. Two threads that install base
    /// pages one after the other may store their hints in the other order, leaving the older
    /// page as the hint until the next install: a wasted prefetch, nothing more.
    #[inline]
    fn note_base(words: &[AtomicUsize; WORDS_PER_ID], link: Link) {
        if shim::PREFETCH_HINTS && link.is_base() {
            words[1].store(link.0, Ordering::Relaxed);
        }
    }

    /// Hands out an id, recycled or fresh, whose slot exists and is null.
    pub fn allocate(&self) -> PageId {
        let recycled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let id = recycled.unwrap_or_else(|| self.next.fetch_add(1, Ordering::Relaxed));
        self.ensure_segment(locate(id).0);
        id
    }

    /// Allocates segment `s` if no thread has.
    fn ensure_segment(&self, s: usize) {
        let entry = &self.directory[s];
        if !entry.load(Ordering::Acquire).is_null() {
            return;
        }
        let fresh = shim::new_slots(WORDS_PER_ID * segment_len(s));
        match entry.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => self.bytes.add(segment_layout(s).size()),
            // SAFETY: `fresh` was never shared (another thread installed its segment first).
            Err(_) => unsafe { shim::free_slots(fresh, WORDS_PER_ID * segment_len(s)) },
        }
    }

    /// Clears `id`'s slot and hands the id back for reuse once every thread pinned now has
    /// unpinned. The caller has unlinked the page (no new reference to the id can be made).
    pub fn retire(&self, id: PageId, guard: &Guard) {
        self.set(id, Link::NULL);
        let free = Arc::clone(&self.free);
        // SAFETY: the push frees nothing; the id's page is unlinked (the caller's contract),
        // so handing the id out again after the grace period is sound.
        unsafe {
            self.garbage.defer(guard, move || {
                free.lock().unwrap_or_else(|e| e.into_inner()).push(id)
            })
        };
    }

    /// One more than the largest id handed out (every live id is below it).
    pub fn end(&self) -> PageId {
        self.next.load(Ordering::Relaxed)
    }

    /// Ids retired and ready for reuse.
    #[cfg(all(test, not(feature = "loom")))]
    pub fn recycled(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Bytes the table allocated: its segments, and the list of ids ready for reuse (with
    /// the `Arc` that shares it).
    pub fn bytes(&self) -> usize {
        let free = self
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .capacity();
        self.segment_bytes()
            + free * std::mem::size_of::<PageId>()
            + crate::mem::arc_bytes::<Mutex<Vec<PageId>>>()
    }

    /// Bytes of the segments allocated.
    fn segment_bytes(&self) -> usize {
        self.bytes.get()
    }

    /// Segments allocated.
    #[cfg(all(test, not(feature = "loom")))]
    pub fn segments(&self) -> usize {
        self.directory
            .iter()
            .filter(|s| !s.load(Ordering::Relaxed).is_null())
            .count()
    }
}

impl Drop for MappingTable {
    fn drop(&mut self) {
        for (s, entry) in self.directory.iter().enumerate() {
            let base = entry.load(Ordering::Relaxed);
            if !base.is_null() {
                // SAFETY: allocated by `ensure_segment` with this length; the table is being
                // dropped, so no reference into it remains.
                unsafe { shim::free_slots(base, WORDS_PER_ID * segment_len(s)) };
            }
        }
    }
}

// Not under `loom`: these run on std threads and crossbeam's own collectors, outside any
// model.
#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crossbeam_epoch as epoch;

    #[test]
    fn ids_map_to_distinct_slots_across_segments() {
        let mut seen = std::collections::HashSet::new();
        for id in (0..100_000).chain((1 << 24) - 5000..(1 << 24) + 5000) {
            let (s, o) = locate(id);
            assert!(o < segment_len(s), "id {id}: offset {o} beyond segment {s}");
            assert!(seen.insert((s, o)), "id {id} shares a slot");
        }
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(FIRST_SEGMENT - 1), (0, FIRST_SEGMENT as usize - 1));
        assert_eq!(locate(FIRST_SEGMENT), (1, 0));
        assert_eq!(locate(3 * FIRST_SEGMENT), (2, 0));
    }

    #[test]
    fn grows_past_two_to_the_24_ids_while_readers_read() {
        // Start near 2^24 (the ids below are never used: their segments stay unallocated),
        // then hand out ids past it while another thread reads the first ones.
        let start = (1 << 24) - 3 * FIRST_SEGMENT;
        let table = MappingTable::new(start);
        let first = table.allocate();
        table.set(first, Link(0x10));
        let before = table.segments();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..100_000 {
                    assert_eq!(table.get(first), Link(0x10));
                }
            });
            for _ in 0..(1 << 16) {
                let id = table.allocate();
                assert_eq!(table.get(id), Link::NULL);
                table.set(id, Link(id as usize * 2));
            }
        });
        assert!(table.end() > 1 << 24);
        assert!(table.segments() > before, "the directory grew");
        for id in start + 1..table.end() {
            assert_eq!(table.get(id), Link(id as usize * 2));
        }
        // Every segment holding a handed-out id exists, and its bytes are counted.
        let expected: usize = (0..SEGMENTS)
            .filter(|&s| !table.directory[s].load(Ordering::Relaxed).is_null())
            .map(|s| segment_layout(s).size())
            .sum();
        assert_eq!(table.segment_bytes(), expected);
        // Only the two segments holding the ids handed out (2^23 and 2^24 ids).
        assert_eq!(table.segments(), 2);
    }

    #[test]
    fn retired_ids_are_reused_only_after_the_grace_period() {
        // A collector of the test's own: on the global one, any other test pinned at the
        // time would hold the epoch back, and the id's grace period with it.
        let collector = epoch::Collector::new();
        let (retirer, waiter) = (collector.register(), collector.register());
        let table = MappingTable::new(0);
        let a = table.allocate();
        table.set(a, Link(0x20));
        let reader = waiter.pin();
        table.retire(a, &retirer.pin());
        assert_eq!(table.get(a), Link::NULL);
        // A thread pinned before the retirement keeps the id from being recycled.
        for _ in 0..256 {
            retirer.pin().flush();
        }
        assert_eq!(table.recycled(), 0);
        assert_ne!(table.allocate(), a);
        drop(reader);
        // Nobody else is pinned on this collector: a few flushes advance the epoch past
        // the retirement and run the deferred push.
        for _ in 0..256 {
            retirer.pin().flush();
            if table.recycled() > 0 {
                break;
            }
        }
        assert_eq!(table.allocate(), a, "the id is handed out again");
    }
}
