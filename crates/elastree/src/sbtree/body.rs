//! A data block's body: one block of the block allocator holding a sorted run of entries,
//! keys and tids in separate arrays, an N-ary search table, and a few slots for entries that
//! arrive later (the late area).
//!
//! # Layout
//!
//! ```text
//! offset 0          Meta (56 bytes, below): counts, forms, bases, array offsets
//! offset 64         table: table_len keys, table[i] = keys[i * bucket]   (immutable)
//! keys_off          keys: count keys in key order                         (immutable)
//! tids_off          tids: count tids, tid i belongs to key i              (atomic)
//! bits_off          dead: ceil(count / 64) words, bit i set = entry i deleted (atomic)
//! late_off          late area: late_cap slots of (key words, tid word), the first
//!                   late_len of them in position order                    (atomic)
//! ```
//!
//! Every region starts on a 16-byte boundary. Keys are stored in one of two forms, chosen
//! per body when it is built: as 32-bit offsets from `key_base` (the smallest key) when all
//! of them fit, else as full keys; tids likewise as 32-bit offsets from `tid_base` or as full
//! words. Time-series keys of a block differ by far less than 2^32 and tids (row numbers)
//! are mostly close together, so a block of 4 KiB holds about 490 entries of 8 bytes instead
//! of 250 of 16.
//!
//! # Invariants
//!
//! * `meta` and the `table` and `keys` regions are written once, before the body is
//!   published (a release store of the block's body pointer, read with acquire); they never
//!   change after, so readers search them with plain (and vector) loads and no lock.
//! * The main entries are in strictly ascending position order (key, then tid in a non-unique
//!   index); `table[i] = keys[i * bucket]`.
//! * `tids`, `dead`, `late_len` and the late area change only under the owning block's write
//!   lock; readers read them with atomic loads and validate the block's version after.
//! * A position is held at most once among the live main entries and the late area; dead
//!   main entries count in `dead` and are skipped by every read.

use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use smallvec::SmallVec;

use super::alloc::BlockAlloc;
use super::key::{entry_words, first_not_below, load_entry, load_pos, store_entry, Pos, SbKey};
use super::simd::Kernel;

/// Bytes before the table: the meta record, rounded up to a cache line.
pub const META_BYTES: usize = 64;

/// How a body stores its keys or its tids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// 32-bit offsets from the body's base.
    Compact,
    /// Full keys (8 or 16 bytes) or full 64-bit tids.
    Full,
}

/// The meta record at the start of a body. See the module docs.
#[repr(C)]
pub struct Meta {
    count: u32,
    table_len: u16,
    late_cap: u16,
    key_form: u8,
    tid_form: u8,
    bucket: u16,
    /// Byte offsets of the table, keys, tids, dead bits and late area.
    offsets: [u16; 5],
    _pad: u16,
    key_base: [u64; 2],
    tid_base: u64,
    late_len: AtomicU32,
    dead: AtomicU32,
}

const _: () = assert!(size_of::<Meta>() == 56 && size_of::<Meta>() <= META_BYTES);

/// The shape of a body: forms, entry count and late slots, and where each region starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Key form.
    pub keys: Form,
    /// Tid form.
    pub tids: Form,
    /// Main entries.
    pub count: usize,
    /// Late slots.
    pub late_cap: usize,
    /// Entries per bucket of the N-ary table.
    pub bucket: usize,
    /// Compact tids: the base they are stored as offsets from, at most every tid of the
    /// body and less than 2^32 below each ([`plan`] finds it; unused for full tids).
    pub tid_base: u64,
}

const fn align16(n: usize) -> usize {
    (n + 15) & !15
}

impl Shape {
    /// Bytes per stored key in this shape.
    fn key_bytes<K: SbKey>(&self) -> usize {
        match self.keys {
            Form::Compact => 4,
            Form::Full => K::BYTES,
        }
    }

    fn tid_bytes(&self) -> usize {
        match self.tids {
            Form::Compact => 4,
            Form::Full => 8,
        }
    }

    fn table_len(&self) -> usize {
        self.count.div_ceil(self.bucket)
    }

    /// Region offsets (table, keys, tids, dead bits, late area) and the total bytes.
    fn regions<K: SbKey>(&self) -> ([usize; 5], usize) {
        let kb = self.key_bytes::<K>();
        let table = META_BYTES;
        let keys = table + align16(self.table_len() * kb);
        let tids = keys + align16(self.count * kb);
        let bits = tids + align16(self.count * self.tid_bytes());
        let late = bits + align16(self.count.div_ceil(64) * 8);
        let end = late + self.late_cap * entry_words::<K>() * 8;
        ([table, keys, tids, bits, late], end)
    }

    /// Whether a body of this shape fits in `block_bytes`.
    pub fn fits<K: SbKey>(&self, block_bytes: usize) -> bool {
        self.regions::<K>().1 <= block_bytes
    }

    /// The most main entries a body with these forms and late slots holds in
    /// `block_bytes`, at most `cap`.
    pub fn capacity<K: SbKey>(
        keys: Form,
        tids: Form,
        late_cap: usize,
        bucket: usize,
        block_bytes: usize,
        cap: usize,
    ) -> usize {
        let shape = |count| Shape {
            keys,
            tids,
            count,
            late_cap,
            bucket,
            tid_base: 0,
        };
        // Entries cost at least key + tid bytes: start from that bound and step down.
        let per = shape(0).key_bytes::<K>() + shape(0).tid_bytes();
        let mut n = (block_bytes / per).min(cap);
        while n > 0 && !shape(n).fits::<K>(block_bytes) {
            n -= 1;
        }
        n
    }
}

/// A body, read through a pointer to its block. Cheap to copy; valid while the caller holds
/// the epoch guard under which it loaded the pointer (bodies are retired through the epoch
/// collector).
pub struct Body<'a, K> {
    base: NonNull<u8>,
    _life: PhantomData<(&'a u8, K)>,
}

impl<K> Clone for Body<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Body<'_, K> {}

impl<'a, K: SbKey> Body<'a, K> {
    /// The body at `base`.
    ///
    /// # Safety
    ///
    /// `base` points at a body built by [`build`] and published (its immutable regions are
    /// visible to this thread), and stays allocated for `'a`.
    #[inline]
    pub unsafe fn at(base: NonNull<u8>) -> Self {
        Self {
            base,
            _life: PhantomData,
        }
    }

    #[inline]
    fn meta(&self) -> &'a Meta {
        // SAFETY: every body starts with its meta record (`at`'s contract).
        unsafe { &*self.base.as_ptr().cast::<Meta>() }
    }

    #[inline]
    fn region<T>(&self, which: usize, len: usize) -> &'a [T] {
        let offset = usize::from(self.meta().offsets[which]);
        // SAFETY: `build` laid the region out at this offset with room for `len` elements of
        // `T` (aligned to 16 bytes), inside the block; it lives for 'a.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset).cast::<T>(), len) }
    }

    /// Where this body keeps its main keys and tids, for the search layer's hint.
    pub fn locator(&self) -> Locator {
        let meta = self.meta();
        let bytes = |form: u8, full: usize| if form == 0 { 4 } else { full as u64 };
        Locator(
            u64::from(meta.offsets[1])
                | bytes(meta.key_form, K::BYTES) << 16
                | u64::from(meta.offsets[2]) << 24
                | bytes(meta.tid_form, 8) << 40
                | u64::from(meta.count).min(u64::from(u16::MAX)) << 48,
        )
    }

    /// Main entries (live and dead).
    #[inline]
    pub fn count(&self) -> usize {
        self.meta().count as usize
    }

    /// Dead main entries.
    pub fn dead(&self) -> usize {
        self.meta().dead.load(Ordering::Relaxed) as usize
    }

    /// Entries in the late area.
    #[inline]
    pub fn late_len(&self) -> usize {
        // Clamped: a torn read must not index past the area.
        (self.meta().late_len.load(Ordering::Relaxed) as usize).min(self.late_cap())
    }

    /// Slots of the late area.
    pub fn late_cap(&self) -> usize {
        usize::from(self.meta().late_cap)
    }

    /// Live entries: main entries not dead, and late ones.
    pub fn live(&self) -> usize {
        (self.count() + self.late_len()).saturating_sub(self.dead())
    }

    /// The key and tid forms.
    pub fn forms(&self) -> (Form, Form) {
        let form = |f| if f == 0 { Form::Compact } else { Form::Full };
        (form(self.meta().key_form), form(self.meta().tid_form))
    }

    /// The body's shape.
    pub fn shape(&self) -> Shape {
        let (keys, tids) = self.forms();
        Shape {
            keys,
            tids,
            count: self.count(),
            late_cap: self.late_cap(),
            bucket: usize::from(self.meta().bucket),
            tid_base: self.meta().tid_base,
        }
    }

    fn key_base(&self) -> K {
        K::from_words(self.meta().key_base)
    }

    /// Main key `i`.
    #[inline]
    pub fn key(&self, i: usize) -> K {
        match self.forms().0 {
            Form::Compact => K::add_offset(self.key_base(), self.region::<u32>(1, self.count())[i]),
            Form::Full => self.region::<K>(1, self.count())[i],
        }
    }

    /// Main tid `i`.
    #[inline]
    pub fn tid(&self, i: usize) -> u64 {
        match self.forms().1 {
            Form::Compact => {
                let t = self.region::<AtomicU32>(2, self.count())[i].load(Ordering::Relaxed);
                self.meta().tid_base + u64::from(t)
            }
            Form::Full => self.region::<AtomicU64>(2, self.count())[i].load(Ordering::Relaxed),
        }
    }

    /// The position of main entry `i`.
    #[inline]
    pub fn pos(&self, i: usize, pairs: bool) -> Pos<K> {
        let key = self.key(i);
        if pairs {
            Pos {
                key,
                tid: self.tid(i),
            }
        } else {
            Pos { key, tid: 0 }
        }
    }

    /// Whether main entry `i` is deleted.
    #[inline]
    pub fn is_dead(&self, i: usize) -> bool {
        let word =
            self.region::<AtomicU64>(3, self.count().div_ceil(64))[i / 64].load(Ordering::Relaxed);
        word & (1 << (i % 64)) != 0
    }

    /// The number of main keys below `key` (`strict`) or at most `key`: the N-ary table
    /// gives the bucket, a count within the bucket the rest.
    #[inline]
    pub fn rank(&self, key: K, strict: bool, kernel: Kernel) -> usize {
        let count = self.count();
        let meta = self.meta();
        let bucket = usize::from(meta.bucket);
        let table_len = usize::from(meta.table_len);
        match self.forms().0 {
            Form::Compact => {
                let base = self.key_base();
                let x = match key.offset_from(base) {
                    Some(x) => x,
                    None if key < base => return 0,
                    None => return count,
                };
                let table = self.region::<u32>(0, table_len);
                let keys = self.region::<u32>(1, count);
                let t = kernel.count_u32(table, x, strict);
                if t == 0 {
                    return 0;
                }
                let start = (t - 1) * bucket;
                start + kernel.count_u32(&keys[start..(start + bucket).min(count)], x, strict)
            }
            Form::Full => {
                let table = self.region::<K>(0, table_len);
                let keys = self.region::<K>(1, count);
                let t = K::count(kernel, table, key, strict);
                if t == 0 {
                    return 0;
                }
                let start = (t - 1) * bucket;
                start
                    + K::count(
                        kernel,
                        &keys[start..(start + bucket).min(count)],
                        key,
                        strict,
                    )
            }
        }
    }

    /// Where `pos` is among the main entries: `Ok(i)` if entry `i` has it (live or dead),
    /// `Err(i)` for the index of the first entry above it.
    #[inline]
    pub fn find(&self, pos: Pos<K>, pairs: bool, kernel: Kernel) -> Result<usize, usize> {
        let lo = self.rank(pos.key, true, kernel);
        let count = self.count();
        if lo == count || self.key(lo) != pos.key {
            return Err(lo);
        }
        if !pairs {
            return Ok(lo);
        }
        // A non-unique key's tids ascend: search them.
        let hi = self.rank(pos.key, false, kernel);
        let (mut a, mut b) = (lo, hi);
        while a < b {
            let mid = (a + b) / 2;
            if self.tid(mid) < pos.tid {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        if a < hi && self.tid(a) == pos.tid {
            Ok(a)
        } else {
            Err(a)
        }
    }

    /// The first main entry at or above `pos` (`count` if none).
    #[inline]
    pub fn lower_bound(&self, pos: Pos<K>, pairs: bool, kernel: Kernel) -> usize {
        match self.find(pos, pairs, kernel) {
            Ok(i) | Err(i) => i,
        }
    }

    fn late_words(&self) -> &'a [AtomicU64] {
        self.region::<AtomicU64>(4, self.late_cap() * entry_words::<K>())
    }

    /// Late entry `j` (`j < late_len`): its key and tid.
    #[inline]
    pub fn late(&self, j: usize) -> (K, u64) {
        let w = entry_words::<K>();
        load_entry(&self.late_words()[j * w..(j + 1) * w])
    }

    /// The live tid at `pos`, in the main entries or the late area.
    #[inline]
    pub fn get(&self, pos: Pos<K>, pairs: bool, kernel: Kernel) -> Option<u64> {
        if let Ok(i) = self.find(pos, pairs, kernel) {
            if self.dead() == 0 || !self.is_dead(i) {
                return Some(self.tid(i));
            }
        }
        if self.late_len() == 0 {
            return None;
        }
        let (j, found) = self.late_find(pos, pairs);
        found.then(|| self.late(j).1)
    }

    /// Where `pos` is in the late area: the index of the first entry at or above it, and
    /// whether that entry has it (a binary search: the area is sorted).
    pub fn late_find(&self, pos: Pos<K>, pairs: bool) -> (usize, bool) {
        let len = self.late_len();
        if len == 0 {
            return (0, false);
        }
        // The area's words found once, not once per probe.
        let w = entry_words::<K>();
        let words = &self.late_words()[..len * w];
        let at = |j: usize| load_pos::<K>(&words[j * w..(j + 1) * w], pairs);
        // Delayed keys of a time series mostly arrive above the block's other late ones:
        // the last entry first.
        let last = at(len - 1);
        if last < pos {
            return (len, false);
        }
        // Not above the last: among the entries before it, or the last itself.
        let lo = first_not_below((0, len - 1), pos, pairs, at);
        (lo, at(lo) == pos)
    }

    // ----- writes: only under the owning block's write lock --------------------------------

    /// Sets main tid `i`; `false` (nothing changed) if the tid does not fit a compact form.
    pub fn set_tid(&self, i: usize, tid: u64) -> bool {
        match self.forms().1 {
            Form::Compact => match tid.checked_sub(self.meta().tid_base).map(u32::try_from) {
                Some(Ok(t)) => {
                    self.region::<AtomicU32>(2, self.count())[i].store(t, Ordering::Relaxed);
                    true
                }
                _ => false,
            },
            Form::Full => {
                self.region::<AtomicU64>(2, self.count())[i].store(tid, Ordering::Relaxed);
                true
            }
        }
    }

    /// Marks main entry `i` dead or live again.
    pub fn set_dead(&self, i: usize, dead: bool) {
        let word = &self.region::<AtomicU64>(3, self.count().div_ceil(64))[i / 64];
        let bit = 1 << (i % 64);
        let was = word.load(Ordering::Relaxed);
        if dead == (was & bit != 0) {
            return;
        }
        word.store(was ^ bit, Ordering::Relaxed);
        let meta = self.meta();
        let n = meta.dead.load(Ordering::Relaxed);
        meta.dead
            .store(if dead { n + 1 } else { n - 1 }, Ordering::Relaxed);
    }

    fn set_late(&self, j: usize, key: K, tid: u64) {
        let w = entry_words::<K>();
        store_entry(&self.late_words()[j * w..(j + 1) * w], key, tid);
    }

    /// Inserts `(key, tid)` into the late area at `j` (from [`Body::late_find`]); `false` if
    /// the area is full.
    pub fn late_insert(&self, j: usize, key: K, tid: u64) -> bool {
        let len = self.late_len();
        if len == self.late_cap() {
            return false;
        }
        // Entries `j..len` move up one place, word by word from the top (`len < late_cap`).
        let w = entry_words::<K>();
        let moving = &self.late_words()[j * w..(len + 1) * w];
        for x in (0..moving.len() - w).rev() {
            moving[x + w].store(moving[x].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.set_late(j, key, tid);
        self.meta()
            .late_len
            .store(len as u32 + 1, Ordering::Relaxed);
        true
    }

    /// Sets the tid of late entry `j`.
    pub fn late_set_tid(&self, j: usize, tid: u64) {
        let key = self.late(j).0;
        self.set_late(j, key, tid);
    }

    /// Removes late entry `j`.
    pub fn late_remove(&self, j: usize) {
        let len = self.late_len();
        for i in j + 1..len {
            let (k, t) = self.late(i);
            self.set_late(i - 1, k, t);
        }
        self.meta()
            .late_len
            .store(len as u32 - 1, Ordering::Relaxed);
    }

    /// Copies the late entries (in position order) to `out`. Writers insert and move them
    /// under the block's lock, so a reader's copy may be torn: it is good once the block's
    /// version validates after the copy.
    pub fn copy_late(&self, out: &mut impl Extend<(K, u64)>) {
        let w = entry_words::<K>();
        let words = &self.late_words()[..self.late_len() * w];
        out.extend(words.chunks_exact(w).map(load_entry::<K>));
    }

    /// Visits the live entries at or above `from`, the main ones merged with `late` (late
    /// entries in position order, from [`Body::copy_late`]), while `visit` returns `true`;
    /// it means to take at most `want` of them (what it prefetches). The main keys never
    /// change; their tids and dead bits are read as they are now.
    pub fn for_each_from(
        &self,
        from: Pos<K>,
        (pairs, kernel): (bool, Kernel),
        want: usize,
        late: &[(K, u64)],
        mut visit: impl FnMut(K, u64) -> bool,
    ) {
        let count = self.count();
        let at = |&(k, t): &(K, u64)| Pos::of(k, t, pairs);
        let mut i = self.lower_bound(from, pairs, kernel);
        let mut j = late.partition_point(|e| at(e) < from);
        if self.dead() == 0 {
            // Nothing deleted: the main entries in runs between the late ones (few: a body
            // has at most its late slots), each run walked as the arrays are. A late entry
            // copied torn (the caller validates after) ends a run anywhere; runs never go
            // back.
            let mut want = want;
            for &(k, t) in &late[j..] {
                let stop = self.lower_bound(Pos::of(k, t, pairs), pairs, kernel).max(i);
                if !self.main_run(i..stop, false, want, &mut visit) || !visit(k, t) {
                    return;
                }
                want = want.saturating_sub(stop - i + 1);
                i = stop;
            }
            self.main_run(i..count, false, want, visit);
            return;
        }
        loop {
            let main = (i < count).then(|| self.pos(i, pairs));
            let side = late.get(j);
            let take_main = match (main, side) {
                (None, None) => return,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(m), Some(e)) => m < at(e),
            };
            let go_on = if take_main {
                i += 1;
                let dead = self.is_dead(i - 1);
                dead || visit(main.expect("a main entry").key, self.tid(i - 1))
            } else {
                j += 1;
                let &(k, t) = side.expect("a late entry");
                visit(k, t)
            };
            if !go_on {
                return;
            }
        }
    }

    /// Visits the main entries of `range` (all live), upward or `down`ward, while `visit`
    /// returns `true`: one loop per form, zipping the key and tid arrays. Whether it went
    /// through the whole range.
    #[inline]
    fn main_run(
        &self,
        range: std::ops::Range<usize>,
        down: bool,
        want: usize,
        mut visit: impl FnMut(K, u64) -> bool,
    ) -> bool {
        let count = self.count();
        let (key_base, tid_base) = (self.key_base(), self.meta().tid_base);
        // The entries the walk will take: at most `want` of them from its start.
        let ahead = if down {
            Reach::Down(want).entries(range.end, range.clone())
        } else {
            Reach::Up(want).entries(range.start, range.clone())
        };
        macro_rules! walk {
            ($keys:expr, $tids:expr, $key:expr, $tid:expr) => {{
                prefetch_entries(column($keys), column($tids), ahead);
                let pairs = $keys[range.clone()].iter().zip(&$tids[range]);
                if down {
                    for (k, t) in pairs.rev() {
                        if !visit($key(k), $tid(t)) {
                            return false;
                        }
                    }
                } else {
                    for (k, t) in pairs {
                        if !visit($key(k), $tid(t)) {
                            return false;
                        }
                    }
                }
            }};
        }
        let compact_key = |k: &u32| K::add_offset(key_base, *k);
        let full_key = |k: &K| *k;
        let compact_tid = |t: &AtomicU32| tid_base + u64::from(t.load(Ordering::Relaxed));
        let full_tid = |t: &AtomicU64| t.load(Ordering::Relaxed);
        match self.forms() {
            (Form::Compact, Form::Compact) => walk!(
                self.region::<u32>(1, count),
                self.region::<AtomicU32>(2, count),
                compact_key,
                compact_tid
            ),
            (Form::Compact, Form::Full) => walk!(
                self.region::<u32>(1, count),
                self.region::<AtomicU64>(2, count),
                compact_key,
                full_tid
            ),
            (Form::Full, Form::Compact) => walk!(
                self.region::<K>(1, count),
                self.region::<AtomicU32>(2, count),
                full_key,
                compact_tid
            ),
            (Form::Full, Form::Full) => walk!(
                self.region::<K>(1, count),
                self.region::<AtomicU64>(2, count),
                full_key,
                full_tid
            ),
        }
        true
    }

    /// Visits the live entries at or below `upto` in descending position order, merged with
    /// `late` as in [`Body::for_each_from`], while `visit` returns `true`.
    pub fn for_each_down_from(
        &self,
        upto: Pos<K>,
        (pairs, kernel): (bool, Kernel),
        want: usize,
        late: &[(K, u64)],
        mut visit: impl FnMut(K, u64) -> bool,
    ) {
        let at = |&(k, t): &(K, u64)| Pos::of(k, t, pairs);
        let mut i = match self.find(upto, pairs, kernel) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        let mut j = late.partition_point(|e| at(e) <= upto);
        if self.dead() == 0 {
            // Runs between the late entries, as in [`Body::for_each_from`].
            let mut want = want;
            for &(k, t) in late[..j].iter().rev() {
                let start = match self.find(Pos::of(k, t, pairs), pairs, kernel) {
                    Ok(x) => x + 1,
                    Err(x) => x,
                }
                .min(i);
                if !self.main_run(start..i, true, want, &mut visit) || !visit(k, t) {
                    return;
                }
                want = want.saturating_sub(i - start + 1);
                i = start;
            }
            self.main_run(0..i, true, want, visit);
            return;
        }
        loop {
            let main = (i > 0).then(|| self.pos(i - 1, pairs));
            let side = j.checked_sub(1).map(|j| late[j]);
            let take_main = match (main, side) {
                (None, None) => return,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(m), Some(e)) => m > at(&e),
            };
            let go_on = if take_main {
                i -= 1;
                self.is_dead(i) || visit(main.expect("a main entry").key, self.tid(i))
            } else {
                j -= 1;
                let (k, t) = side.expect("a late entry");
                visit(k, t)
            };
            if !go_on {
                return;
            }
        }
    }

    /// Appends every live entry, main and late merged in position order, to `out`.
    pub fn live_entries(&self, pairs: bool, out: &mut Vec<(K, u64)>) {
        let mut late: SmallVec<[(K, u64); 32]> = SmallVec::new();
        self.copy_late(&mut late);
        let all = (pairs, Kernel::Portable);
        self.for_each_from(Pos::MIN, all, usize::MAX, &late, |k, t| {
            out.push((k, t));
            true
        });
    }
}

/// Where a body keeps its main keys and tids, in one word (key region offset, key bytes,
/// tid region offset, tid bytes and entry count: 16, 8, 16, 8 and 16 bits; every offset of a
/// block of at most 64 KiB fits 16 bits, and so does its count). The search layer keeps it
/// beside a block's body address, so that a search can start loading the lines it will
/// read before the block's header and the body's meta record have arrived ([`prefetch`]).
/// `Locator(0)`: unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Locator(pub u64);

impl Locator {
    fn field(self, shift: u32, bits: u32) -> usize {
        ((self.0 >> shift) & ((1 << bits) - 1)) as usize
    }

    /// Main entries.
    pub fn count(self) -> usize {
        self.field(48, 16)
    }
}

/// The main entries a reader takes from the place its search ends at: that entry and the
/// ones after it (`Up`), or the ones before it (`Down`), this many in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Ascending from the place (a lookup: `Up(1)`).
    Up(usize),
    /// Descending from just below the place.
    Down(usize),
}

impl Reach {
    /// The main entries taken from place `at`, within `bounds`.
    fn entries(self, at: usize, bounds: Range<usize>) -> Range<usize> {
        match self {
            Reach::Up(n) => at.max(bounds.start)..at.saturating_add(n).min(bounds.end),
            Reach::Down(n) => at.saturating_sub(n).max(bounds.start)..at.min(bounds.end),
        }
    }
}

/// A column's address and element size, for [`prefetch_entries`].
fn column<T>(elements: &[T]) -> (usize, usize) {
    (elements.as_ptr() as usize, size_of::<T>())
}

/// The most lines of each column a reader's entries are prefetched for.
const READ_AHEAD_LINES: usize = 16;

/// Starts loading main entries `entries` of a body whose key and tid columns start at
/// addresses `keys` and `tids` (`key_bytes` and `tid_bytes` each): the lines of each column
/// at once, up to [`READ_AHEAD_LINES`] of them, so that they arrive in parallel instead of
/// one stream's miss after another. Address arithmetic wraps: a stale hint's addresses are
/// only prefetched, and must not panic.
#[inline]
fn prefetch_entries(
    (keys, key_bytes): (usize, usize),
    (tids, tid_bytes): (usize, usize),
    entries: Range<usize>,
) {
    for (column, bytes) in [(keys, key_bytes), (tids, tid_bytes)] {
        let from = column.wrapping_add(entries.start.wrapping_mul(bytes)) & !63;
        let to = column.wrapping_add(entries.end.wrapping_mul(bytes));
        let lines = to.wrapping_sub(from).div_ceil(64).min(READ_AHEAD_LINES);
        for line in 0..lines {
            crate::node::prefetch_line(from.wrapping_add(line * 64));
        }
    }
}

/// Starts loading the lines a search of the body at `at` (as `locator` describes it, with
/// buckets of `bucket` keys) will read: its meta record and N-ary table, and, when the
/// search is expected to end at main entry `rank`, that entry's bucket and the keys and tids
/// the reader will take from there (`reach`, up to [`READ_AHEAD_LINES`] lines of each). `at`
/// may be a body freed since the hint was taken: a prefetch never faults and reads nothing
/// for the program, so a stale hint costs the wasted loads and nothing else.
#[inline]
pub fn prefetch(at: usize, locator: Locator, bucket: usize, rank: Option<usize>, reach: Reach) {
    use crate::node::prefetch_line;
    // Address arithmetic wraps: a stale or bogus hint must not panic either.
    let line = |offset: usize| prefetch_line(at.wrapping_add(offset));
    // The meta record, then the table: one key per bucket, up to its first 4 lines.
    line(0);
    let bucket = bucket.max(1);
    let key_bytes = locator.field(16, 8);
    let table = (locator.count().div_ceil(bucket) * key_bytes).min(4 * 64);
    for offset in (0..table).step_by(64) {
        line(META_BYTES + offset);
    }
    let Some(rank) = rank else {
        return;
    };
    let (keys, tids) = (locator.field(0, 16), locator.field(24, 16));
    line(keys.wrapping_add((rank / bucket * bucket).wrapping_mul(key_bytes)));
    // At least the guessed entry itself, even for a descending reader.
    let count = locator.count();
    let mut entries = reach.entries(rank, 0..count);
    if entries.is_empty() {
        entries = rank..rank.saturating_add(1);
    }
    prefetch_entries(
        (at.wrapping_add(keys), key_bytes),
        (at.wrapping_add(tids), locator.field(40, 8)),
        entries,
    );
}

/// The forms a body can have, most compact first: the order of [`plan`]'s capacities.
pub const FORMS: [(Form, Form); 4] = [
    (Form::Compact, Form::Compact),
    (Form::Compact, Form::Full),
    (Form::Full, Form::Compact),
    (Form::Full, Form::Full),
];

/// The most main entries a body of `block_bytes` with `late_cap` late slots holds in each of
/// [`FORMS`], at most `cap`.
pub fn capacities<K: SbKey>(
    late_cap: usize,
    bucket: usize,
    block_bytes: usize,
    cap: usize,
) -> [usize; 4] {
    FORMS.map(|(keys, tids)| Shape::capacity::<K>(keys, tids, late_cap, bucket, block_bytes, cap))
}

/// The shape for the longest prefix of `entries` that fits one body, given the body's
/// `capacities` in each of [`FORMS`]: the forms that hold the most of them (the more compact
/// on a tie).
pub fn plan<K: SbKey>(
    entries: &[(K, u64)],
    capacities: [usize; 4],
    late_cap: usize,
    bucket: usize,
) -> Shape {
    let window = entries
        .len()
        .min(capacities.iter().copied().max().unwrap_or(0));
    let entries = &entries[..window];
    // Compact keys: the prefix within 2^32 of the first key (keys ascend).
    let key_fit = match entries.first() {
        Some(&(first, _)) => entries.partition_point(|e| e.0.offset_from(first).is_some()),
        None => 0,
    };
    // Compact tids: the prefix whose tids span at most 2^32 (usually the whole window:
    // one pass without a branch per entry tells).
    let (lo, hi) = tid_span(entries);
    let tid_fit = if hi.wrapping_sub(lo) <= u64::from(u32::MAX) {
        window
    } else {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        entries
            .iter()
            .position(|&(_, t)| {
                lo = lo.min(t);
                hi = hi.max(t);
                hi - lo > u64::from(u32::MAX)
            })
            .unwrap_or(window)
    };
    let mut best: Option<Shape> = None;
    for (&(keys, tids), &capacity) in FORMS.iter().zip(&capacities) {
        let mut count = capacity.min(window);
        if keys == Form::Compact {
            count = count.min(key_fit);
        }
        if tids == Form::Compact {
            count = count.min(tid_fit);
        }
        if best.is_none_or(|b| count > b.count) {
            best = Some(Shape {
                keys,
                tids,
                count,
                late_cap,
                bucket,
                tid_base: 0,
            });
        }
    }
    let mut best = best.expect("four forms");
    if best.tids == Form::Compact {
        // The smallest tid of the prefix taken: the window's when it is the whole window
        // (the usual case: its span was measured above), else measured again.
        best.tid_base = if best.count == window {
            lo
        } else {
            tid_span(&entries[..best.count]).0
        };
    }
    best
}

/// The smallest and the largest tid of `entries` (`(u64::MAX, 0)` for none).
fn tid_span<K: SbKey>(entries: &[(K, u64)]) -> (u64, u64) {
    entries
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &(_, t)| (lo.min(t), hi.max(t)))
}

/// Builds a body of `shape` in a fresh block from `entries` (exactly `shape.count` of them,
/// in position order and fitting the shape's forms), with an empty late area.
pub fn build<K: SbKey>(blocks: &BlockAlloc, shape: Shape, entries: &[(K, u64)]) -> NonNull<u8> {
    assert_eq!(entries.len(), shape.count);
    let (offsets, end) = shape.regions::<K>();
    assert!(end <= blocks.block_bytes(), "the shape fits the block");
    let block = blocks.alloc();
    let p = block.as_ptr();
    let key_base = entries.first().map_or(K::MIN, |e| e.0);
    let tid_base = shape.tid_base;
    // The forms were chosen by `plan`: checked here once for the whole body (keys ascend,
    // so the last key is the farthest from the base), not per entry.
    if shape.keys == Form::Compact {
        let last = entries.last().map_or(key_base, |e| e.0);
        assert!(
            last.offset_from(key_base).is_some(),
            "keys fit the compact form"
        );
    }
    if shape.tids == Form::Compact {
        debug_assert!(
            entries.iter().all(|&(_, t)| t
                .checked_sub(tid_base)
                .is_some_and(|d| d <= u64::from(u32::MAX))),
            "tids fit the compact form"
        );
    }
    let meta = Meta {
        count: shape.count as u32,
        table_len: shape.table_len() as u16,
        late_cap: shape.late_cap as u16,
        key_form: u8::from(shape.keys == Form::Full),
        tid_form: u8::from(shape.tids == Form::Full),
        bucket: shape.bucket as u16,
        offsets: offsets.map(|o| o as u16),
        _pad: 0,
        key_base: key_base.to_words(),
        tid_base,
        late_len: AtomicU32::new(0),
        dead: AtomicU32::new(0),
    };
    // SAFETY: the block is fresh (ours alone), aligned to 64 bytes and `end` bytes long at
    // least; every region is 16-byte aligned and sized by `regions` for this shape, so each
    // write below stays inside the block at an aligned address.
    unsafe {
        p.cast::<Meta>().write(meta);
        let count = shape.count;
        let keys = p.add(offsets[1]);
        let tids = p.add(offsets[2]);
        // One pass writes both arrays (the entries are read once), one loop per pair of
        // forms so that no entry tests a form.
        macro_rules! fill {
            ($key_ty:ty, $key:expr, $tid_ty:ty, $tid:expr) => {{
                let (keys, tids) = (keys.cast::<$key_ty>(), tids.cast::<$tid_ty>());
                for (i, &(k, t)) in entries.iter().enumerate() {
                    keys.add(i).write($key(k));
                    tids.add(i).write($tid(t));
                }
            }};
        }
        // Within 2^32 of the bases (checked above): the low words of the differences.
        let compact_key = |k: K| k.low_offset(key_base);
        let full_key = |k: K| k;
        let compact_tid = |t: u64| AtomicU32::new(t.wrapping_sub(tid_base) as u32);
        let full_tid = AtomicU64::new;
        match (shape.keys, shape.tids) {
            (Form::Compact, Form::Compact) => fill!(u32, compact_key, AtomicU32, compact_tid),
            (Form::Compact, Form::Full) => fill!(u32, compact_key, AtomicU64, full_tid),
            (Form::Full, Form::Compact) => fill!(K, full_key, AtomicU32, compact_tid),
            (Form::Full, Form::Full) => fill!(K, full_key, AtomicU64, full_tid),
        }
        // The N-ary table: the first key of each bucket, copied from the keys just written.
        let table = p.add(offsets[0]);
        for b in 0..shape.table_len() {
            match shape.keys {
                Form::Compact => table
                    .cast::<u32>()
                    .add(b)
                    .write(keys.cast::<u32>().add(b * shape.bucket).read()),
                Form::Full => table
                    .cast::<K>()
                    .add(b)
                    .write(keys.cast::<K>().add(b * shape.bucket).read()),
            }
        }
        let bits = p.add(offsets[3]).cast::<AtomicU64>();
        for w in 0..count.div_ceil(64) {
            bits.add(w).write(AtomicU64::new(0));
        }
        let late = p.add(offsets[4]).cast::<AtomicU64>();
        for w in 0..shape.late_cap * entry_words::<K>() {
            late.add(w).write(AtomicU64::new(0));
        }
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: usize = 4096;

    fn body_of<K: SbKey>(blocks: &BlockAlloc, entries: &[(K, u64)], late: usize) -> NonNull<u8> {
        let shape = plan(
            entries,
            capacities::<K>(late, 16, BLOCK, usize::MAX),
            late,
            16,
        );
        assert_eq!(
            shape.count,
            entries.len(),
            "the test's entries fit one body"
        );
        build(blocks, shape, entries)
    }

    #[test]
    fn compact_forms_hold_twice_the_entries_of_full_ones() {
        let full = Shape::capacity::<u64>(Form::Full, Form::Full, 0, 16, BLOCK, usize::MAX);
        let compact =
            Shape::capacity::<u64>(Form::Compact, Form::Compact, 0, 16, BLOCK, usize::MAX);
        assert!(
            full >= 240 && compact >= 480,
            "full {full}, compact {compact}"
        );
        let shape = Shape {
            keys: Form::Compact,
            tids: Form::Compact,
            count: compact,
            late_cap: 0,
            bucket: 16,
            tid_base: 0,
        };
        assert!(shape.fits::<u64>(BLOCK));
        assert!(!Shape {
            count: compact + 1,
            ..shape
        }
        .fits::<u64>(BLOCK));
    }

    /// Walks from every start, both ways, stopping after every count, with late entries
    /// between, before and after the main ones, with and without deleted main entries:
    /// always the merged entries in order.
    #[test]
    fn walks_merge_late_entries_in_order_from_every_start() {
        let blocks = BlockAlloc::new(BLOCK);
        let kernel = Kernel::detect();
        let entries: Vec<(u64, u64)> = (0..40).map(|i| (10 + i * 10, i)).collect();
        for dead in [false, true] {
            let ptr = body_of(&blocks, &entries, 8);
            // SAFETY: just built, published to this thread, freed below.
            let body = unsafe { Body::<u64>::at(ptr) };
            let late = [5u64, 11, 12, 13, 205, 206, 395, 999];
            for key in late {
                let (j, found) = body.late_find(Pos::of(key, 0, false), false);
                assert!(!found);
                assert!(body.late_insert(j, key, key + 1000));
            }
            let mut all: Vec<(u64, u64)> = entries.clone();
            if dead {
                for i in [0, 7, 8, 39] {
                    body.set_dead(i, true);
                    all.retain(|e| e.0 != entries[i].0);
                }
            }
            all.extend(late.iter().map(|&k| (k, k + 1000)));
            all.sort_unstable();
            for from in 0..1010u64 {
                let up: Vec<(u64, u64)> = all.iter().copied().filter(|e| e.0 >= from).collect();
                let down: Vec<(u64, u64)> =
                    all.iter().rev().copied().filter(|e| e.0 <= from).collect();
                for limit in [1, 2, 3, 7, usize::MAX] {
                    let mut got = Vec::new();
                    let at = Pos::of(from, 0, false);
                    let mut copied = Vec::new();
                    body.copy_late(&mut copied);
                    body.for_each_from(at, (false, kernel), limit, &copied, |k, t| {
                        got.push((k, t));
                        got.len() < limit
                    });
                    assert_eq!(
                        got[..],
                        up[..limit.min(up.len())],
                        "up from {from}, {limit}"
                    );
                    got.clear();
                    body.for_each_down_from(at, (false, kernel), limit, &copied, |k, t| {
                        got.push((k, t));
                        got.len() < limit
                    });
                    let want = &down[..limit.min(down.len())];
                    assert_eq!(got[..], want[..], "down from {from}, {limit}");
                }
            }
            // SAFETY: nothing refers to the body any more.
            unsafe { blocks.free(ptr) };
        }
    }

    #[test]
    fn a_locator_points_at_the_keys_and_tids_of_every_form() {
        let blocks = BlockAlloc::new(BLOCK);
        // Compact keys and tids, then full tids (a wide spread), then full keys.
        let sets: [Vec<(u64, u64)>; 3] = [
            (0..200).map(|i| (1000 + i * 3, 50 + i)).collect(),
            (0..200).map(|i| (1000 + i * 3, i << 40)).collect(),
            (0..200).map(|i| (i << 40, 50 + i)).collect(),
        ];
        let mut forms = Vec::new();
        for entries in &sets {
            let ptr = body_of(&blocks, entries, 0);
            // SAFETY: just built, published to this thread, freed below.
            let body = unsafe { Body::<u64>::at(ptr) };
            let locator = body.locator();
            assert_eq!(locator.count(), entries.len());
            let base = ptr.as_ptr() as usize;
            let (keys, key_bytes) = (base + locator.field(0, 16), locator.field(16, 8));
            let (tids, tid_bytes) = (base + locator.field(24, 16), locator.field(40, 8));
            forms.push(body.forms());
            for (i, &(key, tid)) in entries.iter().enumerate() {
                // SAFETY: entry `i` of the key and tid regions the locator points at.
                let (stored_key, stored_tid) = unsafe {
                    let k = match key_bytes {
                        4 => u64::add_offset(body.key_base(), *(keys as *const u32).add(i)),
                        _ => *(keys as *const u64).add(i),
                    };
                    let t = match tid_bytes {
                        4 => body.meta().tid_base + u64::from(*(tids as *const u32).add(i)),
                        _ => *(tids as *const u64).add(i),
                    };
                    (k, t)
                };
                assert_eq!((stored_key, stored_tid), (key, tid), "entry {i}");
                prefetch(base, locator, 16, Some(i), Reach::Up(100));
            }
            // A prefetch from a stale or bogus hint reads nothing: it may not fault.
            prefetch(
                base,
                Locator(u64::MAX),
                16,
                Some(usize::MAX / 2),
                Reach::Up(usize::MAX),
            );
            prefetch(
                base,
                Locator(u64::MAX),
                16,
                Some(usize::MAX),
                Reach::Down(usize::MAX),
            );
            prefetch(usize::MAX - 4096, locator, 16, Some(7), Reach::Down(3));
            // SAFETY: nothing refers to the body any more.
            unsafe { blocks.free(ptr) };
        }
        assert_eq!(
            forms,
            [
                (Form::Compact, Form::Compact),
                (Form::Compact, Form::Full),
                (Form::Full, Form::Compact)
            ]
        );
    }

    #[test]
    fn the_plan_picks_forms_that_fit() {
        let near: Vec<(u64, u64)> = (0..1000).map(|i| ((1 << 40) | (i * 3), 7 + i)).collect();
        let caps = capacities::<u64>(0, 16, BLOCK, usize::MAX);
        let plan_near = plan(&near, caps, 0, 16);
        assert_eq!(
            (plan_near.keys, plan_near.tids),
            (Form::Compact, Form::Compact)
        );
        let far: Vec<(u64, u64)> = (0..1000).map(|i| (i << 34, u64::MAX - i)).collect();
        let plan_far = plan(&far, caps, 0, 16);
        assert_eq!(plan_far.keys, Form::Full);
        assert_eq!(plan_far.tids, Form::Compact);
        let capped = plan(&near, capacities::<u64>(0, 16, BLOCK, 10), 0, 16);
        assert_eq!(capped.count, 10);
    }

    /// Every key found where it is, every probe between keys ranked right, in every form,
    /// with every kernel.
    #[test]
    fn searches_find_every_entry_in_every_form() {
        let blocks = BlockAlloc::new(BLOCK);
        for kernel in Kernel::available() {
            for (spread, tid_spread) in [(3u64, 1u64), (1 << 33, 1 << 33)] {
                let entries: Vec<(u64, u64)> = (0..200)
                    .map(|i| (100 + i * spread, i * tid_spread))
                    .collect();
                let ptr = body_of(&blocks, &entries, 4);
                // SAFETY: just built, published to this thread, freed below.
                let body = unsafe { Body::<u64>::at(ptr) };
                for (i, &(k, t)) in entries.iter().enumerate() {
                    assert_eq!(body.find(Pos::of(k, 0, false), false, kernel), Ok(i));
                    assert_eq!(body.get(Pos::of(k, 0, false), false, kernel), Some(t));
                    assert_eq!(body.rank(k + 1, true, kernel), i + 1);
                    assert_eq!(body.rank(k, true, kernel), i);
                }
                assert_eq!(body.find(Pos::of(0, 0, false), false, kernel), Err(0));
                assert_eq!(
                    body.find(Pos::of(u64::MAX, 0, false), false, kernel),
                    Err(200)
                );
                // SAFETY: nothing refers to the body any more.
                unsafe { blocks.free(ptr) };
            }
        }
    }

    #[test]
    fn pairs_search_by_key_then_tid() {
        let blocks = BlockAlloc::new(BLOCK);
        let entries: Vec<(u128, u64)> = (0..60)
            .map(|i| (u128::from(i / 4) << 64, i % 4 * 10))
            .collect();
        let ptr = body_of(&blocks, &entries, 0);
        // SAFETY: as above.
        let body = unsafe { Body::<u128>::at(ptr) };
        let kernel = Kernel::detect();
        for (i, &(k, t)) in entries.iter().enumerate() {
            assert_eq!(body.find(Pos::of(k, t, true), true, kernel), Ok(i));
        }
        assert_eq!(
            body.find(Pos::of(1u128 << 64, 5, true), true, kernel),
            Err(5)
        );
        assert_eq!(
            body.find(Pos::of(1u128 << 64, 99, true), true, kernel),
            Err(8)
        );
        // SAFETY: as above.
        unsafe { blocks.free(ptr) };
    }

    #[test]
    fn late_entries_dead_entries_and_tids_change_in_place() {
        let blocks = BlockAlloc::new(BLOCK);
        let entries: Vec<(u64, u64)> = (0..10).map(|i| (i * 10, i)).collect();
        let ptr = body_of(&blocks, &entries, 3);
        // SAFETY: as above.
        let body = unsafe { Body::<u64>::at(ptr) };
        let kernel = Kernel::detect();
        for key in [25u64, 5, 15] {
            let (j, found) = body.late_find(Pos::of(key, 0, false), false);
            assert!(!found);
            assert!(body.late_insert(j, key, key + 1000));
        }
        assert!(!body.late_insert(0, 1, 1), "the late area is full");
        body.set_dead(3, true);
        assert!(body.set_tid(4, 77));
        assert!(
            !body.set_tid(4, u64::MAX),
            "a far tid does not fit compact tids"
        );
        let (j, found) = body.late_find(Pos::of(15, 0, false), false);
        assert!(found);
        body.late_remove(j);
        assert_eq!(body.get(Pos::of(30, 0, false), false, kernel), None);
        assert_eq!(body.get(Pos::of(40, 0, false), false, kernel), Some(77));
        assert_eq!(body.get(Pos::of(25, 0, false), false, kernel), Some(1025));
        assert_eq!(body.live(), 10 + 2 - 1);
        let mut live = Vec::new();
        body.live_entries(false, &mut live);
        let keys: Vec<u64> = live.iter().map(|e| e.0).collect();
        assert_eq!(keys, [0, 5, 10, 20, 25, 40, 50, 60, 70, 80, 90]);
        // SAFETY: as above.
        unsafe { blocks.free(ptr) };
    }
}
