//! The optimistic version lock of optimistic lock coupling (Leis et al., "The ART of
//! practical synchronization"), written so that optimistic readers are sound under Rust's
//! memory model.
//!
//! # Protocol
//!
//! The lock is one 64-bit word: bit 0 is the *obsolete* bit, bit 1 the *locked* bit and the
//! remaining bits a version counter. Every unlock adds 2 to the word with the locked bit set,
//! which clears the bit and bumps the version, so a reader that saw version `v` and later
//! sees the same word knows nobody wrote in between.
//!
//! Readers never write shared memory. They follow the seqlock pattern:
//!
//! 1. [`VersionLock::read_begin`]: `v = load(Acquire)`, waiting while the node is locked;
//! 2. read the node's contents **through atomics** (relaxed loads);
//! 3. [`Optimistic::validate`]: `fence(Acquire)`, then `load(Relaxed) == v`.
//!
//! Writers take the lock with a compare-exchange from a version they read
//! ([`Optimistic::upgrade`]) followed by a release fence, write the contents with relaxed
//! atomic stores, and release the lock with a release store of the bumped word (dropping the
//! [`WriteGuard`]): no one else changes the word while it is locked (the compare-exchange
//! only takes an unlocked word), so the holder knows its value, and a plain store costs
//! less than a read-modify-write (which also waits for every earlier store to drain). If a
//! reader's relaxed load observed any store of a writer, the writer's release fence
//! synchronises with the reader's acquire fence, so the writer's lock
//! acquisition happens before the reader's re-check and the re-check fails. A reader whose
//! re-check succeeds therefore read only values written before `v` was published.
//!
//! A writer never waits for a lock while it holds one: [`Optimistic::upgrade`] fails at once
//! with [`Restart`] if the version moved, and the caller releases everything and restarts.
//! This makes deadlock impossible whatever order locks are taken in.

use super::atomic::{fence, AtomicU64, Ordering, SpinWait};

const OBSOLETE: u64 = 0b01;
const LOCKED: u64 = 0b10;

/// The signal that an optimistic operation saw a concurrent change and must restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart;

/// An optimistic version lock: one word holding a version, a locked bit and an obsolete bit.
///
/// Invariant: the word is locked only while exactly one [`WriteGuard`] for it exists; once
/// the obsolete bit is set it is never cleared, and the node it guards is unreachable from
/// the tree and will be reclaimed by the epoch collector.
#[derive(Debug)]
#[repr(transparent)]
pub struct VersionLock {
    word: AtomicU64,
}

impl Default for VersionLock {
    fn default() -> Self {
        Self::new()
    }
}

impl VersionLock {
    /// A fresh, unlocked, live lock at version 0.
    pub fn new() -> Self {
        Self {
            word: AtomicU64::new(0),
        }
    }

    /// Begins an optimistic read: waits while a writer holds the lock, then returns the
    /// version to validate against, or [`Restart`] if the node is obsolete.
    #[inline]
    pub fn read_begin(&self) -> Result<Optimistic<'_>, Restart> {
        let mut word = self.word.load(Ordering::Acquire);
        if word & LOCKED != 0 {
            let wait = SpinWait::new();
            while word & LOCKED != 0 {
                wait.wait();
                word = self.word.load(Ordering::Acquire);
            }
        }
        if word & OBSOLETE != 0 {
            return Err(Restart);
        }
        Ok(Optimistic {
            lock: self,
            version: word,
        })
    }

    /// Takes the lock exclusively, waiting while another writer holds it.
    ///
    /// Only call this while holding no other lock (see the module docs); it fails with
    /// [`Restart`] if the node is or becomes obsolete.
    pub fn lock(&self) -> Result<WriteGuard<'_>, Restart> {
        let wait = SpinWait::new();
        loop {
            let read = self.read_begin()?;
            if let Ok(guard) = read.upgrade() {
                return Ok(guard);
            }
            wait.wait();
        }
    }

    /// [`VersionLock::lock`] for a lock that is never made obsolete (it guards something that
    /// is never unlinked while reachable): always succeeds.
    pub fn lock_live(&self) -> WriteGuard<'_> {
        loop {
            if let Ok(guard) = self.lock() {
                return guard;
            }
        }
    }

    /// Runs `read` under an optimistic version of a lock that is never made obsolete, again
    /// until the version validates, and returns the validated result. `read` must tolerate
    /// torn state (clamp what it indexes with) and must not trust it before this returns.
    pub fn read_validated<R>(&self, mut read: impl FnMut() -> R) -> R {
        loop {
            let Ok(version) = self.read_begin() else {
                continue;
            };
            let result = read();
            if version.validate().is_ok() {
                return result;
            }
        }
    }

    /// Whether the obsolete bit is set (the node was unlinked).
    pub fn is_obsolete(&self) -> bool {
        self.word.load(Ordering::Acquire) & OBSOLETE != 0
    }

    /// Whether a writer holds the lock right now.
    pub fn is_locked(&self) -> bool {
        self.word.load(Ordering::Acquire) & LOCKED != 0
    }

    /// The word as a plain value, for a node that is never locked (one never written after
    /// it is published, as the Bw-tree's base pages): its owner keeps a stamp there instead
    /// of a version. Meaningless for a node that is locked.
    #[inline]
    pub fn stamp(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }

    /// Sets the word to `stamp` (see [`Self::stamp`]), before the node is published; the
    /// node must never be locked afterwards.
    pub fn set_stamp(&self, stamp: u64) {
        self.word.store(stamp, Ordering::Relaxed);
    }
}

/// An optimistic read in progress: the version seen by [`VersionLock::read_begin`].
///
/// Reads made under it may be torn; they are meaningful only once [`Optimistic::validate`]
/// succeeds, and nothing read under it may be dereferenced or trusted before that.
#[derive(Debug, Clone, Copy)]
pub struct Optimistic<'a> {
    lock: &'a VersionLock,
    version: u64,
}

impl<'a> Optimistic<'a> {
    /// Succeeds if no writer has locked the node since this read began.
    #[inline]
    pub fn validate(&self) -> Result<(), Restart> {
        // Seqlock read side: order the relaxed content loads before the re-check.
        fence(Ordering::Acquire);
        if self.lock.word.load(Ordering::Relaxed) == self.version {
            Ok(())
        } else {
            Err(Restart)
        }
    }

    /// Converts the optimistic read into an exclusive lock if the version is unchanged;
    /// never waits.
    #[inline]
    pub fn upgrade(self) -> Result<WriteGuard<'a>, Restart> {
        match self.lock.word.compare_exchange(
            self.version,
            self.version | LOCKED,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                // Seqlock write side: the locked word must be visible before any content
                // store made under the lock.
                fence(Ordering::Release);
                Ok(WriteGuard {
                    lock: self.lock,
                    locked: self.version | LOCKED,
                    released: false,
                })
            }
            Err(_) => Err(Restart),
        }
    }

    /// The version this read saw.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// Exclusive access to a node; dropping it unlocks and bumps the version.
#[derive(Debug)]
pub struct WriteGuard<'a> {
    lock: &'a VersionLock,
    /// The word while locked (only this guard changes it).
    locked: u64,
    released: bool,
}

impl WriteGuard<'_> {
    /// Unlocks and marks the node obsolete: every reader that began before, or begins
    /// after, will restart. Used when a node is unlinked from the tree.
    pub fn unlock_obsolete(mut self) {
        self.released = true;
        // (v | LOCKED) + LOCKED + OBSOLETE: clears the locked bit, bumps the version and
        // sets the obsolete bit, in one release store.
        let word = self.locked.wrapping_add(LOCKED | OBSOLETE);
        self.lock.word.store(word, Ordering::Release);
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        if !self.released {
            // (v | LOCKED) + LOCKED == v + 4: clears the locked bit and bumps the version.
            let word = self.locked.wrapping_add(LOCKED);
            self.lock.word.store(word, Ordering::Release);
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn unlock_bumps_version_and_fails_old_readers() {
        let lock = VersionLock::new();
        let read = lock.read_begin().unwrap();
        let stale = read;
        let guard = read.upgrade().unwrap();
        assert!(lock.is_locked());
        drop(guard);
        assert!(!lock.is_locked());
        assert_eq!(stale.validate(), Err(Restart));
        let fresh = lock.read_begin().unwrap();
        assert_eq!(fresh.validate(), Ok(()));
        assert_eq!(fresh.version(), stale.version() + 4);
    }

    #[test]
    fn upgrade_fails_after_concurrent_write() {
        let lock = VersionLock::new();
        let a = lock.read_begin().unwrap();
        let b = lock.read_begin().unwrap();
        drop(a.upgrade().unwrap());
        assert_eq!(b.upgrade().err(), Some(Restart));
    }

    #[test]
    fn obsolete_nodes_refuse_readers_and_writers() {
        let lock = VersionLock::new();
        lock.lock().unwrap().unlock_obsolete();
        assert!(lock.is_obsolete());
        assert!(!lock.is_locked());
        assert_eq!(lock.read_begin().err(), Some(Restart));
        assert_eq!(lock.lock().err(), Some(Restart));
    }
}
